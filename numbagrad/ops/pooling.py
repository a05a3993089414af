"""Pooling over the last one or two dimensions (``torch.nn.functional`` semantics).

Public functions: ``max_pool1d``, ``max_pool2d``, ``avg_pool1d``, ``avg_pool2d``,
``adaptive_avg_pool1d``, ``adaptive_avg_pool2d``, ``adaptive_max_pool1d``,
``adaptive_max_pool2d``, ``lp_pool1d``, ``lp_pool2d``.

How it runs: the input (batched ``(N, C, ...)`` or unbatched ``(C, ...)``) is made
C-contiguous and viewed as ``(P, H, W)`` planes, ``P`` the product of the leading
dimensions; a 1-D pool is the 2-D one on ``(P, 1, L)`` with a 1-row window, so one kernel
family (``numbagrad/kernels/cpu/pooling.py`` and its CUDA twins) serves both. Each pool
is one :class:`~numbagrad.autograd.function.Function` whose forward and backward are one
kernel launch each:

* max pools record int64 argmax indices in forward (flat ``ih * W + iw`` within the
  plane, torch's ``return_indices`` convention; ties keep the first maximum, NaN
  propagates); backward routes each output gradient to its index (summing where windows
  overlap). The indices are handed back to the caller without joining the graph. One
  deliberate difference: a dilated window lying wholly in the padding gives ``-inf`` and
  torch's index, but no gradient (torch's backward adds it to that index, outside the
  window, and past the end of the plane it writes out of bounds: it crashed the process
  here).
* average pools follow torch's divisor rules: ``count_include_pad`` counts padding that
  lies inside ``input + padding``, ``divisor_override`` replaces the count; ``ceil_mode``
  windows that start in the right padding are dropped (torch's rule).
* adaptive pools use torch's windows ``[floor(i * in / out), ceil((i + 1) * in / out))``.

Output sizes, and the argument checks (positive kernel, stride and dilation; padding
non-negative and at most ``kernel_size // 2``, dilated or not; an output of at least one
element), are torch's, with torch's messages prefixed by the op name and the input's
shape and dtype.

dtypes: float32 and float64 natively; float16 is computed in float32 and cast back (CPU
``@njit`` has no float16; max of half values is exact, averages round once); bfloat16 the
same way, through ``Function.apply``'s bfloat16 rule. Integer
inputs raise (``NotImplementedError``): numbagrad pools floating tensors only.
"""
import math

import numpy as np

from .. import _dtype
from ..autograd.function import Function, keep_versions
from ..backend import backend_of
from ..tensor import Tensor
from ._util import as_tensor_arg, cast_back, float_operands

__all__ = ["max_pool1d", "max_pool2d", "avg_pool1d", "avg_pool2d", "adaptive_avg_pool1d",
           "adaptive_avg_pool2d", "adaptive_max_pool1d", "adaptive_max_pool2d", "lp_pool1d", "lp_pool2d"]


# ---- Functions -------------------------------------------------------------------------------
def _planes(be, a, P, H, W):
    """``a`` as a C-contiguous (P, H, W) array."""
    return be.contiguous(a).reshape(P, H, W)


def _setup(ctx, x, geo):
    """Record the plane geometry on ``ctx``; ``geo`` = (lead, H, W, OH, OW, out_shape) from
    :func:`_geo`. Returns the number of planes P."""
    lead, H, W, OH, OW, _ = geo
    P = math.prod(lead)
    ctx.geo = (P, H, W, OH, OW, x.shape)
    return P


