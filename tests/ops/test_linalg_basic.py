"""``numbagrad/ops/linalg_basic.py`` beyond its op-table rows (``tests/opdb_linalg.py``):
the ``beta``/``alpha`` forms (``beta=0`` with NaN and inf in ``input``), the in-place forms,
``tensordot``'s ``dims`` spellings, ``cross``'s default dimension, ``cdist``'s norms and
their gradients where distances or coordinates tie, ``block_diag``'s block shapes and
dtypes, integer inputs, and empty and one-element inputs: each against PyTorch (the
oracle; skipped without it) or NumPy."""
import warnings

import numpy as np
import pytest

import numbagrad as ng
from optest import randn

torch = pytest.importorskip("torch")

NAN, INF = float("nan"), float("inf")


def _pair(a, grad=True):
    """``a`` (a NumPy array) as a numbagrad tensor and a torch tensor, float64 arrays tracked."""
    req = grad and a.dtype.kind == "f"
    return ng.tensor(a, requires_grad=req), torch.tensor(a, requires_grad=req)


def both(f_ng, f_torch, *arrays, grad=True, rtol=1e-10, atol=1e-12):
    """Run ``f_ng`` and ``f_torch`` on the same inputs; compare the results (values, shape and
    dtype) and, with ``grad``, the gradients of every floating input for one random upstream."""
    pairs = [_pair(np.asarray(a), grad) for a in arrays]
    ours = f_ng(*[p[0] for p in pairs])
    theirs = f_torch(*[p[1] for p in pairs])
    assert tuple(ours.shape) == tuple(theirs.shape)
    assert str(ours.dtype) == str(theirs.dtype).replace("torch.", "")
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=rtol, atol=atol)
    if grad and ours.requires_grad:
        v = np.random.default_rng(7).standard_normal(tuple(ours.shape))
        ours.backward(ng.tensor(v))
        theirs.backward(torch.tensor(v))
        for (a, b), x in zip(pairs, arrays):
            if b.grad is None:
                continue
            assert a.grad is not None, "numbagrad gives no gradient where torch gives one"
            np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=rtol, atol=atol)
    return ours


# ---- beta and alpha ----------------------------------------------------------------------------
PRODUCTS = {  # name: (input shape, operand shapes)
    "addmm": ((2, 4), [(2, 3), (3, 4)]),
    "addmv": ((2,), [(2, 3), (3,)]),
    "addr": ((2, 3), [(2,), (3,)]),
    "baddbmm": ((2, 2, 4), [(2, 2, 3), (2, 3, 4)]),
    "addbmm": ((2, 4), [(2, 2, 3), (2, 3, 4)]),
}


@pytest.mark.parametrize("name", sorted(PRODUCTS))
@pytest.mark.parametrize("beta,alpha", [(1, 1), (0.5, -2.0), (0, 1), (0, 3), (2, 0), (-1, 0.25)])
def test_beta_alpha(name, beta, alpha):
    shape, ops = PRODUCTS[name]
    arrays = [randn(*shape, seed=1)] + [randn(*s, seed=2 + i) for i, s in enumerate(ops)]
    both(lambda *t: getattr(ng, name)(*t, beta=beta, alpha=alpha),
         lambda *t: getattr(torch, name)(*t, beta=beta, alpha=alpha), *arrays)


@pytest.mark.parametrize("name", sorted(PRODUCTS))
def test_beta_zero_ignores_nan_and_inf(name):
    shape, ops = PRODUCTS[name]
    bad = randn(*shape, seed=1)
    bad.reshape(-1)[0], bad.reshape(-1)[-1] = NAN, INF
    arrays = [bad] + [randn(*s, seed=2 + i) for i, s in enumerate(ops)]
    for beta in (0, 0.0):
        out = both(lambda *t: getattr(ng, name)(*t, beta=beta, alpha=2),
                   lambda *t: getattr(torch, name)(*t, beta=beta, alpha=2), *arrays)
        assert np.isfinite(out.detach().numpy()).all()
    # beta != 0: the NaN does reach the result
    out = getattr(ng, name)(*[ng.tensor(a) for a in arrays], beta=1e-3)
    assert np.isnan(out.numpy()).any()


