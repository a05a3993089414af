"""Pooling kernels (max, average, adaptive average, adaptive max) on ``(P, H, W)`` planes.

Contract (the same for every backend; the op ``numbagrad/ops/pooling.py`` prepares it):

* ``x`` / ``gx`` are C-contiguous ``(P, H, W)`` arrays, ``P = N * C`` planes (a 1-D pool
  views ``(N, C, L)`` as ``(N * C, 1, L)`` and passes ``kH = sH = dH = 1``, ``pH = 0``, so
  one kernel family serves both); ``out`` / ``g`` / ``idx`` are C-contiguous
  ``(P, OH, OW)``. Floating dtypes float32/float64 (the op computes float16 in float32:
  CPU ``@njit`` has no float16); ``idx`` is int64.
* Output sizes are computed (and checked) by the op; kernels trust them.
* Every kernel writes every element of its output (backward kernels zero ``gx`` first),
  so the op allocates with ``be.empty``.

=============================  ================================================================
kernel                         writes
=============================  ================================================================
max_pool2d_fwd                 ``out`` = window max, ``idx`` = its flat ``ih * W + iw`` in the
                               plane (torch's convention; first max wins, a NaN wins)
max_pool2d_bwd                 ``gx[p].flat[idx] += g``
avg_pool2d_fwd                 ``out`` = window sum / divisor (torch's divisor rules)
avg_pool2d_bwd                 ``gx`` += ``g / divisor`` over each window
adaptive_avg_pool2d_fwd/bwd    the same with torch's adaptive windows
adaptive_max_pool2d_fwd/bwd    the same with torch's adaptive windows
=============================  ================================================================

Window rules, as in PyTorch's CPU kernels:

* max: rows ``oh * sH - pH + j * dH`` for ``j < kH`` clipped to ``[0, H)``; the running max
  starts at ``-inf`` with index ``ih0 * W + iw0`` (the first valid element), and an
  element replaces it when ``v > max`` or ``v`` is NaN -- so ties keep the first maximum
  and a NaN propagates. Padding therefore acts as ``-inf``. A dilated window can lie
  wholly in the padding (an input narrower than the dilation): its output is ``-inf``
  with torch's index, and backward gives it no gradient (torch's backward adds it to
  that index, an element outside the window or past the plane's end).
* avg: rows ``[oh * sH - pH, min(.. + kH, H + pH))``; ``count_include_pad`` divides by
  that (padded) extent, otherwise by the part inside the input; ``divisor`` (> 0)
  overrides both; a window with no element inside the input gives 0.
* adaptive: rows ``[floor(oh * H / OH), ceil((oh + 1) * H / OH))`` (integer arithmetic).

Parallelism: every kernel is a ``prange`` over planes wrapped in :func:`flat_kernel` (the
serial twin below ``config.PARALLEL_THRESHOLD`` elements of the first argument, the
parallel one above). Backward kernels scatter within their own plane, so the parallel
loop is race-free and the summation order is the serial one (results are identical
between the twins). Each window is walked with the clipped ranges precomputed per output
row/column, so the inner loop has no bounds tests.

The 2x2 max pool (``MaxPool2d(2)``) has its own unrolled loop (straight-line selects, no
inner loops): 0.7 ms against 3.0 ms for the general loop on 32x32x32x32 float32, which pays
per-output loop setup for a 4-element window (the table and the variants tried:
``perf/README.md``, "Measurement notes", ``kernels/cpu/pooling.py``).
"""
import numpy as np
from numba import prange

from .._jit import flat_kernel, scalar_helper
from .. import scalar as S

# the names be.kernel(family, name) resolves (see numbagrad/kernels/__init__.py)
ENTRY_POINTS = (
    "max_pool2d_fwd", "max_pool2d_bwd", "avg_pool2d_fwd", "avg_pool2d_bwd",
    "adaptive_avg_pool2d_fwd", "adaptive_avg_pool2d_bwd", "adaptive_max_pool2d_fwd",
    "adaptive_max_pool2d_bwd",
)


