"""Normalisation kernels: layer norm (and RMS norm), batch norm, group norm.

Contract (the same for every backend; the op prepares the layouts):

* ``_layer_norm_fwd_cpu(x, w, b, center, eps, out, mean, rstd)`` and
  ``_layer_norm_bwd_cpu(g, x, mean, rstd, w, center, dx, dwp, dbp)`` on C-contiguous
  ``(rows, n)`` arrays, one row per normalised slice. ``center=0`` is RMS norm (no mean
  subtraction, ``mean`` is written as 0). ``w``/``b`` are ``(n,)`` or empty ``(0,)``
  (absent). The backward writes ``dx`` and per-chunk partial column sums
  ``dwp[p] = sum g * xhat``, ``dbp[p] = sum g`` over the ``p``-th of ``P = dwp.shape[0]``
  contiguous row chunks; the op sums the ``P`` rows (a race-free parallel reduction).
* ``_batch_norm_stats_cpu(x, mean, var)``: per-channel mean and biased variance of an
  ``(N, C, L)`` array; ``_batch_norm_fwd_cpu(x, mean, invstd, w, b, out)`` normalises with
  given statistics (batch or running); ``_batch_norm_bwd_cpu(g, x, mean, invstd, w,
  training, dx, dw, db)`` writes ``dx`` and the per-channel ``dw``, ``db`` (always).
* ``_group_norm_fwd_cpu(x, w, b, eps, out, mean, rstd)`` on ``(N, C, L)`` with
  ``G = mean.shape[1]`` groups, and ``_group_norm_bwd_cpu(g, x, mean, rstd, w, dx, dwp,
  dbp)`` whose ``dwp``/``dbp`` are ``(N, C)`` per-sample partials (summed by the op).

Statistics are two-pass (mean, then the sum of squared deviations) in the input's
precision with eight independent accumulators: without ``fastmath`` LLVM may not reorder a
float sum, and one accumulator runs at the add latency (the softmax kernels measured 0.29
vs 0.65 ms per 1024x1024 sum). The second pass re-reads a row (LayerNorm: 4 KiB) or a
channel block that is still in cache. Kernels are ``prange`` loops wrapped in
:func:`flat_kernel` (serial twin below ``config.PARALLEL_THRESHOLD`` elements).

The fused kernels run several times faster than the same maths as NumPy expressions
(LayerNorm (4096, 1024) forward 6.5 ms against 31.6 ms; the table: ``perf/README.md``,
"Measurement notes", ``kernels/cpu/normalization.py``). The LayerNorm backward accumulates
``dw``/``db`` into per-chunk partial rows (the op uses up to 64 chunks of >= 32K elements)
inside the dx pass, and the op sums the chunks: a separate column pass cost three times
the whole fused backward.
"""
import math

from numba import prange

from .._jit import flat_kernel, scalar_helper
from ._rowreduce import vdot_dev, vsqdev, vsum

# the names be.kernel(family, name) resolves (see numbagrad/kernels/__init__.py)
ENTRY_POINTS = (
    "layer_norm_fwd", "layer_norm_bwd", "batch_norm_stats", "batch_norm_fwd", "batch_norm_bwd",
    "group_norm_fwd", "group_norm_bwd",
)


# ---- eight-accumulator reductions over 1-D contiguous views (``_rowreduce``) ----------------
@scalar_helper
def _vsum_w(g, w):
    """(sum of g * w, with w empty meaning ones)."""
    if w.shape[0] == 0:
        return vsum(g, g.dtype.type(0))
    return vdot_dev(g, w, w.dtype.type(0))


@scalar_helper
def _vdot_w_dev(g, w, a, m):
    """sum of g * w * (a - m) (w empty: ones)."""
    if w.shape[0] == 0:
        return vdot_dev(g, a, m)
    n = a.shape[0]
    z = a.dtype.type(0)
    s0 = s1 = s2 = s3 = z
    j = 0
    while j + 4 <= n:
        s0 += g[j] * w[j] * (a[j] - m)
        s1 += g[j + 1] * w[j + 1] * (a[j + 1] - m)
        s2 += g[j + 2] * w[j + 2] * (a[j + 2] - m)
        s3 += g[j + 3] * w[j + 3] * (a[j + 3] - m)
        j += 4
    s = (s0 + s1) + (s2 + s3)
    while j < n:
        s += g[j] * w[j] * (a[j] - m)
        j += 1
    return s


