"""Reshaping modules: ``Flatten``, ``Unflatten``, ``PixelShuffle``, ``PixelUnshuffle``."""
from ..ops.shape import flatten as _flatten, pixel_shuffle as _pixel_shuffle, pixel_unshuffle as _pixel_unshuffle, \
    unflatten as _unflatten
from .module import Module

__all__ = ["Flatten", "Unflatten", "PixelShuffle", "PixelUnshuffle"]


class Flatten(Module):
    """Flatten dimensions ``start_dim..end_dim`` into one (default: all but the batch dim)."""

    def __init__(self, start_dim=1, end_dim=-1):
        super().__init__()
        self.start_dim = start_dim
        self.end_dim = end_dim

    def forward(self, input):
        return _flatten(input, self.start_dim, self.end_dim)

    def extra_repr(self):
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


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


class PixelShuffle(Module):
    """``(*, C*r*r, H, W) -> (*, C, H*r, W*r)`` (:func:`numbagrad.nn.functional.pixel_shuffle`)."""

    def __init__(self, upscale_factor):
        super().__init__()
        self.upscale_factor = upscale_factor

    def forward(self, input):
        return _pixel_shuffle(input, self.upscale_factor)

    def extra_repr(self):
        return f"upscale_factor={self.upscale_factor}"


class PixelUnshuffle(Module):
    """``(*, C, H*r, W*r) -> (*, C*r*r, H, W)``, the inverse of :class:`PixelShuffle`."""

    def __init__(self, downscale_factor):
        super().__init__()
        self.downscale_factor = downscale_factor

    def forward(self, input):
        return _pixel_unshuffle(input, self.downscale_factor)

    def extra_repr(self):
        return f"downscale_factor={self.downscale_factor}"
