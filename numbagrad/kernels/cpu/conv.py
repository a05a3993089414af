"""im2col / col2im kernels for convolutions (``numbagrad/ops/conv.py`` drives them).

Contract (the same for every backend)::

    _im2col_cpu(x, cols, kh, kw, sh, sw, ph, pw, dh, dw)
    _col2im_cpu(cols, x, kh, kw, sh, sw, ph, pw, dh, dw)

* ``x`` is a C-contiguous ``(N, C, H, W)`` float32/float64 array (1-D convolutions use
  ``H = 1``); ``cols`` a C-contiguous ``(C * kh * kw, N, OH, OW)`` array of the same dtype,
  row ``r = (c * kh + i) * kw + j`` holding, for every output pixel ``(n, oh, ow)``, the
  input value under kernel tap ``(i, j)`` of channel ``c``::

      cols[r, n, oh, ow] = x[n, c, oh * sh - ph + i * dh, ow * sw - pw + j * dw]

  (zero where that index falls outside ``x``: the zero padding is implicit, and
  ``OH``/``OW`` come from ``cols.shape``, so asymmetric padding such as ``'same'`` with an
  even kernel needs nothing more than a larger ``OH``/``OW``).
* ``_im2col_cpu`` overwrites every element of ``cols``. ``_col2im_cpu`` is its adjoint: it
  overwrites ``x`` with the sum, over every ``cols`` entry, of that entry at the input
  position it was read from (padding positions are dropped).

Why this layout: the rows of one group of channels (``C / groups`` channels) are a
contiguous block, and the columns cover the whole batch, so a convolution is one BLAS GEMM
per call, ``W.reshape(G, O/G, K) @ cols.reshape(G, K, N*OH*OW)`` (a batched matmul over
the ``G`` groups), with the batch folded into the GEMM's long dimension. The GEMM result is
``(O, N, OH*OW)``; one strided pass (fused with the bias add) turns it into ``(N, O, ...)``.

Parallelism: ``im2col`` runs one task per ``(row, n)`` pair (every task writes its own
``OH x OW`` block), ``col2im`` one task per ``(n, c)`` input plane (the taps of one plane
are accumulated by one task: no races, no atomics). Both are ``prange`` loops built with
:func:`flat_kernel`; the launchers pick the parallel twin when ``cols`` has at least
``config.PARALLEL_THRESHOLD`` elements. Within a row the valid ``ow`` range is computed
once, so the inner loop is a branch-free strided copy (a contiguous one for ``sw = 1``)
that LLVM vectorises.

Indices inside the copy loops are ``uint64``: with signed indices numba emits a
negative-index wraparound select on every access and LLVM did not vectorise the copy:
unsigned, col2im went from 9.0 to 1.1 ms on the 3x3 benchmark layer's 144 x 32768 columns
(serial twin; the other figures: ``perf/README.md``, "Measurement notes", ``kernels/cpu/conv.py``).
"""
import numpy as np
from numba import prange, uint64

from ...backend import config
from .._jit import cpu_jit, flat_kernel, scalar_helper
from ._blas import gemm, num_threads, serial_private_blas

# the names be.kernel(family, name) resolves (see numbagrad/kernels/__init__.py)
ENTRY_POINTS = ("im2col", "col2im", "conv_fwd_samples", "conv_dgrad_samples", "conv_wgrad_samples")


@scalar_helper
def _valid_range(off, stride, size, out_size):
    """``[lo, hi)``: the output positions ``o`` with ``0 <= o * stride + off < size``."""
    if off >= 0:
        lo = 0
    else:
        lo = (-off + stride - 1) // stride
    last = size - 1 - off
    if last < 0:
        hi = 0
    else:
        hi = last // stride + 1
    if hi > out_size:
        hi = out_size
    if lo > hi:
        lo = hi
    return lo, hi


