"""``numbagrad.linalg`` against ``torch.linalg``: values, float64 finite-difference gradients
(:func:`optest.check_grad`), PyTorch's gradients, batching and broadcasting, the
``ord``/``dim``/``keepdim`` variants of the norms, named results, the ``LinAlgError`` cases,
the CUDA refusal of the LAPACK-backed functions (on a stand-in device array), and the
coverage of ``dir(torch.linalg)``.

Singular vectors and eigenvectors are defined up to sign (and LAPACK drivers differ), so
they are compared with PyTorch through sign-invariant quantities (``U * U``, ``U diag(S) Vh``).
"""
import math

import numpy as np
import pytest

import numbagrad as ng
import numbagrad.linalg as LA
from optest import check_grad

torch = pytest.importorskip("torch")

INF = math.inf
RNG = np.random.default_rng(20240613)


def randn(*shape):
    return RNG.standard_normal(shape)


def spd(*batch, n=3):
    """Symmetric positive-definite, well conditioned: M M^T + n I."""
    m = randn(*batch, n, n)
    return m @ np.swapaxes(m, -1, -2) + n * np.eye(n)


def well(*batch, n=3):
    """A well-conditioned general square matrix."""
    return randn(*batch, n, n) + 3 * np.eye(n)


def sym(f):
    """``f`` of the symmetric part ``X + X^T`` (the functions that read one triangle)."""
    return lambda x, *a: f(x + x.transpose(-2, -1), *a)


def _leaves(lib, arrays):
    return [lib.tensor(a, requires_grad=True) for a in arrays]


def _flat(r):
    if isinstance(r, (tuple, list)):
        return [x for x in r]
    return [r]


def _np(t):
    return t.detach().numpy()


def parity(fn_ng, fn_t, *arrays, loss=None, rtol=1e-7, atol=1e-9, grad=True):
    """Forward values and the gradients of one random linear functional of the outputs (or of
    ``loss(outputs)``) against PyTorch, in float64."""
    a_ng, a_t = _leaves(ng, arrays), _leaves(torch, arrays)
    r_ng, r_t = fn_ng(*a_ng), fn_t(*a_t)
    if loss is not None:
        r_ng, r_t = loss(ng, r_ng), loss(torch, r_t)
    outs_ng, outs_t = _flat(r_ng), _flat(r_t)
    assert len(outs_ng) == len(outs_t)
    s_ng = s_t = None
    for o_ng, o_t in zip(outs_ng, outs_t):
        assert tuple(o_ng.shape) == tuple(o_t.shape)
        np.testing.assert_allclose(_np(o_ng), _np(o_t), rtol=rtol, atol=atol)
        if grad and o_t.requires_grad and o_t.numel():
            w = RNG.standard_normal(tuple(o_t.shape))
            t1, t2 = (o_ng * ng.tensor(w)).sum(), (o_t * torch.tensor(w)).sum()
            s_ng, s_t = (t1, t2) if s_ng is None else (s_ng + t1, s_t + t2)
    if grad and s_t is not None:
        s_ng.backward()
        s_t.backward()
        for x_ng, x_t in zip(a_ng, a_t):
            g_t = np.zeros(x_t.shape) if x_t.grad is None else x_t.grad.numpy()
            g_ng = np.zeros(x_ng.shape) if x_ng.grad is None else x_ng.grad.numpy()
            np.testing.assert_allclose(g_ng, g_t, rtol=1e-6, atol=1e-8)


# ---- norms ---------------------------------------------------------------------------------------------
X234 = randn(2, 3, 4)
X234[0, 1] = 0.0  # a zero row: the gradient at 0 is torch's


