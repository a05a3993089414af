"""CUDA normalisation kernels (twins of ``kernels/cpu/normalization.py``, same launchers'
signatures and layouts: ``(rows, n)`` for layer/RMS norm, ``(N, C, L)`` for batch and
group norm; see the CPU module for the contract).

Reductions use one block of :data:`~._launch.ROW_TPB` threads per reduced slice: a row
(layer norm), a channel (batch norm: its ``N * L`` elements, thread ``t`` taking elements
``t, t + ROW_TPB, ...`` of the flattened (n, l) range), an (n, group) (group norm). Each
thread keeps a private partial and the block combines them with the shared-memory tree
of :func:`~._blockreduce._block_sum_device`. Statistics are two-pass (mean, then squared
deviations; the second pass re-reads from L2). Where a result is a column sum over rows
(the LayerNorm ``dweight``/``dbias`` partials) a flat grid-stride kernel gives each
thread one ``(chunk, column)`` pair, so consecutive threads read consecutive columns
(coalesced). Pure elementwise passes (batch norm with given statistics) are flat
grid-stride kernels.

Per launcher:

* ``_layer_norm_fwd_cuda``: block per row: mean, rstd, then ``(x - mean) * rstd * w + b``;
* ``_layer_norm_bwd_cuda``: block per row for ``dx`` (two block sums), then the flat
  column kernel for ``dwp``/``dbp``;
* ``_batch_norm_stats_cuda``: block per channel; ``_batch_norm_fwd_cuda``: flat;
  ``_batch_norm_bwd_cuda``: block per channel (sums, then ``dx``);
* ``_group_norm_fwd_cuda``: block per (n, group); ``_group_norm_bwd_cuda``: block per
  (n, channel) for the per-sample channel sums ``dwp``/``dbp``, then block per
  (n, group) for ``dx``.

float16 elements are widened to float32 and narrowed at the store; float16/float32
kernels accumulate in float32, float64 in float64 (two builds from one factory, as the
softmax kernels: the shared array's dtype is a compile-time constant). Statistics arrays
(``mean``, ``rstd``, ``var``, ``invstd``) are in the accumulation dtype.
"""
import math

import numpy as np
from numba import cuda, types as nbtypes

from ._launch import ROW_TPB, cuda_kernel, dev, device_fn, launch, launch_rows
from ._launch import widen as _w
from ._blockreduce import _block_sum_device

# the names be.kernel(family, name) resolves (see numbagrad/kernels/__init__.py)
ENTRY_POINTS = (
    "layer_norm_fwd", "layer_norm_bwd", "batch_norm_stats", "batch_norm_fwd", "batch_norm_bwd",
    "group_norm_fwd", "group_norm_bwd",
)

_ACC32_IN = (nbtypes.float16, nbtypes.float32)
_ACC64_IN = (nbtypes.float64,)
_B = nbtypes.boolean


