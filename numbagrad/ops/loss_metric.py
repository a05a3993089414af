"""Metric-learning losses and the distances they use (``torch.nn.functional``
semantics): ``pairwise_distance``, ``cosine_similarity``, ``triplet_margin_loss``,
``triplet_margin_with_distance_loss``, ``cosine_embedding_loss``,
``hinge_embedding_loss``, ``margin_ranking_loss``, and numbagrad's own
``contrastive_loss`` (their Module wrappers live in
:mod:`numbagrad.nn.loss_metric`).

How they are built:

* ``pairwise_distance`` is one node (:class:`PairwiseDistanceFn`): ``x1 - x2 + eps``
  (broadcasting) and its p-norm over the last dimension, with PyTorch's norm gradient
  (0 where the norm is 0; for ``p = inf`` split evenly among the tied maxima). The
  composed ``norm(sub(..))`` would give NaN gradients at a zero difference.
* ``cosine_similarity`` is one node (:class:`CosineSimilarityFn`) that follows
  PyTorch's graph exactly: each input divided by ``max(||x||, eps)``, where the clamp
  carries no gradient of its own (so a zero vector gets a finite gradient, as in torch).
* ``cosine_embedding_loss`` is one node (:class:`CosineEmbeddingFn`): the composed
  form would be ~15 nodes. ``EPSILON = 1e-12`` is added to both squared norms as in
  torch; the denominator is ``sqrt(m1) * sqrt(m2)`` (torch: ``sqrt(m1 * m2)``, equal up
  to rounding) so that it cannot overflow.
* the triplet, hinge, margin-ranking and contrastive losses compose existing
  differentiable ops (a few nodes each). Their hinges are ``clamp(min=0)``, whose
  gradient passes where the argument is ``>= 0``: at an exact kink numbagrad gives the
  same (one-sided) gradient as PyTorch's ``clamp_min``; in the flat region it is 0.

Deliberate differences from PyTorch (documented per function): the targets of
``cosine_embedding_loss`` and ``hinge_embedding_loss`` select a branch and must be 1 or
-1 (torch silently scores other values as 0, or as the sum of both branches), checked
with one ``ValueError``; ``margin_ranking_loss`` accepts any real target, as torch (its
target is a differentiable multiplier). Integer inputs are computed in the default float dtype; float16 in
float32, cast back. Everything runs through backend primitives and NumPy ufuncs, so
CUDA arrays work unchanged (no new kernels).
"""
import functools
import math

import numpy as np

from ..autograd.function import Function
from ..backend import backend_of
from ..tensor import Tensor
from . import _autocast
from ._util import broadcast_shape, cast_back, float_operands, same_device
from .loss import _check_reduction, _legacy_reduction

__all__ = ["pairwise_distance", "cosine_similarity", "triplet_margin_loss", "triplet_margin_with_distance_loss",
           "cosine_embedding_loss", "hinge_embedding_loss", "margin_ranking_loss", "contrastive_loss"]

# torch's EPSILON in cosine_embedding_loss, added to the squared norms. It is a C++ float
# constant, so float64 sees float32(1e-12) = 9.99999996e-13 (visible in the gradient of a
# zero vector, which the tests compare with torch).
_COS_EPSILON = float(np.float32(1e-12))


# ---- helpers ---------------------------------------------------------------------------------
def _tensor(x):
    return x if isinstance(x, Tensor) else Tensor(np.asarray(x))


def _desc(t):
    return f"{tuple(t.shape)} ({t.dtype})"


def _broadcast_batch(opname, batch, t, what):
    try:
        return np.broadcast_shapes(tuple(batch), tuple(t.shape))
    except ValueError:
        raise RuntimeError(f"{opname}: target {_desc(t)} does not broadcast against {what} of shape "
                           f"{tuple(batch)}") from None


# the prologue every loss here shares: one floating dtype, float16 (and bfloat16) computed in float32
_float_operands = functools.partial(float_operands, upcast_bfloat16=True)


def _floating(opname, *ts):
    """The operands as Tensors on one device, in one floating dtype (:func:`float_operands`)."""
    ts = [_tensor(t) for t in ts]
    same_device(opname, *ts)
    return _float_operands(opname, *ts)