@pytest.mark.parametrize("ord", [2, 1, 0, 3, 0.5, -1, INF, -INF])
@pytest.mark.parametrize("dim", [None, 1, (0, 2), -1])
@pytest.mark.parametrize("keepdim", [False, True])
def test_vector_norm_matches_torch(ord, dim, keepdim):
    x = X234 if ord >= 1 or ord == 0 or ord == INF else X234 + 5  # p < 1: keep |x|^(p-1) finite
    parity(lambda t: LA.vector_norm(t, ord, dim, keepdim), lambda t: torch.linalg.vector_norm(t, ord, dim, keepdim), x)


def test_vector_norm_gradient_at_zero_and_dtype():
    for ord in (2, 1, INF, 3):
        parity(lambda t: LA.vector_norm(t, ord, 1), lambda t: torch.linalg.vector_norm(t, ord, 1), np.zeros((2, 3)))
    x = ng.tensor(np.ones(3, np.float32))
    assert LA.vector_norm(x, dtype=ng.float64).dtype == ng.float64
    check_grad(lambda t: LA.vector_norm(t, 3, (0, 1)), [randn(3, 2)])


@pytest.mark.parametrize("ord", ["fro", "nuc", 1, -1, 2, -2, INF, -INF])
@pytest.mark.parametrize("shape,dim", [((2, 3, 4), (-2, -1)), ((3, 2, 4), (2, 0)), ((4, 3), (0, 1))])
def test_matrix_norm_matches_torch(ord, shape, dim):
    x = randn(*shape)
    for keepdim in (False, True):
        parity(lambda t: LA.matrix_norm(t, ord, dim, keepdim), lambda t: torch.linalg.matrix_norm(t, ord, dim, keepdim),
               x)
    check_grad(lambda t: LA.matrix_norm(t, ord, dim), [x], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("args", [dict(), dict(ord=2), dict(ord="fro"), dict(ord=1, dim=0), dict(dim=(0, 1)),
                                  dict(ord="nuc", dim=(1, 0), keepdim=True), dict(ord=INF)])
def test_norm_dispatches_as_torch(args):
    x = randn(3, 4)
    parity(lambda t: LA.norm(t, **args), lambda t: torch.linalg.norm(t, **args), x)
    if "dim" not in args:
        parity(lambda t: LA.norm(t[0], **{k: v for k, v in args.items() if v not in ("fro", "nuc")}),
               lambda t: torch.linalg.norm(t[0], **{k: v for k, v in args.items() if v not in ("fro", "nuc")}), x)


def test_norm_errors_as_torch():
    for lib, x in ((LA, ng.ones(2, 2, 2)), (torch.linalg, torch.ones(2, 2, 2))):
        with pytest.raises(RuntimeError, match="If dim is not specified but ord is, the input must be 1D or 2D"):
            lib.norm(x, 2)
        with pytest.raises(RuntimeError, match="Order 3 not supported"):
            lib.matrix_norm(x, 3)
        with pytest.raises(RuntimeError, match="Expected a floating point"):
            lib.vector_norm(x.long())


# ---- determinants, inverses, solvers ---------------------------------------------------------------------
def test_det_slogdet_logdet_inv():
    a = well(2, 3)
    for fn_ng, fn_t in [(LA.det, torch.linalg.det), (LA.inv, torch.linalg.inv), (ng.det, torch.det),
                        (ng.inverse, torch.inverse), (ng.logdet, torch.logdet), (LA.slogdet, torch.linalg.slogdet),
                        (ng.slogdet, torch.slogdet)]:
        parity(fn_ng, fn_t, a)
        check_grad(fn_ng, [a])
    r = LA.slogdet(ng.tensor(-np.eye(3)))
    assert r.sign.item() == -1.0 and r.logabsdet.item() == 0.0
    assert type(ng.slogdet(ng.eye(2))).__name__ == "slogdet"
    assert math.isnan(ng.logdet(ng.tensor(-np.eye(3))).item())


def test_det_gradient_at_a_singular_matrix_is_the_adjugate():
    """numbagrad's det gradient is ``adj(A)^T`` everywhere (finite differences agree);
    PyTorch 2.13 returns 0 at an exactly singular matrix (its LU formula ``g det A^{-T}``)."""
    a = np.array([[1.0, 2.0], [2.0, 4.0]])
    t = ng.tensor(a, requires_grad=True)
    LA.det(t).backward()
    np.testing.assert_allclose(t.grad.numpy(), [[4.0, -2.0], [-2.0, 1.0]], atol=1e-12)
    check_grad(LA.det, [np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]])])


