"""Activation, softmax and dropout layers: Module wrappers of the functional ops
(``numbagrad/ops/activation.py``, ``softmax.py``, ``dropout.py``, ``rrelu.py``) with
PyTorch's names, constructor arguments, attribute names and ``repr``.

Every ``torch.nn`` activation module is here. The only one with a parameter is
:class:`PReLU` (``weight``, ``num_parameters`` slopes initialised to ``init``); the
only random ones are :class:`RReLU` and the dropout family, which draw from numbagrad's
default generator in training mode and are deterministic in eval mode.
"""

from ..ops import activation as _act
# (``numbagrad.ops.dropout`` / ``.softmax`` are shadowed by the functions of those names
# that ``numbagrad.ops`` re-exports, so the functions are imported by name.)
from ..ops.dropout import alpha_dropout, dropout1d, dropout2d, dropout3d, feature_alpha_dropout
from ..ops.softmax import softmax as _softmax, softmin as _softmin
from ..ops.rrelu import rrelu as _rrelu
from . import functional as F
from . import init
from .module import Module
from .parameter import empty_parameter, factory_dtype

__all__ = ["ReLU", "ReLU6", "LeakyReLU", "ELU", "SELU", "CELU", "GELU", "SiLU", "Mish", "Sigmoid", "Tanh",
           "Softplus", "Hardtanh", "Hardsigmoid", "Hardswish", "Softsign", "LogSigmoid", "Threshold",
           "PReLU", "RReLU", "GLU", "Tanhshrink", "Softshrink", "Hardshrink", "Softmax", "LogSoftmax",
           "Softmin", "Softmax2d", "Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout",
           "FeatureAlphaDropout"]


def _inplace_suffix(inplace):
    return ", inplace=True" if inplace else ""


class ReLU(Module):
    """``max(x, 0)``."""

    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return F.relu(input, inplace=self.inplace)

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class ReLU6(ReLU):
    """``min(max(x, 0), 6)`` (PyTorch's ``Hardtanh(0, 6)``: ``min_val``/``max_val`` attributes)."""

    def __init__(self, inplace=False):
        super().__init__(inplace)
        self.min_val = 0.0
        self.max_val = 6.0

    def forward(self, input):
        return F.relu6(input, inplace=self.inplace)


class LeakyReLU(Module):
    """``x`` for positive inputs, ``negative_slope * x`` otherwise."""

    def __init__(self, negative_slope=0.01, inplace=False):
        super().__init__()
        self.negative_slope = negative_slope
        self.inplace = inplace

    def forward(self, input):
        return F.leaky_relu(input, self.negative_slope, self.inplace)

    def extra_repr(self):
        return f"negative_slope={self.negative_slope}" + (", inplace=True" if self.inplace else "")


class ELU(Module):
    """``x`` for positive inputs, ``alpha * (exp(x) - 1)`` otherwise."""

    def __init__(self, alpha=1.0, inplace=False):
        super().__init__()
        self.alpha = alpha
        self.inplace = inplace

    def forward(self, input):
        return F.elu(input, self.alpha, self.inplace)

    def extra_repr(self):
        return f"alpha={self.alpha}" + (", inplace=True" if self.inplace else "")


class SELU(Module):
    """Scaled ELU with the self-normalising constants."""

    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return F.selu(input, self.inplace)

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class GELU(Module):
    """``x * Phi(x)`` (``approximate='tanh'`` for the tanh approximation)."""

    def __init__(self, approximate="none"):
        super().__init__()
        self.approximate = approximate

    def forward(self, input):
        return F.gelu(input, approximate=self.approximate)

    def extra_repr(self):
        return f"approximate={self.approximate!r}"


class SiLU(Module):
    """``x * sigmoid(x)`` (swish)."""

    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return F.silu(input, inplace=self.inplace)

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class Mish(Module):
    """``x * tanh(softplus(x))``."""

    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return F.mish(input, inplace=self.inplace)

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class Sigmoid(Module):
    """``1 / (1 + exp(-x))``."""

    def forward(self, input):
        return F.sigmoid(input)


class Tanh(Module):
    """Hyperbolic tangent."""

    def forward(self, input):
        return F.tanh(input)


class Softplus(Module):
    """``log(1 + exp(beta x)) / beta`` (linear above ``threshold``)."""

    def __init__(self, beta=1.0, threshold=20.0):
        super().__init__()
        self.beta = beta
        self.threshold = threshold

    def forward(self, input):
        return F.softplus(input, self.beta, self.threshold)

    def extra_repr(self):
        return f"beta={self.beta}, threshold={self.threshold}"


class Hardtanh(Module):
    """``clamp(x, min_val, max_val)``."""

    def __init__(self, min_val=-1.0, max_val=1.0, inplace=False):
        super().__init__()
        if max_val <= min_val:
            raise ValueError(f"Hardtanh: max_val ({max_val}) must be greater than min_val ({min_val})")
        self.min_val = min_val
        self.max_val = max_val
        self.inplace = inplace

    def forward(self, input):
        return F.hardtanh(input, self.min_val, self.max_val, self.inplace)

    def extra_repr(self):
        return f"min_val={self.min_val}, max_val={self.max_val}" + (", inplace=True" if self.inplace else "")