def _reduce(loss, reduction):
    from .. import ops
    if reduction == "mean":
        return ops.mean(loss)
    if reduction == "sum":
        return ops.sum(loss)
    return loss


def _reduction_arg(size_average, reduce, reduction, opname):
    if size_average is not None or reduce is not None:
        reduction = _legacy_reduction(size_average, reduce)
    _check_reduction(reduction, opname)
    return reduction


def _check_target_values(t, allowed, opname):
    """Raise ``ValueError`` unless every element of tensor ``t`` is one of ``allowed``
    (one device-side reduction and a 0-d transfer on CUDA)."""
    a = t.array
    be = backend_of(a)
    ok = be.equal(a, allowed[0])
    for v in allowed[1:]:
        ok = be.logical_or(ok, be.equal(a, v))
    bad = be.logical_not(ok)
    if bool(be.to_numpy(be.any(bad))):
        h = np.asarray(be.to_numpy(a))
        vals = np.unique(h[np.asarray(be.to_numpy(bad))])[:5]
        raise ValueError(f"{opname}: target values must be " + " or ".join(str(v) for v in allowed)
                         + f", got {vals.tolist()} in a target of shape {tuple(t.shape)} ({t.dtype})")


def _margin_positive(margin, opname):
    if not margin > 0:
        raise ValueError(f"{opname}: margin must be greater than 0, got {margin}")


# ---- norm of a difference --------------------------------------------------------------------
def _vnorm(d, p, axis):
    """p-norm of ``d`` over ``axis`` with keepdims (``p`` any real, or +-inf)."""
    be = backend_of(d)
    dt = d.dtype
    if p == 2:
        return be.sqrt(be.sum(be.mul(d, d), axis=axis, keepdims=True))
    if p == 1:
        return be.sum(be.abs(d), axis=axis, keepdims=True)
    if p == math.inf:
        return be.amax(be.abs(d), axis=axis, keepdims=True)
    if p == -math.inf:
        return be.amin(be.abs(d), axis=axis, keepdims=True)
    if p == 0:
        return be.sum(be.not_equal(d, 0), axis=axis, keepdims=True).astype(dt)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        s = be.sum(be.pow(be.abs(d), dt.type(p)), axis=axis, keepdims=True)
        return be.pow(s, dt.type(1.0 / p)).astype(dt, copy=False)


def _vnorm_backward(d, n, gk, p, axis):
    """Gradient of :func:`_vnorm` with respect to ``d`` (PyTorch's conventions: 0 where the
    norm is 0 (p >= 1) or where an element is 0 (p < 1); ties of the inf-norm split evenly)."""
    be = backend_of(d)
    dt = d.dtype
    zero = dt.type(0)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        if p == 2:
            return be.mul(d, be.where(be.equal(n, 0), zero, be.div(gk, n)))
        if p == 1:
            return be.mul(be.sign(d), gk)
        if p == 0:
            return be.zeros_like(d)
        if math.isinf(p):
            mask = be.equal(be.abs(d), n).astype(dt)
            cnt = be.sum(mask, axis=axis, keepdims=True)
            return be.mul(be.mul(be.sign(d), mask), be.div(gk, cnt))
        a = be.abs(d)
        scaled = be.mul(be.sign(d), be.pow(a, dt.type(p - 1)))
        if p < 1:
            scaled = be.where(be.equal(d, 0), zero, scaled)
            return be.mul(scaled, be.mul(gk, be.pow(n, dt.type(1 - p)))).astype(dt, copy=False)
        scale = be.where(be.equal(n, 0), zero, be.div(gk, be.pow(n, dt.type(p - 1))))
        return be.mul(scaled, scale).astype(dt, copy=False)


