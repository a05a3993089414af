"""Indexing family: getitem/setitem, gather/scatter, index_select/index_add, masks,
take_along_dim, one_hot, embedding and the in-place writers."""
import numpy as np
import pytest

import numbagrad as ng
from numbagrad.backend import config
from optest import check_op, check_grad, check_torch, randn, torch

needs_torch = pytest.mark.skipif(torch is None, reason="torch not installed")


def I(*v):  # noqa: E743 - an int64 index array
    return np.array(v, dtype=np.int64)


def _t(idx):
    """A numpy index (tuple) converted for torch."""
    if torch is None:
        return None
    conv = (lambda i: torch.from_numpy(i) if isinstance(i, np.ndarray) else i)
    return tuple(conv(i) for i in idx) if isinstance(idx, tuple) else conv(idx)


def _tf(fn):
    return fn if torch is not None else None


# ---- getitem ------------------------------------------------------------------------------------
@pytest.mark.parametrize("idx", [2, -1, slice(1, 4), slice(None, None, 2), (slice(None), 1), (Ellipsis, -2),
                                 (None, 1, slice(0, 3, 2)), (1, 2), (-1, -1, Ellipsis), (slice(-3, None), None)])
def test_getitem_basic(idx):
    x = randn(4, 5, seed=1)
    check_op(lambda t: t[idx], lambda a: a[idx], [x], torch_fn=_tf(lambda t: t[idx]))


def test_getitem_basic_is_view():
    x = ng.tensor(np.arange(12.0).reshape(3, 4))
    v = x[1, 1:3]
    assert v._base is x and np.shares_memory(v.array, x.array)
    s = x[2, 3]  # 0-d result is still a view, not a NumPy scalar
    assert s.shape == () and isinstance(s.array, np.ndarray) and np.shares_memory(s.array, x.array)
    v2 = v[0]
    assert v2._base is x
    before = x._version_value
    v.fill_(-1.0)
    assert x._version_value == before + 1 and x.array[1, 1] == -1 and x.array[1, 2] == -1


ADVANCED = [
    I(2, 0, 2, -1),                                   # duplicates and a negative (row kernel)
    I(),                                              # empty
    np.array([[0, 1], [3, 3]]),                       # 2-D index on axis 0
    (slice(None), I(4, 0, 0)),                        # one array on axis 1 (row kernel, A > 1)
    (Ellipsis, I(1, 1)),                              # Ellipsis then array on the last axis
    (I(0, 2, 2), I(1, 1, 1)),                         # two arrays: duplicate positions (np.add.at)
    (I(0, 3), slice(1, 4)),                           # array then slice
    (1, I(0, 0, 4)),                                  # int with an array
    (None, I(1, 3)),                                  # None then array
    np.array([True, False, True, True]),              # bool mask on axis 0
    (slice(None), np.array([True, False, False, True, True])),
]


@pytest.mark.parametrize("idx", ADVANCED, ids=lambda i: repr(i)[:40])
def test_getitem_advanced(idx):
    x = randn(4, 5, seed=2)
    check_op(lambda t: t[idx], lambda a: a[idx], [x], torch_fn=_tf(lambda t: t[_t(idx)]))


def test_getitem_full_mask_and_3d_mixed():
    x = randn(3, 4, 2, seed=3)
    mask = x > 0.2
    check_op(lambda t: t[mask], lambda a: a[mask], [x], torch_fn=_tf(lambda t: t[torch.from_numpy(mask)]))
    idx = (I(0, 2, 0), slice(None), I(1, 0, 1))
    check_op(lambda t: t[idx], lambda a: a[idx], [x], torch_fn=_tf(lambda t: t[_t(idx)]))


def test_getitem_tensor_and_list_indices():
    x = ng.tensor(np.arange(12.0).reshape(3, 4), requires_grad=True)
    np.testing.assert_array_equal(x[ng.tensor([2, 2, 0])].detach().numpy(), x.array[[2, 2, 0]])
    np.testing.assert_array_equal(x[[2, 0], [1, 1]].detach().numpy(), x.array[[2, 0], [1, 1]])
    np.testing.assert_array_equal(x[ng.tensor([True, False, True])].detach().numpy(), x.array[[0, 2]])
    y = x[ng.tensor(1)]  # a 0-d integer tensor indexes like an int (a view)
    assert y.shape == (4,) and y._base is x
    x[ng.tensor([0, 0, 0]), ng.tensor([1, 1, 3])].sum().backward()
    expected = np.zeros((3, 4))
    expected[0, 1], expected[0, 3] = 2.0, 1.0
    np.testing.assert_array_equal(x.grad.numpy(), expected)
    assert x[[]].shape == (0, 4)


def test_getitem_0d_and_scalar_results():
    x = randn(seed=4)  # 0-d
    check_op(lambda t: t[...], lambda a: a[...], [x])
    check_op(lambda t: t[None], lambda a: a[None], [x])
    v = randn(6, seed=5)
    check_op(lambda t: t[3], lambda a: a[3], [v], torch_fn=_tf(lambda t: t[3]))


