"""``torch.linalg``: norms, determinants, inverses, solvers and factorisations
(``numbagrad.linalg``), with PyTorch's signatures, batching (leading dimensions), named
results and errors.

The factorisations and solvers run through LAPACK on the host (``numpy.linalg`` and
``scipy.linalg``): their autograd ``Function`` classes live in ``numbagrad/ops/linalg_ops.py``
(whose module docstring gives every gradient formula), and a CUDA tensor raises
``NotImplementedError`` naming the op. The norms of vectors, ``vecdot``, ``cross``,
``diagonal``, ``multi_dot`` and ``matrix_power`` are composites of numbagrad's
differentiable ops and follow the device of their input (those of matrices that need
singular values are host-only).

A singular matrix for ``inv``/``solve``, and one that is not positive-definite for
``cholesky``, raise :class:`LinAlgError`, a ``RuntimeError`` as ``torch.linalg.LinAlgError``.

Not built (see ``NOT_BUILT``): the complex-valued ``eig``/``eigvals``, the LU and LDL
factorisation families, ``householder_product``, ``solve_ex`` and ``tensorsolve``.

Example
-------
>>> import numbagrad as torch
>>> A = torch.tensor([[4.0, 2.0], [2.0, 3.0]])
>>> torch.linalg.cholesky(A).tolist()
[[2.0, 0.0], [1.0, 1.4142135381698608]]
>>> round(torch.linalg.matrix_norm(A, ord='nuc').item(), 4)
7.0
"""
import collections
import math
import numbers

import numpy as np

from . import _dtype
from .ops import linalg_basic as _basic
from .ops import linalg_ops as _ops
from .ops._util import as_tensor_arg, norm_axis, wrap_dim
from .ops.elementwise import abs as _abs, add as _add, div as _div, mul as _mul, ne as _ne, pow as _pow, \
    where as _where
from .ops.linalg_ops import LinAlgError, _floating, _host
from .ops.matmul import matmul
from .ops.reduce import PNorm as _PNorm, amax as _amax, amin as _amin, sum as _sum
from .ops.shape import cast as _cast, movedim as _movedim, reshape as _reshape, squeeze as _squeeze, \
    stack as _stack, unsqueeze as _unsqueeze
from .tensor import Tensor

_Slogdet = collections.namedtuple("linalg_slogdet", ["sign", "logabsdet"])
_Eigh = collections.namedtuple("linalg_eigh", ["eigenvalues", "eigenvectors"])
_Svd = collections.namedtuple("linalg_svd", ["U", "S", "Vh"])
_Qr = collections.namedtuple("linalg_qr", ["Q", "R"])
_InvEx = collections.namedtuple("linalg_inv_ex", ["inverse", "info"])
_CholeskyEx = collections.namedtuple("linalg_cholesky_ex", ["L", "info"])
_Lstsq = collections.namedtuple("linalg_lstsq", ["solution", "residuals", "rank", "singular_values"])

NOT_BUILT = {
    "eig": "complex eigenvectors: numbagrad has no complex dtype",
    "eigvals": "complex eigenvalues: numbagrad has no complex dtype",
    "householder_product": "not built", "ldl_factor": "not built", "ldl_factor_ex": "not built",
    "ldl_solve": "not built", "lu": "not built", "lu_factor": "not built", "lu_factor_ex": "not built",
    "lu_solve": "not built", "solve_ex": "not built", "tensorsolve": "not built",
}
"""The functions of ``torch.linalg`` that numbagrad.linalg does not provide, with the reason."""

_INF = math.inf


# ---- norms ------------------------------------------------------------------------------------
def _as_dtype(x, dtype, opname):
    if dtype is None:
        return x
    d = _dtype.as_dtype(dtype)
    if not _dtype.is_float(d):
        raise RuntimeError(f"{opname}: dtype should be floating point or complex. Got {_basic._tn(d)}")
    return x if x.dtype == d else _cast(x, d)


def _zero_grad_term(x, axes, keepdim):
    """A term equal to 0 that keeps ``x`` in the graph with a zero gradient (NaN-safe)."""
    never = Tensor._from_array(np.zeros(x.shape, np.bool_))
    return _sum(_where(never, x, 0), axes, keepdim)


def vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None):
    r"""The vector ``ord``-norm of ``x`` over ``dim`` (``torch.linalg.vector_norm``).

    Parameters
    ----------
    x : Tensor
        Floating.
    ord : int or float
        ``2`` (default), ``1``, ``inf`` (largest ``|x|``), ``-inf`` (smallest), ``0`` (the
        number of nonzero entries) or any other real ``p``: :math:`(\sum |x|^p)^{1/p}`.
    dim : int, tuple of ints or None
        The dimensions reduced; ``None`` (or ``()``) flattens ``x``.
    keepdim : bool
        Keep the reduced dimensions with size 1.
    dtype : dtype, optional
        Cast ``x`` to it first.

    Returns
    -------
    Tensor. Differentiable as PyTorch's: at a zero vector the gradient is 0 (not NaN); for
    ``inf``/``-inf`` ties share the gradient equally; ``ord=0`` has a zero gradient.

    Example
    -------
    >>> import numbagrad as torch
    >>> torch.linalg.vector_norm(torch.tensor([3.0, -4.0])).item()
    5.0
    """
    op = "linalg.vector_norm"
    x = as_tensor_arg(x, op)
    if isinstance(ord, (bool, np.bool_)) or not isinstance(ord, numbers.Real):
        raise TypeError(f"{op}: argument 'ord' must be Number, not {type(ord).__name__}")
    _floating(op, x)
    x = _as_dtype(x, dtype, op)
    axes = norm_axis(None if isinstance(dim, (tuple, list)) and not len(dim) else dim, x.ndim, op)
    p = float(ord)
    if (p < 0 or p == _INF) and any(x.shape[a] == 0 for a in axes):
        raise RuntimeError(f"{op}: linalg.vector_norm cannot compute the {ord} norm on an empty tensor because "
                           f"the operation does not have an identity")
    if p == _INF:
        return _amax(_abs(x), axes, keepdim)
    if p == -_INF:
        return _amin(_abs(x), axes, keepdim)
    if p == 0:
        count = _sum(_cast(_ne(x, 0), x.dtype), axes, keepdim)
        return _add(count, _zero_grad_term(x, axes, keepdim)) if x.requires_grad else count
    if p == 1:
        return _sum(_abs(x), axes, keepdim)
    if p > 0:
        return _PNorm.apply(x, axes, keepdim, p)
    with np.errstate(divide="ignore"):
        return _pow(_sum(_pow(_abs(x), p), axes, keepdim), 1.0 / p)


def _two_dims(dim, ndim, op):
    if not isinstance(dim, (tuple, list)) or len(dim) != 2:
        raise RuntimeError(f"{op}: dim must be a 2-tuple. Got {dim!r}")
    d0, d1 = (wrap_dim(d, ndim, op) for d in dim)
    if d0 == d1:
        raise RuntimeError(f"{op}: dims must be different. Got ({dim[0]}, {dim[1]})")
    return d0, d1