class PairwiseDistanceFn(Function):
    """``||x1 - x2 + eps||_p`` over the last dimension of the broadcast shape, one node."""

    @staticmethod
    def forward(ctx, x1, x2, p, eps, keepdim):
        be = backend_of(x1)
        dt = x1.dtype
        d = be.add(be.sub(x1, x2), dt.type(eps))
        scalar = d.ndim == 0
        if scalar:  # 0-d inputs: the norm of one element
            d = d.reshape(1)
        axis = d.ndim - 1
        n = _vnorm(d, p, axis)
        ctx.save_for_backward(d, n)
        ctx.info = (x1.shape, x2.shape, p, axis, scalar)
        if scalar:
            return n.reshape(())
        return n if keepdim else n.reshape(n.shape[:-1])

    @staticmethod
    def backward(ctx, g):
        d, n = ctx.saved_tensors
        s1, s2, p, axis, scalar = ctx.info
        be = backend_of(d)
        gk = g.reshape(n.shape)
        if gk.dtype != d.dtype:
            gk = gk.astype(d.dtype)
        gd = _vnorm_backward(d, n, gk, p, axis)
        if scalar:
            gd = gd.reshape(())
        n1, n2 = ctx.needs_input_grad[:2]
        return (be.sum_to_shape(gd, s1) if n1 else None,
                be.neg(be.sum_to_shape(gd, s2)) if n2 else None, None, None, None)


def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    """p-norm distance between the rows of ``x1`` and ``x2`` (``torch.nn.functional.
    pairwise_distance``): ``||x1 - x2 + eps||_p`` over the last dimension of the broadcast
    shape (the last dimension is kept with size 1 when ``keepdim``). ``p`` is any real
    number or ``inf``/``-inf``; ``p = 0`` counts non-zero differences (no gradient)."""
    x1, x2 = _tensor(x1), _tensor(x2)
    broadcast_shape("pairwise_distance", x1.shape, x2.shape, names=("x1", "x2"))
    (x1, x2), back = _floating("pairwise_distance", x1, x2)
    out = PairwiseDistanceFn.apply(x1, x2, float(p), float(eps), bool(keepdim))
    return cast_back(out, back)


# ---- cosine similarity -----------------------------------------------------------------------
class CosineSimilarityFn(Function):
    """``sum((x1 / max(||x1||, eps)) * (x2 / max(||x2||, eps)), dim)`` on the broadcast
    shape. As in PyTorch's graph, the clamp by ``eps`` carries no gradient of its own: the
    gradient reaches the norm as if unclamped, and the norm's gradient is 0 where it is 0."""

    @staticmethod
    def forward(ctx, x1, x2, dim, eps, shape):
        be = backend_of(x1)
        dt = x1.dtype
        a = be.broadcast_to(x1, shape)
        b = be.broadcast_to(x2, shape)
        n1 = be.sqrt(be.sum(be.mul(a, a), axis=dim, keepdims=True))
        n2 = be.sqrt(be.sum(be.mul(b, b), axis=dim, keepdims=True))
        c1 = be.maximum(n1, dt.type(eps))
        c2 = be.maximum(n2, dt.type(eps))
        u1 = be.div(a, c1)
        u2 = be.div(b, c2)
        out = be.sum(be.mul(u1, u2), axis=dim)
        ctx.save_for_backward(a, b, n1, n2, c1, c2, u1, u2)
        ctx.info = (x1.shape, x2.shape, dim)
        return out

    @staticmethod
    def backward(ctx, g):
        a, b, n1, n2, c1, c2, u1, u2 = ctx.saved_tensors
        s1, s2, dim = ctx.info
        be = backend_of(a)
        dt = a.dtype
        gk = g.reshape(n1.shape)
        if gk.dtype != dt:
            gk = gk.astype(dt)
        zero = dt.type(0)
        out = []
        for (x, n, c, u, uo, s, need) in ((a, n1, c1, u1, u2, s1, ctx.needs_input_grad[0]),
                                          (b, n2, c2, u2, u1, s2, ctx.needs_input_grad[1])):
            if not need:
                out.append(None)
                continue
            gu = be.mul(gk, uo)                     # d out / d (x / c)
            gc = be.neg(be.div(be.sum(be.mul(gu, u), axis=dim, keepdims=True), c))
            with np.errstate(divide="ignore", invalid="ignore"):
                gn = be.where(be.equal(n, 0), zero, be.div(gc, n))
            gx = be.add(be.div(gu, c), be.mul(x, gn))
            out.append(be.sum_to_shape(gx.astype(dt, copy=False), s))
        return out[0], out[1], None, None, None


