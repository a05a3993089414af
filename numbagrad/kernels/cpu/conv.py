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
negative-index wraparound select on every access and LLVM did not vectorise the copy.
Measured (float32, x = 32x16x32x32, 3x3, padding 1, cols 144 x 32768, serial twin, min of
20, machine shared): im2col 3.3 -> 1.2 ms, col2im 9.0 -> 1.1 ms (a plain njit copy of the
same 19 MB ran 0.9 ms). Parallel twins: im2col 0.8 ms, col2im ~1.0 ms. ``np`` slice
assignment inside njit was slower (3.4 ms), a long flat copy with fringe fix-up no faster.
"""
from numba import prange, uint64

from ...backend import config
from .._jit import flat_kernel, scalar_helper


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


@flat_kernel
def _im2col_kernel(x, cols, kh, kw, sh, sw, ph, pw, dh, dw):
    n_img, n_ch, h, w = x.shape
    rows, _, oh_n, ow_n = cols.shape
    kk = kh * kw
    for t in prange(rows * n_img):
        r = t // n_img
        n = t - r * n_img
        c = r // kk
        q = r - c * kk
        i = q // kw
        j = q - i * kw
        off_w = j * dw - pw
        lo, hi = _valid_range(off_w, sw, w, ow_n)
        xs = x[n, c]
        cs = cols[r, n]
        # unsigned indices: numba then emits no negative-index wraparound, and the copy
        # vectorises (3.3 -> 1.2 ms serial on the benchmark's 3x3 layer)
        n_copy = uint64(hi - lo)
        d0 = uint64(lo)
        s0 = uint64(lo * sw + off_w)
        swu = uint64(sw)
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


@flat_kernel
def _col2im_kernel(cols, x, kh, kw, sh, sw, ph, pw, dh, dw):
    n_img, n_ch, h, w = x.shape
    rows, _, oh_n, ow_n = cols.shape
    for t in prange(n_img * n_ch):
        n = t // n_ch
        c = t - n * n_ch
        xs = x[n, c]
        for ih in range(h):
            for iw in range(w):
                xs[ih, iw] = 0
        for i in range(kh):
            for j in range(kw):
                cs = cols[(c * kh + i) * kw + j, n]
                off_w = j * dw - pw
                lo, hi = _valid_range(off_w, sw, w, ow_n)
                n_copy = uint64(hi - lo)
                d0 = uint64(lo)
                s0 = uint64(lo * sw + off_w)
                swu = uint64(sw)
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
