"""L-BFGS kernels over one flat parameter vector (``numbagrad/optim/lbfgs.py``).

L-BFGS sees a parameter group as a single vector of ``n`` elements (the optimizer's flat
arena, see ``numbagrad/optim/optimizer.py``). Its curvature history lives in two ring
buffers of shape ``(cap, n)``: ``dirs`` (the gradient differences ``y``) and ``stps``
(the steps ``s``), with ``ro[j] = 1 / (y_j . s_j)``; the ``count`` live pairs occupy
rows ``(start + k) % cap`` for ``k = 0 .. count - 1``, oldest first.

Kernels (the same arguments on every backend):

* ``_lbfgs_gather_cpu(grad, layout, out)``: ``out`` is
  the group's gradient with zeros where a parameter has no gradient (``active[s] == 0``),
  like ``torch.optim.LBFGS._gather_flat_grad``; each parameter's gradient is read from its
  arena slot or, through ``gsrc``, where its array is (``optim.py``'s ``grad_block``;
  ``layout``: the arena tables, as every optimizer kernel takes them).
* ``_lbfgs_axpy_cpu(x, d, t)``: ``x += t * d`` rounded once (``x.add_(d, alpha=t)`` is
  an fma in torch, measured for float32 and float64).
* ``_lbfgs_dot_cpu(a, b, partial)``: ``a . b`` (float64 result).
* ``_lbfgs_pair_cpu(grad, prev_grad, d, t, y, s, partial)``: writes ``y = grad -
  prev_grad`` and ``s = d * t`` and returns ``(y . s, y . y)``.
* ``_lbfgs_absstats_cpu(x, partial)``: ``(max |x|, sum |x|)`` (NaN propagates to the max).
* ``_lbfgs_direction_cpu(grad, dirs, stps, ro, al, start, count, h_diag, d, partial)``:
  the two-loop recursion (Nocedal & Wright, Alg. 7.4): ``d = -H grad`` with the
  inverse-Hessian approximation ``H`` of the history and initial scaling ``h_diag``;
  ``al[k]`` (logical index ``k``) receives the first loop's coefficients.

Reductions accumulate in float64 over fixed chunks: ``partial`` is a float64 scratch
array of ``2 * nchunks`` entries (two accumulators per chunk), the chunks are
``ceil(n / nchunks)`` elements, each summed serially, then the chunk sums in order. So the
serial and the ``prange`` twin give the same bits, whatever the thread count.

Rounding: the two-loop recursion follows ``torch.optim.LBFGS`` operation by operation in
the vector's dtype (for float32: ``al = fl32(fl32(s . q) * ro)``, ``q += -al * y`` as an
fma, ``r = q * H_diag``, ``be = fl32(fl32(y . r) * ro)``, ``r += (al - be) * s`` as an
fma). Only the dot products differ: torch's float32 ``dot`` is MKL's ``sdot``, whose
summation order matches none of the simple orders tried (sequential, 4..64 lanes, with
or without fma); the float64-accumulated dot rounded once agreed with it in about 37% of
random cases and is within ~1e-7 relative otherwise.
"""
import numpy as np
from numba import prange

from .._jit import flat_kernel, scalar_helper
from ._fma import fma
from .optim import axpy, grad_block

# the names be.kernel(family, name) resolves (see numbagrad/kernels/__init__.py)
ENTRY_POINTS = ("lbfgs_gather", "lbfgs_axpy", "lbfgs_dot", "lbfgs_pair", "lbfgs_absstats", "lbfgs_direction")

__all__ = ["_lbfgs_gather_cpu", "_lbfgs_axpy_cpu", "_lbfgs_dot_cpu", "_lbfgs_pair_cpu",
           "_lbfgs_absstats_cpu", "_lbfgs_direction_cpu"]

_AXPY_CHUNK = 16384


@scalar_helper
def _chunking(n, partial):
    """``(nch, ch)``: a reduction over ``n`` elements with this ``partial`` scratch runs over
    ``nch = partial.size // 2`` chunks of ``ch = ceil(n / nch)`` elements."""
    nch = partial.size // 2
    return nch, (n + nch - 1) // nch