@scalar_helper
def _window_max(x, p, h0, h1, dh, w0, w1, dw):
    """(max, its flat in-plane index ``ih * W + iw``) of plane ``p``'s window rows
    ``range(h0, h1, dh)``, columns ``range(w0, w1, dw)``: an element replaces the running
    max when greater or NaN (first max wins, NaN wins); an empty window gives ``-inf`` and
    the index of ``(h0, w0)``."""
    W = x.shape[2]
    m = -np.inf
    mi = h0 * W + w0
    for ih in range(h0, h1, dh):
        for iw in range(w0, w1, dw):
            v = x[p, ih, iw]
            if v > m or v != v:
                m = v
                mi = ih * W + iw
    return m, mi


@scalar_helper
def _window_sum(x, p, h0, h1, w0, w1):
    """Sum of plane ``p`` over rows ``[h0, h1)`` and columns ``[w0, w1)`` (non-empty), in x's dtype."""
    s = type(x[p, h0, w0])(0)
    for ih in range(h0, h1):
        for iw in range(w0, w1):
            s += x[p, ih, iw]
    return s


@scalar_helper
def _window_add(gx, p, h0, h1, w0, w1, v):
    """gx[p, h0:h1, w0:w1] += v."""
    for ih in range(h0, h1):
        for iw in range(w0, w1):
            gx[p, ih, iw] += v


@scalar_helper
def _zero_plane(gx, p):
    """gx[p] = 0."""
    for ih in range(gx.shape[1]):
        for iw in range(gx.shape[2]):
            gx[p, ih, iw] = 0


@flat_kernel
def _max_pool2d_general_fwd(x, out, idx, kH, kW, sH, sW, pH, pW, dH, dW):
    """out[p, oh, ow] = max of x[p] over the (dilated, padded) window; idx = its flat index.

    x: (P, H, W); out: (P, OH, OW) of x's dtype; idx: (P, OH, OW) int64.
    """
    P, H, W = x.shape
    OH, OW = out.shape[1], out.shape[2]
    for p in prange(P):
        for oh in range(OH):
            h0 = oh * sH - pH
            h1 = min(h0 + (kH - 1) * dH + 1, H)
            h0 = S.first_valid(h0, dH)
            for ow in range(OW):
                w0 = ow * sW - pW
                w1 = min(w0 + (kW - 1) * dW + 1, W)
                w0 = S.first_valid(w0, dW)
                out[p, oh, ow], idx[p, oh, ow] = _window_max(x, p, h0, h1, dH, w0, w1, dW)


@scalar_helper
def _take(v, m):
    """Whether ``v`` replaces the running max ``m`` (strictly greater, or NaN); bitwise ``|``
    rather than ``or``, so no short-circuit branch."""
    return (v > m) | (v != v)


@flat_kernel
def _max_pool2d_2x2_fwd(x, out, idx, sH, sW):
    """The 2x2 window, undilated, unpadded, every window inside the input (the caller checks):
    the general loop unrolled. Same results (first max wins, NaN wins)."""
    P, H, W = x.shape
    OH, OW = out.shape[1], out.shape[2]
    for p in prange(P):
        for oh in range(OH):
            r = oh * sH
            for ow in range(OW):
                c = ow * sW
                m = x[p, r, c]
                mi = r * W + c
                v = x[p, r, c + 1]
                t = _take(v, m)
                m = v if t else m
                mi = r * W + c + 1 if t else mi
                v = x[p, r + 1, c]
                t = _take(v, m)
                m = v if t else m
                mi = (r + 1) * W + c if t else mi
                v = x[p, r + 1, c + 1]
                t = _take(v, m)
                m = v if t else m
                mi = (r + 1) * W + c + 1 if t else mi
                out[p, oh, ow] = m
                idx[p, oh, ow] = mi


