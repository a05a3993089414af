"""CUDA twins of ``kernels/cpu/optim.py``: fused Adam/AdamW and SGD over a flat arena.

Contract (as the CPU twins; see ``numbagrad/optim/optimizer.py`` for the arena):
``param``, ``grad`` and the state buffers are 1-D arrays holding a group's parameters
back to back; the arena is cut into *blocks* ``blk_start[b]:blk_end[b]`` (int64), each
inside parameter (*segment*) ``blk_seg[b]``; ``active[s]`` (uint8) says whether
segment ``s`` has a gradient this step (inactive segments are left untouched, their
counters included). Per-segment counters: Adam's float32 ``steps`` (incremented for
active segments) and ``seg_scal`` (``[-lr/bc1, sqrt(bc2)]`` per segment, in the
parameter dtype), SGD's uint8 ``has_buf`` (set for active segments after a momentum
step). Per-element scalars come typed like ``param``; ``lr``, ``beta1``, ``beta2`` are
float64. The update arithmetic is the CPU's, operation by operation (PyTorch's
single-tensor Adam / SGD). Nothing is returned. Every launcher here and in
``optim_*.py`` takes the tables as one ``layout`` and its scalars as one ``hyper`` tuple,
as the CPU twins; the element kernels take ``(blk_start, blk_end, blk_seg, active)`` as
one tuple (:func:`_tables`) and their per-element scalars as one tuple too. ``layout``'s
``gsrc`` is ignored: on the CPU it lets a kernel read a gradient where its array is, but
CUDA buckets always copy gradients into the arena's ``grad``, so there it is all zeros.

Design
------
* Adam: a per-segment kernel (one thread per segment) bumps ``steps`` and computes the
  bias corrections in float64 into ``seg_scal``; then the element kernel runs one
  thread per arena element (grid-stride over ``param.size``). Kernels on the default
  stream run in order, so the element kernel sees the new ``seg_scal``.
* SGD: the element kernel reads ``has_buf`` (first momentum step copies the gradient
  into the buffer); a per-segment kernel launched after it sets ``has_buf``.
* An element finds its block by binary search over ``blk_start`` (``log2(#blocks)``
  loads from a small, cached table). This assumes what ``Optimizer`` builds: blocks
  sorted by start and non-overlapping. Elements outside every block are untouched.
* float16 arenas: elements and the scalars are read as float32, the update is computed
  in float32 and stored back to half (the stores narrow). float32 and float64 compute
  in their own type, as on the CPU.
* Shared by the other optimizer modules (``optim_adamx.py``, ``optim_adaptive.py``,
  ``optim_lamb.py``): the two kernel factories, :func:`_segments_kernel` (one thread per
  active parameter) and :func:`_elements_kernel` (one thread per arena element of an
  active parameter, found by ``_segment_of``), which turn the work on one item into the
  grid-stride kernel, so each optimizer writes only that work; their launchers' helpers
  (:func:`_launch_segments`, :func:`_launch_elements`, :func:`_typed`); the device
  functions of the per-segment pre-passes (``_bump``, ``_bias_corrections``) and of the
  updates (``_l2_grad``, ``_decayed_grad``, ``_lerp``, ``_sq_avg``, ``_moments``,
  ``_adam_elem``, ``_maximum``), and ``_count_steps_kernel`` for optimizers whose kernels
  only count steps.
"""
import inspect
import math

import numpy as np
from numba import cuda, float32, float64
from numba import types as nbtypes

from ._launch import cuda_kernel, dev, device_fn, from_template, launch

# the names be.kernel(family, name) resolves (see numbagrad/kernels/__init__.py)
ENTRY_POINTS = ("adam_step", "sgd_step")

__all__ = ["_adam_step_cuda", "_sgd_step_cuda"]

_I64 = nbtypes.int64
_U8 = nbtypes.uint8
_F32 = nbtypes.float32
_F64 = nbtypes.float64
_BOOL = nbtypes.boolean
_TABLES = (_I64[::1], _I64[::1], _I64[::1], _U8[::1])
"""Types of ``blk_start, blk_end, blk_seg, active`` (the arena's tables)."""
_TABLES_T = nbtypes.Tuple(_TABLES)
"""The element kernels take the tables as one tuple (:func:`_tables`)."""