def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim=False, *, dtype=None):
    """The matrix ``ord``-norm over the two dimensions ``dim`` (``torch.linalg.matrix_norm``).

    Parameters
    ----------
    A : Tensor
        At least 2-D, floating.
    ord : str, int or float
        ``'fro'`` (default), ``'nuc'`` (sum of singular values), ``2``/``-2`` (largest/smallest
        singular value), ``1``/``-1`` (max/min column sum of ``|A|``), ``inf``/``-inf``
        (max/min row sum).
    dim : pair of ints
        The matrix dimensions (rows, columns).
    keepdim : bool
        Keep them with size 1.
    dtype : dtype, optional
        Cast ``A`` to it first.

    Returns
    -------
    Tensor. Differentiable (the singular-value norms through ``svdvals``, host-only).

    Example
    -------
    >>> import numbagrad as torch
    >>> torch.linalg.matrix_norm(torch.tensor([[1.0, -2.0], [3.0, 4.0]]), ord=1).item()
    6.0
    """
    op = "linalg.matrix_norm"
    A = as_tensor_arg(A, op)
    _ops._at_least_2d(op, A)
    _floating(op, A)
    A = _as_dtype(A, dtype, op)
    d0, d1 = _two_dims(dim, A.ndim, op)
    if isinstance(ord, str):
        if ord == "fro":
            return vector_norm(A, 2, (d0, d1), keepdim)
        if ord != "nuc":
            raise RuntimeError(f"{op}: Order {ord} not supported.")
    elif isinstance(ord, (bool, np.bool_)) or not isinstance(ord, numbers.Real) or \
            abs(float(ord)) not in (1.0, 2.0, _INF):
        raise RuntimeError(f"{op}: Order {ord} not supported.")
    if ord == "nuc" or abs(float(ord)) == 2:
        _host(op, A)
        s = svdvals(_movedim(A, (d0, d1), (-2, -1)))
        r = _sum(s, -1) if ord == "nuc" else (_amax(s, -1) if float(ord) > 0 else _amin(s, -1))
        if keepdim:
            lo, hi = sorted((d0, d1))
            r = _unsqueeze(_unsqueeze(r, lo), hi)
        return r
    p = float(ord)
    if abs(p) == _INF:  # the inf-norm is the 1-norm of the transpose
        d0, d1 = d1, d0
    if not keepdim and d0 < d1:
        d1 -= 1
    col = vector_norm(A, 1, d0, keepdim)
    return _amax(col, d1, keepdim) if p > 0 else _amin(col, d1, keepdim)


def norm(A, ord=None, dim=None, keepdim=False, *, dtype=None):
    """A vector or matrix norm (``torch.linalg.norm``), dispatched as PyTorch's.

    With ``dim`` an int or a 1-tuple: :func:`vector_norm` (``ord`` default 2); a 2-tuple:
    :func:`matrix_norm` (``ord`` default ``'fro'``). With ``dim=None``: ``ord=None`` gives the
    2-norm of the flattened ``A``; otherwise ``A`` must be 1-D (a vector norm) or 2-D (a
    matrix norm).

    Example
    -------
    >>> import numbagrad as torch
    >>> torch.linalg.norm(torch.tensor([[3.0, 0.0], [0.0, 4.0]])).item()
    5.0
    """
    op = "linalg.norm"
    A = as_tensor_arg(A, op)
    if dim is not None:
        dims = (dim,) if isinstance(dim, (int, np.integer)) else tuple(dim)
        if len(dims) == 1:
            return vector_norm(A, 2 if ord is None else ord, dims, keepdim, dtype=dtype)
        if len(dims) == 2:
            return matrix_norm(A, "fro" if ord is None else ord, dims, keepdim, dtype=dtype)
        raise RuntimeError(f"{op}: If dim is specified, it must be of length 1 or 2. Got {list(dims)}")
    if ord is None:
        return vector_norm(A, 2, None, keepdim, dtype=dtype)
    if A.ndim not in (1, 2):
        raise RuntimeError(f"{op}: If dim is not specified but ord is, the input must be 1D or 2D. Got {A.ndim}D.")
    if A.ndim == 1:
        return vector_norm(A, ord, None, keepdim, dtype=dtype)
    return matrix_norm(A, ord, (-2, -1), keepdim, dtype=dtype)


def cond(A, p=None):
    """The condition number of ``A`` in the norm ``p`` (``torch.linalg.cond``): for ``p`` None,
    2 or -2 the ratio of extreme singular values; otherwise ``norm(A, p) * norm(inv(A), p)``
    (square ``A``). A composite: differentiable where its parts are."""
    op = "linalg.cond"
    A = as_tensor_arg(A, op)
    _ops._at_least_2d(op, A)
    if p is None or (not isinstance(p, str) and abs(float(p)) == 2):
        s = svdvals(A)
        big, small = _amax(s, -1), _amin(s, -1)
        with np.errstate(divide="ignore", invalid="ignore"):
            return _div(small, big) if p is not None and float(p) < 0 else _div(big, small)
    _ops._square(op, A)
    return _mul(matrix_norm(A, p), matrix_norm(inv(A), p))


# ---- determinants, inverses, solvers -----------------------------------------------------------
det = _ops.det
matrix_power = _ops.matrix_power
matrix_exp = _ops.matrix_exp


