"""Chunk checksums, reads and the built file's commit: HDF5's fletcher32 as numba kernels,
chunk reads without the GIL (``pread`` called from numba), and :func:`_commit`, a whole
crash-safe file write (open, write, fsync, close, rename, folder fsync) in one call
without the GIL (see ``_atomic.commit_parts``).

:func:`_read_jobs` reads a table of stored chunks (file offset, where each part lands, the
fletcher32 trailer) with libc's ``pread`` and checks each chunk's fletcher32 piece by
piece as it arrives, all in one ``nogil`` call. The Python loop it replaced (``os.preadv``
and the checksum kernel) took the GIL twice per piece; while the loading thread walked the file's
groups (h5py's calls hold the GIL), a reading thread waited out whole switch intervals
for it, so the reads could not overlap the walk. Here a thread takes the GIL once per
batch of chunks.

The job table (``int64``, one row per chunk, see ``_J_*``) holds raw data addresses: the
caller keeps those arrays alive until the call returns, and every length in it was
checked against the file's size and the chunk plan (``_Reader.read_chunks``) before it
got there. Verdicts (``status``): 0 good, 1 the file ends inside the chunk, 2 fletcher32
mismatch, 3 a read error.
"""
import ctypes
import os

import numpy as np
from numba import carray, types

from ..backend.dispatch import backend_for_device
from ..kernels._jit import nogil_jit

_ptr_of = backend_for_device("cpu").ptr_of   # the host backend's address-to-pointer intrinsic

_PREAD_SYM = "numbagrad_pread"
_LIBC = ("open", "write", "fsync", "close", "rename", "__errno_location")
"""libc functions the commit kernel calls (:func:`_commit`), bound as ``numbagrad_<name>``
(leading underscores dropped)."""


def _bind():
    import llvmlite.binding as ll
    libc = ctypes.CDLL(None, use_errno=True)
    ll.add_symbol(_PREAD_SYM, ctypes.cast(libc.pread, ctypes.c_void_p).value)
    ok = True
    for name in _LIBC:
        try:
            ll.add_symbol(f"numbagrad_{name.lstrip('_')}", ctypes.cast(getattr(libc, name), ctypes.c_void_p).value)
        except AttributeError:  # not glibc/musl: the commit is done in Python (_atomic.py)
            ok = False
    return ok


HAVE_COMMIT = _bind()
"""Whether :func:`_commit` can run here (libc has every function of ``_LIBC``)."""
# ssize_t pread(int fd, void *buf, size_t count, off_t offset)
_pread = types.ExternalFunction(_PREAD_SYM, types.intp(types.intc, types.voidptr, types.uintp, types.int64))
# int open(const char *path, int flags, mode_t mode); ssize_t write(int fd, const void *buf, size_t n);
# int fsync(int fd); int close(int fd); int rename(const char *old, const char *new); int *__errno_location(void)
_BYTES = types.CPointer(types.uint8)
_open = types.ExternalFunction("numbagrad_open", types.intc(_BYTES, types.intc, types.uint32))
_write = types.ExternalFunction("numbagrad_write", types.intp(types.intc, _BYTES, types.uintp))
_fsync = types.ExternalFunction("numbagrad_fsync", types.intc(types.intc))
_close = types.ExternalFunction("numbagrad_close", types.intc(types.intc))
_rename = types.ExternalFunction("numbagrad_rename", types.intc(_BYTES, _BYTES))
_errno_location = types.ExternalFunction("numbagrad_errno_location", types.CPointer(types.intc)())

# steps of _commit, as its status reports them
COMMIT_STEPS = {1: "create", 2: "write", 3: "fsync", 4: "close", 5: "rename"}


def commit_flags():
    """``_commit``'s ``flags``: the temporary file's and the folder's ``open`` flags, and
    ``EINTR``, from this platform's ``os``/``errno``."""
    import errno
    cloexec = getattr(os, "O_CLOEXEC", 0)
    return np.array([os.O_WRONLY | os.O_CREAT | os.O_TRUNC | cloexec, os.O_RDONLY | cloexec, errno.EINTR],
                    np.int64)


