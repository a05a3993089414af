"""CUDA kernels of one recurrent-cell time step (twins of ``kernels/cpu/rnn.py``).

Contract: the CPU module's, name for name and argument for argument:
``_lstm_cell_fwd_cuda(xg, hg, c_prev, act, tc, c, h)``,
``_lstm_cell_bwd_cuda(gy, gh, gc, act, tc, c_prev, dgates, dc_prev)``,
``_gru_cell_fwd_cuda(xg, hg, b_hh, h_prev, act, h)``,
``_gru_cell_bwd_cuda(gy, gh, act, h_prev, dxg, dhg, dh_prev)``,
``_rnn_cell_fwd_cuda(xg, hg, nonlin, h)``, ``_rnn_cell_bwd_cuda(gy, gh, h, nonlin, dpre)``
on 2-D row-major ``(B, n)`` device arrays (``b_hh`` 1-D) of one floating dtype (float16,
float32 or float64; numbagrad CUDA arrays or numba device arrays, any strides). Each
launches one kernel on the default stream and returns nothing.

``act`` may alias ``xg`` in the LSTM forward (the sequence layer writes the gates over
its input projection): a thread reads its four gate inputs before it writes them, and no
other thread touches them.

Every step is ONE grid-stride kernel over the ``B * H`` (batch, unit) pairs: thread ``t``
takes pairs ``t, t + gridsize, ...``, the unit index fastest (a warp reads consecutive
addresses of each gate block); pair ``(b, j)`` reads its gate pre-activations (columns
``j, H + j, ...`` of row ``b``) and writes its gates, state and output. The
CPU's split into NumPy ``tanh`` passes and @njit loops exists only because pip's
llvmlite has no SVML; on the GPU ``math.exp``/``math.tanh`` are libdevice calls, so the
whole step fuses and reads each input once. Sigmoids use ``scalar.sigmoid_from_exp``
(never overflows), derivatives the shared ``scalar.sigmoid_grad`` / ``tanh_grad`` /
``relu_grad``, so both targets share one definition of the math.

float16: elements are widened to float32 (``widen``), computed in float32 and narrowed
by the store, as in the other kernel families.
"""
import math

from numba import cuda, types as nbtypes

from .. import scalar as S
from ._launch import cuda_kernel, dev, launch, widen

# the names be.kernel(family, name) resolves (see numbagrad/kernels/__init__.py)
ENTRY_POINTS = (
    "lstm_cell_fwd", "lstm_cell_bwd", "gru_cell_fwd", "gru_cell_bwd", "rnn_cell_fwd",
    "rnn_cell_bwd",
)


def _sig(*kinds):
    """PTX-check signature: ``"m"`` a 2-D array of ``T`` (any layout), ``"v"`` a 1-D
    contiguous one, ``"i"`` an int64 scalar."""
    def sig(T):
        return tuple(T[:, :] if k == "m" else (T[::1] if k == "v" else nbtypes.int64) for k in kinds)
    return sig


@cuda_kernel(_sig("m", "m", "m", "m", "m", "m", "m"))
def _lstm_cell_fwd_kernel(xg, hg, c_prev, act, tc, c, h):
    """One LSTM step; one thread per hidden unit (b, j)."""
    B, H = c.shape
    for k in range(cuda.grid(1), B * H, cuda.gridsize(1)):
        b = k // H
        j = k - b * H
        pi = widen(xg[b, j]) + widen(hg[b, j])
        pf = widen(xg[b, H + j]) + widen(hg[b, H + j])
        pg = widen(xg[b, 2 * H + j]) + widen(hg[b, 2 * H + j])
        po = widen(xg[b, 3 * H + j]) + widen(hg[b, 3 * H + j])
        i = S.sigmoid_from_exp(pi, math.exp(-abs(pi)))
        f = S.sigmoid_from_exp(pf, math.exp(-abs(pf)))
        g = math.tanh(pg)
        o = S.sigmoid_from_exp(po, math.exp(-abs(po)))
        cc = f * widen(c_prev[b, j]) + i * g
        t = math.tanh(cc)
        act[b, j] = i
        act[b, H + j] = f
        act[b, 2 * H + j] = g
        act[b, 3 * H + j] = o
        tc[b, j] = t
        c[b, j] = cc
        h[b, j] = o * t


@cuda_kernel(_sig("m", "m", "m", "m", "m", "m", "m", "m"))
def _lstm_cell_bwd_kernel(gy, gh, gc, act, tc, c_prev, dgates, dc_prev):
    """Backward of one LSTM step; one thread per hidden unit (b, j)."""
    B, H = gy.shape
    for k in range(cuda.grid(1), B * H, cuda.gridsize(1)):
        b = k // H
        j = k - b * H
        i = widen(act[b, j])
        f = widen(act[b, H + j])
        g = widen(act[b, 2 * H + j])
        o = widen(act[b, 3 * H + j])
        t = widen(tc[b, j])
        ght = widen(gy[b, j]) + widen(gh[b, j])
        dc = widen(gc[b, j]) + S.tanh_grad(ght * o, t)
        dgates[b, j] = S.sigmoid_grad(dc * g, i)
        dgates[b, H + j] = S.sigmoid_grad(dc * widen(c_prev[b, j]), f)
        dgates[b, 2 * H + j] = S.tanh_grad(dc * i, g)
        dgates[b, 3 * H + j] = S.sigmoid_grad(ght * t, o)
        dc_prev[b, j] = dc * f