def slogdet(A):
    """``(sign, logabsdet)`` of each square matrix (``torch.linalg.slogdet``), a named pair;
    ``logabsdet`` is differentiable (``g A^{-T}``).

    Example
    -------
    >>> import numbagrad as torch
    >>> torch.linalg.slogdet(torch.eye(2) * 2).sign.item()
    1.0
    """
    return _Slogdet(*_ops._linalg_slogdet(A))


def inv(A):
    """The inverse of each square matrix (``torch.linalg.inv``); a singular one raises
    :class:`LinAlgError` naming the batch element and the zero pivot. Gradient ``-A^{-T} g A^{-T}``.

    Example
    -------
    >>> import numbagrad as torch
    >>> torch.linalg.inv(torch.eye(2) * 4).tolist()
    [[0.25, 0.0], [0.0, 0.25]]
    """
    return _ops._linalg_inv(A)


def inv_ex(A, *, check_errors=False):
    """The inverse and a LAPACK status (``torch.linalg.inv_ex``): the named pair
    ``(inverse, info)``, ``info`` an int32 tensor of the batch shape, 0 where the inversion
    succeeded, else the (1-based) index of the zero pivot; such an ``inverse`` is NaN.
    ``check_errors=True`` raises :class:`LinAlgError` instead."""
    inverse = _ops._linalg_inv(A, "linalg.inv_ex", check=check_errors)
    a = inverse.array
    if a.size and not np.all(np.isfinite(a)):
        info = _ops._inv_infos(as_tensor_arg(A, "linalg.inv_ex"))
    else:
        info = np.zeros(a.shape[:-2], np.int32)
    return _InvEx(inverse, Tensor._from_array(info))


def solve(A, B, *, left=True):
    """The solution ``X`` of ``A X = B`` (``X A = B`` with ``left=False``) for square ``A``
    (``torch.linalg.solve``).

    Parameters
    ----------
    A : Tensor
        ``(*, n, n)``.
    B : Tensor
        ``(*, n, k)``, or a batch of vectors ``(*, n)`` (when ``B`` is 1-D or has the shape
        ``A.shape[:-1]``); the batch dimensions broadcast. ``A``'s dtype.

    Returns
    -------
    Tensor of ``B``'s (broadcast) shape. A singular ``A`` raises :class:`LinAlgError`.
    Gradients: ``g_B = A^{-T} g`` and ``g_A = -g_B X^T``.

    Example
    -------
    >>> import numbagrad as torch
    >>> torch.linalg.solve(torch.eye(2) * 2, torch.tensor([1.0, 4.0])).tolist()
    [0.5, 2.0]
    """
    return _ops._linalg_solve(A, B, left)


def cholesky(A, *, upper=False):
    """The Cholesky factor ``L`` (``A = L L^T``, lower triangular; ``L^T`` with ``upper``) of
    each symmetric positive-definite matrix (``torch.linalg.cholesky``). Only the lower triangle
    of ``A`` is read; a matrix that is not positive-definite raises :class:`LinAlgError` naming
    the leading minor. Differentiable (Murray's formula, a symmetric gradient).

    Example
    -------
    >>> import numbagrad as torch
    >>> torch.linalg.cholesky(torch.eye(2) * 4).tolist()
    [[2.0, 0.0], [0.0, 2.0]]
    """
    return _ops._linalg_cholesky(A, upper)


def cholesky_ex(A, *, upper=False, check_errors=False):
    """The Cholesky factor and a LAPACK status (``torch.linalg.cholesky_ex``): the named pair
    ``(L, info)``, ``info`` an int32 tensor of the batch shape, 0 on success, else the order
    of the leading minor that is not positive-definite (that ``L`` is NaN).
    ``check_errors=True`` raises :class:`LinAlgError` instead."""
    L = _ops._linalg_cholesky(A, upper, "linalg.cholesky_ex", check=check_errors)
    a = L.array
    if a.size and not np.all(np.isfinite(a)):
        info = _ops._cholesky_infos(as_tensor_arg(A, "linalg.cholesky_ex").array)
    else:
        info = np.zeros(a.shape[:-2], np.int32)
    return _CholeskyEx(L, Tensor._from_array(info))


