"""Matrix functions through LAPACK: determinants, inverses, solvers, factorisations
(Cholesky, QR, symmetric eigendecomposition, SVD), the pseudo-inverse and the matrix
exponential, with PyTorch's gradients; plus the top-level ``torch`` spellings of them
(``det``, ``logdet``, ``slogdet``, ``inverse``, ``pinverse``, ``matrix_power``,
``matrix_exp``, ``cholesky``, ``cholesky_solve``, ``cholesky_inverse``, ``svd``, ``qr``,
``triangular_solve``). ``numbagrad.linalg`` (``torch.linalg``) builds on the ``Function``
classes and the private ``_linalg_*`` implementations here (this module never imports it).

Every forward and backward calls ``numpy.linalg`` / ``scipy.linalg`` on the host arrays:
the ops run on the CPU only, and a CUDA tensor raises ``NotImplementedError`` naming the op.
No kernel of numbagrad's own is involved. float16 and bfloat16 inputs are computed in
float32 and the results cast back (PyTorch refuses them on the CPU); integer inputs raise
PyTorch's error. The matrix dimensions are the last two; leading dimensions are a batch.

Gradients are the standard matrix-calculus ones, written as PyTorch writes them (its
``FunctionsManual.cpp``), with ``X^T`` the transpose of the last two dimensions:

* ``det``: ``g det(A) A^{-T}``, computed as ``g adj(A)^T`` through the SVD so that a
  singular ``A`` gets the adjugate (finite) gradient, as PyTorch's;
* ``slogdet``: ``g_logabsdet A^{-T}`` (``sign`` is not differentiable);
* ``inv``: ``-A^{-T} g A^{-T}``; ``solve`` (``AX = B``): ``g_B = A^{-T} g``, ``g_A = -g_B X^T``;
* ``cholesky`` (Murray, arXiv:1602.07527): ``L^{-T} Phi(L^T g) L^{-1}`` symmetrised, ``Phi``
  taking the lower triangle with the diagonal halved;
* ``eigh``: ``V (diag(g_w) + skew(V^T g_V) / E) V^T`` with ``E_ij = w_j - w_i``: repeated
  eigenvalues divide by zero (inf/NaN in the gradient; PyTorch does the same and only warns
  in its documentation). With no gradient reaching ``V`` (``eigvalsh``) it is ``V diag(g_w) V^T``,
  finite for repeated eigenvalues;
* ``svd``: PyTorch's ``svd_backward`` (``E_ij = s_j^2 - s_i^2``, same caveat for repeated
  singular values; ``full_matrices=True`` differentiates through the first ``k = min(m, n)``
  columns of ``U`` and rows of ``Vh`` only, as PyTorch); ``svdvals``: ``U diag(g_S) Vh``;
* ``qr``: PyTorch's ``linalg_qr_backward`` (errors for ``mode='r'``, and for
  ``mode='complete'`` with more rows than columns, as PyTorch's);
* ``pinv``: Golub and Pereyra's derivative of the pseudo-inverse (PyTorch's ``pinv_backward``);
* ``matrix_exp``: the Frechet derivative at ``A^T`` applied to ``g``, from the exponential
  of the block matrix ``[[A^T, g], [0, A^T]]``;
* ``solve_triangular``: as ``solve``, with ``g_A`` restricted to the triangle read.

These backward passes run on arrays: they are not themselves recorded, so second
derivatives through these ops are not available.
"""
import collections
import numbers
import warnings

import numpy as np

from .. import _dtype
from ..autograd.function import Function
from ..backend import backend_of
from ..tensor import Tensor
from ._util import as_tensor_arg, broadcast_shape, same_device
from .elementwise import add, log, where
from .linalg_basic import _tn
from .matmul import matmul
from .shape import cast, expand, squeeze, transpose, unsqueeze


class LinAlgError(RuntimeError):
    """Raised when a matrix function cannot be computed for the given values (a singular
    matrix for ``inv``/``solve``, a matrix that is not positive-definite for ``cholesky``):
    ``torch.linalg.LinAlgError``, a ``RuntimeError``."""


_SlogdetOld = collections.namedtuple("slogdet", ["sign", "logabsdet"])
_SvdOld = collections.namedtuple("svd", ["U", "S", "V"])
_QrOld = collections.namedtuple("qr", ["Q", "R"])
_TriSolveOld = collections.namedtuple("triangular_solve", ["solution", "cloned_coefficient"])


# ---- argument checks ------------------------------------------------------------------------
def _host(opname, *ts):
    """Refuse a tensor whose array is not a host (NumPy) array: LAPACK runs on the CPU."""
    for t in ts:
        if t is not None and not getattr(backend_of(t.array), "host_memory", False):
            raise NotImplementedError(f"{opname}: runs on the CPU only (LAPACK through NumPy); got a tensor of "
                                      f"shape {tuple(t.shape)} on {backend_of(t.array).name}")


def _floating(opname, t):
    if not _dtype.is_float(t.dtype):
        raise RuntimeError(f"{opname}: Expected a floating point or complex tensor as input. Got {_tn(t.dtype)}")


def _at_least_2d(opname, t, name="A"):
    if t.ndim < 2:
        raise RuntimeError(f"{opname}: The input tensor {name} must have at least 2 dimensions.")


def _square(opname, t, name="A"):
    _at_least_2d(opname, t, name)
    if t.shape[-1] != t.shape[-2]:
        raise RuntimeError(f"{opname}: {name} must be batches of square matrices, but they are "
                           f"{t.shape[-2]} by {t.shape[-1]} matrices")


def _wide(t):
    """``t`` in float32 when it is float16/bfloat16 (LAPACK has neither), and the dtype to cast
    the results back to (None when nothing was cast)."""
    if t.dtype in (_dtype.float16, _dtype.bfloat16):
        return cast(t, _dtype.float32), t.dtype
    return t, None


