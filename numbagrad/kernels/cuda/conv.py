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
from numba import types as nbtypes

from ._launch import cuda_kernel, dev, device_fn, grid_kernel, launch
from ._launch import widen as _wide_device

# the names be.kernel(family, name) resolves (see numbagrad/kernels/__init__.py)
ENTRY_POINTS = ("im2col", "col2im")

_I64 = nbtypes.int64


def _sig(T):
    a4 = T[:, :, :, ::1]
    return (a4, a4) + (_I64,) * 8


@device_fn
def _source_device(i, s, pad, n_out, j):
    """Along one axis: the output position whose tap at offset ``j`` (tap index times
    dilation) reads input position ``i`` (``o * s - pad + j == i``), or -1."""
    t = i + pad - j
    if t < 0 or t % s != 0:
        return -1
    o = t // s
    return o if o < n_out else -1


@device_fn
def _im2col_device(r, n, oh, ow, x, cols, kh, kw, sh, sw, ph, pw, dh, dw):
    """cols[r, n, oh, ow] for row ``r = (c*kh + i)*kw + j``."""
    t = r // kw
    j = r - t * kw
    c = t // kh
    i = t - c * kh
    ih = oh * sh - ph + i * dh
    iw = ow * sw - pw + j * dw
    if ih >= 0 and ih < x.shape[2] and iw >= 0 and iw < x.shape[3]:
        cols[r, n, oh, ow] = x[n, c, ih, iw]
    else:
        cols[r, n, oh, ow] = type(_wide_device(cols[0, 0, 0, 0]))(0)  # the type only: cols is not read


@device_fn
def _col2im_device(n, c, ih, iw, cols, x, kh, kw, sh, sw, ph, pw, dh, dw):
    """x[n, c, ih, iw] = the sum of the cols entries that read it."""
    oh_n = cols.shape[2]
    ow_n = cols.shape[3]
    acc = type(_wide_device(x[0, 0, 0, 0]))(0)  # the type only: x is not read
    for i in range(kh):
        oh = _source_device(ih, sh, ph, oh_n, i * dh)
        if oh < 0:
            continue
        for j in range(kw):
            ow = _source_device(iw, sw, pw, ow_n, j * dw)
            if ow >= 0:
                acc += _wide_device(cols[(c * kh + i) * kw + j, n, oh, ow])
    x[n, c, ih, iw] = acc


# one thread per element of the array written (grid-stride, the last axis fastest)
_im2col_kernel = cuda_kernel(_sig)(grid_kernel(__name__, "_im2col_kernel", "x, cols, kh, kw, sh, sw, ph, pw, dh, dw",
                                                _im2col_device, "cols", (0, 1, 2, 3), 4))
_col2im_kernel = cuda_kernel(_sig)(grid_kernel(__name__, "_col2im_kernel", "cols, x, kh, kw, sh, sw, ph, pw, dh, dw",
                                                _col2im_device, "x", (0, 1, 2, 3), 4))


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