def solve_triangular(A, B, *, upper, left=True, unitriangular=False):
    """The solution of ``A X = B`` (``X A = B`` with ``left=False``) for triangular ``A``
    (``torch.linalg.solve_triangular``): only the ``upper`` (or lower) triangle of ``A`` is
    read, with ones on the diagonal when ``unitriangular``. ``A`` ``(*, n, n)``, ``B``
    ``(*, n, k)`` (``(*, k, n)`` with ``left=False``); the batches broadcast. Differentiable;
    ``A``'s gradient lies in the triangle read.

    Example
    -------
    >>> import numbagrad as torch
    >>> torch.linalg.solve_triangular(torch.tensor([[2.0, 1.0], [0.0, 1.0]]), torch.ones(2, 1),
    ...                               upper=True).tolist()
    [[0.0], [1.0]]
    """
    return _ops._linalg_solve_triangular(A, B, upper, left, unitriangular)


def lstsq(A, B, rcond=None, *, driver=None):
    """The least-squares solution of ``A X = B`` (``torch.linalg.lstsq``): the named tuple
    ``(solution, residuals, rank, singular_values)``.

    ``solution`` is ``pinv(A, rtol=rcond) @ B``: the minimum-norm solution, which is what
    PyTorch's default CPU driver ``gelsy`` returns; it is differentiable (through ``pinv``).
    As in PyTorch, ``rank`` is computed unless ``driver='gels'``, ``singular_values`` only for
    ``'gelsd'``/``'gelss'``, and ``residuals`` (the squared residual norms per column) only when
    ``m > n``, every matrix has full rank and the driver is not ``'gelsy'``; the others are
    empty. ``B`` is ``(*, m, k)``, or ``(*, m)`` when it has one dimension fewer than ``A``.
    """
    op = "torch.linalg.lstsq"
    if driver is not None and driver not in ("gels", "gelsy", "gelsd", "gelss"):
        raise RuntimeError(f"{op}: parameter `driver` should be one of (gels, gelsy, gelsd, gelss)")
    driver = driver or "gelsy"
    A, B = as_tensor_arg(A, op), as_tensor_arg(B, op)
    _host(op, A, B)
    _ops._at_least_2d("linalg.lstsq", A)
    _floating("linalg.lstsq", A)
    if A.dtype != B.dtype:
        raise RuntimeError(f"linalg.lstsq: Expected A and B to have the same dtype, but found A of type "
                           f"{_basic._tn(A.dtype)} and B of type {_basic._tn(B.dtype)} instead")
    vector = B.ndim == A.ndim - 1
    Bm = _unsqueeze(B, -1) if vector else B
    m, n = A.shape[-2], A.shape[-1]
    if Bm.ndim < 2 or Bm.shape[-2] != m:
        raise RuntimeError(f"linalg.lstsq: input.size(-2) should match other.size(-2) (A of shape "
                           f"{tuple(A.shape)}, B of shape {tuple(B.shape)})")
    rtol = None if rcond is None or rcond < 0 else float(rcond)
    X = matmul(_ops._linalg_pinv(A, 0.0 if rtol is not None else None, rtol, False, "linalg.lstsq"), Bm)
    empty = lambda: Tensor._from_array(np.zeros((0,), A.array.dtype))  # noqa: E731
    s = svdvals(A).detach()
    tol = (np.finfo(A.array.dtype).eps * max(m, n) if rtol is None else rtol) * s.array[..., :1]
    rank_arr = np.sum(s.array > tol, -1).astype(np.int64)
    rank = Tensor._from_array(rank_arr) if driver != "gels" else Tensor._from_array(np.zeros((0,), np.int64))
    if m > n and driver != "gelsy" and np.all(rank_arr == n):
        residuals = _sum(_pow(_add(matmul(A, X), _mul(Bm, -1)), 2), -2)
    else:
        residuals = empty()
    sv = s if driver in ("gelsd", "gelss") else empty()
    return _Lstsq(_squeeze(X, -1) if vector else X, residuals, rank, sv)


