"""Functional forms of the less common layers (``torch.nn.functional`` names, arguments and
errors); :mod:`numbagrad.nn.functional` exports ``__all__``, the Module wrappers live in
:mod:`numbagrad.nn.extra`.

Every function here is a composition of existing differentiable ops (``pad``, ``reshape``,
``index_select``, ``index_add``, ``gather``, elementwise and reduction ops), so gradients and
the CUDA backend come from those ops; nothing here launches a kernel of its own.

* :func:`unfold` (im2col) zero-pads the input, flattens the spatial plane and picks every
  window element with one ``index_select`` along it; the index array is computed on the host
  from the geometry. :func:`fold` (col2im) scatters with ``index_add`` through the same index
  array into a zero plane and crops the padding. ``index_select``'s backward is
  ``index_add`` and the other way round, so each op's backward is the other op: fold is the
  adjoint of unfold. Every size is validated (PyTorch's messages) before the index is built,
  and ``index_select`` / ``index_add`` check it again against the plane.
* :func:`local_response_norm` sums the squared input over a window of ``size`` channels
  (zero-padded as PyTorch's ``avg_pool`` with ``count_include_pad``) by adding shifted
  slices.
* :func:`soft_margin_loss` is ``softplus(-y x)`` (the stable form of ``log(1 + exp(-y x))``).
* :func:`multilabel_margin_loss` reads the target on the host (class indices, ending at the
  first -1), builds the (sample, target position, class) mask there and reduces
  ``relu(1 - x[y_j] + x[i])`` under it.
* :func:`channel_shuffle` is a reshape / transpose / reshape.
"""
import functools

import numpy as np

from .. import _dtype
from ..backend import backend_of
from ..tensor import Tensor
from . import activation as _act
from . import indexing as _ix
from . import reduce as _red
from . import shape as _shape
from ._util import same_device
from .loss import _check_reduction
from .loss_pointwise import LossShapeError, _broadcast_shape, _float_operands, _legacy

__all__ = ["unfold", "fold", "local_response_norm", "soft_margin_loss", "multilabel_margin_loss",
           "channel_shuffle", "gumbel_softmax"]


def _input(x, opname):
    if not isinstance(x, Tensor):
        raise TypeError(f"{opname}: input must be a Tensor, got {type(x).__name__}")
    return x


# ---- unfold / fold (im2col / col2im) -------------------------------------------------------------
def _int_pair(v, what, opname):
    """``v`` (an int or a sequence of two ints) as a pair; PyTorch's errors otherwise."""
    if isinstance(v, (tuple, list)):
        if len(v) != 2:
            raise RuntimeError(f"{opname}: It is expected {what} equals to 2, but got size {len(v)}")
        vals = tuple(v)
    else:
        vals = (v, v)
    for e in vals:
        if isinstance(e, bool) or not isinstance(e, (int, np.integer)):
            raise TypeError(f"{opname}: argument '{what}' must be tuple of ints, but found element of type "
                            f"{type(e).__name__}")
    return tuple(int(e) for e in vals)


def _geometry(opname, kernel_size, dilation, padding, stride):
    k = _int_pair(kernel_size, "kernel_size", opname)
    d = _int_pair(dilation, "dilation", opname)
    p = _int_pair(padding, "padding", opname)
    s = _int_pair(stride, "stride", opname)
    if min(k) <= 0:
        raise RuntimeError(f"{opname}: kernel size should be greater than zero, but got kernel_height: {k[0]} "
                           f"kernel_width: {k[1]}")
    if min(s) <= 0:
        raise RuntimeError(f"{opname}: stride should be greater than zero, but got stride_height: {s[0]} "
                           f"stride_width: {s[1]}")
    if min(d) <= 0:
        raise RuntimeError(f"{opname}: dilation should be greater than zero, but got dilation_height: {d[0]} "
                           f"dilation_width: {d[1]}")
    if min(p) < 0:
        raise RuntimeError(f"{opname}: padding should be non-negative, but got pad_height: {p[0]} "
                           f"pad_width: {p[1]}")
    return k, d, p, s