def test_getitem_large_rows_parallel_path():
    n, d = 3000, 40  # 120k-element gradient: the prange twin of index_add_fwd
    w = randn(500, d, seed=6)
    idx = np.random.default_rng(0).integers(0, 500, n)
    x = ng.tensor(w, requires_grad=True)
    g = randn(n, d, seed=7)
    x[idx].backward(ng.tensor(g))
    expected = np.zeros_like(w)
    np.add.at(expected, idx, g)
    np.testing.assert_allclose(x.grad.numpy(), expected, rtol=1e-12, atol=1e-12)


def test_getitem_errors():
    x = ng.zeros(3, 4)
    with pytest.raises(IndexError, match=r"getitem: index 5 is out of bounds.*size 3.*\(3, 4\)"):
        x[5]
    with pytest.raises(IndexError, match=r"getitem: index -7 is out of bounds.*\(3, 4\)"):
        x[:, [0, -7]]
    with pytest.raises(IndexError, match=r"getitem: .*integer.*or bool.*got dtype float32"):
        x[ng.tensor([1.0])]
    with pytest.raises(IndexError, match=r"getitem: only integers.*got float"):
        x[1.5]
    with pytest.raises(IndexError, match=r"getitem: too many indices"):
        x[0, 0, 0]
    with pytest.raises(IndexError, match=r"getitem: boolean index did not match"):
        x[np.array([True, False])]


# ---- setitem ------------------------------------------------------------------------------------
def test_setitem_inplace_no_grad():
    x = ng.zeros(3, 4)
    base_version = x._version_value
    x[1] = 2.0
    x[:, 0] = ng.tensor([1.0, 2.0, 3.0])
    x[ng.tensor([0, 2]), 3] = -1.0
    x[x.array > 2.5] = 9.0
    expected = np.zeros((3, 4), np.float32)
    expected[1] = 2
    expected[:, 0] = [1, 2, 3]
    expected[[0, 2], 3] = -1
    expected[expected > 2.5] = 9
    np.testing.assert_array_equal(x.numpy(), expected)
    assert x._version_value == base_version + 4
    row = x[0]
    row[1:3] = 5.0  # writes through a view into the base
    assert x.array[0, 1] == 5.0 and x.array[0, 2] == 5.0


@pytest.mark.parametrize("idx,vshape", [
    ((1,), (4,)), ((slice(None), 2), (3,)), ((slice(0, 2), slice(1, 3)), (1, 2)),
    ((I(0, 2),), (4,)), ((np.array([True, False, True]),), (2, 1)), ((I(2, 0), I(3, 1)), ()),
])
def test_setitem_grad(idx, vshape):
    x0, v0 = randn(3, 4, seed=8), randn(*vshape, seed=9)

    def fn(x, v):
        y = x * 1.0
        y[idx] = v
        return y * y

    def ref(x, v):
        y = x.copy()
        y[idx] = v
        return y * y

    check_op(fn, ref, [x0, v0], noncontig=False)

    def tfn(x, v):
        y = x * 1.0
        y[_t(idx)] = v
        return y * y
    check_torch(fn, _tf(tfn), [x0, v0])


def test_setitem_scalar_value_grad_and_version():
    x = ng.tensor(randn(3, 4, seed=10), requires_grad=True)
    y = x * 2.0
    v = y._version_value
    y[1, 1:] = 0.5
    assert y.grad_fn.__class__.__name__ == "IndexPut" and y._version_value == v + 1
    y.sum().backward()
    expected = np.full((3, 4), 2.0)
    expected[1, 1:] = 0
    np.testing.assert_array_equal(x.grad.numpy(), expected)


def test_setitem_value_requires_grad_into_plain_buffer():
    w = ng.tensor(randn(4, seed=11), requires_grad=True)
    buf = ng.zeros(3, 4, dtype=ng.float64)
    buf[1] = w * 3.0
    buf[2, :2] = w[:2]
    assert buf.requires_grad and buf.grad_fn is not None
    (buf * buf).sum().backward()
    w0 = w.detach().numpy()
    expected = 18.0 * w0
    expected[:2] += 2.0 * w0[:2]
    np.testing.assert_allclose(w.grad.numpy(), expected)


def test_setitem_leaf_requires_grad_raises():
    x = ng.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="__setitem__: a leaf tensor that requires grad"):
        x[0] = 2.0
    with ng.no_grad():
        x[0] = 2.0  # allowed: optimizers do this
    assert x.array[0] == 2.0


def test_setitem_saved_tensor_check():
    x = ng.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x * 1.0
    z = y * y  # saves y
    with ng.no_grad():
        y[0] = 5.0
    with pytest.raises(RuntimeError, match="modified by an in-place operation"):
        z.sum().backward()


