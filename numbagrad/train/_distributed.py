"""The Trainer's data-parallel side: what :class:`~numbagrad.train.Trainer` does when a
process group is initialised (``numbagrad.distributed.init_process_group``), so that the
same ``fit`` runs on one process or many.

What a batch is
---------------
The batches of ``train_data`` are the *global* batches: with ``W`` ranks, rank ``r``
trains on the contiguous share ``[r n // W, (r + 1) n // W)`` of each batch of ``n``
samples, and the model (wrapped in :class:`~numbagrad.nn.parallel.DistributedDataParallel`)
averages the gradients. Each rank's loss is weighted by ``n_r W / n`` before backward,
so the averaged gradient is the gradient of the mean loss over the whole batch even
when the shares differ (a last short batch): a run on ``W`` ranks follows the run on
one process, to float rounding, for a loss that is a mean over the batch's samples
(every built-in loss's default reduction). A batch of fewer samples than ranks gives
the ranks left without a sample the batch's first sample with weight 0 (zero
gradients, not counted in the loss or the metrics; a ``BatchNorm`` in training mode
still sees it).

How a rank gets its share:

* a numbagrad :class:`~numbagrad.data.DataLoader` over a map-style dataset with
  ``batch_size=`` (the built-in ``BatchSampler``, any sampler): :class:`ShardedLoader`.
  Rank 0 draws the epoch's order exactly as the loader would (its sampler, then the
  workers' base seed from the same generator) and broadcasts it; each rank then loads
  only its share of each batch (with the loader's ``num_workers``, ``collate_fn``,
  ``timeout`` and worker options). Its ``state_dict`` is the loader's own, with the
  *global* order and position, so a checkpoint written by ``W`` ranks resumes on any
  number of ranks, or on one process with the plain loader.
* anything else (a list of batches, a Pipeline, a loader over an IterableDataset or
  with a custom batch sampler): :class:`SlicedBatches`. Every rank iterates the same
  batches and keeps its share of each (Tensors, arrays and equal-length lists sliced
  along dim 0, through tuples, lists and dicts), so every rank must see the same batches
  (a fixed order, or the same seed on every rank).
* a DataLoader whose sampler is already a ``DistributedSampler``, or ``Trainer(...,
  shard_data=False)``: nothing (each rank trains on what it is given; the gradients are
  still averaged, so equal per-rank batches are the user's to arrange).

What is reduced
---------------
The loss of each batch (so every rank logs, and every callback decides on, the global
batch loss), each metric's state at the epoch's end through the metrics' merge contract
(``_sum_states`` summed, ``_cat_states`` gathered and concatenated,
:mod:`numbagrad.metrics.stateful`), the recorded scalars' epoch sums and counts
(averaged over the ranks, so a value every rank records alike keeps its single-process
figures), and ``should_stop`` (MAX), all with numbagrad.distributed's buffer collectives.
After a merge (and after loading a checkpoint) rank 0 alone holds the metric states, the
other ranks start from zero, so the next merge counts them once; the loss sums and
records are the same on every rank.
"""
import zlib

import numpy as np

from ..tensor import Tensor

__all__ = ["group_info", "is_rank0", "shard_bounds", "slice_batch", "shardable", "already_sharded", "ShardedLoader",
           "SlicedBatches", "all_reduce_array", "any_rank", "merge_metrics", "merge_records", "sync_grads", "unwrap"]


def _dist():
    from .. import distributed
    return distributed


def group_info():
    """``(rank, world_size)`` of the default process group, or None when there is none
    (mpi4py is not imported for the answer)."""
    d = _dist()
    if not d.is_initialized():
        return None
    return d.get_rank(), d.get_world_size()


def is_rank0():
    """True on rank 0, and in a single process (no process group)."""
    info = group_info()
    return info is None or info[0] == 0


def shard_bounds(n, rank, world):
    """Rank ``rank``'s contiguous share ``[lo, hi)`` of ``n`` samples over ``world`` ranks
    (sizes differ by at most one)."""
    return rank * n // world, (rank + 1) * n // world


def all_reduce_array(a, op="sum"):
    """All-reduce a host NumPy array (a copy comes back): ``op`` is ``"sum"`` or ``"max"``."""
    d = _dist()
    t = Tensor._from_array(np.ascontiguousarray(a).copy())
    d.all_reduce(t, op=d.ReduceOp.SUM if op == "sum" else d.ReduceOp.MAX)
    return t.array


