"""``torch.amp``: automatic mixed precision.

* :class:`GradScaler` (``grad_scaler.py``) is PyTorch's dynamic loss scaler, with torch's
  float32 scale arithmetic bit for bit; its unscale and inf/NaN check is one fused kernel
  per optimizer arena bucket. ``enabled=False`` passes everything through, as in PyTorch.
* :class:`autocast` is not available yet. With ``enabled=False`` (the usual
  ``enabled=args.amp`` switch) it does exactly what PyTorch's does when disabled: the
  region runs unchanged. Enabled, constructing it raises ``NotImplementedError``
  (numbagrad never pretends to run in mixed precision).
* :func:`custom_fwd` / :func:`custom_bwd` return the function unchanged: PyTorch's
  wrappers only act inside an enabled autocast region, which numbagrad cannot open yet.
  They must change when autocast is built.

``numbagrad.autocast`` is :class:`autocast`; ``numbagrad.cuda.amp`` holds the
``torch.cuda.amp`` spellings.
"""
import functools

from .._unavailable import message
from .grad_scaler import GradScaler, OptState  # noqa: F401

_AUTOCAST_PLAN = ("automatic mixed precision: ops inside the region running in float16 where that is safe "
                  "(autocast(..., enabled=False) already works: as in PyTorch, it changes nothing)")


def _name(obj):
    return f"{type(obj).__module__}.{type(obj).__qualname__}"


def is_autocast_available(device_type):
    """Whether autocast can run on ``device_type``: False everywhere, numbagrad has no
    autocast yet."""
    if not isinstance(device_type, str):
        raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
    return False


class autocast:
    """``torch.autocast(device_type, dtype=None, enabled=True, cache_enabled=None)``.

    Disabled (``enabled=False``) it is PyTorch's disabled autocast: a context manager and
    decorator that changes nothing. Enabled, constructing it raises
    ``NotImplementedError``."""

    def __init__(self, device_type, dtype=None, enabled=True, cache_enabled=None):
        if not isinstance(device_type, str):
            raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
        if enabled:
            raise NotImplementedError(message(_name(self), _AUTOCAST_PLAN))
        self.device = device_type
        self.fast_dtype = dtype
        self._enabled = False
        self._cache_enabled = cache_enabled

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc_val, exc_tb):
        return False

    def __call__(self, func):
        @functools.wraps(func)
        def run(*args, **kwargs):
            with self:
                return func(*args, **kwargs)
        return run


def custom_fwd(fwd=None, *, device_type=None, cast_inputs=None):
    """``torch.amp.custom_fwd``: the forward unchanged (see the module docstring)."""
    if fwd is None:
        return functools.partial(custom_fwd, device_type=device_type, cast_inputs=cast_inputs)
    return fwd


def custom_bwd(bwd=None, *, device_type=None):
    """``torch.amp.custom_bwd``: the backward unchanged (see the module docstring)."""
    if bwd is None:
        return functools.partial(custom_bwd, device_type=device_type)
    return bwd


__all__ = ["autocast", "GradScaler", "custom_fwd", "custom_bwd", "is_autocast_available"]
