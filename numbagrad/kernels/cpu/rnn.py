"""CPU kernels of one recurrent-cell time step (LSTM, GRU, Elman RNN).

Contract (the same for every backend; ``B`` batch rows, ``H`` hidden units, every array a
C-contiguous 2-D ``(B, n)`` array (``b_hh`` 1-D) of one floating dtype, float32 or float64):

``_lstm_cell_fwd_cpu(xg, hg, c_prev, act, tc, c, h)``
    ``xg`` ``(B, 4H)``: input-side pre-activations with both biases folded in;
    ``hg`` ``(B, 4H)``: ``h_prev @ W_hh^T``. Gate order i, f, g, o (PyTorch's). Writes
    ``act`` ``(B, 4H)``: the activated gates ``sigmoid(i), sigmoid(f), tanh(g),
    sigmoid(o)``; ``tc = tanh(c)``, ``c = f*c_prev + i*g``, ``h = o*tc`` (all ``(B, H)``).
    ``act`` may be ``xg`` itself (each element is read before it is overwritten): the
    sequence layer writes the gates over its input projection.
``_lstm_cell_bwd_cpu(gy, gh, gc, act, tc, c_prev, dgates, dc_prev)``
    The gradient reaching ``h`` is ``gy + gh`` (the layer's output gradient plus the
    recurrent one), reaching ``c`` is ``gc``. Writes ``dgates`` ``(B, 4H)``, the gradient
    of the gate pre-activations (= of ``xg`` and of ``hg``), and ``dc_prev`` ``(B, H)``.
``_gru_cell_fwd_cpu(xg, hg, b_hh, h_prev, act, h)``
    ``xg = x W_ih^T + b_ih`` ``(B, 3H)``, ``hg = h_prev W_hh^T`` ``(B, 3H)`` (without
    bias), ``b_hh`` ``(3H,)`` (zeros when the layer has no bias). Gate order r, z, n:
    ``r = sigmoid(xr + hr + bhr)``, ``z = sigmoid(xz + hz + bhz)``,
    ``n = tanh(xn + r * (hn + bhn))``, ``h = (1 - z) * n + z * h_prev``. Writes ``act``
    ``(B, 4H)`` = ``r, z, n, hn + bhn`` and ``h``.
``_gru_cell_bwd_cpu(gy, gh, act, h_prev, dxg, dhg, dh_prev)``
    Writes ``dxg`` (gradient of ``xg``), ``dhg`` (gradient of ``hg`` and of ``b_hh``),
    both ``(B, 3H)``, and ``dh_prev = (gy + gh) * z``, the *direct* part of the
    gradient of ``h_prev``; the caller adds ``dhg @ W_hh``.
``_rnn_cell_fwd_cpu(xg, hg, nonlin, h)`` / ``_rnn_cell_bwd_cpu(gy, gh, h, nonlin, dpre)``
    ``h = act(xg + hg)`` with ``nonlin`` 0 (tanh) or 1 (relu); backward from the output.

Why the forward passes are hybrids. pip's llvmlite has no SVML, so ``math.exp`` /
``math.tanh`` inside an @njit loop are scalar libm calls, while NumPy's ``np.tanh`` is an
AVX-512 loop. So the forward is a hybrid: an @njit pass forms the pre-activations (sigmoid
gates scaled by 1/2, since ``sigmoid(x) = (1 + tanh(x/2)) / 2``), one in-place ``np.tanh``
runs over all 4H gates, an @njit pass finishes the gates and forms ``c``, then
``np.tanh(c)`` and an @njit pass for ``h``: 14 us for one LSTM step at B=32, H=128 float32,
against 233 us for one fused loop with libm calls. The per-pass breakdown and the variants
tried (a rational tanh in the loop, float32 or float64-evaluated) are in ``perf/README.md``
("Measurement notes", ``kernels/cpu/rnn.py``).

The sequence layer passes ``act`` and ``xg`` as the same array (the gates overwrite the
input projection); then :func:`_lstm_pre_inplace` runs, because the out-of-place
pre-activation loop on aliased arrays fails LLVM's runtime overlap check and runs scalar
(8.1 us vs 4.9 us). Below the parallel threshold the wrappers call the numba dispatchers'
``serial`` twins directly (no :class:`FlatKernel` call per time step).

One ``tanh`` pass serves every gate, and NumPy's float32 tanh is accurate to ~1 ulp, so
the results match PyTorch to float32 rounding. The backward passes need no
transcendental (everything is recomputed from the saved activations) and are single
fused loops; the derivative algebra is the shared :mod:`numbagrad.kernels.scalar`
helpers (``sigmoid_grad``, ``tanh_grad``, ``relu_grad``), as in the CUDA twins.

Every loop is a :func:`flat_kernel` with ``prange`` over the batch rows: serial below
``config.PARALLEL_THRESHOLD`` elements (the usual sizes: a parallel launch costs more
than one step's elementwise work), parallel above.
"""
import numpy as np
from numba import prange