@scalar_helper
def _span(c, ch, n):
    """Elements ``[lo, hi)`` of chunk ``c`` (of ``ch`` elements; the last ones may be short
    or empty)."""
    lo = min(c * ch, n)
    return lo, min(lo + ch, n)


@scalar_helper
def _chunk_sum(partial, nch):
    """The chunks' first accumulators ``partial[2c]``, summed in chunk order."""
    tot = 0.0
    for c in range(nch):
        tot += partial[2 * c]
    return tot


@scalar_helper
def _nan_max(mx, v):
    """``max(mx, v)``, NaN winning (as ``torch.max``): once ``mx`` is NaN it stays."""
    if v > mx or v != v:
        if mx == mx:
            return v
    return mx


@scalar_helper
def _axpy_chunk(dd, uu, coef, ww, with_dot):
    """``dd = fma(uu, coef, dd)`` over one chunk; returns ``ww . dd`` (the new values, in
    float64) when ``with_dot``, else 0 (``ww`` is then not read)."""
    acc = 0.0
    if with_dot:
        for i in range(dd.size):
            v = fma(uu[i], coef, dd[i])
            dd[i] = v
            acc += np.float64(ww[i]) * np.float64(v)
    else:
        axpy(dd, uu, coef)
    return acc


@flat_kernel
def _lbfgs_gather_cpu(grad, layout, out):
    """``out`` = the gradient (``grad_block``) on the blocks of active parameters, 0 on the
    others (``layout``: the arena tables, as for every optimizer kernel)."""
    blk_start, blk_end, blk_seg, active, gsrc = layout
    for b in prange(blk_start.size):
        lo = blk_start[b]
        hi = blk_end[b]
        oo = out[lo:hi]
        s = blk_seg[b]
        if active[s]:
            gg = grad_block(grad, gsrc, s, lo, hi)
            for i in range(hi - lo):
                oo[i] = gg[i]
        else:
            for i in range(hi - lo):
                oo[i] = 0


@flat_kernel
def _lbfgs_axpy_cpu(x, d, t):
    """``x = fma(d, t, x)`` (``t`` typed like ``x``)."""
    n = x.size
    nch = (n + _AXPY_CHUNK - 1) // _AXPY_CHUNK
    for c in prange(nch):
        lo = c * _AXPY_CHUNK
        hi = min(lo + _AXPY_CHUNK, n)
        axpy(x[lo:hi], d[lo:hi], t)


@flat_kernel
def _lbfgs_dot_cpu(a, b, partial):
    """``a . b`` accumulated in float64 over the chunks of ``partial``."""
    nch, ch = _chunking(a.size, partial)
    for c in prange(nch):
        lo, hi = _span(c, ch, a.size)
        aa = a[lo:hi]
        bb = b[lo:hi]
        acc = 0.0
        for i in range(hi - lo):
            acc += np.float64(aa[i]) * np.float64(bb[i])
        partial[2 * c] = acc
    return _chunk_sum(partial, nch)


@flat_kernel
def _lbfgs_pair_cpu(grad, prev_grad, d, t, y, s, partial):
    """``y = grad - prev_grad``, ``s = d * t`` (``t`` typed like the arrays); returns
    ``(y . s, y . y)`` in float64."""
    nch, ch = _chunking(grad.size, partial)
    for c in prange(nch):
        lo, hi = _span(c, ch, grad.size)
        gg = grad[lo:hi]
        pg = prev_grad[lo:hi]
        dd = d[lo:hi]
        yy = y[lo:hi]
        ss = s[lo:hi]
        ys = 0.0
        y2 = 0.0
        for i in range(hi - lo):
            yv = gg[i] - pg[i]
            sv = dd[i] * t
            yy[i] = yv
            ss[i] = sv
            y64 = np.float64(yv)
            ys += y64 * np.float64(sv)
            y2 += y64 * y64
        partial[2 * c] = ys
        partial[2 * c + 1] = y2
    y2 = 0.0
    for c in range(nch):
        y2 += partial[2 * c + 1]
    return _chunk_sum(partial, nch), y2


