"""Differentiable ops: one module per family, each a set of ``Function`` subclasses
followed by the public functions. Everything public is re-exported here and at the
top level of ``numbagrad``, except the loss families (``loss``, ``loss_pointwise``, ``ctc``,
``loss_metric``), which are reached as in torch, through :mod:`numbagrad.nn.functional`."""
from .elementwise import (add, sub, mul, div, true_divide, floor_divide, remainder, pow,  # noqa: F401
                          maximum, minimum, rsub, neg, negative, exp, exp2, expm1, log, log2,
                          log10, log1p, sqrt, rsqrt, abs, absolute, sign, square, reciprocal,
                          sin, cos, floor, ceil, round, trunc, frac, clamp, clip, clamp_min,
                          clamp_max, where, eq, ne, lt, le, gt, ge, greater, greater_equal, less,
                          less_equal, not_equal, logical_and, logical_or, logical_xor,
                          logical_not, isnan, isinf, isfinite, equal, allclose, isclose, lerp)
from .reduce import (sum, mean, var, std, var_mean, std_mean, prod, max, min, amax, amin,  # noqa: F401
                     argmax, argmin, logsumexp, norm, normalize, all, any, cumsum)
from .matmul import matmul, mm, bmm, dot, outer, linear, einsum  # noqa: F401
from .shape import (cast, to_device, reshape, view, view_as, reshape_as, flatten, unflatten,  # noqa: F401
                    squeeze, unsqueeze, permute, transpose, swapaxes, t, movedim, expand,
                    expand_as, broadcast_to, broadcast_tensors, contiguous, clone, cat,
                    concatenate, concat, stack, hstack, vstack, narrow, split, chunk, unbind,
                    pad, flip, roll, repeat, tile, pixel_shuffle, pixel_unshuffle, interpolate,
                    ravel, swapdims, moveaxis)
from .indexing import *  # noqa: F401,F403
from .indexing import getitem, setitem  # noqa: F401
from .activation import *  # noqa: F401,F403
from .softmax import *  # noqa: F401,F403
from .dropout import *  # noqa: F401,F403
from .normalization import *  # noqa: F401,F403
from .pooling import *  # noqa: F401,F403
from .attention import *  # noqa: F401,F403
from .fused import linear_act  # noqa: F401
from .bilinear import bilinear  # noqa: F401
from .rrelu import rrelu, rrelu_  # noqa: F401
from .sparse import embedding_bag  # noqa: F401
from .conv import *  # noqa: F401,F403
from .rnn import *  # noqa: F401,F403
from .sorting import *  # noqa: F401,F403
from .pointwise import *  # noqa: F401,F403
from .linalg_basic import *  # noqa: F401,F403
from .special_fns import *  # noqa: F401,F403
from .scan import *  # noqa: F401,F403
from .linalg_ops import *  # noqa: F401,F403
from .misc_ops import *  # noqa: F401,F403