@scalar_helper
def _row_span(j, sw, pw, dw, w, ow_n):
    """For kernel column ``j``: the valid output columns ``[lo, hi)`` and, as unsigned
    indices, their count, first output column, first input column and input stride.
    Unsigned: numba then emits no negative-index wraparound, and the copy loops vectorise
    (3.3 -> 1.2 ms serial im2col on the benchmark's 3x3 layer)."""
    off_w = j * dw - pw
    lo, hi = _valid_range(off_w, sw, w, ow_n)
    return lo, hi, uint64(hi - lo), uint64(lo), uint64(lo * sw + off_w), uint64(sw)


@scalar_helper
def _im2col_row(xs, cs, i, j, sh, sw, ph, pw, dh, dw):
    """One row of the columns: ``cs (OH, OW)`` from the plane ``xs (H, W)``, tap ``(i, j)``."""
    h, w = xs.shape
    oh_n, ow_n = cs.shape
    lo, hi, n_copy, d0, s0, swu = _row_span(j, sw, pw, dw, w, ow_n)
    for oh in range(oh_n):
        ih = oh * sh - ph + i * dh
        if ih < 0 or ih >= h:
            for ow in range(ow_n):
                cs[oh, ow] = 0
        else:
            for ow in range(lo):
                cs[oh, ow] = 0
            ihu = uint64(ih)
            ohu = uint64(oh)
            if sw == 1:
                for k in range(n_copy):
                    cs[ohu, d0 + k] = xs[ihu, s0 + k]
            else:
                for k in range(n_copy):
                    cs[ohu, d0 + k] = xs[ihu, s0 + k * swu]
            for ow in range(hi, ow_n):
                cs[oh, ow] = 0


@scalar_helper
def _col2im_plane(cols, n, c, xs, kh, kw, sh, sw, ph, pw, dh, dw):
    """The input plane ``xs (H, W)`` of channel ``c`` (overwritten) as the sum of its taps'
    rows ``cols[(c, i, j), n]`` (``cols`` is ``(C*kh*kw, N, OH, OW)``)."""
    h, w = xs.shape
    oh_n, ow_n = cols.shape[2], cols.shape[3]
    for ih in range(h):
        for iw in range(w):
            xs[ih, iw] = 0
    for i in range(kh):
        for j in range(kw):
            cs = cols[(c * kh + i) * kw + j, n]
            _, _, n_copy, d0, s0, swu = _row_span(j, sw, pw, dw, w, ow_n)
            for oh in range(oh_n):
                ih = oh * sh - ph + i * dh
                if ih < 0 or ih >= h:
                    continue
                ihu = uint64(ih)
                ohu = uint64(oh)
                if sw == 1:
                    for k in range(n_copy):
                        xs[ihu, s0 + k] += cs[ohu, d0 + k]
                else:
                    for k in range(n_copy):
                        xs[ihu, s0 + k * swu] += cs[ohu, d0 + k]


@flat_kernel
def _im2col_kernel(x, cols, kh, kw, sh, sw, ph, pw, dh, dw):
    n_img = x.shape[0]
    rows = cols.shape[0]
    kk = kh * kw
    for t in prange(rows * n_img):
        r = t // n_img
        n = t - r * n_img
        c = r // kk
        q = r - c * kk
        i = q // kw
        _im2col_row(x[n, c], cols[r, n], i, q - i * kw, sh, sw, ph, pw, dh, dw)


@flat_kernel
def _col2im_kernel(cols, x, kh, kw, sh, sw, ph, pw, dh, dw):
    n_img, n_ch = x.shape[:2]
    for t in prange(n_img * n_ch):
        n = t // n_ch
        c = t - n * n_ch
        _col2im_plane(cols, n, c, x[n, c], kh, kw, sh, sw, ph, pw, dh, dw)


def _pick(kernel, size):
    return kernel.parallel if size >= config.PARALLEL_THRESHOLD else kernel.serial


