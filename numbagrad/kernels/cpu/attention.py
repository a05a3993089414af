"""Fused attention-softmax kernels for ``scaled_dot_product_attention``.

The GEMMs of attention (``Q K^T``, ``P V`` and the four of the backward) are BLAS calls
made by the op (``be.matmul``); what sits between them is one row-wise pass here.

Contract (the same for every backend; ``(N, L, S)`` C-contiguous score arrays, ``N`` the
flattened batch, one row per query):

``_attn_softmax_fwd_cpu(s, mask, mdiv, has_mask, causal, scale, empty_nan, dropout, seed,
thr53, dscale, p, pd, dmask)``
    ``x = s * scale (+ mask[(n // mdiv) % Nm, i, j] if has_mask)``, entries ``j > i``
    removed if ``causal`` (top-left aligned, PyTorch's ``tril``), ``p = softmax(x)`` per
    row. ``mask`` is a float additive mask viewed as ``(Nm, L, S)`` (any strides, stride 0
    for broadcast dims): batch row ``n`` reads mask row ``(n // mdiv) % Nm``, which covers a
    mask broadcast over leading and/or trailing batch dims without materialising it. A
    row with no finite logit (every key masked) gets probabilities 0 (PyTorch's
    ``scaled_dot_product_attention``), or NaN when ``empty_nan`` (its explicit softmax, as
    ``MultiheadAttention(need_weights=True)``). With ``dropout``: ``dmask[n, i, j] =
    keep_bit(seed, (n * L + i) * S + j, thr53)`` (the hash of ``kernels/cpu/dropout.py``, so
    the same seed gives ``F.dropout``'s mask on the ``(N, L, S)`` probabilities) and
    ``pd = p * dmask * dscale``. ``p`` may be ``s`` itself (in place); ``pd`` / ``dmask`` are
    untouched without dropout (pass any arrays of the right types).
``_attn_softmax_bwd_cpu(dp, p, dmask, dropout, dscale, scale, ds)``
    ``g = dp (* dmask * dscale if dropout)``; ``ds = scale * p * (g - sum_j g p)`` per row:
    the gradient of the *unscaled* scores ``s`` (the mask's gradient is ``ds / scale``).
    ``ds`` may be ``dp`` itself.

Measured choice (float32, 4096 rows x 64 keys, causal, serial, ms per call): a single
fused loop with ``math.exp`` (scalar libm; pip's llvmlite has no SVML) 1.1-2.6; the same
with a vectorisable polynomial exp 0.69-0.72; three passes -- an @njit pass writing the
max-shifted logits (-inf where masked), NumPy's SIMD ``np.exp`` in place, an @njit pass
normalising (+ dropout) -- 0.37-0.54. The forward is those three passes. Row loops are
``prange`` in :func:`flat_kernel` (serial twin below ``config.PARALLEL_THRESHOLD``
elements); sums use 8 independent accumulators (as ``_rowreduce.vsum`` / ``vdot_dev``).
"""
import numpy as np
from numba import prange

from .._jit import flat_kernel, scalar_helper
from .. import scalar as S

# the names be.kernel(family, name) resolves (see numbagrad/kernels/__init__.py)
ENTRY_POINTS = ("attn_softmax_fwd", "attn_softmax_bwd")


@scalar_helper
def _row_sum3(x, n, i, lim):
    """sum of x[n, i, :lim] with 8 independent accumulators."""
    z = type(x[n, i, 0])(0)
    s0 = s1 = s2 = s3 = s4 = s5 = s6 = s7 = z
    j = 0
    while j + 8 <= lim:
        s0 += x[n, i, j]
        s1 += x[n, i, j + 1]
        s2 += x[n, i, j + 2]
        s3 += x[n, i, j + 3]
        s4 += x[n, i, j + 4]
        s5 += x[n, i, j + 5]
        s6 += x[n, i, j + 6]
        s7 += x[n, i, j + 7]
        j += 8
    s = ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7))
    while j < lim:
        s += x[n, i, j]
        j += 1
    return s