from ...backend import config
from .._jit import flat_kernel, scalar_helper
from .. import scalar as S

# the names be.kernel(family, name) resolves (see numbagrad/kernels/__init__.py)
ENTRY_POINTS = (
    "lstm_cell_fwd", "lstm_cell_bwd", "gru_cell_fwd", "gru_cell_bwd", "rnn_cell_fwd",
    "rnn_cell_bwd",
)

_F16 = np.dtype(np.float16)


def _no_half(a, name):
    if a.dtype == np.float16:
        raise TypeError(f"{name}: float16 is not supported on the CPU (CPU @njit kernels have no "
                        "float16); use float32, or run the layer on CUDA")


@scalar_helper
def _thirds(row, H):
    """The ``(H,)`` views ``row[:H], row[H:2H], row[2H:]`` of a ``(3H,)`` gate row."""
    return row[:H], row[H:2 * H], row[2 * H:]


@scalar_helper
def _quarters(row, H):
    """The four ``(H,)`` gate views of a ``(4H,)`` gate row."""
    a, b, c = _thirds(row[:3 * H], H)
    return a, b, c, row[3 * H:]


# ---- LSTM -------------------------------------------------------------------------------------
@flat_kernel
def _lstm_pre(xg, hg, act):
    """act = xg + hg, with the sigmoid gates (i, f, o) halved: tanh of it gives them."""
    B, G = act.shape
    H = G // 4
    for b in prange(B):
        half = type(act[b, 0])(0.5)
        for j in range(2 * H):
            act[b, j] = (xg[b, j] + hg[b, j]) * half
        for j in range(2 * H, 3 * H):
            act[b, j] = xg[b, j] + hg[b, j]
        for j in range(3 * H, G):
            act[b, j] = (xg[b, j] + hg[b, j]) * half


@flat_kernel
def _lstm_pre_inplace(act, hg):
    """act = act + hg (act holding xg), the sigmoid gates halved: :func:`_lstm_pre`
    for ``act is xg``. NOTE: with act and xg the same array the out-of-place loop fails
    LLVM's runtime overlap check and runs scalar (8.1 us vs 4.9 us at B=32, H=128
    float32); this read-modify-write loop only checks act against hg."""
    B, G = act.shape
    H = G // 4
    for b in prange(B):
        a = act[b]
        y = hg[b]
        half = type(a[0])(0.5)
        for j in range(2 * H):
            a[j] = (a[j] + y[j]) * half
        for j in range(2 * H, 3 * H):
            a[j] = a[j] + y[j]
        for j in range(3 * H, G):
            a[j] = (a[j] + y[j]) * half


