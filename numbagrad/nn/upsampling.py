"""Upsampling modules: ``Upsample`` and its two fixed-mode forms (``torch.nn.Upsample``)."""
from ..ops.shape import interpolate as _interpolate
from .module import Module

__all__ = ["Upsample", "UpsamplingNearest2d", "UpsamplingBilinear2d"]


class Upsample(Module):
    """Resize the spatial dims by ``size`` or ``scale_factor``
    (:func:`numbagrad.nn.functional.interpolate`: ``'nearest'`` or ``'bilinear'``)."""

    def __init__(self, size=None, scale_factor=None, mode="nearest", align_corners=None):
        super().__init__()
        self.size, self.scale_factor, self.mode, self.align_corners = size, scale_factor, mode, align_corners

    def forward(self, input):
        return _interpolate(input, self.size, self.scale_factor, self.mode, self.align_corners)

    def extra_repr(self):
        what = f"size={self.size}" if self.size is not None else f"scale_factor={self.scale_factor}"
        return f"{what}, mode='{self.mode}'"


class UpsamplingNearest2d(Upsample):
    """Nearest-neighbour 2-D upsampling to ``size`` or by ``scale_factor``: ``Upsample(mode='nearest')``."""
    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="nearest")


class UpsamplingBilinear2d(Upsample):
    """Bilinear with ``align_corners=True``, as PyTorch's."""

    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="bilinear", align_corners=True)
