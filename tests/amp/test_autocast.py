"""``numbagrad.autocast`` on the CPU (``numbagrad/amp/__init__.py``, ``numbagrad/ops/_autocast.py``,
``numbagrad/_autocast_state.py``).

* Every autocast-listed op, under bfloat16 and float16 regions, against torch's
  ``torch.autocast("cpu", dtype=...)``: the output dtype is torch's, and the values agree
  to two units in the last place of the reduced type (accumulation order differs).
  Ops off the lists keep torch's dtype too (a bfloat16 input stays bfloat16, bfloat16
  meeting float32 is float32).
* The convolutions, ``scaled_dot_product_attention`` and ``MultiheadAttention`` (with and
  without returned weights) run in the region's dtype as torch's, with float32 parameter
  gradients close to torch's; the recurrent ops follow torch's lists (Elman cells in the
  region's dtype; ``GRU``, ``GRUCell``, ``LSTMCell`` float32). The attention core that
  recomputes its probabilities in backward gives the gradients of the one that kept them.
* A small MLP's forward and loss under autocast: parameter gradients are float32 and
  close to torch's.
* Nesting (an inner region disables or changes the dtype, each exit restores), the
  decorator form, thread-locality, the weight-cast cache, ``custom_fwd``/``custom_bwd``,
  and digits trained under bfloat16 autocast with ``GradScaler("cpu")``.
torch is an optional oracle: those tests skip without it.
"""
import threading

import numpy as np
import pytest

import numbagrad as ng
from numbagrad import nn
from numbagrad.nn import functional as F
from numbagrad.ops import _autocast as AC

try:
    import torch
    import torch.nn.functional as TF
except ImportError:  # pragma: no cover
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch is not installed")

DTYPES = {"bfloat16": (ng.bfloat16, "bfloat16", 2.0 ** -7), "float16": (ng.float16, "float16", 2.0 ** -10)}


def _pair(*shape, seed, positive=False, low_dtype=None):
    """The same random float32 array as a numbagrad and a torch tensor (optionally stored
    in ``low_dtype`` first: ``"bfloat16"``)."""
    a = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    if positive:
        a = np.abs(a) / (np.abs(a).max() + 1) + 0.01
    t = torch.from_numpy(a.copy())
    n = ng.tensor(a)
    if low_dtype is not None:
        t = t.to(getattr(torch, low_dtype))
        n = n.to(getattr(ng, low_dtype))
    return n, t


def _close(n, t, eps, ulps=2):
    a, b = n.to(ng.float32).detach().numpy(), t.float().detach().numpy()
    scale = max(float(np.abs(b).max()), 1e-30)
    np.testing.assert_allclose(a, b, rtol=ulps * eps, atol=ulps * eps * scale)


