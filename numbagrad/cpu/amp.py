"""``torch.cpu.amp``: the CPU spelling of :class:`numbagrad.amp.autocast`."""
from .. import amp as _amp


class autocast(_amp.autocast):
    """``torch.cpu.amp.autocast(enabled=True, dtype=bfloat16, cache_enabled=True)``:
    ``numbagrad.autocast("cpu", ...)``."""

    def __init__(self, enabled=True, dtype=None, cache_enabled=True):
        super().__init__("cpu", dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)


__all__ = ["autocast"]
