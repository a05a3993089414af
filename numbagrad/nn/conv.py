"""Convolution layers: ``Conv1d``, ``Conv2d``, ``ConvTranspose1d``, ``ConvTranspose2d``
(``torch.nn`` constructor arguments, attribute names, parameter shapes and default init).

The layers hold parameters and call the functional forms of ``numbagrad/ops/conv.py``
(whose docstring describes the im2col + GEMM design). ``padding_mode`` other than
``'zeros'`` pads explicitly with :func:`numbagrad.ops.shape.pad` first (as PyTorch does),
then convolves without padding.
"""
import math


from ..ops import conv as _F
from ..ops.shape import pad as _pad
from . import init
from .module import Module
from .parameter import factory_dtype, reset_and_place, weight_and_bias

__all__ = ["Conv1d", "Conv2d", "ConvTranspose1d", "ConvTranspose2d"]

_PADDING_MODES = ("zeros", "reflect", "replicate", "circular")


def _ntuple(v, n):
    if isinstance(v, (list, tuple)):
        t = tuple(v)
        return t * n if len(t) == 1 and n > 1 else t
    return (v,) * n


class _ConvNd(Module):
    """Shared state of the convolution layers (``torch.nn.modules.conv._ConvNd``)."""

    _nd = 0

    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, dilation, transposed,
                 output_padding, groups, bias, padding_mode, device=None, dtype=None):
        super().__init__()
        name = type(self).__name__
        if groups <= 0:
            raise ValueError(f"{name}: groups must be a positive integer, got {groups}")
        if in_channels % groups != 0:
            raise ValueError(f"{name}: in_channels must be divisible by groups "
                             f"(in_channels={in_channels}, groups={groups})")
        if out_channels % groups != 0:
            raise ValueError(f"{name}: out_channels must be divisible by groups "
                             f"(out_channels={out_channels}, groups={groups})")
        if isinstance(padding, str):
            if padding not in ("same", "valid"):
                raise ValueError(f"{name}: invalid padding string {padding!r}, should be one of "
                                 "{'valid', 'same'}")
            if padding == "same" and any(s != 1 for s in stride):
                raise ValueError(f"{name}: padding='same' is not supported for strided convolutions")
        if padding_mode not in _PADDING_MODES:
            raise ValueError(f"{name}: padding_mode must be one of {set(_PADDING_MODES)}, "
                             f"but got padding_mode='{padding_mode}'")
        dt = factory_dtype(device, dtype)
        self.in_channels = int(in_channels)
        self.out_channels = int(out_channels)
        self.kernel_size = tuple(int(k) for k in kernel_size)
        self.stride = tuple(int(s) for s in stride)
        self.padding = padding if isinstance(padding, str) else tuple(int(p) for p in padding)
        self.dilation = tuple(int(d) for d in dilation)
        self.transposed = bool(transposed)
        self.output_padding = tuple(int(p) for p in output_padding)
        self.groups = int(groups)
        self.padding_mode = padding_mode
        # F.pad's argument for padding_mode != 'zeros': last spatial dim first, (left, right) each
        if isinstance(self.padding, str):
            rev = [0, 0] * len(self.kernel_size)
            if self.padding == "same":
                for d, k, i in zip(self.dilation, self.kernel_size, range(len(self.kernel_size) - 1, -1, -1)):
                    total = d * (k - 1)
                    rev[2 * i] = total // 2
                    rev[2 * i + 1] = total - total // 2
            self._reversed_padding_repeated_twice = rev
        else:
            self._reversed_padding_repeated_twice = [p for p in reversed(self.padding) for _ in range(2)]
        if transposed:
            shape = (self.in_channels, self.out_channels // self.groups) + self.kernel_size
        else:
            shape = (self.out_channels, self.in_channels // self.groups) + self.kernel_size
        weight_and_bias(self, shape, (self.out_channels,) if bias else None, dt)
        reset_and_place(self, device)

    def reset_parameters(self):
        # PyTorch's default: kaiming_uniform_(a=sqrt(5)) = U(-1/sqrt(fan_in), 1/sqrt(fan_in)),
        # fan_in = weight.shape[1] * prod(kernel_size) (for transposed layers that is
        # out_channels / groups, as in PyTorch).
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            if fan_in != 0:
                bound = 1 / math.sqrt(fan_in)
                init.uniform_(self.bias, -bound, bound)

    def extra_repr(self):
        s = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}"
             f", stride={self.stride}")
        if self.padding != (0,) * len(self.padding):
            s += f", padding={self.padding}"
        if self.dilation != (1,) * len(self.dilation):
            s += f", dilation={self.dilation}"
        if self.output_padding != (0,) * len(self.output_padding):
            s += f", output_padding={self.output_padding}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s