@pytest.mark.parametrize("ashape,bshape", [((3, 3), (3,)), ((3, 3), (3, 2)), ((2, 3, 3), (2, 3)),
                                           ((2, 3, 3), (3, 2)), ((3, 3), (2, 3, 1)), ((2, 1, 3, 3), (4, 3, 2))])
def test_solve_broadcasts_as_torch(ashape, bshape):
    a, b = well(*ashape[:-2]) if ashape[:-2] else well(), randn(*bshape)
    parity(LA.solve, torch.linalg.solve, a, b)
    check_grad(LA.solve, [a, b])
    bt = randn(*ashape[:-2], 2, 3)
    parity(lambda x, y: LA.solve(x, y, left=False), lambda x, y: torch.linalg.solve(x, y, left=False), a, bt)


def test_singular_matrices_raise_linalg_error_as_torch():
    assert issubclass(LA.LinAlgError, RuntimeError)
    sing = np.array([[1.0, 2.0], [2.0, 4.0]])
    batch = np.stack([np.eye(2), sing])
    for lib, mod in ((ng, LA), (torch, torch.linalg)):
        with pytest.raises(mod.LinAlgError, match="linalg.inv: The diagonal element 2 is zero"):
            mod.inv(lib.tensor(sing))
        with pytest.raises(mod.LinAlgError, match=r"linalg.inv: \(Batch element 1\): The diagonal element 2"):
            mod.inv(lib.tensor(batch))
        with pytest.raises(mod.LinAlgError, match="linalg.solve: The solver failed because the input matrix is "
                                                  "singular"):
            mod.solve(lib.tensor(sing), lib.tensor(np.ones(2)))
        with pytest.raises(mod.LinAlgError, match=r"cholesky: \(Batch element 1\): .* not positive-definite \(the "
                                                  r"leading minor of order 1"):
            mod.cholesky(lib.tensor(np.stack([np.eye(2), -np.eye(2)])))
        with pytest.raises(mod.LinAlgError, match="leading minor of order 3 is not positive-definite"):
            mod.cholesky(lib.tensor(np.diag([1.0, 1.0, -1.0])))


def test_ex_variants_report_info():
    sing = np.stack([np.eye(2), np.array([[1.0, 2.0], [2.0, 4.0]])])
    for lib, mod in ((ng, LA), (torch, torch.linalg)):
        r = mod.inv_ex(lib.tensor(sing))
        assert r.info.tolist() == [0, 2] and str(r.info.dtype).endswith("int32")
        r = mod.cholesky_ex(lib.tensor(np.stack([np.eye(3), np.diag([1.0, -1.0, 1.0])])))
        assert r.info.tolist() == [0, 2]
        with pytest.raises(mod.LinAlgError):
            mod.inv_ex(lib.tensor(sing), check_errors=True)
    a = spd(2)
    parity(lambda t: LA.inv_ex(t).inverse, lambda t: torch.linalg.inv_ex(t).inverse, a)
    parity(sym(lambda t: LA.cholesky_ex(t).L), sym(lambda t: torch.linalg.cholesky_ex(t).L), a / 2)


# ---- Cholesky, triangular solves ---------------------------------------------------------------------------
@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_matches_torch(upper):
    a = spd(2) / 2  # sym() doubles it back
    parity(sym(lambda t: LA.cholesky(t, upper=upper)), sym(lambda t: torch.linalg.cholesky(t, upper=upper)), a)
    check_grad(sym(lambda t: LA.cholesky(t, upper=upper)), [a])
    with pytest.warns(UserWarning, match="torch.cholesky is deprecated"):
        parity(sym(lambda t: ng.cholesky(t, upper)), sym(lambda t: torch.linalg.cholesky(t, upper=upper)), a)