@nogil_jit
def _commit(names, table, flags, status):
    """Write a whole file crash-safely in one call without the GIL: create the temporary
    file (``names[0]``: the address of its NUL-terminated path), write the buffers of
    ``table`` (rows ``(address, length)``) in order, fsync, close, rename it to
    ``names[1]``, then fsync the folder ``names[2]``. ``status`` gets ``(step, errno)``:
    ``(0, 0)`` when done, else the step that failed (:data:`COMMIT_STEPS`) and its errno
    (``flags``: :func:`commit_flags`);
    a failed folder fsync is ignored (as ``_atomic._fsync_dir``). The caller keeps every
    buffer alive and removes the temporary file after a failure."""
    status[0] = 0
    status[1] = 0
    u8 = np.empty(0, np.uint8)
    fd = _open(_ptr_of(names[0], u8), flags[0], 0o644)
    if fd < 0:
        status[0] = 1
        status[1] = _errno_location()[0]
        return
    step = 0
    for r in range(table.shape[0]):
        addr = table[r, 0]
        left = table[r, 1]
        while left > 0 and step == 0:
            n = _write(fd, _ptr_of(addr, u8), left)
            if n < 0:
                if _errno_location()[0] != flags[2]:   # EINTR: again
                    step = 2
            else:
                addr += n
                left -= n
    if step == 0 and _fsync(fd) != 0:
        step = 3
    if step != 0:
        status[1] = _errno_location()[0]
        _close(fd)
        status[0] = step
        return
    if _close(fd) != 0:
        status[0] = 4
        status[1] = _errno_location()[0]
        return
    if _rename(_ptr_of(names[0], u8), _ptr_of(names[1], u8)) != 0:
        status[0] = 5
        status[1] = _errno_location()[0]
        return
    dfd = _open(_ptr_of(names[2], u8), flags[1], 0)
    if dfd >= 0:
        _fsync(dfd)
        _close(dfd)

# job table columns
_J_OFFSET, _J_HEAD, _J_HEAD_LEN, _J_TAIL, _J_TAIL_LEN, _J_TRAILER, _J_SPILL, _J_SPILL_LEN = range(8)
_J_COLS = 8


@nogil_jit
def _fletcher32_blocks(data, s1, s2):
    """Fold the 16-bit words of ``data`` (1-D uint8, an even number of bytes, starting at a
    360-word block boundary of the checksummed bytes; an odd last byte is left to
    :func:`_fletcher32_end`) into the running sums ``s1``, ``s2`` of HDF5's fletcher32."""
    m32 = 0xFFFFFFFF
    left = data.size // 2
    i = 0
    while left > 0:
        blen = min(left, 360)
        left -= blen
        a = 0
        b = 0
        for j in range(blen):
            w = (np.int64(data[i + 2 * j]) << 8) | np.int64(data[i + 2 * j + 1])
            a += w
            b += (blen - j) * w
        i += 2 * blen
        s2 = (s2 + blen * s1 + b) & m32
        s1 = (s1 + a) & m32
        s1 = (s1 & 0xFFFF) + (s1 >> 16)
        s2 = (s2 & 0xFFFF) + (s2 >> 16)
    return s1, s2


@nogil_jit
def _fletcher32_end(data, s1, s2):
    m32 = 0xFFFFFFFF
    n = data.size
    if n % 2:
        s1 = (s1 + (np.int64(data[n - 1]) << 8)) & m32
        s2 = (s2 + s1) & m32
        s1 = (s1 & 0xFFFF) + (s1 >> 16)
        s2 = (s2 & 0xFFFF) + (s2 >> 16)
    s1 = (s1 & 0xFFFF) + (s1 >> 16)
    s2 = (s2 & 0xFFFF) + (s2 >> 16)
    return ((s2 << 16) | s1) & m32


