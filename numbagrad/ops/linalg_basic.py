"""Matrix products with accumulation (``addmm``, ``addmv``, ``addr``, ``baddbmm``,
``addbmm``), vector products (``mv``, ``inner``, ``vdot``, ``tensordot``, ``kron``,
``cross``), diagonals (``diag``, ``diagonal``, ``diag_embed``, ``diagflat``), pairwise
distances (``cdist``) and the block builders ``block_diag`` and ``cartesian_prod``.

Every op here is a composite of numbagrad's differentiable ops (``matmul``, the
elementwise ops, ``sum``/``amax``, ``reshape``/``movedim``/``pad``/``cat``,
``index_select``): the gradients are those of the parts, and a CUDA tensor runs the
parts' CUDA twins. No op here has a kernel of its own.

The accumulating products follow PyTorch's ``out = beta * input + alpha * product``, with
``input`` broadcast (as ``expand``, never growing the result) to the product's shape. As in
PyTorch, ``beta=0`` ignores ``input``: NaN or inf there do not reach the result, and
``input`` gets a zero gradient.

``diagonal`` returns a copy, not a view of ``input`` as in PyTorch: writing into its result
does not change ``input``.
"""
import builtins
import math
import numbers
import warnings

import numpy as np

from .. import _dtype
from ..tensor import Tensor
from ._autocast import lower_precision
from ._util import as_tensor_arg, broadcast_shape, same_device, wrap_dim
from .elementwise import abs, add, eq, isfinite, logical_and, mul, pow, sign, sqrt, square, sub, where
from .indexing import index_select
from .matmul import matmul
from .pointwise import _inplace
from .reduce import amax, sum
from .shape import cast, cat, expand, movedim, pad, permute, reshape, stack, unsqueeze

_TORCH_NAMES = {"float32": "Float", "float64": "Double", "float16": "Half", "bfloat16": "BFloat16",
                "int64": "Long", "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte",
                "bool": "Bool"}


def _tn(dtype):
    """PyTorch's name of ``dtype`` (``Float``, ``Double``...), as its messages spell it."""
    return _TORCH_NAMES.get(str(dtype), str(dtype))


def _shp(t):
    return "x".join(str(n) for n in t.shape)


def _tensors(opname, **named):
    """The named arguments as Tensors (lists/arrays are wrapped), all on one device."""
    out = [as_tensor_arg(v, opname) for v in named.values()]
    same_device(opname, *out)
    return out


def _same_dtype(opname, names, *ts):
    """Raise PyTorch's error unless the Tensors ``ts`` (named ``names``) have one dtype."""
    if len({t.dtype for t in ts}) > 1:
        raise RuntimeError(f"{opname}: {' and '.join(names)} must have the same dtype, but got "
                           + " and ".join(_tn(t.dtype) for t in ts))


def _check_scalars(opname, input, beta, alpha):
    for name, v in (("beta", beta), ("alpha", alpha)):
        if not isinstance(v, numbers.Number) or isinstance(v, complex):
            raise TypeError(f"{opname}: argument '{name}' must be a real number, got {type(v).__name__} {v!r}")
        if not (_dtype.is_float(input.dtype) or isinstance(v, (numbers.Integral, np.integer))):
            raise RuntimeError(f"{opname}: For integral input tensors, argument {name} must not be a floating "
                               f"point number (got {name}={v!r} for an input of dtype {_tn(input.dtype)})")


def _expandable(opname, input, shape):
    """Raise PyTorch's ``expand`` error unless ``input`` broadcasts to ``shape`` without growing it."""
    if input.ndim > len(shape):
        raise RuntimeError(f"{opname}: expand({list(input.shape)}, size={list(shape)}): the number of sizes "
                           f"provided ({len(shape)}) must be greater or equal to the number of dimensions "
                           f"in the tensor ({input.ndim})")
    for i, n in enumerate(input.shape):
        j = len(shape) - input.ndim + i
        if n != 1 and n != shape[j]:
            raise RuntimeError(f"{opname}: The expanded size of the tensor ({shape[j]}) must match the existing "
                               f"size ({n}) at non-singleton dimension {j}.  Target sizes: {list(shape)}.  "
                               f"Tensor sizes: {list(input.shape)}")


