"""The numbagrad names the distributions use, imported from their own layers (the package
root sits below this layer), so the modules here can write ``ng.log``, ``ng.randn``."""
from .. import linalg  # noqa: F401
from .._dtype import finfo, float64, get_default_dtype, int64  # noqa: F401
from ..autograd import no_grad  # noqa: F401
from ..creation import arange, eye, full, full_like, rand, randn, tensor, zeros, zeros_like  # noqa: F401
from ..ops import (all, broadcast_tensors, digamma, erf, erfinv, exp, expm1, lgamma, log, log1p,  # noqa: F401
                   multinomial, sigmoid, sign, softmax, where, xlogy)
from ..ops._util import broadcast_shape
from ..ops.indexing import one_hot  # noqa: F401
from ..tensor import Size, Tensor  # noqa: F401


def broadcast_shapes(*shapes):
    """The shape the ``shapes`` broadcast to (PyTorch's error on a mismatch)."""
    return Size(broadcast_shape("broadcast_shapes", *[tuple(s) for s in shapes]))
