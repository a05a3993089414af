"""DataLoader worker processes: the worker loop, the shared-memory transport of batches,
:class:`WorkerInfo` / :func:`get_worker_info`, and the pool the main process keeps.

The model is PyTorch's. The main process draws the epoch's order, slices it into index
batches and sends them round-robin through per-worker task pipes (:class:`_TaskChannel`), at most
``prefetch_factor`` outstanding per worker; each worker fetches and collates its batch
and sends it back; the main process puts the results back in order with a buffer keyed
by batch number (:class:`~numbagrad.data.dataloader._DataLoaderIter`).

Transport. A worker writes the arrays of a collated batch (the arrays of its Tensors and
NumPy arrays, wherever they sit in tuples, lists, dicts and namedtuples) into a ring of
``prefetch_factor`` POSIX shared-memory slots of its own, grown (a new segment) when a
batch does not fit; only a small descriptor goes through the worker's result pipe: the
structure with the arrays replaced by references, and per array its offset, shape and
dtype (strings, ints and other small leaves travel pickled in it). A slot is reused only
after the main process has received the result it held: the main process sends a worker
a new batch only while fewer than ``prefetch_factor`` of its results are outstanding, and
copies the arrays out as soon as a result arrives. The first time the main process maps
a segment it unlinks its name, so ``/dev/shm`` holds a name only between a worker's
creating it and the main process's first read; names start with the pool's prefix
(``ngdl_<main pid>_<token>_``) and the pool unlinks any left behind (a worker killed in
between) when it shuts down. Segments are opened with ``_posixshmem`` directly rather
than ``multiprocessing.shared_memory``, whose resource tracker (Python 3.11) would warn
about "leaked" segments the other process unlinked.

Errors. A worker's exception travels back as (type, formatted traceback) and is raised
in the main process as ``Caught <Type> in DataLoader worker process <i>.`` with the
original traceback. While waiting for a result the main process polls the result pipe
(a dead worker's pipe reads as closed) and checks the workers' exit codes every
``_POLL_S`` seconds, so a worker that dies gives a ``RuntimeError`` with its id, pid,
exit code and signal name, never a hang. Each worker reports "ready" once started; the
loader's ``timeout`` counts only after that, so the spawn's imports are not a timeout.
"""
import mmap
import os
import pickle
import queue
import random
import secrets
import select
import signal
import sys
import threading
import time
import traceback
import weakref
from multiprocessing import connection

import numpy as np

try:
    import _posixshmem
except ImportError:  # pragma: no cover - not POSIX: batches are pickled instead
    _posixshmem = None

from ..backend.config import numba_pool_started  # noqa: F401 (tests ask it)
from ..tensor import Tensor

__all__ = ["WorkerInfo", "get_worker_info"]

_POLL_S = 0.25            # how often a waiting main process checks that its workers live
_JOIN_S = 5.0             # bounded wait for workers to exit at shutdown, before terminate()
_ERROR_GRACE_S = 0.5      # the same after an error: a stuck worker is not waited for long
_QUEUE_POLL_S = 1.0       # how often an idle worker checks that its parent lives
_SHM_DIR = "/dev/shm"
_MIN_SLOT = 1 << 16
_ALIGN = 64


class WorkerInfo:
    """What :func:`get_worker_info` returns inside a worker: ``id`` (0 ..
    ``num_workers - 1``), ``num_workers``, ``seed`` (this worker's seed for the epoch:
    the epoch's base seed plus ``id``) and ``dataset`` (this worker's copy)."""

    __slots__ = ("id", "num_workers", "seed", "dataset")

    def __init__(self, id, num_workers, seed, dataset):
        self.id = id
        self.num_workers = num_workers
        self.seed = seed
        self.dataset = dataset

    def __repr__(self):
        return (f"WorkerInfo(id={self.id}, num_workers={self.num_workers}, seed={self.seed}, "
                f"dataset={type(self.dataset).__name__})")


_worker_info = None