class _Pool2dFn(Function):
    """One pool over (P, H, W) planes, forward and backward one launch each of the kernels
    ``fwd`` and ``bwd``, which take the planes, the output (the input's gradient in
    backward) and the int ``params`` (a tuple, empty for the adaptive pools). A max pool
    (``indices``) also records int64 indices, saved for backward (between the planes and
    the gradient) and appended to ``box`` (a list) when one is given."""
    fwd = bwd = None
    indices = False

    @staticmethod
    def forward(ctx, x, geo, params, box):
        be = backend_of(x)
        P = _setup(ctx, x, geo)
        _, H, W, OH, OW, out_shape = geo
        out = be.empty((P, OH, OW), x.dtype)
        idx = (be.empty((P, OH, OW), np.int64),) if ctx.indices else ()
        be.kernel("pooling", ctx.fwd)(_planes(be, x, P, H, W), out, *idx, *params)
        ctx.params = params
        if idx:
            ctx.save_for_backward(*idx)
            if box is not None:
                box.append(idx[0].reshape(out_shape))
        return out.reshape(out_shape)

    @staticmethod
    def backward(ctx, g):
        be = backend_of(g)
        idx = ctx.saved_tensors if ctx.indices else ()
        P, H, W, OH, OW, xshape = ctx.geo
        gx = be.empty((P, H, W), g.dtype)
        be.kernel("pooling", ctx.bwd)(_planes(be, g, P, OH, OW), *idx, gx, *ctx.params)
        return gx.reshape(xshape), None, None, None


class MaxPool2dFn(_Pool2dFn):
    """Max pool over (P, H, W) planes; ``box`` (a list) receives the int64 indices."""
    fwd, bwd, indices = "max_pool2d_fwd", "max_pool2d_bwd", True


class AvgPool2dFn(_Pool2dFn):
    fwd, bwd = "avg_pool2d_fwd", "avg_pool2d_bwd"


class AdaptiveAvgPool2dFn(_Pool2dFn):
    fwd, bwd = "adaptive_avg_pool2d_fwd", "adaptive_avg_pool2d_bwd"


class AdaptiveMaxPool2dFn(_Pool2dFn):
    fwd, bwd, indices = "adaptive_max_pool2d_fwd", "adaptive_max_pool2d_bwd", True


# ---- argument handling -----------------------------------------------------------------------
def _desc(x):
    return f"{tuple(x.shape)} {x.dtype}"


def _ints(v, n, name, arg, allow_empty=False):
    """``v`` (an int, or a sequence of 1 or ``n`` ints) as a tuple of ``n`` ints."""
    if isinstance(v, (bool, np.bool_)):
        raise TypeError(f"{name}: argument '{arg}' must be an int or a tuple of ints, not bool")
    if isinstance(v, (int, np.integer)):
        return (int(v),) * n
    if isinstance(v, (tuple, list)):
        if len(v) == 0 and allow_empty:
            return None
        if all(isinstance(e, (int, np.integer)) and not isinstance(e, bool) for e in v):
            if len(v) == 1:
                return (int(v[0]),) * n
            if len(v) == n:
                return tuple(int(e) for e in v)
    raise (RuntimeError if isinstance(v, (tuple, list)) else TypeError)(
        f"{name}: {arg} must either be a single int, or a tuple of {n} ints, got {v!r}")


def _float_input(input, name, ndims):
    """(tensor to compute on, dtype to cast the result back to or None): :func:`float_operands`
    after the checks that integer inputs raise and the rank is right."""
    x = as_tensor_arg(input, name)
    d = x.dtype
    if not _dtype.is_float(d):
        raise NotImplementedError(f"{name}: expected a floating input, got {_desc(x)} "
                                  "(numbagrad pools floating tensors only; cast it first)")
    lo, hi = ndims
    if not lo <= x.ndim <= hi or any(s == 0 for s in x.shape[1:]) or (x.ndim == lo and x.shape[0] == 0):
        raise RuntimeError(f"{name}: expected a {lo}D or {hi}D (batch mode) tensor with optional 0 dim "
                           f"batch size for input, but got {_desc(x)}")
    (x,), back = float_operands(name, x)
    return x, back


def _returned_indices(y, idx):
    """The indices a max pool hands back (``return_indices``): a copy of the array its
    backward reads, so that no write to them reaches the kernel (the dilated backward
    trusts them); writing them still makes ``y``'s backward raise, as in PyTorch."""
    t = Tensor._from_array(backend_of(idx).copy(idx))
    keep_versions(y, t)
    return t


def _out_size(n, k, s, p, d, ceil_mode):
    """torch's pooling_output_shape."""
    o = (n + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil_mode else 0)) // s + 1
    if ceil_mode and (o - 1) * s >= n + p:
        o -= 1
    return o