def any_rank(flag):
    """Whether ``flag`` is true on any rank (an all-reduce MAX)."""
    return bool(all_reduce_array(np.array([1.0 if flag else 0.0]), "max")[0])


def _check_same_names(who, names):
    """Raise on every rank unless every rank passes the same names (a CRC32 all-reduced
    with MAX and with MAX of its negation)."""
    crc = float(zlib.crc32("\0".join(names).encode()))
    lo_hi = all_reduce_array(np.array([crc, -crc]), "max")
    if lo_hi[0] != crc or -lo_hi[1] != crc:
        raise RuntimeError(f"Trainer ({who}): the ranks hold different names {names} on rank "
                           f"{group_info()[0]}; every rank must build the same metrics, callbacks and observers")


# ---- the data --------------------------------------------------------------------------------
def _slice(obj, n, lo, hi):
    if isinstance(obj, Tensor) or isinstance(obj, np.ndarray):
        return obj[lo:hi] if obj.ndim and obj.shape[0] == n else obj
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return type(obj)(*(_slice(o, n, lo, hi) for o in obj))
    if isinstance(obj, (list, tuple)):
        if isinstance(obj, list) and len(obj) == n and not any(
                isinstance(o, (Tensor, np.ndarray, list, tuple, dict)) for o in obj):
            return obj[lo:hi]              # a list of labels or strings
        return type(obj)(_slice(o, n, lo, hi) for o in obj)
    if isinstance(obj, dict):
        return {k: _slice(v, n, lo, hi) for k, v in obj.items()}
    return obj


def slice_batch(batch, n, rank, world):
    """``(share, n_local)``: rank ``rank``'s share of a batch of ``n`` samples (see the
    module docstring); an empty share is the first sample, with ``n_local`` 0."""
    lo, hi = shard_bounds(n, rank, world)
    if hi == lo:
        return _slice(batch, n, 0, 1), 0
    return _slice(batch, n, lo, hi), hi - lo


class _Shard:
    """The sizes of the batch a sharded view yielded last: ``n`` (global), ``n_local``."""

    def __init__(self):
        self.n = 0
        self.n_local = 0

    def weight(self, world):
        """The factor on this rank's mean loss that makes the averaged gradient the
        gradient of the global mean: ``n_local * world / n`` (1 for equal shares)."""
        if self.n_local * world == self.n:
            return 1.0
        return self.n_local * world / self.n


class SlicedBatches:
    """Every rank iterates ``data``'s batches and keeps its share of each (any batch
    structure; see the module docstring). ``state_dict``/``load_state_dict`` and
    ``len`` are the wrapped object's."""

    def __init__(self, data, rank, world, batch_size):
        self.data = data
        self.rank, self.world = rank, world
        self.current = _Shard()
        self._batch_size = batch_size

    def __len__(self):
        return len(self.data)

    def __iter__(self):
        cur = self.current
        for batch in self.data:
            n = self._batch_size(batch)
            share, cur.n_local = slice_batch(batch, n, self.rank, self.world)
            cur.n = n
            yield share

    def __getattr__(self, name):
        if name in ("state_dict", "load_state_dict"):
            return getattr(self.data, name)
        raise AttributeError(name)


class _PlanBatches:
    """The rank loader's batch sampler: the index arrays of the rank's shares of the
    epoch (duck-typed ``batches()``, which the DataLoader iterates as they are)."""

    def __init__(self):
        self.plan = []

    def batches(self):
        return list(self.plan)

    def __iter__(self):
        return (b.tolist() for b in self.plan)

    def __len__(self):
        return len(self.plan)


def shardable(loader):
    """Whether ``loader`` is a numbagrad DataLoader whose epochs are one order sliced into
    batches of ``batch_size`` (the built-in BatchSampler over a map-style dataset)."""
    from ..data import DataLoader
    return (isinstance(loader, DataLoader) and not loader._iterable and loader.batch_size is not None
            and loader._plain_batch_sampler() and loader._resumable())


def already_sharded(loader):
    """Whether ``loader`` draws from a ``DistributedSampler`` (the user sharded it)."""
    try:
        from ..data import DistributedSampler
    except ImportError:   # pragma: no cover - the class comes with numbagrad.distributed
        return False
    sampler = getattr(loader, "sampler", None)
    return isinstance(sampler, DistributedSampler)


