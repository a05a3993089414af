"""``numbagrad/ops/misc_ops.py`` and ``gumbel_softmax``: what the op table (``tests/opdb_misc.py``)
cannot express, against PyTorch: every ``scatter_reduce`` mode with duplicate indices and ties,
integer inputs, index_copy/index_fill on negative dims, isin, bincount, histc edges, weighted
cov/corrcoef, unique_consecutive's options, gumbel_softmax's sampling, and the errors."""
import numpy as np
import pytest

import numbagrad as ng
import numbagrad.nn.functional as F

torch = pytest.importorskip("torch")


def _np(t):
    return t.detach().numpy() if hasattr(t, "detach") else np.asarray(t)


def _same(a, b, exact=False):
    a, b = _np(a), _np(b)
    assert a.shape == b.shape, (a.shape, b.shape)
    assert str(a.dtype) == str(b.dtype), (a.dtype, b.dtype)
    if exact:
        np.testing.assert_array_equal(a, b)
    else:
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-9, equal_nan=True)


def _run_grad(f, arrays, lib, g):
    ts = [lib.tensor(a, requires_grad=a.dtype.kind == "f") for a in arrays]
    out = f(lib, *ts)
    out.backward(lib.tensor(g))
    return out, [t.grad for t in ts if t.requires_grad]


def _check(f, *arrays, seed=0):
    """Forward and gradients of ``f(lib, *tensors)`` equal torch's."""
    ref = f(torch, *[torch.tensor(a) for a in arrays])
    g = np.random.default_rng(seed).standard_normal(tuple(ref.shape))
    out_n, grads_n = _run_grad(f, arrays, ng, g)
    out_t, grads_t = _run_grad(f, arrays, torch, g)
    _same(out_n, out_t)
    assert len(grads_n) == len(grads_t)
    for a, b in zip(grads_n, grads_t):
        _same(a, b)


# ---- scatter_reduce -----------------------------------------------------------------------------
REDUCES = ("sum", "prod", "mean", "amax", "amin")


@pytest.mark.parametrize("reduce", REDUCES)
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce_duplicates_and_ties_match_torch(reduce, include_self):
    rng = np.random.default_rng(1)
    x = np.round(rng.standard_normal((4, 3)) * 2) / 2 + (4 if reduce == "prod" else 0)  # ties; prod: no zeros
    src = np.round(rng.standard_normal((3, 3)) * 2) / 2 + (4 if reduce == "prod" else 0)
    src[0, 0] = src[1, 0] = x[2, 0] = 7.0  # a three-way tie of src, src and self at one target
    idx = np.array([[2, 1, 0], [2, 1, 0], [0, 1, 3]])
    _check(lambda t, a, b: t.scatter_reduce(a, 0, t.tensor(idx), b, reduce, include_self=include_self), x, src)
    _check(lambda t, a, b: t.scatter_reduce(a, -1, t.tensor(idx.T[:, :2].copy()), b, reduce,
                                             include_self=include_self), x[:3], src[:, :2].copy())


@pytest.mark.parametrize("reduce", REDUCES)
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce_integer_and_inplace(reduce, include_self):
    x = np.arange(12, dtype=np.int64).reshape(4, 3) - 5
    src = np.array([[3, -7, 2], [4, 9, -1]], dtype=np.int64)
    idx = np.array([[1, 1, 3], [1, 0, 3]])
    got = ng.tensor(x).scatter_reduce(0, ng.tensor(idx), ng.tensor(src), reduce, include_self=include_self)
    want = torch.tensor(x).scatter_reduce(0, torch.tensor(idx), torch.tensor(src), reduce, include_self=include_self)
    _same(got, want, exact=True)
    y = ng.tensor(x)
    assert y.scatter_reduce_(0, ng.tensor(idx), ng.tensor(src), reduce, include_self=include_self) is y
    _same(y, want, exact=True)


def test_scatter_reduce_inplace_records_the_graph():
    x = ng.tensor(np.ones((3, 2)), requires_grad=True)
    y = x * 2
    y.scatter_reduce_(0, ng.tensor([[0, 0]]), ng.tensor([[5.0, -1.0]], dtype=ng.float64), "amax")
    y.sum().backward()
    xt = torch.ones(3, 2, dtype=torch.float64, requires_grad=True)
    yt = xt * 2
    yt.scatter_reduce_(0, torch.tensor([[0, 0]]), torch.tensor([[5.0, -1.0]], dtype=torch.float64), "amax")
    yt.sum().backward()
    _same(y, yt)
    _same(x.grad, xt.grad)