@scalar_helper
def _row_dot3(a, b, n, i, lim):
    """sum of a[n, i, :lim] * b[n, i, :lim] with 8 independent accumulators."""
    z = type(a[n, i, 0])(0)
    s0 = s1 = s2 = s3 = s4 = s5 = s6 = s7 = z
    j = 0
    while j + 8 <= lim:
        s0 += a[n, i, j] * b[n, i, j]
        s1 += a[n, i, j + 1] * b[n, i, j + 1]
        s2 += a[n, i, j + 2] * b[n, i, j + 2]
        s3 += a[n, i, j + 3] * b[n, i, j + 3]
        s4 += a[n, i, j + 4] * b[n, i, j + 4]
        s5 += a[n, i, j + 5] * b[n, i, j + 5]
        s6 += a[n, i, j + 6] * b[n, i, j + 6]
        s7 += a[n, i, j + 7] * b[n, i, j + 7]
        j += 8
    s = ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7))
    while j < lim:
        s += a[n, i, j] * b[n, i, j]
        j += 1
    return s


@flat_kernel
def _attn_shift(s, mask, mdiv, has_mask, causal, scale, p):
    """p[n, i, j] = x - max_j x with x = s * scale (+ mask); -inf where causally removed
    and on rows with no finite logit (so that exp gives 0 there)."""
    N, L, Sk = s.shape
    Nm = mask.shape[0]
    ninf = type(scale)(-np.inf)
    for r in prange(N * L):
        n = r // L
        i = r - n * L
        lim = min(i + 1, Sk) if causal else Sk
        m = ninf
        if has_mask:
            nm = (n // mdiv) % Nm
            for j in range(lim):
                v = s[n, i, j] * scale + mask[nm, i, j]
                p[n, i, j] = v
                m = v if v > m else m
        else:
            for j in range(lim):
                v = s[n, i, j] * scale
                p[n, i, j] = v
                m = v if v > m else m
        if m == ninf:
            lim = 0
        for j in range(lim):
            p[n, i, j] -= m
        for j in range(lim, Sk):
            p[n, i, j] = ninf


@flat_kernel
def _attn_normalize(p, causal, empty_nan, dropout, seed, thr53, dscale, pd, dmask):
    """p /= row sum (a zero sum -- no finite logit -- gives 0 or NaN); optional dropout."""
    N, L, Sk = p.shape
    zero = type(dscale)(0)
    one = type(dscale)(1)
    nan = type(dscale)(np.nan)
    for r in prange(N * L):
        n = r // L
        i = r - n * L
        lim = min(i + 1, Sk) if causal else Sk  # p is exactly 0 beyond lim
        tot = _row_sum3(p, n, i, lim) if lim > 0 else zero
        if tot > zero:
            inv = one / tot
            for j in range(lim):
                p[n, i, j] *= inv
        elif empty_nan:
            for j in range(Sk):
                p[n, i, j] = nan
        if dropout:
            base = r * Sk
            for j in range(Sk):
                keep = S.keep_bit(seed, base + j, thr53)
                dmask[n, i, j] = keep
                pd[n, i, j] = p[n, i, j] * (dscale if keep else zero)


def _attn_softmax_fwd_cpu(s, mask, mdiv, has_mask, causal, scale, empty_nan, dropout, seed, thr53, dscale,
                          p, pd, dmask):
    """Masked, scaled row softmax of the raw scores ``s`` (+ dropout); see the module
    docstring. Three passes: shift (@njit), ``np.exp`` (NumPy SIMD), normalise (@njit)."""
    if s.size == 0:
        return
    _attn_shift(s, mask, mdiv, has_mask, causal, scale, p)
    np.exp(p, out=p)
    _attn_normalize(p, causal, empty_nan, dropout, seed, thr53, dscale, pd, dmask)


@flat_kernel
def _attn_softmax_bwd_rows(dp, p, dmask, dropout, dscale, scale, ds):
    N, L, Sk = dp.shape
    zero = type(dscale)(0)
    for r in prange(N * L):
        n = r // L
        i = r - n * L
        if dropout:
            for j in range(Sk):
                ds[n, i, j] = dp[n, i, j] * (dscale if dmask[n, i, j] else zero)
            d = _row_dot3(ds, p, n, i, Sk)
            for j in range(Sk):
                ds[n, i, j] = scale * p[n, i, j] * (ds[n, i, j] - d)
        else:
            d = _row_dot3(dp, p, n, i, Sk)
            for j in range(Sk):
                ds[n, i, j] = scale * p[n, i, j] * (dp[n, i, j] - d)


def _attn_softmax_bwd_cpu(dp, p, dmask, dropout, dscale, scale, ds):
    """ds = scale * p * (g - <g, p>) per row, g = dp (* dmask * dscale with dropout)."""
    if dp.size:
        _attn_softmax_bwd_rows(dp, p, dmask, dropout, dscale, scale, ds)