# ---- the op lists against torch ------------------------------------------------------------------
def _lower_cases():
    def mats(seed):
        (a, ta), (b, tb) = _pair(6, 8, seed=seed), _pair(8, 5, seed=seed + 1)
        return (a, b), (ta, tb)

    def bmats(seed):
        (a, ta), (b, tb) = _pair(3, 6, 8, seed=seed), _pair(3, 8, 5, seed=seed + 1)
        return (a, b), (ta, tb)

    def lin(seed):
        (x, tx), (w, tw), (b, tb) = _pair(2, 6, 8, seed=seed), _pair(5, 8, seed=seed + 1), _pair(5, seed=seed + 2)
        return (x, w, b), (tx, tw, tb)

    def conv(seed, xs, ws, nb):
        (x, tx), (w, tw), (b, tb) = _pair(*xs, seed=seed), _pair(*ws, seed=seed + 1), _pair(nb, seed=seed + 2)
        return (x, w, b), (tx, tw, tb)

    def attn(seed):
        ps = [_pair(2, 3, 6, 8, seed=seed + i) for i in range(3)]
        m = np.triu(np.full((6, 6), -np.inf, np.float32), 1)  # a float32 mask is cast too
        return tuple(p[0] for p in ps) + (ng.tensor(m),), tuple(p[1] for p in ps) + (torch.from_numpy(m),)

    tf = TF if torch else None
    return {
        "conv1d": (lambda s: conv(s, (2, 3, 10), (4, 3, 3), 4), lambda x, w, b: F.conv1d(x, w, b, padding=1),
                   lambda x, w, b: tf.conv1d(x, w, b, padding=1)),
        "conv2d": (lambda s: conv(s, (2, 3, 7, 7), (4, 3, 3, 3), 4), lambda x, w, b: F.conv2d(x, w, b, stride=2),
                   lambda x, w, b: tf.conv2d(x, w, b, stride=2)),
        "conv_transpose1d": (lambda s: conv(s, (2, 3, 6), (3, 4, 3), 4), F.conv_transpose1d,
                             tf.conv_transpose1d if torch else None),
        "conv_transpose2d": (lambda s: conv(s, (2, 3, 4, 4), (3, 4, 3, 3), 4),
                             lambda x, w, b: F.conv_transpose2d(x, w, b, stride=2),
                             lambda x, w, b: tf.conv_transpose2d(x, w, b, stride=2)),
        "scaled_dot_product_attention": (attn, lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, m),
                                         lambda q, k, v, m: tf.scaled_dot_product_attention(q, k, v, m)),
        "matmul": (mats, ng.matmul, torch.matmul if torch else None),
        "operator @": (mats, lambda a, b: a @ b, lambda a, b: a @ b),
        "mm": (mats, ng.mm, torch.mm if torch else None),
        "bmm": (bmats, ng.bmm, torch.bmm if torch else None),
        "linear": (lin, F.linear, TF.linear if torch else None),
        "einsum": (mats, lambda a, b: ng.einsum("ij,jk->ik", a, b), lambda a, b: torch.einsum("ij,jk->ik", a, b)),
    }


def _fp32_cases():
    def logits(seed, low):
        (x, tx) = _pair(6, 5, seed=seed, low_dtype=low)
        y = np.random.default_rng(seed).integers(0, 5, 6)
        return (x, ng.tensor(y)), (tx, torch.from_numpy(y))

    def pair(seed, low):
        (x, tx), (y, ty) = _pair(6, 5, seed=seed, low_dtype=low), _pair(6, 5, seed=seed + 1, low_dtype=low)
        return (x, y), (tx, ty)

    def probs(seed, low):
        (x, tx), (y, ty) = (_pair(6, 5, seed=seed, positive=True, low_dtype=low),
                            _pair(6, 5, seed=seed + 1, positive=True, low_dtype=low))
        return (x, y), (tx, ty)

    def signs(seed, low):
        (x, tx), (y, ty) = _pair(6, seed=seed, low_dtype=low), _pair(6, seed=seed + 1, low_dtype=low)
        s = np.sign(np.random.default_rng(seed).standard_normal(6)).astype(np.float32)
        return (x, y, ng.tensor(s)), (tx, ty, torch.from_numpy(s))

    def triple(seed, low):
        ps = [_pair(6, 5, seed=seed + i, low_dtype=low) for i in range(3)]
        return tuple(p[0] for p in ps), tuple(p[1] for p in ps)

    def pm(seed, low):
        (x, tx) = _pair(6, 5, seed=seed, low_dtype=low)
        s = np.sign(np.random.default_rng(seed + 1).standard_normal((6, 5))).astype(np.float32)
        return (x, ng.tensor(s)), (tx, torch.from_numpy(s))

    def cos(seed, low):
        (x, y), (tx, ty) = pair(seed, low)
        s = np.sign(np.arange(6) - 2.5).astype(np.float32)
        return (x, y, ng.tensor(s)), (tx, ty, torch.from_numpy(s))

    def one(seed, low):
        (x, tx) = _pair(3, 4, seed=seed, positive=True, low_dtype=low)
        return (x,), (tx,)

    return {
        "cross_entropy": (logits, F.cross_entropy, "cross_entropy"),
        "nll_loss": (logits, F.nll_loss, "nll_loss"),
        "mse_loss": (pair, F.mse_loss, "mse_loss"),
        "l1_loss": (pair, F.l1_loss, "l1_loss"),
        "smooth_l1_loss": (pair, F.smooth_l1_loss, "smooth_l1_loss"),
        "huber_loss": (pair, F.huber_loss, "huber_loss"),
        "poisson_nll_loss": (pair, F.poisson_nll_loss, "poisson_nll_loss"),
        "binary_cross_entropy": (probs, F.binary_cross_entropy, "binary_cross_entropy"),
        "binary_cross_entropy_with_logits": (pair, F.binary_cross_entropy_with_logits,
                                             "binary_cross_entropy_with_logits"),
        "kl_div": (pair, lambda a, b: F.kl_div(a, b, reduction="batchmean"),
                   lambda a, b: TF.kl_div(a, b, reduction="batchmean")),
        "multi_margin_loss": (logits, F.multi_margin_loss, "multi_margin_loss"),
        "margin_ranking_loss": (signs, F.margin_ranking_loss, "margin_ranking_loss"),
        "hinge_embedding_loss": (pm, F.hinge_embedding_loss, "hinge_embedding_loss"),
        "cosine_embedding_loss": (cos, F.cosine_embedding_loss, "cosine_embedding_loss"),
        "triplet_margin_loss": (triple, F.triplet_margin_loss, "triplet_margin_loss"),
        "prod": (one, ng.prod, torch.prod if torch else None),
    }


