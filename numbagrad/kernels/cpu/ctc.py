"""CTC loss kernels: the forward (alpha) and backward (beta) recursions in log space.

Contract (the same for the CUDA twins in ``kernels/cuda/ctc.py``)::

    _ctc_loss_fwd_cpu(log_probs, targets, input_lengths, target_lengths, blank, zero_infinity,
                      lab, smask, alpha, nll, loss)
    _ctc_loss_bwd_cpu(log_probs, input_lengths, target_lengths, zero_infinity,
                      lab, smask, alpha, nll, gscale, work, grad)

* ``log_probs`` ``(T, N, C)`` and ``grad`` ``(T, N, C)``: C-contiguous, same float dtype.
* ``targets`` ``(N, S)`` int64, padded (the op turns concatenated targets into this);
  ``input_lengths`` / ``target_lengths`` int64 ``(N,)``, already validated by the op
  (``0 <= T_b <= T``, ``0 <= L_b <= S``, labels in ``[0, C)`` and never ``blank``).
* ``lab`` int64 and ``smask`` ``(N, W)``, ``W = round_up(2*max(L)+1, 8) + 2``
  (``ops.ctc.ctc_width``): written by the forward and read by the backward.
  ``lab[b, s]`` is the extended label sequence ``l'`` (blank, l1, blank, l2, ..., blank;
  blank padding past ``2 L_b + 1``); ``smask[b, s]`` is ``0`` where the alpha recursion may
  skip from ``s-2`` (``l'_s`` is a label different from ``l'_{s-2}``) and ``-inf`` elsewhere,
  so the skip term is ``alpha[s-2] + smask[s]`` with no branch.
* ``alpha`` ``(N, T, W)``, ``nll`` ``(N,)``, ``gscale`` ``(N,)`` and ``work`` ``(N, 3W + C)``
  are in the compute dtype (the kernels compute in ``alpha``'s dtype); ``loss`` is in the
  log_probs dtype. ``nll`` is the raw negative log-likelihood (``inf`` for an impossible
  alignment); ``loss`` is ``nll`` with ``inf`` replaced by 0 when ``zero_infinity``.
* ``gscale[b]`` is the upstream gradient of sample ``b``'s raw loss (reduction folded in).

Math (``y = log_probs[:, b, :]``, ``S' = 2L+1``)::

    alpha[0, 0] = y[0, blank],  alpha[0, 1] = y[0, l1]
    alpha[t, s] = y[t, l'_s] + lse(alpha[t-1, s], alpha[t-1, s-1], alpha[t-1, s-2] + smask[s])
    nll         = -lse(alpha[T_b-1, S'-1], alpha[T_b-1, S'-2])
    beta[T_b-1, S'-1] = y[T_b-1, blank],  beta[T_b-1, S'-2] = y[T_b-1, l_L]
    beta[t, s]  = y[t, l'_s] + lse(beta[t+1, s], beta[t+1, s+1], beta[t+1, s+2] + smask[s+2])

Both include ``y[t, l'_s]``, so ``gamma[t, s] = exp(alpha + beta - y[t, l'_s] + nll)`` is the
posterior probability that an alignment is at position ``s`` at time ``t``; ``sum_{s: l'_s = c}
gamma[t, s]`` is ``-d nll / d y[t, c]`` for free (unnormalised) ``y``. The gradient written is
PyTorch's (``exp(lcab + nll - y)`` summed here in linear space, every term in ``[0, 1]``)::

    grad[t, b, c] = gscale[b] * (exp(y[t, c]) - sum_{s: l'_s = c} gamma[t, s])   for t < T_b
    grad[t, b, c] = 0                                                           for t >= T_b

which is the derivative w.r.t. the logits when ``y = log_softmax(logits)`` (the ``exp(y)``
term is what log_softmax's backward removes again); samples with ``nll = inf`` get NaN
rows for ``t < T_b`` (PyTorch's ``exp(-inf + inf)``), or zeros with ``zero_infinity``.

-inf safety. ``lse(a, b, c) = m + log(e^{a-m} + e^{b-m} + e^{c-m})`` with ``m`` the max; when
every operand is -inf, ``m`` is replaced by 0 so each ``e^{x-m}`` is ``e^{-inf} = 0`` and the
result is ``log(0) = -inf``, never ``-inf - (-inf) = NaN``. Cells that cannot lie on an
alignment stay -inf, so rows are computed over every ``s`` without the reachable-band bounds
(branch-free loops that LLVM vectorises).

Speed. Every cell costs three ``exp`` and one ``log``. pip's llvmlite has no SVML, so libm
calls inside @njit are scalar; the loops use :func:`vexp0` and :func:`vlog1` below (bit
manipulation and polynomials, which LLVM vectorises). Vectorised over a multiple of 8
cells the loop runs at 3.4 ns a cell; a gather ``y[lab[s]]`` or numba's
``max()`` (NaN branches) inside it stops vectorisation (~20 ns a cell), hence ternaries, a
separate gather pass and row widths rounded up to 8. The backward reads the saved
``alpha`` instead of recomputing it, which would add the whole forward to every backward.
(The timings: ``perf/README.md``, "Measurement notes", ``kernels/cpu/ctc.py``.)
The per-sample work is an ordinary @njit function called from the ``prange`` body (not
inlined), which keeps the compile time of the parallel kernels down (see loss.py).
"""
import math

