"""numbagrad/ops/scan.py beyond the op table: the forms, edge cases and gradients that one
row cannot express, each against PyTorch (skipped without it) or finite differences."""
import numpy as np
import pytest

import numbagrad as ng

torch = pytest.importorskip("torch")

NAN = float("nan")


def _pair(a, requires_grad=False):
    a = np.asarray(a)
    rg = requires_grad and a.dtype.kind == "f"
    return ng.tensor(a, requires_grad=rg), torch.tensor(a, requires_grad=rg)


def _same(got, want):
    if isinstance(want, (tuple, list)):
        assert len(got) == len(want)
        for g, w in zip(got, want):
            _same(g, w)
        return
    g, w = got.detach().numpy(), want.detach().numpy()
    assert g.shape == w.shape, (g.shape, w.shape)
    assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1], (got.dtype, want.dtype)
    np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12, equal_nan=True)


def _grads(fn, a, pick=lambda r: r):
    """numbagrad's and torch's gradient of ``sum(pick(fn(lib, x)) * w)`` for a fixed random ``w``."""
    out = []
    for lib in (ng, torch):
        x = lib.tensor(np.asarray(a, dtype=np.float64), requires_grad=True)
        y = pick(fn(lib, x))
        w = np.random.default_rng(7).standard_normal(tuple(y.shape))
        (y * lib.tensor(w)).sum().backward()
        out.append(x.grad.numpy())
    return out


def _numgrad(fn, a, eps=1e-6):
    a = np.asarray(a, dtype=np.float64)
    w = np.random.default_rng(7).standard_normal(fn(ng, ng.tensor(a)).shape)
    num = np.zeros(a.size)
    for k in range(a.size):
        p, m = a.copy().reshape(-1), a.copy().reshape(-1)
        p[k] += eps
        m[k] -= eps
        f = lambda v: float((fn(ng, ng.tensor(v.reshape(a.shape))).numpy() * w).sum())  # noqa: E731
        num[k] = (f(p) - f(m)) / (2 * eps)
    return num.reshape(a.shape)


# ---- repeat_interleave -------------------------------------------------------------------------
@pytest.mark.parametrize("call", [
    lambda t, x: t.repeat_interleave(x, 3),
    lambda t, x: t.repeat_interleave(x, 2, dim=0),
    lambda t, x: t.repeat_interleave(x, t.tensor([0, 3, 1]), dim=1),
    lambda t, x: t.repeat_interleave(x, t.tensor(2), dim=-1),
    lambda t, x: t.repeat_interleave(x, t.tensor([2]), dim=0, output_size=4),
    lambda t, x: t.repeat_interleave(x, 0, dim=1),
    lambda t, x: x.repeat_interleave(2, 1),
    lambda t, x: t.repeat_interleave(x[:, :0], 2, dim=1),
])
def test_repeat_interleave_forms(call):
    a = np.arange(6.0).reshape(2, 3) - 2.5
    n, t = _pair(a, True), _pair(a, True)[1]
    _same(call(ng, n[0]), call(torch, t))
    g_ng, g_t = _grads(call, a)
    np.testing.assert_allclose(g_ng, g_t)


def test_repeat_interleave_of_repeats_and_ints():
    for r in ([2, 0, 3], [0, 0], []):
        n, t = _pair(np.array(r, dtype=np.int64))
        _same(ng.repeat_interleave(n), torch.repeat_interleave(t))
    n, t = _pair(np.array([[1, 2], [3, 4]], dtype=np.int32))
    _same(ng.repeat_interleave(n, 2, dim=0), torch.repeat_interleave(t, 2, dim=0))
    n, t = _pair(np.array(3.0))
    _same(ng.repeat_interleave(n, 2), torch.repeat_interleave(t, 2))


# ---- tensor_split / hsplit / vsplit / dsplit ---------------------------------------------------
@pytest.mark.parametrize("arg", [1, 3, 4, 7, 9, [2], [2, 5], [5, 2], [-2, 3], [0, 0, 7, 9], (1, -10), [],
                                 "t0", "t1"])
def test_tensor_split_sections_and_indices(arg):
    a = np.arange(14.0).reshape(7, 2)
    n, t = _pair(a)
    if arg == "t0":
        an, at = ng.tensor(np.array(3)), torch.tensor(3)
    elif arg == "t1":
        an, at = ng.tensor(np.array([1, 4])), torch.tensor([1, 4])
    else:
        an = at = arg
    _same(ng.tensor_split(n, an), torch.tensor_split(t, at))
    _same(n.tensor_split(an, 0), t.tensor_split(at, 0))


