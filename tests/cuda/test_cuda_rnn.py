"""CUDA recurrent cells (``numbagrad/kernels/cuda/rnn.py``) against the CPU kernels, and
tiny LSTM / GRU / RNN layers and cells on ``device="cuda"`` against the same modules on
the CPU (outputs, final states, and the gradients of input, initial states and every
parameter). Shapes are tiny (T=3, B=2, H=4): the simulator costs ~0.3 ms per thread.
"""
import numpy as np
import pytest

cuda = pytest.importorskip("numba.cuda")

import numbagrad as ng  # noqa: E402
from numbagrad.kernels.cpu import rnn as C  # noqa: E402
from numbagrad.kernels.cuda import rnn as G  # noqa: E402
from numbagrad.nn.rnn import GRU, LSTM, RNN, GRUCell, LSTMCell  # noqa: E402
from optest import randn  # noqa: E402

B, H = 2, 4
TOL = {np.float32: dict(rtol=2e-5, atol=2e-6), np.float64: dict(rtol=1e-12, atol=1e-14)}
TOL16 = dict(rtol=5e-3, atol=2e-3)


def _arrays(shapes, dtype, seed):
    """Row-major (B, n) kernel operands (1-D for a bias)."""
    return [np.ascontiguousarray(randn(*s, seed=seed + i) * 1.5, dtype=dtype) for i, s in enumerate(shapes)]


def _run(name, ins, out_shapes, dtype, scalars=(), pos=None):
    """Run ``_<name>_cpu`` and ``_<name>_cuda`` on the same inputs; returns both outputs.
    ``scalars`` are inserted at position ``pos`` of the argument list."""
    def args(arrs, outs):
        a = list(arrs)
        if scalars:
            a[pos:pos] = list(scalars)
        return a + list(outs)

    cpu_dtype = np.float32 if dtype == np.float16 else dtype
    outs_c = [np.zeros(s, cpu_dtype) for s in out_shapes]
    getattr(C, f"_{name}_cpu")(*args([a.astype(cpu_dtype) for a in ins], outs_c))
    d_in = [cuda.to_device(a) for a in ins]
    d_out = [cuda.to_device(np.zeros(s, dtype)) for s in out_shapes]
    getattr(G, f"_{name}_cuda")(*args(d_in, d_out))
    return outs_c, [d.copy_to_host() for d in d_out]


def _check(pairs, dtype):
    tol = TOL16 if dtype == np.float16 else TOL[dtype]
    for c, g in zip(*pairs):
        assert g.dtype == dtype
        np.testing.assert_allclose(g.astype(np.float64), c.astype(np.float64), **tol)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_lstm_cell_kernels_match_cpu(dtype):
    ins = _arrays([(B, 4 * H), (B, 4 * H), (B, H)], dtype, 0)
    (act, tc, c, h), got = _run("lstm_cell_fwd", ins, [(B, 4 * H), (B, H), (B, H), (B, H)], dtype)
    _check(((act, tc, c, h), got), dtype)
    g_ins = _arrays([(B, H)] * 3, dtype, 10) + [a.astype(dtype) for a in (act, tc)] + [ins[2]]
    _check(_run("lstm_cell_bwd", g_ins, [(B, 4 * H), (B, H)], dtype), dtype)


def test_lstm_cell_fwd_kernel_act_may_alias_xg():
    """The sequence layer writes the gates over xg (act is xg): same results as the CPU."""
    ins = _arrays([(B, 4 * H), (B, 4 * H), (B, H)], np.float32, 60)
    want = [np.zeros(s, np.float32) for s in [(B, 4 * H), (B, H), (B, H), (B, H)]]
    C._lstm_cell_fwd_cpu(*ins, *want)
    d_xg = cuda.to_device(ins[0])
    d_out = [cuda.to_device(np.zeros((B, H), np.float32)) for _ in range(3)]
    G._lstm_cell_fwd_cuda(d_xg, cuda.to_device(ins[1]), cuda.to_device(ins[2]), d_xg, *d_out)
    _check((want, [d_xg.copy_to_host()] + [d.copy_to_host() for d in d_out]), np.float32)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_gru_cell_kernels_match_cpu(dtype):
    ins = _arrays([(B, 3 * H), (B, 3 * H), (3 * H,), (B, H)], dtype, 20)
    (act, h), got = _run("gru_cell_fwd", ins, [(B, 4 * H), (B, H)], dtype)
    _check(((act, h), got), dtype)
    g_ins = _arrays([(B, H)] * 2, dtype, 30) + [act.astype(dtype), ins[3]]
    _check(_run("gru_cell_bwd", g_ins, [(B, 3 * H), (B, 3 * H), (B, H)], dtype), dtype)