def get_worker_info():
    """In a DataLoader worker process, its :class:`WorkerInfo`; None in the main process.

    An :class:`~numbagrad.data.IterableDataset` uses it in ``__iter__`` to shard its
    stream between the workers (each worker iterates its own copy), as with PyTorch."""
    return _worker_info


# ---- batch structure <-> arrays ----------------------------------------------------------
class _Ref:
    """Stands for the ``i``-th array of a batch in its pickled structure."""

    __slots__ = ("i", "tensor")

    def __init__(self, i, tensor):
        self.i = i
        self.tensor = tensor

    def __reduce__(self):
        return (_Ref, (self.i, self.tensor))


def _shareable(a):
    return type(a) is np.ndarray and not a.dtype.hasobject


def _map_leaves(obj, leaf):
    """``obj`` rebuilt with ``leaf(x)`` for each ``x`` that is not one of the containers
    default_collate makes (tuple, list, dict, namedtuple), which are walked."""
    t = type(obj)
    if t is tuple or t is list:
        return t(_map_leaves(x, leaf) for x in obj)
    if t is dict:
        return {k: _map_leaves(v, leaf) for k, v in obj.items()}
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return t(*(_map_leaves(x, leaf) for x in obj))
    return leaf(obj)


def _flatten(obj, arrays):
    """``obj`` with its Tensors' and arrays' data moved to ``arrays`` (replaced by
    :class:`_Ref`); containers default_collate makes are walked, other leaves kept."""
    def leaf(x):
        t = type(x)
        if t is Tensor and _shareable(x.array):
            arrays.append(x.array)
            return _Ref(len(arrays) - 1, True)
        if t is np.ndarray and _shareable(x):
            arrays.append(x)
            return _Ref(len(arrays) - 1, False)
        return x
    return _map_leaves(obj, leaf)


def _unflatten(obj, arrays):
    def leaf(x):
        if type(x) is not _Ref:
            return x
        a = arrays[x.i]
        return Tensor._from_array(a) if x.tensor else a
    return _map_leaves(obj, leaf)


