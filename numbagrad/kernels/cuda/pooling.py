"""CUDA twins of ``kernels/cpu/pooling.py``: max / average / adaptive pools on (P, H, W) planes.

Contract: the CPU module's (same launcher names and argument lists; C-contiguous 3-D
device arrays ``x``/``gx`` of shape ``(P, H, W)``, ``out``/``g``/``idx`` of shape
``(P, OH, OW)``, ``idx`` int64; float16, float32 or float64 elements).

=============================  ================================================
launcher                       one thread per
=============================  ================================================
max_pool2d_fwd, avg_pool2d_fwd,  output element (walks its window)
adaptive_*_fwd
max_pool2d_bwd, avg_pool2d_bwd,  input element (gathers over the windows that
adaptive_*_bwd                   cover it)
=============================  ================================================

Backward is a *gather*, not a scatter: each input element finds the few output windows
that contain it (``ceil(k / s)`` per axis for a fixed window, an index range for adaptive
windows) and sums their contributions -- for max pools, the output gradients whose
recorded argmax is this element; for average pools, ``g / divisor``. So there are no
atomics (numba-cuda has no float16 atomic add) and no race, every element of ``gx`` is
written exactly once (no zero fill), and the windows are visited in increasing
``(oh, ow)`` order, the order in which the CPU kernels scatter: float32/float64 results
equal the CPU ones bit for bit.

An output whose dilated window lies wholly in the padding is ``-inf`` with torch's index,
which may name an element outside the window; no element's gather visits it, so it gets
no gradient -- as on the CPU, which skips it explicitly.

Arithmetic: float16 and float32 elements are compared/summed in float32, float64 in
float64 (each kernel body is built twice by a factory with its accumulator type, as in
``softmax.py``; the launcher picks by dtype). Window rules are the CPU module's, from the
same scalar helpers (:mod:`numbagrad.kernels.scalar`: ``first_valid``, ``avg_window``,
``avg_divisor``, ``adaptive_window``).
"""
import numpy as np
from numba import types as nbtypes

from .. import scalar as S
from ._launch import cuda_kernel, device_fn, grid_kernel, launch

# the names be.kernel(family, name) resolves (see numbagrad/kernels/__init__.py)
ENTRY_POINTS = (
    "max_pool2d_fwd", "max_pool2d_bwd", "avg_pool2d_fwd", "avg_pool2d_bwd",
    "adaptive_avg_pool2d_fwd", "adaptive_avg_pool2d_bwd", "adaptive_max_pool2d_fwd",
    "adaptive_max_pool2d_bwd",
)

_I64 = nbtypes.int64
_ACC32_IN = (nbtypes.float16, nbtypes.float32)
_ACC64_IN = (nbtypes.float64,)


def _a3(T):
    return T[:, :, ::1]


@device_fn
def _covering_device(i, s, pad, n_out, j):
    """Output position whose window (tap ``j`` of ``k``) lands on input position ``i``, or -1.
    Windows start at ``o * s - pad``; taps are ``dilation`` apart (folded into ``pad``/``j``
    by the caller)."""
    t = i + pad - j
    if t < 0:
        return -1
    o = t // s
    if o * s != t or o >= n_out:
        return -1
    return o