def _im2col_cpu(x, cols, kh, kw, sh, sw, ph, pw, dh, dw):
    """cols[(c, i, j), n, oh, ow] = x[n, c, oh*sh - ph + i*dh, ow*sw - pw + j*dw] (0 outside).

    x: (N, C, H, W) C-contiguous; cols: (C*kh*kw, N, OH, OW) C-contiguous, same float
    dtype (float32 or float64), every element written.
    """
    if cols.size == 0:
        return
    _pick(_im2col_kernel, cols.size)(x, cols, kh, kw, sh, sw, ph, pw, dh, dw)


def _col2im_cpu(cols, x, kh, kw, sh, sw, ph, pw, dh, dw):
    """The adjoint of :func:`_im2col_cpu`: x[n, c, ih, iw] = sum of the cols entries read
    from (n, c, ih, iw).

    cols: (C*kh*kw, N, OH, OW) C-contiguous; x: (N, C, H, W) C-contiguous, same float dtype,
    every element written.
    """
    if x.size == 0:
        return
    if cols.size == 0:
        x[...] = 0
        return
    _pick(_col2im_kernel, cols.size)(cols, x, kh, kw, sh, sw, ph, pw, dh, dw)


# ---- per-sample convolutions: im2col and GEMM in one kernel, one batch slice per thread ----------
# Contract (CPU only; the launchers below wrap them in ``serial_private_blas``):
#
#   _conv_fwd_samples_cpu(x, w3, b, y, kh, kw, sh, sw, ph, pw, dh, dw)
#       y[n, g] = w3[g] @ im2col(x[n])[g] (+ b), for x (N, C, H, W), w3 (G, O/G, K/G),
#       y (N, O, OH, OW), b (O,) or empty; y overwritten.
#   _conv_dgrad_samples_cpu(g, w3, out, kh, ...)
#       out[n] = col2im(w3[g]^T @ g[n, g]) for g (N, O, OH, OW), out (N, C, H, W) overwritten:
#       the adjoint of the forward in x (a convolution's input gradient, a transposed
#       convolution's forward).
#   _conv_wgrad_samples_cpu(x, g, kh, ...) -> (G, O/G, K/G)
#       sum over n of g[n, g] @ im2col(x[n])[g]^T (the weight gradient in the weight's layout).
#
# Each task of the ``prange`` takes a contiguous slice of the batch and keeps one sample's
# columns (K x OH*OW: 590 KB on the benchmark layer) in its own buffer, so they stay in L2
# between the im2col and the GEMM; the GEMMs are ``_blas.gemm`` calls (MKL or SciPy's OpenBLAS,
# one thread per caller, see ``_blas.py``). The weight gradient is summed per task, then over tasks.
# Measured on the 32x16x32x32 -> 32, 3x3 layer (2 cores, float32, median): forward 2.4 ms,
# forward + backward 6.5 ms, against 13.7 ms for the batched im2col + NumPy GEMM path and
# 4.2 ms for torch's oneDNN in the same process.

@scalar_helper
def _im2col_sample(xs3, col, kh, kw, sh, sw, ph, pw, dh, dw):
    """``col (C*kh*kw, OH, OW)`` = the columns of one sample ``xs3 (C, H, W)``."""
    kk = kh * kw
    for r in range(col.shape[0]):
        c = r // kk
        q = r - c * kk
        i = q // kw
        _im2col_row(xs3[c], col[r], i, q - i * kw, sh, sw, ph, pw, dh, dw)


