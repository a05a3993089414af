"""Recurrent modules (``numbagrad/nn/rnn.py``) against PyTorch with identical weights.

For every option (multi-layer, bidirectional, batch_first, unbatched, relu RNN, no bias,
initial states or none) the numbagrad module loads the torch module's ``state_dict`` and
must give the same output, ``h_n`` (and ``c_n``), and the same gradients of the input,
the initial states and every parameter, for one random upstream gradient on each
output. Also: ``state_dict`` keys and shapes equal torch's, PyTorch's init bounds,
``repr``, argument errors, dropout between layers, and the memory behaviour of long
sequences (a 1000-step LSTM trains without recursion and without growing memory; a
1000-step Python loop over ``LSTMCell`` backpropagates).
"""
import gc
import math
import tracemalloc
import warnings

import numpy as np
import pytest

import numbagrad as ng
from numbagrad.nn.rnn import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNCell

torch = pytest.importorskip("torch")

CLASSES = {"LSTM": (LSTM, torch.nn.LSTM), "GRU": (GRU, torch.nn.GRU), "RNN": (RNN, torch.nn.RNN)}
CELLS = {"LSTMCell": (LSTMCell, torch.nn.LSTMCell), "GRUCell": (GRUCell, torch.nn.GRUCell),
         "RNNCell": (RNNCell, torch.nn.RNNCell)}


def _pair(name, *args, table=CLASSES, **kw):
    ncls, tcls = table[name]
    torch.manual_seed(0)
    tm = tcls(*args, **kw).double()
    nm = ncls(*args, **kw, dtype=ng.float64)
    nm.load_state_dict({k: v.detach().numpy() for k, v in tm.state_dict().items()})
    return nm, tm


def _close(a, b, what, rtol=1e-10, atol=1e-12):
    a = a.detach().numpy() if isinstance(a, ng.Tensor) else a
    b = b.detach().numpy() if isinstance(b, torch.Tensor) else b
    np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, err_msg=what)


def _flat_states(s):
    return list(s) if isinstance(s, tuple) else [s]


def _compare(name, kw, in_shape, with_hx, seed=0, unbatched=False):
    I, H = 3, 4
    nm, tm = _pair(name, I, H, **kw)
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(in_shape)
    xn, xt = ng.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    D = 2 if kw.get("bidirectional") else 1
    L = kw.get("num_layers", 1)
    states_n = states_t = None
    hx_arrays = []
    if with_hx:
        B = None if unbatched else in_shape[0 if kw.get("batch_first") else 1]
        sizes = [kw.get("proj_size") or H] + ([H] if name == "LSTM" else [])
        hx_arrays = [rng.standard_normal((L * D, n) if unbatched else (L * D, B, n)) for n in sizes]
        hn_ = [ng.tensor(a, requires_grad=True) for a in hx_arrays]
        ht_ = [torch.tensor(a, requires_grad=True) for a in hx_arrays]
        states_n = tuple(hn_) if name == "LSTM" else hn_[0]
        states_t = tuple(ht_) if name == "LSTM" else ht_[0]
    out_n, s_n = nm(xn, states_n)
    out_t, s_t = tm(xt, states_t)
    _close(out_n, out_t, "output")
    sn, st = _flat_states(s_n), _flat_states(s_t)
    assert len(sn) == len(st)
    for a, b in zip(sn, st):
        assert tuple(a.shape) == tuple(b.shape)
        _close(a, b, "final state")
    vs = [rng.standard_normal(tuple(o.shape)) for o in [out_t] + st]
    ng.autograd.backward([out_n] + sn, [ng.tensor(v) for v in vs])
    torch.autograd.backward([out_t] + st, [torch.tensor(v) for v in vs])
    _close(xn.grad, xt.grad, "grad input")
    if with_hx:
        for a, b in zip(hn_, ht_):
            _close(a.grad, b.grad, "grad initial state")
    pn = dict(nm.named_parameters())
    for k, p in tm.named_parameters():
        _close(pn[k].grad, p.grad, f"grad {k}")


OPTIONS = [
    dict(),
    dict(num_layers=2),
    dict(bidirectional=True),
    dict(num_layers=2, bidirectional=True, batch_first=True),
    dict(bias=False, num_layers=2),
]