def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    """Cosine similarity along ``dim`` of the broadcast shape (``torch.nn.functional.
    cosine_similarity``): ``x1 . x2 / (max(||x1||, eps) * max(||x2||, eps))``; ``dim`` is
    removed from the result."""
    from ._util import wrap_dim
    x1, x2 = _tensor(x1), _tensor(x2)
    shape = broadcast_shape("cosine_similarity", x1.shape, x2.shape, names=("x1", "x2"))
    if len(shape) == 0:
        x1, x2 = x1.reshape(1), x2.reshape(1)
        shape = (1,)
    axis = wrap_dim(dim, len(shape), "cosine_similarity")
    (x1, x2), back = _floating("cosine_similarity", x1, x2)
    out = CosineSimilarityFn.apply(x1, x2, axis, float(eps), shape)
    return cast_back(out, back)


# ---- triplet losses --------------------------------------------------------------------------
def _triplet(anchor, positive, negative, dist, margin, swap, reduction, opname):
    from .. import ops
    d_pos = _tensor(dist(anchor, positive))
    d_neg = _tensor(dist(anchor, negative))
    if swap:
        d_neg = ops.minimum(d_neg, _tensor(dist(positive, negative)))
    loss = ops.clamp(ops.sub(ops.add(d_pos, float(margin)), d_neg), min=0.0)
    return _reduce(loss, reduction)


def _same_ndim(opname, names, ts):
    if len({t.ndim for t in ts}) != 1:
        raise RuntimeError(f"{opname}: the {', '.join(names[:-1])} and {names[-1]} tensors are expected to have "
                           f"the same number of dimensions, but got: "
                           + ", ".join(f"{nm} {t.ndim}D {_desc(t)}" for nm, t in zip(names, ts)))


@_autocast.fp32
def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-6, swap=False, size_average=None,
                        reduce=None, reduction="mean"):
    """Triplet loss (``torch.nn.functional.triplet_margin_loss``):
    ``max(0, margin + d(a, p) - d(a, n))`` with ``d = pairwise_distance(., ., p, eps)``
    (over the last dimension; 1-D inputs are one triplet). With ``swap`` the negative
    distance is ``min(d(a, n), d(p, n))``. ``margin`` must be > 0. The three inputs must
    have the same number of dimensions (RuntimeError otherwise) and broadcast."""
    opname = "triplet_margin_loss"
    reduction = _reduction_arg(size_average, reduce, reduction, opname)
    _margin_positive(margin, opname)
    ts = [_tensor(anchor), _tensor(positive), _tensor(negative)]
    _same_ndim(opname, ("anchor", "positive", "negative"), ts)
    broadcast_shape(opname, *(t.shape for t in ts), names=("anchor", "positive", "negative"))
    ts, back = _floating(opname, *ts)

    def dist(u, v):
        return PairwiseDistanceFn.apply(u, v, float(p), float(eps), False)

    return cast_back(_triplet(*ts, dist, margin, swap, reduction, opname), back)


def triplet_margin_with_distance_loss(anchor, positive, negative, *, distance_function=None, margin=1.0,
                                      swap=False, reduction="mean"):
    """Triplet loss with a custom distance (``torch.nn.functional.
    triplet_margin_with_distance_loss``): as :func:`triplet_margin_loss` with
    ``d = distance_function(x, y)`` (default :func:`pairwise_distance`), any callable on
    numbagrad tensors returning a tensor of per-triplet distances; gradients flow
    through it. ``margin`` must be > 0."""
    opname = "triplet_margin_with_distance_loss"
    _check_reduction(reduction, opname)
    _margin_positive(margin, opname)
    ts = [_tensor(anchor), _tensor(positive), _tensor(negative)]
    _same_ndim(opname, ("anchor", "positive", "negative"), ts)
    dist = distance_function if distance_function is not None else pairwise_distance
    return _triplet(*ts, dist, margin, swap, reduction, opname)