# ---- index_copy / index_fill ----------------------------------------------------------------------
@pytest.mark.parametrize("dim", [0, 1, -1, -2])
def test_index_copy_and_fill_on_every_dim(dim):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((3, 4))
    n = x.shape[dim]
    idx = [n - 1, 0]
    shape = list(x.shape)
    shape[dim] = 2
    s = rng.standard_normal(shape)
    _check(lambda t, a, b: t.index_copy(a, dim, t.tensor(idx), b), x, s)
    _check(lambda t, a: a.index_fill(dim, t.tensor([-1, 0, -1]), -2.5), x)
    _check(lambda t, a, v: t.index_fill(a, dim, t.tensor([1, 1]), v), x, np.array(0.5))
    y, yt = ng.tensor(x), torch.tensor(x)
    assert y.index_copy_(dim, ng.tensor(idx), ng.tensor(s)) is y
    _same(y, yt.index_copy_(dim, torch.tensor(idx), torch.tensor(s)))
    assert y.index_fill_(dim, ng.tensor([0]), 3) is y
    _same(y, yt.index_fill_(dim, torch.tensor([0]), 3))


def test_index_fill_integer_and_0d():
    x = np.arange(6).reshape(2, 3)
    _same(ng.tensor(x).index_fill(1, ng.tensor([2]), 7), torch.tensor(x).index_fill(1, torch.tensor([2]), 7), True)
    _same(ng.tensor(2.0).index_fill(0, ng.tensor([0]), 7), torch.tensor(2.0).index_fill(0, torch.tensor([0]), 7))
    _same(ng.tensor(2.0).index_copy(0, ng.tensor([0]), ng.tensor(5.0)),
          torch.tensor(2.0).index_copy(0, torch.tensor([0]), torch.tensor(5.0)))


# ---- isin, predicates, fmax -------------------------------------------------------------------
@pytest.mark.parametrize("invert", [False, True])
def test_isin(invert):
    e = np.array([[1, 4, 2], [9, 4, -3]])
    for test in (np.array([4, -3, 10]), np.array([], np.int64)):
        _same(ng.isin(ng.tensor(e), ng.tensor(test), invert=invert),
              torch.isin(torch.tensor(e), torch.tensor(test), invert=invert), True)
    _same(ng.isin(ng.tensor(e), 4, invert=invert), torch.isin(torch.tensor(e), 4, invert=invert), True)
    _same(ng.isin(4, ng.tensor(e), invert=invert), torch.isin(4, torch.tensor(e), invert=invert), True)
    f = np.array([1.0, np.nan, 2.5])
    _same(ng.isin(ng.tensor(f), ng.tensor(f), assume_unique=True),
          torch.isin(torch.tensor(f), torch.tensor(f), assume_unique=True), True)


def test_fmax_fmin_ties_and_nans_follow_torch():
    a = np.array([1.0, np.nan, 2.0, np.nan, -1.0, 3.0])
    b = np.array([1.0, 5.0, np.nan, np.nan, -1.0, -3.0])
    _check(lambda t, x, y: t.fmax(x, y), a, b)
    _check(lambda t, x, y: t.fmin(x, y), a, b)
    _check(lambda t, x, y: x.fmax(y), a.reshape(2, 3), b[:3])
    _same(ng.fmax(ng.tensor([1, 5]), ng.tensor([3, 2])), torch.fmax(torch.tensor([1, 5]), torch.tensor([3, 2])), True)


def test_inf_predicates_on_integers():
    for fn in ("isposinf", "isneginf", "isreal"):
        _same(getattr(ng, fn)(ng.tensor([1, 2])), getattr(torch, fn)(torch.tensor([1, 2])), True)


# ---- counting -----------------------------------------------------------------------------------
def test_bincount():
    x = np.array([0, 3, 3, 1, 7])
    for w in (None, np.array([0.5, 1, 2, -1, 3], np.float32), np.array([0.5, 1, 2, -1, 3]), np.arange(5)):
        for m in (0, 3, 12):
            got = ng.bincount(ng.tensor(x), None if w is None else ng.tensor(w), m)
            want = torch.bincount(torch.tensor(x), None if w is None else torch.tensor(w), m)
            _same(got, want)
    _same(ng.tensor(np.zeros(0, np.int64)).bincount(minlength=2),
          torch.zeros(0, dtype=torch.int64).bincount(minlength=2))


def test_histc_edges():
    x = np.array([-1.0, -0.5, 0.0, 0.25, 0.5, 1.0, 2.0], np.float32)
    for bins, lo, hi in ((4, -0.5, 1.0), (3, 0, 0), (5, 0.0, 0.5), (1, -2, 2)):
        _same(ng.histc(ng.tensor(x), bins, lo, hi), torch.histc(torch.tensor(x), bins, lo, hi))
    _same(ng.tensor(np.full(3, 2.0)).histc(4), torch.full((3,), 2.0, dtype=torch.float64).histc(4))  # min == max
    _same(ng.histc(ng.zeros(0), 3), torch.histc(torch.zeros(0), 3))