def _ids(kw):
    return ",".join(f"{k}={v}" for k, v in kw.items()) or "default"


@pytest.mark.parametrize("kw", OPTIONS, ids=_ids)
@pytest.mark.parametrize("name", list(CLASSES))
def test_module_matches_torch(name, kw):
    shape = (2, 5, 3) if kw.get("batch_first") else (5, 2, 3)
    _compare(name, kw, shape, with_hx=True)
    _compare(name, kw, shape, with_hx=False, seed=1)


@pytest.mark.parametrize("name", list(CLASSES))
@pytest.mark.parametrize("batch_first", [False, True])
def test_unbatched_matches_torch(name, batch_first):
    kw = dict(num_layers=2, bidirectional=True, batch_first=batch_first)
    _compare(name, kw, (5, 3), with_hx=True, unbatched=True)
    _compare(name, kw, (5, 3), with_hx=False, unbatched=True)


@pytest.mark.parametrize("kw", [dict(proj_size=2), dict(proj_size=3, num_layers=2, bidirectional=True),
                                dict(proj_size=1, bias=False, batch_first=True)], ids=str)
def test_lstm_projection_matches_torch(kw):
    shape = (2, 5, 3) if kw.get("batch_first") else (5, 2, 3)
    _compare("LSTM", kw, shape, with_hx=True)
    _compare("LSTM", kw, shape, with_hx=False, seed=1)
    _compare("LSTM", kw, (5, 3), with_hx=True, unbatched=True)
    nm, tm = _pair("LSTM", 3, 4, **kw)
    assert [(k, tuple(v.shape)) for k, v in nm.state_dict().items()] == \
        [(k, tuple(v.shape)) for k, v in tm.state_dict().items()]


def test_relu_rnn_matches_torch():
    _compare("RNN", dict(nonlinearity="relu", num_layers=2, bidirectional=True), (6, 3, 3), with_hx=True)


def test_long_sequence_matches_torch():
    """T = 60 float32 (error growth over many steps stays at float32 rounding)."""
    nm, tm = _pair("LSTM", 5, 8)
    nm.float()
    tm.float()
    x = np.random.default_rng(3).standard_normal((60, 4, 5)).astype(np.float32)
    out_n, (h_n, c_n) = nm(ng.tensor(x))
    out_t, (h_t, c_t) = tm(torch.tensor(x))
    _close(out_n, out_t, "output", rtol=1e-4, atol=2e-6)
    _close(c_n, c_t, "c_n", rtol=1e-4, atol=2e-6)


@pytest.mark.parametrize("name", list(CLASSES))
@pytest.mark.parametrize("kw", [dict(num_layers=3, bidirectional=True), dict(bias=False)])
def test_state_dict_keys_and_shapes_equal_torch(name, kw):
    nm, tm = _pair(name, 3, 4, **kw)
    ns, ts = nm.state_dict(), tm.state_dict()
    assert list(ns) == list(ts)
    for k in ts:
        assert tuple(ns[k].shape) == tuple(ts[k].shape), k
    # and back: torch loads numbagrad's state dict
    tm.load_state_dict({k: torch.from_numpy(v.numpy().copy()) for k, v in ns.items()})


@pytest.mark.parametrize("name", list(CELLS))
def test_cell_state_dict_and_values_match_torch(name):
    nm, tm = _pair(name, 3, 4, table=CELLS)
    assert [(k, tuple(v.shape)) for k, v in nm.state_dict().items()] == \
        [(k, tuple(v.shape)) for k, v in tm.state_dict().items()]
    rng = np.random.default_rng(0)
    for shape in ((2, 3), (3,)):      # batched and unbatched
        x = rng.standard_normal(shape)
        hs = [rng.standard_normal(shape[:-1] + (4,)) for _ in range(2 if name == "LSTMCell" else 1)]
        xn, xt = ng.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
        hn_ = [ng.tensor(a, requires_grad=True) for a in hs]
        ht_ = [torch.tensor(a, requires_grad=True) for a in hs]
        arg_n = tuple(hn_) if name == "LSTMCell" else hn_[0]
        arg_t = tuple(ht_) if name == "LSTMCell" else ht_[0]
        on, ot = _flat_states(nm(xn, arg_n)), _flat_states(tm(xt, arg_t))
        for a, b in zip(on, ot):
            _close(a, b, "cell output")
        vs = [rng.standard_normal(tuple(o.shape)) for o in ot]
        ng.autograd.backward(on, [ng.tensor(v) for v in vs])
        torch.autograd.backward(ot, [torch.tensor(v) for v in vs])
        _close(xn.grad, xt.grad, "cell grad input")
        for a, b in zip(hn_, ht_):
            _close(a.grad, b.grad, "cell grad state")
        pn = dict(nm.named_parameters())
        for k, p in tm.named_parameters():
            _close(pn[k].grad, p.grad, f"cell grad {k}")
            pn[k].grad = None
            p.grad = None
        # hx=None means zeros
        on0 = _flat_states(nm(ng.tensor(x)))
        ot0 = _flat_states(tm(torch.tensor(x)))
        for a, b in zip(on0, ot0):
            _close(a, b, "cell output, hx=None")


