"""``DataLoader``: batches of a dataset, optionally shuffled (``torch.utils.data.DataLoader``).

Shuffling draws a fresh permutation per epoch from numbagrad's default generator (or
``generator=``), so ``numbagrad.manual_seed`` makes the order reproducible. Datasets
with ``get_batch(indices)`` (e.g. :class:`~numbagrad.data.TensorDataset`) are batched
with one gather per tensor; others are read sample by sample and collated with
:func:`default_collate`.

Exact resume (torchdata's ``StatefulDataLoader`` in spirit): :meth:`DataLoader.state_dict`
may be called at any time, also inside ``for batch in loader:``; it records the order of
the epoch in progress (drawn once, when the epoch's first batch is asked for) and how many
batches it has yielded. After :meth:`DataLoader.load_state_dict`, the next
``iter(loader)`` continues that epoch with the next batch, without drawing; later epochs
draw as usual. See :meth:`DataLoader.state_dict` for the layout and what else to restore.
"""
import collections.abc
import numbers

import numpy as np

from .. import random as _random
from ..tensor import Tensor
from .sampler import BatchSampler, RandomSampler, SequentialSampler, _draws_whole_epochs, _sampler_order

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

    ``state_dict()`` / ``load_state_dict()`` save and restore the position in the epoch
    (see :meth:`state_dict`).
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
        it = _DataLoaderIter(self, self._resume)
        self._resume = None
        self._iterator = it  # the most recent iterator is the one state_dict() reports
        return it

    # ---- exact resume ------------------------------------------------------------------
    _STATE_KEYS = ("epoch_in_progress", "order", "num_yielded", "batch_size", "drop_last", "sampler",
                   "generator")
    _resume = None      # (order, num_yielded) from load_state_dict, for the next iterator
    _iterator = None    # the most recently created iterator

    def _index_sampler(self):
        return self.batch_sampler if self.batch_sampler is not None else self.sampler

    def _plain_batch_sampler(self):
        """Whether batches are slices of one epoch order (the built-in BatchSampler)."""
        t = type(self.batch_sampler)
        return issubclass(t, BatchSampler) and t.batches is BatchSampler.batches and t.__iter__ is BatchSampler.__iter__

    def _resumable(self):
        """Whether an epoch of this loader is one order the loader slices (so it can be
        saved and resumed), rather than a custom sampler's iteration."""
        if self.batch_sampler is None:
            return _draws_whole_epochs(self.sampler)
        return self._plain_batch_sampler()

    def _order_sampler(self):
        """The sampler whose epoch order the loader records."""
        return self.sampler if self.batch_sampler is None else self.batch_sampler.sampler

    def state_dict(self):
        """The loader's position, for an exact resume with :meth:`load_state_dict`.

        May be called at any time, also in the middle of ``for batch in loader:``, where it
        reports the most recently created iterator. A dict of plain types (it can be
        written by ``numbagrad.save``)::

            {"epoch_in_progress": bool,   # an epoch has started and not ended
             "order": int64 array | None, # that epoch's order of sample indices
             "num_yielded": int,          # batches it has yielded (samples if batch_size is None)
             "batch_size": int | None, "drop_last": bool,   # checked on load
             "sampler": dict | None,      # the (batch) sampler's state_dict(), None without one
             "generator": dict | None}    # the state of generator=, None without one

        An epoch has started once its first batch was asked for (``next``), and ends when
        its iterator is exhausted (``StopIteration``): a state taken after the epoch's last
        batch, inside the loop body, resumes to an empty rest of that epoch, as the
        uninterrupted loop would have ended there. Between epochs, the state resumes to a
        fresh epoch. Shuffling from the default generator (no ``generator=``) also needs
        ``numbagrad.get_rng_state()`` saved and restored with ``set_rng_state()``.

        The order is recorded for the built-in samplers and for any sampler when batches
        are made by the built-in :class:`BatchSampler` (``batch_size=`` given). With a custom
        ``batch_sampler``, or a custom sampler without ``indices()`` and
        ``batch_size=None``, the loader cannot know the epoch's order: a state taken
        *during* an epoch raises ``TypeError`` (rather than recording the position only,
        which would resume a shuffled epoch in another order); between epochs it works.
        A custom sampler's own random state is saved where it has ``state_dict()``.
        """
        sampler_state = _state_of(self._index_sampler())
        gen_state = self.generator.get_state() if self.generator is not None else None
        order, pos = None, 0
        if self._resume is not None:
            order, pos = self._resume
        elif self._iterator is not None and self._iterator._in_progress():
            it = self._iterator
            if it._order is None:
                what = (f"batch_sampler {type(self.batch_sampler).__name__}" if self.batch_sampler is not None
                        else f"sampler {type(self.sampler).__name__}")
                raise TypeError(
                    f"DataLoader.state_dict: cannot save the position inside an epoch of the custom {what}: the "
                    "loader does not know the epoch's order (numbagrad records it for the built-in samplers, and "
                    "for any sampler when batches are made with batch_size=). Call state_dict() between epochs, "
                    "or pass sampler= with batch_size= instead of batch_sampler=")
            order, pos = it._order, it._pos
        return {"epoch_in_progress": order is not None,
                "order": None if order is None else order.copy(),
                "num_yielded": int(pos),
                "batch_size": self.batch_size,
                "drop_last": bool(self.drop_last),
                "sampler": sampler_state,
                "generator": gen_state}

    def load_state_dict(self, state_dict):
        """Restore a state from :meth:`state_dict`: the next ``iter(loader)`` continues the
        saved epoch from its next batch (or starts a fresh epoch if none was in progress),
        and the sampler's and ``generator=``'s states are restored. The loader must be built
        like the saved one (same dataset size, ``batch_size``, ``drop_last``, sampler);
        ``TypeError`` / ``ValueError`` say what does not match."""
        name = "DataLoader.load_state_dict"
        if not isinstance(state_dict, dict):
            raise TypeError(f"{name}: state_dict must be a dict from DataLoader.state_dict(), "
                            f"got {type(state_dict).__name__}")
        missing = [k for k in self._STATE_KEYS if k not in state_dict]
        unknown = [k for k in state_dict if k not in self._STATE_KEYS]
        if missing or unknown:
            raise ValueError(f"{name}: state_dict is not a DataLoader state: "
                             + ", ".join(([f"missing key(s) {missing}"] if missing else [])
                                         + ([f"unknown key(s) {unknown}"] if unknown else [])))
        for key, mine in (("batch_size", self.batch_size), ("drop_last", bool(self.drop_last))):
            if state_dict[key] != mine:
                raise ValueError(f"{name}: state_dict[{key!r}] is {state_dict[key]!r}, but this loader has "
                                 f"{key}={mine!r}; build the loader as the saved one was")
        in_progress = state_dict["epoch_in_progress"]
        if not isinstance(in_progress, (bool, np.bool_)):
            raise TypeError(f"{name}: state_dict['epoch_in_progress'] must be a bool, got "
                            f"{type(in_progress).__name__} {in_progress!r}")
        pos = state_dict["num_yielded"]
        if isinstance(pos, (bool, np.bool_)) or not isinstance(pos, numbers.Integral):
            raise TypeError(f"{name}: state_dict['num_yielded'] must be an int, got {type(pos).__name__} {pos!r}")
        pos = int(pos)
        order = state_dict["order"]
        resume = None
        if in_progress:
            if self.batch_sampler is not None and not self._plain_batch_sampler():
                raise TypeError(f"{name}: the state resumes an epoch in progress, but this loader's "
                                f"batch_sampler {type(self.batch_sampler).__name__} is not the built-in "
                                "BatchSampler, so the saved order cannot be cut into its batches")
            order = self._check_order(order, name)
            total = (len(order) if self.batch_sampler is None
                     else self.batch_sampler._num_batches(len(order)))
            if not 0 <= pos <= total:
                raise ValueError(f"{name}: state_dict['num_yielded'] is {pos}, but the saved epoch has only "
                                 f"{total} {'samples' if self.batch_sampler is None else 'batches'}")
            resume = (order, pos)
        elif order is not None or pos != 0:
            raise ValueError(f"{name}: state_dict['epoch_in_progress'] is False, so 'order' must be None and "
                             f"'num_yielded' 0; got order={type(order).__name__}, num_yielded={pos}")
        gen = state_dict["generator"]
        if (gen is None) != (self.generator is None):
            saved = "None" if gen is None else "a generator state"
            mine = "None" if self.generator is None else "a Generator"
            raise ValueError(f"{name}: state_dict['generator'] is {saved}, but this loader was built with "
                             f"generator={mine}; build it with the same generator= argument as the saved one")
        sampler_state = state_dict["sampler"]
        target = self._index_sampler()
        if sampler_state is not None and not hasattr(target, "load_state_dict"):
            raise TypeError(f"{name}: state_dict['sampler'] holds a sampler state, but the loader's "
                            f"{type(target).__name__} has no load_state_dict()")
        if gen is not None:
            gen = _random._check_state(gen, "DataLoader.load_state_dict: state_dict['generator']")
        # checked: now change the loader (the sampler's load checks its state before changing it)
        if sampler_state is not None:
            target.load_state_dict(sampler_state)
        if gen is not None:
            self.generator.set_state(gen)
        self._resume = resume
        self._iterator = None

    def _check_order(self, order, name):
        """``state_dict['order']`` as a fresh int64 array, checked against this loader."""
        if not isinstance(order, np.ndarray) or order.ndim != 1 or (order.dtype.kind not in "iu" and order.size):
            raise TypeError(f"{name}: state_dict['order'] must be a 1-D int64 array of sample indices, got "
                            + (f"an array of dtype {order.dtype} and shape {order.shape}"
                               if isinstance(order, np.ndarray) else type(order).__name__))
        order = order.astype(np.int64)  # a copy: the caller may reuse its dict
        sampler = self._order_sampler()
        try:
            n = len(sampler)
        except TypeError:
            n = None
        if n is not None and len(order) != n:
            raise ValueError(f"{name}: state_dict['order'] has {len(order)} indices, but an epoch of this loader's "
                             f"{type(sampler).__name__} has {n}; build the loader on the same data as the "
                             "saved one")
        try:
            size = len(self.dataset)
        except TypeError:
            size = None
        if size is not None and len(order) and (order.min() < 0 or order.max() >= size):
            raise ValueError(f"{name}: state_dict['order'] holds indices in [{order.min()}, {order.max()}], outside "
                             f"the dataset of {size} samples; build the loader on the same data as the saved one")
        return order

    def __len__(self):
        if self.batch_sampler is None:
            return len(self.sampler)
        return len(self.batch_sampler)