import numpy as np
from numba import prange
from numba.core import types
from numba.extending import overload

from .._jit import cpu_jit, scalar_helper
from .loss import _E64, _F, _bits_of_float, _float_from_bits, _vexp_overload

# the names be.kernel(family, name) resolves (see numbagrad/kernels/__init__.py)
ENTRY_POINTS = ("ctc_loss_fwd", "ctc_loss_bwd")

__all__ = ["_ctc_loss_fwd_cpu", "_ctc_loss_bwd_cpu", "vexp0", "vlog1"]


# ---- branch-free exp and log ----------------------------------------------------------------
# Each loop body below evaluates three exponentials. loss.py's ``vexp`` selects with Python
# ternaries, and three inlined copies of those in one loop trip a numba SSA check
# (``NumbaIRAssumptionWarning``) at compile time. ``vexp0`` is the same Cody-Waite exp (loss.py's
# ``_vexp_overload``) with ``max()`` and an arithmetic mask instead, and ``vlog1`` an atanh-series
# log written the same way; LLVM turns these into vector selects just the same.
def vexp0(y):
    """``exp(y)`` (float32/float64) with results below the normal range flushed to 0 and
    ``exp(-inf) = 0`` exactly; vectorisable in @njit loops. (Plain Python: ``math.exp``.)"""
    return math.exp(y)


@overload(vexp0, inline="always")
def _vexp0_impl(y):
    return _vexp_overload(y, branch_free=True)


def vlog1(x):
    """``log(x)`` for a finite float32/float64 ``x >= 1`` (the CTC sums ``1 + e^a + e^b``),
    vectorisable in @njit loops: ``x = 2^e m`` from the bits with ``m`` in ``[sqrt(1/2),
    sqrt(2))``, ``log m = 2 atanh((m-1)/(m+1))`` as an odd series (to ``f^9`` in float32,
    ``f^21`` in float64; ``|f| <= 0.1716``), ``e ln2`` in two parts. Relative error about one
    machine epsilon. (Plain Python: ``math.log``.)"""
    return math.log(x)


_SQRT2 = math.sqrt(2.0)
_C64 = tuple(2.0 / (2 * k + 1) for k in range(0, 11))  # 2, 2/3, ..., 2/21
_C32 = tuple(_F(2.0 / (2 * k + 1)) for k in range(0, 5))  # 2, ..., 2/9


@overload(vlog1, inline="always")
def _vlog1_impl(x):
    if x == types.float32:
        sq2, half, one, ln2 = _F(_SQRT2), _F(0.5), _F(1.0), _F(math.log(2.0))
        c0, c1, c2, c3, c4 = _C32

        def impl(x):
            bits = _bits_of_float(x)
            m = _float_from_bits((bits & 0x007FFFFF) | 0x3F800000, x)
            big = _F(m > sq2)
            m = m - (m * half) * big
            ef = _F((bits >> 23) - 127) + big
            f = (m - one) / (m + one)
            z = f * f
            return f * (c0 + z * (c1 + z * (c2 + z * (c3 + z * c4)))) + ef * ln2
        return impl
    if x == types.float64:
        sq2, half, one = _SQRT2, 0.5, 1.0
        ln2_hi, ln2_lo = _E64[1], _E64[2]
        c0, c1, c2, c3, c4, c5, c6, c7, c8, c9, c10 = _C64

        def impl(x):
            bits = _bits_of_float(x)
            m = _float_from_bits((bits & 0x000FFFFFFFFFFFFF) | 0x3FF0000000000000, x)
            big = np.float64(m > sq2)
            m = m - (m * half) * big
            ef = np.float64((bits >> 52) - 1023) + big
            f = (m - one) / (m + one)
            z = f * f
            p = c0 + z * (c1 + z * (c2 + z * (c3 + z * (c4 + z * (c5 + z * (
                c6 + z * (c7 + z * (c8 + z * (c9 + z * c10)))))))))
            return ef * ln2_hi + (f * p + ef * ln2_lo)
        return impl
    return None


@cpu_jit
def _lse2(a, b):
    """log(e^a + e^b), -inf safe (scalar)."""
    m = a if a > b else b
    if m == -np.inf:
        return m
    return m + math.log(math.exp(a - m) + math.exp(b - m))