def tensorinv(A, ind=2):
    """The inverse of ``A`` seen as a linear map from its first ``ind`` dimensions to the rest
    (``torch.linalg.tensorinv``): ``prod(A.shape[:ind]) == prod(A.shape[ind:])`` is required;
    the result has the shape ``A.shape[ind:] + A.shape[:ind]``. A composite of :func:`inv`."""
    op = "linalg.tensorinv"
    A = as_tensor_arg(A, op)
    if not isinstance(ind, (int, np.integer)) or ind <= 0:
        raise RuntimeError(f"{op}: Expected a strictly positive integer for 'ind', but got {ind}")
    rows, cols = math.prod(A.shape[:ind]), math.prod(A.shape[ind:])
    if rows != cols:
        raise RuntimeError(f"{op}: Expected self to satisfy the requirement prod(self.shape[ind:]) == "
                           f"prod(self.shape[:ind]), but got {cols} != {rows}")
    return _reshape(inv(_reshape(A, rows, cols)), *A.shape[ind:], *A.shape[:ind])


# ---- factorisations ----------------------------------------------------------------------------
def _uplo(UPLO):
    if UPLO not in ("L", "U"):
        raise RuntimeError(f"linalg.eigh: Expected UPLO argument to be 'L' or 'U', but got {UPLO}")
    return UPLO


def eigh(A, UPLO="L"):
    """The eigenvalues (ascending) and eigenvectors of each symmetric matrix
    (``torch.linalg.eigh``), the named pair ``(eigenvalues, eigenvectors)``, reading the
    ``UPLO`` (``'L'`` or ``'U'``) triangle. Differentiable as PyTorch's (see
    ``numbagrad/ops/linalg_ops.py``): with repeated eigenvalues the gradient through the
    eigenvectors is inf/NaN, as in PyTorch.

    Example
    -------
    >>> import numbagrad as torch
    >>> torch.linalg.eigh(torch.tensor([[2.0, 0.0], [0.0, 1.0]])).eigenvalues.tolist()
    [1.0, 2.0]
    """
    A, back = _ops._matrix_input("linalg.eigh", A)
    w, v = _ops.Eigh.apply(A, _uplo(UPLO))
    return _Eigh(_ops._back(w, back), _ops._back(v, back))


def eigvalsh(A, UPLO="L"):
    """The eigenvalues (ascending) of each symmetric matrix (``torch.linalg.eigvalsh``);
    gradient ``V diag(g) V^T``, finite for repeated eigenvalues.

    Example
    -------
    >>> import numbagrad as torch
    >>> torch.linalg.eigvalsh(torch.eye(2) * 3).tolist()
    [3.0, 3.0]
    """
    A, back = _ops._matrix_input("linalg.eigvalsh", A)
    return _ops._back(_ops.Eigh.apply(A, _uplo(UPLO))[0], back)


def svd(A, full_matrices=True, *, driver=None):
    """The singular value decomposition ``A = U diag(S) Vh`` (``torch.linalg.svd``), the named
    triple ``(U, S, Vh)``; ``full_matrices=False`` gives the reduced one. ``driver`` (CUDA only
    in PyTorch) is accepted and ignored. Differentiable as PyTorch's (inf/NaN with repeated
    singular values when ``U`` or ``Vh`` is used).

    Example
    -------
    >>> import numbagrad as torch
    >>> torch.linalg.svd(torch.tensor([[3.0, 0.0], [0.0, -2.0]])).S.tolist()
    [3.0, 2.0]
    """
    return _Svd(*_ops._linalg_svd(A, full_matrices))


def svdvals(A, *, driver=None):
    """The singular values, descending (``torch.linalg.svdvals``); gradient ``U diag(g) Vh``.

    Example
    -------
    >>> import numbagrad as torch
    >>> torch.linalg.svdvals(torch.tensor([[0.0, 2.0], [1.0, 0.0]])).tolist()
    [2.0, 1.0]
    """
    return _ops._linalg_svdvals(A)