class ShardedLoader:
    """Rank ``rank``'s view of a numbagrad :class:`~numbagrad.data.DataLoader` (see the
    module docstring): the global order drawn on rank 0 and broadcast, the rank's share of
    each batch loaded by a DataLoader of its own, and the loader's ``state_dict`` layout
    with the global position (so checkpoints do not depend on the number of ranks)."""

    def __init__(self, loader, rank, world):
        from .. import random as _random
        from ..data import DataLoader
        self.loader = loader
        self.rank, self.world = rank, world
        self.current = _Shard()
        self._plan = _PlanBatches()
        # a generator of its own: the rank loader's per-epoch draw of a worker base seed
        # must not move the default stream (rank 0's must stay the single process's)
        self._gen = _random.Generator()
        L = loader
        self._rank_loader = DataLoader(
            L.dataset, batch_sampler=self._plan, num_workers=L.num_workers,
            collate_fn=L.collate_fn if L._user_collate else None, timeout=L.timeout,
            worker_init_fn=L.worker_init_fn, multiprocessing_context=L.multiprocessing_context,
            generator=self._gen, prefetch_factor=L.prefetch_factor, persistent_workers=L.persistent_workers)
        self._order = None       # the epoch in progress: its global order
        self._pos = 0            # global batches yielded
        self._base_seed = None
        self._resume = None

    def __len__(self):
        return len(self.loader)

    def _draw(self):
        """The epoch's global order and worker base seed: drawn on rank 0 as the loader's
        own iterator draws them, then broadcast."""
        from ..data.sampler import _sampler_order
        from .. import random as _random
        d = _dist()
        L = self.loader
        head = np.zeros(2, np.int64)
        order = None
        if self.rank == 0:
            order = _sampler_order(L._order_sampler())
            gen = L.generator if L.generator is not None else _random.default_generator
            head[:] = (len(order), gen.next_seed())
        h = Tensor._from_array(head)
        d.broadcast(h, src=0)
        n, base_seed = int(h.array[0]), int(h.array[1])
        t = Tensor._from_array(order if order is not None else np.empty(n, np.int64))
        d.broadcast(t, src=0)
        return t.array, base_seed

    def __iter__(self):
        if self._resume is not None:
            order, pos, base_seed = self._resume
            self._resume = None
            if base_seed is None:
                base_seed = 0
        else:
            (order, base_seed), pos = self._draw(), 0
        self._order, self._pos, self._base_seed = order, pos, base_seed
        L, cur = self.loader, self.current
        B = L.batch_size
        sizes, plan = [], []
        for k in range(pos, L.batch_sampler._num_batches(len(order))):
            g = order[k * B:(k + 1) * B]
            lo, hi = shard_bounds(len(g), self.rank, self.world)
            plan.append(g[lo:hi] if hi > lo else g[:1])
            sizes.append((len(g), hi - lo))
        self._plan.plan = plan
        self._gen.manual_seed((base_seed * 1000003 + self.rank) % (1 << 63))
        it = iter(self._rank_loader)
        for n, m in sizes:
            batch = next(it)
            self._pos += 1
            cur.n, cur.n_local = n, m
            yield batch
        self._order = None
        self._pos = 0

    def state_dict(self):
        """The wrapped loader's :meth:`~numbagrad.data.DataLoader.state_dict`, with the
        global order and position of the epoch in progress."""
        s = self.loader.state_dict()
        if self._resume is not None:
            order, pos, base_seed = self._resume
        else:
            order, pos, base_seed = self._order, self._pos, self._base_seed
        s.update({"epoch_in_progress": order is not None, "order": None if order is None else order.copy(),
                  "num_yielded": int(pos) if order is not None else 0,
                  "base_seed": None if order is None or base_seed is None else int(base_seed)})
        return s

    def load_state_dict(self, state):
        """Check and restore a state (written with any number of ranks, or by the plain
        loader): the loader's own ``load_state_dict`` checks it and restores its sampler
        and generator; the position continues here."""
        L = self.loader
        L.load_state_dict(state)
        self._resume, L._resume = L._resume, None
        self._order = None


# ---- reductions ------------------------------------------------------------------------------
def _all_gather_1d(a):
    """The 1-D arrays ``a`` of every rank, concatenated in rank order (lengths gathered
    first; the arrays padded to the longest for the buffer all-gather)."""
    d = _dist()
    world = group_info()[1]
    n = Tensor._from_array(np.array([a.size], np.int64))
    sizes = [Tensor._from_array(np.zeros(1, np.int64)) for _ in range(world)]
    d.all_gather(sizes, n)
    sizes = [int(s.array[0]) for s in sizes]
    longest = max(sizes)
    if longest == 0:
        return a[:0].copy()
    mine = np.zeros(longest, a.dtype)
    mine[:a.size] = a
    parts = [Tensor._from_array(np.zeros(longest, a.dtype)) for _ in range(world)]
    d.all_gather(parts, Tensor._from_array(mine))
    return np.concatenate([p.array[:s] for p, s in zip(parts, sizes)])