def test_beta_zero_input_gets_a_zero_gradient_of_its_shape():
    x = ng.tensor(np.full((1, 3), NAN), requires_grad=True)
    m1, m2 = ng.tensor(randn(2, 2, seed=3), requires_grad=True), ng.tensor(randn(2, 3, seed=4))
    ng.addmm(x, m1, m2, beta=0).sum().backward()
    assert x.grad.shape == (1, 3) and (x.grad.numpy() == 0).all()
    np.testing.assert_allclose(m1.grad.numpy(), np.ones((2, 3)) @ m2.numpy().T)


def test_integer_inputs_and_scalars():
    i = lambda *v, shape: np.array(v, np.int64).reshape(shape)  # noqa: E731
    a, m1, m2 = i(1, 2, 3, 4, shape=(2, 2)), i(1, -2, 3, 4, 5, 6, shape=(2, 3)), i(2, 1, 0, 1, 3, 1, shape=(3, 2))
    both(lambda *t: ng.addmm(*t, beta=2, alpha=3), lambda *t: torch.addmm(*t, beta=2, alpha=3), a, m1, m2, grad=False)
    both(lambda *t: ng.addr(*t, beta=-1), lambda *t: torch.addr(*t, beta=-1), a, i(1, 2, shape=(2,)),
         i(3, 4, shape=(2,)), grad=False)
    with pytest.raises(RuntimeError, match="addr: For integral input tensors, argument alpha"):
        ng.addr(ng.tensor(a), ng.tensor(i(1, 2, shape=(2,))), ng.tensor(i(1, 2, shape=(2,))), alpha=0.5)
    for f, args in [("mv", (m1, i(1, 2, 3, shape=(3,)))), ("kron", (a, m1)), ("inner", (m1, m1)),
                    ("vdot", (i(1, 2, shape=(2,)), i(3, -4, shape=(2,)))), ("tensordot", (m1, m2.T.copy()))]:
        both(getattr(ng, f), getattr(torch, f), *args, grad=False)
    both(lambda x, y: ng.cross(x, y, dim=0), lambda x, y: torch.cross(x, y, dim=0), i(1, 2, 3, shape=(3,)),
         i(4, 5, -6, shape=(3,)), grad=False)
    with pytest.raises(TypeError, match="addmm: argument 'beta' must be a real number"):
        ng.addmm(ng.ones(2, 2), ng.ones(2, 2), ng.ones(2, 2), beta="1")


def test_addr_promotes_like_torch():
    both(ng.addr, torch.addr, randn(2, 3, seed=1).astype(np.float32), randn(2, seed=2), randn(3, seed=3),
         rtol=1e-6, atol=1e-6)


# ---- in-place forms ---------------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(PRODUCTS))
def test_inplace_forms(name):
    shape, ops = PRODUCTS[name]
    arrays = [randn(*shape, seed=1)] + [randn(*s, seed=2 + i) for i, s in enumerate(ops)]

    def run(lib, *ts):
        x = ts[0] * 1.0  # a non-leaf: the in-place form is recorded
        out = getattr(x, name + "_")(*ts[1:], beta=0.5, alpha=2)
        assert out is x
        return x * 3.0
    both(lambda *t: run(ng, *t), lambda *t: run(torch, *t), *arrays)
    small = ng.tensor(randn(*shape[1:], seed=9))  # would have to grow: refused as torch does
    with pytest.raises(RuntimeError, match=f"{name}_: Bad in-place call"):
        getattr(small, name + "_")(*[ng.tensor(a) for a in arrays[1:]])
    if name != "addbmm":  # torch's addbmm_ resizes a (4,) self to (2, 4) instead of refusing it
        with pytest.raises(RuntimeError):
            getattr(torch.tensor(small.numpy()), name + "_")(*[torch.tensor(a) for a in arrays[1:]])