@scalar_helper
def _lse3v(a1, a2, a3, low, one):
    """log(e^a1 + e^a2 + e^a3) in the vector loops (ternaries, :func:`vexp0`, :func:`vlog1`);
    -inf when all three are -inf (``low``: a finite bound below any reachable sum, ``one``: 1
    in the compute type)."""
    m = a1 if a1 > a2 else a2
    m = a3 if a3 > m else m
    ms = m if m > low else low  # all -inf: e^(-inf - low) = 0, log(1) = 0, m stays -inf
    acc = vexp0(a1 - ms) + vexp0(a2 - ms) + vexp0(a3 - ms)
    acc = acc if acc > one else one
    return m + vlog1(acc)


# ---- per-sample work ------------------------------------------------------------------------
@cpu_jit
def _alpha_sample(log_probs, b, tg, T_b, L, blank, lab, sm, al):
    """Extended labels of sample ``b`` into ``lab``/``sm`` (rows of width W), the alpha rows
    ``al[:T_b, :2L+1]``; returns ``nll`` (compute dtype)."""
    W = lab.size
    neg = type(sm[0])(-np.inf)
    zero = type(sm[0])(0.0)
    one = type(sm[0])(1.0)
    low = type(sm[0])(-3.0e38)  # finite, below any reachable log-probability sum
    for s in range(W):
        lab[s] = blank
        sm[s] = neg
    for k in range(L):
        lab[2 * k + 1] = tg[k]
    for s in range(3, 2 * L + 1, 2):
        if lab[s] != lab[s - 2]:
            sm[s] = zero
    Sp = 2 * L + 1
    if T_b == 0:
        return zero if L == 0 else -neg
    row = al[0]
    lpt = log_probs[0, b]
    for s in range(W):
        row[s] = neg
    row[0] = lpt[blank]
    if Sp > 1:
        row[1] = lpt[lab[1]]
    for t in range(1, T_b):
        prev = al[t - 1]
        cur = al[t]
        lpt = log_probs[t, b]
        cur[0] = prev[0] + lpt[blank]
        if Sp > 1:
            cur[1] = _lse2(prev[1], prev[0]) + lpt[lab[1]]
        # s = 2 .. Sp-1 as zero-based slices (no wraparound code, so the loop vectorises)
        # (ternaries, not max(): numba's float max() has NaN branches that stop
        # vectorisation, as does the gather lpt[lab[s]], hence the separate gather pass)
        # The trip count is rounded up to a multiple of 8 (the rows are wide enough): a
        # scalar remainder loop cost more than the vector body (float32, 2S+1 = 41: 3.4
        # against 8.8 ns per cell). The extra cells lie past 2L+1 and are never read.
        n = (Sp - 2 + 7) // 8 * 8
        p0 = prev[2:n + 2]
        p1 = prev[1:n + 1]
        p2 = prev[0:n]
        cc = cur[2:n + 2]
        lb = lab[2:n + 2]
        sk = sm[2:n + 2]
        for j in range(n):
            cc[j] = lpt[lb[j]]
        for j in range(n):
            cc[j] = _lse3v(p0[j], p1[j], p2[j] + sk[j], low, one) + cc[j]
    last = al[T_b - 1]
    if Sp > 1:
        return -_lse2(last[Sp - 1], last[Sp - 2])
    return -last[0]