@needs_torch
@pytest.mark.parametrize("dname", list(DTYPES))
@pytest.mark.parametrize("op", list(_lower_cases()))
def test_lower_precision_ops_match_torch(op, dname):
    dt, tdt, eps = DTYPES[dname]
    make, f, tf = _lower_cases()[op]
    nargs, targs = make(3)
    with ng.autocast("cpu", dtype=dt):
        out = f(*nargs)
    with torch.autocast("cpu", dtype=getattr(torch, tdt)):
        tout = tf(*targs)
    assert str(out.dtype) == str(tout.dtype).replace("torch.", "") == dname
    _close(out, tout, eps)
    # outside the region the op is the plain float32 one again
    assert f(*nargs).dtype == ng.float32


@needs_torch
@pytest.mark.parametrize("low", [None, "bfloat16"])
@pytest.mark.parametrize("dname", list(DTYPES))
@pytest.mark.parametrize("op", list(_fp32_cases()))
def test_fp32_ops_match_torch(op, dname, low):
    dt, tdt, _ = DTYPES[dname]
    make, f, tf = _fp32_cases()[op]
    tf = getattr(TF, tf) if isinstance(tf, str) else tf
    nargs, targs = make(5, low)
    with ng.autocast("cpu", dtype=dt):
        out = f(*nargs)
    with torch.autocast("cpu", dtype=getattr(torch, tdt)):
        tout = tf(*targs)
    assert str(out.dtype) == str(tout.dtype).replace("torch.", "") == "float32"
    # same float32 computation on the same (widened) inputs
    np.testing.assert_allclose(out.numpy(), tout.numpy(), rtol=2e-5, atol=1e-6)


