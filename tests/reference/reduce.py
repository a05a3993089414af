"""Plain float64 NumPy references for reductions that NumPy lacks under one name."""
import numpy as np


def logsumexp(x, axis=None, keepdims=False):
    """``log(sum(exp(x)))`` over ``axis`` (an int, a tuple or None for all), shifted by the max."""
    m = np.max(x, axis=axis, keepdims=True)
    r = np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True)) + m
    return r if keepdims else r.reshape(np.sum(x, axis=axis).shape)