def _back(out, back):
    return out if back is None or out.dtype == back or not _dtype.is_float(out.dtype) else cast(out, back)


def _matrix_input(opname, A, square=True, name="A"):
    """The prologue of a one-matrix op: ``A`` as a host floating Tensor of at least two
    dimensions (square unless ``square`` is False). Returns ``(A, back)`` (see :func:`_wide`)."""
    A = as_tensor_arg(A, opname)
    _host(opname, A)
    (_square if square else _at_least_2d)(opname, A, name)
    _floating(opname, A)
    return _wide(A)


def _same_dtype(opname, names, a, b):
    if a.dtype != b.dtype:
        raise RuntimeError(f"{opname}: Expected {names[0]} and {names[1]} to have the same dtype, but found "
                           f"{names[0]} of type {_tn(a.dtype)} and {names[1]} of type {_tn(b.dtype)} instead")


def _mT(a):
    """The transpose of the last two dimensions of the array ``a``."""
    return np.swapaxes(a, -1, -2)


def _batch_prefix(batch_shape, flat_index):
    return f"(Batch element {flat_index}): " if len(batch_shape) else ""


def _lapack(name, a):
    from scipy.linalg import lapack
    return lapack.get_lapack_funcs((name,), (a,))[0]


def _first_failure(a, which):
    """``(flat batch index, LAPACK info)`` of the first matrix of ``a`` whose LU (``which=
    "getrf"``: the zero pivot) or Cholesky (``"potrf"``: the leading minor) factorisation
    fails, or None."""
    flat = a.reshape((-1,) + a.shape[-2:])
    for i, m in enumerate(flat):
        info = _info(m, which)
        if info > 0:
            return i, info
    return None


def _info(m, which):
    if which == "getrf":
        return int(_lapack("getrf", m)(m)[2])
    return int(_lapack("potrf", m)(m, lower=1)[1])


def _singular_error(opname, a):
    bad = _first_failure(a, "getrf") or (0, a.shape[-1])
    return LinAlgError(f"{opname}: {_batch_prefix(a.shape[:-2], bad[0])}The diagonal element {bad[1]} is zero, the "
                       f"inversion could not be completed because the input matrix is singular.")


def _not_pd_error(opname, a):
    bad = _first_failure(a, "potrf") or (0, a.shape[-1])
    return LinAlgError(f"{opname}: {_batch_prefix(a.shape[:-2], bad[0])}The factorization could not be completed "
                       f"because the input is not positive-definite (the leading minor of order {bad[1]} is not "
                       f"positive-definite).")


def _trsolve(a, b, lower, unit=False):
    """``a^{-1} b`` for triangular ``a`` (batched; only the triangle named is read)."""
    from scipy.linalg import solve_triangular
    if a.shape[-1] == 0 or b.size == 0:
        return np.zeros(b.shape, np.result_type(a, b))
    return solve_triangular(a, b, lower=lower, unit_diagonal=unit, check_finite=False)


# ---- determinants ---------------------------------------------------------------------------
class Det(Function):
    """``det(A)``; backward ``g adj(A)^T`` through the SVD (finite at singular ``A``)."""

    @staticmethod
    def forward(ctx, a):
        ctx.save_for_backward(a)
        with np.errstate(all="ignore"):
            return np.asarray(np.linalg.det(a), a.dtype)

    @staticmethod
    def backward(ctx, g):
        (a,) = ctx.saved_tensors
        n = a.shape[-1]
        if n == 0:
            return np.zeros(a.shape, a.dtype)
        with np.errstate(all="ignore"):
            # A = U S Vh: adj(A)^T = det(U) det(Vh) U diag(prod_{j != i} s_j) Vh
            u, s, vh = np.linalg.svd(a)
            others = np.prod(np.where(np.eye(n, dtype=bool), 1, s[..., None, :]), axis=-1)
            sign = np.linalg.det(u) * np.linalg.det(vh)
            adj_t = (u * others[..., None, :]) @ vh
            return ((g * sign)[..., None, None] * adj_t).astype(a.dtype, copy=False)


class Slogdet(Function):
    """``(sign, log|det A|)``; only ``logabsdet`` is differentiable: ``g A^{-T}``."""

    @staticmethod
    def forward(ctx, a):
        sign, logabs = np.linalg.slogdet(a)
        sign, logabs = np.asarray(sign, a.dtype), np.asarray(logabs, a.dtype)
        ctx.save_for_backward(a)
        ctx.mark_non_differentiable(sign)
        return sign, logabs

    @staticmethod
    def backward(ctx, gsign, glog):
        (a,) = ctx.saved_tensors
        with np.errstate(all="ignore"):
            try:
                ainv = np.linalg.inv(a)
            except np.linalg.LinAlgError:  # singular: log|det| = -inf, the gradient is ill-defined
                ainv = np.full(a.shape, np.nan, a.dtype)
            return (glog[..., None, None] * _mT(ainv)).astype(a.dtype, copy=False)


class Inv(Function):
    """``A^{-1}``; backward ``-A^{-T} g A^{-T}``. ``check``: raise :class:`LinAlgError` for a
    singular matrix (else its inverse is NaN)."""

    @staticmethod
    def forward(ctx, a, opname, check):
        with np.errstate(all="ignore"):
            out = _lapack_batch(np.linalg.inv, a, check, lambda: _singular_error(opname, a))
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, g):
        (ainv,) = ctx.saved_tensors
        ait = _mT(ainv)
        return -(ait @ g @ ait), None, None