def _window_args(name, x, nsp, kernel_size, stride, padding, dilation, ceil_mode):
    """Checked (k, s, p, d, out sizes), each a tuple over the ``nsp`` pooled dims."""
    k = _ints(kernel_size, nsp, name, "kernel_size")
    s = _ints(stride, nsp, name, "stride", allow_empty=True) if stride is not None else None
    s = k if s is None else s
    p = _ints(padding, nsp, name, "padding")
    d = _ints(dilation, nsp, name, "dilation")
    where = f"{name}: input {_desc(x)}: "
    if any(v <= 0 for v in k):
        raise RuntimeError(where + f"kernel size should be greater than zero, but got kernel_size={k}")
    if any(v <= 0 for v in s):
        raise RuntimeError(where + f"stride should be greater than zero, but got stride={s}")
    if any(v <= 0 for v in d):
        raise RuntimeError(where + f"dilation should be greater than zero, but got dilation={d}")
    if any(v < 0 for v in p):
        raise RuntimeError(where + f"pad must be non-negative, but got pad={p}")
    # torch checks padding against the kernel size itself (kernel_size // 2), also when dilated
    for ki, pi in zip(k, p):
        if pi > ki // 2:
            raise RuntimeError(where + f"pad should be at most half of kernel size, but got pad={p} "
                                       f"and kernel_size={k}")
    sp = tuple(x.shape[-nsp:])
    o = tuple(_out_size(n, ki, si, pi, di, ceil_mode) for n, ki, si, pi, di in zip(sp, k, s, p, d))
    if any(v < 1 for v in o):
        raise RuntimeError(where + f"Given input size: {sp}. Calculated output size: {o}. "
                                   "Output size is too small")
    return k, s, p, d, o


def _geo(x, nsp, out_sp):
    """(lead, H, W, OH, OW, out_shape) for the (P, H, W) view of ``x``."""
    lead = tuple(x.shape[:-nsp])
    if nsp == 1:
        H, W = 1, x.shape[-1]
        OH, OW = 1, out_sp[0]
    else:
        H, W = x.shape[-2], x.shape[-1]
        OH, OW = out_sp
    return lead, H, W, OH, OW, lead + tuple(out_sp)


def _as2d(t, nsp, fill):
    """A per-dim tuple of a 1-D pool as the (row, column) pair of the 2-D kernels."""
    return (fill,) + t if nsp == 1 else t


def _max_pool(name, nsp, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices):
    x, back = _float_input(input, name, (nsp + 1, nsp + 2))
    k, s, p, d, o = _window_args(name, x, nsp, kernel_size, stride, padding, dilation, ceil_mode)
    k, s, p, d = _as2d(k, nsp, 1), _as2d(s, nsp, 1), _as2d(p, nsp, 0), _as2d(d, nsp, 1)
    params = (k[0], k[1], s[0], s[1], p[0], p[1], d[0], d[1])
    box = [] if return_indices else None
    y = cast_back(MaxPool2dFn.apply(x, _geo(x, nsp, o), params, box), back)
    if return_indices:
        return y, _returned_indices(y, box[0])
    return y


def _avg_pool(name, nsp, input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override):
    x, back = _float_input(input, name, (nsp + 1, nsp + 2))
    k, s, p, _, o = _window_args(name, x, nsp, kernel_size, stride, padding, 1, ceil_mode)
    div = 0
    if divisor_override is not None:
        div = int(divisor_override)
        if div == 0:
            raise RuntimeError(f"{name}: divisor must be not zero")
    k, s, p = _as2d(k, nsp, 1), _as2d(s, nsp, 1), _as2d(p, nsp, 0)
    params = (k[0], k[1], s[0], s[1], p[0], p[1], int(bool(count_include_pad)), div)
    return cast_back(AvgPool2dFn.apply(x, _geo(x, nsp, o), params, None), back)


