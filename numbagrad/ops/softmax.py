"""softmax, log_softmax and softmin along one dimension (``torch.nn.functional`` semantics).

The op moves ``dim`` last, views the input as a C-contiguous ``(rows, n)`` array (one copy
only when ``dim`` was not already last) and launches the row-wise kernels
``softmax/{softmax,log_softmax}_{fwd,bwd}`` (``numbagrad/kernels/cpu/softmax.py``; the
measurements are in ``perf/README.md``). Rows are shifted by their maximum, so logits of
+-1e4 give exact probabilities, never inf/NaN.

``dim=None`` follows PyTorch's deprecated implicit choice (0 for 0-, 1- and 3-D inputs,
else 1) with a warning. ``dtype=`` casts the input before the operation, as in PyTorch.
Integer inputs are cast to the default float dtype; float16 is computed in float32.
"""
import math
import warnings

from .. import _dtype
from ..autograd.function import Function
from ..backend import backend_of
from ._util import as_tensor_arg, cast_back, float_operands, wrap_dim

__all__ = ["softmax", "log_softmax", "softmin"]


def _to_rows(be, a, dim):
    """``a`` with ``dim`` moved last, as a C-contiguous 2-D (rows, n) array, and the
    moved shape."""
    if a.ndim == 0:
        return be.contiguous(a).reshape(1, 1), ()
    m = a if dim == a.ndim - 1 else be.moveaxis(a, dim, -1)
    shape = m.shape
    n = shape[-1]
    rows = math.prod(shape[:-1])
    return be.contiguous(m).reshape(rows, n), shape


def _from_rows(be, a2, shape, dim, ndim):
    if ndim == 0:
        return a2.reshape(())
    a = a2.reshape(shape)
    return a if dim == ndim - 1 else be.moveaxis(a, -1, dim)


class _RowWise(Function):
    """A row-wise op run by the ``softmax`` kernel family: subclasses name the entry points."""

    fwd_kernel = bwd_kernel = None

    @staticmethod
    def forward(ctx, x, dim):
        be = backend_of(x)
        x2, shape = _to_rows(be, x, dim)
        out2 = be.empty(x2.shape, x.dtype)
        be.kernel("softmax", ctx.fwd_kernel)(x2, out2)
        y = _from_rows(be, out2, shape, dim, x.ndim)
        ctx.dim = dim
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        be = backend_of(g)
        (y,) = ctx.saved_tensors
        dim = ctx.dim
        g2, shape = _to_rows(be, g, dim)
        y2, _ = _to_rows(be, y, dim)
        gx2 = be.empty(g2.shape, g.dtype)
        be.kernel("softmax", ctx.bwd_kernel)(g2, y2, gx2)
        return _from_rows(be, gx2, shape, dim, g.ndim), None


class Softmax(_RowWise):
    fwd_kernel, bwd_kernel = "softmax_fwd", "softmax_bwd"


class LogSoftmax(_RowWise):
    fwd_kernel, bwd_kernel = "log_softmax_fwd", "log_softmax_bwd"


def _implicit_dim(name, ndim, stacklevel):
    warnings.warn(f"Implicit dimension choice for {name} has been deprecated. "
                  "Change the call to include dim=X as an argument.", stacklevel=stacklevel)
    return 0 if ndim in (0, 1, 3) else 1


def _prepare(input, dim, dtype, name, stacklevel):
    from .shape import cast
    x = as_tensor_arg(input, name)
    if dtype is not None:
        x = cast(x, _dtype.as_dtype(dtype))
    (x,), back = float_operands(name, x)
    if dim is None:
        dim = _implicit_dim(name, x.ndim, stacklevel + 1)
    return x, wrap_dim(dim, x.ndim, name), back


def softmax(input, dim=None, _stacklevel=3, dtype=None):
    """exp(x) / sum(exp(x)) along ``dim`` (max-shifted)."""
    x, dim, back = _prepare(input, dim, dtype, "softmax", _stacklevel)
    return cast_back(Softmax.apply(x, dim), back)


def log_softmax(input, dim=None, _stacklevel=3, dtype=None):
    """x - logsumexp(x) along ``dim`` (max-shifted)."""
    x, dim, back = _prepare(input, dim, dtype, "log_softmax", _stacklevel)
    return cast_back(LogSoftmax.apply(x, dim), back)


def softmin(input, dim=None, _stacklevel=3, dtype=None):
    """softmax(-x) along ``dim``."""
    x, dim, back = _prepare(input, dim, dtype, "softmin", _stacklevel)
    return cast_back(Softmax.apply(-x, dim), back)