@cpu_jit(parallel=True)
def _conv_fwd_samples(x, w3, b, y, kh, kw, sh, sw, ph, pw, dh, dw, ntask):
    n_img = x.shape[0]
    g_n, og, kg = w3.shape
    oh_n, ow_n = y.shape[2], y.shape[3]
    p = oh_n * ow_n
    has_b = b.shape[0] > 0
    for t in prange(ntask):
        col = np.empty((g_n * kg, oh_n, ow_n), x.dtype)
        c3 = col.reshape((g_n, kg, p))
        for n in range(t * n_img // ntask, (t + 1) * n_img // ntask):
            _im2col_sample(x[n], col, kh, kw, sh, sw, ph, pw, dh, dw)
            y3 = y[n].reshape((g_n, og, p))
            if has_b:
                # the bias first, then the GEMM accumulates onto it (beta = 1): one pass less
                y2 = y[n].reshape((g_n * og, p))
                for o in range(g_n * og):
                    y2[o, :] = b[o]
            for gi in range(g_n):
                gemm(w3[gi], c3[gi], y3[gi], 1.0 if has_b else 0.0)


@cpu_jit(parallel=True)
def _conv_dgrad_samples(g, w3, out, kh, kw, sh, sw, ph, pw, dh, dw, ntask):
    n_img, n_ch = out.shape[:2]
    g_n, og, kg = w3.shape
    oh_n, ow_n = g.shape[2], g.shape[3]
    p = oh_n * ow_n
    for t in prange(ntask):
        col = np.empty((g_n * kg, 1, oh_n, ow_n), g.dtype)
        c3 = col.reshape((g_n, kg, p))
        for n in range(t * n_img // ntask, (t + 1) * n_img // ntask):
            g3 = g[n].reshape((g_n, og, p))
            for gi in range(g_n):
                gemm(w3[gi].T, g3[gi], c3[gi], 0.0)
            for c in range(n_ch):
                _col2im_plane(col, 0, c, out[n, c], kh, kw, sh, sw, ph, pw, dh, dw)


@cpu_jit(parallel=True)
def _conv_wgrad_samples(x, g, acc, kh, kw, sh, sw, ph, pw, dh, dw, ntask):
    # acc (ntask, G, K/G, O/G): the transposed weight gradient, one slice per task
    n_img = x.shape[0]
    _, g_n, kg, og = acc.shape
    oh_n, ow_n = g.shape[2], g.shape[3]
    p = oh_n * ow_n
    for t in prange(ntask):
        col = np.empty((g_n * kg, oh_n, ow_n), x.dtype)
        c3 = col.reshape((g_n, kg, p))
        a3 = acc[t]
        a3[...] = 0
        for n in range(t * n_img // ntask, (t + 1) * n_img // ntask):
            _im2col_sample(x[n], col, kh, kw, sh, sw, ph, pw, dh, dw)
            g3 = g[n].reshape((g_n, og, p))
            for gi in range(g_n):
                # col @ g^T, accumulated in place (beta = 1): OpenBLAS ran this orientation
                # in 90 us against 114 us for g @ col^T (32x1024 @ 1024x144, one thread)
                gemm(c3[gi], g3[gi].T, a3[gi], 1.0)


def _ntask(n):
    return max(1, min(n, num_threads()))


def _conv_fwd_samples_cpu(x, w3, b, y, kh, kw, sh, sw, ph, pw, dh, dw):
    if y.size == 0:
        return
    if b is None:
        b = np.empty(0, x.dtype)
    with serial_private_blas():
        _conv_fwd_samples(x, w3, b, y, kh, kw, sh, sw, ph, pw, dh, dw, _ntask(x.shape[0]))


def _conv_dgrad_samples_cpu(g, w3, out, kh, kw, sh, sw, ph, pw, dh, dw):
    if out.size == 0:
        return
    with serial_private_blas():
        _conv_dgrad_samples(g, w3, out, kh, kw, sh, sw, ph, pw, dh, dw, _ntask(out.shape[0]))


def _conv_wgrad_samples_cpu(x, g, kh, kw, sh, sw, ph, pw, dh, dw, w3_shape):
    nt = _ntask(x.shape[0])
    g_n, og, kg = w3_shape
    acc = np.empty((nt, g_n, kg, og), x.dtype)
    if x.shape[0] == 0 or g.size == 0:
        acc[...] = 0
    else:
        with serial_private_blas():
            _conv_wgrad_samples(x, g, acc, kh, kw, sh, sw, ph, pw, dh, dw, nt)
    return np.ascontiguousarray((acc.sum(axis=0) if nt > 1 else acc[0]).transpose(0, 2, 1))
