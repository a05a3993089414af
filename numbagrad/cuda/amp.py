"""``torch.cuda.amp``: the CUDA spellings of :mod:`numbagrad.amp` (``autocast`` is
``numbagrad.autocast("cuda", ...)``: without CUDA it warns and disables itself, as torch's)."""
from .. import amp as _amp


class autocast(_amp.autocast):
    """``torch.cuda.amp.autocast(enabled=True, dtype=float16, cache_enabled=True)``:
    ``numbagrad.autocast("cuda", ...)``."""

    def __init__(self, enabled=True, dtype=None, cache_enabled=True):
        super().__init__("cuda", dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)


class GradScaler(_amp.GradScaler):
    """``torch.cuda.amp.GradScaler(init_scale=2.**16, growth_factor=2.0, backoff_factor=0.5,
    growth_interval=2000, enabled=True)``: ``numbagrad.amp.GradScaler("cuda", ...)`` (which
    warns and disables itself where numbagrad has no CUDA backend, as torch's does)."""

    def __init__(self, init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5, growth_interval=2000,
                 enabled=True):
        super().__init__("cuda", init_scale=init_scale, growth_factor=growth_factor,
                         backoff_factor=backoff_factor, growth_interval=growth_interval, enabled=enabled)


def custom_fwd(fwd=None, *, cast_inputs=None):
    """``torch.cuda.amp.custom_fwd``: :func:`numbagrad.amp.custom_fwd` for CUDA."""
    return _amp.custom_fwd(fwd, device_type="cuda", cast_inputs=cast_inputs)


def custom_bwd(bwd=None):
    """``torch.cuda.amp.custom_bwd``: :func:`numbagrad.amp.custom_bwd` for CUDA."""
    return _amp.custom_bwd(bwd, device_type="cuda")


__all__ = ["autocast", "GradScaler", "custom_fwd", "custom_bwd"]
