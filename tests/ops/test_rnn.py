"""Recurrent ops (``numbagrad/ops/rnn.py``, kernels ``numbagrad/kernels/cpu/rnn.py``).

* the fused cell-step kernels against a float64 NumPy reference, forward and backward
  (the backward reference is the chain rule written out gate by gate);
* cell functions and whole-sequence layer Functions against a NumPy float64 reference
  (forward) and float64 central differences (every input: x, states, weights, biases);
* the fused layer (one node over the sequence) equal to a Python loop of cell nodes;
* PyTorch as a second oracle (``torch.lstm_cell`` & co. and ``torch.lstm`` & co.);
* the float16-on-CPU error and shape errors.
"""
import numpy as np
import pytest

import numbagrad as ng
from numbagrad.kernels.cpu import rnn as K
from numbagrad.ops.rnn import (gru, gru_cell, lstm, lstm_cell, rnn_relu, rnn_relu_cell, rnn_tanh,
                               rnn_tanh_cell)
from optest import check_forward, check_grad, check_torch, randn

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None

TOL = {np.float32: dict(rtol=2e-5, atol=2e-6), np.float64: dict(rtol=1e-12, atol=1e-13)}


def _sig(v):
    return 1.0 / (1.0 + np.exp(-v))


# ---- NumPy float64 references (independent of the kernels) ------------------------------------------
def ref_lstm_step(x, h, c, w_ih, w_hh, b_ih=None, b_hh=None):
    p = x @ w_ih.T + h @ w_hh.T
    if b_ih is not None:
        p = p + b_ih + b_hh
    i, f, g, o = np.split(p, 4, axis=-1)
    c1 = _sig(f) * c + _sig(i) * np.tanh(g)
    return _sig(o) * np.tanh(c1), c1


def ref_gru_step(x, h, w_ih, w_hh, b_ih=None, b_hh=None):
    a = x @ w_ih.T + (0 if b_ih is None else b_ih)
    b = h @ w_hh.T + (0 if b_hh is None else b_hh)
    ar, az, an = np.split(a, 3, axis=-1)
    br, bz, bn = np.split(b, 3, axis=-1)
    r, z = _sig(ar + br), _sig(az + bz)
    n = np.tanh(an + r * bn)
    return (1 - z) * n + z * h


def ref_rnn_step(x, h, w_ih, w_hh, b_ih=None, b_hh=None, relu=False):
    p = x @ w_ih.T + h @ w_hh.T
    if b_ih is not None:
        p = p + b_ih + b_hh
    return np.maximum(p, 0) if relu else np.tanh(p)


def ref_layer(mode, x, h0, c0, w_ih, w_hh, b_ih, b_hh, reverse=False):
    """One layer and direction over x (T, B, in): (y, h_n, c_n)."""
    T = x.shape[0]
    h, c = h0, c0
    ys = [None] * T
    for t in (range(T - 1, -1, -1) if reverse else range(T)):
        if mode == "LSTM":
            h, c = ref_lstm_step(x[t], h, c, w_ih, w_hh, b_ih, b_hh)
        elif mode == "GRU":
            h = ref_gru_step(x[t], h, w_ih, w_hh, b_ih, b_hh)
        else:
            h = ref_rnn_step(x[t], h, w_ih, w_hh, b_ih, b_hh, relu=mode == "RNN_RELU")
        ys[t] = h
    return np.stack(ys), h, c


def ref_stack(mode, x, h0, c0, params, has_biases, num_layers, bidirectional):
    """Multi-layer (bi)directional reference (no dropout), x (T, B, in)."""
    D = 2 if bidirectional else 1
    per = 4 if has_biases else 2
    hn, cn = [], []
    for layer in range(num_layers):
        outs = []
        for d in range(D):
            k = layer * D + d
            w = params[k * per:(k + 1) * per]
            b = (w[2], w[3]) if has_biases else (None, None)
            y, h, c = ref_layer(mode, x, h0[k], None if c0 is None else c0[k], w[0], w[1], *b, reverse=d == 1)
            outs.append(y)
            hn.append(h)
            cn.append(c)
        x = np.concatenate(outs, axis=2)
    return x, np.stack(hn), (np.stack(cn) if c0 is not None else None)


