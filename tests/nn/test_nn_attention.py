"""``MultiheadAttention`` (``numbagrad/nn/attention.py``): state_dict layout, initialisation,
and outputs / attention weights / gradients identical to PyTorch's for identical weights
(a torch state dict loaded with ``load_state_dict``), over every mask kind,
``batch_first``, ``kdim``/``vdim``, ``need_weights`` with ``average_attn_weights`` both
ways, ``add_bias_kv``, ``add_zero_attn``, unbatched inputs and the ``is_causal`` hint.
Without torch, the module is checked against float64 finite differences.
"""
import copy

import numpy as np
import pytest

import numbagrad as ng
from numbagrad.nn.attention import MultiheadAttention
from optest import check_grad, randn, torch

needs_torch = pytest.mark.skipif(torch is None, reason="needs torch")
if torch is not None:
    torch.backends.mha.set_fastpath_enabled(False)  # the eval fast path zeroes padded outputs


def _np_state(module):
    return {k: v.detach().numpy() for k, v in module.state_dict().items()}


def _pair(E=8, H=2, **kw):
    tm = torch.nn.MultiheadAttention(E, H, dtype=torch.float64, **kw)
    nm = MultiheadAttention(E, H, dtype=ng.float64, **kw)
    assert [(k, tuple(v.shape)) for k, v in tm.state_dict().items()] == \
           [(k, tuple(v.shape)) for k, v in nm.state_dict().items()]
    nm.load_state_dict(_np_state(tm))
    return tm, nm


def _compare(tm, nm, q, k, v, masks, fw, seed=0, tol=1e-10, **call):
    """Forward (outputs and weights) and the gradients of inputs and parameters."""
    rng = np.random.default_rng(seed)
    tq = torch.tensor(q, requires_grad=True)
    nq = ng.tensor(q, requires_grad=True)
    tk, nk = (tq, nq) if k is q else (torch.tensor(k, requires_grad=True), ng.tensor(k, requires_grad=True))
    tv, nv = (tk, nk) if v is k else (torch.tensor(v, requires_grad=True), ng.tensor(v, requires_grad=True))
    to, tw = tm(tq, tk, tv, **{n: torch.tensor(m) for n, m in masks.items()}, **call)
    no, nw = nm(nq, nk, nv, **{n: ng.tensor(m) for n, m in masks.items()}, **call)
    assert tuple(no.shape) == tuple(to.shape)
    np.testing.assert_allclose(no.detach().numpy(), to.detach().numpy(), rtol=tol, atol=tol)
    assert (tw is None) == (nw is None)
    g = rng.standard_normal(to.shape)
    tl, nl = (to * torch.tensor(g)).sum(), (no * ng.tensor(g)).sum()
    if tw is not None:
        assert tuple(nw.shape) == tuple(tw.shape)
        np.testing.assert_allclose(nw.detach().numpy(), tw.detach().numpy(), rtol=tol, atol=tol)
        gw = rng.standard_normal(tw.shape)
        tl, nl = tl + (tw * torch.tensor(gw)).sum(), nl + (nw * ng.tensor(gw)).sum()
    tl.backward()
    nl.backward()
    for a, b in ((tq, nq), (tk, nk), (tv, nv)):
        np.testing.assert_allclose(b.grad.numpy(), a.grad.numpy(), rtol=tol, atol=tol)
    for name, p in tm.named_parameters():
        np.testing.assert_allclose(nm.get_parameter(name).grad.numpy(), p.grad.numpy(), rtol=tol, atol=tol,
                                   err_msg=name)


def _x(shape, seed):
    return randn(*shape, seed=seed)


CASES = [
    ("self", {}, "self", {}),
    ("self_bf", dict(batch_first=True), "self", {}),
    ("cross_kv_same", {}, "kv", {}),
    ("cross_separate", dict(batch_first=True), "qkv", {}),
    ("kdim_vdim", dict(kdim=3, vdim=5), "qkv", {}),
    ("no_bias", dict(bias=False), "self", {}),
    ("bias_kv", dict(add_bias_kv=True), "kv", {}),
    ("zero_attn", dict(add_zero_attn=True), "qkv", {}),
    ("bias_kv_zero_attn_self", dict(add_bias_kv=True, add_zero_attn=True, batch_first=True), "self", {}),
]
MASKS = ["none", "bool_attn", "float_attn", "attn3d", "kpm_bool", "kpm_float_and_attn_bool"]


