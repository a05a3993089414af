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

from numba import types as nbtypes

from .. import scalar as S
from ._launch import cuda_kernel, dev, device_fn, grid_kernel, launch, widen

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


@device_fn
def _gates_device(a, b, j, H):
    """Row ``b``'s four gate blocks at unit ``j`` (columns ``j, H + j, 2H + j, 3H + j``), widened."""
    return widen(a[b, j]), widen(a[b, H + j]), widen(a[b, 2 * H + j]), widen(a[b, 3 * H + j])


@device_fn
def _set_gates3_device(a, b, j, H, v0, v1, v2):
    """Stores the first three gate blocks of row ``b`` at unit ``j``."""
    a[b, j] = v0
    a[b, H + j] = v1
    a[b, 2 * H + j] = v2


@device_fn
def _set_gates_device(a, b, j, H, v0, v1, v2, v3):
    """Stores the four gate blocks of row ``b`` at unit ``j``."""
    _set_gates3_device(a, b, j, H, v0, v1, v2)
    a[b, 3 * H + j] = v3


@device_fn
def _lstm_cell_fwd_device(b, j, xg, hg, c_prev, act, tc, c, h):
    H = c.shape[1]
    xi, xf, xgg, xo = _gates_device(xg, b, j, H)
    hi, hf, hgg, ho = _gates_device(hg, b, j, H)
    pi = xi + hi
    pf = xf + hf
    po = xo + ho
    i = S.sigmoid_from_exp(pi, math.exp(-abs(pi)))
    f = S.sigmoid_from_exp(pf, math.exp(-abs(pf)))
    g = math.tanh(xgg + hgg)
    o = S.sigmoid_from_exp(po, math.exp(-abs(po)))
    cc = f * widen(c_prev[b, j]) + i * g
    t = math.tanh(cc)
    _set_gates_device(act, b, j, H, i, f, g, o)
    tc[b, j] = t
    c[b, j] = cc
    h[b, j] = o * t


@device_fn
def _lstm_cell_bwd_device(b, j, gy, gh, gc, act, tc, c_prev, dgates, dc_prev):
    i, f, g, o = _gates_device(act, b, j, gy.shape[1])
    t = widen(tc[b, j])
    ght = widen(gy[b, j]) + widen(gh[b, j])
    dc = widen(gc[b, j]) + S.tanh_grad(ght * o, t)
    _set_gates_device(dgates, b, j, gy.shape[1], S.sigmoid_grad(dc * g, i),
                      S.sigmoid_grad(dc * widen(c_prev[b, j]), f), S.tanh_grad(dc * i, g),
                      S.sigmoid_grad(ght * t, o))
    dc_prev[b, j] = dc * f


@device_fn
def _gru_cell_fwd_device(b, j, xg, hg, b_hh, h_prev, act, h):
    H = h.shape[1]
    pr = widen(xg[b, j]) + widen(hg[b, j]) + widen(b_hh[j])
    pz = widen(xg[b, H + j]) + widen(hg[b, H + j]) + widen(b_hh[H + j])
    hn = widen(hg[b, 2 * H + j]) + widen(b_hh[2 * H + j])
    r = S.sigmoid_from_exp(pr, math.exp(-abs(pr)))
    z = S.sigmoid_from_exp(pz, math.exp(-abs(pz)))
    n = math.tanh(widen(xg[b, 2 * H + j]) + r * hn)
    _set_gates_device(act, b, j, H, r, z, n, hn)
    h[b, j] = n + z * (widen(h_prev[b, j]) - n)


@device_fn
def _gru_cell_bwd_device(b, j, gy, gh, act, h_prev, dxg, dhg, dh_prev):
    H = gy.shape[1]
    r, z, n, hn = _gates_device(act, b, j, H)
    g = widen(gy[b, j]) + widen(gh[b, j])
    gz = g * z
    dn = S.tanh_grad(g - gz, n)
    dr = S.sigmoid_grad(dn * hn, r)
    dz = S.sigmoid_grad(g * (widen(h_prev[b, j]) - n), z)
    _set_gates3_device(dxg, b, j, H, dr, dz, dn)
    _set_gates3_device(dhg, b, j, H, dr, dz, dn * r)
    dh_prev[b, j] = gz


@device_fn
def _rnn_cell_fwd_device(b, j, xg, hg, nonlin, h):
    p = widen(xg[b, j]) + widen(hg[b, j])
    h[b, j] = S.relu(p) if nonlin == 1 else math.tanh(p)


@device_fn
def _rnn_cell_bwd_device(b, j, gy, gh, h, nonlin, dpre):
    g = widen(gy[b, j]) + widen(gh[b, j])
    y = widen(h[b, j])
    dpre[b, j] = S.relu_grad(g, y) if nonlin == 1 else S.tanh_grad(g, y)


def _step_kernel(name, params, elem, over, sig):
    """The grid-stride kernel ``name(<params>)`` over the ``(b, j)`` pairs of ``over``."""
    return cuda_kernel(sig)(grid_kernel(__name__, name, params, elem, over, (0, 1), 2))


# one thread per hidden unit (b, j): its gates, state and output
_lstm_cell_fwd_kernel = _step_kernel("_lstm_cell_fwd_kernel", "xg, hg, c_prev, act, tc, c, h",
                                     _lstm_cell_fwd_device, "c", _sig(*"mmmmmmm"))
_lstm_cell_bwd_kernel = _step_kernel("_lstm_cell_bwd_kernel", "gy, gh, gc, act, tc, c_prev, dgates, dc_prev",
                                     _lstm_cell_bwd_device, "gy", _sig(*"mmmmmmmm"))
_gru_cell_fwd_kernel = _step_kernel("_gru_cell_fwd_kernel", "xg, hg, b_hh, h_prev, act, h",
                                    _gru_cell_fwd_device, "h", _sig(*"mmvmmm"))
_gru_cell_bwd_kernel = _step_kernel("_gru_cell_bwd_kernel", "gy, gh, act, h_prev, dxg, dhg, dh_prev",
                                    _gru_cell_bwd_device, "gy", _sig(*"mmmmmmm"))
# Elman: h = tanh/relu(xg + hg), and its backward from the output; one thread per element
_rnn_cell_fwd_kernel = _step_kernel("_rnn_cell_fwd_kernel", "xg, hg, nonlin, h", _rnn_cell_fwd_device, "h",
                                    _sig(*"mmim"))
_rnn_cell_bwd_kernel = _step_kernel("_rnn_cell_bwd_kernel", "gy, gh, h, nonlin, dpre", _rnn_cell_bwd_device, "h",
                                    _sig(*"mmmim"))


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