class _Conv(_ConvNd):
    _conv = None

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
                 bias=True, padding_mode="zeros", device=None, dtype=None):
        n = self._nd
        super().__init__(in_channels, out_channels, _ntuple(kernel_size, n), _ntuple(stride, n),
                         padding if isinstance(padding, str) else _ntuple(padding, n), _ntuple(dilation, n),
                         False, _ntuple(0, n), groups, bias, padding_mode, device=device, dtype=dtype)

    def _conv_forward(self, input, weight, bias):
        conv = type(self)._conv
        if self.padding_mode != "zeros":
            mode = self.padding_mode
            padded = _pad(input, self._reversed_padding_repeated_twice, mode=mode)
            return conv(padded, weight, bias, self.stride, 0, self.dilation, self.groups)
        return conv(input, weight, bias, self.stride, self.padding, self.dilation, self.groups)

    def forward(self, input):
        p = self._parameters
        return self._conv_forward(input, p["weight"], p["bias"])


class Conv1d(_Conv):
    """1-D convolution over ``(N, C_in, L)`` (or ``(C_in, L)``) input (``torch.nn.Conv1d``).

    ``weight``: ``(out_channels, in_channels / groups, kernel_size)``; ``bias``:
    ``(out_channels,)``; both U(-1/sqrt(fan_in), 1/sqrt(fan_in)) with
    ``fan_in = in_channels / groups * kernel_size``.
    """

    _nd = 1
    _conv = staticmethod(_F.conv1d)


class Conv2d(_Conv):
    """2-D convolution over ``(N, C_in, H, W)`` (or ``(C_in, H, W)``) input (``torch.nn.Conv2d``).

    ``weight``: ``(out_channels, in_channels / groups, kH, kW)``; ``bias``: ``(out_channels,)``;
    both U(-1/sqrt(fan_in), 1/sqrt(fan_in)) with ``fan_in = in_channels / groups * kH * kW``.
    """

    _nd = 2
    _conv = staticmethod(_F.conv2d)


class _ConvTranspose(_ConvNd):
    _conv = None

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, output_padding=0,
                 groups=1, bias=True, dilation=1, padding_mode="zeros", device=None, dtype=None):
        if padding_mode != "zeros":
            raise ValueError(f'Only "zeros" padding mode is supported for {type(self).__name__}')
        n = self._nd
        super().__init__(in_channels, out_channels, _ntuple(kernel_size, n), _ntuple(stride, n),
                         _ntuple(padding, n), _ntuple(dilation, n), True, _ntuple(output_padding, n),
                         groups, bias, padding_mode, device=device, dtype=dtype)

    def _output_padding(self, input, output_size):
        """``output_padding`` that gives ``output_size`` (PyTorch's rule), or the layer's own."""
        if output_size is None:
            return self.output_padding
        n = self._nd
        lead = 2 if input.ndim == n + 2 else 1
        output_size = tuple(int(s) for s in output_size)
        if len(output_size) == lead + n:
            output_size = output_size[lead:]
        if len(output_size) != n:
            raise ValueError(f"{type(self).__name__}: output_size must have {n} or {n + lead} elements "
                             f"(got {len(output_size)})")
        spatial = tuple(input.shape[lead:])
        lo = tuple((spatial[d] - 1) * self.stride[d] - 2 * self.padding[d]
                   + self.dilation[d] * (self.kernel_size[d] - 1) + 1 for d in range(n))
        hi = tuple(lo[d] + self.stride[d] - 1 for d in range(n))
        for d in range(n):
            if not lo[d] <= output_size[d] <= hi[d]:
                raise ValueError(f"{type(self).__name__}: requested an output size of "
                                 f"{list(output_size)}, but "
                                 f"valid sizes range from {list(lo)} to {list(hi)} (for an input of "
                                 f"{list(spatial)})")
        return tuple(output_size[d] - lo[d] for d in range(n))

    def forward(self, input, output_size=None):
        p = self._parameters
        op = self._output_padding(input, output_size)
        return type(self)._conv(input, p["weight"], p["bias"], self.stride, self.padding, op, self.groups,
                                self.dilation)


class ConvTranspose1d(_ConvTranspose):
    """1-D transposed convolution (``torch.nn.ConvTranspose1d``).

    ``weight``: ``(in_channels, out_channels / groups, kernel_size)``; ``bias``:
    ``(out_channels,)``; ``forward(input, output_size=None)``.
    """

    _nd = 1
    _conv = staticmethod(_F.conv_transpose1d)


class ConvTranspose2d(_ConvTranspose):
    """2-D transposed convolution (``torch.nn.ConvTranspose2d``).

    ``weight``: ``(in_channels, out_channels / groups, kH, kW)``; ``bias``: ``(out_channels,)``;
    ``forward(input, output_size=None)``.
    """

    _nd = 2
    _conv = staticmethod(_F.conv_transpose2d)