def test_cholesky_reads_the_lower_triangle_as_torch():
    a = spd(n=3)
    a[0, 2] = 100.0  # upper triangle: ignored
    parity(LA.cholesky, torch.linalg.cholesky, a, grad=False)


@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_solve_and_inverse(upper):
    fac = np.linalg.cholesky(spd(2))
    fac = np.swapaxes(fac, -1, -2) if upper else fac
    tri = (lambda lib, t: lib.triu(t)) if upper else (lambda lib, t: lib.tril(t))
    b = randn(2, 3, 2)
    parity(lambda x, f: ng.cholesky_solve(x, tri(ng, f), upper), lambda x, f: torch.cholesky_solve(x, tri(torch, f), upper),
           b, fac)
    check_grad(lambda x, f: ng.cholesky_solve(x, tri(ng, f), upper), [b, fac])
    parity(lambda f: ng.cholesky_inverse(tri(ng, f), upper), lambda f: torch.cholesky_inverse(tri(torch, f), upper),
           fac[0])
    check_grad(lambda f: ng.cholesky_inverse(tri(ng, f), upper), [fac[0]])


@pytest.mark.parametrize("upper", [False, True])
@pytest.mark.parametrize("unit", [False, True])
@pytest.mark.parametrize("left", [True, False])
def test_solve_triangular_matches_torch(upper, unit, left):
    a = well(2)
    b = randn(2, 3, 2) if left else randn(2, 2, 3)
    kw = dict(upper=upper, unitriangular=unit, left=left)
    parity(lambda x, y: LA.solve_triangular(x, y, **kw), lambda x, y: torch.linalg.solve_triangular(x, y, **kw), a, b)
    check_grad(lambda x, y: LA.solve_triangular(x, y, **kw), [a, b])
    parity(lambda y, x: ng.triangular_solve(y, x, upper, not left, unit).solution,
           lambda y, x: torch.triangular_solve(y, x, upper, not left, unit).solution, randn(2, 3, 2), a)


# ---- eigh, svd, qr, pinv -------------------------------------------------------------------------------------
def _sq(lib, outs):
    """Sign-invariant functions of a decomposition's factors (each vector's sign is free)."""
    return [o * o if o.ndim >= 2 else o for o in outs]


@pytest.mark.parametrize("uplo", ["L", "U"])
def test_eigh_matches_torch(uplo):
    a = randn(2, 4, 4)
    parity(sym(lambda t: LA.eigh(t, uplo)), sym(lambda t: torch.linalg.eigh(t, uplo)), a, loss=_sq)
    check_grad(sym(lambda t: LA.eigh(t, uplo)), [a])
    parity(sym(LA.eigvalsh), sym(torch.linalg.eigvalsh), a)
    check_grad(sym(LA.eigvalsh), [a])
    r = LA.eigh(ng.tensor(np.diag([2.0, 1.0])))
    assert r.eigenvalues.tolist() == [1.0, 2.0] and tuple(r.eigenvectors.shape) == (2, 2)


def test_eigh_repeated_eigenvalues_as_torch():
    """Through the eigenvalues only the gradient is finite at repeated eigenvalues; through the
    eigenvectors it divides by zero (not finite) in both libraries."""
    for lib, mod in ((ng, LA), (torch, torch.linalg)):
        a = lib.tensor(np.eye(3), requires_grad=True)
        mod.eigvalsh(a).sum().backward()
        np.testing.assert_allclose(a.grad.numpy(), np.eye(3), atol=1e-12)
        a = lib.tensor(np.eye(3), requires_grad=True)
        w, v = mod.eigh(a)
        (v * lib.tensor(randn(3, 3))).sum().backward()
        assert not np.all(np.isfinite(a.grad.numpy()))