def test_relu_cell_matches_torch():
    nm, tm = _pair("RNNCell", 3, 4, table=CELLS, nonlinearity="relu")
    x = np.random.default_rng(1).standard_normal((5, 3))
    _close(nm(ng.tensor(x)), tm(torch.tensor(x)), "relu cell")


def test_init_bounds_and_repr():
    ng.manual_seed(0)
    m = LSTM(10, 16, num_layers=2, bidirectional=True, batch_first=True, dropout=0.25, bias=False)
    bound = 1 / math.sqrt(16)
    for p in m.parameters():
        a = p.detach().numpy()
        assert np.abs(a).max() <= bound and np.abs(a).max() > 0.8 * bound
    assert repr(m) == repr(torch.nn.LSTM(10, 16, num_layers=2, bidirectional=True, batch_first=True,
                                         dropout=0.25, bias=False))
    assert repr(RNN(3, 4, nonlinearity="relu")) == repr(torch.nn.RNN(3, 4, nonlinearity="relu"))
    assert repr(GRU(3, 4)) == repr(torch.nn.GRU(3, 4))
    for name in CELLS:
        assert repr(CELLS[name][0](3, 4, bias=False)) == repr(CELLS[name][1](3, 4, bias=False))
    assert repr(RNNCell(3, 4, nonlinearity="relu")) == repr(torch.nn.RNNCell(3, 4, nonlinearity="relu"))
    assert m.weight_ih_l1_reverse.shape == (64, 32)
    assert len(m.all_weights) == 4
    ng.manual_seed(5)
    a = GRU(3, 4).weight_hh_l0.detach().numpy().copy()
    ng.manual_seed(5)
    np.testing.assert_array_equal(GRU(3, 4).weight_hh_l0.detach().numpy(), a)


def test_argument_errors():
    with pytest.raises(ValueError, match="dropout"):
        LSTM(3, 4, dropout=1.5)
    with pytest.raises(ValueError, match="hidden_size"):
        GRU(3, 0)
    with pytest.raises(TypeError, match="input_size"):
        RNN(3.0, 4)
    with pytest.raises(ValueError, match="nonlinearity"):
        RNN(3, 4, nonlinearity="sigmoid")
    with pytest.raises(ValueError, match="only supported for LSTM"):
        GRU(3, 4, proj_size=2)
    with pytest.raises(ValueError, match="proj_size has to be smaller"):
        LSTM(3, 4, proj_size=4)
    with pytest.warns(UserWarning, match="dropout"):
        LSTM(3, 4, dropout=0.5)
    m = LSTM(3, 4, num_layers=2)
    with pytest.raises(ValueError, match="2D or 3D"):
        m(ng.zeros(2, 3, 4, 3))
    with pytest.raises(RuntimeError, match="input_size"):
        m(ng.zeros(5, 2, 2))
    with pytest.raises(RuntimeError, match=r"hidden\[0\] size"):
        m(ng.zeros(5, 2, 3), (ng.zeros(1, 2, 4), ng.zeros(2, 2, 4)))
    with pytest.raises(RuntimeError, match="3-D"):
        m(ng.zeros(5, 2, 3), (ng.zeros(2, 4), ng.zeros(2, 4)))
    with pytest.raises(ValueError, match="dtype"):
        m(ng.zeros(5, 2, 3, dtype=ng.float64))
    with pytest.raises(RuntimeError, match="hidden size"):
        GRU(3, 4)(ng.zeros(5, 2, 3), ng.zeros(1, 3, 4))


