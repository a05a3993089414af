"""Samplers: which dataset indices a :class:`~numbagrad.data.DataLoader` visits, in which
order (``torch.utils.data.Sampler`` and friends). Random ones draw from numbagrad's
default generator unless given ``generator=``, so ``numbagrad.manual_seed`` fixes them.

Besides iteration, each built-in sampler has ``indices()``: the whole epoch's order as
one int64 array, which the DataLoader slices into batches without a Python loop over
samples.

For exact resume, the built-in samplers have ``state_dict()`` / ``load_state_dict()``
(in the spirit of torchdata's stateful samplers): their state between epochs, which is
the state of their own ``generator=`` where they have one (``{"generator": state or
None}``; ``SequentialSampler``: ``{}``; ``BatchSampler``: ``{"sampler": <its sampler's
state, or None when it has no state_dict>}``). The order of the epoch in progress and the
position in it are kept by :meth:`DataLoader.state_dict
<numbagrad.data.DataLoader.state_dict>`, which draws the epoch once and slices it. A
sampler drawing from the default generator needs ``numbagrad.get_rng_state()`` /
``set_rng_state()`` as well.
"""
import numpy as np

from .. import random as _random

__all__ = ["Sampler", "SequentialSampler", "RandomSampler", "SubsetRandomSampler", "WeightedRandomSampler",
           "BatchSampler", "DistributedSampler"]


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

    def state_dict(self):
        """``{}``: the order does not change between epochs."""
        return {}

    def load_state_dict(self, state_dict):
        _check_sampler_state(self, state_dict, ())


def _check_sampler_state(sampler, state_dict, keys):
    """Raise unless ``state_dict`` is a dict with exactly ``keys``."""
    name = f"{type(sampler).__name__}.load_state_dict"
    if not isinstance(state_dict, dict):
        raise TypeError(f"{name}: state_dict must be a dict from {type(sampler).__name__}.state_dict(), "
                        f"got {type(state_dict).__name__}")
    if set(state_dict) != set(keys):
        raise ValueError(f"{name}: state_dict has the keys {sorted(state_dict)}, expected {sorted(keys)}")


def _generator_state(sampler):
    return {"generator": sampler.generator.get_state() if sampler.generator is not None else None}


def _load_generator_state(sampler, state_dict):
    """Restore ``sampler.generator`` from ``state_dict['generator']`` (see ``state_dict``)."""
    _check_sampler_state(sampler, state_dict, ("generator",))
    saved = state_dict["generator"]
    name = type(sampler).__name__
    if (saved is None) != (sampler.generator is None):
        have = "no generator" if sampler.generator is None else "a generator"
        raise ValueError(f"{name}.load_state_dict: state_dict['generator'] is "
                         f"{'None' if saved is None else 'a generator state'}, but this sampler has {have} "
                         "(build it with the same generator= argument as the one that was saved)")
    if saved is not None:
        sampler.generator.set_state(saved)


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

    def state_dict(self):
        """``{"generator": generator.get_state() or None}``: the state of ``generator=``
        (None when the sampler draws from the default generator, whose state is
        ``numbagrad.get_rng_state()``)."""
        return _generator_state(self)

    def load_state_dict(self, state_dict):
        _load_generator_state(self, state_dict)


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

    def state_dict(self):
        """``{"generator": generator.get_state() or None}`` (see :class:`RandomSampler`)."""
        return _generator_state(self)

    def load_state_dict(self, state_dict):
        _load_generator_state(self, state_dict)