def _state_of(sampler):
    return sampler.state_dict() if hasattr(sampler, "state_dict") else None


class _DataLoaderIter:
    """One epoch of a :class:`DataLoader`. For resumable loaders, the epoch's order is drawn
    at the first ``next()`` (as a generator-based ``__iter__`` would) and sliced into
    batches; ``_pos`` counts what was yielded. ``resume=(order, pos)`` continues a saved
    epoch. Custom batch samplers (and custom samplers with ``batch_size=None``) are
    iterated as they are."""

    def __init__(self, loader, resume=None):
        self._loader = loader
        self._order = None      # the epoch's order once drawn (or resumed)
        self._pos = 0           # batches (samples when batch_size is None) yielded
        self._started = False
        self._done = False
        self._custom = None     # the iterator of a custom (batch) sampler
        if resume is not None:
            self._order, self._pos = resume
            self._started = True
        self._get_batch = None if loader._user_collate else getattr(loader.dataset, "get_batch", None)

    def __iter__(self):
        return self

    def __len__(self):
        return len(self._loader)

    def _in_progress(self):
        return self._started and not self._done

    def _start(self):
        L = self._loader
        self._started = True
        if L._resumable():
            self._order = _sampler_order(L._order_sampler())
        elif L.batch_sampler is None:
            self._custom = iter(L.sampler)
        else:
            bs = L.batch_sampler
            # duck-typed batch samplers may offer their batches as arrays (``batches()``)
            duck = hasattr(bs, "batches") and not isinstance(bs, BatchSampler)
            self._custom = iter(bs.batches()) if duck else iter(bs)

    def __next__(self):
        if self._done:
            raise StopIteration
        if not self._started:
            self._start()
        L = self._loader
        ds = L.dataset
        if self._order is None:  # a custom sampler's own iteration
            try:
                item = next(self._custom)
            except StopIteration:
                self._finish()
                raise
            if L.batch_sampler is None:
                out = ds[item]
            else:
                out = self._fetch(np.asarray(item, dtype=np.int64))
            self._pos += 1
            return out
        order, pos = self._order, self._pos
        if L.batch_sampler is None:
            if pos >= len(order):
                self._finish()
                raise StopIteration
            out = ds[int(order[pos])]
        else:
            bs = L.batch_sampler
            if pos >= bs._num_batches(len(order)):
                self._finish()
                raise StopIteration
            out = self._fetch(order[pos * bs.batch_size:(pos + 1) * bs.batch_size])
        self._pos = pos + 1
        return out

    def _fetch(self, idx):
        if self._get_batch is not None:
            return self._get_batch(idx)
        ds = self._loader.dataset
        return self._loader.collate_fn([ds[int(i)] for i in idx])

    def _finish(self):
        self._done = True
        self._order = None
        self._custom = None