def _layout(arrays):
    """Offsets (64-byte aligned) of ``arrays`` in one buffer, and its total size."""
    offs, total = [], 0
    for a in arrays:
        offs.append(total)
        total += -(-a.nbytes // _ALIGN) * _ALIGN
    return offs, total


def _shm_create(name, size):
    fd = _posixshmem.shm_open("/" + name, os.O_CREAT | os.O_EXCL | os.O_RDWR, mode=0o600)
    try:
        os.ftruncate(fd, size)
        return mmap.mmap(fd, size)
    finally:
        os.close(fd)


def _shm_attach(name, size):
    fd = _posixshmem.shm_open("/" + name, os.O_RDWR, mode=0o600)
    try:
        return mmap.mmap(fd, size)
    finally:
        os.close(fd)


def _shm_unlink(name):
    try:
        _posixshmem.shm_unlink("/" + name)
    except FileNotFoundError:
        pass


def shm_names(prefix):
    """Names in ``/dev/shm`` that start with ``prefix`` (empty where there is no such folder)."""
    try:
        return sorted(n for n in os.listdir(_SHM_DIR) if n.startswith(prefix))
    except OSError:
        return []


class _WriterSlots:
    """A worker's ring of shared-memory slots (worker side)."""

    def __init__(self, prefix, n):
        self.prefix = prefix
        self.n = n
        self.maps = [None] * n
        self.names = [None] * n
        self.count = 0
        self.gen = 0

    def write(self, arrays):
        offs, total = _layout(arrays)
        s = self.count % self.n
        self.count += 1
        m = self.maps[s]
        if m is None or len(m) < total:
            if m is not None:
                m.close()
            size = max(_MIN_SLOT, -(-(total + total // 4) // mmap.PAGESIZE) * mmap.PAGESIZE)
            name = f"{self.prefix}{s}_{self.gen}"
            self.gen += 1
            m = self.maps[s] = _shm_create(name, size)
            self.names[s] = name
        for a, off in zip(arrays, offs):
            dst = np.ndarray(a.shape, a.dtype, buffer=m, offset=off)
            dst[...] = a
            del dst
        return (s, self.names[s], len(m),
                [(off, a.shape, a.dtype.str if a.dtype.fields is None else a.dtype) for a, off in zip(arrays, offs)])

    def close(self):
        for m in self.maps:
            if m is not None:
                m.close()
        self.maps = [None] * self.n


class _ReaderSlots:
    """The main process's mappings of every worker's slots."""

    def __init__(self):
        self.maps = {}   # (worker, slot) -> (name, mmap)

    def read(self, wid, desc):
        s, name, size, specs = desc
        cur = self.maps.get((wid, s))
        if cur is None or cur[0] != name:
            if cur is not None:
                cur[1].close()
            m = _shm_attach(name, size)
            _shm_unlink(name)   # mapped on both sides now: the name is no longer needed
            cur = self.maps[(wid, s)] = (name, m)
        m = cur[1]
        return [np.ndarray(shape, dtype, buffer=m, offset=off).copy() for off, shape, dtype in specs]

    def close(self):
        for _, m in self.maps.values():
            try:
                m.close()
            except BufferError:  # pragma: no cover - every view was a copy
                pass
        self.maps.clear()


# ---- the worker process -------------------------------------------------------------------
def _seed_all(seed):
    from .. import random as _random
    _random.manual_seed(seed)
    random.seed(seed)
    np.random.seed(seed % (1 << 32))


def _pack_exception(wid, exc):
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return (type(exc), type(exc).__name__, text)


def _worker_loop(wid, num_workers, dataset, index_conn, result_conn, fetch, seed, worker_init_fn, shm_prefix,
                 nslots, parent_pid):
    """Run in worker ``wid``. ``fetch`` is ``("map", collate_fn, use_get_batch, batched)`` or
    ``("iter", collate_fn, batch_size, drop_last)``. Messages in: ``None`` (exit),
    ``("seed", seed)`` (a new epoch: reseed; an IterableDataset starts over),
    ``("map", task, indices)``, ``("next", task)``. Out: pickled
    ``(task, "ok", structure, descriptor)``, ``(task, "err", (type, name, traceback))`` or
    ``(task, "stop", None, None)`` (the IterableDataset replica is exhausted)."""
    global _worker_info
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the main process's to handle
    _worker_info = WorkerInfo(wid, num_workers, seed, dataset)
    _seed_all(seed)
    init_error = None
    if worker_init_fn is not None:
        try:
            worker_init_fn(wid)
        except Exception as exc:  # reported with the first batch asked for
            init_error = _pack_exception(wid, exc)
    slots = _WriterSlots(shm_prefix, nslots) if _posixshmem is not None else None
    kind, collate_fn, a, b = fetch
    stream, exhausted = None, False
    poller = select.poll()   # one poll object for the loop (Connection.poll builds a selector per call)
    poller.register(index_conn.fileno(), select.POLLIN)
    try:
        result_conn.send_bytes(_READY)   # started: the main process's timeout= counts from here
        while True:
            if not poller.poll(_QUEUE_POLL_S * 1000):
                if os.getppid() != parent_pid:   # orphaned: the main process is gone
                    return
                continue
            msg = pickle.loads(index_conn.recv_bytes())
            if msg is None:
                return
            if msg[0] == "seed":
                _worker_info.seed = msg[1]
                _seed_all(msg[1])
                stream, exhausted = None, False
                continue
            task = msg[1]
            try:
                if init_error is not None:
                    out = (task, "err", init_error, None)
                elif kind == "map":
                    batch = _fetch_map(dataset, msg[2], collate_fn, a, b)
                    out = _encode(task, batch, slots)
                else:
                    if stream is None and not exhausted:
                        stream = iter(dataset)
                    batch = _END if exhausted else _fetch_iter(stream, collate_fn, a, b)
                    if batch is _END:
                        exhausted, stream = True, None
                        out = (task, "stop", None, None)
                    else:
                        out = _encode(task, batch, slots)
                payload = pickle.dumps(out, protocol=pickle.HIGHEST_PROTOCOL)
            except Exception as exc:
                payload = _dump_error(task, wid, exc)
            result_conn.send_bytes(payload)
    except (BrokenPipeError, EOFError, OSError):
        return   # the main process went away
    finally:
        if slots is not None:
            slots.close()


_READY = pickle.dumps((None, "ready", None, None), protocol=pickle.HIGHEST_PROTOCOL)


def _dump_error(task, wid, exc):
    info = _pack_exception(wid, exc)
    try:
        return pickle.dumps((task, "err", info, None), protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:  # an exception type that cannot be pickled: its name and traceback
        return pickle.dumps((task, "err", (None,) + info[1:], None), protocol=pickle.HIGHEST_PROTOCOL)


def _fetch_map(dataset, idx, collate_fn, use_get_batch, batched):
    if not batched:
        return dataset[idx]
    if type(idx) is bytes:   # an int64 index batch travels as its bytes (cheaper to pickle)
        idx = np.frombuffer(idx, dtype=np.int64)
    if use_get_batch:
        return dataset.get_batch(idx)
    return collate_fn([dataset[int(i)] for i in idx])


def _fetch_iter(stream, collate_fn, batch_size, drop_last):
    """The next sample (``batch_size`` None) or collated batch of ``stream``; ``_END`` at its end."""
    if batch_size is None:
        return next(stream, _END)
    items = []
    for x in stream:
        items.append(x)
        if len(items) == batch_size:
            break
    if not items or (drop_last and len(items) < batch_size):
        return _END
    return collate_fn(items)


_END = object()


def _encode(task, batch, slots):
    if slots is None:
        return (task, "ok", batch, None)
    arrays = []
    struct = _flatten(batch, arrays)
    return (task, "ok", struct, slots.write(arrays) if arrays else None)


# ---- the main process's side ----------------------------------------------------------------
def _context(mp_context):
    """The multiprocessing context for ``multiprocessing_context=`` (None: spawn)."""
    import multiprocessing as mp
    if mp_context is None:
        mp_context = "spawn"
    if isinstance(mp_context, str):
        ctx = mp.get_context(mp_context)
    else:
        ctx = mp_context
    # "fork" is as good as the others: a forked worker follows numbagrad's one fork rule
    # (``config.fork_runs_serial``), running its kernels serially when the parent's numba pool
    # cannot be used in a child (GNU OpenMP), so it never dies in a parallel launch.
    return ctx


def _signal_name(code):
    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"signal {-code}"


def _torch_alias_installed():
    compat = sys.modules.get("numbagrad.compat")
    return getattr(compat, "_FINDER", None) is not None


def _install_alias_in_child():
    import numbagrad.compat
    numbagrad.compat.install_torch_alias()


class _AliasMarker:
    """In a spawned child's preparation data: unpickling it installs numbagrad's torch
    alias before the child re-imports the parent's main script (whose ``import torch``
    must find numbagrad there, as it did in the parent)."""

    def __reduce__(self):
        return (_install_alias_in_child, ())


_spawn_patch_lock = threading.Lock()


def _start_process(ctx, proc, alias):
    """``proc.start()`` with numba/BLAS held to one thread in the child (the workers
    share the cores with the main process, as torch sets one thread in its workers), and
    the torch alias carried into a spawned child when the parent has it."""
    from multiprocessing import spawn
    keys = {"NUMBA_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    with _spawn_patch_lock:
        saved = {k: os.environ.get(k) for k in keys}
        orig = spawn.get_preparation_data
        if alias:
            def prep(name):
                d = orig(name)
                d["numbagrad_torch_alias"] = _AliasMarker()
                return d
            spawn.get_preparation_data = prep
        os.environ.update(keys)
        try:
            proc.start()
        finally:
            spawn.get_preparation_data = orig
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v


class _TaskChannel:
    """The main process's end of a worker's task pipe. Messages are sent from the calling
    thread (no feeder thread: a round trip costs about a third of a ``multiprocessing.Queue``'s)
    while the few messages the pool keeps in flight (at most ``prefetch_factor``) fit
    in the pipe's buffer together, so a send cannot block on a busy worker. A larger
    message (an index batch of thousands) switches the channel for good to a feeder
    thread, which keeps the order and never blocks the main process."""

    def __init__(self, conn, prefetch):
        self.conn = conn
        self.limit = _PIPE_SAFE_BYTES // max(1, prefetch + 1)
        self.q = None
        self.thread = None

    def send(self, msg):
        data = pickle.dumps(msg, protocol=pickle.HIGHEST_PROTOCOL)
        if self.q is None and len(data) <= self.limit:
            self.conn.send_bytes(data)
            return
        if self.q is None:
            self.q = queue.SimpleQueue()
            self.thread = threading.Thread(target=self._feed, name="numbagrad-DataLoader-feeder", daemon=True)
            self.thread.start()
        self.q.put(data)

    def _feed(self):
        while True:
            data = self.q.get()
            if data is None:
                return
            try:
                self.conn.send_bytes(data)
            except OSError:   # the worker is gone; the main process finds out from its sentinel
                return

    def close(self):
        if self.thread is not None:
            self.q.put(None)
            self.thread.join(1.0)
        self.conn.close()


_PIPE_SAFE_BYTES = 1 << 15   # half of Linux's default 64 KiB pipe buffer


class _PoolState:
    """What a pool's finalizer needs (no reference back to the pool)."""

    def __init__(self):
        self.procs = []
        self.index_qs = []
        self.conns = []
        self.reader = _ReaderSlots()
        self.prefix = f"ngdl_{os.getpid()}_{secrets.token_hex(4)}_"
        self.closed = False

    def shutdown(self, grace=_JOIN_S):
        """Ask the workers to exit, wait up to ``grace`` seconds, terminate the rest, and
        unlink any shared memory left under the pool's prefix."""
        if self.closed:
            return
        self.closed = True
        self.procs = [p for p in self.procs if p.pid is not None]   # not those that failed to start
        for q, p in zip(self.index_qs, self.procs):
            if p.exitcode is None:
                try:
                    q.send(None)
                except Exception:  # a broken pipe: terminate below
                    pass
        deadline = time.monotonic() + grace
        for p in self.procs:
            p.join(max(0.0, deadline - time.monotonic()))
        for p in self.procs:
            if p.exitcode is None:
                p.terminate()
                p.join(1.0)
                if p.exitcode is None:  # pragma: no cover
                    p.kill()
                    p.join()
        for q in self.index_qs:
            q.close()
        for c in self.conns:
            c.close()
        self.reader.close()
        for name in shm_names(self.prefix):   # a worker killed between creating a slot and our reading it
            _shm_unlink(name)


class WorkerPool:
    """``num_workers`` worker processes of one loader, started with ``seed + i``."""

    def __init__(self, loader, seed):
        ctx = _context(loader.multiprocessing_context)
        n = loader.num_workers
        self.num_workers = n
        self.prefetch = loader.prefetch_factor
        self.timeout = loader.timeout
        self.state = st = _PoolState()
        self._finalizer = weakref.finalize(self, st.shutdown)
        self.outstanding = [0] * n
        self.ready = [False] * n     # started (imported, seeded, worker_init_fn run)
        self.epoch = 0
        alias = ctx.get_start_method() != "fork" and _torch_alias_installed()
        fetch = loader._fetch_spec()
        try:
            for i in range(n):
                task_r, task_w = ctx.Pipe(duplex=False)
                r, w = ctx.Pipe(duplex=False)
                p = ctx.Process(target=_worker_loop, name=f"numbagrad-DataLoader-worker-{i}", daemon=True,
                                args=(i, n, loader.dataset, task_r, w, fetch, seed + i, loader.worker_init_fn,
                                      f"{st.prefix}w{i}_", self.prefetch, os.getpid()))
                st.index_qs.append(_TaskChannel(task_w, self.prefetch))
                st.conns.append(r)
                st.procs.append(p)
                try:
                    _start_process(ctx, p, alias)
                except (pickle.PicklingError, AttributeError, TypeError) as exc:
                    if ctx.get_start_method() == "fork":
                        raise
                    raise type(exc)(
                        f"DataLoader: cannot start worker {i} with the {ctx.get_start_method()!r} start method: "
                        f"{exc}. The dataset, collate_fn and worker_init_fn are pickled to each worker, so they "
                        "must be picklable: define their classes and functions at module level, not as lambdas "
                        "or local functions") from exc
                w.close()
                task_r.close()
        except BaseException:
            self.shutdown()
            raise
        self._wid_of = {c: i for i, c in enumerate(st.conns)}
        self._pollers = []
        for c in st.conns:
            self._pollers.append(select.poll())
            self._pollers[-1].register(c.fileno(), select.POLLIN)

    @property
    def pids(self):
        return [p.pid for p in self.state.procs]

    @property
    def closed(self):
        return self.state.closed

    def reseed(self, seed):
        """A new epoch on persistent workers: worker ``i`` reseeds with ``seed + i``."""
        self.epoch += 1
        for i, q in enumerate(self.state.index_qs):
            self._send(i, ("seed", seed + i))

    def put(self, wid, msg):
        self._send(wid, msg)
        self.outstanding[wid] += 1

    def _send(self, wid, msg):
        try:
            self.state.index_qs[wid].send(msg)
        except OSError:   # the worker's end is closed: it died
            self._raise_dead(wid)

    def recv(self, wid=None):
        """The next result from worker ``wid`` (from any worker when None; a worker's
        results come in the order of its tasks): ``(wid, task, status, value)`` with the
        batch decoded (arrays copied out of shared memory). Raises RuntimeError if a
        worker died or (``timeout > 0``) no result came within ``timeout`` seconds."""
        st = self.state
        start = time.monotonic()
        while True:
            if wid is None:
                ready = connection.wait(st.conns, timeout=_POLL_S)
            else:
                c = st.conns[wid]
                ready = [c] if self._pollers[wid].poll(_POLL_S * 1000) else ()
            for c in ready:
                w = self._wid_of[c]
                try:
                    data = c.recv_bytes()
                except (EOFError, OSError):
                    self._raise_dead(w)
                task, status, value, desc = pickle.loads(data)
                if status == "ready":
                    self.ready[w] = True
                    start = time.monotonic()
                    break
                self.outstanding[w] -= 1
                if status == "ok" and desc is not None:
                    value = _unflatten(value, st.reader.read(w, desc))
                return w, task, status, value
            for i, p in enumerate(st.procs):
                if p.exitcode is not None:
                    self._raise_dead(i)
            waiting_ready = self.ready[wid] if wid is not None else all(self.ready)
            if self.timeout > 0 and waiting_ready and time.monotonic() - start > self.timeout:
                self.shutdown(_ERROR_GRACE_S)
                raise RuntimeError(f"DataLoader timed out after {self.timeout} seconds")

    def _raise_dead(self, wid):
        p = self.state.procs[wid]
        p.join(_POLL_S)
        code = p.exitcode
        how = (f"killed by {_signal_name(code)}, exit code {code}" if code is not None and code < 0
               else f"exit code {code}")
        self.shutdown(_ERROR_GRACE_S)
        raise RuntimeError(f"DataLoader worker {wid} (pid {p.pid}) exited unexpectedly ({how}); "
                           "see the worker's output above for the cause")

    def shutdown(self, grace=_JOIN_S):
        """Stop the workers (bounded: ``grace`` seconds, then ``terminate``)."""
        if self._finalizer.detach() is not None:
            self.state.shutdown(grace)


def raise_worker_error(wid, info):
    """Raise a worker's exception in the main process: the same type where it can be
    built from one message, else RuntimeError, with the worker's traceback."""
    exc_type, name, text = info
    text = text.replace("Traceback (most recent call last):", "Original Traceback (most recent call last):", 1)
    msg = f"Caught {name} in DataLoader worker process {wid}.\n{text}"
    exc = None
    if isinstance(exc_type, type) and issubclass(exc_type, Exception):
        try:
            exc = exc_type(msg)
        except Exception:
            exc = None
    if not isinstance(exc, BaseException):
        exc = RuntimeError(msg)
    raise exc
