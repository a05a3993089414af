"""Datasets (``torch.utils.data``): the map-style :class:`Dataset` protocol,
:class:`TensorDataset`, :class:`Subset`, :class:`ConcatDataset` and :func:`random_split`.

A dataset that can gather a whole batch at once defines ``get_batch(indices)``
(``indices`` a 1-D int64 NumPy array) returning the collated batch; the default
:class:`~numbagrad.data.DataLoader` then makes one fancy-indexing call per tensor per
batch instead of one ``__getitem__`` per sample plus a stack.
"""
import bisect
import math

import numpy as np

from .. import random as _random
from ..tensor import Tensor

__all__ = ["Dataset", "IterableDataset", "ChainDataset", "TensorDataset", "Subset", "ConcatDataset", "random_split"]


class Dataset:
    """A map-style dataset: ``__getitem__(index)`` and ``__len__``."""

    def __getitem__(self, index):
        raise NotImplementedError(f"{type(self).__name__} must implement __getitem__")

    def __add__(self, other):
        return ConcatDataset([self, other])


class IterableDataset(Dataset):
    """A stream of samples: subclasses define ``__iter__`` (``torch.utils.data.IterableDataset``).

    A :class:`~numbagrad.data.DataLoader` iterates it in its own order (no ``shuffle``,
    ``sampler`` or ``batch_sampler``) and collates ``batch_size`` consecutive samples.
    With ``num_workers=N`` each worker iterates its own copy, so without sharding every
    sample comes ``N`` times: shard in ``__iter__`` with
    :func:`~numbagrad.data.get_worker_info` (``info.id`` of ``info.num_workers``), as
    with PyTorch. The loader takes one batch from each worker in turn, skipping those
    whose stream has ended. A position inside an epoch cannot be saved
    (``DataLoader.state_dict`` raises ``TypeError`` there).
    """

    def __iter__(self):
        raise NotImplementedError(f"{type(self).__name__} must implement __iter__")

    def __add__(self, other):
        return ChainDataset([self, other])


class ChainDataset(IterableDataset):
    """Several iterable datasets one after another."""

    def __init__(self, datasets):
        self.datasets = datasets

    def __iter__(self):
        for d in self.datasets:
            if not isinstance(d, IterableDataset):
                raise TypeError(f"ChainDataset only supports IterableDataset, got {type(d).__name__}")
            yield from d

    def __len__(self):
        return sum(len(d) for d in self.datasets)


def _as_tensor(x):
    if isinstance(x, Tensor):
        return x
    return Tensor._from_array(np.asarray(x))


class TensorDataset(Dataset):
    """Samples are the ``index``-th rows of each tensor: ``(x[i], y[i], ...)``.

    Tensors (or NumPy arrays) must share their first dimension.
    """

    def __init__(self, *tensors):
        if not tensors:
            raise ValueError("TensorDataset needs at least one tensor")
        tensors = tuple(_as_tensor(t) for t in tensors)
        n = tensors[0].shape[0] if tensors[0].ndim else None
        for t in tensors:
            if t.ndim == 0 or t.shape[0] != n:
                raise ValueError("Size mismatch between tensors: TensorDataset needs tensors with the same "
                                 f"first dimension, got shapes {[tuple(t.shape) for t in tensors]}")
        self.tensors = tensors

    def __getitem__(self, index):
        return tuple(Tensor._from_array(np.asarray(t.array[index])) for t in self.tensors)

    def __len__(self):
        return self.tensors[0].shape[0]

    def get_batch(self, indices):
        """All samples at ``indices`` at once, as a tuple of batched tensors."""
        return tuple(Tensor._from_array(t.array[indices]) for t in self.tensors)


class Subset(Dataset):
    """The samples of ``dataset`` at ``indices``."""

    def __init__(self, dataset, indices):
        self.dataset = dataset
        self.indices = indices

    def __getitem__(self, idx):
        if isinstance(idx, (list, np.ndarray)):
            return [self.dataset[self.indices[i]] for i in idx]
        return self.dataset[self.indices[idx]]

    def __len__(self):
        return len(self.indices)

    @property
    def get_batch(self):
        """Present only when the wrapped dataset has ``get_batch``."""
        inner = getattr(self.dataset, "get_batch", None)
        if inner is None:
            raise AttributeError("get_batch")
        base = np.asarray(self.indices, dtype=np.int64)
        return lambda indices: inner(base[indices])


class ConcatDataset(Dataset):
    """Several datasets one after another."""

    def __init__(self, datasets):
        self.datasets = list(datasets)
        if not self.datasets:
            raise ValueError("datasets should not be an empty iterable")
        self.cumulative_sizes = list(np.cumsum([len(d) for d in self.datasets]))

    def __len__(self):
        return int(self.cumulative_sizes[-1]) if self.cumulative_sizes else 0

    def __getitem__(self, idx):
        if idx < 0:
            if -idx > len(self):
                raise ValueError("absolute value of index should not exceed dataset length")
            idx += len(self)
        d = bisect.bisect_right(self.cumulative_sizes, idx)
        start = 0 if d == 0 else self.cumulative_sizes[d - 1]
        return self.datasets[d][idx - start]


def random_split(dataset, lengths, generator=None):
    """Split ``dataset`` into non-overlapping random :class:`Subset` s of the given
    lengths (or fractions summing to 1), drawing from ``generator`` (default:
    numbagrad's default generator)."""
    n = len(dataset)
    lengths = list(lengths)
    if math.isclose(sum(lengths), 1) and sum(lengths) <= 1:
        counts = [int(math.floor(n * frac)) for frac in lengths]
        for i in range(n - sum(counts)):
            counts[i % len(counts)] += 1
        lengths = counts
    if sum(lengths) != n:
        raise ValueError("Sum of input lengths does not equal the length of the input dataset!")
    rng = (generator if generator is not None else _random.default_generator).numpy_rng
    perm = rng.permutation(n)
    out = []
    start = 0
    for k in lengths:
        out.append(Subset(dataset, perm[start:start + k]))
        start += k
    return out