def _accumulate(opname, input, product, beta, alpha):
    """``beta * input + alpha * product`` with ``input`` broadcast to ``product``'s shape;
    ``beta == 0`` drops ``input`` (NaN there does not propagate) but keeps it in the graph
    with a zero gradient, as PyTorch."""
    _expandable(opname, input, product.shape)
    out = product if alpha == 1 else mul(product, alpha)
    if beta == 0:
        if input.requires_grad:  # where(False, input, 0): value exactly 0, gradient 0
            never = Tensor._from_array(np.zeros(input.shape, np.bool_)).to(input.device)
            out = add(out, where(never, input, 0))
        return out
    return add(input if beta == 1 else mul(input, beta), out)


def _matrix(opname, name, t, ndim, what="matrix"):
    if t.ndim != ndim:
        raise RuntimeError(f"{opname}: {name} must be a {what}, got {t.ndim}-D tensor of shape {tuple(t.shape)}")


# ---- accumulating matrix products ------------------------------------------------------------
@lower_precision
def addmm(input, mat1, mat2, *, beta=1, alpha=1):
    """``beta * input + alpha * (mat1 @ mat2)`` (``torch.addmm``).

    Parameters
    ----------
    input : Tensor
        Broadcast to ``(n, p)``.
    mat1, mat2 : Tensor
        Matrices of shapes ``(n, m)`` and ``(m, p)``, of ``input``'s dtype.
    beta, alpha : number
        The scales; ``beta=0`` ignores ``input`` (NaN there does not propagate).

    Returns
    -------
    Tensor of shape ``(n, p)``.

    Example
    -------
    >>> import numbagrad as ng
    >>> ng.addmm(ng.ones(2), ng.ones(2, 3), ng.ones(3, 2), beta=2).tolist()
    [[5.0, 5.0], [5.0, 5.0]]
    """
    input, mat1, mat2 = _tensors("addmm", input=input, mat1=mat1, mat2=mat2)
    _matrix("addmm", "mat1", mat1, 2)
    _matrix("addmm", "mat2", mat2, 2)
    if mat1.shape[1] != mat2.shape[0]:
        raise RuntimeError(f"addmm: mat1 and mat2 shapes cannot be multiplied ({_shp(mat1)} and {_shp(mat2)})")
    _same_dtype("addmm", ("mat1", "mat2"), mat1, mat2)
    _same_dtype("addmm", ("self", "mat2"), input, mat2)
    _check_scalars("addmm", input, beta, alpha)
    return _accumulate("addmm", input, matmul(mat1, mat2), beta, alpha)


def _mv_check(opname, input_ndim, mat, vec, input_shape=None):
    if input_ndim > 1 or mat.ndim != 2 or vec.ndim != 1:
        shapes = ([] if input_shape is None else [tuple(input_shape)]) + [tuple(mat.shape), tuple(vec.shape)]
        raise RuntimeError(f"{opname}: vector + matrix @ vector expected, got {input_ndim}, {mat.ndim}, {vec.ndim} "
                           f"(shapes {', '.join(map(str, shapes))})")
    n = mat.shape[0] if input_shape is None or not len(input_shape) else input_shape[0]
    if mat.shape[1] != vec.shape[0] or (input_shape is not None and len(input_shape) and n not in (1, mat.shape[0])):
        raise RuntimeError(f"{opname}: size mismatch, got input ({n}), mat ({_shp(mat)}), vec ({vec.shape[0]})")


def addmv(input, mat, vec, *, beta=1, alpha=1):
    """``beta * input + alpha * (mat @ vec)`` (``torch.addmv``).

    Parameters
    ----------
    input : Tensor
        0-d or 1-d, broadcast to ``(n,)``.
    mat : Tensor
        A matrix ``(n, m)``.
    vec : Tensor
        A vector ``(m,)``; ``input``, ``mat`` and ``vec`` share one dtype.
    beta, alpha : number
        The scales; ``beta=0`` ignores ``input``.

    Returns
    -------
    Tensor of shape ``(n,)``.
    """
    input, mat, vec = _tensors("addmv", input=input, mat=mat, vec=vec)
    _mv_check("addmv", input.ndim, mat, vec, input.shape)
    _same_dtype("addmv", ("input", "mat", "vec"), input, mat, vec)
    _check_scalars("addmv", input, beta, alpha)
    return _accumulate("addmv", input, matmul(mat, vec), beta, alpha)