# ---- cov / corrcoef ------------------------------------------------------------------------------
def test_cov_and_corrcoef_with_weights():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((3, 6))
    fw = np.array([1, 0, 2, 3, 1, 1])
    aw = rng.random(6) + 0.1
    for corr in (0, 1, 2):
        _check(lambda t, a: t.cov(a, correction=corr, fweights=t.tensor(fw)), x)
        _check(lambda t, a, w: t.cov(a, correction=corr, aweights=w), x, aw)
        _check(lambda t, a, w: a.cov(correction=corr, fweights=t.tensor(fw), aweights=w), x, aw)
    _check(lambda t, a: t.cov(a), x[0])
    _check(lambda t, a: t.cov(a), x[:1])
    _check(lambda t, a: t.corrcoef(a), x)
    _check(lambda t, a: a.corrcoef(), x[1])
    _same(ng.cov(ng.tensor(np.arange(6).reshape(2, 3))), torch.cov(torch.arange(6).reshape(2, 3)))
    with pytest.warns(RuntimeWarning):
        ng.cov(ng.tensor(x[:, :1]))


# ---- stacking and the trapezoid rule -------------------------------------------------------------
def test_stacks_and_trapezoid_shapes():
    a, b = np.arange(3.0), np.arange(3.0) + 10
    for fn in ("column_stack", "dstack", "row_stack"):
        _same(getattr(ng, fn)([ng.tensor(a), ng.tensor(b)]), getattr(torch, fn)([torch.tensor(a), torch.tensor(b)]))
        _same(getattr(ng, fn)([ng.tensor(1.0), ng.tensor(2.0)]),
              getattr(torch, fn)([torch.tensor(1.0), torch.tensor(2.0)]))
    y = np.arange(12.0).reshape(3, 4) ** 2
    _check(lambda t, v, x: t.trapezoid(v, x), y, np.array([0.0, 0.5, 2.0, 2.5]))
    _check(lambda t, v, x: t.cumulative_trapezoid(v, x, dim=0), y, np.array([0.0, 1.0, 3.0]))
    _check(lambda t, v: t.trapz(v, dx=3.0), y)
    _same(ng.trapezoid(ng.tensor(np.arange(4)), dx=2), torch.trapezoid(torch.arange(4), dx=2))
    _same(ng.trapezoid(ng.zeros(2, 0)), torch.trapezoid(torch.zeros(2, 0)))
    _same(ng.cumulative_trapezoid(ng.zeros(2, 1)), torch.cumulative_trapezoid(torch.zeros(2, 1)))


# ---- unique_consecutive / nanmedian ---------------------------------------------------------------
@pytest.mark.parametrize("dim", [None, 0, 1, -1])
def test_unique_consecutive(dim):
    x = np.array([[1, 1, 2, 2], [1, 1, 2, 3], [1, 1, 2, 3], [0, 0, 0, 0]])
    for inv in (False, True):
        for cnt in (False, True):
            got = ng.tensor(x).unique_consecutive(inv, cnt, dim)
            want = torch.tensor(x).unique_consecutive(return_inverse=inv, return_counts=cnt, dim=dim)
            got, want = (got, want) if isinstance(want, tuple) else ((got,), (want,))
            assert len(got) == len(want)
            for g, w in zip(got, want):
                _same(g, w, exact=True)
    _same(ng.unique_consecutive(ng.tensor(3.0)), torch.unique_consecutive(torch.tensor(3.0)))


def test_nanmedian_all_nan_rows_and_ties():
    x = np.array([[np.nan, np.nan, np.nan], [2.0, np.nan, 2.0], [1.0, 3.0, 2.0]])
    _check(lambda t, a: t.nanmedian(a), x)
    _check(lambda t, a: t.nanmedian(a[1:]), x)
    for d in (0, 1):
        v, i = ng.nanmedian(ng.tensor(x), d, keepdim=True)
        vt, it = torch.nanmedian(torch.tensor(x), d, keepdim=True)
        _same(v, vt)
        # an all-NaN row's index is whatever torch's nth_element leaves: compare the others
        ok = ~np.isnan(_np(vt))
        _same(_np(i)[ok], _np(it)[ok], exact=True)
    _same(ng.tensor([1, 5, 3, 2]).nanmedian(), torch.tensor([1, 5, 3, 2]).nanmedian())