def merge_metrics(metrics, keep_local=False):
    """Replace each metric's state by its state over every rank (the merge contract of
    :mod:`numbagrad.metrics.stateful`: ``_sum_states`` summed, ``_cat_states`` gathered
    and concatenated); with ``keep_local``, return the merged ``{name: state arrays}``
    and leave the metrics as they are. Integer and float sums travel in one buffer each."""
    names = sorted(metrics)
    _check_same_names("metrics", names)
    states = {k: metrics[k].state_arrays() for k in names}
    sums = {k: getattr(metrics[k], "_sum_states", ()) for k in names}
    merged = {k: {} for k in names}
    for kind, dtype in (("iu", np.int64), ("fb", np.float64)):
        keys = [(k, s) for k in names for s in sums[k] if np.asarray(states[k][s]).dtype.kind in kind]
        if not keys:
            continue
        flat = np.concatenate([np.asarray(states[k][s], dtype).reshape(-1) for k, s in keys])
        flat = all_reduce_array(flat, "sum")
        at = 0
        for k, s in keys:
            a = np.asarray(states[k][s])
            merged[k][s] = flat[at:at + a.size].reshape(a.shape).astype(a.dtype)
            at += a.size
    for k in names:
        for s in getattr(metrics[k], "_cat_states", ()):
            merged[k][s] = _all_gather_1d(np.ascontiguousarray(states[k][s]).reshape(-1))
        for s, a in states[k].items():      # a state outside both lists: rank 0's
            merged[k].setdefault(s, a)
    if keep_local:
        return merged
    for k in names:
        metrics[k].load_state_arrays(merged[k])
    return merged


def merge_records(records):
    """``{name: [sum, count]}`` averaged over the ranks (a new dict): a value every rank
    records alike (a learning rate) keeps its single-process sum and count, and a state
    loaded on every rank stays what it was, whatever the number of ranks."""
    names = sorted(records)
    _check_same_names("recorded names", names)
    if not names:
        return {}
    world = group_info()[1]
    flat = all_reduce_array(np.array([x for k in names for x in records[k]], np.float64), "sum") / world
    return {k: [float(flat[2 * i]), _count(flat[2 * i + 1])] for i, k in enumerate(names)}


def _count(c):
    """A merged count: an int where it is whole (ranks that recorded alike)."""
    c = float(c)
    return int(c) if c.is_integer() else c


def sync_grads(params, copy=False):
    """Average the gradients of ``params`` over the ranks (one all-reduce AVG per dtype, a
    parameter without a gradient counting zeros); in place, or with ``copy`` into new
    host arrays (returned as a list, None where a parameter has no gradient on any rank)."""
    d = _dist()
    has = all_reduce_array(np.array([0.0 if p.grad is None else 1.0 for p in params]), "max")
    out = [None] * len(params)
    by_dtype = {}
    for i, p in enumerate(params):
        if has[i]:
            by_dtype.setdefault(np.dtype(p.dtype), []).append(i)
    for dt in sorted(by_dtype, key=str):
        idx = by_dtype[dt]
        flat = np.concatenate([np.zeros(params[i].numel(), dt) if params[i].grad is None
                               else np.asarray(params[i].grad.detach().cpu().array).reshape(-1) for i in idx])
        t = Tensor._from_array(flat)
        d.all_reduce(t, op=d.ReduceOp.AVG)
        at = 0
        for i in idx:
            p = params[i]
            g = t.array[at:at + p.numel()].reshape(tuple(p.shape))
            at += p.numel()
            if copy:
                out[i] = np.array(g, copy=True)
            elif p.grad is None:
                p.grad = Tensor._from_array(g.copy()).to(p.device)
            elif p.grad.device.type == "cpu":
                p.grad.array[...] = g
            else:
                from ..backend import backend_of
                p.grad.array[...] = backend_of(p.grad.array).asarray(g)
    return out


def unwrap(model):
    """The module inside a ``DistributedDataParallel`` wrapper, else ``model``."""
    from ..nn.parallel import DistributedDataParallel
    return model.module if isinstance(model, DistributedDataParallel) else model