def mv(input, vec):
    """The matrix-vector product ``input @ vec`` (``torch.mv``): ``(n, m) x (m,) -> (n,)``.

    Example
    -------
    >>> import numbagrad as ng
    >>> ng.mv(ng.ones(2, 3), ng.ones(3)).tolist()
    [3.0, 3.0]
    """
    input, vec = _tensors("mv", input=input, vec=vec)
    _mv_check("mv", 1, input, vec)
    _same_dtype("mv", ("input", "vec"), input, vec)
    return matmul.__wrapped__(input, vec)  # not autocast-listed on the CPU: no cast


def addr(input, vec1, vec2, *, beta=1, alpha=1):
    """``beta * input + alpha * outer(vec1, vec2)`` (``torch.addr``).

    ``vec1`` ``(n,)`` and ``vec2`` ``(m,)`` are vectors; ``input`` broadcasts to ``(n, m)``.
    The dtypes promote as PyTorch's (``outer`` is a broadcast product). For integer inputs
    ``beta`` and ``alpha`` must be integers.
    """
    input, vec1, vec2 = _tensors("addr", input=input, vec1=vec1, vec2=vec2)
    for name, v in (("vec1", vec1), ("vec2", vec2)):
        if v.ndim != 1:
            raise RuntimeError(f"addr: Expected 1-D argument {name}, but got {v.ndim}-D (shape {tuple(v.shape)})")
    _check_scalars("addr", input, beta, alpha)
    return _accumulate("addr", input, mul(unsqueeze(vec1, 1), unsqueeze(vec2, 0)), beta, alpha)


def _batches(opname, batch1, batch2):
    _matrix(opname, "batch1", batch1, 3, "3D tensor")
    _matrix(opname, "batch2", batch2, 3, "3D tensor")
    b, n, m = batch1.shape
    if batch2.shape[0] != b or batch2.shape[1] != m:
        raise RuntimeError(f"{opname}: Expected size for first two dimensions of batch2 tensor to be: [{b}, {m}] "
                           f"but got: [{batch2.shape[0]}, {batch2.shape[1]}] (batch1 of shape {tuple(batch1.shape)}, "
                           f"batch2 of shape {tuple(batch2.shape)})")
    _same_dtype(opname, ("batch1", "batch2"), batch1, batch2)


@lower_precision
def baddbmm(input, batch1, batch2, *, beta=1, alpha=1):
    """``beta * input + alpha * bmm(batch1, batch2)`` (``torch.baddbmm``).

    ``batch1`` ``(b, n, m)`` and ``batch2`` ``(b, m, p)``; ``input`` broadcasts to ``(b, n, p)``.
    ``beta=0`` ignores ``input``.
    """
    input, batch1, batch2 = _tensors("baddbmm", input=input, batch1=batch1, batch2=batch2)
    _batches("baddbmm", batch1, batch2)
    _same_dtype("baddbmm", ("self", "batch2"), input, batch2)
    _check_scalars("baddbmm", input, beta, alpha)
    return _accumulate("baddbmm", input, matmul(batch1, batch2), beta, alpha)


@lower_precision
def addbmm(input, batch1, batch2, *, beta=1, alpha=1):
    """``beta * input + alpha * sum_b batch1[b] @ batch2[b]`` (``torch.addbmm``): the batched
    products reduced over the batch. ``batch1`` ``(b, n, m)``, ``batch2`` ``(b, m, p)``;
    ``input`` broadcasts to ``(n, p)``. An empty batch gives ``beta * input``.
    """
    input, batch1, batch2 = _tensors("addbmm", input=input, batch1=batch1, batch2=batch2)
    _matrix("addbmm", "batch1", batch1, 3, "3D tensor")
    _matrix("addbmm", "batch2", batch2, 3, "3D tensor")
    if batch1.shape[0] != batch2.shape[0]:
        raise RuntimeError(f"addbmm: batch1 and batch2 must have same number of batches, got "
                           f"{batch1.shape[0]} and {batch2.shape[0]}")
    if batch1.shape[2] != batch2.shape[1]:
        raise RuntimeError(f"addbmm: Incompatible matrix sizes for bmm ({batch1.shape[1]}x{batch1.shape[2]} and "
                           f"{batch2.shape[1]}x{batch2.shape[2]})")
    _same_dtype("addbmm", ("batch1", "batch2"), batch1, batch2)
    _same_dtype("addbmm", ("self", "batch2"), input, batch2)
    _check_scalars("addbmm", input, beta, alpha)
    return _accumulate("addbmm", input, sum(matmul(batch1, batch2), 0), beta, alpha)


