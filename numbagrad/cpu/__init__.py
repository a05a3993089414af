"""``numbagrad.cpu``: PyTorch's ``torch.cpu`` namespace; :mod:`numbagrad.cpu.amp` is
``torch.cpu.amp`` (its :class:`~numbagrad.cpu.amp.autocast`)."""
from . import amp  # noqa: F401


def is_available():
    """``torch.cpu.is_available()``: always True."""
    return True


__all__ = ["amp", "is_available"]
