"""Checkpoints saved without the training loop waiting for the disk.

``AsyncSaver.save(obj, path)`` checks ``obj`` (the same ``TypeError`` as
:func:`numbagrad.save`, at the call) and returns a :class:`concurrent.futures.Future`.
The future then holds ``None``, or the save's exception. PyTorch's analogue is
``torch.distributed.checkpoint.async_save``, which also returns a future.

By default (``AsyncSaver()``):

* ``save`` builds the file's bytes in the call (``_h5write.py``; about 1 ms for the digits
  job's whole run state, less where parts of it were saved before: ``_format``'s kept
  subtrees) and hands them to a small commit process in one ``sendmsg`` (a copy into a
  socket: what the file holds is the state at the call, and no copy is kept here).
* The commit process (``_committer.py``: not numbagrad, started in ~20 ms with the saver,
  at nice +10) writes them crash-safely: a temporary file next to ``path``, fsync,
  rename over ``path``, fsync of the folder. A crash at any moment leaves the previous
  file intact.
* No thread of the training process runs: the commit process's answers are read when
  a future, :meth:`AsyncSaver.wait`, :meth:`AsyncSaver.close` or the next ``save`` asks.
  Why: with a saver *thread* doing only the fsync and rename, the digits job's epoch
  (~14 ms) took 5-6 ms longer (a waking thread takes the GIL and a core from the
  training thread at moments it does not choose). A saver process that imported
  numbagrad and built the file itself cost the epoch less, but the whole job ~5% more
  (its start-up CPU, beside the job: see ``_committer.py``).
* Files h5py must write (compression, tensors over 64 MiB, complex values, long
  attributes) are copied (:func:`_format.snapshot`) and written by a saver thread, as
  :func:`numbagrad.save` writes them (h5py holds the GIL through its calls: use
  ``process=True`` for many of those).

``AsyncSaver(process=True)`` copies the state and writes it in a saver process instead:
a fresh interpreter (``subprocess``, ``python -c``, talking over a socket pair with
``multiprocessing.connection``), started when the ``AsyncSaver`` is made: not ``fork``
(unsafe once numba's thread pool has run) and not multiprocessing's ``spawn``, which
re-runs the caller's main script in the child (a script without an
``if __name__ == "__main__":`` guard would start training there). It imports numbagrad
and writes one small checkpoint to memory (numba's first dispatch loads there), about
1.2 s of CPU, so make the saver before the data and the model, and its start-up
overlaps theirs. It runs at nice +10.

Saves of one path close together are coalesced: the commit process writes only the
newest file of those waiting together (the futures of the older complete with it); a
save queued for the saver thread or process and not started yet is replaced by a newer
save of its path. So saving ``last.ckpt`` every epoch never piles up copies.
At most ``max_pending`` saves are in flight (handed over or queued, not yet written); one
more waits for the oldest, so a slow disk bounds memory instead of growing a queue.

``wait()`` returns when every save asked for is written (and raises the first failure
nobody has seen through its future); ``close()`` waits and stops the saver, and runs at
interpreter exit for every saver still open, so the last checkpoint of a script is
written before it exits. If the training process is killed, the commit process commits
every file it was handed (complete in its socket) and exits; a saver process
finishes the save it is writing; a saver thread dies with it. If the commit or saver
process dies, every pending and later save fails with a ``RuntimeError`` naming its exit
code.

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

from . import _committer, _format, _h5write
from ._atomic import _sweep, commit_parts

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
    """Save checkpoints without waiting for the disk (module docstring).

    ``max_pending``: saves in flight before ``save`` waits for the oldest (default 2).
    ``process``: copy the state and write it from a saver process (for checkpoints that
    go through h5py, which holds the GIL: compression, tensors over 64 MiB, complex values).
    Use as a context manager, or call :meth:`close`.
    """

    def __init__(self, max_pending=2, *, process=False):
        if isinstance(max_pending, bool) or not isinstance(max_pending, int) or max_pending < 1:
            raise ValueError(f"AsyncSaver: max_pending must be a positive int, got {max_pending!r}")
        self._proc = self._conn = self._committer = None
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
            self._committer = _committer.Committer()
        self._max_pending = max_pending
        self._slots = threading.Semaphore(max_pending)
        self._jobs = queue.Queue()
        self._lock = threading.Lock()
        self._poll_lock = threading.RLock()
        self._futures = []      # futures since the last wait()
        self._queued = {}       # path -> [futures, message] of the save of that path not sent yet
        self._commits = {}      # save id -> (future, path, temporary file): written, its commit asked for
        self._next_id = 0
        self._swept = set()     # targets whose stale temporary files were removed
        self._broken = None     # the error every later save gets once the process died
        self._closed = False
        self._thread = None     # the feeder (process=True), or the thread writing what h5py must write
        if process:
            self._start_thread()
        _LIVE.add(self)

    def _start_thread(self):
        self._thread = threading.Thread(target=self._feed, name="numbagrad-saver", daemon=True)
        self._thread.start()

    @property
    def pid(self):
        """The pid of the saver process (``process=True``) or of the commit process."""
        return self._proc.pid if self._proc is not None else self._committer.pid

    @property
    def native_id(self):
        """The native id of the saver's thread (a saver process's feeder; by default, the
        thread that writes the files h5py must write, None until there was one)."""
        return None if self._thread is None else self._thread.native_id

    def save(self, obj, f, *, compression=None, checksum=True):
        """Save ``obj`` to the path ``f`` (see :func:`numbagrad.save` for what ``obj`` may
        hold and the arguments); returns a ``Future`` whose ``result()`` is None once the
        file is in place, or raises the save's error. ``obj`` is written (or copied)
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
        if self._committer is not None and compression is None:
            built = _format._built(obj, bool(checksum))  # checks obj: a TypeError here, at the call
            if built is not None:
                return self._write_here(built, path)
        snap = _format.snapshot(obj)  # checks as save() does: a TypeError here, at the call
        if self._thread is None:
            self._start_thread()
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

    def _write_here(self, built, path):
        """Hand the built file over to the commit process (module docstring)."""
        fut = _Future(self)
        with self._poll_lock:
            # answers are read only when max_pending saves are in flight (each read is a
            # system call, ~50 us on a cold cache here): the futures read them when asked
            while self._commits and len(self._commits) >= self._max_pending and self._broken is None:
                self._poll(None)
            with self._lock:
                self._futures.append(fut)
            if self._broken is not None:
                fut.set_exception(self._broken)
                return fut
            if path not in self._swept:  # temporary files of killed writers of this target
                _sweep(os.path.dirname(path), path)
                self._swept.add(path)
            i = self._next_id
            self._next_id += 1
            self._commits[i] = (fut, path, None)
            try:
                self._committer.send(i, path, built.parts, built.pos)
            except OSError:
                self._died()
        return fut

    def _poll(self, timeout):
        """Complete the futures of the commits answered (waiting up to ``timeout`` seconds
        for one; None: until one is); with ``_poll_lock`` held."""
        try:
            answers = self._committer.answers(timeout)
        except EOFError:
            self._died()
            return
        for i, step, err in answers:
            fut, path, tmp = self._commits.pop(i)
            if step == 0:
                fut._complete(None)
            else:
                fut._complete(OSError(err, f"cannot write {path!r}: the {_committer.STEPS[step]} of its temporary "
                                           f"file failed ({os.strerror(err)})", path))

    def _died(self):
        code = self._committer.exit_code()
        self._broken = RuntimeError(
            f"AsyncSaver: the commit process (pid {self._committer.pid}) died"
            + (f" with exit code {code}{_signal_name(code)}" if code is not None else "")
            + "; the files it had not committed hold their previous checkpoints, if any")
        for fut, path, tmp in self._commits.values():
            fut._complete(self._broken)
        self._commits.clear()

    def _settle(self, fut, timeout):
        """Read answers until ``fut`` is complete, or ``timeout`` seconds passed."""
        import time
        end = None if timeout is None else time.monotonic() + timeout
        while not concurrent.futures.Future.done(fut):
            with self._poll_lock:
                if concurrent.futures.Future.done(fut):
                    return
                left = None if end is None else max(0.0, end - time.monotonic())
                self._poll(left)
            if end is not None and time.monotonic() >= end:
                return

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
        for f in futs:
            if isinstance(f, _Future):
                self._settle(f, None)
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
        if self._thread is not None:
            self._jobs.put(None)
            self._thread.join()
        if self._committer is not None:
            with self._poll_lock:
                while self._commits and self._broken is None:
                    self._poll(None)
            self._committer.close()
            self._committer.sock.close()
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


class _Future(concurrent.futures.Future):
    """The future of a save whose commit the commit process answers: the saver reads the
    answers when asked (at ``save``, ``wait``, ``close``, or this future's ``result``,
    ``exception`` or ``done``), so that no thread of the training process wakes for them."""

    def __init__(self, saver):
        super().__init__()
        self._saver = saver

    def _complete(self, error):
        if error is None:
            self.set_result(None)
        else:
            self.set_exception(error)

    def done(self):
        self._saver._settle(self, 0.0)
        return super().done()

    def result(self, timeout=None):
        self._saver._settle(self, timeout)
        return super().result(timeout=0)

    def exception(self, timeout=None):
        self._saver._settle(self, timeout)
        return super().exception(timeout=0)


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