# ---- layer norm / RMS norm -----------------------------------------------------------------
@flat_kernel
def _layer_norm_fwd_cpu(x, w, b, center, eps, out, mean, rstd):
    """Row-wise layer norm of a C-contiguous ``(rows, n)`` float32/float64 array.

    ``out[r] = (x[r] - mean[r]) * rstd[r] * w + b`` with ``mean`` the row mean (0 when
    ``center`` is 0: RMS norm), ``rstd = 1 / sqrt(mean((x - mean)**2) + eps)``; ``w``/``b``
    are ``(n,)`` or ``(0,)`` (absent). Writes ``out`` ``(rows, n)``, ``mean``, ``rstd``
    ``(rows,)`` (x's dtype). One iteration of the parallel loop is one row.
    """
    rows, n = x.shape
    dt = x.dtype.type
    inv_n = dt(1) / dt(n)
    has_w = w.shape[0] != 0
    has_b = b.shape[0] != 0
    for r in prange(rows):
        xr = x[r]
        m = vsum(xr, dt(0)) * inv_n if center else dt(0)
        v = vsqdev(xr, m) * inv_n
        rs = dt(1) / math.sqrt(v + eps)
        mean[r] = m
        rstd[r] = rs
        o = out[r]
        if has_w and has_b:
            for j in range(n):
                o[j] = (xr[j] - m) * rs * w[j] + b[j]
        elif has_w:
            for j in range(n):
                o[j] = (xr[j] - m) * rs * w[j]
        elif has_b:
            for j in range(n):
                o[j] = (xr[j] - m) * rs + b[j]
        else:
            for j in range(n):
                o[j] = (xr[j] - m) * rs


@flat_kernel
def _layer_norm_bwd_cpu(g, x, mean, rstd, w, center, dx, dwp, dbp):
    """Backward of :func:`_layer_norm_fwd_cpu`.

    With ``xhat = (x - mean) * rstd`` and ``gw = g * w`` (``w`` empty: ones):
    ``dx = rstd * (gw - mean(gw) - xhat * mean(gw * xhat))`` (``center=0``: without the
    ``mean(gw)`` term). Rows are split into ``P = dwp.shape[0]`` contiguous chunks; chunk
    ``p`` (one parallel iteration) writes its rows of ``dx`` and ``dwp[p] = sum g * xhat``,
    ``dbp[p] = sum g`` over its rows (``(P, n)`` arrays, summed by the caller).
    """
    rows, n = g.shape
    P = dwp.shape[0]
    dt = x.dtype.type
    inv_n = dt(1) / dt(n)
    has_w = w.shape[0] != 0
    for p in prange(P):
        r0 = p * rows // P
        r1 = (p + 1) * rows // P
        dwr = dwp[p]
        dbr = dbp[p]
        for j in range(n):
            dwr[j] = dt(0)
            dbr[j] = dt(0)
        for r in range(r0, r1):
            gr = g[r]
            xr = x[r]
            m = mean[r]
            rs = rstd[r]
            for j in range(n):
                gj = gr[j]
                dwr[j] += gj * ((xr[j] - m) * rs)
                dbr[j] += gj
            a = _vsum_w(gr, w) * inv_n if center else dt(0)
            c = _vdot_w_dev(gr, w, xr, m) * rs * inv_n
            d = dx[r]
            if has_w:
                for j in range(n):
                    d[j] = rs * (gr[j] * w[j] - a - (xr[j] - m) * rs * c)
            else:
                for j in range(n):
                    d[j] = rs * (gr[j] - a - (xr[j] - m) * rs * c)


# ---- batch norm --------------------------------------------------------------------------
@scalar_helper
def _channel_block(C, L):
    """Channels per parallel iteration: one when rows are long; with short rows (L < 16,
    e.g. BatchNorm1d on (N, C)) a block of 64 channels, so the inner loop runs along a
    contiguous run of channels instead of striding one channel over N."""
    return 1 if L >= 16 else 64


@flat_kernel
def _batch_norm_stats_cpu(x, mean, var):
    """Per-channel mean and biased variance of an ``(N, C, L)`` C-contiguous array.

    Writes ``mean`` and ``var`` ``(C,)`` (x's dtype); one parallel iteration is a block of
    channels (two passes over the block: sums, then squared deviations)."""
    N, C, L = x.shape
    dt = x.dtype.type
    inv_m = dt(1) / dt(N * L)
    cb = _channel_block(C, L)
    nblk = (C + cb - 1) // cb
    for k in prange(nblk):
        c0 = k * cb
        c1 = min(C, c0 + cb)
        for c in range(c0, c1):
            mean[c] = dt(0)
            var[c] = dt(0)
        for i in range(N):
            for c in range(c0, c1):
                mean[c] += vsum(x[i, c], dt(0))
        for c in range(c0, c1):
            mean[c] *= inv_m
        for i in range(N):
            for c in range(c0, c1):
                var[c] += vsqdev(x[i, c], mean[c])
        for c in range(c0, c1):
            var[c] *= inv_m


@flat_kernel
def _batch_norm_fwd_cpu(x, mean, invstd, w, b, out):
    """``out = (x - mean[c]) * invstd[c] * w[c] + b[c]`` on ``(N, C, L)`` (``w``/``b``
    ``(C,)`` or empty: absent). One parallel iteration is one ``(n, c)`` row of L."""
    N, C, L = x.shape
    dt = x.dtype.type
    has_w = w.shape[0] != 0
    has_b = b.shape[0] != 0
    for q in prange(N * C):
        i = q // C
        c = q - i * C
        a = invstd[c] * w[c] if has_w else invstd[c]
        s = (b[c] if has_b else dt(0)) - mean[c] * a
        xr = x[i, c]
        o = out[i, c]
        for j in range(L):
            o[j] = xr[j] * a + s