def test_tensor_split_gradient_and_uneven_columns():
    a = np.random.default_rng(0).standard_normal((2, 5))
    call = lambda t, x: t.cat([p * (i + 1) for i, p in enumerate(t.tensor_split(x, 3, dim=1))], 1)  # noqa: E731
    g_ng, g_t = _grads(call, a)
    np.testing.assert_allclose(g_ng, g_t)


@pytest.mark.parametrize("fn,shape,arg", [("hsplit", (6,), 3), ("hsplit", (2, 6), [1, 4]), ("vsplit", (4, 2), 2),
                                          ("dsplit", (1, 2, 4), [3]), ("hsplit", (2, 0), 2)])
def test_xsplit(fn, shape, arg):
    n, t = _pair(np.arange(float(np.prod(shape))).reshape(shape))
    _same(getattr(ng, fn)(n, arg), getattr(torch, fn)(t, arg))


# ---- diff --------------------------------------------------------------------------------------
@pytest.mark.parametrize("n,dim,pre,app", [(1, -1, None, None), (2, 1, None, None), (3, 0, (2, 4), (1, 4)),
                                           (2, 1, (3, 2), None), (0, 0, None, None), (9, 1, None, (3, 1)),
                                           (1, 0, (0, 4), None)])
def test_diff(n, dim, pre, app):
    rng = np.random.default_rng(1)
    a = rng.standard_normal((3, 4))
    pa = None if pre is None else rng.standard_normal(pre)
    qa = None if app is None else rng.standard_normal(app)

    def call(lib, x, p=None, q=None):
        return lib.diff(x, n, dim, prepend=p, append=q)

    outs = []
    for lib in (ng, torch):
        x = lib.tensor(a, requires_grad=True)
        p = None if pa is None else lib.tensor(pa, requires_grad=True)
        q = None if qa is None else lib.tensor(qa, requires_grad=True)
        y = call(lib, x, p, q)
        (y * lib.tensor(np.cos(np.arange(y.numel())).reshape(tuple(y.shape)))).sum().backward()
        outs.append([y.detach().numpy()] + [t.grad.numpy() for t in (x, p, q) if t is not None])
    for g, w in zip(*outs):
        np.testing.assert_allclose(g, w, atol=1e-12)


def test_diff_of_bool_and_int():
    for a in (np.array([True, False, False, True]), np.array([1, 5, 2, 2], dtype=np.int32)):
        n, t = _pair(a)
        _same(ng.diff(n), torch.diff(t))
        _same(ng.diff(n, 2), torch.diff(t, 2))
    n, t = _pair(np.arange(6.0).reshape(2, 3))
    pn, pt = _pair(np.ones((2, 1), np.int64))
    _same(ng.diff(n, prepend=pn), torch.diff(t, prepend=pt))


# ---- nansum / nanmean / count_nonzero ----------------------------------------------------------
NAN_ROWS = np.array([[NAN, NAN, NAN], [1.0, NAN, -2.0], [0.5, 1.5, 2.0]])


@pytest.mark.parametrize("dim,keepdim", [(None, False), (0, False), (1, True), ((0, 1), False), (-1, False)])
def test_nan_reductions_with_all_nan_rows(dim, keepdim):
    for name in ("nansum", "nanmean"):
        call = lambda t, x: getattr(t, name)(x, dim, keepdim)  # noqa: E731
        _same(call(ng, _pair(NAN_ROWS)[0]), call(torch, _pair(NAN_ROWS)[1]))
        g_ng, g_t = _grads(call, NAN_ROWS)
        np.testing.assert_allclose(g_ng, g_t, equal_nan=True)


def test_nansum_dtypes():
    n, t = _pair(np.array([[1, 2], [3, 4]], dtype=np.int32))
    _same(ng.nansum(n, 1), torch.nansum(t, 1))
    n, t = _pair(np.array([1.0, NAN, 2.0], dtype=np.float32))
    _same(ng.nansum(n, dtype=ng.float64), torch.nansum(t, dtype=torch.float64))
    _same(ng.nanmean(n, dtype=ng.float64), torch.nanmean(t, dtype=torch.float64))
    n, t = _pair(np.array([True, True, False]))
    _same(ng.nansum(n), torch.nansum(t))