# ---- kernels ------------------------------------------------------------------------------------------
def _c(a, dt):
    return np.ascontiguousarray(a, dtype=dt)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_lstm_cell_kernels_match_reference(dtype):
    B, H = 3, 5
    xg, hg = randn(B, 4 * H, seed=1) * 2, randn(B, 4 * H, seed=2)
    c_prev = randn(B, H, seed=3)
    act, tc, c, h = (np.empty((B, n), dtype) for n in (4 * H, H, H, H))
    K._lstm_cell_fwd_cpu(_c(xg, dtype), _c(hg, dtype), _c(c_prev, dtype), act, tc, c, h)
    p = xg + hg
    i, f, g, o = _sig(p[:, :H]), _sig(p[:, H:2 * H]), np.tanh(p[:, 2 * H:3 * H]), _sig(p[:, 3 * H:])
    c_ref = f * c_prev + i * g
    for got, exp in ((act, np.concatenate([i, f, g, o], 1)), (tc, np.tanh(c_ref)), (c, c_ref),
                     (h, o * np.tanh(c_ref))):
        np.testing.assert_allclose(got, exp, **TOL[dtype])
    gy, gh, gc = randn(B, H, seed=4), randn(B, H, seed=5), randn(B, H, seed=6)
    dG, dc = np.empty((B, 4 * H), dtype), np.empty((B, H), dtype)
    K._lstm_cell_bwd_cpu(_c(gy, dtype), _c(gh, dtype), _c(gc, dtype), act, tc, _c(c_prev, dtype), dG, dc)
    # chain rule gate by gate, float64, from the reference activations
    tcr = np.tanh(c_ref)
    gH = gy + gh
    dcr = gc + gH * o * (1 - tcr ** 2)
    exp = np.concatenate([dcr * g * i * (1 - i), dcr * c_prev * f * (1 - f), dcr * i * (1 - g ** 2),
                          gH * tcr * o * (1 - o)], 1)
    np.testing.assert_allclose(dG, exp, **TOL[dtype])
    np.testing.assert_allclose(dc, dcr * f, **TOL[dtype])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_lstm_cell_fwd_kernel_act_may_alias_xg(dtype):
    """The sequence layer passes act = xg (gates written over the pre-activations)."""
    B, H = 3, 5
    xg, hg, c_prev = (_c(randn(B, n, seed=s) * 2, dtype) for s, n in ((7, 4 * H), (8, 4 * H), (9, H)))
    outs = [[np.empty((B, n), dtype) for n in (4 * H, H, H, H)] for _ in range(2)]
    K._lstm_cell_fwd_cpu(xg, hg, c_prev, *outs[0])
    xg2 = xg.copy()
    K._lstm_cell_fwd_cpu(xg2, hg, c_prev, xg2, *outs[1][1:])
    outs[1][0] = xg2
    for a, b in zip(*outs):
        np.testing.assert_array_equal(b, a)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gru_cell_kernels_match_reference(dtype):
    B, H = 2, 4
    xg, hg = randn(B, 3 * H, seed=11) * 2, randn(B, 3 * H, seed=12)
    b_hh, h_prev = randn(3 * H, seed=13), randn(B, H, seed=14)
    act, h = np.empty((B, 4 * H), dtype), np.empty((B, H), dtype)
    K._gru_cell_fwd_cpu(_c(xg, dtype), _c(hg, dtype), _c(b_hh, dtype), _c(h_prev, dtype), act, h)
    hb = hg + b_hh
    r, z = _sig(xg[:, :H] + hb[:, :H]), _sig(xg[:, H:2 * H] + hb[:, H:2 * H])
    n = np.tanh(xg[:, 2 * H:] + r * hb[:, 2 * H:])
    np.testing.assert_allclose(act, np.concatenate([r, z, n, hb[:, 2 * H:]], 1), **TOL[dtype])
    np.testing.assert_allclose(h, (1 - z) * n + z * h_prev, **TOL[dtype])
    gy, gh = randn(B, H, seed=15), randn(B, H, seed=16)
    dxg, dhg, dhp = np.empty((B, 3 * H), dtype), np.empty((B, 3 * H), dtype), np.empty((B, H), dtype)
    K._gru_cell_bwd_cpu(_c(gy, dtype), _c(gh, dtype), act, _c(h_prev, dtype), dxg, dhg, dhp)
    g = gy + gh
    dn = g * (1 - z) * (1 - n ** 2)
    dr = dn * hb[:, 2 * H:] * r * (1 - r)
    dz = g * (h_prev - n) * z * (1 - z)
    np.testing.assert_allclose(dxg, np.concatenate([dr, dz, dn], 1), **TOL[dtype])
    np.testing.assert_allclose(dhg, np.concatenate([dr, dz, dn * r], 1), **TOL[dtype])
    np.testing.assert_allclose(dhp, g * z, **TOL[dtype])