def test_inplace_without_grad_writes_the_storage():
    x = ng.zeros(2, 2)
    arr = x.array
    x.addmm_(ng.ones(2, 3), ng.ones(3, 2), alpha=2)
    assert x.array is arr and (arr == 6).all()
    assert ng.addmv_ is ng.Tensor.addmv_ and hasattr(torch, "addmv_")


# ---- tensordot -----------------------------------------------------------------------------------
A, B = randn(2, 3, 4, seed=11), randn(3, 4, 2, seed=12)


@pytest.mark.parametrize("dims", [0, 1, 2, ([1, 2], [0, 1]), [[2, 1], [1, 0]], ([-1], [-2]), ([0], [2]), ([], []),
                                  (np.int64(2)), "tensor0d", "tensor2d"])
def test_tensordot_dims_forms(dims):
    if dims == "tensor0d":
        d_ng, d_t = ng.tensor(2), torch.tensor(2)
    elif dims == "tensor2d":
        d_ng, d_t = ng.tensor([[1, 2], [0, 1]]), torch.tensor([[1, 2], [0, 1]])
    else:
        d_ng, d_t = dims, (int(dims) if isinstance(dims, np.integer) else dims)
    b = B if not (isinstance(dims, int) and dims == 1) else randn(4, 2, seed=13)
    both(lambda x, y: ng.tensordot(x, y, d_ng), lambda x, y: torch.tensordot(x, y, d_t), A, b)


def test_tensordot_against_numpy_and_size1_broadcast():
    out = ng.tensordot(ng.tensor(A), ng.tensor(B), dims=([0, 1], [2, 0]))
    np.testing.assert_allclose(out.numpy(), np.tensordot(A, B, ([0, 1], [2, 0])), rtol=1e-12)
    both(lambda x, y: ng.tensordot(x, y, 1), lambda x, y: torch.tensordot(x, y, 1), randn(2, 1, seed=1),
         randn(3, 4, seed=2))
    both(lambda x, y: ng.tensordot(x, y, 0), lambda x, y: torch.tensordot(x, y, 0), randn(seed=1), randn(seed=2))


# ---- cross ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("sa,sb", [((3, 3), (3, 3)), ((2, 3), (2, 3)), ((2, 3, 3), (1, 3, 3)), ((2, 3, 3), (2, 3, 3)),
                                   ((3,), (3,)), ((1, 3), (4, 3))])
def test_cross_default_dim_warns_and_takes_the_first_dim_of_size_3(sa, sb):
    a, b = randn(*sa, seed=1), randn(*sb, seed=2)
    with pytest.warns(UserWarning, match="without specifying the dim arg is deprecated"):
        ours = ng.cross(ng.tensor(a), ng.tensor(b))
    first3 = sa.index(3)
    np.testing.assert_allclose(ours.numpy(), np.cross(a, b, axis=first3), rtol=1e-12)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        both(ng.cross, torch.cross, a, b)
        both(lambda x, y: x.cross(y), lambda x, y: x.cross(y), a, b)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an explicit dim does not warn
        both(lambda x, y: ng.cross(x, y, dim=-1), lambda x, y: torch.cross(x, y, dim=-1), a, b)


# ---- cdist ----------------------------------------------------------------------------------------
PS = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, INF]


@pytest.mark.parametrize("p", PS)
def test_cdist_gradient_at_equal_points_and_ties(p):
    # row 0 of x1 equals row 0 of x2 (distance 0); other pairs share coordinates (zero
    # differences) and tie in |difference| (p=inf's ties)
    x1 = np.array([[0.0, 1.0, 2.0], [2.0, 3.0, -1.0], [1.0, 1.0, 1.0]])
    x2 = np.array([[0.0, 1.0, 2.0], [1.0, 3.0, 0.0]])
    both(lambda a, b: ng.cdist(a, b, p=p), lambda a, b: torch.cdist(a, b, p=p), x1, x2)