def _adaptive_size(name, x, nsp, output_size):
    if isinstance(output_size, (int, np.integer)) and not isinstance(output_size, bool):
        out = (int(output_size),) * nsp
    elif isinstance(output_size, (tuple, list)) and len(output_size) == nsp:
        out = tuple(x.shape[-nsp + i] if v is None else v for i, v in enumerate(output_size))
    elif output_size is None:
        out = tuple(x.shape[-nsp:])
    else:
        raise RuntimeError(f"{name}: output_size must be an int or a tuple of {nsp} ints (or None), "
                           f"got {output_size!r}")
    if any(isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0 for v in out):
        raise RuntimeError(f"{name}: output_size must hold non-negative ints (or None), got {output_size!r}")
    return tuple(int(v) for v in out)


def _adaptive(name, nsp, input, output_size, fn, return_indices=False):
    x, back = _float_input(input, name, (nsp + 1, nsp + 2))
    o = _adaptive_size(name, x, nsp, output_size)
    geo = _geo(x, nsp, o)
    box = [] if return_indices else None
    y = cast_back(fn.apply(x, geo, (), box), back)
    if return_indices:
        return y, _returned_indices(y, box[0])
    return y


# ---- public functions ------------------------------------------------------------------------
def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    """1-D max pooling over the last dimension of ``(N, C, L)`` or ``(C, L)``.

    Parameters
    ----------
    input : Tensor
        ``(N, C, L)`` or ``(C, L)``, floating.
    kernel_size, stride, padding, dilation : int or tuple of one int
        The window; ``stride`` defaults to ``kernel_size``; ``padding`` (implicit ``-inf``)
        at most ``kernel_size // 2`` (torch's rule, dilated or not).
    ceil_mode : bool
        Round the output length up (windows starting in the right padding are dropped).
    return_indices : bool
        Also return the int64 argmax positions along ``L`` (first maximum on ties).

    Returns
    -------
    Tensor, or (Tensor, Tensor) with ``return_indices``.
    """
    return _max_pool("max_pool1d", 1, input, kernel_size, stride, padding, dilation, ceil_mode,
                     return_indices)


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    """2-D max pooling over the last two dimensions of ``(N, C, H, W)`` or ``(C, H, W)``.

    Parameters
    ----------
    input : Tensor
        ``(N, C, H, W)`` or ``(C, H, W)``, floating.
    kernel_size, stride, padding, dilation : int or tuple of two ints
        The window; ``stride`` defaults to ``kernel_size``; ``padding`` (implicit ``-inf``)
        at most ``kernel_size // 2`` (torch's rule, dilated or not).
    ceil_mode : bool
        Round output sizes up (windows starting in the bottom/right padding are dropped).
    return_indices : bool
        Also return int64 argmax indices, flat ``h * W + w`` within each ``(H, W)`` plane
        (as ``torch.nn.functional.max_pool2d``; the first maximum on ties).

    Returns
    -------
    Tensor, or (Tensor, Tensor) with ``return_indices``.
    """
    return _max_pool("max_pool2d", 2, input, kernel_size, stride, padding, dilation, ceil_mode,
                     return_indices)


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
    """1-D average pooling over the last dimension of ``(N, C, L)`` or ``(C, L)``.

    Parameters
    ----------
    input : Tensor
        ``(N, C, L)`` or ``(C, L)``, floating.
    kernel_size, stride, padding : int or tuple of one int
        The window; ``stride`` defaults to ``kernel_size``; zero ``padding`` at most half the
        kernel.
    ceil_mode : bool
        Round the output length up.
    count_include_pad : bool
        Divide by the window length including padding (``True``) or by the number of input
        elements in the window.

    Returns
    -------
    Tensor
    """
    return _avg_pool("avg_pool1d", 1, input, kernel_size, stride, padding, ceil_mode, count_include_pad, None)


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    """2-D average pooling over the last two dimensions of ``(N, C, H, W)`` or ``(C, H, W)``.

    Parameters
    ----------
    input : Tensor
        ``(N, C, H, W)`` or ``(C, H, W)``, floating.
    kernel_size, stride, padding : int or tuple of two ints
        The window; ``stride`` defaults to ``kernel_size``; zero ``padding`` at most half the
        kernel.
    ceil_mode : bool
        Round output sizes up.
    count_include_pad : bool
        Count padding inside ``input + padding`` in the divisor.
    divisor_override : int, optional
        Divide every window sum by this instead (non-zero).

    Returns
    -------
    Tensor
    """
    return _avg_pool("avg_pool2d", 2, input, kernel_size, stride, padding, ceil_mode, count_include_pad,
                     divisor_override)