@nogil_jit
def _fletcher32_cpu(data):
    """HDF5's fletcher32 (``H5_checksum_fletcher32``, the ``fletcher32`` filter's sums) of
    ``data``, a 1-D uint8 array; returns the uint32 value the filter appends to a chunk
    (little-endian).

    Big-endian 16-bit words ``w``, in blocks of 360: ``s1 += w; s2 += s1`` in uint32, then
    one end-around-carry fold ``s = (s & 0xffff) + (s >> 16)`` of each sum per block; an
    odd last byte counts as ``byte << 8``; a final fold of both; ``(s2 << 16) | s1``. A
    block's sums are computed in closed form, ``s1 += sum(w)`` and
    ``s2 += len * s1 + sum((len - j) * w_j)``, exact in int64 and wrapped to uint32 like
    the C code's, so the loop vectorises (~15 GB/s on one core here; HDF5's filter ran at
    ~3 GB/s and copied each chunk into a new buffer). tests/io/test_fletcher32.py holds it
    to HDF5's own checksums."""
    s1, s2 = _fletcher32_blocks(data, 0, 0)
    return _fletcher32_end(data, s1, s2)


@nogil_jit
def _fletcher32_2(head, tail):
    """:func:`_fletcher32_cpu` of ``head`` followed by ``tail`` (two 1-D uint8 arrays,
    ``head.size`` a multiple of 720 bytes: whole 360-word blocks, so the block folds fall
    where HDF5's do), without joining them: an edge chunk read partly into the result and
    partly into scratch memory."""
    s1, s2 = _fletcher32_blocks(head, 0, 0)
    s1, s2 = _fletcher32_blocks(tail, s1, s2)
    return _fletcher32_end(tail, s1, s2)


_BLOCK = 720
"""Bytes in one fletcher32 block (360 16-bit words)."""


STATUS_TEXT = {1: "the file ends inside it", 2: "fletcher32 checksum mismatch", 3: "a read error"}


@nogil_jit(error_model="python")
def _read_all(fd, buf, offset):
    """Read all of ``buf`` (1-D uint8) at ``offset``: 0, 1 (end of file first) or 3 (error)."""
    done = 0
    n = buf.size
    while done < n:
        got = _pread(np.intc(fd), buf[done:].ctypes, n - done, offset + done)
        if got < 0:
            return 3
        if got == 0:
            return 1
        done += got
    return 0


@nogil_jit(error_model="python")
def _read_jobs(fd, jobs, status, lo, hi, piece):
    """Read and check the chunks ``jobs[lo:hi]`` (module docstring) in pieces of ``piece``
    bytes (a multiple of 720: whole fletcher32 blocks, each piece summed while it is still
    in the cache); verdicts into ``status[lo:hi]``."""
    like = np.empty(0, np.uint8)
    for j in range(lo, hi):
        off = jobs[j, _J_OFFSET]
        hlen = jobs[j, _J_HEAD_LEN]
        tlen = jobs[j, _J_TAIL_LEN]
        checked = jobs[j, _J_TRAILER] != 0
        head = carray(_ptr_of(jobs[j, _J_HEAD], like), (hlen,))
        s1 = np.int64(0)
        s2 = np.int64(0)
        verdict = 0
        last = head[:0]
        for start in range(0, hlen, piece):
            p = head[start:min(hlen, start + piece)]
            verdict = _read_all(fd, p, off + start)
            if verdict:
                break
            if checked:
                s1, s2 = _fletcher32_blocks(p, s1, s2)
            last = p
        if verdict == 0 and tlen > 0:
            tail = carray(_ptr_of(jobs[j, _J_TAIL], like), (tlen,))
            verdict = _read_all(fd, tail, off + hlen)
            if verdict == 0 and checked:
                s1, s2 = _fletcher32_blocks(tail, s1, s2)
            last = tail
        if verdict == 0 and checked:
            trailer = carray(_ptr_of(jobs[j, _J_TRAILER], like), (4,))
            verdict = _read_all(fd, trailer, off + hlen + tlen)
            if verdict == 0:
                want = (np.int64(trailer[0]) | (np.int64(trailer[1]) << 8) | (np.int64(trailer[2]) << 16)
                        | (np.int64(trailer[3]) << 24))
                if _fletcher32_end(last, s1, s2) != want:
                    verdict = 2
        if verdict == 0 and jobs[j, _J_SPILL_LEN] > 0:
            n = jobs[j, _J_SPILL_LEN]
            dst = carray(_ptr_of(jobs[j, _J_SPILL], like), (n,))
            src = carray(_ptr_of(jobs[j, _J_TAIL], like), (n,))
            dst[:] = src
        status[j] = verdict