def test_setitem_errors():
    x = ng.zeros(2, 3)
    with pytest.raises(IndexError, match=r"setitem: index 2 is out of bounds.*\(2, 3\)"):
        x[2] = 1.0
    with pytest.raises(ValueError, match=r"setitem: .*tensor shape \(2, 3\), value shape \(2,\)"):
        x[0] = ng.zeros(2)


# ---- gather / scatter ----------------------------------------------------------------------------
GATHER = [
    ((3, 4), 0, np.array([[0, 1, 2, 0], [2, 2, 2, 2]])),
    ((3, 4), 1, np.array([[3, 0], [1, 1], [0, 3]])),
    ((3, 4), -1, np.array([[3, 3, 3, 3, 3, 3], [0, 1, 2, 3, 0, 1], [1, 1, 1, 1, 1, 1]])),  # longer than input
    ((3, 4), 1, np.array([[1], [2]])),                          # smaller than input in dim 0
    ((2, 3, 4), 1, np.array([[[0, 2, 1, 1]], [[2, 2, 0, 0]]])),
    ((5,), 0, np.array([4, 4, 0])),
    ((), 0, np.array(0)),
]


def _ref_gather(x, idx, dim):
    if x.ndim == 0:
        return x.copy()
    sl = tuple(slice(0, idx.shape[d]) if d != dim % x.ndim else slice(None) for d in range(x.ndim))
    return np.take_along_axis(x[sl], idx, axis=dim)


@pytest.mark.parametrize("shape,dim,idx", GATHER)
def test_gather(shape, dim, idx):
    idx = idx.astype(np.int64)
    x = randn(*shape, seed=12)
    check_op(lambda t, i: ng.gather(t, dim, i), lambda a, i: _ref_gather(a, i, dim), [x, idx],
             torch_fn=_tf(lambda t, i: torch.gather(t, dim, i)))
    check_op(lambda t, i: t.gather(dim, i), lambda a, i: _ref_gather(a, i, dim), [x, idx], dtypes=(np.float32,),
             noncontig=False)


def test_gather_int32_index_and_int_input():
    x = ng.tensor(np.arange(12).reshape(3, 4))
    out = ng.gather(x, 1, ng.tensor(np.array([[1, 1], [0, 3], [2, 2]], dtype=np.int32)))
    assert out.dtype == np.int64
    np.testing.assert_array_equal(out.numpy(), [[1, 1], [4, 7], [10, 10]])


def _ref_scatter_add(x, idx, src, dim):
    out = x.copy()
    for pos in np.ndindex(*idx.shape):
        tgt = list(pos)
        tgt[dim] = idx[pos]
        out[tuple(tgt)] += src[pos]
    return out


def _ref_scatter(x, idx, src, dim):
    out = x.copy()
    for pos in np.ndindex(*idx.shape):
        tgt = list(pos)
        tgt[dim] = idx[pos]
        out[tuple(tgt)] = src[pos] if isinstance(src, np.ndarray) else src
    return out


SCATTER_ADD = [
    ((3, 4), 0, np.array([[0, 1, 2, 0], [0, 1, 0, 0], [2, 2, 2, 2]]), (3, 4)),  # duplicates
    ((3, 4), 1, np.array([[3, 3, 3], [0, 1, 0]]), (2, 5)),                      # smaller index than src
    ((2, 3, 2), 1, np.array([[[0, 0], [0, 2]], [[1, 1], [2, 1]]]), (2, 2, 2)),
    ((4,), 0, np.array([1, 1, 1, 3]), (5,)),
]


@pytest.mark.parametrize("shape,dim,idx,sshape", SCATTER_ADD)
def test_scatter_add(shape, dim, idx, sshape):
    x, s = randn(*shape, seed=13), randn(*sshape, seed=14)
    # torch's own backward rejects a src larger than index, so it is the oracle only when they match
    tfn = _tf(lambda t, i, u: torch.scatter_add(t, dim, i, u)) if idx.shape == sshape else None
    check_op(lambda t, i, u: ng.scatter_add(t, dim, i, u), lambda a, i, u: _ref_scatter_add(a, i, u, dim),
             [x, idx, s], torch_fn=tfn)


@pytest.mark.parametrize("shape,dim,idx,sshape", [
    ((3, 4), 0, np.array([[0, 1, 2, 0], [2, 0, 1, 1]]), (2, 4)),   # no duplicates per column
    ((3, 4), 1, np.array([[3, 1], [0, 2]]), (2, 2)),
    ((5,), 0, np.array([4, 0, 2]), (3,)),
])
def test_scatter(shape, dim, idx, sshape):
    x, s = randn(*shape, seed=15), randn(*sshape, seed=16)
    check_op(lambda t, i, u: ng.scatter(t, dim, i, u), lambda a, i, u: _ref_scatter(a, i, u, dim),
             [x, idx, s], torch_fn=_tf(lambda t, i, u: torch.scatter(t, dim, i, u)))
    check_op(lambda t, i: ng.scatter(t, dim, i, 2.5), lambda a, i: _ref_scatter(a, i, 2.5, dim), [x, idx],
             torch_fn=_tf(lambda t, i: torch.scatter(t, dim, i, 2.5)))


