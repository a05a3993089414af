"""Weight initialisation (``torch.nn.init``): in-place fills drawing from numbagrad's
default generator (``numbagrad.manual_seed`` makes them reproducible) or from the
``generator=`` passed. Every function writes into ``tensor.array`` in place (keeping
any optimizer arena view intact), bumps the version counter and returns ``tensor``.
"""
import math
import warnings

import numpy as np

from .. import random as _random

__all__ = ["calculate_gain", "uniform_", "normal_", "trunc_normal_", "constant_", "ones_", "zeros_",
           "eye_", "dirac_", "xavier_uniform_", "xavier_normal_", "kaiming_uniform_", "kaiming_normal_",
           "orthogonal_", "sparse_"]


def _rng(generator):
    return (generator if generator is not None else _random.default_generator).numpy_rng


def _fill(tensor, values):
    np.copyto(tensor.array, values, casting="unsafe")
    tensor._version.value += 1
    return tensor


def calculate_gain(nonlinearity, param=None):
    """The recommended gain for a nonlinearity (``torch.nn.init.calculate_gain``)."""
    linear_fns = ["linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
                  "conv_transpose3d"]
    if nonlinearity in linear_fns or nonlinearity == "sigmoid":
        return 1
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif not isinstance(param, bool) and isinstance(param, (int, float)):
            slope = param
        else:
            raise ValueError(f"negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def _calculate_fan_in_and_fan_out(tensor):
    dim = tensor.ndim
    if dim < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than 2 dimensions")
    fan_in = tensor.shape[1]
    fan_out = tensor.shape[0]
    receptive = 1
    for s in tensor.shape[2:]:
        receptive *= s
    return fan_in * receptive, fan_out * receptive


def _calculate_correct_fan(tensor, mode):
    mode = mode.lower()
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"Mode {mode} not supported, please use one of fan_in, fan_out")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def uniform_(tensor, a=0.0, b=1.0, generator=None):
    """Fill with U(a, b)."""
    return _fill(tensor, _rng(generator).uniform(a, b, tensor.shape))


def normal_(tensor, mean=0.0, std=1.0, generator=None):
    """Fill with N(mean, std^2)."""
    return _fill(tensor, _rng(generator).normal(mean, std, tensor.shape))


def trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """Fill with N(mean, std^2) truncated to [a, b] (inverse-CDF sampling)."""
    from scipy.special import erfinv

    def norm_cdf(x):
        return (1.0 + math.erf(x / math.sqrt(2.0))) / 2.0

    if mean < a - 2 * std or mean > b + 2 * std:
        warnings.warn("mean is more than 2 std from [a, b] in nn.init.trunc_normal_. "
                      "The distribution of values may be incorrect.", stacklevel=2)
    lo = norm_cdf((a - mean) / std)
    hi = norm_cdf((b - mean) / std)
    u = _rng(generator).uniform(2 * lo - 1, 2 * hi - 1, tensor.shape)
    v = erfinv(u) * (std * math.sqrt(2.0)) + mean
    return _fill(tensor, np.clip(v, a, b))


def constant_(tensor, val):
    """Fill ``tensor`` with ``val`` in place, outside autograd, and return it (``torch.nn.init.constant_``)."""
    tensor.array.fill(val)
    tensor._version.value += 1
    return tensor


def ones_(tensor):
    """Fill ``tensor`` with 1 in place and return it."""
    return constant_(tensor, 1.0)


def zeros_(tensor):
    """Fill ``tensor`` with 0 in place and return it."""
    return constant_(tensor, 0.0)


def eye_(tensor):
    """Fill a 2-D tensor with the identity matrix."""
    if tensor.ndim != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    return _fill(tensor, np.eye(*tensor.shape))