def _make_kernels(acc_nb, in_types, suffix):
    """The pooling kernels computing in ``acc_nb`` (float32 for half/float32, float64)."""
    neg_inf = float("-inf")
    geo = (_I64,) * 8
    avg_geo = (_I64,) * 8

    @device_fn
    def window_max(x, p, h0, h1, dh, w0, w1, dw):
        """Max of plane ``p``'s window and its flat in-plane index (NaN wins; the first
        element's index for an empty window)."""
        W = x.shape[2]
        m = acc_nb(neg_inf)
        mi = h0 * W + w0
        for ih in range(h0, h1, dh):
            for iw in range(w0, w1, dw):
                v = acc_nb(x[p, ih, iw])
                if v > m or v != v:
                    m = v
                    mi = ih * W + iw
        return m, mi

    @device_fn
    def window_sum(x, p, h0, h1, w0, w1):
        s = acc_nb(0)
        for ih in range(h0, h1):
            for iw in range(w0, w1):
                s += acc_nb(x[p, ih, iw])
        return s

    @device_fn
    def max_fwd(p, oh, ow, x, out, idx, kH, kW, sH, sW, pH, pW, dH, dW):
        h0 = oh * sH - pH
        h1 = min(h0 + (kH - 1) * dH + 1, x.shape[1])
        w0 = ow * sW - pW
        w1 = min(w0 + (kW - 1) * dW + 1, x.shape[2])
        m, mi = window_max(x, p, S.first_valid(h0, dH), h1, dH, S.first_valid(w0, dW), w1, dW)
        out[p, oh, ow] = m
        idx[p, oh, ow] = mi

    @device_fn
    def max_bwd(p, ih, iw, g, idx, gx, kH, kW, sH, sW, pH, pW, dH, dW):
        OH = g.shape[1]
        OW = g.shape[2]
        me = ih * gx.shape[2] + iw
        acc = acc_nb(0)
        for jh in range(kH - 1, -1, -1):  # decreasing tap = increasing oh (the CPU's order)
            oh = _covering_device(ih, sH, pH, OH, jh * dH)
            if oh < 0:
                continue
            for jw in range(kW - 1, -1, -1):
                ow = _covering_device(iw, sW, pW, OW, jw * dW)
                if ow >= 0 and idx[p, oh, ow] == me:
                    acc += acc_nb(g[p, oh, ow])
        gx[p, ih, iw] = acc

    @device_fn
    def avg_fwd(p, oh, ow, x, out, kH, kW, sH, sW, pH, pW, count_include_pad, divisor):
        h0, h1, eh = S.avg_window(oh, sH, pH, kH, x.shape[1])
        w0, w1, ew = S.avg_window(ow, sW, pW, kW, x.shape[2])
        s = acc_nb(0)
        if h0 < h1 and w0 < w1:
            s = window_sum(x, p, h0, h1, w0, w1)
            s = s / acc_nb(S.avg_divisor(h0, h1, eh, w0, w1, ew, count_include_pad, divisor))
        out[p, oh, ow] = s

    @device_fn
    def avg_bwd(p, ih, iw, g, gx, kH, kW, sH, sW, pH, pW, count_include_pad, divisor):
        H = gx.shape[1]
        W = gx.shape[2]
        OH = g.shape[1]
        OW = g.shape[2]
        acc = acc_nb(0)
        for jh in range(kH - 1, -1, -1):
            oh = _covering_device(ih, sH, pH, OH, jh)
            if oh < 0:
                continue
            h0, h1, eh = S.avg_window(oh, sH, pH, kH, H)
            for jw in range(kW - 1, -1, -1):
                ow = _covering_device(iw, sW, pW, OW, jw)
                if ow < 0:
                    continue
                w0, w1, ew = S.avg_window(ow, sW, pW, kW, W)
                d = S.avg_divisor(h0, h1, eh, w0, w1, ew, count_include_pad, divisor)
                acc += acc_nb(g[p, oh, ow]) / acc_nb(d)
        gx[p, ih, iw] = acc

    @device_fn
    def adaptive_avg_fwd(p, oh, ow, x, out):
        h0, h1 = S.adaptive_window(oh, out.shape[1], x.shape[1])
        w0, w1 = S.adaptive_window(ow, out.shape[2], x.shape[2])
        out[p, oh, ow] = window_sum(x, p, h0, h1, w0, w1) / acc_nb((h1 - h0) * (w1 - w0))

    @device_fn
    def adaptive_avg_bwd(p, ih, iw, g, gx):
        H = gx.shape[1]
        W = gx.shape[2]
        OH = g.shape[1]
        OW = g.shape[2]
        acc = acc_nb(0)
        # windows containing ih: floor(ih * OH / H) <= oh <= ((ih + 1) * OH - 1) // H
        for oh in range((ih * OH) // H, ((ih + 1) * OH - 1) // H + 1):
            h0, h1 = S.adaptive_window(oh, OH, H)
            for ow in range((iw * OW) // W, ((iw + 1) * OW - 1) // W + 1):
                w0, w1 = S.adaptive_window(ow, OW, W)
                acc += acc_nb(g[p, oh, ow]) / acc_nb((h1 - h0) * (w1 - w0))
        gx[p, ih, iw] = acc

    @device_fn
    def adaptive_max_fwd(p, oh, ow, x, out, idx):
        h0, h1 = S.adaptive_window(oh, out.shape[1], x.shape[1])
        w0, w1 = S.adaptive_window(ow, out.shape[2], x.shape[2])
        m, mi = window_max(x, p, h0, h1, 1, w0, w1, 1)
        out[p, oh, ow] = m
        idx[p, oh, ow] = mi

    @device_fn
    def adaptive_max_bwd(p, ih, iw, g, idx, gx):
        H = gx.shape[1]
        W = gx.shape[2]
        OH = g.shape[1]
        OW = g.shape[2]
        me = ih * W + iw
        acc = acc_nb(0)
        for oh in range((ih * OH) // H, ((ih + 1) * OH - 1) // H + 1):
            for ow in range((iw * OW) // W, ((iw + 1) * OW - 1) // W + 1):
                if idx[p, oh, ow] == me:
                    acc += acc_nb(g[p, oh, ow])
        gx[p, ih, iw] = acc

    def sigs(*kinds):
        out = []
        for T in in_types:
            sig = []
            for kd in kinds:
                if kd == "a":
                    sig.append(_a3(T))
                elif kd == "i":
                    sig.append(_a3(_I64))
                else:
                    sig.extend(kd)
            out.append(tuple(sig))
        return out

    win = "kH, kW, sH, sW, pH, pW"
    # (element function of one (plane, row, column), the kernel's parameters, the array with a
    # thread per element: the output of a forward, gx of a gather backward; signatures)
    table = ((max_fwd, f"x, out, idx, {win}, dH, dW", "out", sigs("a", "a", "i", geo)),
             (max_bwd, f"g, idx, gx, {win}, dH, dW", "gx", sigs("a", "i", "a", geo)),
             (avg_fwd, f"x, out, {win}, count_include_pad, divisor", "out", sigs("a", "a", avg_geo)),
             (avg_bwd, f"g, gx, {win}, count_include_pad, divisor", "gx", sigs("a", "a", avg_geo)),
             (adaptive_avg_fwd, "x, out", "out", sigs("a", "a")),
             (adaptive_avg_bwd, "g, gx", "gx", sigs("a", "a")),
             (adaptive_max_fwd, "x, out, idx", "out", sigs("a", "a", "i")),
             (adaptive_max_bwd, "g, idx, gx", "gx", sigs("a", "i", "a")))
    mod = __name__
    return {elem.__name__: cuda_kernel(s, name=f"{mod}._{elem.__name__}_{suffix}_kernel")(
                grid_kernel(__name__, elem.__name__, params, elem, over))
            for elem, params, over, s in table}


_K32 = _make_kernels(nbtypes.float32, _ACC32_IN, "acc32")
_K64 = _make_kernels(nbtypes.float64, _ACC64_IN, "acc64")


def _launch(name, n, *args):
    """Launch kernel ``name`` of the accumulator family matching the first array's dtype over
    ``n`` threads (grid-stride)."""
    k = (_K64 if args[0].dtype == np.float64 else _K32)[name]
    launch(k, n, *args)


# ---- host launchers: the names ``backend.kernel("pooling", name)`` resolves -----------------------
def _max_pool2d_fwd_cuda(x, out, idx, kH, kW, sH, sW, pH, pW, dH, dW):
    """out, idx = window max of x and its flat in-plane index; one thread per output element."""
    _launch("max_fwd", out.size, x, out, idx, kH, kW, sH, sW, pH, pW, dH, dW)


def _max_pool2d_bwd_cuda(g, idx, gx, kH, kW, sH, sW, pH, pW, dH, dW):
    """gx[p, i] = sum of g[p, o] over the windows o covering i whose argmax is i; one thread per
    input element."""
    _launch("max_bwd", gx.size, g, idx, gx, kH, kW, sH, sW, pH, pW, dH, dW)


def _avg_pool2d_fwd_cuda(x, out, kH, kW, sH, sW, pH, pW, count_include_pad, divisor):
    """out = window sum / divisor (torch's rules); one thread per output element."""
    _launch("avg_fwd", out.size, x, out, kH, kW, sH, sW, pH, pW, count_include_pad, divisor)


def _avg_pool2d_bwd_cuda(g, gx, kH, kW, sH, sW, pH, pW, count_include_pad, divisor):
    """gx[p, i] = sum of g[p, o] / divisor(o) over the windows o covering i; one thread per
    input element."""
    _launch("avg_bwd", gx.size, g, gx, kH, kW, sH, sW, pH, pW, count_include_pad, divisor)


def _adaptive_avg_pool2d_fwd_cuda(x, out):
    """out = mean over torch's adaptive window; one thread per output element."""
    _launch("adaptive_avg_fwd", out.size, x, out)


def _adaptive_avg_pool2d_bwd_cuda(g, gx):
    """gx[p, i] = sum of g[p, o] / |window o| over the adaptive windows covering i."""
    _launch("adaptive_avg_bwd", gx.size, g, gx)


def _adaptive_max_pool2d_fwd_cuda(x, out, idx):
    """out, idx = max over torch's adaptive window and its flat in-plane index."""
    _launch("adaptive_max_fwd", out.size, x, out, idx)


def _adaptive_max_pool2d_bwd_cuda(g, idx, gx):
    """gx[p, i] = sum of g[p, o] over the adaptive windows o covering i whose argmax is i."""
    _launch("adaptive_max_bwd", gx.size, g, idx, gx)


__all__ = ["_max_pool2d_fwd_cuda", "_max_pool2d_bwd_cuda", "_avg_pool2d_fwd_cuda", "_avg_pool2d_bwd_cuda",
           "_adaptive_avg_pool2d_fwd_cuda", "_adaptive_avg_pool2d_bwd_cuda", "_adaptive_max_pool2d_fwd_cuda",
           "_adaptive_max_pool2d_bwd_cuda"]