def adaptive_avg_pool1d(input, output_size):
    """Average over ``output_size`` adaptive windows of the last dimension of ``(N, C, L)`` or
    ``(C, L)``: window ``i`` is ``[floor(i * L / out), ceil((i + 1) * L / out))``.

    Parameters
    ----------
    input : Tensor
    output_size : int or tuple of one int

    Returns
    -------
    Tensor
    """
    return _adaptive("adaptive_avg_pool1d", 1, input, output_size, AdaptiveAvgPool2dFn)


def adaptive_avg_pool2d(input, output_size):
    """Average over adaptive windows of the last two dimensions of ``(N, C, H, W)`` or
    ``(C, H, W)`` (torch's windows ``[floor(i * in / out), ceil((i + 1) * in / out))``).

    Parameters
    ----------
    input : Tensor
    output_size : int, or tuple of two (int or None; None keeps that input size)

    Returns
    -------
    Tensor
    """
    return _adaptive("adaptive_avg_pool2d", 2, input, output_size, AdaptiveAvgPool2dFn)


def adaptive_max_pool1d(input, output_size, return_indices=False):
    """Max over adaptive windows of the last dimension of ``(N, C, L)`` or ``(C, L)``.

    Parameters
    ----------
    input : Tensor
    output_size : int or tuple of one int
    return_indices : bool
        Also return the int64 argmax positions along ``L``.

    Returns
    -------
    Tensor, or (Tensor, Tensor) with ``return_indices``.
    """
    return _adaptive("adaptive_max_pool1d", 1, input, output_size, AdaptiveMaxPool2dFn, return_indices)


def adaptive_max_pool2d(input, output_size, return_indices=False):
    """Max over adaptive windows of the last two dimensions of ``(N, C, H, W)`` or ``(C, H, W)``.

    Parameters
    ----------
    input : Tensor
    output_size : int, or tuple of two (int or None; None keeps that input size)
    return_indices : bool
        Also return int64 argmax indices, flat ``h * W + w`` within each plane.

    Returns
    -------
    Tensor, or (Tensor, Tensor) with ``return_indices``.
    """
    return _adaptive("adaptive_max_pool2d", 2, input, output_size, AdaptiveMaxPool2dFn, return_indices)


def _lp_pool(name, nsp, input, norm_type, kernel_size, stride, ceil_mode):
    from .activation import relu
    from .elementwise import abs as _abs, pow as _pow, sign
    k = _ints(kernel_size, nsp, name, "kernel_size")
    x = as_tensor_arg(input, name)
    out = _avg_pool(name, nsp, _pow(x, norm_type), k, stride, 0, ceil_mode, True, None)  # errors name lp_pool
    return _pow(sign(out) * relu(_abs(out)) * math.prod(k), 1.0 / norm_type)


def lp_pool1d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """Power-average pooling along the last dimension: :func:`lp_pool2d` with a window of
    one row, so ``kernel_size`` and ``stride`` are ints (as ``torch.nn.functional.lp_pool1d``:
    composed from ``avg_pool1d``). Parameters and result as :func:`lp_pool2d`'s."""
    return _lp_pool("lp_pool1d", 1, input, norm_type, kernel_size, stride, ceil_mode)


def lp_pool2d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """Power-average pooling ``(sum over the window of x ** p) ** (1 / p)`` over the last two
    dimensions (as ``torch.nn.functional.lp_pool2d``: composed from ``avg_pool2d``).

    Parameters
    ----------
    input : Tensor
    norm_type : float
        ``p``.
    kernel_size : int or tuple of two ints
    stride : int or tuple of two ints, optional
    ceil_mode : bool

    Returns
    -------
    Tensor
    """
    return _lp_pool("lp_pool2d", 2, input, norm_type, kernel_size, stride, ceil_mode)