def _max_pool2d_fwd_cpu(x, out, idx, kH, kW, sH, sW, pH, pW, dH, dW):
    """out[p, oh, ow] = max of x[p] over the (dilated, padded) window; idx = its flat index
    ``ih * W + iw`` (first max wins, NaN wins; an all-padding window gives -inf and torch's
    index of its first tap position).

    x: (P, H, W); out: (P, OH, OW) of x's dtype; idx: (P, OH, OW) int64. 2x2 windows that
    all lie inside the input take an unrolled loop (4.5x faster: 0.69 vs 3.1 ms serial on
    1024 planes of 32x32 float32), every other geometry the general one.
    """
    if out.size == 0:
        return
    H, W = x.shape[1], x.shape[2]
    OH, OW = out.shape[1], out.shape[2]
    if (kH == 2 and kW == 2 and dH == 1 and dW == 1 and pH == 0 and pW == 0
            and (OH - 1) * sH + 2 <= H and (OW - 1) * sW + 2 <= W):
        _max_pool2d_2x2_fwd(x, out, idx, sH, sW)
    else:
        _max_pool2d_general_fwd(x, out, idx, kH, kW, sH, sW, pH, pW, dH, dW)


@scalar_helper
def _scatter_by_index(g, idx, gx, p):
    """gx[p] = 0, then gx[p].flat[idx[p, o]] += g[p, o] in output order (indices outside the
    plane -- torch's index of an all-padding window -- are dropped)."""
    H, W = gx.shape[1], gx.shape[2]
    OH, OW = g.shape[1], g.shape[2]
    _zero_plane(gx, p)
    n = H * W
    for oh in range(OH):
        for ow in range(OW):
            i = idx[p, oh, ow]
            if i >= 0 and i < n:
                ih = i // W
                gx[p, ih, i - ih * W] += g[p, oh, ow]


@scalar_helper
def _scatter_by_index_dilated(g, idx, gx, p, sH, sW, pH, pW, dH, dW):
    """:func:`_scatter_by_index` skipping outputs whose dilated window has no tap inside the
    input (their value is -inf and their index, torch's, may name an element outside the
    window: such an output is constant, so its gradient is dropped)."""
    H, W = gx.shape[1], gx.shape[2]
    OH, OW = g.shape[1], g.shape[2]
    _zero_plane(gx, p)
    for oh in range(OH):
        if S.first_valid(oh * sH - pH, dH) >= H:
            continue
        for ow in range(OW):
            if S.first_valid(ow * sW - pW, dW) >= W:
                continue
            i = idx[p, oh, ow]
            ih = i // W
            gx[p, ih, i - ih * W] += g[p, oh, ow]


@flat_kernel
def _max_pool2d_bwd_cpu(g, idx, gx, kH, kW, sH, sW, pH, pW, dH, dW):
    """gx[p].flat[idx[p, oh, ow]] += g[p, oh, ow]; gx is zeroed first.

    g: (P, OH, OW); idx: (P, OH, OW) int64; gx: (P, H, W). Without dilation every window
    has a tap inside the input and the geometry is not needed; with dilation, outputs
    whose window lies wholly in the padding get no gradient (see
    :func:`_scatter_by_index_dilated`).
    """
    for p in prange(g.shape[0]):
        if dH == 1 and dW == 1:
            _scatter_by_index(g, idx, gx, p)
        else:
            _scatter_by_index_dilated(g, idx, gx, p, sH, sW, pH, pW, dH, dW)


@flat_kernel
def _avg_pool2d_fwd_cpu(x, out, kH, kW, sH, sW, pH, pW, count_include_pad, divisor):
    """out[p, oh, ow] = sum of x[p] over the window / divisor.

    x: (P, H, W); out: (P, OH, OW). ``count_include_pad`` (0/1) and ``divisor`` (0 = none,
    else torch's ``divisor_override``) pick the divisor as in torch.
    """
    P, H, W = x.shape
    OH, OW = out.shape[1], out.shape[2]
    for p in prange(P):
        for oh in range(OH):
            h0, h1, eh = S.avg_window(oh, sH, pH, kH, H)
            for ow in range(OW):
                w0, w1, ew = S.avg_window(ow, sW, pW, kW, W)
                if h0 >= h1 or w0 >= w1:
                    out[p, oh, ow] = 0
                    continue
                s = _window_sum(x, p, h0, h1, w0, w1)
                d = S.avg_divisor(h0, h1, eh, w0, w1, ew, count_include_pad, divisor)
                out[p, oh, ow] = s / type(s)(d)