def _each_or_nan(fn, a):
    """``fn`` (a NumPy LAPACK routine) on each matrix of ``a``; NaN for the matrices it
    refuses (singular, not positive-definite), as the ``_ex`` variants report them."""
    flat = a.reshape((-1,) + a.shape[-2:])
    out = np.empty_like(flat)
    for i, m in enumerate(flat):
        try:
            out[i] = fn(m)
        except np.linalg.LinAlgError:
            out[i] = np.nan
    return out.reshape(a.shape)


def _lapack_batch(fn, a, check, error):
    """``fn`` (a NumPy LAPACK routine) on the batch ``a``. Where it refuses a matrix: raise
    ``error()`` (a :class:`LinAlgError` naming the batch element) when ``check``, else give
    that matrix NaN and the others their values (the ``_ex`` variants, which report ``info``)."""
    try:
        return fn(a)
    except np.linalg.LinAlgError:
        if check:
            raise error() from None
        return _each_or_nan(fn, a)


class Solve(Function):
    """``X = A^{-1} B`` for ``A`` ``(..., n, n)`` and ``B`` ``(..., n, k)`` of one batch shape;
    backward ``g_B = A^{-T} g``, ``g_A = -g_B X^T``."""

    @staticmethod
    def forward(ctx, a, b, opname):
        try:
            x = np.linalg.solve(a, b) if a.shape[-1] else np.zeros(b.shape, b.dtype)
        except np.linalg.LinAlgError:
            bad = _first_failure(a, "getrf") or (0, 0)
            raise LinAlgError(f"torch.{opname}: {_batch_prefix(a.shape[:-2], bad[0])}The solver failed because the "
                              f"input matrix is singular.") from None
        ctx.save_for_backward(a, x)
        return x

    @staticmethod
    def backward(ctx, g):
        a, x = ctx.saved_tensors
        gb = np.linalg.solve(_mT(a), g) if a.shape[-1] else np.zeros(g.shape, g.dtype)
        return -(gb @ _mT(x)), gb, None


class SolveTriangular(Function):
    """``X = T^{-1} B`` with ``T`` the (``upper`` or lower) triangle of ``A`` (unit diagonal
    with ``unit``); backward as :class:`Solve`, with ``g_A`` kept to the triangle read."""

    @staticmethod
    def forward(ctx, a, b, upper, unit):
        x = _trsolve(a, b, lower=not upper, unit=unit)
        ctx.save_for_backward(a, x)
        ctx.upper, ctx.unit = upper, unit
        return x.astype(b.dtype, copy=False)

    @staticmethod
    def backward(ctx, g):
        a, x = ctx.saved_tensors
        upper, unit = ctx.upper, ctx.unit
        # T^{-T} g: the transpose of an upper triangle is lower
        gb = _trsolve(_mT(a), g, lower=upper, unit=unit).astype(g.dtype, copy=False)
        ga = -(gb @ _mT(x))
        ga = np.triu(ga, 1 if unit else 0) if upper else np.tril(ga, -1 if unit else 0)
        return ga, gb, None, None


# ---- Cholesky ---------------------------------------------------------------------------------
class Cholesky(Function):
    """The Cholesky factor of ``A`` (lower triangle read), ``L`` or ``L^T`` (``upper``);
    backward by Murray's formula (see the module docstring)."""

    @staticmethod
    def forward(ctx, a, upper, opname, check):
        low = _lapack_batch(np.linalg.cholesky, a, check, lambda: _not_pd_error(opname, a))
        ctx.save_for_backward(low)
        ctx.upper = upper
        return np.ascontiguousarray(_mT(low)) if upper else low

    @staticmethod
    def backward(ctx, g):
        (low,) = ctx.saved_tensors
        gl = _mT(g) if ctx.upper else g
        p = np.tril(_mT(low) @ gl)
        p = 0.5 * (p + _mT(np.tril(p, -1)))        # symmetric; its lower triangle is tril(L^T gL), diag halved
        s = _trsolve(_mT(low), p, lower=False)     # L^{-T} P
        s = _mT(_trsolve(_mT(low), _mT(s), lower=False))  # (L^{-T} P) L^{-1}
        return s.astype(g.dtype, copy=False), None, None, None


def _cholesky_infos(a):
    flat = a.reshape((-1,) + a.shape[-2:])
    return np.array([_info(m, "potrf") for m in flat], np.int32).reshape(a.shape[:-2])


class CholeskySolve(Function):
    """``X = (L L^T)^{-1} B`` (``U^T U`` with ``upper``) from a Cholesky factor; backward is
    PyTorch's ``cholesky_solve_backward``, which treats the factor as a full matrix."""

    @staticmethod
    def forward(ctx, b, f, upper):
        if upper:
            y = _trsolve(_mT(f), b, lower=True)  # U^T y = b
            x = _trsolve(f, y, lower=False)
        else:
            y = _trsolve(f, b, lower=True)
            x = _trsolve(_mT(f), y, lower=False)
        x = x.astype(b.dtype, copy=False)
        ctx.save_for_backward(f, x)
        ctx.upper = upper
        return x

    @staticmethod
    def backward(ctx, g):
        f, x = ctx.saved_tensors
        upper = ctx.upper
        gb = CholeskySolve.forward(Function.__new__(CholeskySolve), g, f, upper)
        common = gb @ _mT(x)
        common = common + _mT(common)
        gf = -(f @ common) if upper else -(common @ f)
        return gb, gf, None