class Softmax(Module):
    """Softmax along ``dim``."""

    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.softmax(input, self.dim, _stacklevel=5)

    def extra_repr(self):
        return f"dim={self.dim}"


class LogSoftmax(Module):
    """Log-softmax along ``dim``."""

    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.log_softmax(input, self.dim, _stacklevel=5)

    def extra_repr(self):
        return f"dim={self.dim}"


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
class _Inplace(Module):
    """An activation whose only argument is ``inplace`` (not shown in its repr, as in PyTorch)."""

    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace


class Hardsigmoid(_Inplace):
    """``relu6(x + 3) / 6``."""

    def forward(self, input):
        return _act.hardsigmoid(input, self.inplace)


class Hardswish(_Inplace):
    """``x * relu6(x + 3) / 6``."""

    def forward(self, input):
        return _act.hardswish(input, self.inplace)


class Softsign(Module):
    """``x / (1 + |x|)``."""

    def forward(self, input):
        return _act.softsign(input)


class LogSigmoid(Module):
    """``log(sigmoid(x))``, computed without overflow."""

    def forward(self, input):
        return _act.logsigmoid(input)


class Tanhshrink(Module):
    """``x - tanh(x)``."""

    def forward(self, input):
        return _act.tanhshrink(input)


class CELU(Module):
    """``max(0, x) + min(0, alpha * (exp(x / alpha) - 1))``."""

    def __init__(self, alpha=1.0, inplace=False):
        super().__init__()
        self.alpha = alpha
        self.inplace = inplace

    def forward(self, input):
        return _act.celu(input, self.alpha, self.inplace)

    def extra_repr(self):
        return f"alpha={self.alpha}" + _inplace_suffix(self.inplace)


class Threshold(Module):
    """``x`` where ``x > threshold``, else ``value``."""

    def __init__(self, threshold, value, inplace=False):
        super().__init__()
        self.threshold = threshold
        self.value = value
        self.inplace = inplace

    def forward(self, input):
        return _act.threshold(input, self.threshold, self.value, self.inplace)

    def extra_repr(self):
        return f"threshold={self.threshold}, value={self.value}" + _inplace_suffix(self.inplace)


class PReLU(Module):
    """``x`` for positive inputs, ``weight * x`` otherwise, with a learnable slope per
    channel (dim 1) or one shared slope (``num_parameters=1``); slopes start at ``init``."""

    def __init__(self, num_parameters=1, init=0.25, device=None, dtype=None):
        super().__init__()
        dt = factory_dtype(device, dtype)
        self.num_parameters = int(num_parameters)
        self.init = init
        self.weight = empty_parameter(self, (self.num_parameters,), dt)
        self.reset_parameters()
        if device is not None:
            self.to(device)

    def reset_parameters(self):
        init.constant_(self.weight, self.init)

    def forward(self, input):
        return _act.prelu(input, self._parameters["weight"])

    def extra_repr(self):
        return f"num_parameters={self.num_parameters}"


class RReLU(Module):
    """Randomized leaky relu: negative slopes drawn from U(lower, upper) per element in
    training mode, the fixed ``(lower + upper) / 2`` in eval mode."""

    def __init__(self, lower=1.0 / 8, upper=1.0 / 3, inplace=False):
        super().__init__()
        self.lower = lower
        self.upper = upper
        self.inplace = inplace

    def forward(self, input):
        return _rrelu(input, self.lower, self.upper, self.training, self.inplace)

    def extra_repr(self):
        return f"lower={self.lower}, upper={self.upper}" + _inplace_suffix(self.inplace)


class GLU(Module):
    """``a * sigmoid(b)`` with ``(a, b)`` the two halves of the input along ``dim``."""

    def __init__(self, dim=-1):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return _act.glu(input, self.dim)

    def extra_repr(self):
        return f"dim={self.dim}"


class Softshrink(Module):
    """``x - lambd`` above ``lambd``, ``x + lambd`` below ``-lambd``, else 0."""

    def __init__(self, lambd=0.5):
        super().__init__()
        if lambd < 0:
            raise ValueError(f"Softshrink: lambda must be no less than zero, but got {lambd}")
        self.lambd = lambd

    def forward(self, input):
        return _act.softshrink(input, self.lambd)

    def extra_repr(self):
        return str(self.lambd)


class Hardshrink(Module):
    """``x`` where ``|x| > lambd``, else 0."""

    def __init__(self, lambd=0.5):
        super().__init__()
        self.lambd = lambd

    def forward(self, input):
        return _act.hardshrink(input, self.lambd)

    def extra_repr(self):
        return str(self.lambd)


class Softmin(Module):
    """``softmax(-x)`` along ``dim``."""

    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return _softmin(input, self.dim, _stacklevel=5)

    def extra_repr(self):
        return f"dim={self.dim}"


class Softmax2d(Module):
    """Softmax over the channels of a ``(N, C, H, W)`` or ``(C, H, W)`` input (dim -3)."""

    def forward(self, input):
        if input.ndim not in (3, 4):
            raise ValueError(f"Softmax2d: expected input to be 3D or 4D, got {input.ndim}D instead "
                             f"(shape {tuple(input.shape)})")
        return _softmax(input, -3, _stacklevel=5)
