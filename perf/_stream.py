"""STREAM-style bandwidth kernels: the memory bandwidth the suite compares against.

Plain ``prange`` loops over preallocated float32 arrays; the result is the best of
several runs (STREAM reports best times too), bytes counted as STREAM does: triad moves
3 arrays, copy 2 (write-allocate traffic not counted).
"""
import time

import numpy as np
from numba import njit, prange

import _perfkit as kit


@njit(parallel=True, cache=True)
def _triad(a, b, c, s):
    for i in prange(a.size):
        a[i] = b[i] + s * c[i]


@njit(parallel=True, cache=True)
def _copy(a, b):
    for i in prange(a.size):
        a[i] = b[i]


def _best(fn, args, repeats):
    fn(*args)  # compile / first touch
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - t)
    return min(times), times


def _measure(name, n, kernel, narrays, repeats):
    arrays = [np.full(n, 1.0 + i, dtype=kit.DTYPE) for i in range(3)]
    args = (arrays[0], arrays[1], arrays[2], kit.DTYPE(3.0)) if kernel is _triad else (arrays[0], arrays[1])
    best, times = _best(kernel, args, repeats)
    nbytes = narrays * n * np.dtype(kit.DTYPE).itemsize
    kit.BANDWIDTH[name] = dict(gbps=nbytes / best / 1e9, seconds=best, n=n, repeats=repeats,
                               median_gbps=nbytes / float(np.median(times)) / 1e9, bytes=nbytes)
    kit.record(name, "numbagrad", best, best, repeats)


def _triad_fresh_out(b, c, s):
    a = np.empty_like(b)  # what `x + y` does: a new output whose pages fault in on first write
    _triad(a, b, c, s)
    return a


def _measure_fresh_out(name, n, repeats):
    b = np.full(n, 2.0, dtype=kit.DTYPE)
    c = np.full(n, 3.0, dtype=kit.DTYPE)
    best, times = _best(_triad_fresh_out, (b, c, kit.DTYPE(3.0)), repeats)
    nbytes = 3 * n * np.dtype(kit.DTYPE).itemsize
    kit.BANDWIDTH[name] = dict(gbps=nbytes / best / 1e9, seconds=best, n=n, repeats=repeats,
                               median_gbps=nbytes / float(np.median(times)) / 1e9, bytes=nbytes)
    kit.record(name, "numbagrad", best, best, repeats)


def measure_bandwidth():
    """Fill ``kit.BANDWIDTH`` (once per session)."""
    if "stream_triad" in kit.BANDWIDTH:
        return kit.BANDWIDTH
    _measure("stream_triad", kit.EW_N, _triad, 3, kit.BW_REPEATS)
    _measure("stream_copy", kit.EW_N, _copy, 2, kit.BW_REPEATS)
    _measure_fresh_out("stream_triad_fresh_out", kit.EW_N, kit.BW_REPEATS)
    if kit.BW_LARGE_N:
        _measure("stream_triad_large", kit.BW_LARGE_N, _triad, 3, max(3, kit.BW_REPEATS // 2))
    return kit.BANDWIDTH