def test_scatter_src_larger_than_index():
    # Only the leading index.shape block of src is used (and gets gradient).
    x, s, idx = randn(3, 4, seed=42), randn(3, 5, seed=43), np.array([[3, 1], [0, 2]])
    check_op(lambda t, i, u: ng.scatter(t, 1, i, u), lambda a, i, u: _ref_scatter(a, i, u, 1), [x, idx, s])


def test_scatter_duplicate_indices_grad():
    # With duplicates the winning write is unspecified in PyTorch; numbagrad's is the last.
    x = ng.tensor(np.zeros(3), requires_grad=True)
    s = ng.tensor(np.array([1.0, 2.0, 3.0]), requires_grad=True)
    y = ng.scatter(x * 1.0, 0, np.array([1, 1, 0]), s)
    np.testing.assert_array_equal(y.detach().numpy(), [3.0, 2.0, 0.0])
    y.backward(ng.tensor([10.0, 20.0, 30.0]))
    np.testing.assert_array_equal(x.grad.numpy(), [0.0, 0.0, 30.0])
    np.testing.assert_array_equal(s.grad.numpy(), [20.0, 20.0, 10.0])  # torch: grad.gather(dim, index)


def test_gather_scatter_add_large_parallel_path():
    rng = np.random.default_rng(1)
    x = randn(300, 400, seed=17)
    idx = rng.integers(0, 300, (300, 400))
    t = ng.tensor(x, requires_grad=True)
    out = ng.gather(t, 0, idx)
    np.testing.assert_array_equal(out.detach().numpy(), np.take_along_axis(x, idx, 0))
    g = randn(300, 400, seed=18)
    out.backward(ng.tensor(g))
    np.testing.assert_allclose(t.grad.numpy(), _np_scatter_add0(np.zeros_like(x), idx, g), rtol=1e-12, atol=1e-12)


def _np_scatter_add0(out, idx, src):
    cols = np.broadcast_to(np.arange(idx.shape[1]), idx.shape)
    np.add.at(out, (idx, cols), src)
    return out


def test_gather_scatter_errors():
    x = ng.zeros(3, 4)
    with pytest.raises(IndexError, match=r"gather: index 3 is out of bounds for dimension 0 with size 3 .*\(3, 4\)"):
        ng.gather(x, 0, np.array([[0, 3]]))
    with pytest.raises(IndexError, match=r"gather: index -1 is out of bounds"):
        ng.gather(x, 1, np.array([[0, -1]]))
    with pytest.raises(RuntimeError, match=r"gather: expected an integer .*index.*got dtype float32"):
        ng.gather(x, 0, ng.tensor([[0.0]]))
    with pytest.raises(RuntimeError, match=r"gather: expected an integer .*got dtype bool"):
        ng.gather(x, 0, np.array([[True]]))
    with pytest.raises(RuntimeError, match=r"gather: index of shape \(4,\) must have the same number of dimensions"):
        ng.gather(x, 0, np.array([0, 1, 2, 0]))
    with pytest.raises(RuntimeError, match=r"gather: index of shape \(4, 1\) is larger than input of shape \(3, 4\)"):
        ng.gather(x, 1, np.zeros((4, 1), np.int64))
    with pytest.raises(IndexError, match=r"gather: Dimension out of range .*but got 2\)"):
        ng.gather(x, 2, np.zeros((1, 1), np.int64))
    with pytest.raises(RuntimeError, match=r"scatter_add: index of shape \(2, 2\) must be no larger than src"):
        ng.scatter_add(x, 0, np.zeros((2, 2), np.int64), ng.zeros(1, 2))
    with pytest.raises(IndexError, match=r"scatter: index 7 is out of bounds for dimension 1 with size 4"):
        ng.scatter(x, 1, np.array([[7]]), 1.0)


# ---- index_select / index_add ---------------------------------------------------------------------
@pytest.mark.parametrize("shape,dim,idx", [
    ((4, 3), 0, I(3, 0, 3, 3)), ((4, 3), 1, I(2, 2)), ((2, 3, 4), -2, I(0, 2)), ((5,), 0, I()),
    ((4, 3), 0, np.array(2)), ((), 0, I(0)),
])
def test_index_select(shape, dim, idx):
    x = randn(*shape, seed=19)

    def ref(a, i):
        return a.copy() if a.ndim == 0 else np.take(a, i.reshape(-1), axis=dim)
    check_op(lambda t, i: ng.index_select(t, dim, i), ref, [x, idx],
             torch_fn=_tf(lambda t, i: torch.index_select(t, dim, i)))