def _blocks(size, k, d, p, s):
    """The number of sliding blocks along each of the two spatial dims (may be < 1)."""
    return tuple((size[i] + 2 * p[i] - d[i] * (k[i] - 1) - 1) // s[i] + 1 for i in range(2))


@functools.lru_cache(maxsize=64)
def _window_index(plane, k, d, s, blocks):
    """Flat positions in the padded ``plane`` (Hp, Wp) of every window element:
    ``idx[kh, kw, oh, ow] = (oh*sH + kh*dH) * Wp + ow*sW + kw*dW``, flattened in that order
    (PyTorch's column layout: channel-major ``c*kH*kW + kh*kW + kw`` rows, blocks row-major).
    A read-only host array; all entries lie in ``[0, Hp*Wp)`` by construction of ``blocks``."""
    rows = (np.arange(blocks[0]) * s[0])[None, :] + (np.arange(k[0]) * d[0])[:, None]   # (kH, oH)
    cols = (np.arange(blocks[1]) * s[1])[None, :] + (np.arange(k[1]) * d[1])[:, None]   # (kW, oW)
    idx = rows[:, None, :, None] * plane[1] + cols[None, :, None, :]
    idx = np.ascontiguousarray(idx.reshape(-1), dtype=np.int64)
    assert idx.size == 0 or (idx.min() >= 0 and idx.max() < plane[0] * plane[1])
    idx.setflags(write=False)
    return idx


def _float_input(x, opname):
    if not _dtype.is_float(x.dtype):
        raise NotImplementedError(f"{opname}: not implemented for dtype {x.dtype} (a floating dtype is expected)")


def unfold(input, kernel_size, dilation=1, padding=0, stride=1):
    """Extract sliding local blocks (im2col, ``torch.nn.functional.unfold``).

    ``input`` of shape ``(N, C, H, W)`` (or ``(C, H, W)``) becomes ``(N, C*kH*kW, L)`` (or
    ``(C*kH*kW, L)``): column ``l`` holds the ``kH x kW`` window of every channel at the
    ``l``-th block position (row-major), after zero-padding by ``padding``. ``L`` is
    ``prod_i floor((size_i + 2 p_i - d_i (k_i - 1) - 1) / s_i + 1)``. Its gradient is
    :func:`fold` of the upstream gradient (overlapping windows accumulate).

    Example
    -------
    >>> import numbagrad as ng
    >>> ng.nn.functional.unfold(ng.arange(9.).reshape(1, 1, 3, 3), 2).shape
    (1, 4, 4)
    """
    opname = "unfold"
    input = _input(input, opname)
    k, d, p, s = _geometry(opname, kernel_size, dilation, padding, stride)
    shp = tuple(input.shape)
    if input.ndim not in (3, 4) or 0 in shp[-3:]:
        raise RuntimeError(f"{opname}: Expected 3D or 4D (batch mode) tensor with possibly 0 batch size and other "
                           f"non-zero dimensions for input, but got: {list(shp)}")
    _float_input(input, opname)
    size = shp[-2:]
    blocks = _blocks(size, k, d, p, s)
    if min(blocks) < 1:
        raise RuntimeError(f"{opname}: Given input with spatial size {size}, kernel_size={k}, dilation={d}, "
                           f"padding={p}, calculated shape of the array of sliding blocks as {blocks}, but its "
                           "components must be at least one.")
    x = input if input.ndim == 4 else _shape.unsqueeze(input, 0)
    if p != (0, 0):
        x = _shape.pad(x, (p[1], p[1], p[0], p[0]))
    n, c, hp, wp = x.shape
    idx = _window_index((hp, wp), k, d, s, blocks)
    cols = _ix.index_select(_shape.reshape(x, (n, c, hp * wp)), 2, idx)
    out = _shape.reshape(cols, (n, c * k[0] * k[1], blocks[0] * blocks[1]))
    return out if input.ndim == 4 else _shape.squeeze(out, 0)


def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    """Combine sliding local blocks into a tensor (col2im, ``torch.nn.functional.fold``).

    ``input`` of shape ``(N, C*kH*kW, L)`` (or ``(C*kH*kW, L)``) becomes ``(N, C, H, W)``
    (or ``(C, H, W)``) for ``output_size = (H, W)``: every column is added back at its
    window position, overlapping entries summed, and the ``padding`` border cropped. The
    adjoint of :func:`unfold` (its gradient is :func:`unfold` of the upstream gradient);
    ``fold(unfold(x))`` is ``x`` times the number of windows covering each element.

    Example
    -------
    >>> import numbagrad as ng
    >>> F = ng.nn.functional
    >>> F.fold(F.unfold(ng.ones(1, 1, 3, 3), 2), (3, 3), 2)[0, 0].tolist()
    [[1.0, 2.0, 1.0], [2.0, 4.0, 2.0], [1.0, 2.0, 1.0]]
    """
    opname = "fold"
    input = _input(input, opname)
    out_size = _int_pair(output_size, "output_size", opname)
    k, d, p, s = _geometry(opname, kernel_size, dilation, padding, stride)
    shp = tuple(input.shape)
    if input.ndim not in (2, 3) or 0 in shp[-2:]:
        raise RuntimeError(f"{opname}: Expected 2D or 3D (batch mode) tensor for input with possibly 0 batch size "
                           f"and non-zero dimensions for input, but got: {list(shp)}")
    _float_input(input, opname)
    kk = k[0] * k[1]
    if shp[-2] % kk:
        raise RuntimeError(f"{opname}: Expected size of input's dimension {input.ndim - 2} to be divisible by the "
                           f"product of kernel_size, but got input.size({input.ndim - 2})={shp[-2]} and "
                           f"kernel_size={k}.")
    blocks = _blocks(out_size, k, d, p, s)
    if min(out_size) < 1 or min(blocks) < 1 or blocks[0] * blocks[1] != shp[-1]:
        raise RuntimeError(f"{opname}: Given output_size={out_size}, kernel_size={k}, dilation={d}, padding={p}, "
                           f"stride={s}, expected size of input's dimension {input.ndim - 1} to match the "
                           f"calculated number of sliding blocks {blocks[0]} * {blocks[1]} = "
                           f"{blocks[0] * blocks[1]}, but got input.size({input.ndim - 1})={shp[-1]}.")
    x = input if input.ndim == 3 else _shape.unsqueeze(input, 0)
    n, c = x.shape[0], x.shape[1] // kk
    hp, wp = out_size[0] + 2 * p[0], out_size[1] + 2 * p[1]
    idx = _window_index((hp, wp), k, d, s, blocks)
    plane = Tensor._from_array(backend_of(x.array).zeros((n, c, hp * wp), x.dtype))
    out = _ix.index_add(plane, 2, idx, _shape.reshape(x, (n, c, kk * shp[-1])))
    out = _shape.reshape(out, (n, c, hp, wp))
    if p != (0, 0):
        out = _shape.narrow(_shape.narrow(out, 2, p[0], out_size[0]), 3, p[1], out_size[1])
    return out if input.ndim == 3 else _shape.squeeze(out, 0)


# ---- local response normalisation ------------------------------------------------------------
def local_response_norm(input, size, alpha=1e-4, beta=0.75, k=1.0):
    """Local response normalisation across channels (``torch.nn.functional.local_response_norm``):

    ``b_c = a_c / (k + (alpha / size) * sum_{c'} a_{c'}^2)^beta``, the sum over the ``size``
    channels ``c - size//2 <= c' <= c + (size-1)//2`` (missing channels count as zero) of an
    input ``(N, C, *)`` with at least one spatial dimension.

    Example
    -------
    >>> import numbagrad as ng
    >>> ng.nn.functional.local_response_norm(ng.ones(1, 3, 1), 1, alpha=1.0, beta=1.0)[0, :, 0].tolist()
    [0.5, 0.5, 0.5]
    """
    opname = "local_response_norm"
    input = _input(input, opname)
    if input.ndim < 3:
        raise ValueError(f"{opname}: Expected 3D or higher dimensionality input (got {input.ndim} dimensions)")
    if isinstance(size, bool) or not isinstance(size, (int, np.integer)):
        raise TypeError(f"{opname}: size must be an int, got {type(size).__name__}")
    if size <= 0:
        raise RuntimeError(f"{opname}: kernel size should be greater than zero, but got size={size}")
    if input.numel() == 0:
        return input
    (x,), back = _float_operands(opname, input)
    shp = tuple(x.shape)
    n, c = shp[0], shp[1]
    sq = _shape.reshape(x * x, (n, c, -1))
    padded = _shape.pad(sq, (0, 0, size // 2, (size - 1) // 2))      # pads the channel dim
    acc = _shape.narrow(padded, 1, 0, c)
    for i in range(1, size):
        acc = acc + _shape.narrow(padded, 1, i, c)
    div = (acc * (float(alpha) / size) + float(k)) ** float(beta)
    out = x / _shape.reshape(div, shp)
    return _shape.cast(out, back) if back is not None else out


# ---- margin losses -----------------------------------------------------------------------------
def _reduce(loss, reduction):
    if reduction == "mean":
        return _red.mean(loss)
    if reduction == "sum":
        return _red.sum(loss)
    return loss


def _loss_operands(opname, input, target, size_average, reduce, reduction):
    """The losses' prologue: ``(reduction, input, target)`` with the legacy
    ``size_average``/``reduce`` folded into ``reduction``, ``target`` a Tensor, both on
    one device."""
    reduction = _legacy(size_average, reduce, reduction, opname)
    input = _input(input, opname)
    if not isinstance(target, Tensor):
        target = Tensor(np.asarray(target))
    same_device(opname, input, target)
    return reduction, input, target


def soft_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """Two-class logistic loss (``torch.nn.functional.soft_margin_loss``):
    ``log(1 + exp(-y x))`` per element for targets ``y`` of +1 / -1 (``target`` broadcasts
    with ``input``), then ``reduction``. Computed as ``softplus(-y x)``, so it stays finite
    where ``exp`` would overflow. Differentiable in ``input`` and ``target``.

    Example
    -------
    >>> import numbagrad as ng
    >>> round(ng.nn.functional.soft_margin_loss(ng.zeros(2), ng.tensor([1., -1.])).item(), 4)
    0.6931
    """
    opname = "soft_margin_loss"
    reduction, input, target = _loss_operands(opname, input, target, size_average, reduce, reduction)
    _broadcast_shape(opname, input.shape, target.shape)
    (x, y), back = _float_operands(opname, input, target)
    loss = _reduce(_act.softplus(-(x * y)), reduction)
    return _shape.cast(loss, back) if back is not None else loss


def multilabel_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """Multi-class multi-label hinge loss (``torch.nn.functional.multilabel_margin_loss``).

    ``input`` is ``(C,)`` or ``(N, C)`` (or 0-d); ``target`` has its shape and holds int64
    class indices, ending at the first ``-1`` (the rest is ignored). Per sample, with ``Y``
    the listed targets, ``sum_{j in Y} sum_{i not in Y} max(0, 1 - (x[j] - x[i])) / C``;
    then ``reduction``. Differentiable in ``input``.

    Example
    -------
    >>> import numbagrad as ng
    >>> x = ng.tensor([[0.1, 0.2, 0.4, 0.8]])
    >>> round(ng.nn.functional.multilabel_margin_loss(x, ng.tensor([[3, 0, -1, 1]])).item(), 4)
    0.85
    """
    opname = "multilabel_margin_loss"
    reduction, input, target = _loss_operands(opname, input, target, size_average, reduce, reduction)
    shp = tuple(input.shape)
    if input.ndim > 2 or (input.ndim >= 1 and shp[-1] == 0):
        raise LossShapeError(f"{opname}: Expected non-empty vector or matrix with optional 0-dim batch size, but "
                             f"got: {list(shp)}")
    if target.dtype != np.int64:
        raise RuntimeError(f"{opname}: expected scalar type Long but found {target.dtype} for target")
    if tuple(target.shape) != shp:
        raise LossShapeError(f"{opname}: inconsistent target size: {list(target.shape)} for input of size: "
                             f"{list(shp)}")
    (x,), back = _float_operands(opname, input)
    c = shp[-1] if shp else 1
    x = _shape.reshape(x, (-1, c))
    t = np.asarray(backend_of(target.array).to_numpy(target.array)).reshape(-1, c)
    if t.size and (t.min() < -1 or t.max() >= c):
        raise RuntimeError(f"{opname}: argument #2 'target' is out of range: class indices must lie in [-1, {c}), "
                           f"got values in [{int(t.min())}, {int(t.max())}]")
    # valid[n, j]: position j lists a target (it comes before the first -1 of row n)
    valid = np.cumprod(t >= 0, axis=1).astype(bool)
    tgt = np.where(valid, t, 0)
    is_target = np.zeros(t.shape, bool)
    rows = np.nonzero(valid)[0]
    is_target[rows, tgt[valid]] = True
    mask = (valid[:, :, None] & ~is_target[:, None, :]).astype(x.dtype)         # (N, j, i)
    be = backend_of(x.array)
    xy = _ix.gather(x, 1, Tensor._from_array(be.asarray(tgt)))                   # x[n, y_j]
    z = _act.relu((1.0 - _shape.unsqueeze(xy, 2)) + _shape.unsqueeze(x, 1))
    per = _red.sum(z * Tensor._from_array(be.asarray(mask)), (1, 2)) * (1.0 / c)
    if reduction == "none":
        per = _shape.reshape(per, shp[:-1] if len(shp) == 2 else ())
    loss = _reduce(per, reduction)
    return _shape.cast(loss, back) if back is not None else loss


# ---- channel shuffle ---------------------------------------------------------------------------
def channel_shuffle(input, groups):
    """Interleave the channels of ``(N, C, *)`` from ``groups`` groups
    (``torch.nn.functional.channel_shuffle``, as in ShuffleNet): the channel axis is seen as
    ``(groups, C // groups)``, transposed and flattened back.

    Example
    -------
    >>> import numbagrad as ng
    >>> ng.nn.functional.channel_shuffle(ng.arange(6.).reshape(1, 6, 1), 2).flatten().tolist()
    [0.0, 3.0, 1.0, 4.0, 2.0, 5.0]
    """
    opname = "channel_shuffle"
    input = _input(input, opname)
    if isinstance(groups, bool) or not isinstance(groups, (int, np.integer)):
        raise TypeError(f"{opname}: argument 'groups' must be int, not {type(groups).__name__}")
    if groups <= 0:
        raise RuntimeError(f"{opname}: Number of groups to divide channels in must be positive. Value of "
                           f"groups:{groups}")
    shp = tuple(input.shape)
    if input.ndim <= 2:
        raise RuntimeError(f"{opname}: channel_shuffle expects input with > 2 dims, but got input with sizes "
                           f"{list(shp)}")
    c = shp[1]
    if c % groups:
        raise RuntimeError(f"{opname}: Number of channels must be divisible by groups. Got {c} channels and "
                           f"{groups} groups.")
    x = _shape.reshape(input, (shp[0], int(groups), c // groups) + shp[2:])
    return _shape.reshape(_shape.contiguous(_shape.transpose(x, 1, 2)), shp)


def gumbel_softmax(logits, tau=1, hard=False, eps=1e-10, dim=-1):
    r"""Samples from the Gumbel-softmax (concrete) distribution, as
    ``torch.nn.functional.gumbel_softmax``.

    ``y = softmax((logits + g) / tau, dim)`` with ``g = -log(E)``, ``E ~ Exponential(1)``
    drawn as ``-log(U)`` from numbagrad's generator (``numbagrad.rand``; ``manual_seed``
    makes it reproducible).

    Parameters
    ----------
    logits : Tensor
        Unnormalised log-probabilities.
    tau : float, default 1
        Temperature (> 0; torch does not check it, nor does this).
    hard : bool, default False
        Return one-hot vectors (the argmax of ``y`` along ``dim``) whose gradient is the soft
        sample's (straight-through: ``y_hard - y.detach() + y``).
    eps : float
        Deprecated and unused, as in torch.
    dim : int, default -1

    Returns
    -------
    Tensor of ``logits``' shape, differentiable in ``logits``.
    """
    from .. import creation
    from .elementwise import add, div, log, neg, sub, clamp_min
    from .softmax import softmax
    from ._util import wrap_dim
    if not isinstance(logits, Tensor):
        raise TypeError(f"gumbel_softmax(): argument 'logits' must be Tensor, not {type(logits).__name__}")
    dim = wrap_dim(dim, logits.ndim, "gumbel_softmax")
    u = creation.rand(*logits.shape, dtype=logits.dtype if _dtype.is_float(logits.dtype) else None,
                      device=logits.device)
    u = clamp_min(u, float(np.finfo(np.float32).tiny))  # U = 0 would give E = inf
    gumbels = neg(log(neg(log(u))))
    y_soft = softmax(div(add(logits, gumbels), tau), dim)
    if not hard:
        return y_soft
    index = _red.argmax(y_soft, dim, keepdim=True)
    y_hard = _ix.scatter(creation.zeros_like(logits, dtype=y_soft.dtype), dim, index, value=1.0)
    return add(sub(y_hard, y_soft.detach()), y_soft)