def _make_kernels(acc, acc_nb, in_types, suffix):
    zero = acc(0)
    one = acc(1)
    A = acc_nb

    # Where element k of a reduced slice lies: a row (layer norm), a channel's (n, l) pairs
    # (batch norm), a sample's group of channels (group norm), one (n, channel) plane.
    @device_fn
    def row_at(r, unused, k, L):
        return r, k

    @device_fn
    def channel_at(c, unused, k, L):
        i = k // L
        return i, c, k - i * L

    @device_fn
    def group_at(i, c0, k, L):
        cc = k // L
        return i, c0 + cc, k - cc * L

    @device_fn
    def plane_at(i, c, k, L):
        return i, c, k

    def slice_stats(at):
        @device_fn
        def stats(sm, t, x, p, q, M, L, inv_m, center):
            """Mean (0 without ``center``) and biased variance of slice ``(p, q)``'s ``M``
            elements, two-pass, by the block."""
            m = zero
            if center:
                s = zero
                for k in range(t, M, ROW_TPB):
                    s += _w(x[at(p, q, k, L)])
                m = _block_sum_device(sm, t, s) * inv_m
            s = zero
            for k in range(t, M, ROW_TPB):
                d = _w(x[at(p, q, k, L)]) - m
                s += d * d
            return m, _block_sum_device(sm, t, s) * inv_m
        return stats

    @device_fn
    def column_weight(w, has_w, k):
        """The weight of column (layer norm) or channel (group norm) ``k``; 1 without one."""
        return _w(w[k]) if has_w else one

    @device_fn
    def no_weight(w, has_w, k):
        return one

    def slice_grad_sums(at, weight):
        @device_fn
        def sums(sm, t, g, x, w, has_w, p, q, M, L, m):
            """Block sums of ``gw`` and ``gw (x - m)`` over slice ``(p, q)``, ``gw = g *
            weight(w, has_w, k)``."""
            s1 = zero
            s2 = zero
            for k in range(t, M, ROW_TPB):
                ix = at(p, q, k, L)
                gw = _w(g[ix]) * weight(w, has_w, k)
                s1 += gw
                s2 += gw * (_w(x[ix]) - m)
            return _block_sum_device(sm, t, s1), _block_sum_device(sm, t, s2)
        return sums

    @device_fn
    def group_dims(x, mean):
        """Group norm's channels per group, elements per group ``M`` and ``1 / M``."""
        cg = x.shape[1] // mean.shape[1]
        M = cg * x.shape[2]
        return cg, M, one / acc(M)

    row_stats = slice_stats(row_at)
    channel_stats = slice_stats(channel_at)
    group_stats = slice_stats(group_at)
    row_grad_sums = slice_grad_sums(row_at, column_weight)
    channel_grad_sums = slice_grad_sums(channel_at, no_weight)
    plane_grad_sums = slice_grad_sums(plane_at, no_weight)

    def layer_norm_fwd(x, w, b, center, eps, out, mean, rstd):
        sm = cuda.shared.array(ROW_TPB, acc_nb)
        t = cuda.threadIdx.x
        rows, n = x.shape
        inv_n = one / acc(n)
        has_w = w.shape[0] != 0
        has_b = b.shape[0] != 0
        for r in range(cuda.blockIdx.x, rows, cuda.gridDim.x):
            m, v = row_stats(sm, t, x, r, 0, n, n, inv_n, center)
            rs = one / math.sqrt(v + eps)
            if t == 0:
                mean[r] = m
                rstd[r] = rs
            for j in range(t, n, ROW_TPB):
                v = (_w(x[r, j]) - m) * rs
                if has_w:
                    v = v * _w(w[j])
                if has_b:
                    v = v + _w(b[j])
                out[r, j] = v

    def layer_norm_bwd_dx(g, x, mean, rstd, w, center, dx):
        sm = cuda.shared.array(ROW_TPB, acc_nb)
        t = cuda.threadIdx.x
        rows, n = x.shape
        inv_n = one / acc(n)
        has_w = w.shape[0] != 0
        for r in range(cuda.blockIdx.x, rows, cuda.gridDim.x):
            m = mean[r]
            rs = rstd[r]
            a, c = row_grad_sums(sm, t, g, x, w, has_w, r, 0, n, n, m)
            a = a * inv_n
            c = c * rs * inv_n
            if not center:
                a = zero
            for j in range(t, n, ROW_TPB):
                gw = _w(g[r, j])
                if has_w:
                    gw = gw * _w(w[j])
                dx[r, j] = rs * (gw - a - (_w(x[r, j]) - m) * rs * c)

    def layer_norm_bwd_cols(g, x, mean, rstd, dwp, dbp):
        rows, n = x.shape
        P = dwp.shape[0]
        for k in range(cuda.grid(1), P * n, cuda.gridsize(1)):
            p = k // n
            j = k - p * n
            sw = zero
            sb = zero
            for r in range(p * rows // P, (p + 1) * rows // P):
                gv = _w(g[r, j])
                sw += gv * ((_w(x[r, j]) - mean[r]) * rstd[r])
                sb += gv
            dwp[p, j] = sw
            dbp[p, j] = sb

    def batch_norm_stats(x, mean, var):
        sm = cuda.shared.array(ROW_TPB, acc_nb)
        t = cuda.threadIdx.x
        N, C, L = x.shape
        M = N * L
        inv_m = one / acc(M)
        for c in range(cuda.blockIdx.x, C, cuda.gridDim.x):
            m, v = channel_stats(sm, t, x, c, 0, M, L, inv_m, True)
            if t == 0:
                mean[c] = m
                var[c] = v

    def batch_norm_fwd(x, mean, invstd, w, b, out):
        N, C, L = x.shape
        has_w = w.shape[0] != 0
        has_b = b.shape[0] != 0
        for k in range(cuda.grid(1), N * C * L, cuda.gridsize(1)):
            i = k // (C * L)
            rem = k - i * (C * L)
            c = rem // L
            l = rem - c * L
            a = invstd[c]
            if has_w:
                a = a * _w(w[c])
            v = (_w(x[i, c, l]) - mean[c]) * a
            if has_b:
                v = v + _w(b[c])
            out[i, c, l] = v

    def batch_norm_bwd(g, x, mean, invstd, w, training, dx, dw, db):
        sm = cuda.shared.array(ROW_TPB, acc_nb)
        t = cuda.threadIdx.x
        N, C, L = x.shape
        M = N * L
        inv_m = one / acc(M)
        has_w = w.shape[0] != 0
        for c in range(cuda.blockIdx.x, C, cuda.gridDim.x):
            m = mean[c]
            istd = invstd[c]
            s1, s2 = channel_grad_sums(sm, t, g, x, w, False, c, 0, M, L, m)
            s2 = s2 * istd
            if t == 0:
                db[c] = s1
                dw[c] = s2
            ws = istd
            if has_w:
                ws = ws * _w(w[c])
            sg = s1 * inv_m
            k2 = s2 * istd * inv_m
            for k in range(t, M, ROW_TPB):
                i = k // L
                l = k - i * L
                if training:
                    dx[i, c, l] = ws * (_w(g[i, c, l]) - sg - (_w(x[i, c, l]) - m) * k2)
                else:
                    dx[i, c, l] = ws * _w(g[i, c, l])

    def group_norm_fwd(x, w, b, eps, out, mean, rstd):
        sm = cuda.shared.array(ROW_TPB, acc_nb)
        t = cuda.threadIdx.x
        N, C, L = x.shape
        G = mean.shape[1]
        cg, M, inv_m = group_dims(x, mean)
        has_w = w.shape[0] != 0
        has_b = b.shape[0] != 0
        for q in range(cuda.blockIdx.x, N * G, cuda.gridDim.x):
            i = q // G
            c0 = (q - i * G) * cg
            m, v = group_stats(sm, t, x, i, c0, M, L, inv_m, True)
            rs = one / math.sqrt(v + eps)
            if t == 0:
                mean[i, q - i * G] = m
                rstd[i, q - i * G] = rs
            for k in range(t, M, ROW_TPB):
                ix = group_at(i, c0, k, L)
                v = (_w(x[ix]) - m) * rs
                if has_w:
                    v = v * _w(w[ix[1]])
                if has_b:
                    v = v + _w(b[ix[1]])
                out[ix] = v

    def group_norm_bwd_sums(g, x, mean, rstd, dwp, dbp):
        sm = cuda.shared.array(ROW_TPB, acc_nb)
        t = cuda.threadIdx.x
        N, C, L = x.shape
        G = mean.shape[1]
        cg = C // G
        for q in range(cuda.blockIdx.x, N * C, cuda.gridDim.x):
            i = q // C
            c = q - i * C
            grp = c // cg
            m = mean[i, grp]
            s1, s2 = plane_grad_sums(sm, t, g, x, dbp, False, i, c, L, L, m)
            s2 = s2 * rstd[i, grp]
            if t == 0:
                dbp[i, c] = s1
                dwp[i, c] = s2

    def group_norm_bwd_dx(g, x, mean, rstd, w, dwp, dbp, dx):
        sm = cuda.shared.array(ROW_TPB, acc_nb)
        t = cuda.threadIdx.x
        N, C, L = x.shape
        G = mean.shape[1]
        cg, M, inv_m = group_dims(x, mean)
        has_w = w.shape[0] != 0
        for q in range(cuda.blockIdx.x, N * G, cuda.gridDim.x):
            i = q // G
            grp = q - i * G
            c0 = grp * cg
            m = mean[i, grp]
            rs = rstd[i, grp]
            sa = zero
            sc = zero
            for cc in range(t, cg, ROW_TPB):
                wc = column_weight(w, has_w, c0 + cc)
                sa += wc * _w(dbp[i, c0 + cc])
                sc += wc * _w(dwp[i, c0 + cc])
            sa = _block_sum_device(sm, t, sa) * inv_m
            sc = _block_sum_device(sm, t, sc) * inv_m
            for k in range(t, M, ROW_TPB):
                ix = group_at(i, c0, k, L)
                gw = _w(g[ix])
                if has_w:
                    gw = gw * _w(w[ix[1]])
                dx[ix] = rs * (gw - sa - (_w(x[ix]) - m) * rs * sc)

    def sigs(*kinds):
        """Example signatures per input type: 'x2'/'x3' 2-/3-D input-typed arrays, 'v'
        1-D input-typed, 'a1'/'a2' 1-/2-D accumulation-typed, 's' an accumulation scalar,
        'b' a boolean."""
        out = []
        for T in in_types:
            m = {"x2": T[:, ::1], "x3": T[:, :, ::1], "v": T[::1], "a1": A[::1], "a2": A[:, ::1],
                 "s": A, "b": _B}
            out.append(tuple(m[k] for k in kinds))
        return out

    table = (
        (layer_norm_fwd, ("x2", "v", "v", "b", "s", "x2", "a1", "a1")),
        (layer_norm_bwd_dx, ("x2", "x2", "a1", "a1", "v", "b", "x2")),
        (layer_norm_bwd_cols, ("x2", "x2", "a1", "a1", "x2", "x2")),
        (batch_norm_stats, ("x3", "a1", "a1")),
        (batch_norm_fwd, ("x3", "a1", "a1", "v", "v", "x3")),
        (batch_norm_bwd, ("x3", "x3", "a1", "a1", "v", "b", "x3", "v", "v")),
        (group_norm_fwd, ("x3", "v", "v", "s", "x3", "a2", "a2")),
        (group_norm_bwd_sums, ("x3", "x3", "a2", "a2", "x2", "x2")),
        (group_norm_bwd_dx, ("x3", "x3", "a2", "a2", "v", "x2", "x2", "x3")),
    )
    mod = __name__
    return {fn.__name__: cuda_kernel(sigs(*kinds), name=f"{mod}._{fn.__name__}_{suffix}_kernel")(fn)
            for fn, kinds in table}


_K32 = _make_kernels(np.float32, nbtypes.float32, _ACC32_IN, "acc32")
_K64 = _make_kernels(np.float64, nbtypes.float64, _ACC64_IN, "acc64")


def _k(name, a):
    """The build of kernel ``name`` accumulating in ``a``'s precision."""
    return (_K64 if dev(a).dtype == np.float64 else _K32)[name]


# ---- host launchers: the names ``backend.kernel("normalization", name)`` resolves ----------------
def _layer_norm_fwd_cuda(x, w, b, center, eps, out, mean, rstd):
    """Layer norm (``center=False``: RMS norm) of ``(rows, n)`` rows; block per row."""
    launch_rows(_k("layer_norm_fwd", x), x.shape[0], x, w, b, center, eps, out, mean, rstd)


def _layer_norm_bwd_cuda(g, x, mean, rstd, w, center, dx, dwp, dbp):
    """``dx`` (block per row) and the chunk partials ``dwp``/``dbp`` (flat, thread per
    (chunk, column))."""
    rows = x.shape[0]
    launch_rows(_k("layer_norm_bwd_dx", x), rows, g, x, mean, rstd, w, center, dx)
    # with no rows the column kernel still runs and writes zero sums
    launch(_k("layer_norm_bwd_cols", x), dwp.shape[0] * dwp.shape[1], g, x, mean, rstd, dwp, dbp)


def _batch_norm_stats_cuda(x, mean, var):
    """Per-channel mean and biased variance of ``(N, C, L)``; block per channel."""
    launch_rows(_k("batch_norm_stats", x), x.shape[1], x, mean, var)


def _batch_norm_fwd_cuda(x, mean, invstd, w, b, out):
    """``(x - mean[c]) * invstd[c] * w[c] + b[c]``; flat, thread per element."""
    launch(_k("batch_norm_fwd", x), x.size, x, mean, invstd, w, b, out)


def _batch_norm_bwd_cuda(g, x, mean, invstd, w, training, dx, dw, db):
    """Batch-norm backward; block per channel."""
    launch_rows(_k("batch_norm_bwd", x), x.shape[1], g, x, mean, invstd, w, training, dx, dw, db)


def _group_norm_fwd_cuda(x, w, b, eps, out, mean, rstd):
    """Group norm of ``(N, C, L)``; block per (n, group)."""
    launch_rows(_k("group_norm_fwd", x), mean.shape[0] * mean.shape[1], x, w, b, eps, out, mean, rstd)


def _group_norm_bwd_cuda(g, x, mean, rstd, w, dx, dwp, dbp):
    """Per-(n, channel) sums (block each), then ``dx`` (block per (n, group))."""
    N, C = x.shape[0], x.shape[1]
    launch_rows(_k("group_norm_bwd_sums", x), N * C, g, x, mean, rstd, dwp, dbp)
    launch_rows(_k("group_norm_bwd_dx", x), mean.shape[0] * mean.shape[1], g, x, mean, rstd, w, dwp, dbp, dx)