# ---- gumbel_softmax --------------------------------------------------------------------------------
def test_gumbel_softmax_samples_are_reproducible_and_straight_through():
    rng = np.random.default_rng(4)
    logits = rng.standard_normal((5, 6))
    w = ng.tensor(rng.standard_normal((5, 6)))
    for dim in (-1, 0):
        x = ng.tensor(logits, requires_grad=True)
        ng.manual_seed(7)
        soft = F.gumbel_softmax(x, tau=0.7, dim=dim)
        ng.manual_seed(7)
        hard = F.gumbel_softmax(x, tau=0.7, hard=True, dim=dim)
        assert soft.shape == hard.shape == (5, 6)
        np.testing.assert_allclose(soft.detach().sum(dim).numpy(), 1.0)
        h = hard.detach().numpy()
        assert set(np.unique(h)) <= {0.0, 1.0} and (h.sum(dim) == 1).all()
        np.testing.assert_array_equal(h.argmax(dim), soft.detach().numpy().argmax(dim))
        (soft * w).sum().backward()
        g_soft = x.grad.numpy().copy()
        x.grad = None
        (hard * w).sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), g_soft, rtol=1e-12, atol=1e-12)
    ng.manual_seed(7)
    a = F.gumbel_softmax(ng.tensor(logits), tau=0.7)
    b = F.gumbel_softmax(ng.tensor(logits), tau=0.7)
    ng.manual_seed(7)
    np.testing.assert_array_equal(F.gumbel_softmax(ng.tensor(logits), tau=0.7).numpy(), a.numpy())
    assert not np.array_equal(a.numpy(), b.numpy())


def test_gumbel_softmax_distribution():
    """Sample frequencies of the hard one-hot match softmax(logits) (the Gumbel-max trick)."""
    logits = np.log(np.array([0.1, 0.2, 0.7]))
    ng.manual_seed(0)
    h = F.gumbel_softmax(ng.tensor(np.tile(logits, (4000, 1))), hard=True).numpy()
    np.testing.assert_allclose(h.mean(0), [0.1, 0.2, 0.7], atol=0.03)
    assert F.gumbel_softmax(ng.ones(2, 3, dtype=ng.float32)).dtype == ng.float32


# ---- errors -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("call, exc", [
    (lambda t: t.zeros(3, 4).index_copy(0, t.tensor([3]), t.ones(1, 4)), IndexError),
    (lambda t: t.zeros(3, 4).index_copy(1, t.tensor([0], dtype=t.int32), t.ones(3, 1)), RuntimeError),
    (lambda t: t.zeros(3, 4).index_copy(0, t.tensor([0]), t.ones(1, 4, dtype=t.float64)), RuntimeError),
    (lambda t: t.zeros(3, 4).index_fill(-1, t.tensor([4]), 1.0), IndexError),
    (lambda t: t.zeros(3, 4).index_fill(0, t.tensor([0.0]), 1.0), IndexError),
    (lambda t: t.zeros(3, 4).scatter_reduce(0, t.tensor([[0]]), t.ones(1, 1, dtype=t.float64), "sum"), RuntimeError),
    (lambda t: t.zeros(3, 4).scatter_reduce(0, t.tensor([[0, 0, 0, 0, 0]]), t.ones(1, 5), "sum"), RuntimeError),
    (lambda t: t.bincount(t.tensor([0, -2])), RuntimeError),
    (lambda t: t.histc(t.tensor([1.0, float("nan")])), RuntimeError),
    (lambda t: t.cov(t.ones(2, 3), aweights=t.tensor([1, 1, 1])), RuntimeError),
    (lambda t: t.cov(t.ones(2, 3), aweights=t.tensor([1.0, -1.0, 1.0])), RuntimeError),
    (lambda t: t.cov(t.ones(2, 3), fweights=t.ones(1, 3, dtype=t.int64)), RuntimeError),
    (lambda t: t.trapezoid(t.ones(3), t.ones(2, 4)), RuntimeError),
    (lambda t: t.nanmedian(t.ones(2, 0), 1), IndexError),
    (lambda t: t.unique_consecutive(t.ones(3), dim=1), IndexError),
])
def test_errors_match_torch(call, exc):
    with pytest.raises(exc):
        call(torch)
    with pytest.raises(exc):
        call(ng)


def test_out_of_range_index_never_reaches_memory():
    x = ng.zeros(3, 4)
    for bad in (3, -4, 2 ** 40):
        with pytest.raises(IndexError, match="out of bounds"):
            x.scatter_reduce(0, ng.tensor([[bad]]), ng.ones(1, 1), "amax")
        with pytest.raises(IndexError, match="out of bounds"):
            x.index_copy(0, ng.tensor([bad]), ng.ones(1, 4))
    assert (x.numpy() == 0).all()
