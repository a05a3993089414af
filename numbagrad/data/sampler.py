"""Samplers: which dataset indices a :class:`~numbagrad.data.DataLoader` visits, in which
order (``torch.utils.data.Sampler`` and friends). Random ones draw from numbagrad's
default generator unless given ``generator=``, so ``numbagrad.manual_seed`` fixes them.

Besides iteration, each built-in sampler has ``indices()``: the whole epoch's order as
one int64 array, which the DataLoader slices into batches without a Python loop over
samples.
"""
import numpy as np

from .. import random as _random

__all__ = ["Sampler", "SequentialSampler", "RandomSampler", "SubsetRandomSampler", "BatchSampler"]


class Sampler:
    """Base class: an iterable of dataset indices."""

    def __iter__(self):
        return iter(self.indices().tolist())

    def indices(self):
        return np.fromiter(iter(self), dtype=np.int64)


class SequentialSampler(Sampler):
    """0, 1, ..., len(data_source) - 1."""

    def __init__(self, data_source):
        self.data_source = data_source

    def indices(self):
        return np.arange(len(self.data_source), dtype=np.int64)

    def __len__(self):
        return len(self.data_source)


class RandomSampler(Sampler):
    """A fresh random permutation every epoch (or ``num_samples`` draws with replacement)."""

    def __init__(self, data_source, replacement=False, num_samples=None, generator=None):
        self.data_source = data_source
        self.replacement = replacement
        self._num_samples = num_samples
        self.generator = generator
        if num_samples is not None and (not isinstance(num_samples, int) or num_samples <= 0):
            raise ValueError(f"num_samples should be a positive integer value, but got num_samples={num_samples}")

    @property
    def num_samples(self):
        return len(self.data_source) if self._num_samples is None else self._num_samples

    # The indices of an epoch are drawn as one array; past this many (1 GiB of int64) that
    # would exhaust memory (``num_samples=int(1e10)``, a common "endless" idiom, is 75 GiB)
    MAX_MATERIALIZED = 1 << 27

    def indices(self):
        if self.num_samples > self.MAX_MATERIALIZED:
            raise NotImplementedError(
                f"RandomSampler: num_samples={self.num_samples} would draw {self.num_samples * 8 / 2**30:.1f} GiB "
                f"of indices at once; drawing them lazily is not available in numbagrad yet (it will come with "
                f"the data pipelines). Use num_samples <= {self.MAX_MATERIALIZED} and more epochs.")
        rng = (self.generator if self.generator is not None else _random.default_generator).numpy_rng
        n = len(self.data_source)
        if self.replacement:
            return rng.integers(0, n, self.num_samples, dtype=np.int64)
        reps = -(-self.num_samples // n) if n else 0
        out = np.concatenate([rng.permutation(n) for _ in range(reps)]) if reps else np.empty(0, np.int64)
        return out[:self.num_samples].astype(np.int64, copy=False)

    def __len__(self):
        return self.num_samples


class SubsetRandomSampler(Sampler):
    """The given indices, in a fresh random order every epoch."""

    def __init__(self, indices, generator=None):
        self._indices = np.asarray(indices, dtype=np.int64)
        self.generator = generator

    def indices(self):
        rng = (self.generator if self.generator is not None else _random.default_generator).numpy_rng
        return self._indices[rng.permutation(len(self._indices))]

    def __len__(self):
        return len(self._indices)


class BatchSampler(Sampler):
    """Groups the indices of ``sampler`` into lists of ``batch_size`` (the last one
    shorter unless ``drop_last``)."""

    def __init__(self, sampler, batch_size, drop_last):
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size <= 0:
            raise ValueError(f"batch_size should be a positive integer value, but got batch_size={batch_size}")
        self.sampler = sampler
        self.batch_size = batch_size
        self.drop_last = drop_last

    def batches(self):
        """The epoch's batches as int64 arrays."""
        idx = self.sampler.indices() if hasattr(self.sampler, "indices") else \
            np.fromiter(iter(self.sampler), dtype=np.int64)
        n = len(idx)
        bs = self.batch_size
        stop = n - n % bs if self.drop_last else n
        return [idx[i:i + bs] for i in range(0, stop, bs)]

    def __iter__(self):
        for b in self.batches():
            yield b.tolist()

    def __len__(self):
        n = len(self.sampler)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