# ---- eigendecomposition and SVD ------------------------------------------------------------------
class Eigh(Function):
    """``(w, V)`` of a symmetric matrix (the ``uplo`` triangle read), ascending eigenvalues."""

    @staticmethod
    def forward(ctx, a, uplo):
        w, v = np.linalg.eigh(a, UPLO=uplo)
        ctx.save_for_backward(w, v)
        return w, v

    @staticmethod
    def backward(ctx, gw, gv):
        w, v = ctx.saved_tensors
        vt = _mT(v)
        if not np.any(gv):  # eigenvalues only: V diag(g_w) V^T
            return (v * gw[..., None, :]) @ vt, None
        r = vt @ gv
        r = 0.5 * (r - _mT(r))
        e = w[..., None, :] - w[..., :, None]
        n = w.shape[-1]
        idx = np.arange(n)
        e[..., idx, idx] = 1
        with np.errstate(all="ignore"):  # repeated eigenvalues: inf/NaN, as PyTorch
            r = r / e
            r[..., idx, idx] = gw
            return (v @ r @ vt).astype(gw.dtype, copy=False), None


class Svd(Function):
    """``(U, S, Vh)`` with ``A = U diag(S) Vh``; backward PyTorch's ``svd_backward``."""

    @staticmethod
    def forward(ctx, a, full):
        u, s, vh = np.linalg.svd(a, full_matrices=full)
        k = s.shape[-1]
        ctx.save_for_backward(u[..., :, :k], s, vh[..., :k, :])
        ctx.shape = a.shape
        return u, s, vh

    @staticmethod
    def backward(ctx, gu, gs, gvh):
        u, s, vh = ctx.saved_tensors
        k = s.shape[-1]
        return _svd_backward(gu[..., :, :k], gs, gvh[..., :k, :], u, s, vh, ctx.shape), None


class Svdvals(Function):
    """The singular values, descending; backward ``U diag(g_S) Vh``."""

    @staticmethod
    def forward(ctx, a):
        if not ctx.needs_input_grad[0]:
            return np.linalg.svd(a, compute_uv=False)
        u, s, vh = np.linalg.svd(a, full_matrices=False)
        ctx.save_for_backward(u, vh)
        return s

    @staticmethod
    def backward(ctx, gs):
        u, vh = ctx.saved_tensors
        return (u * gs[..., None, :]) @ vh


def _svd_backward(gu, gs, gvh, u, s, vh, shape):
    m, n = shape[-2], shape[-1]
    k = s.shape[-1]
    if k == 0:
        return np.zeros(shape, s.dtype)
    has_u, has_v = bool(np.any(gu)), bool(np.any(gvh))
    if not has_u and not has_v:
        return (u * gs[..., None, :]) @ vh
    with np.errstate(all="ignore"):
        uhgu = u.swapaxes(-1, -2) @ gu
        uhgu = uhgu - _mT(uhgu)
        vhgv = vh @ _mT(gvh)
        vhgv = vhgv - _mT(vhgv)
        s2 = s * s
        e = s2[..., None, :] - s2[..., :, None]
        idx = np.arange(k)
        e[..., idx, idx] = 1
        ga = (uhgu * s[..., None, :] + s[..., :, None] * vhgv) / e
        ga[..., idx, idx] += gs
        if m > n and has_u:
            ga = u @ ga
            gusinv = gu / s[..., None, :]
            ga = ga + gusinv - u @ (_mT(u) @ gusinv)
            ga = ga @ vh
        elif m < n and has_v:
            ga = ga @ vh
            sinvgvh = gvh / s[..., :, None]
            ga = ga + sinvgvh - (sinvgvh @ _mT(vh)) @ vh
            ga = u @ ga
        else:
            ga = u @ ga @ vh
    return ga.astype(s.dtype, copy=False)


class Qr(Function):
    """``(Q, R)`` of ``A`` (``mode`` ``'reduced'``, ``'complete'`` or ``'r'``, where ``Q`` is
    empty); backward PyTorch's ``linalg_qr_backward``."""

    @staticmethod
    def forward(ctx, a, mode):
        if mode == "r":
            r = np.linalg.qr(a, mode="r")
            q = np.zeros((0,), a.dtype)
        else:
            q, r = np.linalg.qr(a, mode=mode)
        ctx.save_for_backward(a, q, r)
        ctx.mode = mode
        return q, r

    @staticmethod
    def backward(ctx, gq, gr):
        a, q, r = ctx.saved_tensors
        m, n = a.shape[-2], a.shape[-1]
        if ctx.mode == "r":
            raise RuntimeError("linalg.qr: The derivative of linalg.qr depends on Q, which is not computed when "
                               "mode='r'. Please use linalg.qr(A, mode='reduced') if you are going to differentiate "
                               "through linalg.qr.")
        if ctx.mode == "complete" and m > n:
            raise RuntimeError("linalg.qr: The QR decomposition is not differentiable when mode='complete' and "
                               "nrows > ncols.")
        if m >= n:
            return _qr_backward_tall(gq, gr, q, r), None
        # A = [A1 A2] with A1 = Q R1 square and R2 = Q^T A2: A2 adds g_R2 A2^T to Q's gradient
        r1, gr1, gr2 = r[..., :, :m], gr[..., :, :m], gr[..., :, m:]
        gq_all = gq + a[..., :, m:] @ _mT(gr2)
        return np.concatenate([_qr_backward_tall(gq_all, gr1, q, r1), q @ gr2], axis=-1), None


def _qr_backward_tall(gq, gr, q, r):
    """The gradient of ``A = QR`` for ``m >= n`` (``R`` square, invertible):
    ``(g_Q + Q copyltu(M)) R^{-T}``, ``M = g_R R^T - Q^T g_Q`` upper triangle mirrored."""
    mm = gr @ _mT(r) - _mT(q) @ gq
    up = np.triu(mm)
    sym = up + _mT(up)
    n = r.shape[-1]
    idx = np.arange(n)
    sym[..., idx, idx] *= 0.5
    ga = q @ sym + gq
    # ga R^{-T} = (R^{-1} ga^T)^T
    return _mT(_trsolve(r, _mT(ga), lower=False)).astype(gq.dtype, copy=False)


