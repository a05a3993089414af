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

Worker processes (``num_workers > 0``) follow PyTorch's model: the main process still
draws the order and slices it, sends the index batches to the workers and puts their
results back in order, so batches, resume and the random stream are those of
``num_workers=0``. The machinery (spawn, shared-memory transport, errors) is in
:mod:`numbagrad.data._worker`.
"""
import collections.abc
import numbers

import numpy as np

from .. import random as _random
from ..tensor import Tensor
from . import _worker
from .dataset import IterableDataset
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
    dataset : a map-style dataset (``__getitem__`` + ``__len__``) or an
        :class:`~numbagrad.data.IterableDataset` (then no shuffle/sampler options)
    batch_size : int or None, default 1 (None: yield single samples)
    shuffle : bool, default False (a new random order every epoch)
    sampler, batch_sampler : custom index order / batches (exclusive with ``shuffle``)
    num_workers : int, default 0 (load in the main process); ``N > 0``: ``N`` worker
        processes fetch and collate batches, which come back in sampler order
    collate_fn : callable, default :func:`default_collate`
    pin_memory, pin_memory_device : accepted and ignored: batches are host arrays, and a
        CUDA copy of them needs no page-locked staging in numbagrad
    drop_last : bool, default False (drop the last incomplete batch)
    timeout : float, default 0 (wait forever); with workers, a ``RuntimeError`` when one
        batch takes longer than this many seconds (a worker's start-up, the spawn and its
        imports, is not counted: it takes a second or more; a worker that dies is
        reported within a fraction of a second whatever ``timeout`` is)
    worker_init_fn : callable(worker_id), run in each worker after it is seeded
    multiprocessing_context : None (``"spawn"``), ``"spawn"``, ``"forkserver"``, ``"fork"``
        or a ``multiprocessing`` context. ``"fork"`` works at any time: a worker forked
        after numba's GNU OpenMP pool has run runs numbagrad's kernels serially
        (``numbagrad.backend.config.fork_runs_serial``)
    generator : numbagrad.Generator for shuffling and the workers' base seed (default:
        the global one)
    prefetch_factor : int, default 2 with workers: batches in flight per worker
    persistent_workers : bool, default False: keep the workers (and their copy of the
        dataset) between epochs instead of starting them at each epoch
    in_order : accepted; batches always come in sampler order

    Workers (see ``numbagrad/data/_worker.py``) get the dataset, ``collate_fn`` and
    ``worker_init_fn`` pickled, so these must be importable by name (defined at module
    level, not in ``__main__`` of an interactive session). Worker ``i`` is seeded each
    epoch with ``base_seed + i`` (``numbagrad.manual_seed``, ``random.seed``, NumPy's
    legacy global RNG), ``base_seed`` drawn from ``generator`` (or the default generator)
    after the epoch's order, also without workers so that the random stream does not
    depend on ``num_workers``; :func:`~numbagrad.data.get_worker_info` tells a worker who
    it is. Batches come back through shared memory. A worker's exception is raised in the
    main process with the worker's traceback; a worker that dies raises ``RuntimeError``;
    after either the workers are shut down. Unlike torch, persistent workers are reseeded
    at every epoch (so an epoch's draws do not depend on ``persistent_workers``), and
    ``worker_init_fn`` runs once per worker process.

    ``state_dict()`` / ``load_state_dict()`` save and restore the position in the epoch
    (see :meth:`state_dict`).
    """

    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None, num_workers=0,
                 collate_fn=None, pin_memory=False, drop_last=False, timeout=0, worker_init_fn=None,
                 multiprocessing_context=None, generator=None, *, prefetch_factor=None, persistent_workers=False,
                 pin_memory_device="", in_order=True):
        if isinstance(num_workers, bool) or not isinstance(num_workers, numbers.Integral) or num_workers < 0:
            raise ValueError("num_workers option should be non-negative; use num_workers=0 to disable "
                             f"multiprocessing, got num_workers={num_workers!r}")
        num_workers = int(num_workers)
        if isinstance(timeout, bool) or not isinstance(timeout, numbers.Real) or timeout < 0:
            raise ValueError(f"timeout option should be non-negative, got timeout={timeout!r}")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError("prefetch_factor option could only be specified in multiprocessing. Let num_workers > 0 "
                             "to enable multiprocessing, otherwise set prefetch_factor to None "
                             f"(got num_workers=0, prefetch_factor={prefetch_factor!r})")
        if num_workers > 0 and prefetch_factor is None:
            prefetch_factor = 2
        if prefetch_factor is not None and (isinstance(prefetch_factor, bool) or not isinstance(
                prefetch_factor, numbers.Integral) or prefetch_factor <= 0):
            raise ValueError(f"prefetch_factor option should be a positive integer, got {prefetch_factor!r}")
        if persistent_workers and num_workers == 0:
            raise ValueError("persistent_workers option needs num_workers > 0")
        if worker_init_fn is not None and not callable(worker_init_fn):
            raise TypeError(f"DataLoader: worker_init_fn must be callable, got {type(worker_init_fn).__name__}")
        if multiprocessing_context is not None:
            if num_workers == 0:
                raise ValueError("multiprocessing_context can only be used with multi-process loading "
                                 f"(num_workers > 0), but got num_workers={num_workers}")
            import multiprocessing as mp
            if isinstance(multiprocessing_context, str):
                if multiprocessing_context not in mp.get_all_start_methods():
                    raise ValueError(f"multiprocessing_context option should specify a valid start method in "
                                     f"{mp.get_all_start_methods()!r}, but got "
                                     f"multiprocessing_context={multiprocessing_context!r}")
            elif not isinstance(multiprocessing_context, mp.context.BaseContext):
                raise TypeError(f"multiprocessing_context option should be a valid context object or a string "
                                f"specifying the start method, but got "
                                f"multiprocessing_context={multiprocessing_context!r}")
        self._iterable = isinstance(dataset, IterableDataset)
        if self._iterable:
            # torch: the stream's own order; sampler options make no sense for it
            if shuffle not in (None, False):
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified shuffle option, but got "
                                 f"shuffle={shuffle}")
            if sampler is not None:
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified sampler option, but got "
                                 f"sampler={sampler}")
            if batch_sampler is not None:
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified batch_sampler option, but "
                                 f"got batch_sampler={batch_sampler}")
        shuffle = bool(shuffle)
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
        if self._iterable:
            sampler = None  # the dataset's own iteration; batches are made from it
        else:
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
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.multiprocessing_context = multiprocessing_context
        self.prefetch_factor = prefetch_factor
        self.persistent_workers = bool(persistent_workers)
        self.pin_memory = pin_memory            # accepted; a no-op on the CPU (see the class docstring)
        self.pin_memory_device = pin_memory_device
        self.in_order = in_order                # accepted; batches always come in sampler order
        self._user_collate = collate_fn is not None
        self.collate_fn = collate_fn if collate_fn is not None else default_collate
        self._pool = None                       # the persistent workers, once started

    def _fetch_spec(self):
        """How a worker makes a batch (see ``_worker._worker_loop``)."""
        if self._iterable:
            return ("iter", self.collate_fn, self.batch_size, bool(self.drop_last))
        use_get_batch = not self._user_collate and hasattr(self.dataset, "get_batch")
        return ("map", self.collate_fn, use_get_batch, self.batch_sampler is not None)

    def _workers_for_epoch(self, seed):
        """The worker pool for an epoch whose workers are seeded ``seed + i``: the
        persistent one (reseeded) when there is one, else a new pool."""
        if self.persistent_workers and self._pool is not None and not self._pool.closed:
            self._pool.reseed(seed)
            return self._pool
        pool = _worker.WorkerPool(self, seed)
        if self.persistent_workers:
            self._pool = pool
        return pool

    def _shutdown_workers(self):
        """Stop the persistent workers (they restart at the next epoch)."""
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_pool"] = None
        state["_iterator"] = None
        return state

    def __iter__(self):
        it = _DataLoaderIter(self, self._resume)
        self._resume = None
        self._iterator = it  # the most recent iterator is the one state_dict() reports
        return it

    # ---- exact resume ------------------------------------------------------------------
    _STATE_KEYS = ("epoch_in_progress", "order", "num_yielded", "batch_size", "drop_last", "sampler",
                   "generator", "base_seed")
    _OPTIONAL_KEYS = ("base_seed",)   # states saved before it existed load without it
    _resume = None      # (order, num_yielded, base_seed) from load_state_dict, for the next iterator
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
        if self._iterable:
            return False
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
             "generator": dict | None,    # the state of generator=, None without one
             "base_seed": int | None}     # the epoch's worker base seed (see below)

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

        With workers (``num_workers > 0``) the same state resumes at the same batch, with
        any number of workers: the order is kept in the main process. ``base_seed`` is
        the epoch's base seed (drawn after its order); a resumed epoch seeds its workers
        with it again (worker ``i``: ``base_seed + i``), so augmentation drawn in workers
        restarts from the epoch's seeds, not from where each worker's stream was.

        An :class:`~numbagrad.data.IterableDataset` is a stream the loader cannot rewind:
        a state taken during one of its epochs raises ``TypeError``; between epochs it
        works (and resumes to a fresh epoch).
        """
        sampler_state = _state_of(self._index_sampler())
        gen_state = self.generator.get_state() if self.generator is not None else None
        order, pos, base_seed = None, 0, None
        if self._resume is not None:
            order, pos, base_seed = self._resume
        elif self._iterator is not None and self._iterator._in_progress():
            it = self._iterator
            if self._iterable:
                raise TypeError(
                    f"DataLoader.state_dict: cannot save the position inside an epoch of the IterableDataset "
                    f"{type(self.dataset).__name__}: a stream cannot be rewound to a position. Call state_dict() "
                    "between epochs, or save the stream's own position in the dataset")
            if it._order is None:
                what = (f"batch_sampler {type(self.batch_sampler).__name__}" if self.batch_sampler is not None
                        else f"sampler {type(self.sampler).__name__}")
                raise TypeError(
                    f"DataLoader.state_dict: cannot save the position inside an epoch of the custom {what}: the "
                    "loader does not know the epoch's order (numbagrad records it for the built-in samplers, and "
                    "for any sampler when batches are made with batch_size=). Call state_dict() between epochs, "
                    "or pass sampler= with batch_size= instead of batch_sampler=")
            order, pos, base_seed = it._order, it._pos, it._base_seed
        return {"epoch_in_progress": order is not None,
                "order": None if order is None else order.copy(),
                "num_yielded": int(pos),
                "batch_size": self.batch_size,
                "drop_last": bool(self.drop_last),
                "sampler": sampler_state,
                "generator": gen_state,
                "base_seed": None if order is None or base_seed is None else int(base_seed)}

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
        missing = [k for k in self._STATE_KEYS if k not in state_dict and k not in self._OPTIONAL_KEYS]
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
        base_seed = state_dict.get("base_seed")
        if base_seed is not None and (isinstance(base_seed, (bool, np.bool_))
                                      or not isinstance(base_seed, numbers.Integral)):
            raise TypeError(f"{name}: state_dict['base_seed'] must be an int or None, got "
                            f"{type(base_seed).__name__} {base_seed!r}")
        if in_progress:
            if self._iterable:
                raise TypeError(f"{name}: the state resumes an epoch in progress, but this loader's dataset "
                                f"{type(self.dataset).__name__} is an IterableDataset, which cannot be resumed "
                                "mid-epoch")
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
            resume = (order, pos, None if base_seed is None else int(base_seed))
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
        if self._iterable:
            n = len(self.dataset)   # TypeError when the stream has no length, as with torch
            if self.batch_size is None:
                return n
            return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
        if self.batch_sampler is None:
            return len(self.sampler)
        return len(self.batch_sampler)


def _state_of(sampler):
    return sampler.state_dict() if hasattr(sampler, "state_dict") else None


class _DataLoaderIter:
    """One epoch of a :class:`DataLoader`. For resumable loaders, the epoch's order is drawn
    at the first ``next()`` (as a generator-based ``__iter__`` would) and sliced into
    batches; ``_pos`` counts what was yielded. ``resume=(order, pos, base_seed)``
    continues a saved epoch. Custom batch samplers (and custom samplers with
    ``batch_size=None``) are iterated as they are; an IterableDataset is iterated (in
    the main process, or one replica per worker).

    Each epoch draws a base seed from the loader's generator (or the default one) right
    after its order, also without workers (as torch does), so that the random stream,
    and with it the next epochs' orders, do not depend on ``num_workers``. Worker ``i``
    is seeded ``base_seed + i``.

    With workers, the index batches are sent as tasks numbered by their batch number,
    round-robin over the workers with at most ``prefetch_factor`` outstanding per
    worker; results are kept in ``_buffer`` until their turn."""

    def __init__(self, loader, resume=None):
        self._loader = loader
        self._order = None      # the epoch's order once drawn (or resumed)
        self._pos = 0           # batches (samples when batch_size is None) yielded
        self._started = False
        self._done = False
        self._custom = None     # the iterator of a custom (batch) sampler
        self._stream = None     # the iteration of an IterableDataset (no workers)
        self._base_seed = None  # this epoch's worker base seed
        self._pool = None       # the workers serving this epoch
        self._failed = False    # its workers were shut down after an error
        if resume is not None:
            self._order, self._pos, self._base_seed = resume
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
        if L._iterable:
            pass
        elif L._resumable():
            self._order = _sampler_order(L._order_sampler())
        elif L.batch_sampler is None:
            self._custom = iter(L.sampler)
        else:
            bs = L.batch_sampler
            # duck-typed batch samplers may offer their batches as arrays (``batches()``)
            duck = hasattr(bs, "batches") and not isinstance(bs, BatchSampler)
            self._custom = iter(bs.batches()) if duck else iter(bs)
        gen = L.generator if L.generator is not None else _random.default_generator
        self._base_seed = gen.next_seed()

    def __next__(self):
        if self._done:
            raise StopIteration
        if not self._started:
            self._start()
        if self._loader.num_workers:
            return self._next_from_workers()
        L = self._loader
        ds = L.dataset
        if L._iterable:
            if self._stream is None:
                self._stream = iter(ds)
            out = _worker._fetch_iter(self._stream, L.collate_fn, L.batch_size, bool(L.drop_last))
            if out is _worker._END:
                self._finish()
                raise StopIteration
            self._pos += 1
            return out
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

    # ---- worker processes ----------------------------------------------------------------
    def _start_workers(self):
        L = self._loader
        if self._base_seed is None:  # a resumed state saved without one
            self._base_seed = (L.generator if L.generator is not None else _random.default_generator).next_seed()
        self._pool = L._workers_for_epoch(self._base_seed)
        self._epoch = self._pool.epoch
        self._buffer = {}        # task number -> batch (or _SKIP)
        self._task_worker = {}   # task number -> the worker it was sent to, until received
        self._next_task = self._pos if self._order is not None else 0   # the next task to send
        self._next_take = self._next_task                               # the next task to yield
        self._rr = 0             # the next worker in turn
        self._sent_all = False
        self._exhausted = [False] * L.num_workers   # IterableDataset replicas that ended

    def _task_of(self, k):
        """The message of task ``k`` (None once the epoch has no more)."""
        L = self._loader
        if L._iterable:
            return ("next", (self._epoch, k))
        if self._order is not None:
            order = self._order
            if L.batch_sampler is None:
                if k >= len(order):
                    return None
                return ("map", (self._epoch, k), int(order[k]))
            bs = L.batch_sampler
            if k >= bs._num_batches(len(order)):
                return None
            return ("map", (self._epoch, k), order[k * bs.batch_size:(k + 1) * bs.batch_size].tobytes())
        item = next(self._custom, _NO_ITEM)
        if item is _NO_ITEM:
            return None
        if L.batch_sampler is not None:
            item = np.asarray(item, dtype=np.int64).tobytes()
        return ("map", (self._epoch, k), item)

    def _dispatch(self):
        pool, n = self._pool, self._loader.num_workers
        while not self._sent_all:
            if all(self._exhausted):
                self._sent_all = True
                break
            w = self._rr
            while self._exhausted[w]:
                w = (w + 1) % n
            if pool.outstanding[w] >= pool.prefetch:
                break
            msg = self._task_of(self._next_task)
            if msg is None:
                self._sent_all = True
                break
            pool.put(w, msg)
            self._task_worker[self._next_task] = w
            self._next_task += 1
            self._rr = (w + 1) % n

    def _next_from_workers(self):
        if self._failed:
            raise RuntimeError("DataLoader: this iterator's workers were shut down after the error above; create a "
                               "new iterator (its state_dict() still holds the position, for a resume)")
        if self._pool is None:
            self._start_workers()
        pool = self._pool
        if pool.closed or pool.epoch != self._epoch:
            raise RuntimeError("DataLoader: this iterator's workers have been shut down or taken over by a newer "
                               "iter(loader) (persistent_workers=True); iterate the newest iterator")
        try:
            while True:
                self._dispatch()
                k = self._next_take
                if k in self._buffer:
                    out = self._buffer.pop(k)
                    self._next_take = k + 1
                    if out is _SKIP:
                        continue
                    self._pos += 1
                    return out
                if self._sent_all and k >= self._next_task:
                    self._finish()
                    raise StopIteration
                wid, (epoch, task), status, value = pool.recv(self._task_worker.get(k))
                if epoch != self._epoch:
                    continue  # a result of an abandoned earlier epoch of the persistent workers
                if status == "err":
                    _worker.raise_worker_error(wid, value)
                if status == "stop":
                    self._exhausted[wid] = True
                    value = _SKIP
                self._buffer[task] = value
                self._task_worker.pop(task, None)
        except StopIteration:
            raise
        except BaseException:
            self._failed = True
            self._shutdown(error=True)
            raise

    def _shutdown(self, error=False):
        pool, self._pool = self._pool, None
        if pool is None:
            return
        L = self._loader
        if error or not L.persistent_workers:
            pool.shutdown(_worker._ERROR_GRACE_S if error else _worker._JOIN_S)
            if L._pool is pool:
                L._pool = None

    def _finish(self):
        self._done = True
        self._order = None
        self._custom = None
        self._stream = None
        self._buffer = None
        self._shutdown()

    def __del__(self):
        try:
            if self._pool is not None and not self._loader.persistent_workers:
                self._pool.shutdown()
        except Exception:
            pass


_NO_ITEM = object()
_SKIP = object()
