"""Checkpoints written in the background, so a training loop does not wait for them.

``AsyncSaver.save(obj, path)`` checks ``obj`` (the same ``TypeError`` as
:func:`numbagrad.save`, at the call), copies its tensors and arrays (:func:`_format.snapshot`:
later optimizer steps cannot reach the copy), hands the copy to a saver thread and
returns a :class:`concurrent.futures.Future` at once. The saver writes each copy, in call
order, with :func:`numbagrad.save` (temporary file, fsync, rename: a crash at any moment
leaves the previous file intact); the future then holds ``None`` or the save's exception.
PyTorch's analogue is ``torch.distributed.checkpoint.async_save``, which also returns a
future and also writes from a thread by default.

A thread (the default) or a process (``process=True``). ``save`` builds the file's bytes
itself (``_h5write.py``): the walk over the state holds the GIL (~1 ms for the digits
job's run state), and the file's system calls (create, write, fsync, rename) run in one
call that releases it (``_atomic.commit_parts``), so a thread costs the loop about a
millisecond a save and nothing to start.
Where the file goes through h5py (compression, a tensor over 64 MiB, complex values,
long attributes), h5py holds the GIL through its calls, as long as a synchronous save
takes: use ``process=True`` then. The saver process is a fresh interpreter
(``subprocess``, ``python -c``, talking over a socket pair with
``multiprocessing.connection``), started when the ``AsyncSaver`` is made: not ``fork``
(unsafe once numba's thread pool has run) and not multiprocessing's ``spawn``, which
re-runs the caller's main script in the child (a script without an
``if __name__ == "__main__":`` guard would start training there). It imports numbagrad
and writes one small checkpoint to memory (numba's first dispatch loads there), about
1.2 s of CPU, so make the saver before the data and the model, and its start-up
overlaps theirs. The saver, thread or process, runs at nice +10 (a thread's own priority
on Linux): on a machine whose cores are all busy, the training wins them. Saves asked for
before it is up wait in the queue; the loop does not.

What the caller pays: the check and the copy (a memcpy of the state) plus a queue put;
with a process, the pickling and socket writes run on a feeder thread, mostly outside
the GIL. A save of a path that is still queued behind another save (not yet started)
replaces the queued one: the file goes straight to the newer state, and both futures
complete when it is written. So saving ``last.ckpt`` every epoch never queues more than
one copy. At most ``max_pending`` saves of different paths are queued or being written;
one more blocks until the oldest is written, so a slow disk bounds memory instead of
growing the queue.

``wait()`` returns when every save asked for is written (and raises the first failure
nobody has seen through its future); ``close()`` waits and stops the saver, and runs at
interpreter exit for every saver still open, so the last checkpoint of a script is
written before it exits. If the main process is killed, a saver process finishes the save
it is writing and exits (its pipe closes), a saver thread dies with it; queued saves are
lost, the file on disk stays the last complete one. If the saver process dies, every
pending and later save fails with a ``RuntimeError`` naming its exit code.

:func:`async_save` uses one shared saver, made on first use.
"""
import atexit
import concurrent.futures
import os
import pickle
import queue
import signal
import socket
import struct
import subprocess
import sys
import threading
import weakref
from multiprocessing.connection import Connection

from . import _format, _h5write
from ._atomic import commit_parts

__all__ = ["AsyncSaver", "async_save", "default_saver"]


def _send(conn, obj):
    """``obj`` pickled (protocol 5) with its arrays' memory sent as separate messages, not
    copied into the pickle: a count + pickle message, then one message per buffer."""
    bufs = []
    head = pickle.dumps(obj, protocol=5, buffer_callback=bufs.append)
    conn.send_bytes(struct.pack("<Q", len(bufs)) + head)
    for b in bufs:
        conn.send_bytes(b.raw())


def _recv(conn):
    data = conn.recv_bytes()
    (n,) = struct.unpack_from("<Q", data)
    bufs = [conn.recv_bytes() for _ in range(n)]
    return pickle.loads(memoryview(data)[8:], buffers=bufs)


_CHILD = "import sys; from numbagrad.io.async_save import _serve; _serve(int(sys.argv[1]))"


def _serve(fd):
    """The saver process, on the socket ``fd``: write each ``(path, snapshot,
    compression, checksum)`` it receives with ``numbagrad.save`` and answer ``(ok,
    exception)``; return at ``None`` or when the socket closes."""
    _lower_priority()
    _warm_up()
    conn = Connection(fd)
    while True:
        try:
            msg = _recv(conn)
        except (EOFError, OSError):
            return
        if msg is None:
            return
        ok, err = _write(msg)
        try:
            conn.send((ok, _portable(err) if err is not None else None))
        except (EOFError, OSError):
            return