def _checked_inplace(name, fn):
    """``_inplace(name, fn)`` that first refuses a result of another shape than ``input``
    (the in-place forms never broadcast ``input`` up)."""
    def checked(input, *args, **kwargs):
        out = fn(input, *args, **kwargs)
        if tuple(out.shape) != tuple(input.shape):
            raise RuntimeError(f"{name}_: Bad in-place call: input tensor size {list(input.shape)} and output "
                               f"tensor size {list(out.shape)} should match")
        return out
    op = _inplace(name, checked)
    op.__module__, op.__qualname__ = __name__, name + "_"
    return op


addmm_ = _checked_inplace("addmm", addmm)
addmv_ = _checked_inplace("addmv", addmv)
addbmm_ = _checked_inplace("addbmm", addbmm)
baddbmm_ = _checked_inplace("baddbmm", baddbmm)
addr_ = _checked_inplace("addr", addr)


# ---- vector products ------------------------------------------------------------------------
def vdot(input, other):
    """The dot product of two 1-D tensors of one dtype and size (``torch.vdot``; real tensors,
    so no conjugation), a 0-d tensor."""
    input, other = _tensors("vdot", input=input, other=other)
    if input.ndim != 1 or other.ndim != 1:
        raise RuntimeError(f"vdot: 1D tensors expected, but got {input.ndim}D and {other.ndim}D tensors")
    if input.shape[0] != other.shape[0]:
        raise RuntimeError(f"vdot: inconsistent tensor size, expected tensor [{input.shape[0]}] and src "
                           f"[{other.shape[0]}] to have the same number of elements, but got {input.shape[0]} "
                           f"and {other.shape[0]} elements respectively")
    if input.dtype != other.dtype:
        raise RuntimeError(f"vdot: expected both vectors to have same dtype, but found {_tn(input.dtype)} and "
                           f"{_tn(other.dtype)}")
    return matmul.__wrapped__(input, other)


def _dims_list(opname, dims, which):
    if isinstance(dims, Tensor):
        dims = dims.tolist()
    if isinstance(dims, (bool, np.bool_)) or isinstance(dims, (int, np.integer)):
        raise TypeError(f"{opname}: argument '{which}' must be a tuple of ints, not int")
    if not isinstance(dims, (list, tuple)) or not all(
            isinstance(d, (int, np.integer)) and not isinstance(d, (bool, np.bool_)) for d in dims):
        raise TypeError(f"{opname}: argument '{which}' must be a tuple of ints, got {dims!r}")
    return [int(d) for d in dims]