@pytest.mark.parametrize("nonlin", [0, 1])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_rnn_cell_kernels_match_cpu(dtype, nonlin):
    ins = _arrays([(B, H), (B, H)], dtype, 40)
    (h,), got = _run("rnn_cell_fwd", ins, [(B, H)], dtype, scalars=(nonlin,), pos=2)
    _check(((h,), got), dtype)
    g_ins = _arrays([(B, H)] * 2, dtype, 50) + [h.astype(dtype)]
    _check(_run("rnn_cell_bwd", g_ins, [(B, H)], dtype, scalars=(nonlin,), pos=3), dtype)


# ---- layers and cells on the device vs the CPU ----------------------------------------------------------
DEV_TOL = {np.float32: dict(rtol=1e-4, atol=1e-5), np.float64: dict(rtol=1e-10, atol=1e-12)}


def _host(t):
    return t.detach().cpu().numpy()


def _compare_module(make, x_shape, n_states, dtype=np.float32, seed=0):
    ng.manual_seed(seed)
    cpu = make().to(dtype)
    dev = make().to(dtype)
    dev.load_state_dict({k: v.numpy() for k, v in cpu.state_dict().items()})
    dev.to("cuda")
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(x_shape).astype(dtype)
    outs = {}
    vs = None
    for m, device in ((cpu, "cpu"), (dev, "cuda")):
        xt = ng.tensor(x, device=device, requires_grad=True)
        o, s = m(xt)
        states = list(s) if isinstance(s, tuple) else [s]
        assert o.device == ng.device(device)
        if vs is None:   # one upstream gradient for both devices
            vs = [rng.standard_normal(tuple(t.shape)).astype(dtype) for t in [o] + states]
        ng.autograd.backward([o] + states, [ng.tensor(v, device=device) for v in vs])
        outs[device] = [_host(o)] + [_host(t) for t in states] + [_host(xt.grad)] + \
            [_host(p.grad) for _, p in m.named_parameters()]
    assert len(outs["cpu"]) == len(outs["cuda"]) == 2 + n_states + len(list(cpu.parameters()))
    for i, (a, b) in enumerate(zip(outs["cpu"], outs["cuda"])):
        np.testing.assert_allclose(b, a, err_msg=f"item {i}", **DEV_TOL[dtype])


@pytest.mark.parametrize("name", ["LSTM", "GRU", "RNN"])
def test_layer_on_device_matches_cpu(name):
    cls = {"LSTM": LSTM, "GRU": GRU, "RNN": RNN}[name]
    _compare_module(lambda: cls(3, H), (3, B, 3), 2 if name == "LSTM" else 1)


def test_projected_lstm_on_device_matches_cpu():
    _compare_module(lambda: LSTM(3, H, proj_size=2), (3, B, 3), 2, seed=3)


def test_bidirectional_two_layer_lstm_on_device_matches_cpu():
    _compare_module(lambda: LSTM(2, 3, num_layers=2, bidirectional=True, batch_first=True), (B, 2, 2), 2,
                    dtype=np.float64, seed=1)


@pytest.mark.parametrize("cls", [LSTMCell, GRUCell])
def test_cells_on_device_match_cpu(cls):
    ng.manual_seed(2)
    cpu = cls(3, H)
    dev = cls(3, H)
    dev.load_state_dict({k: v.numpy() for k, v in cpu.state_dict().items()})
    dev.to("cuda")
    x = np.random.default_rng(2).standard_normal((2, B, 3)).astype(np.float32)
    res = {}
    for m, device in ((cpu, "cpu"), (dev, "cuda")):
        xt = ng.tensor(x, device=device, requires_grad=True)
        s = None
        for t in range(2):
            s = m(xt[t], s)
        outs = list(s) if isinstance(s, tuple) else [s]
        sum(o.sum() for o in outs).backward()
        res[device] = [_host(o) for o in outs] + [_host(xt.grad)] + [_host(p.grad) for p in m.parameters()]
    for a, b in zip(res["cpu"], res["cuda"]):
        np.testing.assert_allclose(b, a, **DEV_TOL[np.float32])