@flat_kernel
def _lbfgs_absstats_cpu(x, partial):
    """``(max |x|, sum |x|)`` in float64; a NaN makes the max NaN (as ``torch.max``)."""
    nch, ch = _chunking(x.size, partial)
    for c in prange(nch):
        lo, hi = _span(c, ch, x.size)
        xx = x[lo:hi]
        mx = 0.0
        sm = 0.0
        for i in range(hi - lo):
            v = abs(np.float64(xx[i]))
            mx = _nan_max(mx, v)
            sm += v
        partial[2 * c] = mx
        partial[2 * c + 1] = sm
    mx = 0.0
    sm = 0.0
    for c in range(nch):
        mx = _nan_max(mx, partial[2 * c])
        sm += partial[2 * c + 1]
    return mx, sm


@flat_kernel
def _lbfgs_direction_cpu(grad, dirs, stps, ro, al, start, count, h_diag, d, partial):
    """L-BFGS two-loop recursion: ``d = -H grad``.

    ``dirs``/``stps`` are the ``(cap, n)`` rings of ``y``/``s``, ``ro`` their ``(cap,)``
    ring of ``1 / (y . s)`` (typed like ``grad``), the live pairs at rows ``(start + k)
    % cap``, ``k < count``, oldest first. ``h_diag`` (typed like ``grad``) scales the
    initial Hessian. ``al`` (at least ``count`` entries) receives the first loop's
    coefficients at logical index ``k``. Scalars are rounded to the vector's dtype where
    torch's 0-d tensors round (see the module docstring).

    Each pass over ``d`` also accumulates the dot product the next coefficient needs
    (``s . q`` or ``y . r`` with the values just stored), so the recursion reads the
    vectors ``2 * count + 2`` times instead of ``4 * count + 2``; the sums are the same as
    separate passes would give.
    """
    T = type(h_diag)
    n = grad.size
    cap = dirs.shape[0]
    nch, ch = _chunking(n, partial)
    # q = -grad, with s_newest . q
    nxt = (start + count - 1) % cap
    for c in prange(nch):
        lo, hi = _span(c, ch, n)
        gg = grad[lo:hi]
        dd = d[lo:hi]
        if count > 0:
            sr = stps[nxt, lo:hi]
            acc = 0.0
            for i in range(hi - lo):
                v = -gg[i]
                dd[i] = v
                acc += np.float64(sr[i]) * np.float64(v)
            partial[2 * c] = acc
        else:
            for i in range(hi - lo):
                dd[i] = -gg[i]
    # first loop, newest pair first: al_k = ro_k * (s_k . q);  q -= al_k * y_k
    for kk in range(count):
        k = count - 1 - kk
        j = (start + k) % cap
        a = T(_chunk_sum(partial, nch)) * ro[j]
        al[k] = a
        na = -a
        nxt = (start + k - 1) % cap
        for c in prange(nch):
            lo, hi = _span(c, ch, n)
            acc = _axpy_chunk(d[lo:hi], dirs[j, lo:hi], na, stps[nxt, lo:hi], k > 0)
            if k > 0:
                partial[2 * c] = acc
    # r = h_diag * q, with y_oldest . r
    for c in prange(nch):
        lo, hi = _span(c, ch, n)
        dd = d[lo:hi]
        if count > 0:
            yr = dirs[start % cap, lo:hi]
            acc = 0.0
            for i in range(hi - lo):
                v = dd[i] * h_diag
                dd[i] = v
                acc += np.float64(yr[i]) * np.float64(v)
            partial[2 * c] = acc
        else:
            for i in range(hi - lo):
                dd[i] = dd[i] * h_diag
    # second loop, oldest pair first: be_k = ro_k * (y_k . r);  r += (al_k - be_k) * s_k
    for k in range(count):
        j = (start + k) % cap
        be = T(_chunk_sum(partial, nch)) * ro[j]
        coef = al[k] - be
        nxt = (start + k + 1) % cap
        for c in prange(nch):
            lo, hi = _span(c, ch, n)
            acc = _axpy_chunk(d[lo:hi], stps[j, lo:hi], coef, dirs[nxt, lo:hi], k + 1 < count)
            if k + 1 < count:
                partial[2 * c] = acc