@pytest.mark.parametrize("shape,dim,idx,alpha", [
    ((4, 3), 0, I(3, 0, 3, 3), 1), ((4, 3), 1, I(2, 2), -0.5), ((2, 3, 4), 2, I(0, 3, 0), 2.0), ((), 0, I(0), 3),
])
def test_index_add(shape, dim, idx, alpha):
    x = randn(*shape, seed=20)
    sshape = list(shape or (1,))
    sshape[dim] = idx.size
    s = randn(*sshape, seed=21).reshape(tuple(sshape) if shape else ())

    def ref(a, i, u):
        out = a.copy().reshape(a.shape or (1,))
        np.add.at(np.moveaxis(out, dim, 0), i, alpha * np.moveaxis(u.reshape(tuple(sshape)), dim, 0))
        return out.reshape(a.shape)
    check_op(lambda t, i, u: ng.index_add(t, dim, i, u, alpha=alpha), ref, [x, idx, s],
             torch_fn=_tf(lambda t, i, u: torch.index_add(t, dim, i, u, alpha=alpha)))


def test_index_select_index_add_errors():
    x = ng.zeros(3, 4)
    with pytest.raises(IndexError, match=r"index_select: index -1 is out of bounds for dimension 0 with size 3"):
        ng.index_select(x, 0, I(0, -1))
    with pytest.raises(RuntimeError, match=r"index_select: index must be a vector.*\(1, 2\)"):
        ng.index_select(x, 0, np.zeros((1, 2), np.int64))
    with pytest.raises(RuntimeError, match=r"index_select: expected an integer.*float64"):
        ng.index_select(x, 0, np.array([0.0]))
    with pytest.raises(RuntimeError, match=r"index_add: source of shape \(1, 4\) does not match: expected \(2, 4\)"):
        ng.index_add(x, 0, I(0, 1), ng.zeros(1, 4))
    with pytest.raises(IndexError, match=r"index_add: index 4 is out of bounds for dimension 1 with size 4"):
        ng.index_add(x, 1, I(4), ng.zeros(3, 1))


# ---- take_along_dim / take -------------------------------------------------------------------------
def test_take_along_dim():
    x = randn(3, 4, seed=22)
    idx = np.array([[-1], [0], [2]])
    check_op(lambda t, i: ng.take_along_dim(t, i, 1), lambda a, i: np.take_along_axis(a, i % 4, 1), [x, idx],
             torch_fn=_tf(lambda t, i: torch.take_along_dim(t, i, 1)))
    idx2 = np.array([[1, 2, -3]])  # broadcasts over dim 0
    check_op(lambda t, i: ng.take_along_dim(t, i, 1), lambda a, i: np.take_along_axis(a, i % 4, 1), [x, idx2],
             torch_fn=_tf(lambda t, i: torch.take_along_dim(t, i, 1)))
    x1 = randn(1, 4, seed=23)  # input broadcasts over dim 0
    idx3 = np.array([[0, 0], [3, 1], [2, 2]])
    check_op(lambda t, i: ng.take_along_dim(t, i, 1),
             lambda a, i: np.take_along_axis(np.broadcast_to(a, (3, 4)), i, 1), [x1, idx3],
             torch_fn=_tf(lambda t, i: torch.take_along_dim(t, i, 1)))
    flat = np.array([11, 0, 3, 5])
    check_op(lambda t, i: ng.take_along_dim(t, i), lambda a, i: a.reshape(-1)[i], [x, flat],
             torch_fn=_tf(lambda t, i: torch.take_along_dim(t, i)))
    am = ng.tensor(x).argmax(dim=1, keepdim=True)
    np.testing.assert_array_equal(ng.tensor(x).take_along_dim(am, 1).numpy()[:, 0], x.max(1))
    with pytest.raises(IndexError, match=r"take_along_dim: index 4 is out of bounds for dimension 1 with size 4"):
        ng.take_along_dim(ng.tensor(x), np.array([[4]]), 1)
    with pytest.raises(RuntimeError, match=r"take_along_dim: .*\(3, 4\).*\(2, 1\) are not broadcastable"):
        ng.take_along_dim(ng.tensor(x), np.zeros((2, 1), np.int64), 1)


def test_take():
    x = randn(3, 4, seed=24)
    idx = np.array([[11, 0], [-1, 0]])
    check_op(lambda t, i: ng.take(t, i), lambda a, i: a.reshape(-1)[i], [x, idx],
             torch_fn=_tf(lambda t, i: torch.take(t, i)))
    with pytest.raises(IndexError, match=r"take: index 12 is out of bounds .*size 12"):
        ng.take(ng.tensor(x), I(12))


# ---- masks --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("xshape,mshape", [((3, 4), (3, 4)), ((3, 4), (4,)), ((3, 1), (2, 3, 4)), ((), ())])
def test_masked_fill(xshape, mshape):
    x = randn(*xshape, seed=25)
    m = randn(*mshape, seed=26) > 0
    check_op(lambda t, k: ng.masked_fill(t, k, -2.0), lambda a, k: np.where(k, -2.0, a), [x, m],
             torch_fn=_tf(lambda t, k: torch.masked_fill(t, k, -2.0)))