@needs_torch
@pytest.mark.parametrize("name, f, tf", [
    ("softmax", lambda x: F.softmax(x, 1), lambda x: TF.softmax(x, 1)),
    ("log_softmax", lambda x: F.log_softmax(x, 1), lambda x: TF.log_softmax(x, 1)),
    ("layer_norm", lambda x: F.layer_norm(x, (8,)), lambda x: TF.layer_norm(x, (8,))),
    ("group_norm", lambda x: F.group_norm(x.reshape(6, 8, 1), 2), lambda x: TF.group_norm(x.reshape(6, 8, 1), 2)),
    ("sum", lambda x: x.sum(), lambda x: x.sum()),
    ("mean", lambda x: x.mean(), lambda x: x.mean()),
    ("exp", lambda x: x.exp(), lambda x: x.exp()),
    ("relu", F.relu, TF.relu),
    ("dot", lambda x: ng.dot(x[0], x[1]), lambda x: torch.dot(x[0], x[1])),
])
@pytest.mark.parametrize("low", [None, "bfloat16"])
def test_unlisted_ops_keep_their_input_type(name, f, tf, low):
    x, tx = _pair(6, 8, seed=9, low_dtype=low)
    with ng.autocast("cpu"):
        out = f(x)
        mixed = x + ng.ones(8)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        tout = tf(tx)
        tmixed = tx + torch.ones(8)
    assert str(out.dtype) == str(tout.dtype).replace("torch.", "") == (low or "float32")
    assert str(mixed.dtype) == str(tmixed.dtype).replace("torch.", "") == "float32"


@needs_torch
@pytest.mark.parametrize("low", [None, "bfloat16"])
@pytest.mark.parametrize("mode", ["LSTM", "RNN"])
def test_lstm_and_rnn_run_in_lower_precision_as_torch(mode, low):
    ng.manual_seed(6)
    m = getattr(nn, mode)(8, 4, num_layers=2, batch_first=True)
    tm = getattr(torch.nn, mode)(8, 4, num_layers=2, batch_first=True)
    tm.load_state_dict({k: torch.from_numpy(v.numpy().copy()) for k, v in m.state_dict().items()})
    x, tx = _pair(2, 5, 8, seed=7, low_dtype=low)
    with ng.autocast("cpu"):
        y = m(x)[0]
    with torch.autocast("cpu", dtype=torch.bfloat16):
        ty = tm(tx)[0]
    assert y.dtype == ng.bfloat16 and ty.dtype == torch.bfloat16
    # torch rounds its gates' GEMMs to bfloat16 each step, numbagrad only the outputs
    _close(y, ty, 2.0 ** -7, ulps=4)
    y.float().sum().backward()
    assert all(p.grad.dtype == ng.float32 for p in m.parameters())


@needs_torch
@pytest.mark.parametrize("name", ["RNNCell", "RNNCell-relu", "GRUCell", "LSTMCell", "GRU"])
def test_recurrent_ops_follow_torchs_lists(name):
    """torch 2.13 lists ``rnn_tanh_cell``/``rnn_relu_cell`` (lower precision) but neither
    ``gru``, ``gru_cell`` nor ``lstm_cell``: those stay float32."""
    cls, kw = name.split("-")[0], ({"nonlinearity": "relu"} if name.endswith("relu") else {})
    ng.manual_seed(8)
    m = getattr(nn, cls)(8, 4, **kw)
    tm = getattr(torch.nn, cls)(8, 4, **kw)
    tm.load_state_dict({k: torch.from_numpy(v.numpy().copy()) for k, v in m.state_dict().items()})
    x, tx = _pair(*((3, 8) if "Cell" in cls else (5, 3, 8)), seed=9)
    with ng.autocast("cpu"):
        y = m(x)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        ty = tm(tx)
    y, ty = (y[0], ty[0]) if isinstance(y, tuple) else (y, ty)
    assert str(y.dtype) == str(ty.dtype).replace("torch.", "")
    # torch's GRU/LSTM cells are composites whose inner linear calls autocast still rounds
    # to bfloat16 (their result is float32); numbagrad's stay float32 inside
    _close(y, ty, 2.0 ** -7, ulps=4)