# ---- cosine embedding ------------------------------------------------------------------------
class CosineEmbeddingFn(Function):
    """Per-pair cosine embedding loss: ``1 - cos`` where the target is 1, ``max(0, cos -
    margin)`` where it is -1; ``cos = x1.x2 / (sqrt(|x1|^2 + 1e-12) sqrt(|x2|^2 + 1e-12))``
    over the last dimension."""

    @staticmethod
    def forward(ctx, x1, x2, pos, margin):
        be = backend_of(x1)
        dt = x1.dtype
        ax = x1.ndim - 1
        ps = be.sum(be.mul(x1, x2), axis=ax, keepdims=True)
        m1 = be.add(be.sum(be.mul(x1, x1), axis=ax, keepdims=True), dt.type(_COS_EPSILON))
        m2 = be.add(be.sum(be.mul(x2, x2), axis=ax, keepdims=True), dt.type(_COS_EPSILON))
        den = be.mul(be.sqrt(m1), be.sqrt(m2))
        cos = be.div(ps, den)
        c = cos.reshape(cos.shape[:-1])
        over = be.sub(c, dt.type(margin))
        loss = be.where(pos, be.sub(dt.type(1), c), be.maximum(over, dt.type(0))).astype(dt, copy=False)
        # d loss / d cos: -1 (target 1); 1 where cos - margin >= 0 (target -1; torch's clamp_min)
        dcos = be.where(pos, dt.type(-1), be.greater_equal(over, 0).astype(dt)).astype(dt, copy=False)
        ctx.save_for_backward(x1, x2, m1, m2, den, cos, dcos)
        return loss

    @staticmethod
    def backward(ctx, g):
        x1, x2, m1, m2, den, cos, dcos = ctx.saved_tensors
        be = backend_of(x1)
        dt = x1.dtype
        k = be.mul(g.astype(dt, copy=False), dcos).reshape(cos.shape)
        n1, n2 = ctx.needs_input_grad[:2]
        g1 = g2 = None
        if n1:  # d cos / d x1 = x2 / den - cos * x1 / m1
            g1 = be.mul(k, be.sub(be.div(x2, den), be.mul(cos, be.div(x1, m1))))
            g1 = be.sum_to_shape(g1.astype(dt, copy=False), x1.shape)
        if n2:
            g2 = be.mul(k, be.sub(be.div(x1, den), be.mul(cos, be.div(x2, m2))))
            g2 = be.sum_to_shape(g2.astype(dt, copy=False), x2.shape)
        return g1, g2, None, None


@_autocast.fp32
def cosine_embedding_loss(input1, input2, target, margin=0, size_average=None, reduce=None, reduction="mean"):
    """Cosine embedding loss (``torch.nn.functional.cosine_embedding_loss``): per pair
    ``1 - cos(x1, x2)`` if ``y = 1`` and ``max(0, cos(x1, x2) - margin)`` if ``y = -1``;
    cos over the last dimension with 1e-12 added to both squared norms (torch's EPSILON).
    Inputs ``(N, D)`` with target ``(N,)``, or ``(D,)`` with a 0-d target; inputs
    broadcast against each other. Targets must be 1 or -1 (ValueError; torch silently
    scores other values as 0). No gradient reaches the target."""
    opname = "cosine_embedding_loss"
    reduction = _reduction_arg(size_average, reduce, reduction, opname)
    x1, x2, t = _tensor(input1), _tensor(input2), _tensor(target)
    if t.ndim not in (0, 1):
        raise RuntimeError(f"{opname}: 0D or 1D target tensor expected, multi-target not supported; "
                           f"got target {_desc(t)}")
    want = 2 if t.ndim == 1 else 1
    if x1.ndim != want or x2.ndim != want:
        raise RuntimeError(f"{opname}: {t.ndim}D target tensor expects {want}D input tensors, but found "
                           f"inputs {_desc(x1)} and {_desc(x2)}")
    shape = broadcast_shape(opname, x1.shape, x2.shape, names=("input1", "input2"))
    loss_shape = _broadcast_batch(opname, shape[:-1], t, "the pairs")
    same_device(opname, x1, x2, t)
    _check_target_values(t, (1, -1), opname)
    (x1, x2), back = _floating(opname, x1, x2)
    if loss_shape != shape[:-1]:  # a target longer than a single broadcast pair
        x1 = x1.expand(*loss_shape, shape[-1])
    be = backend_of(t.array)
    pos = be.equal(t.array, 1)
    if tuple(pos.shape) != loss_shape:
        pos = be.broadcast_to(pos, loss_shape)
    out = CosineEmbeddingFn.apply(x1, x2, pos, float(margin))
    return cast_back(_reduce(out, reduction), back)


