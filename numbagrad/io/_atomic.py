"""Crash-safe file replacement: write a temporary file in the target's folder, flush and
fsync it, ``os.replace`` it over the target, then fsync the folder. A process killed at
any moment leaves either the old file or the new one at ``path``, never a mix; the
temporary file of a killed writer is named ``.<name>.tmp-<pid>-<random>`` and is
removed by the next successful write of the same target."""
import contextlib
import glob
import os
import secrets


def _fsync_dir(folder):
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


def temp_path_for(path):
    path = os.fspath(path)
    folder, name = os.path.split(os.path.abspath(path))
    return os.path.join(folder, f".{name}.tmp-{os.getpid()}-{secrets.token_hex(4)}")


@contextlib.contextmanager
def atomic_path(path):
    """``with atomic_path(p) as tmp:`` write the whole file at ``tmp``; on a clean exit it
    is fsynced and atomically renamed to ``p``; on an exception it is removed and ``p``
    is untouched."""
    path = os.path.abspath(os.fspath(path))
    folder = os.path.dirname(path)
    if not os.path.isdir(folder):
        raise FileNotFoundError(f"cannot write {path!r}: the folder {folder!r} does not exist")
    tmp = temp_path_for(path)
    try:
        yield tmp
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise
    _fsync_dir(folder)
    _sweep(folder, path)   # temporary files left by writers of this target that were killed


def _alive(pid):
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # pragma: no cover - someone else's process
        return True
    return True


_FLAGS = [None]


def commit_parts(path, parts):
    """Write the buffers ``parts`` (bytes-like, in order) as the file ``path``, crash-safely
    as :func:`atomic_path` does (temporary file in the folder, fsync, rename, folder fsync),
    but in one call that does not hold the GIL (``_chunks._commit``): a save from a
    background thread takes the GIL back once, not at each of those ten system calls,
    each of which waited a switch interval (5 ms) for a busy training thread and took the
    GIL from it. Falls back to :func:`atomic_path` where libc lacks a function."""
    import numpy as np
    from . import _chunks
    if _FLAGS[0] is None:
        _FLAGS[0] = _chunks.commit_flags()
    path = os.path.abspath(os.fspath(path))
    folder = os.path.dirname(path)
    if not _chunks.HAVE_COMMIT:
        with atomic_path(path) as tmp:
            with open(tmp, "wb") as fh:
                for p in parts:
                    fh.write(p)
        return
    if not os.path.isdir(folder):
        raise FileNotFoundError(f"cannot write {path!r}: the folder {folder!r} does not exist")
    tmp = temp_path_for(path)
    names = [np.frombuffer(os.fsencode(s) + b"\x00", np.uint8) for s in (tmp, path, folder)]
    bufs = [np.frombuffer(p, np.uint8) for p in parts]
    table = np.array([(b.ctypes.data, b.nbytes) for b in bufs], np.int64).reshape(-1, 2)
    status = np.zeros(2, np.int64)
    _chunks._commit(np.array([n.ctypes.data for n in names], np.int64), table, _FLAGS[0], status)
    step, err = int(status[0]), int(status[1])
    if step:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise OSError(err, f"cannot write {path!r}: {_chunks.COMMIT_STEPS[step]} of the temporary file failed "
                           f"({os.strerror(err)})", tmp)
    _sweep(folder, path)   # temporary files left by writers of this target that were killed


def _sweep(folder, path):
    """Remove the temporary files left by killed writers of ``path``."""
    for stale in glob.glob(os.path.join(glob.escape(folder), f".{glob.escape(os.path.basename(path))}.tmp-*")):
        pid = stale.rsplit(".tmp-", 1)[1].split("-", 1)[0]
        if pid.isdigit() and not _alive(int(pid)):
            with contextlib.suppress(OSError):
                os.remove(stale)


def atomic_write_bytes(path, data):
    """Write ``data`` (bytes-like) to ``path`` crash-safely."""
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
