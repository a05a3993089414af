"""``DataLoader``: batches of a dataset, optionally shuffled (``torch.utils.data.DataLoader``).

Shuffling draws a fresh permutation per epoch from numbagrad's default generator (or
``generator=``), so ``numbagrad.manual_seed`` makes the order reproducible. Datasets
with ``get_batch(indices)`` (e.g. :class:`~numbagrad.data.TensorDataset`) are batched
with one gather per tensor; others are read sample by sample and collated with
:func:`default_collate`.
"""
import collections.abc
import numbers

import numpy as np

from ..tensor import Tensor
from .sampler import BatchSampler, RandomSampler, SequentialSampler

__all__ = ["DataLoader", "default_collate"]


def default_collate(batch):
    """Stack a list of samples into a batch: Tensors/arrays are stacked along a new first
    dimension, Python numbers become a 1-D tensor (float64/int64/bool as in PyTorch),
    tuples/lists/dicts are collated field by field, strings are kept as a list."""
    elem = batch[0]
    if isinstance(elem, Tensor):
        return Tensor._from_array(np.stack([b.array for b in batch]))
    if isinstance(elem, np.ndarray):
        if elem.dtype.kind in "OSU":
            return batch
        return Tensor._from_array(np.stack(batch))
    if isinstance(elem, np.generic):
        return Tensor._from_array(np.array(batch))
    if isinstance(elem, bool):
        return Tensor._from_array(np.array(batch, dtype=np.bool_))
    if isinstance(elem, numbers.Integral):
        return Tensor._from_array(np.array(batch, dtype=np.int64))
    if isinstance(elem, numbers.Real):
        return Tensor._from_array(np.array(batch, dtype=np.float64))
    if isinstance(elem, (str, bytes)):
        return list(batch)
    if isinstance(elem, collections.abc.Mapping):
        return {k: default_collate([d[k] for d in batch]) for k in elem}
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):  # namedtuple
        return type(elem)(*(default_collate(list(s)) for s in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        n = len(elem)
        if any(len(b) != n for b in batch):
            raise RuntimeError("each element in list of batch should be of equal size")
        out = [default_collate(list(s)) for s in zip(*batch)]
        return tuple(out) if isinstance(elem, tuple) else out
    raise TypeError(f"default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; "
                    f"found {type(elem).__name__}")


class DataLoader:
    """Iterate over ``dataset`` in batches.

    Parameters
    ----------
    dataset : a map-style dataset (``__getitem__`` + ``__len__``)
    batch_size : int or None, default 1 (None: yield single samples)
    shuffle : bool, default False (a new random order every epoch)
    sampler, batch_sampler : custom index order / batches (exclusive with ``shuffle``)
    collate_fn : callable, default :func:`default_collate`
    drop_last : bool, default False (drop the last incomplete batch)
    generator : numbagrad.Generator for shuffling (default: the global one)
    """

    def __init__(self, dataset, batch_size=1, shuffle=False, sampler=None, batch_sampler=None, num_workers=0,
                 collate_fn=None, pin_memory=False, drop_last=False, timeout=0, worker_init_fn=None,
                 generator=None, *, prefetch_factor=None, persistent_workers=False):
        if num_workers != 0:
            raise NotImplementedError("DataLoader: num_workers > 0 is not supported yet; use num_workers=0")
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, "
                                 "and drop_last")
            batch_size = None
            drop_last = False
        elif batch_size is not None and (not isinstance(batch_size, int) or isinstance(batch_size, bool)
                                         or batch_size <= 0):
            raise ValueError(f"batch_size should be a positive integer value, but got batch_size={batch_size}")
        if sampler is None:
            sampler = RandomSampler(dataset, generator=generator) if shuffle else SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.dataset = dataset
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self.num_workers = num_workers
        self.generator = generator
        self._user_collate = collate_fn is not None
        self.collate_fn = collate_fn if collate_fn is not None else default_collate

    def __iter__(self):
        ds = self.dataset
        if self.batch_sampler is None:  # no automatic batching
            for i in self.sampler:
                yield ds[i]
            return
        bs = self.batch_sampler
        batches = bs.batches() if hasattr(bs, "batches") else (np.asarray(b, dtype=np.int64) for b in bs)
        get_batch = None if self._user_collate else getattr(ds, "get_batch", None)
        collate = self.collate_fn
        for idx in batches:
            if get_batch is not None:
                yield get_batch(idx)
            else:
                yield collate([ds[int(i)] for i in idx])

    def __len__(self):
        if self.batch_sampler is None:
            return len(self.sampler)
        return len(self.batch_sampler)
