"""Plain NumPy references for the indexing ops (loops over the index, written
independently of numbagrad's kernels)."""
import numpy as np


def gather(x, dim, idx):
    return np.take_along_axis(x, idx, dim)


def scatter(x, dim, idx, src, add=False):
    """``x.scatter(dim, idx, src)`` (``src`` an array or a scalar), or ``scatter_add`` with ``add``."""
    out = x.copy()
    for pos in np.ndindex(*idx.shape):
        tgt = list(pos)
        tgt[dim] = idx[pos]
        if add:
            out[tuple(tgt)] += src[pos]
        else:
            out[tuple(tgt)] = src[pos] if isinstance(src, np.ndarray) else src
    return out


def index_add(x, dim, idx, src, alpha=1.0):
    out = x.copy()
    for k, i in enumerate(idx):
        sl = [slice(None)] * x.ndim
        sl[dim] = i
        sk = [slice(None)] * x.ndim
        sk[dim] = k
        out[tuple(sl)] += alpha * src[tuple(sk)]
    return out


def setitem(x, v, idx):
    """A copy of ``x`` with ``x[idx] = v``."""
    y = x.copy()
    y[idx] = v
    return y