@needs_torch
@pytest.mark.parametrize("cls", ["Conv1d", "Conv2d", "ConvTranspose2d"])
def test_conv_modules_under_autocast_give_float32_gradients_like_torch(cls):
    ng.manual_seed(15)
    m = getattr(nn, cls)(3, 5, 3, stride=2, padding=1)
    tm = getattr(torch.nn, cls)(3, 5, 3, stride=2, padding=1)
    tm.load_state_dict({k: torch.from_numpy(v.numpy().copy()) for k, v in m.state_dict().items()})
    x, tx = _pair(*((4, 3, 12) if cls == "Conv1d" else (4, 3, 9, 9)), seed=16)
    x.requires_grad_()
    tx.requires_grad_()
    with ng.autocast("cpu"):
        y = m(x)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        ty = tm(tx)
    assert y.dtype == ng.bfloat16 and ty.dtype == torch.bfloat16
    _close(y, ty, 2.0 ** -7, ulps=4)
    up = np.random.default_rng(17).standard_normal(y.shape).astype(np.float32)
    (y.float() * ng.tensor(up)).sum().backward()
    (ty.float() * torch.from_numpy(up)).sum().backward()
    for (name, p), tp in list(zip(m.named_parameters(), tm.parameters())) + [(("input", x), tx)]:
        assert p.grad.dtype == ng.float32, name
        np.testing.assert_allclose(p.grad.numpy(), tp.grad.numpy(), rtol=0,
                                   atol=8 * 2.0 ** -7 * np.abs(tp.grad.numpy()).max(), err_msg=name)


def _mha_pair(seed):
    ng.manual_seed(seed)
    m = nn.MultiheadAttention(16, 4, batch_first=True)
    tm = torch.nn.MultiheadAttention(16, 4, batch_first=True)
    tm.load_state_dict({k: torch.from_numpy(v.numpy().copy()) for k, v in m.state_dict().items()})
    return m, tm


@needs_torch
@pytest.mark.parametrize("need_weights", [False, True])
def test_multihead_attention_under_autocast_matches_torch(need_weights):
    m, tm = _mha_pair(10)
    x, tx = _pair(3, 7, 16, seed=11)
    mask = np.triu(np.full((7, 7), -np.inf, np.float32), 1)
    kw = dict(need_weights=need_weights, is_causal=not need_weights)
    with ng.autocast("cpu"):
        y, w = m(x, x, x, attn_mask=ng.tensor(mask), **kw)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        ty, tw = tm(tx, tx, tx, attn_mask=torch.from_numpy(mask), **kw)
    assert y.dtype == ng.bfloat16 and ty.dtype == torch.bfloat16
    _close(y, ty, 2.0 ** -7, ulps=4)
    if need_weights:
        assert w.dtype == ng.bfloat16 and tw.dtype == torch.bfloat16
        _close(w, tw, 2.0 ** -7, ulps=4)
    up = np.random.default_rng(12).standard_normal(y.shape).astype(np.float32)
    (y.float() * ng.tensor(up)).sum().backward()
    (ty.float() * torch.from_numpy(up)).sum().backward()
    for (name, p), tp in zip(m.named_parameters(), tm.parameters()):
        assert p.grad.dtype == ng.float32, name
        np.testing.assert_allclose(p.grad.numpy(), tp.grad.numpy(), rtol=0,
                                   atol=8 * 2.0 ** -7 * np.abs(tp.grad.numpy()).max(), err_msg=name)