@pytest.mark.parametrize("nonlin", [0, 1])
def test_rnn_cell_kernels_match_reference(nonlin):
    B, H = 3, 4
    xg, hg = randn(B, H, seed=21), randn(B, H, seed=22, low=0.05)
    h = np.empty((B, H))
    K._rnn_cell_fwd_cpu(xg, hg, nonlin, h)
    p = xg + hg
    np.testing.assert_allclose(h, np.maximum(p, 0) if nonlin else np.tanh(p), **TOL[np.float64])
    gy, gh = randn(B, H, seed=23), randn(B, H, seed=24)
    d = np.empty((B, H))
    K._rnn_cell_bwd_cpu(gy, gh, h, nonlin, d)
    exp = (gy + gh) * ((p > 0) if nonlin else (1 - np.tanh(p) ** 2))
    np.testing.assert_allclose(d, exp, **TOL[np.float64])


def test_float16_on_cpu_raises_clearly():
    x = ng.tensor(np.zeros((2, 3), np.float16))
    h = ng.tensor(np.zeros((2, 2), np.float16))
    w_ih = ng.tensor(np.zeros((8, 3), np.float16))
    w_hh = ng.tensor(np.zeros((8, 2), np.float16))
    with pytest.raises(TypeError, match="float16"):
        lstm_cell(x, (h, h), w_ih, w_hh)


# ---- cells: forward vs NumPy, gradients vs finite differences and torch ------------------------------------
B, N_IN, H = 2, 3, 2


def _cell_inputs(chunks, bias=True, seed=0, unbatched=False):
    xs = (N_IN,) if unbatched else (B, N_IN)
    hs = (H,) if unbatched else (B, H)
    out = [randn(*xs, seed=seed), randn(*hs, seed=seed + 1)]
    out += [randn(chunks * H, N_IN, seed=seed + 2) * 0.7, randn(chunks * H, H, seed=seed + 3) * 0.7]
    if bias:
        out += [randn(chunks * H, seed=seed + 4) * 0.5, randn(chunks * H, seed=seed + 5) * 0.5]
    return out


def _lstm_cell_fn(x, h, c, *w):
    return lstm_cell(x, (h, c), *w)


def _lstm_cell_ref(x, h, c, *w):
    return ref_lstm_step(x, h, c, *w)


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("unbatched", [False, True])
def test_lstm_cell(bias, unbatched):
    x, h, *w = _cell_inputs(4, bias, unbatched=unbatched)
    c = randn(*h.shape, seed=9)
    inputs = [x, h, c, *w]
    check_forward(_lstm_cell_fn, _lstm_cell_ref, inputs)
    check_grad(_lstm_cell_fn, inputs)
    if torch is not None and not unbatched:  # torch.lstm_cell is batched only (nn.LSTMCell: test_nn_rnn)
        check_torch(_lstm_cell_fn, lambda x, h, c, *w: torch.lstm_cell(x, (h, c), *w), inputs)


@pytest.mark.parametrize("bias", [True, False])
def test_gru_cell(bias):
    inputs = _cell_inputs(3, bias, seed=30)
    check_forward(gru_cell, ref_gru_step, inputs)
    check_grad(gru_cell, inputs)
    if torch is not None:
        check_torch(gru_cell, torch.gru_cell, inputs)


@pytest.mark.parametrize("fn,tfn,relu", [(rnn_tanh_cell, "rnn_tanh_cell", False),
                                         (rnn_relu_cell, "rnn_relu_cell", True)])
def test_rnn_cells(fn, tfn, relu):
    inputs = _cell_inputs(1, True, seed=40)
    check_forward(fn, lambda *a: ref_rnn_step(*a, relu=relu), inputs)
    check_grad(fn, inputs)
    if torch is not None:
        check_torch(fn, getattr(torch, tfn), inputs)


def test_cell_hx_none_is_zeros():
    x, h, *w = _cell_inputs(4, True, seed=50)
    xt = ng.tensor(x)
    wt = [ng.tensor(a) for a in w]
    z = ng.zeros(B, H, dtype=ng.float64)
    for a, b in zip(lstm_cell(xt, None, *wt), lstm_cell(xt, (z, z), *wt)):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    x, h, *w = _cell_inputs(3, True, seed=51)
    np.testing.assert_array_equal(gru_cell(ng.tensor(x), None, *map(ng.tensor, w)).numpy(),
                                  gru_cell(ng.tensor(x), z, *map(ng.tensor, w)).numpy())


# ---- whole-sequence layers ------------------------------------------------------------------------------
T = 4
MODES = {"LSTM": (lstm, 4), "GRU": (gru, 3), "RNN_TANH": (rnn_tanh, 1), "RNN_RELU": (rnn_relu, 1)}