# ---- pseudo-inverse, exponential ------------------------------------------------------------------
def _tolerances(a, atol, rtol):
    """PyTorch's ``pinv``/``matrix_rank`` cut-off rule: ``rtol`` defaults to ``eps * max(m, n)``
    when ``atol`` is unset (or 0), else to 0; singular values ``<= max(atol, rtol * s_max)``
    count as zero."""
    m, n = a.shape[-2], a.shape[-1]
    if rtol is None:
        rtol = np.finfo(a.dtype).eps * max(m, n) if (atol is None or np.all(np.asarray(atol) == 0)) else 0.0
    return (0.0 if atol is None else atol), rtol


def _as_batch(v, a):
    """A tolerance (number or array/Tensor) as an array broadcasting over ``a``'s batch."""
    if isinstance(v, Tensor):
        v = v.array
    return np.asarray(v, np.float64)


class Pinv(Function):
    """The Moore-Penrose pseudo-inverse; backward Golub and Pereyra's derivative:
    ``-P^T g P^T + (I - A P)^T... `` (see :func:`_pinv_backward`)."""

    @staticmethod
    def forward(ctx, a, atol, rtol, hermitian):
        out = _pinv_array(a, atol, rtol, hermitian)
        ctx.save_for_backward(a, out)
        return out

    @staticmethod
    def backward(ctx, g):
        a, p = ctx.saved_tensors
        return _pinv_backward(g, a, p), None, None, None


def _pinv_array(a, atol, rtol, hermitian):
    m, n = a.shape[-2], a.shape[-1]
    if a.size == 0:
        return np.zeros(a.shape[:-2] + (n, m), a.dtype)
    atol, rtol = _tolerances(a, atol, rtol)
    if hermitian:
        w, v = np.linalg.eigh(a)
        smax = np.abs(w).max(-1)
        cut = np.maximum(_as_batch(atol, a), _as_batch(rtol, a) * smax)[..., None]
        with np.errstate(all="ignore"):
            winv = np.where(np.abs(w) > cut, 1 / w, 0)
        return ((v * winv[..., None, :]) @ _mT(v)).astype(a.dtype, copy=False)
    u, s, vh = np.linalg.svd(a, full_matrices=False)
    cut = np.maximum(_as_batch(atol, a), _as_batch(rtol, a) * s[..., :1].max(-1))[..., None]
    with np.errstate(all="ignore"):
        sinv = np.where(s > cut, 1 / s, 0)
    return ((_mT(vh) * sinv[..., None, :]) @ _mT(u)).astype(a.dtype, copy=False)


def _pinv_backward(g, a, p):
    """``g_A = -P^T g P^T + (I - A P)^T g^T P P^T ... `` written out: with ``P = A^+``,
    ``dP = -P dA P + P P^T dA^T (I - A P) + (I - P A) dA^T P^T P``, whose adjoint is
    ``-P^T g P^T + (I - A P) g^T P P^T + P^T P g^T (I - P A)``."""
    pt, gt = _mT(p), _mT(g)
    m, n = a.shape[-2], a.shape[-1]
    i_ap = np.eye(m, dtype=a.dtype) - a @ p
    i_pa = np.eye(n, dtype=a.dtype) - p @ a
    return -(pt @ g @ pt) + i_ap @ gt @ (p @ pt) + (pt @ p) @ gt @ i_pa


class MatrixExp(Function):
    """``exp(A)`` (``scipy.linalg.expm``); backward from the block matrix ``[[A^T, g], [0, A^T]]``,
    whose exponential holds the Frechet derivative ``L(A^T, g)`` in its upper-right block."""

    @staticmethod
    def forward(ctx, a):
        from scipy.linalg import expm
        ctx.save_for_backward(a)
        if a.shape[-1] == 0:
            return a.copy()
        return np.asarray(expm(a), a.dtype)

    @staticmethod
    def backward(ctx, g):
        from scipy.linalg import expm
        (a,) = ctx.saved_tensors
        n = a.shape[-1]
        if n == 0:
            return np.zeros(a.shape, a.dtype)
        at = _mT(a)
        block = np.zeros(a.shape[:-2] + (2 * n, 2 * n), a.dtype)
        block[..., :n, :n] = at
        block[..., n:, n:] = at
        block[..., :n, n:] = g
        return np.asarray(expm(block)[..., :n, n:], a.dtype)


# ---- the implementations shared with numbagrad.linalg ----------------------------------------------
def _linalg_det(A, opname="linalg.det"):
    A, back = _matrix_input(opname, A)
    return _back(Det.apply(A), back)


def _linalg_slogdet(A, opname="linalg.slogdet"):
    A, back = _matrix_input(opname, A)
    sign, logabs = Slogdet.apply(A)
    return _back(sign, back), _back(logabs, back)


def _linalg_inv(A, opname="linalg.inv", check=True):
    A, back = _matrix_input(opname, A)
    return _back(Inv.apply(A, opname, check), back)


def _inv_infos(A):
    a = A.array
    flat = a.reshape((-1,) + a.shape[-2:])
    return np.array([_info(m, "getrf") for m in flat], np.int32).reshape(a.shape[:-2])


def _linalg_cholesky(A, upper=False, opname="linalg.cholesky", check=True):
    A, back = _matrix_input(opname, A)
    return _back(Cholesky.apply(A, bool(upper), opname, check), back)


