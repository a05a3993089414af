"""Autocast casting policies, applied as decorators to the public op functions.

``@lower_precision`` ops (GEMMs; ``conv1d``/``conv2d``/``conv_transpose1d``/``conv_transpose2d``;
``scaled_dot_product_attention``; the LSTM / Elman RNN sequence ops and the Elman cells) cast
their floating Tensor arguments to the region's autocast dtype (bfloat16 on the CPU by
default); ``@fp32`` ops (losses, ``prod``) cast them to float32. ``gru``, ``gru_cell`` and
``lstm_cell`` are on neither list, as in torch 2.13 (their results stay float32 in a float32
model). Everything else runs in the widest input type, numbagrad's usual promotion. As in
torch, float64 tensors are never cast, and a listed op runs with autocast off inside, so
the ops it calls are not cast again.

Outside autocast a listed op costs one thread-local attribute read (``_tls.on``). The state
lives in ``numbagrad/_autocast_state.py`` (written by :class:`numbagrad.amp.autocast`).

The weight cache: a float32 leaf tensor that requires grad (a parameter), cast to the
lower-precision dtype twice within one outermost region, gives the same cast tensor (one
``Cast`` node, whose incoming gradients are summed in the low dtype and widened once), as
torch's ``cache_enabled``. Casts made under ``no_grad`` are not cached (they carry no graph).
"""
import functools

from .. import _dtype
from .._autocast_state import _tls
from ..autograd.grad_mode import _state as _grad_mode
from ..tensor import Tensor
from .shape import Cast

_F32 = _dtype.float32
_F64 = _dtype.float64


def _convert(t, dtype):
    """The differentiable cast (its own function so tests can count casts)."""
    return Cast.apply(t, dtype)


def _cast(t, dtype, device):
    """``t`` cast to ``dtype`` if autocast casts it: a floating, non-float64 Tensor of
    ``device``'s kind that is not ``dtype`` already."""
    d = t.dtype
    if d == dtype or d == _F64 or not _dtype.is_float(d):
        return t
    if t.device.type != device:
        return t
    if _tls.cache_enabled and t.requires_grad and t.grad_fn is None and d == _F32 and dtype != _F32 \
            and _grad_mode.enabled:  # a cast made under no_grad has no graph: never reuse it
        key = (id(t), dtype)
        hit = _tls.cache.get(key)
        if hit is not None and hit[0] is t:
            return hit[1]
        out = _convert(t, dtype)
        _tls.cache[key] = (t, out)  # keeps t alive, so its id is not reused in the region
        return out
    return _convert(t, dtype)


def _cast_value(v, dtype, device):
    """A Tensor argument, or a list/tuple of them (RNN weights, ``hx``), cast."""
    if isinstance(v, Tensor):
        return _cast(v, dtype, device)
    if isinstance(v, (list, tuple)) and any(isinstance(e, Tensor) for e in v):
        return type(v)(_cast(e, dtype, device) if isinstance(e, Tensor) else e for e in v)
    return v


def _device_of(args, kwargs):
    for a in args:
        if isinstance(a, Tensor):
            return a.device.type
    for a in kwargs.values():
        if isinstance(a, Tensor):
            return a.device.type
    return "cpu"


def _run(fn, target, args, kwargs):
    device = _device_of(args, kwargs)
    if not _tls.enabled[device]:
        return fn(*args, **kwargs)
    dtype = target if target is not None else _tls.dtype[device]
    args = tuple(_cast_value(a, dtype, device) for a in args)
    kwargs = {k: _cast_value(v, dtype, device) for k, v in kwargs.items()}
    _tls.on = False  # the op's own inner calls are not cast again (torch excludes its key)
    try:
        return fn(*args, **kwargs)
    finally:
        _tls.on = True


def _policy(target, kind):
    def decorate(fn):
        @functools.wraps(fn)
        def op(*args, **kwargs):
            if not _tls.on:  # the fast path: autocast off in this thread
                return fn(*args, **kwargs)
            return _run(fn, target, args, kwargs)
        op.autocast_policy = kind
        return op
    return decorate


lower_precision = _policy(None, "lower_precision")
lower_precision.__doc__ = "Autocast casts this op's floating inputs to the region's dtype."
fp32 = _policy(_F32, "fp32")
fp32.__doc__ = "Autocast casts this op's floating inputs to float32."