def tensordot(a, b, dims=2):
    """The contraction of ``a`` and ``b`` over the dimension pairs ``dims`` (``torch.tensordot``).

    Parameters
    ----------
    a, b : Tensor
        Of one dtype.
    dims : int or pair of lists
        An int ``d``: the last ``d`` dimensions of ``a`` with the first ``d`` of ``b``. A pair
        ``([a dims], [b dims])`` (or a list of two lists, or a tensor holding either form):
        those dimensions, pairwise. A contracted dimension of size 1 broadcasts against the
        other's.

    Returns
    -------
    Tensor with ``a``'s free dimensions, then ``b``'s.

    Example
    -------
    >>> import numbagrad as ng
    >>> ng.tensordot(ng.ones(2, 3, 4), ng.ones(3, 4, 5)).shape
    (2, 5)
    """
    a, b = _tensors("tensordot", a=a, b=b)
    if isinstance(dims, Tensor):
        dims = dims.tolist()
    if isinstance(dims, (int, np.integer)) and not isinstance(dims, (bool, np.bool_)):
        d = int(dims)
        if d < 0:
            raise RuntimeError(f"tensordot: tensordot expects dims >= 0, but got dims={d}")
        if d > a.ndim or d > b.ndim:
            raise RuntimeError(f"tensordot: tensordot expects dims < ndim_a or ndim_b, but got dims={d} "
                               f"(shapes {tuple(a.shape)} and {tuple(b.shape)})")
        da, db = list(range(-d, 0)), list(range(d))
    elif isinstance(dims, (list, tuple)):
        if len(dims) != 2:
            raise ValueError(f"tensordot: dims must hold two lists of dimensions, got {dims!r}")
        da, db = _dims_list("tensordot", dims[0], "dims_self"), _dims_list("tensordot", dims[1], "dims_other")
    else:
        raise RuntimeError(f"tensordot: tensordot expects dims to be int or tuple[list[int], list[int]] or "
                           f"list[list[int]] containing two lists, but got dims={dims!r}")
    if len(da) != len(db):
        raise RuntimeError(f"tensordot: both dimension lists should have same length, got {da} and {db}")
    if a.dtype != b.dtype:
        raise RuntimeError(f"tensordot: both inputs should have same dtype, got {_tn(a.dtype)} and {_tn(b.dtype)}")
    wa = [wrap_dim(d, a.ndim, "tensordot", "dims") for d in da]
    wb = [wrap_dim(d, b.ndim, "tensordot", "dims") for d in db]
    for w in (wa, wb):
        if len(set(w)) != len(w):
            rep = next(x for x in w if w.count(x) > 1)
            raise RuntimeError(f"tensordot: dim {rep} appears multiple times in the list of dims")
    sa, sb = list(a.shape), list(b.shape)
    for i, j, di, dj in zip(wa, wb, da, db):
        if sa[i] != sb[j]:
            if sa[i] != 1 and sb[j] != 1:
                raise RuntimeError(f"tensordot: contracted dimensions need to match, but first has size {sa[i]} "
                                   f"in dim {di} and second has size {sb[j]} in dim {dj}")
            sa[i] = sb[j] = max(sa[i], sb[j])
    if sa != list(a.shape):
        a = expand(a, *sa)
    if sb != list(b.shape):
        b = expand(b, *sb)
    fa = [i for i in range(a.ndim) if i not in wa]
    fb = [j for j in range(b.ndim) if j not in wb]
    k = math.prod(sa[i] for i in wa)
    a2 = reshape(permute(a, *(fa + wa)), math.prod(sa[i] for i in fa), k)
    b2 = reshape(permute(b, *(wb + fb)), k, math.prod(sb[j] for j in fb))
    return reshape(matmul.__wrapped__(a2, b2), *([sa[i] for i in fa] + [sb[j] for j in fb]))


def inner(input, other):
    """The inner product over the last dimension (``torch.inner``): ``out[i..., j...] =
    sum_k input[i..., k] * other[j..., k]``; a 0-d operand multiplies the other."""
    input, other = _tensors("inner", input=input, other=other)
    if input.ndim == 0 or other.ndim == 0:
        return mul(input, other)
    if input.shape[-1] != other.shape[-1]:
        raise RuntimeError(f"inner: inner() the last dimension must match on both input tensors but got shapes "
                           f"{list(input.shape)} and {list(other.shape)}")
    if input.dtype != other.dtype:
        raise RuntimeError(f"inner: both inputs should have same dtype, got {_tn(input.dtype)} and "
                           f"{_tn(other.dtype)}")
    return tensordot(input, other, ([-1], [-1]))


def kron(input, other):
    """The Kronecker product (``torch.kron``): for shapes ``a`` and ``b`` (the shorter padded with
    leading 1s), ``out[i * b + j] = input[i] * other[j]`` in every dimension, of shape ``a * b``."""
    input, other = _tensors("kron", input=input, other=other)
    nd = max(input.ndim, other.ndim)
    sa = (1,) * (nd - input.ndim) + tuple(input.shape)
    sb = (1,) * (nd - other.ndim) + tuple(other.shape)
    a = reshape(input, *[v for n in sa for v in (n, 1)])
    b = reshape(other, *[v for n in sb for v in (1, n)])
    return reshape(mul(a, b), *[x * y for x, y in zip(sa, sb)])


def _default_cross_dim(input):
    for i, n in enumerate(input.shape):
        if n == 3:
            return i
    raise RuntimeError(f"cross: no dimension of size 3 in input (shape {tuple(input.shape)})")


