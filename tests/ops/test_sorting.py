"""Sorting, selection and sampling (``numbagrad/ops/sorting.py``): against NumPy always,
and against PyTorch when it is installed (only the torch comparisons are skipped without it).

Random draws are checked statistically: every mean, frequency or variance must lie within
5 standard errors of its expectation (a false alarm about once in 1.7 million checks)."""
import numpy as np
import pytest

import numbagrad as ng
from numbagrad.ops import sorting

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch not installed")

SHAPE_DIMS = [((7,), 0), ((7,), -1), ((4, 6), 1), ((4, 6), 0), ((4, 6), -2), ((3, 4, 5), 0),
              ((3, 4, 5), 1), ((3, 4, 5), -1), ((3, 1, 5), 1), ((2, 3, 1), -1)]


def distinct(shape, seed=0, dtype=np.float64):
    """Distinct values in random order (no ties: indices are unique)."""
    n = int(np.prod(shape))
    return (np.random.default_rng(seed).permutation(n).reshape(shape) * 0.25 - 3).astype(dtype)


def with_ties(shape, seed=0):
    return np.random.default_rng(seed).integers(0, 3, shape).astype(np.float64)


def T(a, requires_grad=False):
    t = ng.tensor(a)
    return t.requires_grad_(True) if requires_grad else t


def npy(t):
    return t.detach().numpy()


def torch_of(a, requires_grad=False):
    return torch.tensor(a, requires_grad=requires_grad)


def stable_argsort(a, axis, descending):
    """Independent reference: stable argsort (NaN-free float input) via negation."""
    return np.argsort(-a if descending else a, axis=axis, kind="stable")


def check_result(r, values, indices):
    """A ``(values, indices)`` result equals the expected arrays."""
    np.testing.assert_array_equal(npy(r.values), values)
    np.testing.assert_array_equal(npy(r.indices), indices)


def within_5se(estimate, expected, se):
    estimate, expected, se = np.broadcast_arrays(*(np.asarray(v, dtype=np.float64) for v in (estimate, expected, se)))
    bad = np.abs(estimate - expected) > 5 * se
    assert not bad.any(), f"estimates {estimate[bad]} vs expected {expected[bad]} (5 SE = {5 * se[bad]})"


# ---- sort / argsort ------------------------------------------------------------------------------
@pytest.mark.parametrize("shape,dim", SHAPE_DIMS)
@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sort_distinct(shape, dim, descending, dtype):
    a = distinct(shape, seed=len(shape) + dim, dtype=dtype)
    r = ng.sort(T(a), dim=dim, descending=descending)
    ref_idx = stable_argsort(a, dim, descending)
    assert r.values.dtype == dtype and r.indices.dtype == np.int64
    check_result(r, np.take_along_axis(a, ref_idx, dim), ref_idx)
    np.testing.assert_array_equal(npy(ng.argsort(T(a), dim=dim, descending=descending)), ref_idx)
    if torch is not None:
        tr = torch.sort(torch_of(a), dim=dim, descending=descending, stable=True)
        check_result(r, tr.values.numpy(), tr.indices.numpy())
        np.testing.assert_array_equal(npy(ng.argsort(T(a), dim, descending, stable=True)),
                                      torch.argsort(torch_of(a), dim=dim, descending=descending, stable=True).numpy())


@pytest.mark.parametrize("shape,dim", SHAPE_DIMS)
@pytest.mark.parametrize("descending", [False, True])
def test_sort_ties(shape, dim, descending):
    a = with_ties(shape, seed=3)
    x = T(a)
    r = ng.sort(x, dim, descending)
    ref_vals = np.sort(a, axis=dim)
    ref_vals = np.flip(ref_vals, dim) if descending else ref_vals
    np.testing.assert_array_equal(npy(r.values), ref_vals)
    np.testing.assert_array_equal(npy(x.gather(dim, r.indices)), npy(r.values))
    # indices along dim are a permutation, in the stable (input) order among equal values
    positions = np.expand_dims(np.arange(a.shape[dim]), tuple(d for d in range(a.ndim) if d != dim % a.ndim))
    assert (np.sort(npy(r.indices), axis=dim) == positions).all()
    np.testing.assert_array_equal(npy(r.indices), stable_argsort(a, dim, descending))
    if torch is not None:
        np.testing.assert_array_equal(npy(r.values), torch.sort(torch_of(a), dim=dim, descending=descending).values.numpy())


