"""Counting kernels of ``numbagrad.metrics``: the confusion matrix and top-k hits.

Contract (the CUDA twins in ``kernels/cuda/metrics.py`` take the same arguments)
--------------------------------------------------------------------------------
* ``_confusion_count_cpu(target, pred, out)``: ``target`` and ``pred`` are 1-D C-contiguous
  ``int64`` arrays of one length ``N`` whose values all lie in ``[0, C)``, ``out`` a
  C-contiguous ``(C, C)`` ``int64`` array. Adds one to ``out[target[i], pred[i]]`` for
  every ``i`` (rows: true class, columns: predicted class, scikit-learn's layout). The
  counts are *added* to what ``out`` holds, so a stateful metric accumulates batches into
  its own matrix. Nothing is returned.
* ``_topk_correct_cpu(scores, target, k, out)``: ``scores`` a C-contiguous ``(N, C)`` float
  array, ``target`` a 1-D ``int64`` array of length ``N`` with values in ``[0, C)``,
  ``1 <= k <= C``; adds to ``out[0]`` (a 1-element ``int64`` array) the number of rows
  whose target class is among the ``k`` highest scores. The rank of the target class is
  the number of classes scoring strictly higher, plus those scoring the same with a lower
  index (a stable descending sort; for ``k = 1`` this is ``argmax(row) == target`` with
  NumPy's first-maximum rule). A row whose target score is NaN counts as a miss; other NaN
  scores are never "higher".
* ``_row_argmax_cpu(scores, out)``: ``scores`` a C-contiguous ``(N, C)`` float array with
  ``C >= 1``, ``out`` a 1-D ``int64`` array of length ``N``; writes the index of each row's
  first maximum into ``out``, NaN counting as the maximum (``np.argmax(scores, axis=1)``
  exactly). The predicted class of scores, before the confusion count.

The callers (``numbagrad/metrics/functional.py``) check every label against ``[0, C)``
before a kernel runs: numba does not bounds-check, and a bad label here would write
outside ``out``.

Design
------
* Confusion counts: a histogram, so a store-to-load dependency whenever two neighbouring
  samples fall into the same cell. From ``config.PARALLEL_THRESHOLD`` samples the parallel
  twin cuts ``[0, N)`` into ``nchunk`` equal chunks (one ``prange`` task each, ``nchunk``
  from ``N`` and the thread count) that count into their own ``(C, C)`` slice of a partial
  array; the launcher sums the partials into ``out`` (exact: integers). The partial array
  is allocated by the launcher (kernels allocate nothing) and only when
  ``nchunk * C * C`` stays below ``N`` (a large class count runs serially rather than
  zeroing and summing more cells than there are samples). On 1M samples and 10 classes
  the parallel twin takes 0.71 ms, the serial one 1.39 ms (more: ``perf/README.md``,
  "Measurement notes", ``kernels/cpu/metrics.py``).
* Row arg-max: ``np.argmax(axis=1)`` takes 26 ms on ``(1M, 10)`` float32 scores here (NumPy
  reduces each short row separately); this kernel 5.9 ms serial, 3.2 ms parallel (best of
  30, 2 cores).
* Top-k: a ``prange`` over rows whose tasks add their hit count into one integer (numba's
  parallel sum reduction: race-free, nothing allocated); each row is one pass over its
  ``C`` scores, no sort. Below ``config.PARALLEL_THRESHOLD`` scores the serial twin runs
  (``FlatKernel``'s rule, on ``scores.size``).
"""
import numba
import numpy as np
from numba import prange

from ...backend import config
from .._jit import FlatKernel, cpu_jit

# the names be.kernel(family, name) resolves (see numbagrad/kernels/__init__.py)
ENTRY_POINTS = ("confusion_count", "topk_correct", "row_argmax")

__all__ = ["_confusion_count_cpu", "_topk_correct_cpu", "_row_argmax_cpu"]

# Fewest samples per parallel chunk of the confusion count.
_MIN_CHUNK = 1 << 15


@cpu_jit
def _count_span(target, pred, lo, hi, out):
    """``out[target[i], pred[i]] += 1`` for ``i`` in ``[lo, hi)``."""
    for i in range(lo, hi):
        out[target[i], pred[i]] += 1


@cpu_jit(parallel=True)
def _count_chunks(target, pred, partial):
    """Chunk ``c`` of ``[0, N)`` counted into ``partial[c]`` (zeroed here first)."""
    nchunk = partial.shape[0]
    n = target.size
    for c in prange(nchunk):
        p = partial[c]
        for a in range(p.shape[0]):
            for b in range(p.shape[1]):
                p[a, b] = 0
        _count_span(target, pred, c * n // nchunk, (c + 1) * n // nchunk, p)


def _confusion_count_cpu(target, pred, out):
    """Add the confusion counts of ``(target, pred)`` into ``out`` (module docstring)."""
    n = target.size
    ncls = out.shape[0]
    nchunk = 1
    if config.PARALLEL and n >= config.PARALLEL_THRESHOLD:
        nchunk = min(4 * numba.get_num_threads(), n // _MIN_CHUNK)
        while nchunk > 1 and nchunk * ncls * ncls > n:
            nchunk //= 2
    if nchunk <= 1:
        _count_span(target, pred, 0, n, out)
        return
    partial = np.empty((nchunk, ncls, ncls), np.int64)
    _count_chunks(target, pred, partial)
    out += partial.sum(axis=0)


def _topk_correct(scores, target, k, out):
    """Add the number of top-``k`` hits of ``scores`` rows to ``out[0]`` (module docstring)."""
    n, ncls = scores.shape
    hits = 0
    for i in prange(n):
        t = target[i]
        st = scores[i, t]
        if st != st:
            continue
        rank = 0
        for j in range(ncls):
            s = scores[i, j]
            if s > st or (s == st and j < t):
                rank += 1
        if rank < k:
            hits += 1
    out[0] += hits


_topk_correct_cpu = FlatKernel(_topk_correct)


def _row_argmax(scores, out):
    """``out[i] = argmax(scores[i])``, first maximum, NaN the maximum (module docstring)."""
    n, ncls = scores.shape
    for i in prange(n):
        best = 0
        bv = scores[i, 0]
        if bv == bv:
            for j in range(1, ncls):
                v = scores[i, j]
                if v != v:
                    best = j
                    break
                if v > bv:
                    best = j
                    bv = v
        out[i] = best


_row_argmax_cpu = FlatKernel(_row_argmax)