def cross(input, other, dim=None):
    """The cross product of 3-vectors along ``dim`` (``torch.cross``); the other dimensions
    broadcast (the two tensors have one number of dimensions).

    ``dim=None`` (deprecated in PyTorch, which warns) takes the first dimension of ``input``
    of size 3; ``torch.linalg.cross`` would take the last.
    """
    input, other = _tensors("cross", input=input, other=other)
    if dim is None:
        warnings.warn("Using torch.cross without specifying the dim arg is deprecated.\nPlease either pass the "
                      "dim explicitly or simply use torch.linalg.cross.\nThe default value of dim will change to "
                      "agree with that of linalg.cross in a future release.", UserWarning, stacklevel=2)
        dim = _default_cross_dim(input)
    if input.ndim != other.ndim:
        raise RuntimeError(f"cross: linalg.cross: inputs must have the same number of dimensions. (shapes "
                           f"{tuple(input.shape)} and {tuple(other.shape)})")
    d = wrap_dim(dim, input.ndim, "cross")
    if input.ndim == 0 or input.shape[d] != 3 or other.shape[d] != 3:
        raise RuntimeError(f"cross: linalg.cross: inputs dimension {dim} must have length 3. Got "
                           f"{input.shape[d] if input.ndim else 1} and {other.shape[d] if other.ndim else 1}")
    if input.dtype != other.dtype:
        raise RuntimeError(f"cross: expected both inputs to have the same dtype, got {_tn(input.dtype)} and "
                           f"{_tn(other.dtype)}")
    broadcast_shape("cross", input.shape, other.shape)
    yzx, zxy = np.array([1, 2, 0]), np.array([2, 0, 1])
    return sub(mul(index_select(input, d, yzx), index_select(other, d, zxy)),
               mul(index_select(input, d, zxy), index_select(other, d, yzx)))


# ---- diagonals ------------------------------------------------------------------------------
def diagonal(input, offset=0, dim1=0, dim2=1):
    """The diagonal of ``input`` in the plane ``(dim1, dim2)`` (``torch.diagonal``), moved to the
    last dimension; ``offset > 0`` is above the main diagonal (``dim2`` index = ``dim1`` index +
    ``offset``). Out-of-range offsets give an empty diagonal. A copy, not a view as in PyTorch.

    Example
    -------
    >>> import numbagrad as ng
    >>> ng.diagonal(ng.arange(9.0).reshape(3, 3), 1).tolist()
    [1.0, 5.0]
    """
    input = as_tensor_arg(input, "diagonal")
    d1 = wrap_dim(dim1, input.ndim, "diagonal", "dim1")
    d2 = wrap_dim(dim2, input.ndim, "diagonal", "dim2")
    if d1 == d2:
        raise RuntimeError(f"diagonal: diagonal dimensions cannot be identical {dim1}, {dim2}")
    offset = _offset("diagonal", offset)
    x = movedim(input, (d1, d2), (-2, -1))
    n, m = x.shape[-2:]
    r0, c0 = max(0, -offset), max(0, offset)
    length = max(0, min(n - r0, m - c0))
    idx = (np.arange(length, dtype=np.int64) + r0) * m + c0 + np.arange(length, dtype=np.int64)
    return index_select(reshape(x, *x.shape[:-2], n * m), -1, idx)


_diagonal = diagonal  # diag's argument named ``diagonal`` hides the function


def _offset(opname, offset):
    if isinstance(offset, (bool, np.bool_)) or not isinstance(offset, (int, np.integer)):
        raise TypeError(f"{opname}: argument 'offset' must be int, not {type(offset).__name__}")
    return int(offset)


def diag_embed(input, offset=0, dim1=-2, dim2=-1):
    """Matrices with the last dimension of ``input`` on their ``offset`` diagonal, in the plane
    ``(dim1, dim2)`` of the result (``torch.diag_embed``); zeros elsewhere. The result has one
    dimension more than ``input``, of size ``n + |offset|`` in ``dim1`` and ``dim2``.
    """
    input = as_tensor_arg(input, "diag_embed")
    nd = input.ndim + 1
    d1 = wrap_dim(dim1, nd, "diag_embed", "dim1", scalar_ok=False)
    d2 = wrap_dim(dim2, nd, "diag_embed", "dim2", scalar_ok=False)
    if d1 == d2:
        raise RuntimeError(f"diag_embed: diagonal dimensions cannot be identical {dim1}, {dim2}")
    offset = _offset("diag_embed", offset)
    n = input.shape[-1]
    size = n + builtins.abs(offset)
    r0, c0 = max(0, -offset), max(0, offset)
    # gather from input with one zero appended: each position of the (size, size) matrix
    # reads its diagonal element or the zero (index n)
    idx = np.full((size, size), n, np.int64)
    k = np.arange(n)
    idx[k + r0, k + c0] = k
    padded = pad(input, (0, 1))
    out = reshape(index_select(padded, -1, idx.reshape(-1)), *input.shape[:-1], size, size)
    return movedim(out, (nd - 2, nd - 1), (d1, d2))