@pytest.mark.parametrize("shape", [(2, 4, 3), (2, 3, 4), (3, 3)])
@pytest.mark.parametrize("full", [False, True])
def test_svd_matches_torch(shape, full):
    a = randn(*shape)
    k = min(shape[-2:])

    def reduced(lib, outs):  # the part of U and Vh that full_matrices=True adds is not unique
        u, s, vh = outs
        return _sq(lib, [u[..., :k], s, vh[..., :k, :]])
    parity(lambda t: LA.svd(t, full), lambda t: torch.linalg.svd(t, full), a, loss=reduced)
    check_grad(lambda t: [o for o in reduced(ng, LA.svd(t, full))], [a])
    parity(LA.svdvals, torch.linalg.svdvals, a)
    check_grad(LA.svdvals, [a])
    parity(lambda t: ng.svd(t, some=not full), lambda t: torch.svd(t, some=not full),
           a, loss=lambda lib, o: _sq(lib, [o[0][..., :k], o[1], o[2][..., :k]]))
    r = ng.svd(ng.tensor(a), compute_uv=False)
    assert not r.U.numpy().any() and tuple(r.V.shape) == tuple(torch.svd(torch.tensor(a), compute_uv=False).V.shape)


@pytest.mark.parametrize("shape", [(2, 4, 3), (2, 3, 4), (3, 3)])
@pytest.mark.parametrize("mode", ["reduced", "complete", "r"])
def test_qr_matches_torch(shape, mode):
    a = randn(*shape)
    differentiable = mode == "reduced" or (mode == "complete" and shape[-2] <= shape[-1])
    parity(lambda t: LA.qr(t, mode), lambda t: torch.linalg.qr(t, mode), a, grad=differentiable)
    if differentiable:
        check_grad(lambda t: LA.qr(t, mode), [a])
    else:
        for lib, mod in ((ng, LA), (torch, torch.linalg)):
            t = lib.tensor(a, requires_grad=True)
            with pytest.raises(RuntimeError, match="linalg.qr" if mode == "r" else "not differentiable"):
                mod.qr(t, mode).R.sum().backward()
    parity(lambda t: ng.qr(t), lambda t: torch.qr(t), a)


@pytest.mark.parametrize("shape", [(2, 4, 3), (3, 5), (3, 3)])
def test_pinv_lstsq_matrix_rank(shape):
    a = randn(*shape)
    parity(LA.pinv, torch.linalg.pinv, a)
    check_grad(LA.pinv, [a])
    parity(ng.pinverse, torch.pinverse, a)
    s = spd(n=3)
    parity(lambda t: LA.pinv(t, hermitian=True), lambda t: torch.linalg.pinv(t, hermitian=True), s, grad=False)
    b = randn(*shape[:-1], 2)
    for driver in ("gelsy", "gelsd", "gelss", "gels"):
        r_ng = LA.lstsq(ng.tensor(a), ng.tensor(b), driver=driver)
        r_t = torch.linalg.lstsq(torch.tensor(a), torch.tensor(b), driver=driver)
        assert r_ng._fields == ("solution", "residuals", "rank", "singular_values") and len(r_t) == 4
        assert r_t.rank is r_t[2] and r_ng.rank is r_ng[2]
        for x, y in zip(r_ng, r_t):
            assert tuple(x.shape) == tuple(y.shape), (driver, x.shape, y.shape)
            if not (driver == "gels" and shape[-2] < shape[-1]) or x is not r_ng.solution:
                np.testing.assert_allclose(x.numpy(), y.numpy(), rtol=1e-7, atol=1e-9)
    if shape[-2] >= shape[-1]:
        parity(lambda x, y: LA.lstsq(x, y).solution, lambda x, y: torch.linalg.lstsq(x, y).solution, a, b)
    check_grad(lambda x, y: LA.lstsq(x, y).solution, [a, b])
    low = randn(4, 2) @ randn(2, 5)  # rank 2
    for kw in (dict(), dict(atol=1e-3), dict(rtol=0.5)):
        assert LA.matrix_rank(ng.tensor(low), **kw).item() == torch.linalg.matrix_rank(torch.tensor(low), **kw).item()
    assert LA.matrix_rank(ng.tensor(np.stack([low, np.eye(4, 5)]))).tolist() == [2, 4]