def _masks(kind, B, H, L, S, seed=0):
    rng = np.random.default_rng(seed)

    def bool_mask(rows):  # ~60% of the keys masked, never the first (no row fully masked)
        a = rng.random((rows, S)) > 0.6
        a[:, 0] = False
        return a

    m = {}
    if kind == "bool_attn":
        m["attn_mask"] = bool_mask(L)
    elif kind == "float_attn":
        m["attn_mask"] = rng.standard_normal((L, S))
    elif kind == "attn3d":
        m["attn_mask"] = rng.standard_normal((B * H, L, S))
    elif kind == "kpm_bool":
        m["key_padding_mask"] = bool_mask(B)
    elif kind == "kpm_float_and_attn_bool":
        m["key_padding_mask"] = rng.standard_normal((B, S))
        m["attn_mask"] = bool_mask(L)
    return m


@needs_torch
@pytest.mark.filterwarnings("ignore:Support for mismatched")
@pytest.mark.parametrize("mask", MASKS)
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_matches_torch(case, mask):
    name, kw, inputs, _ = case
    E, H, B, L, S = 8, 2, 3, 4, 5
    tm, nm = _pair(E, H, **kw)
    bf = kw.get("batch_first", False)

    def shp(T, D):
        return (B, T, D) if bf else (T, B, D)
    q = _x(shp(L, E), 1)
    if inputs == "self":
        k = v = q
        S_ = L
    elif inputs == "kv":
        k = v = _x(shp(S, E), 2)
        S_ = S
    else:
        k, v = _x(shp(S, kw.get("kdim", E)), 2), _x(shp(S, kw.get("vdim", E)), 3)
        S_ = S
    masks = _masks(mask, B, H, L, S_)
    for nw, avg in ((True, True), (True, False), (False, True)):
        tm.zero_grad()
        nm.zero_grad()
        _compare(tm, nm, q, k, v, masks, bf, need_weights=nw, average_attn_weights=avg)


@needs_torch
def test_unbatched_and_is_causal_hint_and_dropout_eval():
    tm, nm = _pair(8, 4, dropout=0.5, batch_first=True)
    tm.eval()
    nm.eval()
    x = _x((5, 8), 4)
    causal = np.triu(np.full((5, 5), -np.inf), 1)
    _compare(tm, nm, x, x, x, {"attn_mask": causal}, True, need_weights=False, is_causal=True)
    _compare(tm, nm, x, x, x, {"attn_mask": causal}, True, need_weights=True, is_causal=True)
    kpm = np.array([False, False, True, False, True])
    _compare(tm, nm, x, x, x, {"key_padding_mask": kpm}, True, need_weights=True)
    with pytest.raises(RuntimeError, match="Need attn_mask"):
        nm(ng.tensor(x), ng.tensor(x), ng.tensor(x), is_causal=True)


@needs_torch
def test_fully_masked_row_nan_with_weights_zero_without():
    tm, nm = _pair(4, 2)
    x = _x((3, 1, 4), 5)
    kpm = np.ones((1, 3), bool)
    for nw in (True, False):
        to, _ = tm(torch.tensor(x), torch.tensor(x), torch.tensor(x), key_padding_mask=torch.tensor(kpm),
                   need_weights=nw)
        no, _ = nm(ng.tensor(x), ng.tensor(x), ng.tensor(x), key_padding_mask=ng.tensor(kpm), need_weights=nw)
        np.testing.assert_array_equal(np.isnan(no.detach().numpy()), np.isnan(to.detach().numpy()))
        assert np.isnan(no.detach().numpy()).all() == nw
        np.testing.assert_allclose(np.nan_to_num(no.detach().numpy()), np.nan_to_num(to.detach().numpy()),
                                   atol=1e-12)