def test_masked_fill_tensor_value_grad():
    x, m, v = randn(3, 4, seed=27), randn(3, 4, seed=28) > 0, randn(seed=29)
    check_op(lambda t, k, u: ng.masked_fill(t, k, u), lambda a, k, u: np.where(k, u, a), [x, m, v],
             torch_fn=_tf(lambda t, k, u: torch.masked_fill(t, k, u)))


def test_masked_fill_errors():
    x = ng.zeros(3)
    with pytest.raises(RuntimeError, match=r"masked_fill: expected a boolean mask, got mask of dtype int64"):
        ng.masked_fill(x, ng.tensor([1, 0, 1]), 1.0)
    with pytest.raises(RuntimeError, match=r"masked_fill: mask of shape \(2,\) is not broadcastable .*\(3,\)"):
        ng.masked_fill(x, np.array([True, False]), 1.0)
    with pytest.raises(RuntimeError, match=r"masked_fill: value must be a 0-dimensional tensor.*\(2,\)"):
        ng.masked_fill(x, np.array([True, False, True]), ng.zeros(2))
    with pytest.raises(RuntimeError, match=r"masked_fill_: mask of shape \(2, 3\) does not broadcast to .*\(3,\)"):
        x.masked_fill_(np.ones((2, 3), bool), 1.0)


@pytest.mark.parametrize("xshape,mshape", [((3, 4), (3, 4)), ((4,), (3, 4)), ((3, 4), (3, 1))])
def test_masked_select(xshape, mshape):
    x = randn(*xshape, seed=30)
    m = randn(*mshape, seed=31) > 0
    shape = np.broadcast_shapes(xshape, mshape)
    check_op(lambda t, k: ng.masked_select(t, k), lambda a, k: np.broadcast_to(a, shape)[np.broadcast_to(k, shape)],
             [x, m], torch_fn=_tf(lambda t, k: torch.masked_select(t, k)))


def test_nonzero():
    a = np.array([[0.0, 1.5, 0.0], [2.0, 0.0, -1.0]])
    out = ng.nonzero(ng.tensor(a))
    assert out.dtype == np.int64
    np.testing.assert_array_equal(out.numpy(), np.argwhere(a))
    rows, cols = ng.nonzero(ng.tensor(a), as_tuple=True)
    np.testing.assert_array_equal(rows.numpy(), [0, 1, 1])
    np.testing.assert_array_equal(cols.numpy(), [1, 0, 2])
    assert ng.nonzero(ng.tensor(3.0)).shape == (1, 0)
    assert ng.nonzero(ng.tensor(0.0)).shape == (0, 0)
    assert ng.nonzero(ng.zeros(4)).shape == (0, 1)
    np.testing.assert_array_equal(ng.argwhere(ng.tensor(a)).numpy(), np.argwhere(a))
    if torch is not None:
        np.testing.assert_array_equal(out.numpy(), torch.nonzero(torch.from_numpy(a)).numpy())


# ---- one_hot / embedding ---------------------------------------------------------------------------
def test_one_hot():
    idx = np.array([[0, 3], [2, 2]])
    out = ng.one_hot(ng.tensor(idx))
    assert out.dtype == np.int64 and out.shape == (2, 2, 4)
    np.testing.assert_array_equal(out.numpy(), np.eye(4, dtype=np.int64)[idx])
    np.testing.assert_array_equal(ng.one_hot(ng.tensor(np.int64(1)), 3).numpy(), [0, 1, 0])
    assert ng.one_hot(ng.tensor(np.zeros(0, np.int64)), 5).shape == (0, 5)
    if torch is not None:
        np.testing.assert_array_equal(out.numpy(),
                                      torch.nn.functional.one_hot(torch.from_numpy(idx), 4).numpy())
    with pytest.raises(RuntimeError, match=r"one_hot: class value 3 is out of range for num_classes=3"):
        ng.one_hot(ng.tensor([0, 3]), 3)
    with pytest.raises(RuntimeError, match=r"one_hot: class values must be non-negative, got -1"):
        ng.one_hot(ng.tensor([0, -1]))
    with pytest.raises(RuntimeError, match=r"one_hot: expected an integer .*float32"):
        ng.one_hot(ng.tensor([0.0, 1.0]))