@flat_kernel
def _lstm_state(act, c_prev, c):
    """act holds tanh(x/2) for i, f, o: turn them into sigmoids; c = f*c_prev + i*g."""
    B, G = act.shape
    H = G // 4
    for b in prange(B):
        ai, af, ag, ao = _quarters(act[b], H)
        cp = c_prev[b]
        cr = c[b]
        half = act.dtype.type(0.5)
        for j in range(H):
            i = half + half * ai[j]
            f = half + half * af[j]
            ai[j] = i
            af[j] = f
            cr[j] = f * cp[j] + i * ag[j]
        for j in range(H):
            ao[j] = half + half * ao[j]


@flat_kernel
def _lstm_hidden(act, tc, h):
    """h = o * tanh(c)."""
    B, G = act.shape
    H = G // 4
    for b in prange(B):
        for j in range(H):
            h[b, j] = act[b, 3 * H + j] * tc[b, j]


def _lstm_cell_fwd_cpu(xg, hg, c_prev, act, tc, c, h):
    """One LSTM step (see the module docstring): two NumPy tanh passes around three
    fused @njit passes."""
    if act.dtype == _F16:
        _no_half(act, "lstm")
    # NOTE: below the threshold, the numba dispatchers directly (what FlatKernel would pick):
    # this runs once per time step, and the wrapper's Python call costs ~0.3 us of a ~14 us step.
    serial = act.size < config.PARALLEL_THRESHOLD
    if act is xg:
        (_lstm_pre_inplace.serial if serial else _lstm_pre_inplace)(act, hg)
    else:
        (_lstm_pre.serial if serial else _lstm_pre)(xg, hg, act)
    np.tanh(act, out=act)
    (_lstm_state.serial if serial else _lstm_state)(act, c_prev, c)
    np.tanh(c, out=tc)
    (_lstm_hidden.serial if serial else _lstm_hidden)(act, tc, h)


@flat_kernel
def _lstm_cell_bwd_cpu(gy, gh, gc, act, tc, c_prev, dgates, dc_prev):
    """Backward of one LSTM step: one fused loop (see the module docstring)."""
    B, H = gy.shape
    for b in prange(B):
        # NOTE: per-gate 1-D row views: with ``act[b, 2 * H + j]`` indexing the loop ran
        # 10.4 us at B=32, H=128 float32, with the views 5.6 us (it vectorises).
        ai, af, ag, ao = _quarters(act[b], H)
        di, df, dg, do = _quarters(dgates[b], H)
        y = gy[b]
        hh = gh[b]
        cc = gc[b]
        tr = tc[b]
        cp = c_prev[b]
        dcp = dc_prev[b]
        for j in range(H):
            i = ai[j]
            f = af[j]
            g = ag[j]
            o = ao[j]
            t = tr[j]
            ght = y[j] + hh[j]
            dc = cc[j] + S.tanh_grad(ght * o, t)
            di[j] = S.sigmoid_grad(dc * g, i)
            df[j] = S.sigmoid_grad(dc * cp[j], f)
            dg[j] = S.tanh_grad(dc * i, g)
            do[j] = S.sigmoid_grad(ght * t, o)
            dcp[j] = dc * f


# ---- GRU --------------------------------------------------------------------------------------
@flat_kernel
def _gru_pre(xg, hg, b_hh, act):
    """act[:, :2H] = (xg + hg + b_hh)/2 for r, z; act[:, 3H:] = hg_n + b_hn."""
    B, G = act.shape
    H = G // 4
    for b in prange(B):
        half = type(act[b, 0])(0.5)
        for j in range(2 * H):
            act[b, j] = (xg[b, j] + hg[b, j] + b_hh[j]) * half
        for j in range(H):
            act[b, 3 * H + j] = hg[b, 2 * H + j] + b_hh[2 * H + j]


@flat_kernel
def _gru_n_pre(act, xg):
    """Finish r, z (sigmoids from tanh(x/2)); act[:, 2H:3H] = xn + r * (hn + bhn)."""
    B, G = act.shape
    H = G // 4
    for b in prange(B):
        half = type(act[b, 0])(0.5)
        for j in range(2 * H):
            act[b, j] = half + half * act[b, j]
        for j in range(H):
            act[b, 2 * H + j] = xg[b, 2 * H + j] + act[b, j] * act[b, 3 * H + j]