def test_dropout_between_layers():
    ng.manual_seed(0)
    m = GRU(3, 6, num_layers=3, dropout=0.5)
    x = ng.tensor(np.random.default_rng(0).standard_normal((7, 2, 3)).astype(np.float32))
    m.train()
    a, ha = m(x)
    b, hb = m(x)
    assert a.shape == (7, 2, 6) and ha.shape == (3, 2, 6)
    assert not np.allclose(a.detach().numpy(), b.detach().numpy())   # fresh masks each call
    m.eval()
    c, _ = m(x)
    d, _ = m(x)
    np.testing.assert_array_equal(c.detach().numpy(), d.detach().numpy())
    m.dropout = 0.0
    m.train()
    e, _ = m(x)
    np.testing.assert_array_equal(c.detach().numpy(), e.detach().numpy())
    # gradients flow through the dropout masks
    ng.manual_seed(1)
    m.dropout = 0.5
    out, h = m(x)
    (out.sum() + h.sum()).backward()
    assert all(p.grad is not None and np.isfinite(p.grad.numpy()).all() for p in m.parameters())


def test_module_float32_train_step_with_optimizer():
    ng.manual_seed(0)
    m = LSTM(4, 8, batch_first=True)
    head = ng.nn.Linear(8, 3)
    opt = ng.optim.Adam(list(m.parameters()) + list(head.parameters()), lr=0.05)
    rng = np.random.default_rng(0)
    x = ng.tensor(rng.standard_normal((6, 5, 4)).astype(np.float32))
    y = ng.tensor(rng.integers(0, 3, 6))
    losses = []
    for _ in range(15):
        opt.zero_grad()
        out, _ = m(x)
        loss = ng.nn.functional.cross_entropy(head(out[:, -1]), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0]


# ---- long sequences: no recursion, flat memory ----------------------------------------------------------
def test_lstm_1000_steps_trains_with_flat_memory():
    ng.manual_seed(0)
    m = LSTM(4, 8)
    opt = ng.optim.SGD(m.parameters(), lr=0.01)
    x = ng.tensor(np.random.default_rng(0).standard_normal((1000, 2, 4)).astype(np.float32))
    peaks = []
    tracemalloc.start()
    try:
        for _ in range(3):
            gc.collect()
            tracemalloc.reset_peak()
            base = tracemalloc.get_traced_memory()[0]
            opt.zero_grad()
            out, (h, c) = m(x)
            loss = (out * out).mean() + h.sum()
            loss.backward()
            opt.step()
            del out, h, c, loss
            gc.collect()
            cur, peak = tracemalloc.get_traced_memory()
            peaks.append((cur - base, peak - base))
    finally:
        tracemalloc.stop()
    # the step's memory is released (what remains is O(parameters)), and does not grow
    assert peaks[2][0] <= peaks[1][0] + 4096, peaks
    assert peaks[2][1] <= 1.1 * peaks[1][1] + 4096, peaks
    assert all(np.isfinite(p.grad.numpy()).all() for p in m.parameters())


def test_lstm_cell_python_loop_1000_steps_backprops():
    ng.manual_seed(0)
    cell = LSTMCell(3, 5)
    x = np.random.default_rng(0).standard_normal((1000, 2, 3)).astype(np.float32)
    x = ng.tensor(x, requires_grad=True)
    h = c = None
    for t in range(1000):
        h, c = cell(x[t], None if h is None else (h, c))
    (h.sum() + c.sum()).backward()
    g = x.grad.numpy()
    assert g.shape == (1000, 2, 3) and np.isfinite(g).all()
    assert np.abs(g[-1]).sum() > 0
    assert all(p.grad is not None for p in cell.parameters())


def test_no_recursion_through_long_gru_cell_loop():
    ng.manual_seed(0)
    cell = GRUCell(2, 3)
    h = None
    x = ng.tensor(np.ones((2, 2), np.float32))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(1500):
            h = cell(x, h)
    h.sum().backward()
    assert np.isfinite(cell.weight_hh.grad.numpy()).all()