@flat_kernel
def _avg_pool2d_bwd_cpu(g, gx, kH, kW, sH, sW, pH, pW, count_include_pad, divisor):
    """gx[p, window(oh, ow)] += g[p, oh, ow] / divisor(oh, ow); gx is zeroed first.

    g: (P, OH, OW); gx: (P, H, W).
    """
    P, OH, OW = g.shape
    H, W = gx.shape[1], gx.shape[2]
    for p in prange(P):
        _zero_plane(gx, p)
        for oh in range(OH):
            h0, h1, eh = S.avg_window(oh, sH, pH, kH, H)
            for ow in range(OW):
                w0, w1, ew = S.avg_window(ow, sW, pW, kW, W)
                if h0 >= h1 or w0 >= w1:
                    continue
                v = g[p, oh, ow]
                v = v / type(v)(S.avg_divisor(h0, h1, eh, w0, w1, ew, count_include_pad, divisor))
                _window_add(gx, p, h0, h1, w0, w1, v)


@flat_kernel
def _adaptive_avg_pool2d_fwd_cpu(x, out):
    """out[p, oh, ow] = mean of x[p] over the adaptive window. x: (P, H, W); out: (P, OH, OW)."""
    P, H, W = x.shape
    OH, OW = out.shape[1], out.shape[2]
    for p in prange(P):
        for oh in range(OH):
            h0, h1 = S.adaptive_window(oh, OH, H)
            for ow in range(OW):
                w0, w1 = S.adaptive_window(ow, OW, W)
                s = _window_sum(x, p, h0, h1, w0, w1)
                out[p, oh, ow] = s / type(s)((h1 - h0) * (w1 - w0))


@flat_kernel
def _adaptive_avg_pool2d_bwd_cpu(g, gx):
    """gx[p, window(oh, ow)] += g[p, oh, ow] / window size; gx (P, H, W) is zeroed first."""
    P, OH, OW = g.shape
    H, W = gx.shape[1], gx.shape[2]
    for p in prange(P):
        _zero_plane(gx, p)
        for oh in range(OH):
            h0, h1 = S.adaptive_window(oh, OH, H)
            for ow in range(OW):
                w0, w1 = S.adaptive_window(ow, OW, W)
                v = g[p, oh, ow]
                v = v / type(v)((h1 - h0) * (w1 - w0))
                _window_add(gx, p, h0, h1, w0, w1, v)


@flat_kernel
def _adaptive_max_pool2d_fwd_cpu(x, out, idx):
    """out[p, oh, ow] = max of x[p] over the adaptive window, idx = its flat index (first max
    wins, NaN wins). x: (P, H, W); out, idx: (P, OH, OW)."""
    P, H, W = x.shape
    OH, OW = out.shape[1], out.shape[2]
    for p in prange(P):
        for oh in range(OH):
            h0, h1 = S.adaptive_window(oh, OH, H)
            for ow in range(OW):
                w0, w1 = S.adaptive_window(ow, OW, W)
                out[p, oh, ow], idx[p, oh, ow] = _window_max(x, p, h0, h1, 1, w0, w1, 1)


@flat_kernel
def _adaptive_max_pool2d_bwd_cpu(g, idx, gx):
    """gx[p].flat[idx[p, oh, ow]] += g[p, oh, ow]; gx (P, H, W) is zeroed first."""
    for p in prange(g.shape[0]):
        _scatter_by_index(g, idx, gx, p)