@flat_kernel
def _gru_hidden(act, h_prev, h):
    """h = (1 - z) * n + z * h_prev = n + z * (h_prev - n)."""
    B, G = act.shape
    H = G // 4
    for b in prange(B):
        for j in range(H):
            n = act[b, 2 * H + j]
            h[b, j] = n + act[b, H + j] * (h_prev[b, j] - n)


def _gru_cell_fwd_cpu(xg, hg, b_hh, h_prev, act, h):
    """One GRU step (see the module docstring)."""
    if act.dtype == _F16:
        _no_half(act, "gru")
    H = h.shape[1]
    serial = act.size < config.PARALLEL_THRESHOLD     # the dispatchers directly, as in the LSTM
    (_gru_pre.serial if serial else _gru_pre)(xg, hg, b_hh, act)
    rz = act[:, :2 * H]
    np.tanh(rz, out=rz)
    (_gru_n_pre.serial if serial else _gru_n_pre)(act, xg)
    n = act[:, 2 * H:3 * H]
    np.tanh(n, out=n)
    (_gru_hidden.serial if serial else _gru_hidden)(act, h_prev, h)


@flat_kernel
def _gru_cell_bwd_cpu(gy, gh, act, h_prev, dxg, dhg, dh_prev):
    """Backward of one GRU step: one fused loop (see the module docstring)."""
    B, H = gy.shape
    for b in prange(B):
        ar, az, an, ahn = _quarters(act[b], H)
        dxr, dxz, dxn = _thirds(dxg[b], H)
        dhr, dhz, dhn = _thirds(dhg[b], H)
        y = gy[b]
        hh = gh[b]
        hp = h_prev[b]
        dp = dh_prev[b]
        for j in range(H):
            r = ar[j]
            z = az[j]
            n = an[j]
            g = y[j] + hh[j]
            gz = g * z
            dn = S.tanh_grad(g - gz, n)               # (g * (1 - z)) * (1 - n^2)
            dr = S.sigmoid_grad(dn * ahn[j], r)
            dz = S.sigmoid_grad(g * (hp[j] - n), z)
            dxr[j] = dr
            dxz[j] = dz
            dxn[j] = dn
            dhr[j] = dr
            dhz[j] = dz
            dhn[j] = dn * r
            dp[j] = gz


# ---- Elman RNN (tanh / relu) ------------------------------------------------------------------
@flat_kernel
def _rnn_pre(xg, hg, nonlin, h):
    """h = xg + hg (tanh: finished by np.tanh), or relu(xg + hg)."""
    B, H = h.shape
    for b in prange(B):
        if nonlin == 1:
            for j in range(H):
                h[b, j] = S.relu(xg[b, j] + hg[b, j])
        else:
            for j in range(H):
                h[b, j] = xg[b, j] + hg[b, j]


def _rnn_cell_fwd_cpu(xg, hg, nonlin, h):
    """One Elman step ``h = tanh(xg + hg)`` (nonlin 0) or ``relu(xg + hg)`` (nonlin 1)."""
    _no_half(h, "rnn")
    _rnn_pre(xg, hg, nonlin, h)
    if nonlin == 0:
        np.tanh(h, out=h)


@flat_kernel
def _rnn_cell_bwd_cpu(gy, gh, h, nonlin, dpre):
    """dpre = (gy + gh) * act'(pre), from the output h."""
    B, H = h.shape
    for b in prange(B):
        if nonlin == 1:
            for j in range(H):
                dpre[b, j] = S.relu_grad(gy[b, j] + gh[b, j], h[b, j])
        else:
            for j in range(H):
                dpre[b, j] = S.tanh_grad(gy[b, j] + gh[b, j], h[b, j])