@pytest.mark.parametrize("p", PS)
@pytest.mark.parametrize("mode", ["use_mm_for_euclid_dist_if_necessary", "donot_use_mm_for_euclid_dist"])
def test_cdist_random_batched(p, mode):
    x1, x2 = randn(2, 1, 4, 3, seed=21), randn(3, 5, 3, seed=22)
    both(lambda a, b: ng.cdist(a, b, p=p, compute_mode=mode), lambda a, b: torch.cdist(a, b, p=p, compute_mode=mode),
         x1, x2, rtol=1e-9, atol=1e-10)


def test_cdist_mm_mode_is_accepted():
    x1, x2 = randn(4, 3, seed=1), randn(5, 3, seed=2)
    both(lambda a, b: ng.cdist(a, b, compute_mode="use_mm_for_euclid_dist"),
         lambda a, b: torch.cdist(a, b, compute_mode="use_mm_for_euclid_dist"), x1, x2, rtol=1e-7, atol=1e-7)


@pytest.mark.parametrize("s1,s2", [((0, 3), (4, 3)), ((2, 3), (0, 3)), ((2, 0), (4, 0)), ((1, 1), (1, 1))])
@pytest.mark.parametrize("p", [0.0, 1.0, 2.0, INF, 3.0])
def test_cdist_empty_and_one_element(s1, s2, p):
    both(lambda a, b: ng.cdist(a, b, p=p), lambda a, b: torch.cdist(a, b, p=p), randn(*s1, seed=1), randn(*s2, seed=2))


def test_cdist_float32():
    x1, x2 = randn(3, 4, seed=1).astype(np.float32), randn(5, 4, seed=2).astype(np.float32)
    both(ng.cdist, torch.cdist, x1, x2, rtol=1e-5, atol=1e-6)


# ---- block_diag and cartesian_prod ------------------------------------------------------------------
@pytest.mark.parametrize("shapes", [[(2, 3)], [(), (3,), (2, 2)], [(0, 3), (2, 0)], [(1, 1), (0,), (2, 1)],
                                    [(2, 0), (0, 2), ()], []])
def test_block_diag_shapes(shapes):
    arrays = [randn(*s, seed=i) for i, s in enumerate(shapes)]
    # torch's backward skips the row of an empty 1-d block (its gradients come out shifted):
    # there the forward is compared with torch and the gradient with the slices below
    torch_grad = (0,) not in shapes
    out = both(ng.block_diag, torch.block_diag, *arrays, grad=torch_grad)
    if not arrays:
        return
    ts = [ng.tensor(a, requires_grad=True) for a in arrays]
    g = randn(*out.shape, seed=5)
    ng.block_diag(*ts).backward(ng.tensor(g))
    r = c = 0
    for t in ts:
        h, w = (1, 1) if t.ndim == 0 else (1, t.shape[0]) if t.ndim == 1 else t.shape
        np.testing.assert_array_equal(t.grad.numpy(), g[r:r + h, c:c + w].reshape(t.shape))
        r, c = r + h, c + w


def test_block_diag_promotes_dtypes():
    ints, f32 = np.arange(3, dtype=np.int64), randn(2, 2, seed=1).astype(np.float32)
    both(ng.block_diag, torch.block_diag, ints, f32, grad=False, rtol=1e-6)
    both(ng.block_diag, torch.block_diag, ints.reshape(1, 3), ints[:2], grad=False)


@pytest.mark.parametrize("sizes", [(2,), (2, 3), (1, 2, 2), (0, 3), (3, 1)])
def test_cartesian_prod(sizes):
    arrays = [randn(n, seed=i) for i, n in enumerate(sizes)]
    both(ng.cartesian_prod, torch.cartesian_prod, *arrays)


