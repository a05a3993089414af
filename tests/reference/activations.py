"""Plain float64 NumPy references for activations and softmax (textbook formulas, written
independently of numbagrad's kernels; only used on moderate inputs)."""
import math

import numpy as np

SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946

_erf = np.vectorize(math.erf, otypes=[np.float64])


def relu(x):
    return np.maximum(x, 0.0)


def relu6(x):
    return np.minimum(np.maximum(x, 0.0), 6.0)


def leaky_relu(x, negative_slope=0.01):
    return np.where(x > 0, x, negative_slope * x)


def elu(x, alpha=1.0):
    return np.where(x > 0, x, alpha * (np.exp(np.minimum(x, 0)) - 1))


def selu(x):
    return SELU_SCALE * elu(x, SELU_ALPHA)


def celu(x, alpha=1.0):
    return np.maximum(0, x) + np.minimum(0, alpha * (np.exp(np.minimum(x, 0) / alpha) - 1))


def gelu(x, approximate="none"):
    if approximate == "tanh":
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    return 0.5 * x * (1 + _erf(x / math.sqrt(2)))


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def silu(x):
    return x * sigmoid(x)


def tanh(x):
    return np.tanh(x)


def softplus(x, beta=1.0, threshold=20.0):
    z = beta * x
    return np.where(z > threshold, x, np.log1p(np.exp(np.minimum(z, threshold))) / beta)


def hardtanh(x, min_val=-1.0, max_val=1.0):
    return np.clip(x, min_val, max_val)


def hardsigmoid(x):
    return np.clip(x + 3, 0, 6) / 6


def hardswish(x):
    return x * np.clip(x + 3, 0, 6) / 6


def mish(x):
    return x * np.tanh(np.log1p(np.exp(x)))


def logsigmoid(x):
    return np.log(sigmoid(x))


def softsign(x):
    return x / (1 + np.abs(x))


def tanhshrink(x):
    return x - np.tanh(x)


def softshrink(x, lambd=0.5):
    return np.where(x > lambd, x - lambd, np.where(x < -lambd, x + lambd, 0.0))


def hardshrink(x, lambd=0.5):
    return np.where(np.abs(x) > lambd, x, 0.0)


def threshold(x, threshold, value):
    return np.where(x > threshold, x, value)


def glu(x, dim=-1):
    a, b = np.split(x, 2, axis=dim)
    return a * sigmoid(b)


def softmax(x, dim):
    e = np.exp(x - np.max(x, axis=dim, keepdims=True))
    return e / e.sum(axis=dim, keepdims=True)


def log_softmax(x, dim):
    s = x - np.max(x, axis=dim, keepdims=True)
    return s - np.log(np.exp(s).sum(axis=dim, keepdims=True))


def softmin(x, dim):
    return softmax(-x, dim)