# ---- hinge embedding and margin ranking ------------------------------------------------------
@_autocast.fp32
def hinge_embedding_loss(input, target, margin=1.0, size_average=None, reduce=None, reduction="mean"):
    """Hinge embedding loss (``torch.nn.functional.hinge_embedding_loss``): ``x`` where
    ``y = 1`` and ``max(0, margin - x)`` where ``y = -1``, for input and target of any
    broadcastable shapes (the result has the broadcast shape and the input's dtype).
    Targets must be 1 or -1 (ValueError; torch adds both terms for other values). No
    gradient reaches the target."""
    from .. import ops
    opname = "hinge_embedding_loss"
    reduction = _reduction_arg(size_average, reduce, reduction, opname)
    x, t = _tensor(input), _tensor(target)
    broadcast_shape(opname, x.shape, t.shape, names=("input", "target"))
    same_device(opname, x, t)
    _check_target_values(t, (1, -1), opname)
    (x,), back = _floating(opname, x)
    hinge = ops.clamp(ops.rsub(x, float(margin)), min=0.0)
    loss = ops.where(Tensor._from_array(backend_of(t.array).equal(t.array, 1)), x, hinge)
    return cast_back(_reduce(loss, reduction), back)


@_autocast.fp32
def margin_ranking_loss(input1, input2, target, margin=0, size_average=None, reduce=None, reduction="mean"):
    """Margin ranking loss (``torch.nn.functional.margin_ranking_loss``):
    ``max(0, -y * (x1 - x2) + margin)``; all three tensors must have the same number of
    dimensions (RuntimeError) and broadcast. The target is meant to hold 1 or -1 but, as
    in torch, any real value is accepted (it is a multiplier, not a selector) and a
    floating target that requires grad receives its gradient."""
    from .. import ops
    opname = "margin_ranking_loss"
    reduction = _reduction_arg(size_average, reduce, reduction, opname)
    ts = [_tensor(input1), _tensor(input2), _tensor(target)]
    _same_ndim(opname, ("input1", "input2", "target"), ts)
    broadcast_shape(opname, *(t.shape for t in ts), names=("input1", "input2", "target"))
    (x1, x2), back = _floating(opname, ts[0], ts[1])
    t = ts[2]
    if t.dtype == np.float16:
        t = t.float()
    loss = ops.clamp(ops.add(ops.mul(ops.neg(t), ops.sub(x1, x2)), float(margin)), min=0.0)
    if loss.dtype != np.float32:  # float64 (a float64 target promotes, as in torch): keep it
        back = None
    return cast_back(_reduce(loss, reduction), back)


# ---- contrastive -----------------------------------------------------------------------------
def contrastive_loss(x1, x2, target, margin=1.0, reduction="mean"):
    """Contrastive loss of Hadsell, Chopra & LeCun (2006). PyTorch has no such function;
    this is numbagrad's own, with this definition:

    ``d = pairwise_distance(x1, x2)`` (Euclidean, eps = 1e-6, over the last dimension),
    and per pair ``d^2 / 2`` for similar pairs (target 1) and ``max(0, margin - d)^2 / 2``
    for dissimilar pairs (target 0), reduced by ``reduction``.

    ``target`` holds 0/1 as ints, floats or bools (other values raise ValueError) and must
    have the distance's shape (the broadcast batch shape of ``x1`` and ``x2``). No
    gradient reaches the target.
    """
    from .. import ops
    opname = "contrastive_loss"
    _check_reduction(reduction, opname)
    x1, x2, t = _tensor(x1), _tensor(x2), _tensor(target)
    shape = broadcast_shape(opname, x1.shape, x2.shape, names=("x1", "x2"))
    dshape = shape[:-1] if shape else ()
    if tuple(t.shape) != dshape:
        raise ValueError(f"{opname}: target must have the shape of the pairwise distances {dshape} "
                         f"(inputs {_desc(x1)} and {_desc(x2)}), got target {_desc(t)}")
    same_device(opname, x1, x2, t)
    _check_target_values(t, (1, 0), opname)
    (x1, x2), back = _floating(opname, x1, x2)
    d = PairwiseDistanceFn.apply(x1, x2, 2.0, 1e-6, False)
    similar = ops.mul(ops.square(d), 0.5)
    dissimilar = ops.mul(ops.square(ops.clamp(ops.rsub(d, float(margin)), min=0.0)), 0.5)
    loss = ops.where(Tensor._from_array(backend_of(t.array).equal(t.array, 1)), similar, dissimilar)
    return cast_back(_reduce(loss, reduction), back)