class WeightedRandomSampler(Sampler):
    """``num_samples`` indices in ``[0, len(weights))`` drawn with probabilities
    proportional to ``weights`` (``torch.utils.data.WeightedRandomSampler``): with
    replacement by default; ``replacement=False`` draws distinct indices (each draw
    among the indices not drawn yet, by weight), so ``num_samples`` can be at most the
    number of positive weights. Draws from ``generator`` (default: numbagrad's default
    generator), a fresh epoch each time."""

    def __init__(self, weights, num_samples, replacement=True, generator=None):
        name = "WeightedRandomSampler"
        if isinstance(num_samples, bool) or not isinstance(num_samples, int) or num_samples <= 0:
            raise ValueError(f"num_samples should be a positive integer value, but got num_samples={num_samples!r}")
        if not isinstance(replacement, bool):
            raise ValueError(f"replacement should be a boolean value, but got replacement={replacement!r}")
        w = getattr(weights, "array", weights)
        w = np.asarray(w.get() if hasattr(w, "get") and not isinstance(w, np.ndarray) else w)
        if w.ndim != 1:
            raise ValueError(f"weights should be a 1d sequence but given weights have shape {tuple(w.shape)}")
        if w.dtype.kind not in "biuf":
            raise TypeError(f"{name}: weights must be real numbers, got dtype {w.dtype}")
        w = w.astype(np.float64)
        if w.size == 0:
            raise ValueError(f"{name}: weights is empty")
        if not np.all(np.isfinite(w)):
            k = int(np.flatnonzero(~np.isfinite(w))[0])
            raise ValueError(f"{name}: weights must be finite, got inf or nan at index {k}")
        if np.any(w < 0):
            k = int(np.flatnonzero(w < 0)[0])
            raise ValueError(f"{name}: weights must be non-negative, got weights[{k}]={w[k]}")
        positive = int(np.count_nonzero(w))
        if positive == 0:
            raise ValueError(f"{name}: the weights sum to 0; at least one must be positive")
        if not replacement and num_samples > positive:
            raise ValueError(f"{name}: cannot draw num_samples={num_samples} distinct indices without replacement "
                             f"from {positive} positive weights (of {w.size})")
        self.weights = w
        self.num_samples = num_samples
        self.replacement = replacement
        self.generator = generator

    def indices(self):
        rng = (self.generator if self.generator is not None else _random.default_generator).numpy_rng
        p = self.weights / self.weights.sum()
        return rng.choice(len(p), size=self.num_samples, replace=self.replacement, p=p).astype(np.int64)

    def __len__(self):
        return self.num_samples

    def state_dict(self):
        """``{"generator": generator.get_state() or None}`` (see :class:`RandomSampler`)."""
        return _generator_state(self)

    def load_state_dict(self, state_dict):
        _load_generator_state(self, state_dict)


class BatchSampler(Sampler):
    """Groups the indices of ``sampler`` into lists of ``batch_size`` (the last one
    shorter unless ``drop_last``)."""

    def __init__(self, sampler, batch_size, drop_last):
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size <= 0:
            raise ValueError(f"batch_size should be a positive integer value, but got batch_size={batch_size}")
        self.sampler = sampler
        self.batch_size = batch_size
        self.drop_last = drop_last

    def _num_batches(self, n):
        """How many batches an epoch of ``n`` indices makes."""
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def batches(self):
        """The epoch's batches as int64 arrays."""
        idx = _sampler_order(self.sampler)
        bs = self.batch_size
        return [idx[k * bs:(k + 1) * bs] for k in range(self._num_batches(len(idx)))]

    def __iter__(self):
        for b in self.batches():
            yield b.tolist()

    def __len__(self):
        return self._num_batches(len(self.sampler))

    def state_dict(self):
        """``{"sampler": sampler.state_dict()}`` (None when the sampler has no state_dict)."""
        return {"sampler": self.sampler.state_dict() if hasattr(self.sampler, "state_dict") else None}

    def load_state_dict(self, state_dict):
        _check_sampler_state(self, state_dict, ("sampler",))
        saved = state_dict["sampler"]
        if saved is not None:
            if not hasattr(self.sampler, "load_state_dict"):
                raise TypeError(f"BatchSampler.load_state_dict: state_dict['sampler'] holds a sampler state, but "
                                f"the sampler {type(self.sampler).__name__} has no load_state_dict()")
            self.sampler.load_state_dict(saved)


