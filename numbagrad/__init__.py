"""numbagrad: a deep-learning training framework on NumPy arrays and Numba kernels.

PyTorch's names and semantics wherever PyTorch has the feature::

    import numbagrad as ng
    x = ng.randn(4, 3, requires_grad=True)
    y = (x @ x.T).relu().sum()
    y.backward()
"""
__version__ = "0.1.0"

from .backend import config as _config  # noqa: F401  (OpenMP settings before numba starts its pool)

from ._dtype import (float16, half, bfloat16, float32, float64, double, int8, uint8, int16, short,  # noqa: F401
                     int32, int64, long, bool_, get_default_dtype, set_default_dtype)
from ._dtype import float as float  # noqa: F401  (ng.float is float32, as torch.float)
from ._dtype import int as int  # noqa: F401
from ._dtype import bool_ as bool  # noqa: F401
from .device import device  # noqa: F401
from numpy import dtype  # noqa: F401,E402  (numbagrad's dtypes are NumPy dtypes: isinstance(ng.float32, ng.dtype))
from .backend import cpu as _cpu_backend  # noqa: F401  (registers the CPU backend)
from .tensor import Tensor, Size, _install_operators, is_tensor, numel  # noqa: F401
from . import autograd  # noqa: F401
from .autograd import no_grad, enable_grad, set_grad_enabled, inference_mode, is_grad_enabled  # noqa: F401
from .random import manual_seed, seed, initial_seed, get_rng_state, set_rng_state, Generator  # noqa: F401
from .creation import *  # noqa: F401,F403
from . import ops  # noqa: F401
from .ops import *  # noqa: F401,F403
from .ops import max, min, sum, abs, round, pow, all, any  # noqa: F401
from .utilities import *  # noqa: F401,F403

_install_operators()

from . import nn, optim, data, cuda  # noqa: E402,F401
# torch namespaces that programs import or touch at the top: what they report is what this
# machine has; features numbagrad lacks raise NotImplementedError when used
from . import accelerator, amp, backends, cpu, distributed, onnx, serialization, utils  # noqa: E402,F401
from .amp import autocast, GradScaler  # noqa: E402,F401
from .serialization import save, load  # noqa: E402,F401
from . import io  # noqa: E402,F401  (checkpoints; above nn/optim/data, which never import it)
from . import special  # noqa: E402,F401  (torch.special: the special functions under torch's names)
from . import linalg  # noqa: E402,F401  (torch.linalg: norms, factorisations and solvers)
from . import distributions  # noqa: E402,F401  (torch.distributions: probability distributions)
from . import metrics  # noqa: E402,F401  (numbagrad.metrics: classification/regression metrics, evaluate)
from . import train  # noqa: E402,F401  (numbagrad.train: Trainer, callbacks, History)
from . import warmup  # noqa: E402,F401  (numbagrad.warmup(): compile the common kernels ahead, on every core)

_NOT_YET = {}


def __getattr__(name):
    """Only for names not found otherwise: dtypes numbagrad does not have yet raise an
    ``AttributeError`` saying so; anything else is the usual ``AttributeError``."""
    if name in _NOT_YET:
        from ._unavailable import message
        raise AttributeError(message(f"numbagrad.{name}", _NOT_YET[name]))
    raise AttributeError(f"module 'numbagrad' has no attribute {name!r}")
