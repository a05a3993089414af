"""A composable, lazy data pipeline (Kaun's ``Dataset`` style), an alternative to
:class:`~numbagrad.data.DataLoader`.

Example
-------
>>> import numbagrad as ng
>>> from numbagrad.data import Pipeline
>>> x, y = ng.randn(100, 4), ng.arange(100)
>>> p = Pipeline.from_tensors(x, y).shuffle(0).batch(32)
>>> [tuple(xb.shape) for xb, yb in p]
[(32, 4), (32, 4), (32, 4), (4, 4)]

How it runs. Every stage is a description; nothing is read until a pass is iterated. A
*pass* is one walk over the pipeline from its source, built when it is first asked for.
Stages over an indexable source (``from_tensors``, ``from_array``, ``from_fn``, then
``map`` without workers, ``shuffle``, ``take``, finite ``repeat``) stay *indexed*: a pass
is an order of source indices, so ``shuffle`` permutes indices (no per-item Python work,
nothing buffered), and ``batch`` over ``from_tensors`` gathers each batch with one fancy
index per tensor. Other stages are generators chained over their parent's pass;
``shuffle`` after such a stage buffers the whole pass (documented in :meth:`Pipeline.shuffle`).
"""
import collections
import concurrent.futures
import multiprocessing
import numbers
import queue
import threading
import weakref

import numpy as np

from .. import random as _random
from ..tensor import Tensor
from .dataloader import default_collate

__all__ = ["Pipeline", "prepare"]


def _check_int(value, name, who, lo=0, allow_none=False):
    if value is None and allow_none:
        return None
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{who}: {name} must be an int{' or None' if allow_none else ''}, "
                        f"got {type(value).__name__} {value!r}")
    value = int(value)
    if value < lo:
        raise ValueError(f"{who}: {name} must be >= {lo}, got {value}")
    return value


def _check_callable(fn, name, who):
    if not callable(fn):
        raise TypeError(f"{who}: {name} must be callable, got {type(fn).__name__} {fn!r}")


def _close(it):
    close = getattr(it, "close", None)
    if close is not None:
        close()


class _Indexed:
    """An indexable stage: ``order()`` draws a new pass's order of source indices (int64),
    ``fetch(i)`` reads one item, ``gather(idx)`` (or None) reads a whole batch at once."""
    __slots__ = ("order", "fetch", "gather")

    def __init__(self, order, fetch, gather=None):
        self.order, self.fetch, self.gather = order, fetch, gather


class _Pass:
    """One pass of a pipeline: an iterator that records when it is exhausted, and whose
    ``close()`` stops whatever its stages hold (prefetch threads, pending worker jobs)."""

    def __init__(self, gen):
        self._gen = gen
        self.exhausted = False

    def __iter__(self):
        return self

    def __next__(self):
        if self.exhausted:
            raise StopIteration
        try:
            return next(self._gen)
        except StopIteration:
            self.exhausted = True
            raise
        except BaseException:
            self.close()
            raise

    def close(self):
        self.exhausted = True
        gen, self._gen = self._gen, iter(())
        _close(gen)