@pytest.mark.parametrize("dim", [None, 0, -1, (0, 2), (2, 0, 1), (), [1]])
def test_count_nonzero_dims(dim):
    a = np.round(np.random.default_rng(2).standard_normal((2, 3, 4)))
    a[0, 0, 0] = NAN
    n, t = _pair(a)
    _same(ng.count_nonzero(n, dim), torch.count_nonzero(t, dim))
    _same(n.count_nonzero(dim), t.count_nonzero(dim))


def test_count_nonzero_0d_and_empty():
    for a in (np.array(3.0), np.array(0.0), np.zeros((0, 3))):
        n, t = _pair(a)
        _same(ng.count_nonzero(n), torch.count_nonzero(t))


# ---- cumprod -----------------------------------------------------------------------------------
@pytest.mark.parametrize("zeros", [[], [2], [1, 3], [0, 4], [4], [2, 2]])
def test_cumprod_gradient_with_zeros(zeros):
    a = np.random.default_rng(3).standard_normal((2, 5))
    for z in zeros:
        a[0, z] = 0.0
        a[1, 4 - z] = 0.0
    call = lambda t, x: t.cumprod(x, 1)  # noqa: E731
    g_ng, g_t = _grads(call, a)
    np.testing.assert_allclose(g_ng, g_t, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(g_ng, _numgrad(call, a), rtol=1e-6, atol=1e-8)


def test_cumprod_dtypes_and_inplace():
    n, t = _pair(np.array([1, 2, 3], dtype=np.int32))
    _same(ng.cumprod(n, 0), torch.cumprod(t, 0))
    _same(ng.cumprod(n, 0, dtype=ng.float32), torch.cumprod(t, 0, dtype=torch.float32))
    n, t = _pair(np.array([[0.5, 2.0], [3.0, -1.0]]))
    assert n.cumprod_(0) is n
    _same(n, t.cumprod_(0))
    n, t = _pair(np.zeros((3, 0)))
    _same(ng.cumprod(n, 0), torch.cumprod(t, 0))
    n, t = _pair(np.array(2.5))
    _same(ng.cumprod(n, 0), torch.cumprod(t, 0))


# ---- cummax / cummin ---------------------------------------------------------------------------
@pytest.mark.parametrize("fn", ["cummax", "cummin"])
@pytest.mark.parametrize("a", [
    [1.0, 3.0, 3.0, 2.0, 3.0, 0.0],          # ties: torch keeps the last
    [2.0, 2.0, 2.0],
    [1.0, NAN, 5.0, NAN, -1.0],             # NaN propagates with its first index
    [NAN, 1.0],
    [[1.0, 0.0], [1.0, 2.0], [0.0, 2.0]],   # along dim 0 of 2-D
])
def test_cummax_cummin_ties_and_nan(fn, a):
    n, t = _pair(np.array(a))
    _same(tuple(getattr(ng, fn)(n, 0)), tuple(getattr(torch, fn)(t, 0)))
    if not np.isnan(np.array(a)).any():
        g_ng, g_t = _grads(lambda lib, x: getattr(lib, fn)(x, 0).values, np.array(a))
        np.testing.assert_allclose(g_ng, g_t)


def test_cummax_ints_bools_0d_empty():
    for a in (np.array([1, 3, 2, 3], np.int64), np.array([True, False, True]), np.array(4.0), np.zeros((0, 2))):
        n, t = _pair(a)
        for fn in ("cummax", "cummin"):
            _same(tuple(getattr(ng, fn)(n, 0)), tuple(getattr(torch, fn)(t, 0)))


# ---- logcumsumexp ------------------------------------------------------------------------------
def test_logcumsumexp_stable_and_infinities():
    for a in ([-1000.0, 1000.0, -1000.0], [float("-inf"), float("-inf"), 1.0], [1.0, float("inf"), 2.0],
              [float("-inf"), 0.0], [3.0, NAN, 1.0], [1e4, 1e4 + 1.0]):
        n, t = _pair(np.array(a))
        _same(ng.logcumsumexp(n, 0), torch.logcumsumexp(t, 0))


def test_logcumsumexp_gradient_large_values():
    a = np.random.default_rng(4).standard_normal((3, 5)) * 300
    g_ng, g_t = _grads(lambda lib, x: lib.logcumsumexp(x, 1), a)
    np.testing.assert_allclose(g_ng, g_t, rtol=1e-9, atol=1e-12)
    n, t = _pair(np.float32(2.0) * np.ones((2, 0), np.float32))
    _same(ng.logcumsumexp(n, 1), torch.logcumsumexp(t, 1))
    n, t = _pair(np.array(1.5))
    _same(ng.logcumsumexp(n, 0), torch.logcumsumexp(t, 0))


# ---- aminmax / fliplr / flipud / rot90 / msort ---------------------------------------------------
def test_aminmax_ties_gradient_and_forms():
    a = np.array([[1.0, 3.0, 3.0], [-1.0, -1.0, 0.0]])
    for kw in ({}, {"keepdim": True}, {"dim": 1}, {"dim": 0, "keepdim": True}, {"dim": -1}):
        n, t = _pair(a)
        r_ng, r_t = ng.aminmax(n, **kw), torch.aminmax(t, **kw)
        _same((r_ng.min, r_ng.max), (r_t.min, r_t.max))
        for k in (0, 1):
            g_ng, g_t = _grads(lambda lib, x: lib.aminmax(x, **kw)[k], a)
            np.testing.assert_allclose(g_ng, g_t)
    n, t = _pair(np.zeros((0, 3)))
    _same(tuple(ng.aminmax(n, dim=1)), tuple(torch.aminmax(t, dim=1)))


@pytest.mark.parametrize("k", [-5, -1, 0, 1, 2, 3, 4, 6])
@pytest.mark.parametrize("dims", [(0, 1), (1, 0), (2, 0), (-1, -2)])
def test_rot90(k, dims):
    a = np.arange(24.0).reshape(2, 3, 4)
    n, t = _pair(a)
    _same(ng.rot90(n, k, dims), torch.rot90(t, k, dims))
    g_ng, g_t = _grads(lambda lib, x: lib.rot90(x, k, dims), a)
    np.testing.assert_allclose(g_ng, g_t)


def test_flips_and_msort():
    a = np.random.default_rng(5).standard_normal((3, 2, 2))
    n, t = _pair(a)
    for fn in ("fliplr", "flipud", "msort"):
        _same(getattr(ng, fn)(n), getattr(torch, fn)(t))
        _same(getattr(n, fn)(), getattr(t, fn)())
    n, t = _pair(np.array([3.0, NAN, 1.0]))
    _same(ng.msort(n), torch.msort(t))


# ---- median ------------------------------------------------------------------------------------
@pytest.mark.parametrize("a", [
    [3.0, 1.0, 2.0, 4.0],                       # even length: the lower of the two middles
    [2.0, 2.0, 1.0, 2.0, 3.0],
    [[1.0, 1.0, 1.0, 1.0], [5.0, 5.0, 1.0, 1.0]],
    [[0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]],
    [[1.0, NAN, NAN, 0.0], [2.0, 1.0, 2.0, 1.0]],
    [[3.0, 1.0, 1.0, 1.0, 2.0, 2.0, 2.0, 5.0]],
])
def test_median_ties_even_lengths_nan(a):
    a = np.array(a)
    n, t = _pair(a)
    _same(ng.median(n), torch.median(t))
    for dim in range(-a.ndim, a.ndim):
        for keepdim in (False, True):
            _same(tuple(ng.median(n, dim, keepdim)), tuple(torch.median(t, dim, keepdim)))
    if not np.isnan(a).any():
        g_ng, g_t = _grads(lambda lib, x: lib.median(x), a)           # spread evenly over the ties
        np.testing.assert_allclose(g_ng, g_t)
        g_ng, g_t = _grads(lambda lib, x: lib.median(x, -1).values, a)  # to the index only
        np.testing.assert_allclose(g_ng, g_t)


def test_median_random_ties_match_torch_indices():
    rng = np.random.default_rng(6)
    for _ in range(20):
        a = rng.integers(0, 3, (3, int(rng.integers(1, 12)))).astype(np.float64)
        n, t = _pair(a)
        _same(tuple(ng.median(n, 1)), tuple(torch.median(t, 1)))


def test_median_nan_gradient_int_0d_empty():
    a = np.array([1.0, NAN, 2.0, NAN])
    g_ng, g_t = _grads(lambda lib, x: lib.median(x), a)
    np.testing.assert_allclose(g_ng, g_t)
    for arr in (np.array([1, 4, 2, 3]), np.array(2.0), np.zeros(0)):
        n, t = _pair(arr)
        _same(ng.median(n), torch.median(t))
    n, t = _pair(np.array(2.0))
    _same(tuple(ng.median(n, 0)), tuple(torch.median(t, 0)))
    n, t = _pair(np.zeros((0, 3)))
    _same(tuple(ng.median(n, 1)), tuple(torch.median(t, 1)))