def _tables(layout):
    """The device arrays of ``layout``'s ``blk_start, blk_end, blk_seg, active`` as the one
    tuple the element kernels take (``layout``: the arena layout a launcher is given, whose
    fifth table ``gsrc`` CUDA ignores)."""
    return tuple(dev(a) for a in layout[:4])


def _ct(T):
    """Compute type of element type ``T``: float32 for half and float32, else float64."""
    return _F64 if T == _F64 else _F32


def _ctype(dtype):
    """NumPy compute type of ``dtype`` (scalars are passed converted to it)."""
    return np.float64 if np.dtype(dtype) == np.float64 else np.float32


@device_fn
def _find_block(blk_start, blk_end, e):
    """The block holding arena element ``e``, or -1 (blocks sorted by start, disjoint)."""
    hi = blk_start.size
    if hi == 0 or blk_start[0] > e:
        return -1
    lo = 0
    # invariant: blk_start[lo] <= e, and blk_start[hi] > e (or hi == size)
    while hi - lo > 1:
        mid = (lo + hi) >> 1
        if blk_start[mid] <= e:
            lo = mid
        else:
            hi = mid
    return lo if e < blk_end[lo] else -1


# ---- shared by the optimizer kernels (kernels/cuda/optim_*.py) ----------------------------------
@device_fn
def _segment_of(tables, e):
    """The parameter (segment) of arena element ``e`` when it has a gradient this step, else
    -1 (inactive, or outside every block): the prologue of every element kernel. ``tables``:
    ``(blk_start, blk_end, blk_seg, active)`` (:func:`_tables`)."""
    blk_start, blk_end, blk_seg, active = tables
    b = _find_block(blk_start, blk_end, e)
    if b >= 0:
        s = blk_seg[b]
        if active[s]:
            return s
    return -1


def _from_item(fn, src, env):
    """The kernel ``fn.__name__`` built from ``src`` (a template of the factories below,
    which call ``fn`` as the device function ``work``), reported in ``fn``'s module with its
    docstring."""
    kernel = from_template(fn.__module__, fn.__name__, src, {"cuda": cuda, "work": device_fn(fn), **env})
    kernel.__doc__ = fn.__doc__
    return kernel


def _segments_kernel(signatures):
    """Decorator: the per-segment kernel ``name(active, <params>)`` from ``fn(<params>, s)``,
    the work on parameter ``s``: one thread per parameter (grid-stride over ``active``),
    calling ``fn`` for those with a gradient this step. ``signatures``: the kernel's
    (``active`` first), for the PTX check."""
    def deco(fn):
        params = ", ".join(list(inspect.signature(fn).parameters)[:-1])
        src = (f"def {fn.__name__}(active, {params}):\n"
               "    s = cuda.grid(1)\n"
               "    while s < active.size:\n"
               "        if active[s]:\n"
               f"            work({params}, s)\n"
               "        s += cuda.gridsize(1)\n")
        return cuda_kernel(signatures)(_from_item(fn, src, {}))
    return deco


def _elements_kernel(signatures):
    """Decorator: the element kernel ``name(tables, <params>)`` from ``fn(<params>, e, s)``,
    the update of arena element ``e`` of parameter ``s``: one thread per element of the
    first of ``params`` (the arena ``param``; grid-stride), calling ``fn`` where the
    element's parameter has a gradient this step (:func:`_segment_of`; ``tables``:
    :func:`_tables`). ``signatures``: the kernel's (``tables`` first), for the PTX check."""
    def deco(fn):
        names = list(inspect.signature(fn).parameters)[:-2]
        params = ", ".join(names)
        src = (f"def {fn.__name__}(tables, {params}):\n"
               "    e = cuda.grid(1)\n"
               f"    while e < {names[0]}.size:\n"
               "        s = segment_of(tables, e)\n"
               "        if s >= 0:\n"
               f"            work({params}, e, s)\n"
               "        e += cuda.gridsize(1)\n")
        return cuda_kernel(signatures)(_from_item(fn, src, {"segment_of": _segment_of}))
    return deco