def qr(A, mode="reduced"):
    """The QR decomposition (``torch.linalg.qr``), the named pair ``(Q, R)``: ``mode`` is
    ``'reduced'`` (``Q`` ``(*, m, k)``), ``'complete'`` (``Q`` ``(*, m, m)``) or ``'r'`` (``Q``
    empty). Differentiable as PyTorch's, which refuses ``mode='r'`` and ``'complete'`` with
    ``m > n`` in backward.

    Example
    -------
    >>> import numbagrad as torch
    >>> torch.linalg.qr(torch.eye(2) * 2).R.abs().tolist()
    [[2.0, 0.0], [0.0, 2.0]]
    """
    return _Qr(*_ops._linalg_qr(A, mode))


def pinv(A, *, atol=None, rtol=None, hermitian=False):
    """The Moore-Penrose pseudo-inverse (``torch.linalg.pinv``): singular values (eigenvalue
    magnitudes with ``hermitian``) at most ``max(atol, rtol * largest)`` count as zero; ``rtol``
    defaults to ``eps * max(m, n)`` when ``atol`` is unset or 0, else to 0. Differentiable
    (Golub and Pereyra), at inputs of locally constant rank.

    Example
    -------
    >>> import numbagrad as torch
    >>> torch.linalg.pinv(torch.tensor([[1.0, 0.0], [0.0, 0.0]])).tolist()
    [[1.0, 0.0], [0.0, 0.0]]
    """
    return _ops._linalg_pinv(A, atol, rtol, hermitian)


def matrix_rank(A, *, atol=None, rtol=None, hermitian=False):
    """The numerical rank of each matrix (``torch.linalg.matrix_rank``): the number of singular
    values above ``max(atol, rtol * largest)`` (the tolerances as :func:`pinv`'s), int64.

    Example
    -------
    >>> import numbagrad as torch
    >>> torch.linalg.matrix_rank(torch.ones(3, 3)).item()
    1
    """
    op = "linalg.matrix_rank"
    A, _ = _ops._matrix_input(op, A, square=bool(hermitian))
    a = A.array
    if a.size == 0:
        return Tensor._from_array(np.zeros(a.shape[:-2], np.int64))
    s = np.abs(np.linalg.eigvalsh(a)) if hermitian else np.linalg.svd(a, compute_uv=False)
    atol, rtol = _ops._tolerances(a, atol, rtol)
    cut = np.maximum(_ops._as_batch(atol, a), _ops._as_batch(rtol, a) * s.max(-1))[..., None]
    return Tensor._from_array(np.asarray(np.sum(s > cut, -1), np.int64))


# ---- products -----------------------------------------------------------------------------------
def multi_dot(tensors):
    """The product of a chain of matrices (``torch.linalg.multi_dot``): the first may be a 1-D
    row vector and the last a 1-D column vector, the others are 2-D, all of one dtype.
    Multiplied left to right with ``matmul`` (differentiable).

    Example
    -------
    >>> import numbagrad as torch
    >>> torch.linalg.multi_dot([torch.ones(2), torch.ones(2, 3), torch.ones(3)]).item()
    6.0
    """
    op = "multi_dot"
    ts = [as_tensor_arg(t, op) for t in tensors]
    if len(ts) < 2:
        raise RuntimeError(f"{op}(): expected at least 2 tensors but got {len(ts)}")
    for i, t in enumerate(ts):
        first, last = i == 0, i == len(ts) - 1
        if (first or last) and t.ndim not in (1, 2):
            raise RuntimeError(f"{op}(): the {'first' if first else 'last'} tensor must be 1D or 2D but got "
                               f"{t.ndim}D")
        if not first and not last and t.ndim != 2:
            raise RuntimeError(f"{op}(): tensor {i} must be 2D but got {t.ndim}D")
        if t.dtype != ts[0].dtype:
            raise RuntimeError(f"{op}(): all tensors must have be the same dtype but tensor 0 is "
                               f"{_basic._tn(ts[0].dtype)} and tensor {i} is {_basic._tn(t.dtype)}")
    row, col = ts[0].ndim == 1, ts[-1].ndim == 1
    mats = list(ts)
    if row:
        mats[0] = _unsqueeze(mats[0], 0)
    if col:
        mats[-1] = _unsqueeze(mats[-1], 1)
    for i in range(len(mats) - 1):
        if mats[i].shape[1] != mats[i + 1].shape[0]:
            raise RuntimeError(f"{op}(): tensors {i} and {i + 1} with shapes {list(mats[i].shape)} and "
                               f"{list(mats[i + 1].shape)} cannot be multiplied")
    out = mats[0]
    for m in mats[1:]:
        out = matmul.__wrapped__(out, m)
    if row:
        out = _squeeze(out, 0)
    if col:
        out = _squeeze(out, -1)
    return out