@cuda_kernel(_sig("m", "m", "v", "m", "m", "m"))
def _gru_cell_fwd_kernel(xg, hg, b_hh, h_prev, act, h):
    """One GRU step; one thread per hidden unit (b, j)."""
    B, H = h.shape
    for k in range(cuda.grid(1), B * H, cuda.gridsize(1)):
        b = k // H
        j = k - b * H
        pr = widen(xg[b, j]) + widen(hg[b, j]) + widen(b_hh[j])
        pz = widen(xg[b, H + j]) + widen(hg[b, H + j]) + widen(b_hh[H + j])
        hn = widen(hg[b, 2 * H + j]) + widen(b_hh[2 * H + j])
        r = S.sigmoid_from_exp(pr, math.exp(-abs(pr)))
        z = S.sigmoid_from_exp(pz, math.exp(-abs(pz)))
        n = math.tanh(widen(xg[b, 2 * H + j]) + r * hn)
        act[b, j] = r
        act[b, H + j] = z
        act[b, 2 * H + j] = n
        act[b, 3 * H + j] = hn
        h[b, j] = n + z * (widen(h_prev[b, j]) - n)


@cuda_kernel(_sig("m", "m", "m", "m", "m", "m", "m"))
def _gru_cell_bwd_kernel(gy, gh, act, h_prev, dxg, dhg, dh_prev):
    """Backward of one GRU step; one thread per hidden unit (b, j)."""
    B, H = gy.shape
    for k in range(cuda.grid(1), B * H, cuda.gridsize(1)):
        b = k // H
        j = k - b * H
        r = widen(act[b, j])
        z = widen(act[b, H + j])
        n = widen(act[b, 2 * H + j])
        hn = widen(act[b, 3 * H + j])
        g = widen(gy[b, j]) + widen(gh[b, j])
        gz = g * z
        dn = S.tanh_grad(g - gz, n)
        dr = S.sigmoid_grad(dn * hn, r)
        dz = S.sigmoid_grad(g * (widen(h_prev[b, j]) - n), z)
        dxg[b, j] = dr
        dxg[b, H + j] = dz
        dxg[b, 2 * H + j] = dn
        dhg[b, j] = dr
        dhg[b, H + j] = dz
        dhg[b, 2 * H + j] = dn * r
        dh_prev[b, j] = gz


@cuda_kernel(_sig("m", "m", "i", "m"))
def _rnn_cell_fwd_kernel(xg, hg, nonlin, h):
    """One Elman step ``h = tanh/relu(xg + hg)``; one thread per element."""
    B, H = h.shape
    for k in range(cuda.grid(1), B * H, cuda.gridsize(1)):
        b = k // H
        j = k - b * H
        p = widen(xg[b, j]) + widen(hg[b, j])
        h[b, j] = S.relu(p) if nonlin == 1 else math.tanh(p)


@cuda_kernel(_sig("m", "m", "m", "i", "m"))
def _rnn_cell_bwd_kernel(gy, gh, h, nonlin, dpre):
    """Backward of one Elman step from its output; one thread per element."""
    B, H = h.shape
    for k in range(cuda.grid(1), B * H, cuda.gridsize(1)):
        b = k // H
        j = k - b * H
        g = widen(gy[b, j]) + widen(gh[b, j])
        y = widen(h[b, j])
        dpre[b, j] = S.relu_grad(g, y) if nonlin == 1 else S.tanh_grad(g, y)


# ---- launchers (the CPU kernels' signatures) -------------------------------------------------------
def _units(a):
    d = dev(a)
    return d.shape[0] * d.shape[1]


def _lstm_cell_fwd_cuda(xg, hg, c_prev, act, tc, c, h):
    launch(_lstm_cell_fwd_kernel, _units(c), xg, hg, c_prev, act, tc, c, h)


def _lstm_cell_bwd_cuda(gy, gh, gc, act, tc, c_prev, dgates, dc_prev):
    launch(_lstm_cell_bwd_kernel, _units(gy), gy, gh, gc, act, tc, c_prev, dgates, dc_prev)


def _gru_cell_fwd_cuda(xg, hg, b_hh, h_prev, act, h):
    launch(_gru_cell_fwd_kernel, _units(h), xg, hg, b_hh, h_prev, act, h)


def _gru_cell_bwd_cuda(gy, gh, act, h_prev, dxg, dhg, dh_prev):
    launch(_gru_cell_bwd_kernel, _units(gy), gy, gh, act, h_prev, dxg, dhg, dh_prev)


def _rnn_cell_fwd_cuda(xg, hg, nonlin, h):
    launch(_rnn_cell_fwd_kernel, _units(h), xg, hg, int(nonlin), h)


def _rnn_cell_bwd_cuda(gy, gh, h, nonlin, dpre):
    launch(_rnn_cell_bwd_kernel, _units(h), gy, gh, h, int(nonlin), dpre)