def _seq_fn(mode, num_layers, bidirectional, has_biases, batch_first=False):
    fn, _ = MODES[mode]
    D = 2 if bidirectional else 1
    per = 4 if has_biases else 2

    def run(x, h0, *rest):
        if mode == "LSTM":
            c0, params = rest[0], rest[1:]
            out, h, c = fn(x, (h0, c0), list(params), has_biases, num_layers, 0.0, True, bidirectional,
                           batch_first)
            return out, h, c
        out, h = fn(x, h0, list(rest), has_biases, num_layers, 0.0, True, bidirectional, batch_first)
        return out, h

    def ref(x, h0, *rest):
        c0, params = (rest[0], rest[1:]) if mode == "LSTM" else (None, rest)
        xx = x.transpose(1, 0, 2) if batch_first else x
        out, h, c = ref_stack(mode, xx, h0, c0, list(params), has_biases, num_layers, bidirectional)
        out = out.transpose(1, 0, 2) if batch_first else out
        return (out, h, c) if mode == "LSTM" else (out, h)

    def inputs(seed=0, b=2, n_in=3, hid=2):
        _, chunks = MODES[mode]
        x = randn(*((b, T, n_in) if batch_first else (T, b, n_in)), seed=seed)
        if mode == "RNN_RELU":   # keep pre-activations away from the relu kink
            x = x + np.sign(x) * 0.3
        st = [randn(num_layers * D, b, hid, seed=seed + 1)]
        if mode == "LSTM":
            st.append(randn(num_layers * D, b, hid, seed=seed + 2))
        params = []
        for layer in range(num_layers):
            for d in range(D):
                k = 10 * (layer * D + d) + seed
                li = n_in if layer == 0 else hid * D
                params += [randn(chunks * hid, li, seed=k + 3) * 0.6,
                           randn(chunks * hid, hid, seed=k + 4) * 0.6]
                if has_biases:
                    params += [randn(chunks * hid, seed=k + 5) * 0.3, randn(chunks * hid, seed=k + 6) * 0.3]
        assert len(params) == num_layers * D * per
        return [x, *st, *params]

    return run, ref, inputs


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("bidirectional", [False, True])
def test_layer_forward_and_finite_differences(mode, bidirectional):
    run, ref, inputs = _seq_fn(mode, 1, bidirectional, True)
    ins = inputs(seed=3)
    check_forward(run, ref, ins)
    check_grad(run, ins, n_dirs=3)


@pytest.mark.parametrize("mode", ["LSTM", "GRU"])
def test_two_layers_batch_first_no_bias(mode):
    run, ref, inputs = _seq_fn(mode, 2, True, False, batch_first=True)
    ins = inputs(seed=7)
    check_forward(run, ref, ins, dtypes=(np.float64,))
    check_grad(run, ins, n_dirs=2)


def _tensors(arrays, requires_grad=True):
    return [ng.tensor(a, requires_grad=requires_grad) for a in arrays]


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("reverse", [False, True])
def test_fused_layer_equals_cell_loop(mode, reverse):
    """One layer node over the sequence == a Python loop of cell nodes (values and grads)."""
    _, chunks = MODES[mode]
    b, n_in, hid = 3, 4, 5
    arrs = [randn(T, b, n_in, seed=60), randn(1, b, hid, seed=61), randn(1, b, hid, seed=62),
            randn(chunks * hid, n_in, seed=63) * 0.5, randn(chunks * hid, hid, seed=64) * 0.5,
            randn(chunks * hid, seed=65) * 0.3, randn(chunks * hid, seed=66) * 0.3]
    if mode != "LSTM":
        del arrs[2]
    v = randn(T, b, hid, seed=67)
    fused = _tensors(arrs)
    x, h0, *rest = fused
    fn, _ = MODES[mode]
    c0, params = (rest[0], rest[1:]) if mode == "LSTM" else (None, rest)
    if not reverse:
        hx = (h0, c0) if mode == "LSTM" else h0
        out, hn = fn(x, hx, params, True, 1, 0.0, True, False, False)[:2]
    else:   # run the reverse direction alone through the layer Function
        from numbagrad.ops import rnn as R
        if mode == "LSTM":
            out, hn, cn = R.LSTMLayer.apply(x, h0[0], c0[0], *params, None, True)
        elif mode == "GRU":
            out, hn = R.GRULayer.apply(x, h0[0], *params, True)
        else:
            out, hn = R.RNNLayer.apply(x, h0[0], *params, 1 if mode == "RNN_RELU" else 0, True)
    loss = (out * ng.tensor(v)).sum() + hn.sum() * 0.5
    loss.backward()

    loop = _tensors(arrs)
    x, h0, *rest = loop
    h = h0[0]
    c = rest[0][0] if mode == "LSTM" else None
    params = rest[1:] if mode == "LSTM" else rest
    ys = [None] * T
    for t in (range(T - 1, -1, -1) if reverse else range(T)):
        if mode == "LSTM":
            h, c = lstm_cell(x[t], (h, c), *params)
        elif mode == "GRU":
            h = gru_cell(x[t], h, *params)
        else:
            h = (rnn_relu_cell if mode == "RNN_RELU" else rnn_tanh_cell)(x[t], h, *params)
        ys[t] = h
    out2 = ng.stack(ys)
    loss2 = (out2 * ng.tensor(v)).sum() + h.sum() * 0.5
    loss2.backward()
    np.testing.assert_allclose(out.detach().numpy(), out2.detach().numpy(), rtol=1e-12, atol=1e-14)
    for a, b_ in zip(fused, loop):
        np.testing.assert_allclose(a.grad.numpy(), b_.grad.numpy(), rtol=1e-11, atol=1e-13)


