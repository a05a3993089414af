"""Reshaping modules: ``Flatten``, ``Unflatten``, ``PixelShuffle``, ``PixelUnshuffle``."""
from ..ops.shape import flatten as _flatten, pixel_shuffle as _pixel_shuffle, pixel_unshuffle as _pixel_unshuffle, \
    unflatten as _unflatten
from .module import _REQUIRED, Module, _FunctionalModule

__all__ = ["Flatten", "Unflatten", "PixelShuffle", "PixelUnshuffle"]


class Flatten(_FunctionalModule, fn=_flatten, start_dim=1, end_dim=-1):
    """Flatten dimensions ``start_dim..end_dim`` into one (default: all but the batch dim)."""


class Unflatten(Module):
    """Expand dimension ``dim`` into ``unflattened_size``."""

    def __init__(self, dim, unflattened_size):
        super().__init__()
        self.dim = dim
        self.unflattened_size = tuple(unflattened_size)

    def forward(self, input):
        return _unflatten(input, self.dim, self.unflattened_size)

    def extra_repr(self):
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"


class PixelShuffle(_FunctionalModule, fn=_pixel_shuffle, upscale_factor=_REQUIRED):
    """``(*, C*r*r, H, W) -> (*, C, H*r, W*r)`` (:func:`numbagrad.nn.functional.pixel_shuffle`)."""


class PixelUnshuffle(_FunctionalModule, fn=_pixel_unshuffle, downscale_factor=_REQUIRED):
    """``(*, C, H*r, W*r) -> (*, C*r*r, H, W)``, the inverse of :class:`PixelShuffle`."""