class Pipeline:
    """A lazy, composable data pipeline (Kaun's ``Dataset``; cf. ``tf.data``).

    Build one from a source, chain stages, iterate::

        p = Pipeline.from_tensors(x, y).shuffle(0).batch(64)
        for xb, yb in p: ...

    Sources: :meth:`from_tensors`, :meth:`from_array`, :meth:`from_fn`. Stages (each returns
    a new Pipeline; the receiver is unchanged and may be reused): :meth:`map`,
    :meth:`filter`, :meth:`shuffle`, :meth:`batch`, :meth:`map_batch`, :meth:`prefetch`,
    :meth:`repeat`, :meth:`take`. Consumers: :meth:`iter`, ``for``, :meth:`fold`,
    :meth:`to_list`; :meth:`reset` starts over, :meth:`close` also frees worker processes.

    Pass semantics. A pipeline is lazy and single-pass: :meth:`iter` returns the current
    pass's iterator (creating the pass on first use); once that pass is exhausted,
    ``.iter()``, :meth:`fold` and :meth:`to_list` yield nothing until :meth:`reset` (Kaun's
    strict semantics). To plug into code written for a ``DataLoader``, which re-iterates
    every epoch (``for epoch ...: for batch in loader``), ``iter(pipeline)`` / ``for x in
    pipeline`` on an *exhausted* pass starts a fresh pass automatically (a pass in progress
    is continued, not restarted). Each new pass draws a new order from its ``shuffle``
    stages, whose generator is seeded once, so epoch 2 differs from epoch 1 and the whole
    run is reproducible. ``len(pipeline)`` is the number of items per pass where it is
    known (through sources, ``map``, ``shuffle``, ``batch``, ``map_batch``, ``prefetch``,
    ``take`` and finite ``repeat``); after ``filter`` or an endless ``repeat`` it raises
    ``TypeError``, as ``len()`` of an iterable dataset does.

    Anything that takes a DataLoader and only iterates it (``for batch in loader``,
    ``len(loader)``) takes a Pipeline.
    """

    def __init__(self, open_fn, length, indexed=None, parents=(), name="Pipeline"):
        # open_fn() -> a fresh generator of this stage's items (one pass)
        self._open_fn = open_fn
        self._length = length          # int, or None when unknown
        self._indexed = indexed        # _Indexed, or None
        self._parents = parents        # upstream pipelines (for close())
        self._name = name
        self._pass = None
        self._pools = []               # worker pools owned by this stage

    # ---- internals --------------------------------------------------------------------
    def _open(self):
        """A fresh generator over one pass of this stage (independent of ``self._pass``)."""
        if self._indexed is not None and self._open_fn is None:
            ix = self._indexed
            order = ix.order()  # drawn now, in the thread that opens the pass (see prefetch)
            return (ix.fetch(int(i)) for i in order)
        return self._open_fn()

    def _derive(self, open_fn, length, indexed=None, name=""):
        return Pipeline(open_fn, length, indexed, (self,), f"{self._name}.{name}")

    # ---- sources ----------------------------------------------------------------------
    @staticmethod
    def from_tensors(*tensors):
        """Items are the rows of ``tensors`` (Tensors or arrays sharing their first
        dimension): ``(x[i], y[i], ...)`` tuples of Tensors, as a ``TensorDataset``'s; with a
        single tensor the items are its rows themselves. ``from_tensors((x, y))`` also
        works. ``batch`` gathers whole batches with one fancy index per tensor."""
        who = "Pipeline.from_tensors"
        if len(tensors) == 1 and isinstance(tensors[0], (tuple, list)):
            tensors = tuple(tensors[0])
        if not tensors:
            raise ValueError(f"{who}: at least one tensor is required")
        arrays = []
        for k, t in enumerate(tensors):
            a = t.array if isinstance(t, Tensor) else np.asarray(t)
            if a.ndim == 0:
                raise ValueError(f"{who}: tensor {k} is 0-d; every tensor needs a first (sample) dimension")
            arrays.append(a)
        n = arrays[0].shape[0]
        if any(a.shape[0] != n for a in arrays):
            raise ValueError(f"{who}: tensors must share their first dimension, got shapes "
                             f"{[tuple(a.shape) for a in arrays]}")
        single = len(arrays) == 1

        def fetch(i):
            if single:
                return Tensor._from_array(np.asarray(arrays[0][i]))
            return tuple(Tensor._from_array(np.asarray(a[i])) for a in arrays)

        def gather(idx):
            if single:
                return Tensor._from_array(arrays[0][idx])
            return tuple(Tensor._from_array(a[idx]) for a in arrays)

        ix = _Indexed(lambda: np.arange(n, dtype=np.int64), fetch, gather)
        return Pipeline(None, n, ix, name="from_tensors")

    @staticmethod
    def from_array(seq):
        """Items are ``seq[0], seq[1], ...`` of a sequence (list, tuple, NumPy array,
        Tensor); any other iterable is read into a list once. ``batch`` collates with
        :func:`~numbagrad.data.default_collate` (a NumPy array or Tensor source is gathered
        with one fancy index instead, giving the same Tensors)."""
        who = "Pipeline.from_array"
        if isinstance(seq, (str, bytes)) or not hasattr(seq, "__iter__") and not hasattr(seq, "__getitem__"):
            raise TypeError(f"{who}: seq must be a sequence (list, tuple, array, Tensor), got {type(seq).__name__}")
        if isinstance(seq, Tensor):
            if seq.ndim == 0:
                raise ValueError(f"{who}: seq is a 0-d Tensor; it needs a first dimension")
            arr = seq.array
            fetch = lambda i: Tensor._from_array(np.asarray(arr[i]))  # noqa: E731
            gather = lambda idx: Tensor._from_array(arr[idx])  # noqa: E731
            n = arr.shape[0]
        elif isinstance(seq, np.ndarray) and seq.ndim > 0 and seq.dtype.kind not in "OSUV":
            fetch = seq.__getitem__
            gather = lambda idx: Tensor._from_array(seq[idx])  # noqa: E731
            n = seq.shape[0]
        else:
            if not (hasattr(seq, "__len__") and hasattr(seq, "__getitem__")):
                seq = list(seq)
            fetch, gather, n = seq.__getitem__, None, len(seq)
        return Pipeline(None, n, _Indexed(lambda: np.arange(n, dtype=np.int64), fetch, gather), name="from_array")

    @staticmethod
    def from_fn(n, fn):
        """Items are ``fn(0), fn(1), ..., fn(n - 1)``, computed lazily when read."""
        who = "Pipeline.from_fn"
        n = _check_int(n, "n", who)
        _check_callable(fn, "fn", who)
        return Pipeline(None, n, _Indexed(lambda: np.arange(n, dtype=np.int64), fn), name="from_fn")

    # ---- stages -----------------------------------------------------------------------
    def map(self, fn, num_workers=0):
        """Apply ``fn`` to every item.

        ``num_workers=N > 0`` runs ``fn`` in a pool of ``N`` processes started with the
        *spawn* method (a fork would copy the parent's whole state into every worker),
        keeping the order of the items; at most ``2 * N`` items are in flight. ``fn`` and the
        items must be picklable, so ``fn`` must be a module-level function (not a lambda or
        closure) of an importable module, and a script that uses workers must guard its
        entry point with ``if __name__ == "__main__":`` (spawned children import it). Each
        item is one round trip to a worker, so workers pay off for costly ``fn`` (decoding,
        augmentation), not for cheap ones. The pool starts on the first pass (about 1-2 s per
        process), is reused by later passes and stops at :meth:`close` or when the pipeline
        is garbage collected.
        """
        who = "Pipeline.map"
        _check_callable(fn, "fn", who)
        num_workers = _check_int(num_workers, "num_workers", who)
        if num_workers == 0:
            if self._indexed is not None:
                ix = self._indexed
                fetch = ix.fetch
                return self._derive(None, self._length, _Indexed(ix.order, lambda i: fn(fetch(i))), "map")

            def open_map():
                it = self._open()
                try:
                    for item in it:
                        yield fn(item)
                finally:
                    _close(it)
            return self._derive(open_map, self._length, name="map")
        pool = _Pool(num_workers)

        def open_pool_map():
            it = self._open()
            ex = pool.executor()
            window = collections.deque()
            try:
                for item in it:
                    window.append(ex.submit(fn, item))
                    if len(window) >= 2 * num_workers:
                        yield window.popleft().result()
                while window:
                    yield window.popleft().result()
            finally:
                for f in window:
                    f.cancel()
                _close(it)
        out = self._derive(open_pool_map, self._length, name=f"map(num_workers={num_workers})")
        out._pools.append(pool)
        weakref.finalize(out, pool.shutdown)
        return out

    def filter(self, pred):
        """Keep the items for which ``pred(item)`` is true. The length becomes unknown."""
        _check_callable(pred, "pred", "Pipeline.filter")

        def open_filter():
            it = self._open()
            try:
                for item in it:
                    if pred(item):
                        yield item
            finally:
                _close(it)
        return self._derive(open_filter, None, name="filter")

    def shuffle(self, seed=None):
        """A new random order of the items each pass.

        ``seed``: an int (a private generator seeded once, here), a
        :class:`numbagrad.Generator` (drawn from, shared with the caller), or None
        (numbagrad's default generator, so ``numbagrad.manual_seed`` makes it reproducible).
        Each pass draws a fresh permutation, so passes differ but a run is reproducible.
        Over an indexed stage (a source, ``map`` without workers, ``take``, ``shuffle``)
        the indices are permuted and nothing is read ahead; after any other stage the whole
        pass is read into memory and then permuted.
        """
        who = "Pipeline.shuffle"
        if isinstance(seed, _random.Generator):
            gen = seed
        elif seed is None:
            gen = None
        else:
            gen = _random.Generator().manual_seed(_check_int(seed, "seed", who))

        def rng():
            return (gen if gen is not None else _random.default_generator).numpy_rng

        if self._indexed is not None:
            ix = self._indexed
            parent_order = ix.order

            def order():
                o = parent_order()
                return o[rng().permutation(len(o))]
            return self._derive(None, self._length, _Indexed(order, ix.fetch, ix.gather), "shuffle")

        def open_shuffle():
            it = self._open()
            try:
                items = list(it)
            finally:
                _close(it)
            for k in rng().permutation(len(items)):
                yield items[k]
        return self._derive(open_shuffle, self._length, name="shuffle")

    def _batches(self, n, drop_last, collate, gather_ok, name):
        who = f"Pipeline.{name}"
        n = _check_int(n, "n", who, lo=1)
        length = None
        if self._length is not None:
            length = self._length // n if drop_last else -(-self._length // n)
        ix = self._indexed
        if ix is not None:
            fetch, gather = ix.fetch, ix.gather if gather_ok else None

            def batches(order):
                stop = len(order) - len(order) % n if drop_last else len(order)
                for s in range(0, stop, n):
                    idx = order[s:s + n]
                    yield gather(idx) if gather is not None else collate([fetch(int(i)) for i in idx])

            def open_indexed_batch():
                return batches(ix.order())  # drawn now, in the thread that opens the pass
            return self._derive(open_indexed_batch, length, name=f"{name}({n})")

        def open_batch():
            it = self._open()
            try:
                buf = []
                for item in it:
                    buf.append(item)
                    if len(buf) == n:
                        yield collate(buf)
                        buf = []
                if buf and not drop_last:
                    yield collate(buf)
            finally:
                _close(it)
        return self._derive(open_batch, length, name=f"{name}({n})")

    def batch(self, n, drop_last=False):
        """Group ``n`` consecutive items into one batch (the last one smaller unless
        ``drop_last``), collated with :func:`~numbagrad.data.default_collate`; over
        ``from_tensors`` (and array/Tensor ``from_array``), optionally shuffled or taken,
        each batch is one fancy-index gather per tensor."""
        return self._batches(n, drop_last, default_collate, True, "batch")

    def map_batch(self, n, collate, drop_last=False):
        """Group ``n`` consecutive items and pass the list of them to ``collate``, whose
        result is the batch (``batch`` with a custom collate function)."""
        _check_callable(collate, "collate", "Pipeline.map_batch")
        return self._batches(n, drop_last, collate, False, "map_batch")

    def prefetch(self, k=2):
        """Read up to ``k`` items ahead in a background thread (a bounded queue). An
        exception raised upstream is re-raised here, in the consumer; :meth:`reset`,
        :meth:`close` or closing the pass's iterator stops the thread.

        The upstream stages run in that thread. The order of an indexed pass (a
        ``shuffle`` right over a source, ``map`` or ``take``) is drawn before the thread
        starts, in the consumer's thread, so ``shuffle()`` from numbagrad's default
        generator stays reproducible beside the training loop's own draws (dropout, ...).
        Random draws made later upstream (``map`` functions, a ``shuffle`` after ``filter``,
        the repetitions of ``repeat``) happen in the thread at times that vary: give those
        their own generator (``shuffle(seed)``, ``generator=``) for exact reproducibility."""
        k = _check_int(k, "k", "Pipeline.prefetch", lo=1)

        def open_prefetch():
            q = queue.Queue(maxsize=k)
            stop = threading.Event()
            up = self._open()

            def put(msg):
                while not stop.is_set():
                    try:
                        q.put(msg, timeout=0.02)
                        return True
                    except queue.Full:
                        pass
                return False

            def produce():
                try:
                    for item in up:
                        if not put((0, item)):
                            return
                    put((1, None))
                except BaseException as e:  # noqa: BLE001 -- handed to the consumer
                    put((2, e))
                finally:
                    _close(up)

            th = threading.Thread(target=produce, name="numbagrad-prefetch", daemon=True)
            th.start()
            try:
                while True:
                    kind, v = q.get()
                    if kind == 0:
                        yield v
                    elif kind == 1:
                        return
                    else:
                        raise v
            finally:
                stop.set()
                try:  # unblock a producer waiting on a full queue
                    while True:
                        q.get_nowait()
                except queue.Empty:
                    pass
                th.join()
        return self._derive(open_prefetch, self._length, name=f"prefetch({k})")

    def repeat(self, k=None):
        """The pass repeated ``k`` times (``None``: forever), each repetition a new pass of
        the upstream stages (so a ``shuffle`` before it draws a new order each time)."""
        k = _check_int(k, "k", "Pipeline.repeat", allow_none=True)
        length = None if k is None or self._length is None else k * self._length
        if self._indexed is not None and k is not None:
            ix = self._indexed

            def order():
                parts = [ix.order() for _ in range(k)]
                return np.concatenate(parts) if parts else np.zeros(0, np.int64)
            return self._derive(None, length, _Indexed(order, ix.fetch, ix.gather), f"repeat({k})")

        def open_repeat():
            r = 0
            while k is None or r < k:
                it = self._open()
                try:
                    yield from it
                finally:
                    _close(it)
                r += 1
        return self._derive(open_repeat, length, name=f"repeat({k})")

    def take(self, k):
        """The first ``k`` items of each pass."""
        k = _check_int(k, "k", "Pipeline.take")
        length = None if self._length is None else min(k, self._length)
        if self._indexed is not None:
            ix = self._indexed
            return self._derive(None, length, _Indexed(lambda: ix.order()[:k], ix.fetch, ix.gather), f"take({k})")

        def open_take():
            if k == 0:
                return
            it = self._open()
            try:
                for c, item in enumerate(it, 1):
                    yield item
                    if c >= k:
                        return
            finally:
                _close(it)
        return self._derive(open_take, length, name=f"take({k})")

    def shard(self, rank=None, world_size=None, drop_last=False):
        """This rank's share of every pass: items ``rank``, ``rank + world_size``, ...
        (``rank``/``world_size`` default to ``numbagrad.distributed``'s group).

        As :class:`~numbagrad.data.DistributedSampler`: unless ``drop_last``, the pass is
        first padded to a multiple of ``world_size`` by wrapping around to its start, so every
        rank gets ``ceil(n / world_size)`` items and all ranks run the same number of steps
        (which DDP needs); with ``drop_last`` the tail is dropped (``n // world_size`` each).
        The shards of a pass are disjoint when nothing was padded: put a ``shuffle`` with
        the same seed on every rank before ``shard``, then ``batch``. Over an indexed stage
        the order is sliced; after other stages each rank reads the whole pass and keeps
        its items (holding the first ``world_size`` items for the padding).
        """
        who = "Pipeline.shard"
        if rank is None or world_size is None:
            from .. import distributed as dist
            if not dist.is_initialized():
                raise ValueError(f"{who}: rank and world_size are needed when no process group is "
                                 "initialized (numbagrad.distributed.init_process_group)")
            rank = dist.get_rank() if rank is None else rank
            world_size = dist.get_world_size() if world_size is None else world_size
        ws = _check_int(world_size, "world_size", who, lo=1)
        rank = _check_int(rank, "rank", who)
        if rank >= ws:
            raise ValueError(f"{who}: rank={rank} is not in [0, world_size - 1 = {ws - 1}]")
        drop_last = bool(drop_last)

        def share(n):
            return n // ws if drop_last else -(-n // ws)
        length = None if self._length is None else share(self._length)
        if self._indexed is not None:
            ix = self._indexed

            def order():
                o = ix.order()
                total = share(len(o)) * ws
                if total > len(o):
                    o = np.concatenate([o, np.resize(o, total - len(o))])
                return o[rank:total:ws]
            return self._derive(None, length, _Indexed(order, ix.fetch, ix.gather), f"shard({rank}/{ws})")

        def open_shard():
            # position k of the pass goes to rank k % ws; the padded positions n .. total - 1
            # repeat the pass from its start (their items are among the first ws)
            it = self._open()
            head, held, n = [], None, 0
            try:
                for item in it:
                    if n < ws:
                        head.append(item)
                    if n % ws == rank:
                        if not drop_last:
                            yield item
                        else:   # a later item of ours proves the held one is not in the dropped tail
                            if held is not None:
                                yield held[1]
                            held = (n, item)
                    n += 1
            finally:
                _close(it)
            if drop_last:
                if held is not None and held[0] < n // ws * ws:
                    yield held[1]
            elif n:
                total = -(-n // ws) * ws
                for p in range(n + (rank - n) % ws, total, ws):
                    yield head[p % n]
        return self._derive(open_shard, length, name=f"shard({rank}/{ws})")

    # ---- consumers --------------------------------------------------------------------
    def iter(self):
        """The current pass's iterator (created on first use). Strictly single-pass: once
        exhausted it yields nothing until :meth:`reset`."""
        if self._pass is None:
            self._pass = _Pass(self._open())
        return self._pass

    def __iter__(self):
        # DataLoader compatibility: an exhausted pass is replaced by a fresh one.
        if self._pass is not None and self._pass.exhausted:
            self._pass = None
        return self.iter()

    def reset(self):
        """End the current pass (stopping its prefetch threads and pending worker jobs);
        the next :meth:`iter` starts a new pass, which draws new shuffle orders."""
        p, self._pass = self._pass, None
        if p is not None:
            p.close()
        return self

    def close(self):
        """:meth:`reset`, and stop the worker processes of every ``map(num_workers=...)``
        stage upstream. The pipeline stays usable (a later pass starts new workers)."""
        self.reset()
        seen, todo = set(), [self]
        while todo:
            p = todo.pop()
            if id(p) in seen:
                continue
            seen.add(id(p))
            for pool in p._pools:
                pool.shutdown()
            todo.extend(p._parents)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def fold(self, fn, init):
        """``fn(...fn(fn(init, item0), item1)..., itemN)`` over the rest of the current pass."""
        _check_callable(fn, "fn", "Pipeline.fold")
        acc = init
        for item in self.iter():
            acc = fn(acc, item)
        return acc

    def to_list(self):
        """The rest of the current pass, as a list."""
        return list(self.iter())

    def __len__(self):
        if self._length is None:
            raise TypeError(f"len() of this Pipeline is unknown: {self._name} contains a stage whose number "
                            "of items is not known in advance (filter, or repeat(None))")
        return self._length

    def __repr__(self):
        return f"Pipeline({self._name})"


class _Pool:
    """A lazily started spawn-context process pool, restartable after ``shutdown()``."""

    def __init__(self, workers):
        self.workers = workers
        self._ex = None
        self._lock = threading.Lock()

    def executor(self):
        with self._lock:
            if self._ex is None:
                self._ex = concurrent.futures.ProcessPoolExecutor(
                    max_workers=self.workers, mp_context=multiprocessing.get_context("spawn"))
            return self._ex

    def shutdown(self):
        with self._lock:
            ex, self._ex = self._ex, None
        if ex is not None:
            ex.shutdown(wait=True, cancel_futures=True)


def prepare(x, y, batch_size, shuffle=True, drop_last=True):
    """``Pipeline.from_tensors(x, y).shuffle(shuffle).batch(batch_size, drop_last)``: the
    usual training input in one call.

    ``shuffle``: an int seed, a :class:`numbagrad.Generator`, ``True`` (numbagrad's default
    generator, reproducible with ``numbagrad.manual_seed``) or ``False``/``None`` (keep the
    order). Batches are ``(x_batch, y_batch)`` Tensors gathered with one fancy index each.
    """
    p = Pipeline.from_tensors(x, y)
    if shuffle is True:
        p = p.shuffle(None)
    elif shuffle is not None and shuffle is not False:
        p = p.shuffle(shuffle)
    return p.batch(batch_size, drop_last=drop_last)