def vecdot(x, y, *, dim=-1):
    """The dot product of ``x`` and ``y`` along ``dim`` (``torch.linalg.vecdot``), after
    broadcasting; one dtype. ``sum(x * y, dim)`` (real tensors: no conjugation).

    Example
    -------
    >>> import numbagrad as torch
    >>> torch.linalg.vecdot(torch.ones(2, 3), torch.tensor([1.0, 2.0, 3.0])).tolist()
    [6.0, 6.0]
    """
    op = "linalg.vecdot"
    x, y = as_tensor_arg(x, op), as_tensor_arg(y, op)
    if x.dtype != y.dtype:
        raise RuntimeError(f"{op}: Expected x and y to have the same dtype, but found x of type "
                           f"{_basic._tn(x.dtype)} and y of type {_basic._tn(y.dtype)} instead")
    prod = _mul(x, y)
    return _sum(prod, wrap_dim(dim, prod.ndim, op), False)


def cross(input, other, *, dim=-1):
    """The cross product of 3-vectors along ``dim`` (``torch.linalg.cross``; ``dim`` defaults
    to the last dimension); the two tensors have one number of dimensions and broadcast.
    ``numbagrad.cross`` with that default.

    Example
    -------
    >>> import numbagrad as torch
    >>> torch.linalg.cross(torch.tensor([1.0, 0.0, 0.0]), torch.tensor([0.0, 1.0, 0.0])).tolist()
    [0.0, 0.0, 1.0]
    """
    return _basic.cross(input, other, dim=dim)


def diagonal(A, *, offset=0, dim1=-2, dim2=-1):
    """The diagonals of the matrices of ``A`` (``torch.linalg.diagonal``): ``numbagrad.diagonal``
    with the last two dimensions as the default plane (a copy, not a view).

    Example
    -------
    >>> import numbagrad as torch
    >>> torch.linalg.diagonal(torch.eye(2).expand(3, 2, 2)).shape
    (3, 2)
    """
    return _basic.diagonal(A, offset, dim1, dim2)


def vander(x, *, N=None):
    """The Vandermonde matrix of ``x`` (``torch.linalg.vander``): ``out[..., i, j] = x[..., i] ** j``
    for ``j < N`` (default ``x.shape[-1]``), built by repeated products (differentiable, and
    finite at 0).

    Example
    -------
    >>> import numbagrad as torch
    >>> torch.linalg.vander(torch.tensor([2.0, 3.0])).tolist()
    [[1.0, 2.0], [1.0, 3.0]]
    """
    op = "linalg.vander"
    x = as_tensor_arg(x, op)
    if x.ndim < 1:
        raise RuntimeError(f"{op}: x must have at least one dimension.")
    n = x.shape[-1] if N is None else N
    if n < 1:
        raise RuntimeError(f"{op}: N must be greater than 1.")
    ones = _where(Tensor._from_array(np.ones(x.shape, np.bool_)), Tensor._from_array(np.ones(x.shape, x.array.dtype)),
                  x)  # x ** 0: one, with a zero gradient
    cols = [ones]
    for _ in range(1, n):
        cols.append(x if len(cols) == 1 else _mul(cols[-1], x))
    return _stack(cols, -1)


__all__ = ["LinAlgError", "vector_norm", "matrix_norm", "norm", "cond", "det", "slogdet", "inv", "inv_ex", "solve",
           "cholesky", "cholesky_ex", "solve_triangular", "lstsq", "tensorinv", "eigh", "eigvalsh", "svd",
           "svdvals", "qr", "pinv", "matrix_rank", "matrix_power", "matrix_exp", "multi_dot", "vecdot", "cross",
           "diagonal", "vander", "matmul"]