@pytest.mark.skipif(torch is None, reason="torch not installed")
@pytest.mark.parametrize("mode", list(MODES))
def test_layers_match_torch_functional(mode):
    run, _, inputs = _seq_fn(mode, 2, True, True)
    ins = inputs(seed=11)
    tfn = {"LSTM": torch.lstm, "GRU": torch.gru, "RNN_TANH": torch.rnn_tanh, "RNN_RELU": torch.rnn_relu}[mode]

    def t_run(x, h0, *rest):
        if mode == "LSTM":
            return tfn(x, (h0, rest[0]), list(rest[1:]), True, 2, 0.0, True, True, False)
        return tfn(x, h0, list(rest), True, 2, 0.0, True, True, False)

    check_torch(run, t_run, ins, rtol=1e-10, atol=1e-12)


def _ref_lstm_proj(x, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr):
    h, c = h0, c0
    ys = []
    for t in range(x.shape[0]):
        r, c = ref_lstm_step(x[t], h, c, w_ih, w_hh, b_ih, b_hh)
        h = r @ w_hr.T
        ys.append(h)
    return np.stack(ys), h[None], c[None]


def test_lstm_projection_layer():
    """proj_size: h = (o * tanh(c)) @ W_hr^T; forward vs NumPy, gradients vs finite differences."""
    b, n_in, hid, P = 2, 3, 4, 2
    ins = [randn(T, b, n_in, seed=80), randn(1, b, P, seed=81), randn(1, b, hid, seed=82),
           randn(4 * hid, n_in, seed=83) * 0.6, randn(4 * hid, P, seed=84) * 0.6,
           randn(4 * hid, seed=85) * 0.3, randn(4 * hid, seed=86) * 0.3, randn(P, hid, seed=87) * 0.8]

    def run(x, h0, c0, *params):
        return lstm(x, (h0, c0), list(params), True, 1, 0.0, True, False, False)

    def ref(x, h0, c0, *params):
        return _ref_lstm_proj(x, h0[0], c0[0], *params)

    check_forward(run, ref, ins)
    check_grad(run, ins, n_dirs=3)


def test_layer_shape_errors():
    run, _, inputs = _seq_fn("LSTM", 1, False, True)
    x, h0, c0, *params = _tensors(inputs(), requires_grad=False)
    with pytest.raises(RuntimeError, match="input_size"):
        lstm(x[:, :, :2], (h0, c0), params, True, 1, 0.0, True, False, False)
    with pytest.raises(RuntimeError, match="hidden size"):
        lstm(x, (h0[:, :1], c0), params, True, 1, 0.0, True, False, False)
    with pytest.raises(RuntimeError, match="parameter tensors"):
        lstm(x, (h0, c0), params[:3], True, 1, 0.0, True, False, False)
    with pytest.raises(RuntimeError, match="inconsistent input_size"):
        lstm_cell(x[0][:, :2], (h0[0], c0[0]), *params)


def test_layer_saves_for_backward_and_frees():
    """After backward the layer node drops its buffers; a second backward raises."""
    run, _, inputs = _seq_fn("LSTM", 1, False, True)
    ts = _tensors(inputs(seed=5))
    out, h, c = run(*ts)
    loss = out.sum() + c.sum()
    loss.backward()
    assert out.grad_fn._saved is None
    with pytest.raises(RuntimeError, match="second time"):
        loss.backward()
