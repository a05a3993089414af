"""Activation, softmax and dropout layers: Module wrappers of the functional ops
(``numbagrad/ops/activation.py``, ``softmax.py``, ``dropout.py``, ``rrelu.py``) with
PyTorch's names, constructor arguments, attribute names and ``repr``.

Every ``torch.nn`` activation module is here. The only one with a parameter is
:class:`PReLU` (``weight``, ``num_parameters`` slopes initialised to ``init``); the
only random ones are :class:`RReLU` and the dropout family, which draw from numbagrad's
default generator in training mode and are deterministic in eval mode.
"""

from functools import partial

from ..ops import activation as _act
# (``numbagrad.ops.dropout`` / ``.softmax`` are shadowed by the functions of those names
# that ``numbagrad.ops`` re-exports, so the functions are imported by name.)
from ..ops.dropout import alpha_dropout, dropout1d, dropout2d, dropout3d, feature_alpha_dropout
from ..ops.softmax import softmax as _softmax, softmin as _softmin
from ..ops.rrelu import rrelu as _rrelu
from . import functional as F
from . import init
from .module import _REQUIRED, Module, _FunctionalModule
from .parameter import empty_parameter, factory_dtype, reset_and_place

__all__ = ["ReLU", "ReLU6", "LeakyReLU", "ELU", "SELU", "CELU", "GELU", "SiLU", "Mish", "Sigmoid", "Tanh",
           "Softplus", "Hardtanh", "Hardsigmoid", "Hardswish", "Softsign", "LogSigmoid", "Threshold",
           "PReLU", "RReLU", "GLU", "Tanhshrink", "Softshrink", "Hardshrink", "Softmax", "LogSoftmax",
           "Softmin", "Softmax2d", "Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout",
           "FeatureAlphaDropout"]


class ReLU(_FunctionalModule, fn=F.relu, inplace=False):
    """``max(x, 0)``."""


class ReLU6(ReLU, fn=F.relu6):
    """``min(max(x, 0), 6)`` (PyTorch's ``Hardtanh(0, 6)``: ``min_val``/``max_val`` attributes)."""

    def __init__(self, inplace=False):
        super().__init__(inplace)
        self.min_val = 0.0
        self.max_val = 6.0


class LeakyReLU(_FunctionalModule, fn=F.leaky_relu, negative_slope=0.01, inplace=False):
    """``x`` for positive inputs, ``negative_slope * x`` otherwise."""


class ELU(_FunctionalModule, fn=F.elu, alpha=1.0, inplace=False):
    """``x`` for positive inputs, ``alpha * (exp(x) - 1)`` otherwise."""


class SELU(_FunctionalModule, fn=F.selu, inplace=False):
    """Scaled ELU with the self-normalising constants."""


class GELU(_FunctionalModule, fn=F.gelu, approximate="none"):
    """``x * Phi(x)`` (``approximate='tanh'`` for the tanh approximation)."""


class SiLU(_FunctionalModule, fn=F.silu, inplace=False):
    """``x * sigmoid(x)`` (swish)."""


class Mish(_FunctionalModule, fn=F.mish, inplace=False):
    """``x * tanh(softplus(x))``."""


class Sigmoid(_FunctionalModule, fn=F.sigmoid):
    """``1 / (1 + exp(-x))``."""


class Tanh(_FunctionalModule, fn=F.tanh):
    """Hyperbolic tangent."""


class Softplus(_FunctionalModule, fn=F.softplus, beta=1.0, threshold=20.0):
    """``log(1 + exp(beta x)) / beta`` (linear above ``threshold``)."""


class Hardtanh(_FunctionalModule, fn=F.hardtanh, min_val=-1.0, max_val=1.0, inplace=False):
    """``clamp(x, min_val, max_val)``."""

    def _validate(self):
        if self.max_val <= self.min_val:
            raise ValueError(f"Hardtanh: max_val ({self.max_val}) must be greater than min_val ({self.min_val})")


# The softmax family's warnings (implicit dim) name the caller of the module: 5 frames up.
class Softmax(_FunctionalModule, fn=partial(F.softmax, _stacklevel=5), dim=None):
    """Softmax along ``dim``."""


class LogSoftmax(_FunctionalModule, fn=partial(F.log_softmax, _stacklevel=5), dim=None):
    """Log-softmax along ``dim``."""


class _DropoutNd(Module):
    """Base of the dropout modules: ``p`` in [0, 1] and ``inplace``; identity in eval mode."""

    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        if not 0 <= p <= 1:  # written so that NaN fails too
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p = p
        self.inplace = inplace

    def extra_repr(self):
        return f"p={self.p}, inplace={self.inplace}"


class Dropout(_DropoutNd):
    """Zero elements with probability ``p`` in training mode (scaling the rest by
    ``1/(1-p)``); the identity in eval mode."""

    def forward(self, input):
        return F.dropout(input, self.p, self.training, self.inplace)