@pytest.mark.parametrize("padding_idx", [None, 2, -1])
def test_embedding(padding_idx):
    w = randn(5, 3, seed=32)
    idx = np.array([[0, 2, 2], [4, 1, 2]])  # duplicates accumulate in the weight gradient

    def ref(w_, i):
        return w_[i]
    check_op(lambda t, i: ng.embedding(i, t, padding_idx=padding_idx), ref, [w, idx], grad=False)
    check_torch(lambda t, i: ng.embedding(i, t, padding_idx=padding_idx),
                _tf(lambda t, i: torch.nn.functional.embedding(i, t, padding_idx=padding_idx)), [w, idx])
    wt = ng.tensor(w, requires_grad=True)
    g = randn(2, 3, 3, seed=33)
    ng.embedding(ng.tensor(idx), wt, padding_idx=padding_idx).backward(ng.tensor(g))
    expected = np.zeros_like(w)
    np.add.at(expected, idx.reshape(-1), g.reshape(-1, 3))
    if padding_idx is not None:
        expected[padding_idx] = 0
    np.testing.assert_allclose(wt.grad.numpy(), expected, rtol=1e-12)
    if padding_idx is None:
        check_grad(lambda t, i: ng.embedding(i, t), [w, idx])


@needs_torch
def test_embedding_scale_grad_by_freq_and_max_norm():
    w = randn(6, 4, seed=34) * 2
    idx = np.array([1, 1, 1, 5, 0])
    check_torch(lambda t, i: ng.embedding(i, t, scale_grad_by_freq=True),
                lambda t, i: torch.nn.functional.embedding(i, t, scale_grad_by_freq=True), [w, idx])
    wn = ng.tensor(w.copy(), requires_grad=True)
    wt = torch.tensor(w.copy(), requires_grad=True)
    out = ng.embedding(ng.tensor(idx), wn, max_norm=1.0)
    tout = torch.nn.functional.embedding(torch.from_numpy(idx), wt, max_norm=1.0)
    np.testing.assert_allclose(out.detach().numpy(), tout.detach().numpy(), rtol=1e-6)
    np.testing.assert_allclose(wn.detach().numpy(), wt.detach().numpy(), rtol=1e-6)


def test_embedding_large_and_errors():
    w = ng.tensor(randn(1000, 80, seed=35), requires_grad=True)
    idx = np.random.default_rng(2).integers(0, 1000, (40, 30))
    out = ng.embedding(ng.tensor(idx), w)  # 96k elements: the prange twins
    np.testing.assert_array_equal(out.detach().numpy(), w.array[idx])
    g = randn(40, 30, 80, seed=36)
    out.backward(ng.tensor(g))
    expected = np.zeros((1000, 80))
    np.add.at(expected, idx.reshape(-1), g.reshape(-1, 80))
    np.testing.assert_allclose(w.grad.numpy(), expected, rtol=1e-12, atol=1e-12)
    with pytest.raises(IndexError, match=r"embedding: index 1000 is out of range for an embedding table of 1000 rows"):
        ng.embedding(ng.tensor([1000]), w)
    with pytest.raises(IndexError, match=r"embedding: index -1 is out of range"):
        ng.embedding(ng.tensor([-1]), w)
    with pytest.raises(RuntimeError, match=r"embedding: expected an integer .*input.*float32"):
        ng.embedding(ng.tensor([1.0]), w)


# ---- in-place writers ----------------------------------------------------------------------------
INPLACE = [
    ("masked_fill_", lambda t, s: t.masked_fill_(ng.tensor(np.array([True, False, True, False])), 7.0),
     lambda t, s: t.masked_fill_(torch.tensor([True, False, True, False]), 7.0)),
    ("masked_fill_tensor", lambda t, s: t.masked_fill_(ng.tensor(np.array([True, False, True, False])), s[0, 0]),
     lambda t, s: t.masked_fill_(torch.tensor([True, False, True, False]), s[0, 0])),
    ("scatter_add_", lambda t, s: t.scatter_add_(0, ng.tensor(np.array([[0, 2, 2, 0], [0, 0, 1, 0]])), s),
     lambda t, s: t.scatter_add_(0, torch.tensor([[0, 2, 2, 0], [0, 0, 1, 0]]), s)),
    ("scatter_", lambda t, s: t.scatter_(0, ng.tensor(np.array([[0, 2, 2, 0]])), s[1:]),
     lambda t, s: t.scatter_(0, torch.tensor([[0, 2, 2, 0]]), s[1:])),
    ("scatter_value", lambda t, s: t.scatter_(1, ng.tensor(np.array([[0], [3], [1]])), -1.0),
     lambda t, s: t.scatter_(1, torch.tensor([[0], [3], [1]]), -1.0)),
    ("index_add_", lambda t, s: t.index_add_(0, ng.tensor(np.array([2, 2])), s, alpha=2.0),
     lambda t, s: t.index_add_(0, torch.tensor([2, 2]), s, alpha=2.0)),
    ("fill_", lambda t, s: t.fill_(3.0), lambda t, s: t.fill_(3.0)),
    ("fill_tensor", lambda t, s: t.fill_(s[1, 2]), lambda t, s: t.fill_(s[1, 2])),
    ("zero_", lambda t, s: t.zero_(), lambda t, s: t.zero_()),
    ("copy_", lambda t, s: t.copy_(s[0]), lambda t, s: t.copy_(s[0])),
]