def test_attention_recomputes_the_probabilities_it_did_not_keep():
    """Under bfloat16 autocast the attention core keeps no probabilities without dropout or
    returned weights, and recomputes them in backward: the gradients are bit for bit those of
    the node that kept them (``need_weights=True``), and it holds less."""
    grads, held = {}, {}
    mask = ng.tensor(np.triu(np.full((7, 7), -np.inf, np.float32), 1))
    for need in (False, True):
        m, _ = _mha_pair(13) if torch is not None else (None, None)
        if m is None:
            ng.manual_seed(13)
            m = nn.MultiheadAttention(16, 4, batch_first=True)
        x = ng.tensor(np.random.default_rng(14).standard_normal((3, 7, 16)).astype(np.float32))
        base = ng.memory_stats()["saved_bytes"]
        with ng.autocast("cpu"):
            y, _ = m(x, x, x, attn_mask=mask, need_weights=need)
        held[need] = ng.memory_stats()["saved_bytes"] - base
        y.float().square().sum().backward()
        grads[need] = [p.grad.numpy().copy() for p in m.parameters()]
    for a, b in zip(grads[False], grads[True]):
        np.testing.assert_array_equal(a, b)
    assert held[True] - held[False] >= 3 * 4 * 7 * 7 * 4  # the float32 probabilities (B, H, L, S)


def test_float64_is_never_cast():
    a = ng.randn(3, 4, dtype=ng.float64)
    with ng.autocast("cpu"):
        assert ng.matmul(a, a.T).dtype == ng.float64
        assert F.mse_loss(a, a).dtype == ng.float64


def test_sequential_fused_linear_relu_is_cast():
    ng.manual_seed(0)
    m = nn.Sequential(nn.Linear(8, 6), nn.ReLU(), nn.Linear(6, 3))
    x = ng.randn(4, 8)
    with ng.autocast("cpu"):
        y = m(x)
        ref = m[2](F.relu(m[0](x)))
    assert y.dtype == ng.bfloat16
    np.testing.assert_array_equal(y.float().detach().numpy(), ref.float().detach().numpy())


# ---- gradients ------------------------------------------------------------------------------------
@needs_torch
@pytest.mark.parametrize("dname", list(DTYPES))
def test_mlp_gradients_are_float32_and_match_torch(dname):
    dt, tdt, eps = DTYPES[dname]
    ng.manual_seed(1)
    m = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 10))
    tm = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 10))
    tm.load_state_dict({k: torch.from_numpy(v.numpy().copy()) for k, v in m.state_dict().items()})
    x, tx = _pair(64, 16, seed=2)
    y = np.random.default_rng(3).integers(0, 10, 64)
    with ng.autocast("cpu", dtype=dt):
        out = m(x)
        loss = F.cross_entropy(out, ng.tensor(y))
    with torch.autocast("cpu", dtype=getattr(torch, tdt)):
        tout = tm(tx)
        tloss = TF.cross_entropy(tout, torch.from_numpy(y))
    assert out.dtype == dt and loss.dtype == ng.float32
    loss.backward()
    tloss.backward()
    assert abs(loss.item() - tloss.item()) <= 4 * eps * abs(tloss.item())
    for (name, p), tp in zip(m.named_parameters(), tm.parameters()):
        assert p.grad.dtype == ng.float32 and tp.grad.dtype == torch.float32, name
        g, tg = p.grad.numpy(), tp.grad.numpy()
        # the bfloat16 rounding of activations and gradients differs where accumulation
        # orders differ: compare against the gradient's scale
        np.testing.assert_allclose(g, tg, atol=8 * eps * np.abs(tg).max(), rtol=0)


# ---- state: nesting, decorator, threads, cache -------------------------------------------------
def test_nesting_restores_state():
    lin = nn.Linear(4, 3)
    x = ng.randn(2, 4)
    state = ng.amp.is_autocast_enabled
    assert not state("cpu") and lin(x).dtype == ng.float32
    with ng.autocast("cpu"):
        assert state("cpu") and lin(x).dtype == ng.bfloat16
        with ng.autocast("cpu", enabled=False):
            assert not state("cpu") and lin(x).dtype == ng.float32
            with ng.autocast("cpu", dtype=ng.float16):
                assert lin(x).dtype == ng.float16
            assert not state("cpu")
        with ng.autocast("cpu", dtype=ng.float16):
            assert ng.amp.get_autocast_dtype("cpu") == ng.float16 and lin(x).dtype == ng.float16
        assert ng.amp.get_autocast_dtype("cpu") == ng.bfloat16 and lin(x).dtype == ng.bfloat16
        try:
            with ng.autocast("cpu", enabled=False):
                raise KeyError
        except KeyError:
            pass
        assert state("cpu")
    assert not state("cpu") and lin(x).dtype == ng.float32
    with ng.cpu.amp.autocast():
        assert lin(x).dtype == ng.bfloat16