def _linalg_matrix_power(A, n, opname="linalg.matrix_power"):
    A = as_tensor_arg(A, opname)
    if isinstance(n, (bool, np.bool_)) or not isinstance(n, (numbers.Integral, np.integer)):
        raise TypeError(f"{opname}: argument 'n' must be int, not {type(n).__name__}")
    n = int(n)
    _host(opname, A)
    _square(opname, A)
    if n == 0:  # the identity; A stays in the graph with a zero gradient (as PyTorch's)
        eye = np.broadcast_to(np.eye(A.shape[-1], dtype=A.array.dtype), A.shape)
        every = Tensor._from_array(np.ones(A.shape, np.bool_))
        return where(every, Tensor._from_array(np.ascontiguousarray(eye)), A)
    if n < 0:
        A = _linalg_inv(A, "linalg.inv")
        n = -n
    result, base = None, A
    while n:  # binary powering: O(log n) products
        if n & 1:
            result = base if result is None else matmul.__wrapped__(result, base)
        n >>= 1
        if n:
            base = matmul.__wrapped__(base, base)
    return result


def _linalg_matrix_exp(A, opname="linalg.matrix_exp"):
    A, back = _matrix_input(opname, A)
    return _back(MatrixExp.apply(A), back)


def _linalg_svd(A, full_matrices=True, opname="linalg.svd"):
    A, back = _matrix_input(opname, A, square=False)
    u, s, vh = Svd.apply(A, bool(full_matrices))
    return _back(u, back), _back(s, back), _back(vh, back)


def _linalg_svdvals(A, opname="linalg.svdvals"):
    A, back = _matrix_input(opname, A, square=False)
    return _back(Svdvals.apply(A), back)


def _linalg_qr(A, mode="reduced", opname="linalg.qr"):
    if mode not in ("reduced", "complete", "r"):
        raise RuntimeError(f"{opname}: qr received unrecognized mode '{mode}' but expected one of 'reduced' "
                           f"(default), 'r', or 'complete'")
    A, back = _matrix_input(opname, A, square=False)
    q, r = Qr.apply(A, mode)
    return _back(q, back), _back(r, back)


def _linalg_pinv(A, atol=None, rtol=None, hermitian=False, opname="linalg.pinv"):
    A, back = _matrix_input(opname, A, square=bool(hermitian))
    return _back(Pinv.apply(A, atol, rtol, bool(hermitian)), back)


def _linalg_solve_triangular(A, B, upper, left=True, unitriangular=False, opname="linalg.solve_triangular"):
    A, B = as_tensor_arg(A, opname), as_tensor_arg(B, opname)
    same_device(opname, A, B)
    _host(opname, A, B)
    _square(opname, A)
    _at_least_2d(opname, B, "B")
    _floating(opname, A)
    _same_dtype(opname, ("A", "B"), A, B)
    if not left:  # X A = B  <=>  A^T X^T = B^T
        return transpose(_linalg_solve_triangular(transpose(A, -2, -1), transpose(B, -2, -1), not upper, True,
                                                  unitriangular, opname), -2, -1)
    n = A.shape[-1]
    if B.shape[-2] != n:
        raise RuntimeError(f"{opname}: Incompatible shapes of A and B for the equation AX = B "
                           f"({n}x{n} and {B.shape[-2]}x{B.shape[-1]})")
    A, B = _broadcast_batch(opname, A, B)
    A, back = _wide(A)
    B, _ = _wide(B)
    return _back(SolveTriangular.apply(A, B, bool(upper), bool(unitriangular)), back)


def _broadcast_batch(opname, A, B):
    """``A`` and ``B`` (matrices) expanded to one batch shape (differentiable: the gradients
    sum back over the broadcast dimensions)."""
    batch = broadcast_shape(opname, A.shape[:-2], B.shape[:-2])
    if tuple(A.shape[:-2]) != batch:
        A = expand(A, *batch, *A.shape[-2:])
    if tuple(B.shape[:-2]) != batch:
        B = expand(B, *batch, *B.shape[-2:])
    return A, B


def _linalg_solve(A, B, left=True, opname="linalg.solve"):
    A, B = as_tensor_arg(A, opname), as_tensor_arg(B, opname)
    same_device(opname, A, B)
    _host(opname, A, B)
    _square(opname, A)
    _floating(opname, A)
    _same_dtype(opname, ("A", "B"), A, B)
    if not left:
        if B.ndim < 2:
            raise RuntimeError(f"{opname}: Vector broadcasting of the left hand side is not supported for left=False. "
                               f"In this case linalg.solve is equivalent to B / A.squeeze(-1)")
        return transpose(_linalg_solve(transpose(A, -2, -1), transpose(B, -2, -1), True, opname), -2, -1)
    n = A.shape[-1]
    vector = B.ndim == 1 or (B.ndim == A.ndim - 1 and tuple(B.shape) == tuple(A.shape[:-1]))
    Bm = unsqueeze(B, -1) if vector else B
    if Bm.shape[-2] != n:
        raise RuntimeError(f"{opname}: Incompatible shapes of A and B for the equation AX = B "
                           f"({n}x{n} and {Bm.shape[-2]}x{Bm.shape[-1]})")
    A, Bm = _broadcast_batch(opname, A, Bm)
    A, back = _wide(A)
    Bm, _ = _wide(Bm)
    X = _back(Solve.apply(A, Bm, opname), back)
    return squeeze(X, -1) if vector else X


def _cholesky_solve(B, L, upper=False, opname="cholesky_solve"):
    B, L = as_tensor_arg(B, opname), as_tensor_arg(L, opname)
    same_device(opname, B, L)
    _host(opname, B, L)
    for name, t in (("b", B), ("u", L)):
        if t.ndim < 2:
            raise RuntimeError(f"{opname}: {name} should have at least 2 dimensions, but has {t.ndim} dimensions "
                               f"instead")
    _square(opname, L, "A")
    _floating(opname, L)
    if B.dtype != L.dtype:
        raise RuntimeError(f"{opname}: Expected b and A to have the same dtype, but found b of type "
                           f"{_tn(B.dtype)} and A of type {_tn(L.dtype)} instead.")
    if B.shape[-2] != L.shape[-1]:
        raise RuntimeError(f"{opname}: Incompatible matrix sizes for cholesky_solve: each A matrix is "
                           f"{L.shape[-1]} by {L.shape[-1]} but each b matrix is {B.shape[-2]} by {B.shape[-1]}")
    B, L = _broadcast_batch(opname, B, L)
    L, back = _wide(L)
    B, _ = _wide(B)
    return _back(CholeskySolve.apply(B, L, bool(upper)), back)