@pytest.mark.parametrize("name,fn,tfn", INPLACE, ids=[c[0] for c in INPLACE])
def test_inplace_recording(name, fn, tfn):
    x0, s0 = randn(3, 4, seed=37), randn(2, 4, seed=38)

    def op(x, s):
        y = x * 1.0
        r = fn(y, s)
        assert r is y
        return y * y

    def top(x, s):
        y = x * 1.0
        tfn(y, s)
        return y * y

    with ng.no_grad():
        expected = op(ng.tensor(x0), ng.tensor(s0)).numpy()
    check_grad(op, [x0, s0])
    if torch is not None:
        check_torch(op, top, [x0, s0])
        np.testing.assert_allclose(expected, top(torch.tensor(x0), torch.tensor(s0)).numpy(), rtol=1e-12)


@pytest.mark.parametrize("name,fn,tfn", INPLACE, ids=[c[0] for c in INPLACE])
def test_inplace_direct(name, fn, tfn):
    x0, s0 = randn(3, 4, seed=39), randn(2, 4, seed=40)
    # Through a strided view of a plain tensor: written into the base's storage.
    base = ng.tensor(np.zeros((4, 3)))
    view = base.t()
    view.copy_(ng.tensor(x0))
    v0 = base._version_value
    buf = view.array
    assert fn(view, ng.tensor(s0)) is view and view.array is buf
    assert base._version_value == v0 + 1
    if torch is not None:
        expected = tfn(torch.tensor(x0), torch.tensor(s0)).numpy()
        np.testing.assert_allclose(base.numpy().T, expected, rtol=1e-12)
    # A leaf requiring grad: allowed under no_grad, an error otherwise.
    leaf = ng.tensor(x0.copy(), requires_grad=True)
    with ng.no_grad():
        fn(leaf, ng.tensor(s0))
    if torch is not None:
        np.testing.assert_allclose(leaf.detach().numpy(), expected, rtol=1e-12)
    with pytest.raises(RuntimeError, match="leaf tensor that requires grad"):
        fn(leaf, ng.tensor(s0))


def test_inplace_value_requires_grad_into_plain_tensor():
    s = ng.tensor(randn(4, seed=41), requires_grad=True)
    buf = ng.zeros(3, 4, dtype=ng.float64)
    buf.copy_(s)
    buf.index_add_(0, ng.tensor([1]), (s * 2.0).reshape(1, 4))
    assert buf.requires_grad
    buf.sum().backward()
    np.testing.assert_allclose(s.grad.numpy(), np.full(4, 5.0))


def test_inplace_reading_itself():
    x0 = np.arange(6.0).reshape(2, 3)
    x = ng.tensor(x0.copy())
    x.scatter_add_(0, ng.tensor([[1, 1, 1], [0, 0, 0]]), x)
    np.testing.assert_array_equal(x.numpy(), _ref_scatter_add(x0, np.array([[1, 1, 1], [0, 0, 0]]), x0, 0))
    y = ng.tensor(x0.copy())
    y.index_add_(0, ng.tensor([1, 0]), y)
    np.testing.assert_array_equal(y.numpy(), x0 + x0[::-1])


def test_inplace_errors():
    x = ng.zeros(3, 4)
    with pytest.raises(RuntimeError, match=r"copy_: src of shape \(2,\) is not broadcastable .*\(3, 4\)"):
        x.copy_(ng.zeros(2))
    with pytest.raises(RuntimeError, match=r"copy_: src of shape \(2, 3, 4\) does not broadcast"):
        x.copy_(ng.zeros(2, 3, 4))
    with pytest.raises(RuntimeError, match=r"fill_: value must be a 0-dimensional tensor.*\(1,\)"):
        x.fill_(ng.zeros(1))
    with pytest.raises(IndexError, match=r"scatter_add_: index 3 is out of bounds for dimension 0 with size 3"):
        x.scatter_add_(0, ng.tensor([[3]]), ng.ones(1, 1))


def test_methods_bound():
    x = ng.tensor(np.arange(6.0).reshape(2, 3))
    for name in ["gather", "scatter_add", "scatter", "index_select", "masked_fill", "take_along_dim", "index_add",
                 "masked_fill_", "scatter_add_", "index_add_", "fill_", "zero_", "copy_", "scatter_"]:
        assert callable(getattr(x, name)), name
    assert ng.gather is not None and ng.one_hot is not None and ng.embedding is not None
    assert x.index_select(1, ng.tensor([2, 0])).tolist() == [[2.0, 0.0], [5.0, 3.0]]


def test_kernels_found_by_backend():
    from numbagrad.backend import backend_of
    be = backend_of(np.zeros(1))
    for name in ["gather_fwd", "scatter_add_fwd", "scatter_fwd", "scatter_fill_fwd", "index_select_fwd",
                 "index_add_fwd", "embedding_fwd", "embedding_bwd", "one_hot_fwd"]:
        assert callable(be.kernel("indexing", name))
    assert config.PARALLEL_THRESHOLD > 0