def test_decorator_and_reentry():
    lin = nn.Linear(4, 3)
    ac = ng.autocast("cpu")

    @ac
    def f(x, depth):
        if depth:
            f(x, depth - 1)
        return lin(x)

    assert f(ng.randn(2, 4), 2).dtype == ng.bfloat16
    assert not ng.amp.is_autocast_enabled("cpu") and lin(ng.randn(2, 4)).dtype == ng.float32


def test_unsupported_dtype_warns_and_disables():
    with pytest.warns(UserWarning, match="not supported"):
        ctx = ng.autocast("cpu", dtype=ng.float32)
    with ctx:
        assert not ng.amp.is_autocast_enabled("cpu")
    with pytest.raises(RuntimeError, match="unsupported autocast device_type"):
        ng.autocast("tpu")


def test_state_is_per_thread():
    lin = nn.Linear(4, 3)
    seen = []

    def other():
        seen.append((ng.amp.is_autocast_enabled("cpu"), lin(ng.randn(2, 4)).dtype))

    with ng.autocast("cpu"):
        t = threading.Thread(target=other)
        t.start()
        t.join()
        assert lin(ng.randn(2, 4)).dtype == ng.bfloat16
    assert seen == [(False, ng.float32)]


@pytest.fixture
def count_casts(monkeypatch):
    calls = []
    real = AC._convert

    def counting(t, dtype):
        calls.append((id(t), dtype))
        return real(t, dtype)
    monkeypatch.setattr(AC, "_convert", counting)
    return calls


def test_weight_cache_casts_a_parameter_once_per_region(count_casts):
    lin = nn.Linear(4, 4)
    x = ng.randn(2, 4)
    with ng.autocast("cpu"):
        y = lin(lin(x))        # weight and bias used twice; x once, then a bfloat16 activation
        with ng.autocast("cpu"):
            lin(x)             # nested region: same cache
    assert sorted(count_casts) == sorted([(id(x), ng.bfloat16), (id(lin.weight), ng.bfloat16),
                                          (id(lin.bias), ng.bfloat16), (id(x), ng.bfloat16)])
    y.float().sum().backward()
    assert lin.weight.grad.dtype == ng.float32
    assert ng.amp.is_autocast_enabled("cpu") is False and not ng._autocast_state._tls.cache
    count_casts.clear()
    with ng.autocast("cpu"):
        lin(x)                 # a new outermost region casts again
    assert len(count_casts) == 3
    count_casts.clear()
    with ng.autocast("cpu", cache_enabled=False):
        lin(lin(x))
    assert len(count_casts) == 1 + 2 + 2


def test_casts_under_no_grad_are_not_cached(count_casts):
    lin = nn.Linear(4, 4)
    x = ng.randn(2, 4)
    with ng.autocast("cpu"):
        with ng.no_grad():
            lin(x)
        y = lin(x)
    y.float().sum().backward()                 # the cast used here carries the graph
    assert lin.weight.grad is not None and lin.weight.grad.dtype == ng.float32
    assert len(count_casts) == 6