def _launch_segments(kernel, layout, *args):
    """Launch a :func:`_segments_kernel` kernel over ``layout``'s parameters:
    ``kernel(active, *args)``."""
    launch(kernel, layout.active.size, layout.active, *args)


def _launch_elements(kernel, layout, param, *args):
    """Launch an :func:`_elements_kernel` kernel over the arena ``param``:
    ``kernel(tables, param, *args)``; nothing when the group has no parameters."""
    if layout.active.size:
        launch(kernel, param.size, _tables(layout), param, *args)


def _typed(param, floats, flags=()):
    """An element kernel's scalars: ``floats`` in ``param``'s compute type (:func:`_ctype`),
    then ``flags`` as bools."""
    t = _ctype(param.dtype)
    return tuple(t(x) for x in floats) + tuple(bool(f) for f in flags)


@device_fn
def _bump(steps, s):
    """One more step of segment ``s`` (float32 count); the new count in float64."""
    steps[s] += float32(1.0)
    return float64(steps[s])


@device_fn
def _bias_corrections(beta1, beta2, st):
    """``(1 - beta1**st, 1 - beta2**st)`` in float64."""
    return 1.0 - beta1 ** st, 1.0 - beta2 ** st


@device_fn
def _lerp(s, e, w, omw, small):
    """``torch.lerp(s, e, w)`` with the branch torch picks for the weight: ``s + w*(e - s)``
    when ``small`` (``w < 0.5``), else ``e - (e - s)*omw`` (``omw = 1 - w``)."""
    if small:
        return s + w * (e - s)
    return e - (e - s) * omw


@device_fn
def _sq_avg(v, x, beta, omb):
    """A running average of squares, ``v*beta + omb*x*x``."""
    return v * beta + omb * x * x


@device_fn
def _moments(g, m, v, omb1, omw, b2, omb2, small):
    """Adam's moments: ``(lerp(m, g, omb1), b2*v + omb2*g*g)``."""
    return _lerp(m, g, omb1, omw, small), _sq_avg(v, g, b2, omb2)


@device_fn
def _l2_grad(p, wd, g):
    """``g + wd * p`` (L2 weight decay added to the gradient), or ``g`` when ``wd == 0``, as
    torch adds nothing then (a NaN or inf parameter times 0 would turn ``g`` into NaN)."""
    if wd != 0:
        return g + wd * p
    return g


@device_fn
def _decayed_grad(param, grad, e, wd, sign):
    """Element ``e``: ``(p, g)`` in the compute type (``wd``'s), the parameter and its gradient
    with ``maximize``'s sign and L2 decay (:func:`_l2_grad`)."""
    ct = type(wd)
    p = ct(param[e])
    return p, _l2_grad(p, wd, ct(grad[e]) * sign)


@device_fn
def _adam_elem(param, grad, exp_avg, exp_avg_sq, e, wd, sign, mom):
    """Element ``e`` of an Adam-family arena: the gradient with ``maximize``'s sign and L2
    decay, the new moments, stored; returns ``(p, g, m, v)`` in the compute type. ``mom``:
    ``_moments``' scalars ``(omb1, omw, b2, omb2, small)``."""
    omb1, omw, b2, omb2, small = mom
    ct = type(omb1)
    p, g = _decayed_grad(param, grad, e, wd, sign)
    m, v = _moments(g, ct(exp_avg[e]), ct(exp_avg_sq[e]), omb1, omw, b2, omb2, small)
    exp_avg[e] = m
    exp_avg_sq[e] = v
    return p, g, m, v


@device_fn
def _maximum(x, y):
    """``torch.maximum(x, y)``: the larger, NaN when either is NaN."""
    if y > x or y != y:
        return y
    return x