class DistributedSampler(Sampler):
    """This rank's share of each epoch (``torch.utils.data.distributed.DistributedSampler``).

    The epoch's order is the dataset's indices, permuted with a generator seeded with
    ``seed + epoch`` when ``shuffle`` (the same on every rank: call :meth:`set_epoch` at each
    epoch's start for a new order). Unless ``drop_last`` it is padded, wrapping around to its
    start, to ``num_samples * num_replicas`` indices, so every rank gets ``num_samples =
    ceil(len / num_replicas)``; with ``drop_last`` the tail is dropped (``num_samples =
    len // num_replicas``). Rank ``r`` takes positions ``r, r + num_replicas, ...``: torch's
    layout (``tests/data`` compares the index lists with torch's sampler). The permutation is
    numbagrad's generator's, not torch's, so the shuffled orders themselves differ from torch's.

    Parameters
    ----------
    dataset : a sized dataset.
    num_replicas, rank : int, optional; default: the ``numbagrad.distributed`` group's.
    shuffle : bool. seed : int. drop_last : bool.

    ``state_dict()`` is ``{"epoch": e, "seed": s}`` (nothing depends on the world size, so a
    run saved at one world size resumes at another; the position in the epoch is the
    DataLoader's). :meth:`epoch_order` is the whole padded epoch, every rank's positions.
    """

    def __init__(self, dataset, num_replicas=None, rank=None, shuffle=True, seed=0, drop_last=False):
        if num_replicas is None or rank is None:
            from .. import distributed as dist
            if not dist.is_available():
                raise RuntimeError("DistributedSampler: requires the distributed package (pip install numbagrad[mpi]) "
                                   "when num_replicas or rank is not given")
            num_replicas = dist.get_world_size() if num_replicas is None else num_replicas
            rank = dist.get_rank() if rank is None else rank
        if isinstance(num_replicas, bool) or not isinstance(num_replicas, (int, np.integer)) or num_replicas < 1:
            raise ValueError(f"DistributedSampler: num_replicas must be a positive integer, got {num_replicas!r}")
        if isinstance(rank, bool) or not isinstance(rank, (int, np.integer)) or not 0 <= rank < num_replicas:
            raise ValueError(f"Invalid rank {rank}, rank should be in the interval [0, {num_replicas - 1}]")
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
            raise TypeError(f"DistributedSampler: seed must be an int, got {type(seed).__name__}")
        self.dataset = dataset
        self.num_replicas = int(num_replicas)
        self.rank = int(rank)
        self.shuffle = bool(shuffle)
        self.seed = int(seed)
        self.drop_last = bool(drop_last)
        self.epoch = 0
        n = len(dataset)
        self.num_samples = n // self.num_replicas if self.drop_last else -(-n // self.num_replicas)
        self.total_size = self.num_samples * self.num_replicas

    def set_epoch(self, epoch):
        """The epoch whose order :meth:`indices` draws (``seed + epoch`` seeds the shuffle)."""
        self.epoch = int(epoch)

    def epoch_order(self):
        """The whole epoch, padded or cut to ``total_size``: rank ``r``'s indices are
        ``epoch_order()[r::num_replicas]``."""
        n = len(self.dataset)
        if self.shuffle:
            order = _random.Generator().manual_seed(self.seed + self.epoch).numpy_rng.permutation(n)
        else:
            order = np.arange(n)
        order = order.astype(np.int64, copy=False)
        if self.total_size > n:
            order = np.concatenate([order, np.resize(order, self.total_size - n)])
        return order[:self.total_size]

    def indices(self):
        return self.epoch_order()[self.rank:self.total_size:self.num_replicas]

    def __len__(self):
        return self.num_samples

    def state_dict(self):
        """``{"epoch": epoch, "seed": seed}``."""
        return {"epoch": self.epoch, "seed": self.seed}

    def load_state_dict(self, state_dict):
        _check_sampler_state(self, state_dict, ("epoch", "seed"))
        self.epoch = int(state_dict["epoch"])
        self.seed = int(state_dict["seed"])


def _draws_whole_epochs(sampler):
    """Whether ``sampler`` draws an epoch as one array: it has an ``indices()`` of its own
    (not the base class's fallback, which iterates it) and iterates through it. True for
    the built-in samplers and subclasses that do not override ``__iter__``."""
    t = type(sampler)
    ind = getattr(t, "indices", None)
    return ind is not None and ind is not Sampler.indices and getattr(t, "__iter__", None) is Sampler.__iter__


def _sampler_order(sampler):
    """One epoch of ``sampler`` as an int64 array: ``sampler.indices()`` where it draws
    whole epochs (the built-in samplers: one draw, no Python loop), else its iteration."""
    if _draws_whole_epochs(sampler):
        return np.asarray(sampler.indices(), dtype=np.int64)
    return np.fromiter(iter(sampler), dtype=np.int64)
