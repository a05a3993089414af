"""Less common layers and losses: Module wrappers of :mod:`numbagrad.ops.nn_extra`
(``torch.nn.Unfold``, ``Fold``, ``LocalResponseNorm``, ``ChannelShuffle``,
``SoftMarginLoss``, ``MultiLabelMarginLoss``) with PyTorch's constructor arguments,
attributes and ``repr``. None holds parameters or buffers, so their ``state_dict()`` is
empty, as in PyTorch."""
from ..ops import nn_extra as _F
from .loss import _Loss
from .module import Module

__all__ = ["Unfold", "Fold", "LocalResponseNorm", "ChannelShuffle", "SoftMarginLoss", "MultiLabelMarginLoss"]


class Unfold(Module):
    """Extract sliding local blocks of a ``(N, C, H, W)`` or ``(C, H, W)`` input into columns
    ``(N, C*kH*kW, L)`` (``torch.nn.Unfold``; see :func:`numbagrad.nn.functional.unfold`)."""

    def __init__(self, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.kernel_size, self.dilation, self.padding, self.stride = kernel_size, dilation, padding, stride

    def forward(self, input):
        return _F.unfold(input, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self):
        return (f"kernel_size={self.kernel_size}, dilation={self.dilation}, padding={self.padding}, "
                f"stride={self.stride}")


class Fold(Module):
    """Sum columns ``(N, C*kH*kW, L)`` back into a ``(N, C, *output_size)`` tensor
    (``torch.nn.Fold``; the adjoint of :class:`Unfold`, see :func:`numbagrad.nn.functional.fold`)."""

    def __init__(self, output_size, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.output_size, self.kernel_size = output_size, kernel_size
        self.dilation, self.padding, self.stride = dilation, padding, stride

    def forward(self, input):
        return _F.fold(input, self.output_size, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self):
        return (f"output_size={self.output_size}, kernel_size={self.kernel_size}, dilation={self.dilation}, "
                f"padding={self.padding}, stride={self.stride}")


class LocalResponseNorm(Module):
    """Normalise each channel by the energy of its ``size`` neighbouring channels
    (``torch.nn.LocalResponseNorm``; see :func:`numbagrad.nn.functional.local_response_norm`)."""

    def __init__(self, size, alpha=1e-4, beta=0.75, k=1.0):
        super().__init__()
        self.size, self.alpha, self.beta, self.k = size, alpha, beta, k

    def forward(self, input):
        return _F.local_response_norm(input, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self):
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"


class ChannelShuffle(Module):
    """Interleave the channels of ``(N, C, *)`` from ``groups`` groups (``torch.nn.ChannelShuffle``;
    see :func:`numbagrad.nn.functional.channel_shuffle`)."""

    def __init__(self, groups):
        super().__init__()
        self.groups = groups

    def forward(self, input):
        return _F.channel_shuffle(input, self.groups)

    def extra_repr(self):
        return f"groups={self.groups}"


class SoftMarginLoss(_Loss):
    """``soft_margin_loss`` as a module (``torch.nn.SoftMarginLoss``): ``log(1 + exp(-y x))``."""

    def forward(self, input, target):
        return _F.soft_margin_loss(input, target, reduction=self.reduction)


class MultiLabelMarginLoss(_Loss):
    """``multilabel_margin_loss`` as a module (``torch.nn.MultiLabelMarginLoss``); targets are
    class indices ending at the first -1."""

    def forward(self, input, target):
        return _F.multilabel_margin_loss(input, target, reduction=self.reduction)
