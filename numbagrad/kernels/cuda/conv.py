"""CUDA im2col / col2im kernels (twins of ``kernels/cpu/conv.py``).

Contract: the CPU module's::

    _im2col_cuda(x, cols, kh, kw, sh, sw, ph, pw, dh, dw)
    _col2im_cuda(cols, x, kh, kw, sh, sw, ph, pw, dh, dw)

``x``: C-contiguous ``(N, C, H, W)`` device array; ``cols``: C-contiguous
``(C*kh*kw, N, OH, OW)`` of the same dtype (float16, float32 or float64); the scalars are
Python ints. Row ``r = (c*kh + i)*kw + j`` of ``cols`` holds, for output pixel
``(n, oh, ow)``, ``x[n, c, oh*sh - ph + i*dh, ow*sw - pw + j*dw]`` (0 outside ``x``).

* ``im2col``: one thread per ``cols`` element (flat grid-stride loop over ``cols``; the
  index is decomposed fastest-last, so neighbouring threads write neighbouring ``ow`` and,
  for stride 1, read neighbouring ``iw``: both coalesced). Every element is written.
* ``col2im``: one thread per ``x`` element, a *gather*: the thread visits the ``kh*kw``
  taps, and for tap ``(i, j)`` the output pixel that read it, if any
  (``oh = (ih + ph - i*dh) / sh`` when that divides exactly and lies in ``[0, OH)``; the
  same for ``ow``), and sums those ``cols`` entries. Each ``x`` element is owned by one
  thread: no atomics, deterministic sums, and every element is written (0 where nothing
  reads it).

float16: ``im2col`` only moves values (the zero is a float32 narrowed at the store);
``col2im`` accumulates in float32 (``widen``) and narrows at the store; float64 stays
float64.
"""
from numba import cuda, types as nbtypes

from ._launch import cuda_kernel, dev, launch
from ._launch import widen as _wide_device

# the names be.kernel(family, name) resolves (see numbagrad/kernels/__init__.py)
ENTRY_POINTS = ("im2col", "col2im")

_I64 = nbtypes.int64


def _sig(T):
    a4 = T[:, :, :, ::1]
    return (a4, a4) + (_I64,) * 8


@cuda_kernel(_sig)
def _im2col_kernel(x, cols, kh, kw, sh, sw, ph, pw, dh, dw):
    n_img, n_ch, h, w = x.shape
    rows, _, oh_n, ow_n = cols.shape
    zero = type(_wide_device(cols[0, 0, 0, 0]))(0)  # the type only: cols is not read
    total = rows * n_img * oh_n * ow_n
    for idx in range(cuda.grid(1), total, cuda.gridsize(1)):
        ow = idx % ow_n
        t = idx // ow_n
        oh = t % oh_n
        t //= oh_n
        n = t % n_img
        r = t // n_img
        j = r % kw
        t = r // kw
        i = t % kh
        c = t // kh
        ih = oh * sh - ph + i * dh
        iw = ow * sw - pw + j * dw
        if ih >= 0 and ih < h and iw >= 0 and iw < w:
            cols[r, n, oh, ow] = x[n, c, ih, iw]
        else:
            cols[r, n, oh, ow] = zero


@cuda_kernel(_sig)
def _col2im_kernel(cols, x, kh, kw, sh, sw, ph, pw, dh, dw):
    n_img, n_ch, h, w = x.shape
    rows, _, oh_n, ow_n = cols.shape
    total = n_img * n_ch * h * w
    zero = type(_wide_device(x[0, 0, 0, 0]))(0)  # the type only: x is not read
    for idx in range(cuda.grid(1), total, cuda.gridsize(1)):
        iw = idx % w
        t = idx // w
        ih = t % h
        t //= h
        c = t % n_ch
        n = t // n_ch
        acc = zero
        for i in range(kh):
            th = ih + ph - i * dh
            if th < 0 or th % sh != 0:
                continue
            oh = th // sh
            if oh >= oh_n:
                continue
            for j in range(kw):
                tw = iw + pw - j * dw
                if tw < 0 or tw % sw != 0:
                    continue
                ow = tw // sw
                if ow >= ow_n:
                    continue
                acc += _wide_device(cols[(c * kh + i) * kw + j, n, oh, ow])
        x[n, c, ih, iw] = acc


# ---- host launchers: the names ``backend.kernel("conv", name)`` resolves ----------------------------
def _im2col_cuda(x, cols, kh, kw, sh, sw, ph, pw, dh, dw):
    """cols[(c, i, j), n, oh, ow] = x[n, c, oh*sh - ph + i*dh, ow*sw - pw + j*dw] (0 outside)."""
    d = dev(cols)
    if d.size == 0:
        return
    launch(_im2col_kernel, d.size, x, cols, kh, kw, sh, sw, ph, pw, dh, dw)


def _col2im_cuda(cols, x, kh, kw, sh, sw, ph, pw, dh, dw):
    """x[n, c, ih, iw] = sum of the cols entries read from (n, c, ih, iw) (a gather)."""
    d = dev(x)
    if d.size == 0:
        return
    launch(_col2im_kernel, d.size, cols, x, kh, kw, sh, sw, ph, pw, dh, dw)