def diag(input, diagonal=0):
    """``torch.diag``: a 1-D ``input`` becomes the square matrix with it on its ``diagonal``-th
    diagonal; a 2-D ``input`` gives its ``diagonal``-th diagonal as a vector."""
    input = as_tensor_arg(input, "diag")
    if input.ndim == 1:
        return diag_embed(input, diagonal, 0, 1)
    if input.ndim == 2:
        return _diagonal(input, diagonal, 0, 1)
    raise RuntimeError(f"diag: diag(): Supports 1D or 2D tensors. Got {input.ndim}D (shape {tuple(input.shape)})")


def diagflat(input, offset=0):
    """The flattened ``input`` on the ``offset``-th diagonal of a square matrix (``torch.diagflat``)."""
    input = as_tensor_arg(input, "diagflat")
    return diag_embed(reshape(input, -1), offset, 0, 1)


# ---- distances and block builders -------------------------------------------------------------
_COMPUTE_MODES = ("use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist", "donot_use_mm_for_euclid_dist")


def cdist(x1, x2, p=2.0, compute_mode="use_mm_for_euclid_dist_if_necessary"):
    r"""The p-norm distances between the rows of ``x1`` and of ``x2`` (``torch.cdist``).

    Parameters
    ----------
    x1 : Tensor
        ``(..., P, M)``, floating.
    x2 : Tensor
        ``(..., R, M)`` of ``x1``'s dtype; the batch dimensions broadcast.
    p : float
        ``>= 0``: ``p=0`` counts the differing coordinates, ``p=inf`` takes the largest
        ``|x1 - x2|``, else :math:`(\sum_m |x1_{pm} - x2_{rm}|^p)^{1/p}`.
    compute_mode : str
        Accepted as PyTorch's; numbagrad always computes the differences directly (no
        ``|x|^2 - 2 x.y + |y|^2`` matrix product), which is the more accurate form.

    Returns
    -------
    Tensor ``(..., P, R)``. The gradient is PyTorch's: 0 where a distance is 0 (and, for
    ``p < 1``, at a zero coordinate difference); for ``p=inf`` every coordinate that attains
    the maximum gets the full gradient.
    """
    x1, x2 = _tensors("cdist", x1=x1, x2=x2)
    if compute_mode not in _COMPUTE_MODES:
        raise ValueError(f"cdist: {compute_mode} is not a valid value for compute_mode")
    if not isinstance(p, numbers.Real):
        raise TypeError(f"cdist: argument 'p' must be a float, got {type(p).__name__} {p!r}")
    for name, t in (("X1", x1), ("X2", x2)):
        if t.ndim < 2:
            raise RuntimeError(f"cdist: cdist only supports at least 2D tensors, {name} got: {t.ndim}D")
        if not _dtype.is_float(t.dtype):
            raise RuntimeError(f"cdist: cdist only supports floating-point dtypes, {name} got: {_tn(t.dtype)}")
    if x1.shape[-1] != x2.shape[-1]:
        raise RuntimeError(f"cdist: X1 and X2 must have the same number of columns. X1: {x1.shape[-1]} "
                           f"X2: {x2.shape[-1]}")
    if x1.dtype != x2.dtype:
        raise RuntimeError(f"cdist: X1 and X2 must have the same dtype, got {_tn(x1.dtype)} and {_tn(x2.dtype)}")
    p = float(p)
    if not p >= 0:
        raise RuntimeError(f"cdist: cdist only supports non-negative p values, got p={p}")
    broadcast_shape("cdist", x1.shape[:-2], x2.shape[:-2])
    diff = sub(unsqueeze(x1, -2), unsqueeze(x2, -3))  # (..., P, R, M)
    if x1.shape[-1] == 0 or 0 in diff.shape:
        return sum(diff, -1)  # no coordinates (every distance is 0) or no distances
    if p == 0:
        return sum(sign(abs(diff)), -1)  # a count, with sign's zero gradient
    if p == 1:
        return sum(abs(diff), -1)
    if p == 2:
        return _root(sum(square(diff), -1), 0.5)
    a = abs(diff)
    if math.isinf(p):
        # the value is the max; the gradient reaches every coordinate attaining it in full
        # (amax would split it between ties): a straight-through term, zero in value
        ad = a.detach()
        top = amax(ad, -1, keepdim=True)
        hit = logical_and(eq(ad, top), isfinite(ad))
        return add(reshape(top, *top.shape[:-1]), sub(sum(where(hit, a, 0), -1), sum(where(hit, ad, 0), -1)))
    zero = eq(a, 0)  # |d|^p with a zero gradient at d = 0 (for p < 1 its slope is infinite there)
    return _root(sum(where(zero, 0, pow(where(zero, 1, a), p)), -1), 1.0 / p)