@flat_kernel
def _batch_norm_bwd_cpu(g, x, mean, invstd, w, training, dx, dw, db):
    """Backward of batch norm on ``(N, C, L)``.

    Writes ``db[c] = sum g``, ``dw[c] = sum g * xhat`` (``xhat = (x - mean) * invstd``)
    and ``dx``: with batch statistics (``training``)
    ``dx = w * invstd * (g - db / M - xhat * dw / M)``, ``M = N * L``; with fixed
    (running) statistics ``dx = g * w * invstd``. One parallel iteration is a block of
    channels."""
    N, C, L = x.shape
    dt = x.dtype.type
    inv_m = dt(1) / dt(N * L)
    has_w = w.shape[0] != 0
    cb = _channel_block(C, L)
    nblk = (C + cb - 1) // cb
    for k in prange(nblk):
        c0 = k * cb
        c1 = min(C, c0 + cb)
        for c in range(c0, c1):
            dw[c] = dt(0)
            db[c] = dt(0)
        for i in range(N):
            for c in range(c0, c1):
                db[c] += vsum(g[i, c], dt(0))
                dw[c] += vdot_dev(g[i, c], x[i, c], mean[c])
        for c in range(c0, c1):
            dw[c] *= invstd[c]
        for i in range(N):
            for c in range(c0, c1):
                ws = (w[c] if has_w else dt(1)) * invstd[c]
                gr = g[i, c]
                d = dx[i, c]
                if training:
                    m = mean[c]
                    sg = db[c] * inv_m
                    k2 = dw[c] * invstd[c] * inv_m
                    xr = x[i, c]
                    for j in range(L):
                        d[j] = ws * (gr[j] - sg - (xr[j] - m) * k2)
                else:
                    for j in range(L):
                        d[j] = ws * gr[j]


# ---- group norm --------------------------------------------------------------------------
@flat_kernel
def _group_norm_fwd_cpu(x, w, b, eps, out, mean, rstd):
    """Group norm of an ``(N, C, L)`` C-contiguous array over ``G = mean.shape[1]`` groups
    of ``C // G`` channels: per ``(n, group)`` the mean and ``rstd = 1/sqrt(var + eps)``
    (biased) of its ``C // G * L`` contiguous elements, then
    ``out = (x - mean) * rstd * w[c] + b[c]`` (``w``/``b`` ``(C,)`` or empty). Writes
    ``out``, ``mean`` and ``rstd`` ``(N, G)``. One parallel iteration is one (n, group)."""
    N, C, L = x.shape
    G = mean.shape[1]
    cg = C // G
    dt = x.dtype.type
    inv_m = dt(1) / dt(cg * L)
    has_w = w.shape[0] != 0
    has_b = b.shape[0] != 0
    xf = x.reshape(N * G, cg * L)
    for q in prange(N * G):
        i = q // G
        grp = q - i * G
        xr = xf[q]
        m = vsum(xr, dt(0)) * inv_m
        rs = dt(1) / math.sqrt(vsqdev(xr, m) * inv_m + eps)
        mean[i, grp] = m
        rstd[i, grp] = rs
        for c in range(grp * cg, (grp + 1) * cg):
            a = rs * w[c] if has_w else rs
            s = (b[c] if has_b else dt(0)) - m * a
            xc = x[i, c]
            o = out[i, c]
            for j in range(L):
                o[j] = xc[j] * a + s


@flat_kernel
def _group_norm_bwd_cpu(g, x, mean, rstd, w, dx, dwp, dbp):
    """Backward of :func:`_group_norm_fwd_cpu`.

    Per (n, group), with ``xhat = (x - mean) * rstd``, ``gw = g * w[c]`` and ``M = C // G * L``:
    ``dx = rstd * (gw - mean(gw) - xhat * mean(gw * xhat))``; per sample and channel
    ``dwp[n, c] = sum_l g * xhat``, ``dbp[n, c] = sum_l g`` (``(N, C)``, summed over n by
    the caller). One parallel iteration is one (n, group)."""
    N, C, L = x.shape
    G = mean.shape[1]
    cg = C // G
    dt = x.dtype.type
    inv_m = dt(1) / dt(cg * L)
    has_w = w.shape[0] != 0
    for q in prange(N * G):
        i = q // G
        grp = q - i * G
        m = mean[i, grp]
        rs = rstd[i, grp]
        sa = dt(0)
        sc = dt(0)
        for c in range(grp * cg, (grp + 1) * cg):
            sg = vsum(g[i, c], dt(0))
            sgx = vdot_dev(g[i, c], x[i, c], m) * rs
            dbp[i, c] = sg
            dwp[i, c] = sgx
            wc = w[c] if has_w else dt(1)
            sa += wc * sg
            sc += wc * sgx
        sa *= inv_m
        sc *= inv_m
        for c in range(grp * cg, (grp + 1) * cg):
            wc = w[c] if has_w else dt(1)
            gc = g[i, c]
            xc = x[i, c]
            d = dx[i, c]
            for j in range(L):
                d[j] = rs * (gc[j] * wc - sa - (xc[j] - m) * rs * sc)