# ---- diagonals, products: empty and one-element --------------------------------------------------
@pytest.mark.parametrize("shape,offset", [((0,), 0), ((1,), 2), ((3,), -4), ((0, 3), 0), ((3, 4), 5), ((3, 4), -3),
                                          ((1, 1), 0), ((4, 3), -2)])
def test_diag_edges(shape, offset):
    both(lambda x: ng.diag(x, offset), lambda x: torch.diag(x, offset), randn(*shape, seed=3))


@pytest.mark.parametrize("shape,offset,d1,d2", [((2, 0, 3), 0, 0, 2), ((2, 3, 4), 1, -1, 0), ((2, 3, 4), -5, 1, 2),
                                                ((1, 1, 1), 0, 2, 1)])
def test_diagonal_and_diag_embed_edges(shape, offset, d1, d2):
    x = randn(*shape, seed=4)
    both(lambda t: ng.diagonal(t, offset, d1, d2), lambda t: torch.diagonal(t, offset, d1, d2), x)
    both(lambda t: ng.diag_embed(t, offset, d1, d2), lambda t: torch.diag_embed(t, offset, d1, d2), x)
    method = lambda t: t.diagonal(offset=offset, dim1=d1, dim2=d2)  # noqa: E731 - the same call on both
    both(method, method, x)


def test_diagflat_and_kron_edges():
    both(lambda x: ng.diagflat(x, 1), lambda x: torch.diagflat(x, 1), randn(seed=1))
    both(ng.diagflat, torch.diagflat, randn(0, 2, seed=1))
    both(ng.kron, torch.kron, randn(seed=1), randn(2, 3, seed=2))
    both(ng.kron, torch.kron, randn(seed=1), randn(seed=2))
    both(ng.kron, torch.kron, randn(0, 2, seed=1), randn(2, 1, 3, seed=2))


def test_empty_and_one_element_products():
    both(ng.addmm, torch.addmm, randn(2, 3, seed=1), randn(2, 0, seed=2), randn(0, 3, seed=3))  # = input
    both(ng.addmm, torch.addmm, randn(seed=1), randn(1, 1, seed=2), randn(1, 1, seed=3))
    both(ng.mv, torch.mv, randn(0, 3, seed=1), randn(3, seed=2))
    both(ng.mv, torch.mv, randn(2, 0, seed=1), randn(0, seed=2))
    both(ng.addbmm, torch.addbmm, randn(2, 3, seed=1), randn(0, 2, 4, seed=2), randn(0, 4, 3, seed=3))
    both(ng.baddbmm, torch.baddbmm, randn(seed=1), randn(0, 2, 4, seed=2), randn(0, 4, 3, seed=3))
    both(ng.vdot, torch.vdot, randn(1, seed=1), randn(1, seed=2))
    both(ng.vdot, torch.vdot, randn(0, seed=1), randn(0, seed=2))
    both(ng.inner, torch.inner, randn(2, 0, seed=1), randn(3, 0, seed=2))
    both(lambda a, b: ng.cross(a, b, dim=0), lambda a, b: torch.cross(a, b, dim=0), randn(3, 0, seed=1),
         randn(3, 0, seed=2))


def test_methods_are_bound():
    x = ng.tensor(randn(3, 3, seed=1))
    for name in ng.ops.linalg_basic.METHODS:
        assert hasattr(torch.Tensor, name), name
        assert getattr(ng.Tensor, name) is getattr(ng.ops.linalg_basic, name), name
    assert set(ng.ops.linalg_basic.METHODS) == {n for n in ng.ops.linalg_basic.__all__ if hasattr(torch.Tensor, n)}
    np.testing.assert_allclose(x.diag().numpy(), np.diag(x.numpy()))
    np.testing.assert_allclose(x.mv(ng.ones(3, dtype=ng.float64)).numpy(), x.numpy().sum(1), rtol=1e-12)