# ---- the top-level torch functions ---------------------------------------------------------------
def det(input):
    """The determinant of each square matrix of ``input`` (``torch.det``, ``torch.linalg.det``).

    Parameters
    ----------
    input : Tensor
        ``(*, n, n)``, floating.

    Returns
    -------
    Tensor ``(*)``. Differentiable: ``g adj(A)^T`` (``g det(A) A^{-T}`` when ``A`` is
    invertible), finite at singular matrices.

    Example
    -------
    >>> import numbagrad as torch
    >>> round(torch.det(torch.tensor([[2.0, 1.0], [1.0, 3.0]])).item(), 4)
    5.0
    """
    return _linalg_det(input)


def logdet(input):
    """``log(det(input))`` (``torch.logdet``): NaN where the determinant is negative, ``-inf``
    where it is 0. The gradient is ``g A^{-T}``.

    Example
    -------
    >>> import numbagrad as torch
    >>> round(torch.logdet(torch.eye(3) * 2).item(), 4)
    2.0794
    """
    sign, logabs = _linalg_slogdet(input, "logdet")
    with np.errstate(all="ignore"):  # log(-1) is NaN, log(0) is -inf: the sign enters as a constant
        return add(logabs, log(sign))


def slogdet(input):
    """The sign and the log of the absolute value of the determinant (``torch.slogdet``,
    ``torch.linalg.slogdet``), a named pair ``(sign, logabsdet)``; a singular matrix gives
    ``(0, -inf)``. Only ``logabsdet`` is differentiable: ``g A^{-T}``.

    Example
    -------
    >>> import numbagrad as torch
    >>> s, l = torch.slogdet(-torch.eye(3))
    >>> s.item(), round(l.item(), 4)
    (-1.0, 0.0)
    """
    return _SlogdetOld(*_linalg_slogdet(input, "linalg.slogdet"))


def inverse(input):
    """The inverse of each square matrix of ``input`` (``torch.inverse``, ``torch.linalg.inv``).

    A singular matrix raises :class:`LinAlgError` (a ``RuntimeError``) naming the zero pivot,
    as PyTorch's. The gradient is ``-A^{-T} g A^{-T}``.

    Example
    -------
    >>> import numbagrad as torch
    >>> torch.inverse(torch.tensor([[2.0, 0.0], [0.0, 4.0]])).tolist()
    [[0.5, 0.0], [0.0, 0.25]]
    """
    return _linalg_inv(input)


def pinverse(input, rcond=1e-15):
    """The Moore-Penrose pseudo-inverse (``torch.pinverse``): singular values at most
    ``rcond`` times the largest count as zero. ``(*, m, n) -> (*, n, m)``; differentiable
    (Golub and Pereyra), at inputs of locally constant rank.

    Example
    -------
    >>> import numbagrad as torch
    >>> torch.pinverse(torch.tensor([[2.0], [0.0]])).tolist()
    [[0.5, 0.0]]
    """
    if not isinstance(rcond, numbers.Real):
        raise TypeError(f"pinverse: argument 'rcond' must be float, not {type(rcond).__name__}")
    return _linalg_pinv(input, 0.0, float(rcond), False, "linalg.pinv")


def matrix_power(input, n):
    """``input`` to the integer power ``n`` (``torch.matrix_power``, ``torch.linalg.matrix_power``)
    by repeated squaring: ``n = 0`` gives the identity (with a zero gradient), ``n < 0`` the
    power of the inverse. A composite of ``matmul`` (and ``inv``): the gradient is theirs.

    Example
    -------
    >>> import numbagrad as torch
    >>> torch.matrix_power(torch.tensor([[1.0, 1.0], [0.0, 1.0]]), 3).tolist()
    [[1.0, 3.0], [0.0, 1.0]]
    """
    return _linalg_matrix_power(input, n)


def matrix_exp(input):
    """The matrix exponential of each square matrix (``torch.matrix_exp``,
    ``torch.linalg.matrix_exp``), through ``scipy.linalg.expm``. The gradient is the Frechet
    derivative of ``exp`` at ``A^T`` applied to ``g`` (a ``2n x 2n`` block exponential).

    Example
    -------
    >>> import numbagrad as torch
    >>> round(torch.matrix_exp(torch.zeros(2, 2))[0, 0].item(), 4)
    1.0
    """
    return _linalg_matrix_exp(input)


def cholesky(input, upper=False):
    """The Cholesky factor of each symmetric positive-definite matrix (``torch.cholesky``,
    deprecated in PyTorch for ``torch.linalg.cholesky``, whose warning is repeated here):
    ``L`` lower triangular with ``A = L L^T``, or ``U = L^T`` with ``upper``.

    Only the lower triangle of ``input`` is read. A matrix that is not positive-definite raises
    :class:`LinAlgError` naming the leading minor. Differentiable (Murray's formula); the
    gradient is symmetric.
    """
    warnings.warn("torch.cholesky is deprecated in favor of torch.linalg.cholesky and will be removed in a future "
                  "PyTorch release.\nL = torch.cholesky(A)\nshould be replaced with\nL = torch.linalg.cholesky(A)\n"
                  "and\nU = torch.cholesky(A, upper=True)\nshould be replaced with\nU = torch.linalg.cholesky(A).mH",
                  UserWarning, stacklevel=2)
    return _linalg_cholesky(input, upper, "linalg.cholesky")