@cpu_jit
def _grad_sample(log_probs, b, T_b, L, lab, sm, al, nll_b, g, zero_infinity, wk, grad):
    """Beta rows of sample ``b`` (two ping-pong rows in ``wk``) and its gradient rows."""
    T = log_probs.shape[0]
    C = log_probs.shape[2]
    gt = type(wk[0])(0.0)
    for t in range(T_b, T):
        gr = grad[t, b]
        for c in range(C):
            gr[c] = gt
    if T_b == 0:
        return
    if not (nll_b < np.inf):  # impossible alignment: 0 with zero_infinity, else NaN (as PyTorch)
        fill = gt if zero_infinity else type(gt)(np.nan)
        for t in range(T_b):
            gr = grad[t, b]
            for c in range(C):
                gr[c] = fill
        return
    W = lab.size
    Sp = 2 * L + 1
    nb = (Sp + 7) // 8 * 8
    neg = type(wk[0])(-np.inf)
    zero = type(wk[0])(0.0)
    one = type(wk[0])(1.0)
    low = type(wk[0])(-3.0e38)
    gm = wk[2 * W:3 * W]
    acc = wk[3 * W:3 * W + C]
    for s in range(2 * W):
        wk[s] = neg
    for t in range(T_b - 1, -1, -1):
        lpt = log_probs[t, b]
        # beta rows ping-pong between wk[0:W] and wk[W:2W] (fresh slices each step: a swapped
        # pair of views stopped LLVM from vectorising the loop, 2x slower)
        o = ((T_b - 1 - t) & 1) * W
        bc = wk[o:o + W]
        bn = wk[W - o:2 * W - o]
        for s in range(nb):  # y[t, l'_s], gathered once (the vector loops cannot gather)
            gm[s] = lpt[lab[s]]
        if t == T_b - 1:
            bc[Sp - 1] = lpt[lab[Sp - 1]]
            if Sp > 1:
                bc[Sp - 2] = lpt[lab[Sp - 2]]
        else:
            # nb = 2L+1 rounded up to 8 (see the alpha loop); cells past 2L+1 read only
            # cells past 2L+1, which start at -inf, so they stay -inf
            q0 = bn[0:nb]
            q1 = bn[1:nb + 1]
            q2 = bn[2:nb + 2]
            sk = sm[2:nb + 2]
            for j in range(nb):
                bc[j] = _lse3v(q0[j], q1[j], q2[j] + sk[j], low, one) + gm[j]
        ar = al[t]
        for s in range(Sp):
            gm[s] = vexp0((ar[s] + bc[s]) - gm[s] + nll_b)
        for c in range(C):
            acc[c] = zero
        for s in range(Sp):
            acc[lab[s]] += gm[s]
        gr = grad[t, b]
        for c in range(C):
            gr[c] = (vexp0(type(zero)(lpt[c])) - acc[c]) * g


# ---- kernels ----------------------------------------------------------------------------------
@cpu_jit(parallel=True)
def _ctc_fwd_kernel(log_probs, targets, input_lengths, target_lengths, blank, zero_infinity,
                    lab, smask, alpha, nll, loss):
    N = input_lengths.size
    for b in prange(N):
        v = _alpha_sample(log_probs, b, targets[b], input_lengths[b], target_lengths[b], blank,
                          lab[b], smask[b], alpha[b])
        nll[b] = v
        loss[b] = 0.0 if (zero_infinity and v == np.inf) else v


@cpu_jit(parallel=True)
def _ctc_bwd_kernel(log_probs, input_lengths, target_lengths, zero_infinity, lab, smask, alpha,
                    nll, gscale, work, grad):
    N = input_lengths.size
    for b in prange(N):
        _grad_sample(log_probs, b, input_lengths[b], target_lengths[b], lab[b], smask[b], alpha[b],
                     nll[b], gscale[b], zero_infinity, work[b], grad)


def _check_widths(S, lab, smask, alpha, T):
    # The kernels run without bounds checks over whole multiples of 8: a narrower row would
    # be written past its end.
    need = (2 * S + 1 + 7) // 8 * 8 + 2
    if lab.shape[1] < need or smask.shape[1] != lab.shape[1] or alpha.shape[2] != lab.shape[1] \
            or alpha.shape[1] < T:
        raise ValueError(f"ctc_loss_fwd: lab/smask/alpha rows of widths {lab.shape[1]}/{smask.shape[1]}/"
                         f"{alpha.shape[2]} for targets of {S} labels; need equal widths >= {need}")


def _ctc_loss_fwd_cpu(log_probs, targets, input_lengths, target_lengths, blank, zero_infinity,
                      lab, smask, alpha, nll, loss):
    """Alpha recursion per sample (``prange`` over the batch): writes ``lab``, ``smask``,
    ``alpha``, the raw ``nll`` and ``loss`` (see the module docstring)."""
    if input_lengths.size == 0:
        return
    _check_widths(targets.shape[1], lab, smask, alpha, log_probs.shape[0])
    _ctc_fwd_kernel(log_probs, targets, input_lengths, target_lengths, int(blank), bool(zero_infinity),
                    lab, smask, alpha, nll, loss)


def _ctc_loss_bwd_cpu(log_probs, input_lengths, target_lengths, zero_infinity, lab, smask, alpha,
                      nll, gscale, work, grad):
    """Beta recursion and PyTorch's gradient w.r.t. ``log_probs`` per sample (``prange`` over
    the batch), scaled by ``gscale[b]``; writes every element of ``grad``."""
    if input_lengths.size == 0:
        grad[...] = 0
        return
    W = lab.shape[1]
    if smask.shape[1] != W or alpha.shape[2] != W or work.shape[1] < 3 * W + log_probs.shape[2]:
        raise ValueError(f"ctc_loss_bwd: work arrays of widths lab {W}, smask {smask.shape[1]}, alpha "
                         f"{alpha.shape[2]}, work {work.shape[1]} do not fit (need work >= 3W + C)")
    _ctc_bwd_kernel(log_probs, input_lengths, target_lengths, bool(zero_infinity), lab, smask, alpha,
                    nll, gscale, work, grad)
