"""``torch.amp``: automatic mixed precision. Not available in numbagrad yet.

What exists is what a full-precision run of a mixed-precision program touches, with
PyTorch's semantics:

* :class:`autocast` and :class:`GradScaler` with ``enabled=False`` (the usual
  ``enabled=args.amp`` switch) do exactly what PyTorch's do when disabled: the region runs
  unchanged, ``scaler.scale(loss)`` is ``loss``, ``scaler.step(opt)`` is ``opt.step()``.
* Enabled, constructing either raises ``NotImplementedError`` (numbagrad never pretends to
  run in mixed precision).
* :func:`custom_fwd` / :func:`custom_bwd` return the function unchanged: PyTorch's
  wrappers only act inside an enabled autocast region, which numbagrad cannot open yet.
  They must change when autocast is built.

``numbagrad.autocast`` is :class:`autocast`; ``numbagrad.cuda.amp`` holds the
``torch.cuda.amp`` spellings.
"""
import functools

from .._unavailable import message

_AUTOCAST_PLAN = ("automatic mixed precision: ops inside the region running in float16 where that is safe "
                  "(autocast(..., enabled=False) already works: as in PyTorch, it changes nothing)")
_SCALER_PLAN = ("dynamic loss scaling for float16 training (GradScaler(enabled=False) already works: as in "
                "PyTorch, it passes the loss and optimizer step through unchanged)")


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


class GradScaler:
    """``torch.amp.GradScaler(device="cuda", init_scale=2.**16, growth_factor=2.0,
    backoff_factor=0.5, growth_interval=2000, enabled=True)``.

    Disabled (``enabled=False``) it is PyTorch's disabled scaler: every method passes
    through. Enabled, constructing it raises ``NotImplementedError``."""

    def __init__(self, device="cuda", init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5,
                 growth_interval=2000, enabled=True):
        if enabled:
            raise NotImplementedError(message(_name(self), _SCALER_PLAN))
        self._device = device
        self._enabled = False
        self._init_scale = init_scale
        self._growth_factor = growth_factor
        self._backoff_factor = backoff_factor
        self._growth_interval = growth_interval

    def is_enabled(self):
        return self._enabled

    def scale(self, outputs):
        return outputs

    def unscale_(self, optimizer):
        return None

    def step(self, optimizer, *args, **kwargs):
        return optimizer.step(*args, **kwargs)

    def update(self, new_scale=None):
        return None

    def get_scale(self):
        return 1.0

    def get_growth_factor(self):
        return self._growth_factor

    def set_growth_factor(self, new_factor):
        self._growth_factor = new_factor

    def get_backoff_factor(self):
        return self._backoff_factor

    def set_backoff_factor(self, new_factor):
        self._backoff_factor = new_factor

    def get_growth_interval(self):
        return self._growth_interval

    def set_growth_interval(self, new_interval):
        self._growth_interval = new_interval

    def state_dict(self):
        return {}

    def load_state_dict(self, state_dict):
        return None


__all__ = ["autocast", "GradScaler", "custom_fwd", "custom_bwd", "is_autocast_available"]