# ---- exp, powers, products ----------------------------------------------------------------------------------
def test_matrix_exp_and_power():
    a = randn(2, 3, 3) / 2
    for fn_ng, fn_t in [(LA.matrix_exp, torch.linalg.matrix_exp), (ng.matrix_exp, torch.matrix_exp)]:
        parity(fn_ng, fn_t, a)
        check_grad(fn_ng, [a])
    for n in (0, 1, 2, 5, -1, -3):
        x = a + 2 * np.eye(3)
        parity(lambda t: LA.matrix_power(t, n), lambda t: torch.linalg.matrix_power(t, n), x)
        check_grad(lambda t: ng.matrix_power(t, n), [x])
    assert ng.tensor(a, requires_grad=True).matrix_power(0).requires_grad


def test_products_and_views():
    a, b, c = randn(3), randn(3, 4), randn(4)
    parity(lambda x, y, z: LA.multi_dot([x, y, z]), lambda x, y, z: torch.linalg.multi_dot([x, y, z]), a, b, c)
    parity(lambda x, y: LA.multi_dot([x, y]), lambda x, y: torch.linalg.multi_dot([x, y]), randn(2, 3), b)
    parity(lambda x, y: LA.vecdot(x, y), lambda x, y: torch.linalg.vecdot(x, y), randn(2, 3), a)
    parity(lambda x, y: LA.vecdot(x, y, dim=0), lambda x, y: torch.linalg.vecdot(x, y, dim=0), randn(3, 2), randn(3, 1))
    parity(LA.cross, torch.linalg.cross, randn(2, 3), randn(2, 3))
    parity(lambda x: LA.diagonal(x, offset=1), lambda x: torch.linalg.diagonal(x, offset=1), randn(2, 3, 4))
    parity(LA.vander, torch.linalg.vander, np.array([0.0, 2.0, -1.5]))
    parity(lambda x: LA.vander(x, N=4), lambda x: torch.linalg.vander(x, N=4), randn(2, 3))
    parity(lambda x: LA.tensorinv(x, 1), lambda x: torch.linalg.tensorinv(x, 1), randn(6, 2, 3) + np.eye(6).reshape(6, 2, 3))
    parity(LA.cond, torch.linalg.cond, well(2))
    for p in (1, INF, "fro", "nuc", -2):
        parity(lambda x: LA.cond(x, p), lambda x: torch.linalg.cond(x, p), well(2), grad=False)
    check_grad(lambda x: LA.cond(x, 1), [well(2)])
    parity(LA.matmul, torch.linalg.matmul, randn(2, 3), randn(3, 2))


def test_reduced_precision_is_computed_in_float32():
    a = (spd(2) / 4).astype(np.float32)  # exp stays within float16's range
    for dt in (ng.float16, ng.bfloat16):
        x = ng.tensor(a).to(dt)
        for fn in (LA.det, LA.inv, LA.cholesky, LA.svdvals, LA.eigvalsh, LA.matrix_exp):
            out = fn(x)
            assert out.dtype == dt
            ref = fn(x.float()).numpy()
            np.testing.assert_allclose(out.float().numpy(), ref, rtol=2e-2, atol=1e-2 * np.abs(ref).max())


def test_float32_forwards_keep_their_dtype():
    a = well(2).astype(np.float32)
    for fn in (LA.det, LA.inv, LA.svdvals, LA.pinv, LA.matrix_exp, lambda t: LA.qr(t).R, lambda t: LA.eigh(t)[0]):
        assert fn(ng.tensor(a)).dtype == ng.float32