def _write(msg):
    """Write one ``(path, snapshot, compression, checksum)``, the snapshot possibly already
    built into the file's bytes (a ``FastWriter``: only the commit is left); ``(True,
    None)`` or ``(False, the exception)``."""
    path, snap, compression, checksum = msg
    try:
        if isinstance(snap, _h5write.FastWriter):
            commit_parts(path, snap.parts)
        else:
            _format.save(snap, path, compression=compression, checksum=checksum)
        return True, None
    except Exception as e:  # noqa: BLE001 - handed back to the caller's future
        return False, e


def _lower_priority(thread=False):
    """Nice +10 for the saver, so on a full machine the training wins the cores: the
    process's, or the calling thread's own priority (Linux only, where each thread has
    one)."""
    try:
        if not thread:
            os.nice(10)
        elif sys.platform.startswith("linux"):
            tid = threading.get_native_id()
            os.setpriority(os.PRIO_PROCESS, tid, min(19, os.getpriority(os.PRIO_PROCESS, tid) + 10))
    except (AttributeError, OSError):  # no nice() on this platform, or not allowed
        pass


def _warm_up():
    """Write a small checkpoint to memory once: the writer's kernels load from numba's cache
    (in a fresh process, numba's first-dispatch machinery too: about 0.5 s of CPU). In
    the saver process this overlaps the caller's set-up instead of the first epochs, where
    it made the digits job's first save finish 0.5 s late and its final ``wait()`` block
    for it. A saver thread's is done in the caller's thread when the saver is made (about
    10 ms): done by the thread, it held numba's compiler lock while it waited for the GIL,
    and the caller's own first kernel loads queued behind it (the digits job lost 0.2 s)."""
    import io
    import numpy as np
    _format.save({"w": np.zeros(4, np.float32)}, io.BytesIO())


def _portable(e):
    """``e`` if it survives pickling, else a RuntimeError with its text."""
    import pickle
    try:
        pickle.loads(pickle.dumps(e))
        return e
    except Exception:  # noqa: BLE001
        return RuntimeError(f"{type(e).__name__}: {e}")


def _signal_name(code):
    if code is not None and code < 0:
        try:
            return f" ({signal.Signals(-code).name})"
        except ValueError:
            pass
    return ""


_LIVE = weakref.WeakSet()


@atexit.register
def _close_all():
    for s in list(_LIVE):
        s.close()