@pytest.mark.parametrize("descending", [False, True])
def test_sort_nan_is_largest(descending):
    nan = np.nan
    a = np.array([[2.0, nan, -1.0, nan, 5.0], [nan, 0.0, 3.0, 1.0, -2.0]])
    r = ng.sort(T(a), dim=1, descending=descending)
    v = npy(r.values)
    n_nan = np.isnan(a).sum(axis=1)
    for row in range(2):
        nanpos = np.isnan(v[row])
        k = n_nan[row]
        expect_nan = np.arange(5) < k if descending else np.arange(5) >= 5 - k
        np.testing.assert_array_equal(nanpos, expect_nan)
        finite = np.sort(a[row][~np.isnan(a[row])])
        np.testing.assert_array_equal(v[row][~nanpos], finite[::-1] if descending else finite)
    np.testing.assert_array_equal(np.take_along_axis(a, npy(r.indices), 1), v)  # (NaN == NaN in array_equal)
    if torch is not None:
        np.testing.assert_array_equal(v, torch.sort(torch_of(a), dim=1, descending=descending).values.numpy())


def test_topk_and_kthvalue_nan():
    a = np.array([1.0, np.nan, 0.0, 3.0])
    t = ng.topk(T(a), 2)
    assert np.isnan(npy(t.values)[0]) and npy(t.indices)[0] == 1 and npy(t.values)[1] == 3.0
    s = ng.topk(T(a), 2, largest=False)
    np.testing.assert_array_equal(npy(s.values), [0.0, 1.0])
    np.testing.assert_array_equal(npy(s.indices), [2, 0])
    assert np.isnan(npy(ng.kthvalue(T(a), 4).values)) and npy(ng.kthvalue(T(a), 3).values) == 3.0
    if torch is not None:
        np.testing.assert_array_equal(npy(t.values), torch.topk(torch_of(a), 2).values.numpy())
        np.testing.assert_array_equal(npy(s.indices), torch.topk(torch_of(a), 2, largest=False).indices.numpy())
        assert np.isnan(torch.kthvalue(torch_of(a), 4).values.item())


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.uint8, np.bool_])
@pytest.mark.parametrize("descending", [False, True])
def test_sort_integer_and_bool(dtype, descending):
    a = np.random.default_rng(5).integers(0, 4, (3, 8)).astype(dtype)
    r = ng.sort(T(a), descending=descending)
    assert r.values.dtype == dtype and r.indices.dtype == np.int64
    ref = np.argsort(a.astype(np.int64) * (-1 if descending else 1), axis=-1, kind="stable")
    check_result(r, np.take_along_axis(a, ref, -1), ref)


def test_sort_results_are_namedtuples_and_methods():
    x = T(distinct((3, 4)))
    for r, name in [(x.sort(), "sort"), (x.topk(2), "topk"), (x.kthvalue(1), "kthvalue")]:
        assert isinstance(r, tuple) and r._fields == ("values", "indices") and type(r).__name__ == name
        values, indices = r
        assert values is r.values and indices is r.indices
    np.testing.assert_array_equal(npy(x.argsort(dim=0)), np.argsort(npy(x), axis=0))
    assert x.unique().shape == (12,)


def test_zero_dim():
    x = T(np.array(2.5))
    for r in [ng.sort(x), ng.sort(x, 0, True), ng.topk(x, 1), ng.topk(x, 0), ng.kthvalue(x, 1),
              ng.kthvalue(x, 1, keepdim=True)]:
        assert r.values.shape == () and r.indices.shape == ()
        assert npy(r.values) == 2.5 and npy(r.indices) == 0
    assert ng.argsort(x).shape == () and npy(ng.argsort(x)) == 0
    with pytest.raises(IndexError, match=r"sort: Dimension out of range .*\[-1, 0\], but got 1"):
        ng.sort(x, 1)
    with pytest.raises(RuntimeError, match="topk: k=2"):
        ng.topk(x, 2)
    if torch is not None:
        tx = torch.tensor(2.5)
        for mine, theirs in [(ng.topk(x, 0), torch.topk(tx, 0)), (ng.kthvalue(x, 1), torch.kthvalue(tx, 1))]:
            assert tuple(mine.values.shape) == tuple(theirs.values.shape)
            assert npy(mine.values) == theirs.values.item()