class Dropout1d(_DropoutNd):
    """Zero whole channels of a ``(N, C, L)`` or ``(C, L)`` input (``torch.nn.Dropout1d``)."""

    def forward(self, input):
        return dropout1d(input, self.p, self.training, self.inplace)


class Dropout2d(_DropoutNd):
    """Zero whole channels of a ``(N, C, H, W)`` or ``(C, H, W)`` input."""

    def forward(self, input):
        return dropout2d(input, self.p, self.training, self.inplace)


class Dropout3d(_DropoutNd):
    """Zero whole channels of a ``(N, C, D, H, W)`` or ``(C, D, H, W)`` input."""

    def forward(self, input):
        return dropout3d(input, self.p, self.training, self.inplace)


class AlphaDropout(_DropoutNd):
    """Dropout for SELU networks (dropped values take SELU's saturation value, then an
    affine map restores zero mean and unit variance)."""

    def forward(self, input):
        return alpha_dropout(input, self.p, self.training, self.inplace)


class FeatureAlphaDropout(_DropoutNd):
    """Channel-wise alpha dropout."""

    def forward(self, input):
        return feature_alpha_dropout(input, self.p, self.training, self.inplace)


# ---- the less common activations ---------------------------------------------------------------
class _Inplace(_FunctionalModule, inplace=False):
    """An activation whose only argument is ``inplace`` (not shown in its repr, as in PyTorch)."""

    def extra_repr(self):
        return ""


class Hardsigmoid(_Inplace, fn=_act.hardsigmoid):
    """``relu6(x + 3) / 6``."""


class Hardswish(_Inplace, fn=_act.hardswish):
    """``x * relu6(x + 3) / 6``."""


class Softsign(_FunctionalModule, fn=_act.softsign):
    """``x / (1 + |x|)``."""


class LogSigmoid(_FunctionalModule, fn=_act.logsigmoid):
    """``log(sigmoid(x))``, computed without overflow."""


class Tanhshrink(_FunctionalModule, fn=_act.tanhshrink):
    """``x - tanh(x)``."""


class CELU(_FunctionalModule, fn=_act.celu, alpha=1.0, inplace=False):
    """``max(0, x) + min(0, alpha * (exp(x / alpha) - 1))``."""


class Threshold(_FunctionalModule, fn=_act.threshold, threshold=_REQUIRED, value=_REQUIRED, inplace=False):
    """``x`` where ``x > threshold``, else ``value``."""


class PReLU(Module):
    """``x`` for positive inputs, ``weight * x`` otherwise, with a learnable slope per
    channel (dim 1) or one shared slope (``num_parameters=1``); slopes start at ``init``."""

    def __init__(self, num_parameters=1, init=0.25, device=None, dtype=None):
        super().__init__()
        dt = factory_dtype(device, dtype)
        self.num_parameters = int(num_parameters)
        self.init = init
        self.weight = empty_parameter(self, (self.num_parameters,), dt)
        reset_and_place(self, device)

    def reset_parameters(self):
        init.constant_(self.weight, self.init)

    def forward(self, input):
        return _act.prelu(input, self._parameters["weight"])

    def extra_repr(self):
        return f"num_parameters={self.num_parameters}"


class RReLU(_FunctionalModule, lower=1.0 / 8, upper=1.0 / 3, inplace=False):
    """Randomized leaky relu: negative slopes drawn from U(lower, upper) per element in
    training mode, the fixed ``(lower + upper) / 2`` in eval mode."""

    def forward(self, input):
        return _rrelu(input, self.lower, self.upper, self.training, self.inplace)


class GLU(_FunctionalModule, fn=_act.glu, dim=-1):
    """``a * sigmoid(b)`` with ``(a, b)`` the two halves of the input along ``dim``."""


class _Shrink(_FunctionalModule, lambd=0.5):
    """A shrinkage activation: its repr is the bare ``lambd``, as in PyTorch."""

    def extra_repr(self):
        return str(self.lambd)


class Softshrink(_Shrink, fn=_act.softshrink):
    """``x - lambd`` above ``lambd``, ``x + lambd`` below ``-lambd``, else 0."""

    def _validate(self):
        if self.lambd < 0:
            raise ValueError(f"Softshrink: lambda must be no less than zero, but got {self.lambd}")


class Hardshrink(_Shrink, fn=_act.hardshrink):
    """``x`` where ``|x| > lambd``, else 0."""


class Softmin(_FunctionalModule, fn=partial(_softmin, _stacklevel=5), dim=None):
    """``softmax(-x)`` along ``dim``."""


class Softmax2d(Module):
    """Softmax over the channels of a ``(N, C, H, W)`` or ``(C, H, W)`` input (dim -3)."""

    def forward(self, input):
        if input.ndim not in (3, 4):
            raise ValueError(f"Softmax2d: expected input to be 3D or 4D, got {input.ndim}D instead "
                             f"(shape {tuple(input.shape)})")
        return _softmax(input, -3, _stacklevel=5)