class AsyncSaver:
    """Write checkpoints in a background thread, or process (module docstring).

    ``max_pending``: saves queued or being written before ``save`` blocks (default 2).
    ``process``: write from a saver process instead of a thread (for checkpoints that go
    through h5py, which holds the GIL: compression, tensors over 64 MiB, complex values).
    Use as a context manager, or call :meth:`close`.
    """

    def __init__(self, max_pending=2, *, process=False):
        if isinstance(max_pending, bool) or not isinstance(max_pending, int) or max_pending < 1:
            raise ValueError(f"AsyncSaver: max_pending must be a positive int, got {max_pending!r}")
        self._proc = self._conn = None
        if process:
            mine, theirs = socket.socketpair()
            # the child finds numbagrad where this process did
            env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
            try:
                self._proc = subprocess.Popen([sys.executable, "-c", _CHILD, str(theirs.fileno())],
                                              pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, env=env)
            finally:
                theirs.close()
            self._conn = Connection(mine.detach())
        else:
            _warm_up()
        self._slots = threading.Semaphore(max_pending)
        self._jobs = queue.Queue()
        self._lock = threading.Lock()
        self._futures = []      # futures since the last wait()
        self._queued = {}       # path -> [futures, message] of the save of that path not sent yet
        self._broken = None     # the error every later save gets once the process died
        self._closed = False
        self._thread = threading.Thread(target=self._feed, name="numbagrad-saver", daemon=True)
        self._thread.start()
        _LIVE.add(self)

    @property
    def pid(self):
        """The saver process's pid (``process=True``), None for a saver thread."""
        return None if self._proc is None else self._proc.pid

    @property
    def native_id(self):
        """The saver thread's native id (a saver process's feeder thread's)."""
        return self._thread.native_id

    def save(self, obj, f, *, compression=None, checksum=True):
        """Queue a save of ``obj`` to the path ``f`` (see :func:`numbagrad.save` for what
        ``obj`` may hold and the arguments); returns a ``Future`` whose ``result()`` is
        None once the file is written, or raises the save's error. ``obj`` is copied
        before this returns: change it freely afterwards."""
        if self._closed:
            raise RuntimeError("AsyncSaver.save: the saver is closed")
        if not isinstance(f, (str, bytes, os.PathLike)):
            raise TypeError(f"AsyncSaver.save: f must be a path (the saver writes the file in the background), got "
                            f"{type(f).__name__}")
        if compression not in _format._COMPRESSIONS:
            raise ValueError(f"AsyncSaver.save: compression must be one of {_format._COMPRESSIONS}, "
                             f"got {compression!r}")
        path = os.path.abspath(os.fsdecode(f))
        folder = os.path.dirname(path)
        if not os.path.isdir(folder):
            raise FileNotFoundError(f"AsyncSaver.save: cannot write {path!r}: the folder {folder!r} does not exist")
        snap = _format.snapshot(obj)  # checks as save() does: a TypeError here, at the call
        if self._conn is None and compression is None:
            # a saver thread: the file's bytes are built here, from the copy (~1 ms for the
            # digits job's state, holding the GIL anyway), and the thread only commits them
            # in one call without the GIL. Built in the thread, the build took the GIL from
            # the training thread in slices and stalled its parallel kernels: an epoch of
            # the digits job went from 14 to 22 ms, against 15.5 ms this way.
            built = _format._built(snap, bool(checksum))
            if built is not None:
                snap = built
        fut = concurrent.futures.Future()
        if self._broken is not None:
            fut.set_exception(self._broken)
            return fut
        msg = (path, snap, compression, bool(checksum))
        with self._lock:
            self._futures.append(fut)
            job = self._queued.get(path)
            if job is not None:  # a save of this path not sent yet: this one replaces it
                job[1] = msg
                job[0].append(fut)
                return fut
        self._slots.acquire()
        with self._lock:
            job = self._queued.get(path)
            if job is not None:  # queued by another thread meanwhile
                self._slots.release()
                job[1] = msg
                job[0].append(fut)
                return fut
            job = self._queued[path] = [[fut], msg]
        self._jobs.put(job)
        return fut

    def _feed(self):
        if self._conn is None:
            _lower_priority(thread=True)
        while True:
            job = self._jobs.get()
            if job is None:
                return
            with self._lock:  # from here on, a new save of this path is a new job
                futs, msg = job
                del self._queued[msg[0]]
            try:
                if self._conn is None:
                    ok, err = _write(msg)
                elif self._broken is None:
                    try:
                        _send(self._conn, msg)
                        ok, err = self._conn.recv()
                    except (EOFError, OSError):
                        try:
                            code = self._proc.wait(5)
                        except subprocess.TimeoutExpired:
                            code = None
                        self._broken = RuntimeError(
                            f"AsyncSaver: the saver process (pid {self._proc.pid}) died"
                            + (f" with exit code {code}{_signal_name(code)}" if code is not None else "")
                            + f" while writing {msg[0]!r}; that file holds the previous checkpoint, if any")
                for fut in futs:
                    if self._broken is not None:
                        fut.set_exception(self._broken)
                    elif ok:
                        fut.set_result(None)
                    else:
                        fut.set_exception(err)
            finally:
                del msg, job
                self._slots.release()

    def wait(self):
        """Block until every save asked for so far is written; raise the first failure
        among the saves asked for since the previous ``wait()``."""
        with self._lock:
            futs, self._futures = self._futures, []
        concurrent.futures.wait(futs)
        for f in futs:
            e = f.exception()
            if e is not None:
                raise e

    def close(self):
        """Wait for the queued saves (errors are left in their futures), then stop the
        feeder thread and tell the saver process to exit (it does once its last save is
        written; this does not wait for its interpreter to shut down). Idempotent."""
        if self._closed:
            return
        self._closed = True
        _LIVE.discard(self)
        self._jobs.put(None)
        self._thread.join()
        if self._conn is None:
            return
        try:
            _send(self._conn, None)
        except (EOFError, OSError):
            pass
        self._conn.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        try:
            if exc[0] is None:
                self.wait()
        finally:
            self.close()
        return False


_DEFAULT = None
_DEFAULT_LOCK = threading.Lock()


def default_saver():
    """The shared :class:`AsyncSaver` of :func:`async_save`, started on first call (call it
    early, so the saver process starts while the data and model are being prepared)."""
    global _DEFAULT
    with _DEFAULT_LOCK:
        if _DEFAULT is None or _DEFAULT._closed:
            _DEFAULT = AsyncSaver()
        return _DEFAULT


def async_save(obj, f, *, compression=None, checksum=True):
    """:meth:`AsyncSaver.save` on the shared saver (:func:`default_saver`): returns a
    ``Future``; ``default_saver().wait()`` waits for every save."""
    return default_saver().save(obj, f, compression=compression, checksum=checksum)
