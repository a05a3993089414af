"""CUDA twins of ``kernels/cpu/metrics.py``: confusion counts and top-k hits.

Same contract as the CPU module, argument for argument:
``_confusion_count_cuda(target, pred, out)`` adds one to ``out[target[i], pred[i]]`` (a
``(C, C)`` ``int64`` device array) for every sample; ``_topk_correct_cuda(scores, target,
k, out)`` adds the number of rows whose target class ranks among the ``k`` highest scores
to ``out[0]`` (a 1-element ``int64`` device array), with the CPU kernel's rank rule
(strictly higher scores, plus equal scores at a lower index; a NaN target score misses).
``_row_argmax_cuda(scores, out)`` writes each row's first arg-max (NaN the maximum, as
``np.argmax``) into the ``int64`` device array ``out``. Labels are checked against ``[0, C)`` by the caller before a launch.

Design: flat grid-stride kernels, one thread per sample (row). Counts go through
``cuda.atomic.add`` on ``int64`` cells: integer atomics, so the result is exact and the
same whatever the launch order. A top-k row reads its ``C`` scores in one thread (class
counts of a classifier are small); float16 scores are compared widened to float32.
"""
from numba import cuda
from numba import types as nbtypes

from ._launch import cuda_kernel, launch, widen

# the names be.kernel(family, name) resolves (see numbagrad/kernels/__init__.py)
ENTRY_POINTS = ("confusion_count", "topk_correct", "row_argmax")

__all__ = ["_confusion_count_cuda", "_topk_correct_cuda", "_row_argmax_cuda"]

_I64 = nbtypes.int64


@cuda_kernel([(_I64[::1], _I64[::1], _I64[:, ::1])])
def _confusion_count_kernel(target, pred, out):
    start = cuda.grid(1)
    stride = cuda.gridsize(1)
    for i in range(start, target.size, stride):
        cuda.atomic.add(out, (target[i], pred[i]), 1)


@cuda_kernel(lambda T: (T[:, ::1], _I64[::1], _I64, _I64[::1]))
def _topk_correct_kernel(scores, target, k, out):
    start = cuda.grid(1)
    stride = cuda.gridsize(1)
    ncls = scores.shape[1]
    for i in range(start, scores.shape[0], stride):
        t = target[i]
        st = widen(scores[i, t])
        if st != st:
            continue
        rank = 0
        for j in range(ncls):
            s = widen(scores[i, j])
            if s > st or (s == st and j < t):
                rank += 1
        if rank < k:
            cuda.atomic.add(out, 0, 1)


@cuda_kernel(lambda T: (T[:, ::1], _I64[::1]))
def _row_argmax_kernel(scores, out):
    start = cuda.grid(1)
    stride = cuda.gridsize(1)
    ncls = scores.shape[1]
    for i in range(start, scores.shape[0], stride):
        best = 0
        bv = widen(scores[i, 0])
        if bv == bv:
            for j in range(1, ncls):
                v = widen(scores[i, j])
                if v != v:
                    best = j
                    break
                if v > bv:
                    best = j
                    bv = v
        out[i] = best


def _confusion_count_cuda(target, pred, out):
    """Add the confusion counts of ``(target, pred)`` into ``out`` (module docstring)."""
    launch(_confusion_count_kernel, target.size, target, pred, out)


def _topk_correct_cuda(scores, target, k, out):
    """Add the number of top-``k`` hits of ``scores`` rows to ``out[0]`` (module docstring)."""
    launch(_topk_correct_kernel, scores.shape[0], scores, target, k, out)


def _row_argmax_cuda(scores, out):
    """Each row's first arg-max into ``out`` (module docstring)."""
    launch(_row_argmax_kernel, scores.shape[0], scores, out)