def test_cached_cast_gradient_is_close_to_uncached():
    # cached, the two uses' bfloat16 gradients meet at the one Cast node and are summed in
    # bfloat16 (as torch's cache does); uncached, each cast widens its own and the sum is
    # float32: equal to the bfloat16 rounding
    ng.manual_seed(4)
    lin = nn.Linear(4, 4)
    x = ng.randn(3, 4)
    grads = []
    for cache in (True, False):
        lin.zero_grad()
        with ng.autocast("cpu", cache_enabled=cache):
            y = lin(lin(x))
        y.float().sum().backward()
        grads.append((lin.weight.grad.numpy().copy(), lin.bias.grad.numpy().copy()))
    for a, b in zip(*grads):
        np.testing.assert_allclose(a, b, rtol=0, atol=2 * 2.0 ** -7 * np.abs(b).max())


# ---- custom_fwd / custom_bwd ------------------------------------------------------------------------
class _Square(ng.autograd.Function):
    @staticmethod
    @ng.amp.custom_fwd(device_type="cpu", cast_inputs=ng.float32)
    def forward(ctx, x):
        ctx.save_for_backward(x)
        ctx.seen = (x.dtype, ng.amp.is_autocast_enabled("cpu"))
        return x * x

    @staticmethod
    @ng.amp.custom_bwd(device_type="cpu")
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        ctx.seen_bwd = ng.amp.is_autocast_enabled("cpu")
        return 2 * x * g


class _Plain(ng.autograd.Function):
    @staticmethod
    @ng.amp.custom_fwd(device_type="cpu")
    def forward(ctx, x):
        ctx.seen = ng.amp.is_autocast_enabled("cpu")
        return x + 1

    @staticmethod
    @ng.amp.custom_bwd(device_type="cpu")
    def backward(ctx, g):
        ctx.seen_bwd = (ng.amp.is_autocast_enabled("cpu"), ng.amp.get_autocast_dtype("cpu"))
        return g


def test_custom_fwd_casts_inputs_and_disables_autocast():
    x = ng.randn(3, dtype=ng.float16, requires_grad=True)
    with ng.autocast("cpu"):
        y = _Square.apply(x)
    assert y.dtype == ng.float32 and y.grad_fn.seen == (np.dtype(np.float32), False)
    y.sum().backward()
    assert y.grad_fn.seen_bwd is False and x.grad.dtype == ng.float16
    np.testing.assert_allclose(x.grad.numpy(), 2 * x.detach().numpy(), rtol=1e-3)
    y = _Square.apply(x)                       # outside a region: nothing is cast
    assert y.dtype == ng.float16 and y.grad_fn.seen[1] is False


def test_custom_bwd_runs_under_the_forwards_state():
    x = ng.randn(3, requires_grad=True)
    with ng.autocast("cpu", dtype=ng.float16):
        y = _Plain.apply(x)
    assert y.grad_fn.seen is True
    y.sum().backward()                         # outside any region
    assert y.grad_fn.seen_bwd == (True, ng.float16)
    assert not ng.amp.is_autocast_enabled("cpu")


# ---- end to end ------------------------------------------------------------------------------------
def _train_digits(amp, epochs=20):
    from numbagrad.data import DataLoader, TensorDataset, load_digits, train_test_split
    from numbagrad.examples.train_digits import accuracy, build_model
    ng.manual_seed(0)
    X, y = load_digits()
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.2, seed=0)
    loader = DataLoader(TensorDataset(X_train, y_train), batch_size=32, shuffle=True)
    model = build_model()
    opt = ng.optim.Adam(model.parameters(), lr=1e-3)
    scaler = ng.amp.GradScaler("cpu", enabled=amp)
    for _ in range(epochs):
        for xb, yb in loader:
            with ng.autocast("cpu", enabled=amp):
                loss = F.cross_entropy(model(xb), yb)
            opt.zero_grad()
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
    assert all(p.dtype == ng.float32 and p.grad.dtype == ng.float32 for p in model.parameters())
    return accuracy(model, X_test, y_test)


def test_digits_trains_under_bfloat16_autocast():
    full = _train_digits(False)
    mixed = _train_digits(True)
    assert full > 0.9
    assert mixed >= full - 0.005, (mixed, full)