# ---- topk / kthvalue -----------------------------------------------------------------------------
@pytest.mark.parametrize("shape,dim", SHAPE_DIMS)
@pytest.mark.parametrize("largest", [True, False])
def test_topk(shape, dim, largest):
    a = distinct(shape, seed=11 + dim)
    n = a.shape[dim]
    ref = stable_argsort(a, dim, largest)
    for k in sorted({0, 1, n // 2, n}):
        r = ng.topk(T(a), k, dim=dim, largest=largest)
        ref_idx = np.take(ref, np.arange(k), axis=dim)
        check_result(r, np.take_along_axis(a, ref_idx, dim), ref_idx)
        u = ng.topk(T(a), k, dim=dim, largest=largest, sorted=False)  # same set (here: same order)
        np.testing.assert_array_equal(np.sort(npy(u.values), axis=dim), np.sort(npy(r.values), axis=dim))
        if torch is not None:
            tr = torch.topk(torch_of(a), k, dim=dim, largest=largest)
            check_result(r, tr.values.numpy(), tr.indices.numpy())


@pytest.mark.parametrize("shape,dim", SHAPE_DIMS)
@pytest.mark.parametrize("keepdim", [False, True])
def test_kthvalue(shape, dim, keepdim):
    a = distinct(shape, seed=21 + dim)
    n = a.shape[dim]
    order = np.argsort(a, axis=dim)
    for k in sorted({1, (n + 1) // 2, n}):
        r = ng.kthvalue(T(a), k, dim=dim, keepdim=keepdim)
        ref_idx = np.take(order, [k - 1], axis=dim)
        ref_val = np.take_along_axis(a, ref_idx, dim)
        if not keepdim:
            ref_idx, ref_val = ref_idx.squeeze(dim), ref_val.squeeze(dim)
        check_result(r, ref_val, ref_idx)
        np.testing.assert_array_equal(npy(r.values), np.take(np.sort(a, axis=dim), [k - 1], axis=dim).reshape(ref_val.shape))
        if torch is not None:
            tr = torch.kthvalue(torch_of(a), k, dim=dim, keepdim=keepdim)
            check_result(r, tr.values.numpy(), tr.indices.numpy())


@pytest.mark.parametrize("op,shape,seed,args,kw,expected", [
    ("topk", (5, 9), 2, (4,), dict(dim=1), lambda a: -np.sort(-a, axis=1)[:, :4]),
    ("kthvalue", (4, 7), 8, (3,), dict(dim=1, keepdim=True), lambda a: np.sort(a, axis=1)[:, 2:3]),
])
def test_ties(op, shape, seed, args, kw, expected):
    a = with_ties(shape, seed=seed)
    x = T(a)
    r = getattr(ng, op)(x, *args, **kw)
    np.testing.assert_array_equal(npy(r.values), expected(a))
    np.testing.assert_array_equal(npy(x.gather(1, r.indices)), npy(r.values))
    assert all(len(set(row)) == len(row) for row in npy(r.indices))
    if torch is not None:
        np.testing.assert_array_equal(npy(r.values), getattr(torch, op)(torch_of(a), *args, **kw).values.numpy())


# ---- gradients -----------------------------------------------------------------------------------
def _scatter(shape, dim, idx, g):
    """NumPy reference gradient: upstream ``g`` scatter-added at ``idx`` along ``dim``."""
    out = np.zeros(shape)
    grid = list(np.indices(idx.shape, sparse=True))
    grid[dim] = idx
    np.add.at(out, tuple(grid), g)
    return out


GRAD_CASES = [
    ("sort", lambda x, d: ng.sort(x, d, descending=True), lambda x, d: torch.sort(x, d, descending=True)),
    ("sort_ties", lambda x, d: ng.sort(x, d), lambda x, d: torch.sort(x, d)),
    ("topk", lambda x, d: ng.topk(x, 2, d), lambda x, d: torch.topk(x, 2, d)),
    ("topk_smallest", lambda x, d: ng.topk(x, 1, d, largest=False), lambda x, d: torch.topk(x, 1, d, largest=False)),
    ("kthvalue", lambda x, d: ng.kthvalue(x, 2, d), lambda x, d: torch.kthvalue(x, 2, d)),
    ("kthvalue_keepdim", lambda x, d: ng.kthvalue(x, 3, d, True), lambda x, d: torch.kthvalue(x, 3, d, True)),
]


@pytest.mark.parametrize("name,fn,tfn", GRAD_CASES, ids=[c[0] for c in GRAD_CASES])
@pytest.mark.parametrize("shape,dim", [((6,), 0), ((4, 5), 1), ((4, 5), -2), ((3, 4, 5), 1)])
def test_value_gradients(name, fn, tfn, shape, dim):
    a = with_ties(shape, seed=4) if name.endswith("ties") else distinct(shape, seed=9)
    x = T(a, requires_grad=True)
    r = fn(x, dim)
    g = np.random.default_rng(1).standard_normal(r.values.shape)
    r.values.backward(ng.tensor(g))
    idx = npy(r.indices)
    d = dim % len(shape)
    if idx.ndim < a.ndim:  # kthvalue without keepdim
        idx, g_full = np.expand_dims(idx, d), np.expand_dims(g, d)
    else:
        g_full = g
    assert x.grad.dtype == np.float64
    np.testing.assert_array_equal(npy(x.grad), _scatter(a.shape, d, idx, g_full))
    if torch is not None and not name.endswith("ties"):
        tx = torch_of(a, requires_grad=True)
        tfn(tx, dim).values.backward(torch.tensor(g))
        np.testing.assert_allclose(npy(x.grad), tx.grad.numpy(), rtol=0, atol=0)


def test_indices_are_not_differentiable():
    x = T(distinct((3, 4)), requires_grad=True)
    r = ng.sort(x)
    assert r.values.requires_grad and not r.indices.requires_grad and r.indices.grad_fn is None
    assert not ng.argsort(x).requires_grad and not ng.topk(x, 2).indices.requires_grad


# ---- errors --------------------------------------------------------------------------------------
@pytest.fixture
def no_host(monkeypatch):
    """Any data movement (the host computation) fails the test: arguments must be checked first."""
    def boom(*a, **k):
        raise AssertionError("reached the host computation before the argument check")
    monkeypatch.setattr(sorting, "_host", boom)


@pytest.mark.parametrize("call,exc,pattern", [
    (lambda x: ng.sort(x, dim=2), IndexError, r"sort: Dimension out of range .*but got 2"),
    (lambda x: ng.sort(x, dim=-3), IndexError, r"sort: Dimension out of range .*but got -3"),
    (lambda x: ng.argsort(x, dim=5), IndexError, r"argsort: Dimension out of range .*but got 5"),
    (lambda x: ng.topk(x, 2, dim=2), IndexError, r"topk: Dimension out of range .*but got 2"),
    (lambda x: ng.kthvalue(x, 1, dim=-3), IndexError, r"kthvalue: Dimension out of range .*but got -3"),
    (lambda x: ng.topk(x, 5), RuntimeError, r"topk: k=5 .*dimension 1 of size 4 .*shape \(3, 4\)"),
    (lambda x: ng.topk(x, -1), RuntimeError, r"topk: k=-1 .*size 4"),
    (lambda x: ng.topk(x, 4, dim=0), RuntimeError, r"topk: k=4 .*dimension 0 of size 3"),
    (lambda x: ng.kthvalue(x, 0), RuntimeError, r"kthvalue: k=0 .*size 4 .*shape \(3, 4\)"),
    (lambda x: ng.kthvalue(x, 5), RuntimeError, r"kthvalue: k=5 .*size 4"),
    (lambda x: ng.topk(x, 1.5), TypeError, r"topk: k must be an int"),
    (lambda x: ng.kthvalue(x, True), TypeError, r"kthvalue: k must be an int"),
    (lambda x: ng.sort(x, dim=0.0), TypeError, r"sort: dim must be an int"),
])
def test_argument_errors(no_host, call, exc, pattern):
    with pytest.raises(exc, match=pattern):
        call(T(distinct((3, 4))))


@needs_torch
@pytest.mark.parametrize("call,exc", [
    (lambda m, x: m.sort(x, dim=2), IndexError), (lambda m, x: m.topk(x, 5), RuntimeError),
    (lambda m, x: m.topk(x, -1), RuntimeError), (lambda m, x: m.kthvalue(x, 0), RuntimeError),
    (lambda m, x: m.kthvalue(x, 5), RuntimeError), (lambda m, x: m.topk(x, 2, dim=-3), IndexError),
])
def test_argument_errors_match_torch_types(call, exc):
    a = distinct((3, 4))
    with pytest.raises(exc):
        call(torch, torch_of(a))
    with pytest.raises(exc):
        call(ng, T(a))


# ---- searchsorted / bucketize / unique -------------------------------------------------------------
@pytest.mark.parametrize("side", ["left", "right"])
def test_searchsorted_1d(side):
    rng = np.random.default_rng(0)
    seq = np.sort(rng.integers(0, 10, 12)).astype(np.float64)  # repeated boundaries
    vals = rng.integers(-2, 13, (3, 5)).astype(np.float64)      # hits, misses, both ends
    r = ng.searchsorted(T(seq), T(vals), side=side)
    assert r.dtype == np.int64 and r.shape == (3, 5)
    np.testing.assert_array_equal(npy(r), np.searchsorted(seq, vals, side))
    np.testing.assert_array_equal(npy(ng.searchsorted(T(seq), T(vals), right=side == "right")),
                                  np.searchsorted(seq, vals, side))
    s = ng.searchsorted(T(seq), 4.0, side=side)
    assert s.shape == () and npy(s) == np.searchsorted(seq, 4.0, side)
    assert ng.searchsorted(T(seq), T(vals), out_int32=True, side=side).dtype == np.int32
    if torch is not None:
        np.testing.assert_array_equal(npy(r), torch.searchsorted(torch_of(seq), torch_of(vals), side=side).numpy())


def test_searchsorted_rows_and_sorter():
    rng = np.random.default_rng(1)
    seq = np.sort(rng.standard_normal((2, 3, 6)), axis=-1)
    vals = rng.standard_normal((2, 3, 4))
    r = ng.searchsorted(T(seq), T(vals), right=True)
    ref = np.stack([[np.searchsorted(seq[i, j], vals[i, j], "right") for j in range(3)] for i in range(2)])
    np.testing.assert_array_equal(npy(r), ref)
    perm = np.stack([[rng.permutation(6) for _ in range(3)] for _ in range(2)])
    shuffled = np.take_along_axis(seq, perm, -1)
    sorter = np.argsort(shuffled, axis=-1)
    np.testing.assert_array_equal(npy(ng.searchsorted(T(shuffled), T(vals), right=True, sorter=T(sorter))), ref)
    if torch is not None:
        np.testing.assert_array_equal(npy(r), torch.searchsorted(torch_of(seq), torch_of(vals), right=True).numpy())


@pytest.mark.parametrize("call,pattern", [
    (lambda: ng.searchsorted(T(np.array(1.0)), T(np.ones(2))), "positive dimension"),
    (lambda: ng.searchsorted(T(np.ones((2, 3))), T(np.ones((3, 2)))), r"first N-1 dimensions.*\(2, 3\).*\(3, 2\)"),
    (lambda: ng.searchsorted(T(np.ones((2, 3))), 1.0), "first N-1 dimensions"),
    (lambda: ng.searchsorted(T(np.ones(3)), T(np.ones(2)), right=True, side="left"), "opposites"),
    (lambda: ng.searchsorted(T(np.ones(3)), T(np.ones(2)), side="middle"), "'left' or 'right'"),
    (lambda: ng.bucketize(T(np.ones(2)), T(np.ones((2, 3)))), r"1 dimension, but got dim\(2\)"),
])
def test_searchsorted_errors(call, pattern):
    with pytest.raises(RuntimeError, match=pattern):
        call()


@pytest.mark.parametrize("right", [False, True])
def test_bucketize(right):
    rng = np.random.default_rng(2)
    bounds = np.array([-1.0, 0.0, 0.0, 2.5, 4.0])
    x = np.concatenate([rng.uniform(-3, 6, 30), bounds]).reshape(5, 7)
    r = ng.bucketize(T(x), T(bounds), right=right)
    # torch's right=False is "bounds[i-1] < x <= bounds[i]", NumPy's digitize(right=True)
    np.testing.assert_array_equal(npy(r), np.digitize(x, bounds, right=not right))
    assert r.dtype == np.int64 and ng.bucketize(T(x), T(bounds), out_int32=True).dtype == np.int32
    s = ng.bucketize(2.5, T(bounds), right=right)
    assert s.shape == () and npy(s) == np.digitize(2.5, bounds, right=not right)
    if torch is not None:
        np.testing.assert_array_equal(npy(r), torch.bucketize(torch_of(x), torch_of(bounds), right=right).numpy())


@pytest.mark.parametrize("dtype", [np.int64, np.float32])
def test_unique(dtype):
    a = np.random.default_rng(3).integers(-3, 4, (4, 5)).astype(dtype)
    x = T(a)
    out = ng.unique(x)
    assert isinstance(out, ng.Tensor) and out.dtype == dtype
    np.testing.assert_array_equal(npy(out), np.unique(a))
    o, inv = ng.unique(x, return_inverse=True)
    assert inv.shape == a.shape and inv.dtype == np.int64
    np.testing.assert_array_equal(npy(o)[npy(inv)], a)
    o, cnt = ng.unique(x, return_counts=True)
    np.testing.assert_array_equal(npy(cnt), np.unique(a, return_counts=True)[1])
    o, inv, cnt = x.unique(sorted=True, return_inverse=True, return_counts=True)
    assert int(npy(cnt).sum()) == a.size
    if torch is not None:
        tr = torch.unique(torch_of(a), return_inverse=True, return_counts=True)
        for mine, theirs in zip((o, inv, cnt), tr):
            np.testing.assert_array_equal(npy(mine), theirs.numpy())


def test_unique_nan_zero_dim_and_dim():
    a = np.array([1.0, np.nan, 0.0, np.nan, 1.0])
    o, cnt = ng.unique(T(a), return_counts=True)
    assert np.isnan(npy(o)).sum() == 2 and npy(o)[:2].tolist() == [0.0, 1.0]  # each NaN distinct, as torch
    np.testing.assert_array_equal(npy(cnt), [1, 2, 1, 1])
    if torch is not None:
        np.testing.assert_array_equal(npy(cnt), torch.unique(torch_of(a), return_counts=True)[1].numpy())
    z = ng.unique(T(np.array(3.0)))
    assert z.shape == (1,) and npy(z)[0] == 3.0
    with pytest.raises(NotImplementedError, match="unique: dim=0"):
        ng.unique(T(np.ones((2, 2))), dim=0)


# ---- multinomial ---------------------------------------------------------------------------------
W = np.array([0.0, 1.0, 3.0, 0.0, 2.0, 4.0])


def test_multinomial_reproducible_and_shapes():
    x = T(W)
    ng.manual_seed(7)
    a = ng.multinomial(x, 1000, replacement=True)
    b = ng.multinomial(T(np.stack([W, W[::-1]])), 3)
    ng.manual_seed(7)
    np.testing.assert_array_equal(npy(ng.multinomial(x, 1000, replacement=True)), npy(a))
    np.testing.assert_array_equal(npy(ng.multinomial(T(np.stack([W, W[::-1]])), 3)), npy(b))
    ng.manual_seed(8)
    assert not np.array_equal(npy(ng.multinomial(x, 1000, replacement=True)), npy(a))
    assert a.shape == (1000,) and a.dtype == np.int64 and b.shape == (2, 3) and b.dtype == np.int64
    g1, g2 = ng.Generator().manual_seed(3), ng.Generator().manual_seed(3)
    np.testing.assert_array_equal(npy(x.multinomial(50, True, generator=g1)), npy(x.multinomial(50, True, generator=g2)))


@pytest.mark.parametrize("replacement", [False, True])
def test_multinomial_never_draws_zero_weights(replacement):
    ng.manual_seed(0)
    w = np.tile(W, (500, 1)) * np.random.default_rng(0).uniform(0.5, 2, (500, 1))
    w[::7, 5] = 0.0  # some rows lose another category
    k = 3 if not replacement else 50
    draws = npy(ng.multinomial(T(w.astype(np.float32)), k, replacement=replacement))
    assert (np.take_along_axis(w, draws, 1) > 0).all()
    if not replacement:
        assert all(len(set(row)) == k for row in draws)
        full = npy(ng.multinomial(T(W), 4))  # as many draws as nonzero weights: all of them
        assert sorted(full) == [1, 2, 4, 5]


def test_multinomial_frequencies_with_replacement():
    ng.manual_seed(1)
    N = 20000
    p = W / W.sum()
    draws = npy(ng.multinomial(T(W.astype(np.float32)), N, replacement=True))
    freq = np.bincount(draws, minlength=len(W)) / N
    within_5se(freq, p, np.sqrt(p * (1 - p) / N) + 1e-12)
    assert freq[0] == 0 and freq[3] == 0


def test_multinomial_without_replacement_is_sequential_sampling():
    ng.manual_seed(2)
    N = 20000
    p = W / W.sum()
    draws = npy(ng.multinomial(T(np.tile(W, (N, 1))), 2))
    f1 = np.bincount(draws[:, 0], minlength=len(W)) / N
    within_5se(f1, p, np.sqrt(p * (1 - p) / N) + 1e-12)
    # the second draw: P(j) = sum_{i != j} p_i p_j / (1 - p_i)
    p2 = np.array([sum(p[i] * p[j] / (1 - p[i]) for i in range(len(p)) if i != j) for j in range(len(p))])
    f2 = np.bincount(draws[:, 1], minlength=len(W)) / N
    within_5se(f2, p2, np.sqrt(p2 * (1 - p2) / N) + 1e-12)


@pytest.mark.parametrize("args,kwargs,pattern", [
    ((np.array(1.0), 1), {}, "prob_dist must be 1 or 2 dim"),
    ((np.ones((2, 2, 2)), 1), {}, "prob_dist must be 1 or 2 dim"),
    ((np.array([1, 2]), 1), {}, "floating-point dtypes"),
    ((W, 0), {}, "n_sample <= 0"),
    ((W, -2), {"replacement": True}, "n_sample <= 0"),
    ((W, 7), {}, r"n_sample > prob_dist.size\(-1\)"),
    ((np.array([1.0, -1.0]), 1), {}, "element < 0"),
    ((np.array([1.0, np.inf]), 1), {"replacement": True}, "inf"),
    ((np.array([1.0, np.nan]), 1), {}, "nan"),
    ((np.array([[1.0, 1.0], [0.0, 0.0]]), 1), {}, "sum of probabilities <= 0"),
    ((W, 5), {}, "not enough categories with nonzero probability"),
])
def test_multinomial_errors(args, kwargs, pattern):
    a, n = args
    with pytest.raises(RuntimeError, match=pattern):
        ng.multinomial(T(a), n, **kwargs)
    if torch is not None and "nonzero" not in pattern:  # (torch 2.x's CPU kernel no longer checks that one)
        with pytest.raises(RuntimeError):
            torch.multinomial(torch_of(a), n, **kwargs)


# ---- bernoulli / normal / poisson ----------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_bernoulli(dtype):
    N = 20000
    p = np.array([0.0, 0.1, 0.5, 0.9, 1.0], dtype=dtype)
    ng.manual_seed(3)
    x = T(np.tile(p, (N, 1)))
    s = ng.bernoulli(x)
    assert s.shape == (N, 5) and s.dtype == dtype
    v = npy(s)
    assert set(np.unique(v)) <= {0.0, 1.0}
    assert (v[:, 0] == 0).all() and (v[:, 4] == 1).all()
    pp = p.astype(np.float64)
    within_5se(v.mean(axis=0), pp, np.sqrt(pp * (1 - pp) / N) + 1e-12)
    ng.manual_seed(3)
    np.testing.assert_array_equal(npy(x.bernoulli()), v)
    q = ng.bernoulli(T(np.zeros((N,), dtype=np.int64)), 0.25)
    assert q.dtype == np.int64 and q.shape == (N,)
    within_5se(npy(q).mean(), 0.25, np.sqrt(0.25 * 0.75 / N))


def test_bernoulli_errors_and_gradient():
    for probs in ([0.5, 1.5], [0.5, -0.1], [0.5, np.nan]):
        with pytest.raises(RuntimeError, match="bernoulli: expected all probabilities"):
            ng.bernoulli(T(np.array(probs)))
    with pytest.raises(RuntimeError, match="p=2"):
        ng.bernoulli(T(np.ones(2)), 2.0)
    with pytest.raises(NotImplementedError, match="bernoulli"):
        ng.bernoulli(T(np.array([1, 0])))
    x = T(np.full(4, 0.5), requires_grad=True)
    s = ng.bernoulli(x)
    assert s.requires_grad
    (s * ng.tensor(np.arange(4.0))).sum().backward()
    np.testing.assert_array_equal(npy(x.grad), np.zeros(4))
    if torch is not None:
        tx = torch.full((4,), 0.5, dtype=torch.float64, requires_grad=True)
        (torch.bernoulli(tx) * torch.arange(4.0)).sum().backward()
        np.testing.assert_array_equal(npy(x.grad), tx.grad.numpy())


def _check_normal_moments(sample, mean, std, axis=0):
    n = sample.shape[axis]
    within_5se(sample.mean(axis=axis), mean, std / np.sqrt(n))
    within_5se(sample.var(axis=axis, ddof=1), std ** 2, std ** 2 * np.sqrt(2.0 / (n - 1)))


def test_normal_tensor_float_combinations():
    N = 20000
    mean = np.array([-2.0, 0.0, 3.0], dtype=np.float32)
    std = np.array([0.5, 1.0, 2.0])
    ng.manual_seed(4)
    a = ng.normal(T(np.tile(mean, (N, 1))), 1.5)  # Tensor mean, float std
    assert a.shape == (N, 3) and a.dtype == np.float32
    _check_normal_moments(npy(a).astype(np.float64), mean, 1.5)
    b = ng.normal(0.5, T(np.tile(std, (N, 1))))  # float mean, Tensor std
    assert b.shape == (N, 3) and b.dtype == np.float64
    _check_normal_moments(npy(b), 0.5, std)
    c = ng.normal(T(mean.astype(np.float64)), T(np.ones((N, 1)) * 2.0))  # broadcasting Tensor, Tensor
    assert c.shape == (N, 3) and c.dtype == np.float64
    _check_normal_moments(npy(c), mean, 2.0)
    d = ng.normal(1.0, 3.0, (N, 2))  # float, float, size
    assert d.shape == (N, 2) and d.dtype == ng.get_default_dtype()
    _check_normal_moments(npy(d).astype(np.float64), 1.0, 3.0)
    e = ng.normal(0.0, 1.0, size=(3,), dtype=ng.float64, requires_grad=True)
    assert e.dtype == np.float64 and e.requires_grad and e.is_leaf
    ng.manual_seed(4)
    np.testing.assert_array_equal(npy(ng.normal(T(np.tile(mean, (N, 1))), 1.5)), npy(a))
    g1, g2 = ng.Generator().manual_seed(9), ng.Generator().manual_seed(9)
    np.testing.assert_array_equal(npy(ng.normal(0.0, 1.0, (5,), generator=g1)), npy(ng.normal(0.0, 1.0, (5,), generator=g2)))


def test_normal_errors_and_gradient():
    with pytest.raises(RuntimeError, match="std >= 0.0, but found std -1"):
        ng.normal(T(np.zeros(2)), -1.0)
    with pytest.raises(RuntimeError, match="all elements of std >= 0.0"):
        ng.normal(T(np.zeros(2)), T(np.array([1.0, -1.0])))
    with pytest.raises(RuntimeError, match="std >= 0.0"):
        ng.normal(0.0, -1.0, (2,))
    with pytest.raises(TypeError, match="size is required"):
        ng.normal(0.0, 1.0)
    with pytest.raises(TypeError, match="size is only accepted"):
        ng.normal(T(np.zeros(2)), 1.0, (2,))
    with pytest.raises(NotImplementedError, match="normal"):
        ng.normal(T(np.zeros(2, dtype=np.int64)), 1.0)
    with pytest.raises(RuntimeError, match="not broadcastable"):
        ng.normal(T(np.zeros(4)), T(np.ones((2, 2))))
    m = T(np.zeros(3), requires_grad=True)
    s = T(np.ones(3), requires_grad=True)
    out = ng.normal(m, s)
    assert out.requires_grad
    (out * ng.tensor(np.arange(3.0))).sum().backward()
    np.testing.assert_array_equal(npy(m.grad), np.zeros(3))
    np.testing.assert_array_equal(npy(s.grad), np.zeros(3))
    if torch is not None:
        tm = torch.zeros(3, dtype=torch.float64, requires_grad=True)
        (torch.normal(tm, 1.0) * torch.arange(3.0)).sum().backward()
        np.testing.assert_array_equal(npy(m.grad), tm.grad.numpy())


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_poisson(dtype):
    N = 20000
    lam = np.array([0.0, 0.5, 4.0, 30.0], dtype=dtype)
    ng.manual_seed(5)
    x = T(np.tile(lam, (N, 1)))
    s = ng.poisson(x)
    assert s.shape == (N, 4) and s.dtype == dtype
    v = npy(s).astype(np.float64)
    assert (v == np.round(v)).all() and (v >= 0).all() and (v[:, 0] == 0).all()
    L = lam[1:].astype(np.float64)
    within_5se(v[:, 1:].mean(axis=0), L, np.sqrt(L / N))
    within_5se(v[:, 1:].var(axis=0, ddof=1), L, np.sqrt((L + 2 * L ** 2) / N))
    ng.manual_seed(5)
    np.testing.assert_array_equal(npy(ng.poisson(x)), npy(s))


def test_poisson_errors_and_gradient():
    for rate in (-1.0, np.nan):
        with pytest.raises(RuntimeError, match="invalid Poisson rate"):
            ng.poisson(T(np.array([1.0, rate])))
        if torch is not None:
            with pytest.raises(RuntimeError, match="invalid Poisson rate"):
                torch.poisson(torch_of(np.array([1.0, rate])))
    with pytest.raises(NotImplementedError, match="poisson"):
        ng.poisson(T(np.array([1, 2])))
    x = T(np.full(3, 2.0), requires_grad=True)
    s = ng.poisson(x)
    assert s.requires_grad
    s.sum().backward()
    np.testing.assert_array_equal(npy(x.grad), np.zeros(3))
