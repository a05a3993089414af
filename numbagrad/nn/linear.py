"""``Linear`` (``y = x W^T + b``), ``Bilinear`` (``y = x1^T A x2 + b``) and ``Identity``.

A Linear followed by an activation can run as one fused op,
:func:`numbagrad.ops.fused.linear_act` (one GEMM plus one pass for bias + activation
forward, one pass plus two GEMMs backward); :meth:`Linear.forward_act` is that path for
a layer's own parameters. ``Linear.forward`` itself is unchanged (GEMM + bias).
"""
import math


from ..ops.matmul import linear as _linear
from . import init
from .module import Module
from .parameter import factory_dtype, reset_and_place, weight_and_bias

__all__ = ["Identity", "Linear", "Bilinear"]


class Identity(Module):
    """Returns its input unchanged (arguments are accepted and ignored)."""

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, input):
        return input


class Linear(Module):
    """``y = x @ weight.T + bias`` over the last dimension (``torch.nn.Linear``).

    ``weight`` is ``(out_features, in_features)``; both it and ``bias`` start as
    U(-1/sqrt(in_features), 1/sqrt(in_features)) (PyTorch's default:
    ``kaiming_uniform_(a=sqrt(5))``), drawn from numbagrad's default generator.

    >>> import numbagrad as ng
    >>> layer = ng.nn.Linear(4, 2)
    >>> layer
    Linear(in_features=4, out_features=2, bias=True)
    >>> layer(ng.randn(3, 4)).shape
    (3, 2)
    >>> [n for n, _ in layer.named_parameters()]
    ['weight', 'bias']
    """

    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        dt = factory_dtype(device, dtype)
        self.in_features = int(in_features)
        self.out_features = int(out_features)
        weight_and_bias(self, (self.out_features, self.in_features), (self.out_features,) if bias else None, dt)
        reset_and_place(self, device)

    def reset_parameters(self):
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in = self.in_features
            bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input):
        p = self._parameters
        return _linear(input, p["weight"], p["bias"])

    def forward_act(self, input, activation):
        """``activation(self(input))`` as one fused op (:func:`numbagrad.ops.fused.linear_act`;
        ``activation`` one of ``'relu'``, ``'gelu'``, ``'gelu_tanh'``, ``'tanh'``,
        ``'sigmoid'``, ``'silu'`` or None). Forward hooks of this module do not run."""
        from ..ops.fused import linear_act
        p = self._parameters
        return linear_act(input, p["weight"], p["bias"], activation)

    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class Bilinear(Module):
    """``y[..., o] = x1[...] @ weight[o] @ x2[...] + bias[o]`` (``torch.nn.Bilinear``).

    ``weight`` is ``(out_features, in1_features, in2_features)``; both it and ``bias``
    start as U(-1/sqrt(in1_features), 1/sqrt(in1_features)), PyTorch's default.
    """

    def __init__(self, in1_features, in2_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        dt = factory_dtype(device, dtype)
        self.in1_features = int(in1_features)
        self.in2_features = int(in2_features)
        self.out_features = int(out_features)
        weight_and_bias(self, (self.out_features, self.in1_features, self.in2_features),
                        (self.out_features,) if bias else None, dt)
        reset_and_place(self, device)

    def reset_parameters(self):
        bound = 1 / math.sqrt(self.weight.shape[1]) if self.weight.shape[1] > 0 else 0
        init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input1, input2):
        from ..ops.bilinear import bilinear
        p = self._parameters
        return bilinear(input1, input2, p["weight"], p["bias"])

    def extra_repr(self):
        return (f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
                f"out_features={self.out_features}, bias={self.bias is not None}")