def test_state_dict_layout_and_init():
    m = MultiheadAttention(6, 3)
    sd = m.state_dict()
    assert [(k, tuple(v.shape)) for k, v in sd.items()] == [
        ("in_proj_weight", (18, 6)), ("in_proj_bias", (18,)), ("out_proj.weight", (6, 6)),
        ("out_proj.bias", (6,))]
    assert (m.in_proj_bias.detach().numpy() == 0).all() and (m.out_proj.bias.detach().numpy() == 0).all()
    bound = np.sqrt(6.0 / (6 + 18))  # xavier_uniform_ on (3E, E)
    w = m.in_proj_weight.detach().numpy()
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.5 * bound
    assert m.q_proj_weight is None and m.bias_k is None
    m2 = MultiheadAttention(6, 3, kdim=2, vdim=4, bias=False, add_bias_kv=True)
    assert [(k, tuple(v.shape)) for k, v in m2.state_dict().items()] == [
        ("q_proj_weight", (6, 6)), ("k_proj_weight", (6, 2)), ("v_proj_weight", (6, 4)),
        ("bias_k", (1, 1, 6)),
        ("bias_v", (1, 1, 6)), ("out_proj.weight", (6, 6))]
    assert m2.in_proj_weight is None and m2.in_proj_bias is None
    assert m.head_dim == 2 and m.batch_first is False and m._qkv_same_embed_dim and not m2._qkv_same_embed_dim
    with pytest.raises(ValueError, match="embed_dim must be divisible by num_heads, got embed_dim=7"):
        MultiheadAttention(7, 2)
    if torch is not None:
        assert repr(m) == repr(torch.nn.MultiheadAttention(6, 3))
        assert list(torch.nn.MultiheadAttention(6, 3, kdim=2, vdim=4, bias=False,
                                                add_bias_kv=True).state_dict()) \
            == list(m2.state_dict())


def test_gradients_against_finite_differences():
    """The module as a function of its input (float64), masks and bias_kv included."""
    ng.manual_seed(0)
    m = MultiheadAttention(4, 2, add_bias_kv=True, batch_first=True, dtype=ng.float64)
    am = randn(3, 3, seed=6)

    def fn(x, mem):
        out, w = m(x, mem, mem, attn_mask=ng.tensor(am), average_attn_weights=False)
        return out, w

    check_grad(fn, [randn(2, 3, 4, seed=7), randn(2, 3, 4, seed=8)])


def test_training_dropout_and_deepcopy():
    ng.manual_seed(1)
    m = MultiheadAttention(8, 2, dropout=0.5, batch_first=True)
    x = ng.tensor(randn(2, 6, 8, seed=9).astype(np.float32))
    _, w = m(x, x, x, average_attn_weights=False)
    wn = w.detach().numpy()
    assert (wn == 0).any()  # dropped weights
    assert ((wn == 0) | (wn > 0)).all()
    m.eval()
    _, w_eval = m(x, x, x, average_attn_weights=False)
    np.testing.assert_allclose(w_eval.detach().numpy().sum(-1), 1.0, rtol=1e-5)
    c = copy.deepcopy(m)
    assert c.in_proj_weight is not m.in_proj_weight
    np.testing.assert_array_equal(c(x, x, x)[0].detach().numpy(), m(x, x, x)[0].detach().numpy())


def test_float16_computes_in_float32():
    ng.manual_seed(2)
    m = MultiheadAttention(8, 2)
    m16 = MultiheadAttention(8, 2, dtype=ng.float16)
    m16.load_state_dict({k: v.detach().numpy().astype(np.float16) for k, v in m.state_dict().items()})
    x = randn(3, 2, 8, seed=10).astype(np.float16)
    am = randn(3, 3, seed=11).astype(np.float16)
    o, w = m(*(ng.tensor(x.astype(np.float32)),) * 3, attn_mask=ng.tensor(am.astype(np.float32)))
    xt = ng.tensor(x, requires_grad=True)
    o16, w16 = m16(xt, xt, xt, attn_mask=ng.tensor(am))
    assert o16.dtype == ng.float16 and w16.dtype == ng.float16
    np.testing.assert_allclose(o16.detach().numpy().astype(np.float32), o.detach().numpy(), atol=3e-3)
    np.testing.assert_allclose(w16.detach().numpy().astype(np.float32), w.detach().numpy(), atol=3e-3)
    (o16.sum() + w16.sum()).backward()
    assert xt.grad.dtype == ng.float16 and m16.in_proj_weight.grad.dtype == ng.float16
    assert np.isfinite(xt.grad.numpy()).all()