def _root(s, q):
    """``s ** q`` with a zero gradient where ``s == 0`` (PyTorch's cdist convention): the
    power sees 1 there, so no ``0 * inf`` reaches the gradient."""
    zero = eq(s, 0)
    safe = where(zero, 1, s)
    return where(zero, 0, sqrt(safe) if q == 0.5 else pow(safe, q))


def block_diag(*tensors):
    """The block-diagonal matrix of ``tensors`` (``torch.block_diag``): each 0-d, 1-d (one row)
    or 2-d tensor is a block, placed down the diagonal, zeros elsewhere; dtypes promote.

    Example
    -------
    >>> import numbagrad as ng
    >>> ng.block_diag(ng.ones(1, 2), ng.tensor(3.0)).tolist()
    [[1.0, 1.0, 0.0], [0.0, 0.0, 3.0]]
    """
    ts = [as_tensor_arg(t, "block_diag") for t in tensors]
    same_device("block_diag", *ts)
    for i, t in enumerate(ts):
        if t.ndim > 2:
            raise RuntimeError(f"block_diag: torch.block_diag: Input tensors must have 2 or fewer dimensions. "
                               f"Input {i} has {t.ndim} dimensions")
    if not ts:
        return Tensor(np.zeros((1, 0), _dtype.get_default_dtype()))
    dt = ts[0].dtype
    for t in ts[1:]:
        dt = _dtype.promote(dt, t.dtype)
    blocks = [reshape(t if t.dtype == dt else cast(t, dt), *((1, 1) if t.ndim == 0 else (1, -1) if t.ndim == 1
                                                             else t.shape)) for t in ts]
    total = builtins.sum(b.shape[1] for b in blocks)
    rows, left = [], 0
    for b in blocks:
        c = b.shape[1]
        rows.append(pad(b, (left, total - left - c)))
        left += c
    return cat(rows, 0)


def cartesian_prod(*tensors):
    """The Cartesian product of 1-D tensors of one dtype (``torch.cartesian_prod``): a
    ``(n1 * n2 * ..., k)`` tensor whose rows are the tuples in lexicographic order, as
    ``itertools.product``; one tensor is returned as it is."""
    ts = [as_tensor_arg(t, "cartesian_prod") for t in tensors]
    if not ts:
        raise RuntimeError("cartesian_prod: meshgrid expects a non-empty TensorList")
    same_device("cartesian_prod", *ts)
    for t in ts:
        if t.ndim != 1:
            raise RuntimeError(f"cartesian_prod: Expect a 1D vector, but got shape {list(t.shape)}")
    if len({t.dtype for t in ts}) > 1:
        raise RuntimeError("cartesian_prod: meshgrid expects all tensors to have the same dtype, got "
                           + ", ".join(_tn(t.dtype) for t in ts))
    if len(ts) == 1:
        return ts[0]
    sizes = [t.shape[0] for t in ts]
    k = len(ts)
    cols = [reshape(expand(reshape(t, *[sizes[i] if j == i else 1 for j in range(k)]), *sizes), -1)
            for i, t in enumerate(ts)]
    return stack(cols, 1)


__all__ = ["addmm", "addmv", "addbmm", "baddbmm", "addr", "mv", "inner", "vdot", "tensordot", "kron", "diag",
           "diagonal", "diag_embed", "diagflat", "cross", "cdist", "block_diag", "cartesian_prod",
           "addmm_", "addmv_", "addbmm_", "baddbmm_", "addr_"]

METHODS = ("addmm", "addmv", "addbmm", "baddbmm", "addr", "mv", "inner", "vdot", "kron", "diag", "diagonal",
           "diag_embed", "diagflat", "cross", "addmm_", "addmv_", "addbmm_", "baddbmm_", "addr_")
"""Names in ``__all__`` that are also ``Tensor`` methods (``x.name(...)`` is ``name(x, ...)``;
in-place ``name_`` forms included). Bound by ``tensor._install_operators``."""