def dirac_(tensor, groups=1):
    """Fill a {3,4,5}-D tensor with the Dirac delta (identity convolution)."""
    d = tensor.ndim
    if d not in (3, 4, 5):
        raise ValueError("Only tensors with 3, 4, or 5 dimensions are supported")
    sizes = tensor.shape
    if sizes[0] % groups != 0:
        raise ValueError("dim 0 must be divisible by groups")
    out_per = sizes[0] // groups
    min_dim = min(out_per, sizes[1])
    vals = np.zeros(sizes)
    centre = tuple(s // 2 for s in sizes[2:])
    for g in range(groups):
        for k in range(min_dim):
            vals[(g * out_per + k, k) + centre] = 1
    return _fill(tensor, vals)


def xavier_uniform_(tensor, gain=1.0, generator=None):
    """Glorot uniform: U(-a, a) with ``a = gain * sqrt(6 / (fan_in + fan_out))``."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    a = math.sqrt(3.0) * std
    return uniform_(tensor, -a, a, generator)


def xavier_normal_(tensor, gain=1.0, generator=None):
    """Glorot normal: N(0, std^2) with ``std = gain * sqrt(2 / (fan_in + fan_out))``."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return normal_(tensor, 0.0, std, generator)


def kaiming_uniform_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    """He uniform: U(-b, b) with ``b = gain * sqrt(3 / fan)``.

    ``nn.Linear``'s default (``a=sqrt(5)``) gives ``b = 1/sqrt(fan_in)``.
    """
    if 0 in tensor.shape:
        warnings.warn("Initializing zero-element tensors is a no-op", stacklevel=2)
        return tensor
    fan = _calculate_correct_fan(tensor, mode)
    gain = calculate_gain(nonlinearity, a)
    bound = math.sqrt(3.0) * gain / math.sqrt(fan)
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    """He normal: N(0, std^2) with ``std = gain / sqrt(fan)``."""
    if 0 in tensor.shape:
        warnings.warn("Initializing zero-element tensors is a no-op", stacklevel=2)
        return tensor
    fan = _calculate_correct_fan(tensor, mode)
    gain = calculate_gain(nonlinearity, a)
    return normal_(tensor, 0.0, gain / math.sqrt(fan), generator)


def orthogonal_(tensor, gain=1, generator=None):
    """A (semi-)orthogonal matrix (Saxe et al.), the trailing dimensions flattened."""
    if tensor.ndim < 2:
        raise ValueError("Only tensors with 2 or more dimensions are supported")
    if tensor.numel() == 0:
        return tensor
    rows = tensor.shape[0]
    cols = tensor.numel() // rows
    flat = _rng(generator).normal(0.0, 1.0, (rows, cols))
    if rows < cols:
        flat = flat.T
    q, r = np.linalg.qr(flat)
    d = np.sign(np.diag(r))
    d[d == 0] = 1
    q = q * d
    if rows < cols:
        q = q.T
    return _fill(tensor, (gain * q).reshape(tensor.shape))


def sparse_(tensor, sparsity, std=0.01, generator=None):
    """A 2-D matrix whose columns each have a ``sparsity`` fraction of zeros, the rest N(0, std^2)."""
    if tensor.ndim != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    rng = _rng(generator)
    rows, cols = tensor.shape
    num_zeros = int(math.ceil(sparsity * rows))
    vals = rng.normal(0.0, std, (rows, cols))
    for c in range(cols):
        vals[rng.permutation(rows)[:num_zeros], c] = 0
    return _fill(tensor, vals)


# ---- PyTorch's deprecated spellings without the trailing underscore ----------------------------
def _deprecated(fn):
    name = fn.__name__[:-1]

    def old(*args, **kwargs):
        import warnings
        warnings.warn(f"nn.init.{name} is now deprecated in favor of nn.init.{fn.__name__}.", FutureWarning,
                      stacklevel=2)
        return fn(*args, **kwargs)
    old.__name__ = old.__qualname__ = name
    old.__doc__ = f"Deprecated alias of :func:`{fn.__name__}` (warns, as in PyTorch)."
    return old


uniform, normal, constant, eye, dirac = map(_deprecated, (uniform_, normal_, constant_, eye_, dirac_))
xavier_uniform, xavier_normal = _deprecated(xavier_uniform_), _deprecated(xavier_normal_)
kaiming_uniform, kaiming_normal, orthogonal = map(_deprecated, (kaiming_uniform_, kaiming_normal_, orthogonal_))