def cholesky_solve(input, input2, upper=False):
    """Solve ``A X = input`` given the Cholesky factor ``input2`` of ``A`` (``torch.cholesky_solve``):
    ``A = L L^T`` (``upper=False``) or ``U^T U``.

    Parameters
    ----------
    input : Tensor
        The right-hand sides ``B``, ``(*, n, k)``.
    input2 : Tensor
        The factor, ``(*, n, n)`` (its triangle is read); the batch dimensions broadcast.
    upper : bool
        Whether the factor is upper triangular.

    Returns
    -------
    Tensor ``(*, n, k)``. The gradient is PyTorch's, which treats the factor as a full matrix
    (``g_L = -(C + C^T) L`` with ``C = A^{-1} g X^T``).

    Example
    -------
    >>> import numbagrad as torch
    >>> torch.cholesky_solve(torch.ones(2, 1), torch.eye(2) * 2).tolist()
    [[0.25], [0.25]]
    """
    return _cholesky_solve(input, input2, upper)


def cholesky_inverse(input, upper=False):
    """The inverse of ``A = L L^T`` (``U^T U`` with ``upper``) from its Cholesky factor ``input``
    (``torch.cholesky_inverse``); ``cholesky_solve`` of the identity, whose gradient it has.

    Example
    -------
    >>> import numbagrad as torch
    >>> torch.cholesky_inverse(torch.eye(2) * 2).tolist()
    [[0.25, 0.0], [0.0, 0.25]]
    """
    L = as_tensor_arg(input, "cholesky_inverse")
    _host("cholesky_inverse", L)
    if L.ndim < 2:
        raise RuntimeError(f"cholesky_inverse: The input tensor input must have at least 2 dimensions. (got "
                           f"{L.ndim}-D of shape {tuple(L.shape)})")
    _square("cholesky_inverse", L, "input")
    _floating("cholesky_inverse", L)
    eye = Tensor._from_array(np.ascontiguousarray(np.broadcast_to(np.eye(L.shape[-1], dtype=L.array.dtype),
                                                                  L.shape)))
    return _cholesky_solve(eye, L, upper, "cholesky_inverse")


def svd(input, some=True, compute_uv=True):
    """The singular value decomposition in PyTorch's old form (``torch.svd``): a named triple
    ``(U, S, V)`` with ``input = U diag(S) V^T`` (``V``, not ``Vh`` as ``torch.linalg.svd``).

    Parameters
    ----------
    input : Tensor
        ``(*, m, n)``, floating.
    some : bool
        ``True``: the reduced decomposition (``U`` ``(*, m, k)``, ``V`` ``(*, n, k)``,
        ``k = min(m, n)``); ``False``: the full one.
    compute_uv : bool
        ``False``: only ``S``; ``U`` and ``V`` are zero matrices ``(*, m, m)`` and ``(*, n, n)``,
        as in PyTorch.

    Returns
    -------
    (U, S, V) : namedtuple. Differentiable as ``torch.linalg.svd`` (see the module docstring).
    """
    if not compute_uv:
        A, back = _matrix_input("linalg.svd", input, square=False)
        s = _back(Svdvals.apply(A), back)
        m, n = A.shape[-2], A.shape[-1]
        zeros = lambda k: Tensor._from_array(np.zeros(A.shape[:-2] + (k, k), s.array.dtype))  # noqa: E731
        return _SvdOld(zeros(m), s, zeros(n))
    u, s, vh = _linalg_svd(input, not some)
    return _SvdOld(u, s, transpose(vh, -2, -1))


def qr(input, some=True):
    """The QR decomposition in PyTorch's old form (``torch.qr``): ``some=True`` is
    ``torch.linalg.qr(input, mode='reduced')``, ``some=False`` is ``mode='complete'``.
    Returns the named pair ``(Q, R)``; differentiable as ``torch.linalg.qr``."""
    return _QrOld(*_linalg_qr(input, "reduced" if some else "complete"))


def triangular_solve(b, A, upper=True, transpose=False, unitriangular=False):
    """Solve ``A X = b`` for triangular ``A`` (``torch.triangular_solve``, deprecated in PyTorch
    for ``torch.linalg.solve_triangular``): ``A`` is read as upper (``upper``) or lower
    triangular, transposed first with ``transpose``, with a unit diagonal with
    ``unitriangular``. Returns the named pair ``(solution, cloned_coefficient)``, the latter a
    copy of ``A``. Differentiable in ``b`` and ``A`` (its triangle)."""
    A = as_tensor_arg(A, "triangular_solve")
    b = as_tensor_arg(b, "triangular_solve")
    _host("triangular_solve", A, b)
    _at_least_2d("triangular_solve", b, "b")
    _at_least_2d("triangular_solve", A, "A")
    At = _swap(A) if transpose else A
    x = _linalg_solve_triangular(At, b, upper=(not upper) if transpose else upper, left=True,
                                 unitriangular=unitriangular, opname="triangular_solve")
    return _TriSolveOld(x, A.clone())


def _swap(t):
    return transpose(t, -2, -1)


__all__ = ["det", "logdet", "slogdet", "inverse", "pinverse", "matrix_power", "matrix_exp", "cholesky",
           "cholesky_solve", "cholesky_inverse", "svd", "qr", "triangular_solve"]

METHODS = ("det", "logdet", "slogdet", "inverse", "pinverse", "matrix_power", "matrix_exp", "cholesky",
           "cholesky_solve", "cholesky_inverse", "svd", "qr", "triangular_solve")
"""Names in ``__all__`` that are also ``Tensor`` methods; bound by ``tensor._install_operators``."""