@_segments_kernel([(_U8[::1], _F32[::1])])
def _count_steps_kernel(steps, s):
    """One more step for every active segment (optimizers whose kernels only count)."""
    _bump(steps, s)


# ---- Adam / AdamW -------------------------------------------------------------------------------
@_segments_kernel(lambda T: (_U8[::1], _F32[::1], T[::1], _F64, _F64, _F64))
def _adam_segments_kernel(steps, seg_scal, lr, beta1, beta2, s):
    bc1, bc2 = _bias_corrections(beta1, beta2, _bump(steps, s))
    seg_scal[2 * s] = -(lr / bc1)
    seg_scal[2 * s + 1] = bc2 ** 0.5


@_elements_kernel(lambda T: (_TABLES_T,) + (T[::1],) * 6 + (nbtypes.Tuple((_ct(T),) * 8 + (_BOOL, _BOOL)),))
def _adam_elements_kernel(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, seg_scal, hyper, e, s):
    omb1, omw, b2, omb2, eps, wd, decay, sign, amsgrad, lerp_small = hyper
    ct = type(omb1)
    nss = ct(seg_scal[2 * s])
    bc2s = ct(seg_scal[2 * s + 1])
    p, _, m, v = _adam_elem(param, grad, exp_avg, exp_avg_sq, e, wd, sign, (omb1, omw, b2, omb2, lerp_small))
    if amsgrad:
        v = _maximum(ct(max_exp_avg_sq[e]), v)
        max_exp_avg_sq[e] = v
    param[e] = p * decay + nss * m / (math.sqrt(v) / bc2s + eps)


def _adam_step_cuda(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, layout, steps, seg_scal, hyper):
    """Adam / AdamW over a flat arena (``torch.optim.adam._single_tensor_adam``); see the
    CPU twin ``_adam_step_cpu`` for the meaning of every argument."""
    lr, beta1, beta2, omb1, omw, b2, omb2, eps, wd, decay, sign, amsgrad, lerp_small = hyper
    _launch_segments(_adam_segments_kernel, layout, steps, seg_scal, float(lr), float(beta1), float(beta2))
    _launch_elements(_adam_elements_kernel, layout, param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, seg_scal,
                     _typed(param, (omb1, omw, b2, omb2, eps, wd, decay, sign), (amsgrad, lerp_small)))


# ---- SGD ---------------------------------------------------------------------------------------
@_elements_kernel(lambda T: (_TABLES_T,) + (T[::1],) * 3 + (_U8[::1],)
                  + (nbtypes.Tuple((_ct(T),) * 5 + (_BOOL, _BOOL)),))
def _sgd_elements_kernel(param, grad, buf, has_buf, hyper, e, s):
    neg_lr, momentum, omd, wd, sign, use_momentum, nesterov = hyper
    ct = type(neg_lr)
    p, g = _decayed_grad(param, grad, e, wd, sign)
    if use_momentum:
        if has_buf[s] == 0:
            bb = g  # first step: the buffer starts as the gradient
        else:
            bb = ct(buf[e]) * momentum + omd * g
        buf[e] = bb
        if nesterov:
            g = g + momentum * bb
        else:
            g = bb
    param[e] = p + neg_lr * g


@_segments_kernel([(_U8[::1], _U8[::1])])
def _sgd_flags_kernel(has_buf, s):
    has_buf[s] = 1


def _sgd_step_cuda(param, grad, buf, layout, has_buf, hyper):
    """SGD with momentum / dampening / nesterov / weight decay / maximize
    (``torch.optim.sgd._single_tensor_sgd``) over a flat arena; see ``_sgd_step_cpu``."""
    neg_lr, momentum, omd, wd, sign, use_momentum, nesterov = hyper
    _launch_elements(_sgd_elements_kernel, layout, param, grad, buf, has_buf,
                     _typed(param, (neg_lr, momentum, omd, wd, sign), (use_momentum, nesterov)))
    if use_momentum:
        # after the element kernel (same stream): it must see the old flags
        _launch_segments(_sgd_flags_kernel, layout, has_buf)
