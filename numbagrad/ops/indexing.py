"""Indexing: ``__getitem__``/``__setitem__`` (placeholder, being extended)."""
import numpy as np

from ..autograd.function import Function
from ..backend import backend_of
from ..tensor import Tensor


def _index_arrays(idx):
    if isinstance(idx, tuple):
        return tuple(_index_arrays(i) for i in idx)
    if isinstance(idx, Tensor):
        return idx.data
    return idx


class GetItem(Function):
    @staticmethod
    def forward(ctx, x, idx):
        ctx.meta = (x.shape, x.dtype, idx)
        return x[idx]

    @staticmethod
    def backward(ctx, g):
        shape, dtype, idx = ctx.meta
        out = np.zeros(shape, dtype)
        np.add.at(out, idx, g)
        return out, None


def getitem(input, idx):
    return GetItem.apply(input, _index_arrays(idx))


def setitem(input, idx, value):
    with_grad = False
    v = value.data if isinstance(value, Tensor) else value
    input._check_inplace("__setitem__")
    input.data[_index_arrays(idx)] = v
    input._bump_version()