# ---- device refusal, coverage --------------------------------------------------------------------------------
@pytest.fixture
def fake_device_matrix():
    """A 3x3 float32 tensor on a stand-in device backend (no GPU needed)."""
    from numbagrad.backend.dispatch import _BY_ARRAY_TYPE
    fake = type("FakeDeviceArray", (), {"shape": (3, 3), "dtype": np.dtype(np.float32), "ndim": 2, "size": 9,
                                        "strides": (12, 4)})
    _BY_ARRAY_TYPE[fake] = type("FakeBackend", (), {"name": "fake"})()
    try:
        yield ng.Tensor._from_array(fake())
    finally:
        del _BY_ARRAY_TYPE[fake]


HOST_ONLY = {
    "linalg.det": lambda a: LA.det(a), "linalg.slogdet": lambda a: LA.slogdet(a), "linalg.inv": lambda a: LA.inv(a),
    "linalg.solve": lambda a: LA.solve(a, a), "linalg.cholesky": lambda a: LA.cholesky(a),
    "linalg.eigh": lambda a: LA.eigh(a), "linalg.svd": lambda a: LA.svd(a), "linalg.svdvals": lambda a: LA.svdvals(a),
    "linalg.qr": lambda a: LA.qr(a), "linalg.pinv": lambda a: LA.pinv(a), "linalg.matrix_exp": lambda a: LA.matrix_exp(a),
    "linalg.solve_triangular": lambda a: LA.solve_triangular(a, a, upper=True),
    "linalg.matrix_rank": lambda a: LA.matrix_rank(a), "linalg.matrix_power": lambda a: LA.matrix_power(a, 2),
    "linalg.matrix_norm": lambda a: LA.matrix_norm(a, "nuc"), "logdet": lambda a: ng.logdet(a),
    "cholesky_solve": lambda a: ng.cholesky_solve(a, a), "cholesky_inverse": lambda a: ng.cholesky_inverse(a),
}


@pytest.mark.parametrize("name", sorted(HOST_ONLY))
def test_host_only_functions_refuse_a_device_tensor_by_name(name, fake_device_matrix):
    with pytest.raises(NotImplementedError, match=rf"^{name}: runs on the CPU only.*shape \(3, 3\) on fake"):
        HOST_ONLY[name](fake_device_matrix)


# The functions of torch.linalg that numbagrad.linalg leaves out (each with its reason in
# numbagrad.linalg.NOT_BUILT): eig and eigvals return complex tensors, which numbagrad lacks;
# the LU and LDL families, householder_product, solve_ex and tensorsolve are not built yet.
NOT_BUILT = {"eig", "eigvals", "householder_product", "ldl_factor", "ldl_factor_ex", "ldl_solve", "lu", "lu_factor",
             "lu_factor_ex", "lu_solve", "solve_ex", "tensorsolve"}


def test_every_torch_linalg_function_is_built_or_listed():
    names = {n for n in dir(torch.linalg) if not n.startswith("_") and callable(getattr(torch.linalg, n))}
    missing = sorted(n for n in names - NOT_BUILT if not hasattr(LA, n))
    assert not missing, f"torch.linalg functions missing from numbagrad.linalg: {missing}"
    assert NOT_BUILT == set(LA.NOT_BUILT)
    assert not [n for n in NOT_BUILT if hasattr(LA, n)], "listed as not built but present"
    assert set(LA.__all__) <= set(dir(LA))


def test_top_level_functions_are_tensor_methods():
    from numbagrad.ops import linalg_ops
    a = ng.tensor(spd(n=3))
    for name in linalg_ops.METHODS:
        assert hasattr(torch.Tensor, name)
        assert getattr(ng.Tensor, name) is getattr(ng, name)
    np.testing.assert_allclose(a.det().item(), np.linalg.det(a.numpy()))
    np.testing.assert_allclose(a.inverse().numpy(), np.linalg.inv(a.numpy()), rtol=1e-12)
