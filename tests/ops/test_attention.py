"""``scaled_dot_product_attention`` and ``multi_head_attention_forward``
(``numbagrad/ops/attention.py``, kernels in ``numbagrad/kernels/cpu/attention.py``).

* forward against a float64 NumPy reference and gradients against finite differences
  (``optest.check_op``), for every mask kind, causal, scale, broadcast batch dims and GQA;
* the fused op against the same computation composed from numbagrad ops (matmul,
  softmax, dropout with the same seed): equal outputs and gradients;
* PyTorch parity (forward and gradients) where torch is installed;
* dropout statistics, fully masked rows, float16, errors, the parallel kernel twin.
"""
import numpy as np
import pytest

import numbagrad as ng
from numbagrad.backend import config
from numbagrad.ops.attention import multi_head_attention_forward, scaled_dot_product_attention as sdpa
from optest import check_forward, check_grad, check_op, randn, torch

F = torch.nn.functional if torch else None


# ---- NumPy reference ------------------------------------------------------------------------------------
def ref_sdpa(q, k, v, mask=None, is_causal=False, scale=None, enable_gqa=False):
    q, k, v = (np.asarray(a, np.float64) for a in (q, k, v))
    if enable_gqa and k.shape[-3] != q.shape[-3]:
        rep = q.shape[-3] // k.shape[-3]
        k = np.repeat(k, rep, axis=-3)
        v = np.repeat(v, rep, axis=-3)
    L, E = q.shape[-2:]
    S = k.shape[-2]
    scale = 1 / np.sqrt(E) if scale is None else scale
    s = q @ np.swapaxes(k, -1, -2) * scale
    if is_causal:
        s = np.where(np.tril(np.ones((L, S), bool)), s, -np.inf)
    if mask is not None:
        s = np.where(mask, s, -np.inf) if mask.dtype == bool else s + mask
    m = s.max(-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    e = np.exp(s - m)
    tot = e.sum(-1, keepdims=True)
    p = np.where(tot > 0, e / np.where(tot > 0, tot, 1.0), 0.0)  # a fully masked row -> 0
    return p @ v


def _torch_sdpa(**kw):
    if torch is None:
        return None

    def fn(q, k, v, *m):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=m[0] if m else None, **kw)
    return fn


def _ng_sdpa(**kw):
    def fn(q, k, v, *m):
        return sdpa(q, k, v, attn_mask=m[0] if m else None, **kw)
    return fn


def _ref(**kw):
    def fn(q, k, v, *m):
        return ref_sdpa(q, k, v, m[0] if m else None, **kw)
    return fn


def _bool_mask(*shape, seed=0):
    m = np.random.default_rng(seed).random(shape) > 0.35
    m[..., 0] = True  # no fully masked row (finite differences need finite outputs)
    return m


CASES = {
    "plain": ((2, 3, 4, 5), (2, 3, 6, 5), (2, 3, 6, 3), None, {}),
    "causal_L_lt_S": ((1, 2, 3, 4), (1, 2, 5, 4), (1, 2, 5, 4), None, dict(is_causal=True)),
    "causal_square": ((2, 5, 4), (2, 5, 4), (2, 5, 4), None, dict(is_causal=True)),
    "scale": ((2, 4, 3), (2, 6, 3), (2, 6, 2), None, dict(scale=0.3)),
    "bool_mask_LS": ((2, 2, 4, 3), (2, 2, 5, 3), (2, 2, 5, 3), ("bool", (4, 5)), {}),
    "bool_mask_B11S": ((2, 2, 3, 4), (2, 2, 5, 4), (2, 2, 5, 4), ("bool", (2, 1, 1, 5)), {}),
    "float_mask_B1LS": ((2, 2, 3, 4), (2, 2, 5, 4), (2, 2, 5, 4), ("float", (2, 1, 3, 5)), {}),
    "float_mask_H1S": ((2, 3, 4, 2), (2, 3, 5, 2), (2, 3, 5, 2), ("float", (3, 1, 5)), {}),
    "float_mask_mixed": ((2, 3, 4, 2), (2, 3, 5, 2), (2, 3, 5, 2), ("float", (2, 1, 4, 1)), {}),
    "broadcast_batch": ((2, 3, 4, 2), (1, 3, 5, 2), (2, 1, 5, 3), None, {}),
    "gqa": ((1, 4, 3, 2), (1, 2, 5, 2), (1, 2, 5, 3), ("float", (4, 3, 5)), dict(enable_gqa=True)),
    "2d": ((3, 4), (5, 4), (5, 2), None, {}),
}


def _inputs(case):
    qs, ks, vs, mspec, kw = CASES[case]
    ins = [randn(*qs, seed=1), randn(*ks, seed=2), randn(*vs, seed=3)]
    if mspec is not None:
        kind, shp = mspec
        ins.append(_bool_mask(*shp) if kind == "bool" else randn(*shp, seed=4))
    return ins, kw


@pytest.mark.parametrize("case", list(CASES))
def test_sdpa_against_numpy_fd_and_torch(case):
    ins, kw = _inputs(case)
    check_op(_ng_sdpa(**kw), _ref(**kw), ins, torch_fn=_torch_sdpa(**kw),
             noncontig=case in ("plain", "float_mask_B1LS", "gqa"))


def test_fused_equals_composed_ops():
    """The one fused Function against softmax(Q K^T * scale + mask) V from numbagrad ops,
    dropout included (the same seed draws the same mask: the same counter-based hash)."""
    q, k, v = randn(2, 3, 4, 5, seed=5), randn(2, 3, 6, 5, seed=6), randn(2, 3, 6, 2, seed=7)
    mask = randn(2, 1, 4, 6, seed=8)
    g = randn(2, 3, 4, 2, seed=9)
    for dropout_p in (0.0, 0.3):
        res = []
        for fused in (True, False):
            ts = [ng.tensor(a, requires_grad=True) for a in (q, k, v, mask)]
            ng.manual_seed(123)
            if fused:
                out = sdpa(*ts[:3], attn_mask=ts[3], dropout_p=dropout_p)
            else:
                s = ng.matmul(ts[0], ts[1].transpose(-1, -2)) * (1 / np.sqrt(5)) + ts[3]
                p = ng.softmax(s, -1)
                if dropout_p:
                    p = ng.dropout(p, dropout_p)
                out = ng.matmul(p, ts[2])
            out.backward(ng.tensor(g))
            res.append([out.detach().numpy()] + [t.grad.numpy() for t in ts])
        for a, b in zip(*res):
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-13)


def test_dropout_mask_statistics():
    """With V = I the output is the dropped probability matrix: every entry is either 0
    or P / (1 - p), and the dropped fraction is p within 4 binomial sigmas."""
    L = S = 48
    q, k = randn(2, L, 4, seed=10), randn(2, S, 4, seed=11)
    v = np.broadcast_to(np.eye(S), (2, S, S)).copy()
    p_drop = 0.3
    P = ref_sdpa(q, k, v)
    ng.manual_seed(0)
    out = sdpa(ng.tensor(q), ng.tensor(k), ng.tensor(v), dropout_p=p_drop).numpy()
    kept = out != 0
    np.testing.assert_allclose(out[kept], P[kept] / (1 - p_drop), rtol=1e-12)
    frac = 1 - kept.mean()
    n = kept.size
    assert abs(frac - p_drop) < 4 * np.sqrt(p_drop * (1 - p_drop) / n), frac
    ng.manual_seed(0)
    again = sdpa(ng.tensor(q), ng.tensor(k), ng.tensor(v), dropout_p=p_drop).numpy()
    np.testing.assert_array_equal(again, out)  # reproducible from the seed
    other = sdpa(ng.tensor(q), ng.tensor(k), ng.tensor(v), dropout_p=p_drop).numpy()
    assert not np.array_equal(other != 0, kept)  # the next call draws a new mask
    # backward through dropout = the composed check above; here only: dropped entries get no gradient
    qt = ng.tensor(q, requires_grad=True)
    vt = ng.tensor(v, requires_grad=True)
    ng.manual_seed(0)
    sdpa(qt, ng.tensor(k), vt, dropout_p=p_drop).sum().backward()
    gv = vt.grad.numpy()  # dV = Pd^T dO with dO = 1: column sums of the dropped P
    np.testing.assert_allclose(gv, np.swapaxes(out, -1, -2).sum(-1, keepdims=True) * np.ones((1, S)),
                               rtol=1e-12)


def test_fully_masked_rows_give_zero_like_torch():
    q, k, v = randn(1, 2, 3, 4, seed=12), randn(1, 2, 5, 4, seed=13), randn(1, 2, 5, 4, seed=14)
    m = np.ones((3, 5), bool)
    m[1] = False
    ts = [ng.tensor(a, requires_grad=True) for a in (q, k, v)]
    out = sdpa(*ts, attn_mask=ng.tensor(m))
    out.backward(ng.tensor(np.ones(out.shape)))
    o = out.detach().numpy()
    assert (o[:, :, 1] == 0).all() and np.isfinite(o).all()
    assert (ts[0].grad.numpy()[:, :, 1] == 0).all()
    fm = np.where(m, 0.0, -np.inf)
    np.testing.assert_array_equal(sdpa(*ts, attn_mask=ng.tensor(fm)).detach().numpy(), o)
    if torch is not None:
        tt = [torch.tensor(a, requires_grad=True) for a in (q, k, v)]
        to = F.scaled_dot_product_attention(*tt, attn_mask=torch.tensor(m))
        to.backward(torch.ones(to.shape, dtype=to.dtype))
        np.testing.assert_allclose(o, to.detach().numpy(), rtol=1e-12, atol=1e-14)
        for a, b in zip(ts, tt):
            np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_float_mask_gradient():
    ins, _ = _inputs("float_mask_B1LS")
    check_grad(lambda q, k, v, m: sdpa(q, k, v, attn_mask=m, scale=0.7), ins)


def test_float16_and_float32():
    q, k, v = (randn(2, 3, 4, seed=s).astype(np.float16) for s in (15, 16, 17))
    out = sdpa(ng.tensor(q), ng.tensor(k), ng.tensor(v), is_causal=True)
    assert out.dtype == ng.float16
    np.testing.assert_allclose(out.numpy().astype(np.float64), ref_sdpa(q, k, v, is_causal=True), rtol=5e-3,
                               atol=5e-3)
    check_forward(_ng_sdpa(is_causal=True), _ref(is_causal=True),
                  [randn(2, 3, 4, seed=1), randn(2, 3, 4, seed=2), randn(2, 3, 4, seed=3)],
                  dtypes=(np.float32,))


def test_errors():
    q = ng.tensor(randn(2, 3, 4))
    with pytest.raises(RuntimeError, match="is_causal"):
        sdpa(q, q, q, attn_mask=ng.tensor(np.ones((3, 3), bool)), is_causal=True)
    with pytest.raises(RuntimeError, match="same dtype"):
        sdpa(q, q.float(), q)
    with pytest.raises(RuntimeError, match="do not fit"):
        sdpa(q, ng.tensor(randn(2, 3, 5)), q)
    with pytest.raises(RuntimeError, match="broadcast"):
        sdpa(q, q, q, attn_mask=ng.tensor(np.ones((4, 3), bool)))
    with pytest.raises(ValueError, match="dropout"):
        sdpa(q, q, q, dropout_p=1.5)
    with pytest.raises(RuntimeError, match="enable_gqa"):
        sdpa(ng.tensor(randn(1, 3, 2, 4)), ng.tensor(randn(1, 2, 2, 4)), ng.tensor(randn(1, 2, 2, 4)),
             enable_gqa=True)


def test_parallel_twin_equals_serial(monkeypatch):
    q, k, v = randn(2, 2, 8, 4, seed=18), randn(2, 2, 9, 4, seed=19), randn(2, 2, 9, 3, seed=20)
    m = _bool_mask(2, 1, 8, 9)

    def run():
        ts = [ng.tensor(a.astype(np.float32), requires_grad=True) for a in (q, k, v)]
        ng.manual_seed(3)
        out = sdpa(*ts, attn_mask=ng.tensor(m), dropout_p=0.2)
        out.backward(ng.tensor(np.ones(out.shape, np.float32)))
        return [out.detach().numpy()] + [t.grad.numpy() for t in ts]

    monkeypatch.setattr(config, "PARALLEL_THRESHOLD", 1 << 62)
    serial = run()
    monkeypatch.setattr(config, "PARALLEL_THRESHOLD", 1)
    for a, b in zip(run(), serial):
        np.testing.assert_array_equal(a, b)


# ---- multi_head_attention_forward (the functional; the module is tested in tests/nn) -----------------
def _mha_args(E=4, H=2, seed=21):
    rng = np.random.default_rng(seed)
    return dict(w_in=rng.standard_normal((3 * E, E)) * 0.5, b_in=rng.standard_normal(3 * E) * 0.1,
                w_out=rng.standard_normal((E, E)) * 0.5, b_out=rng.standard_normal(E) * 0.1)


def test_multi_head_attention_forward_grads_and_torch():
    a = _mha_args()
    x, mem = randn(3, 2, 4, seed=22), randn(5, 2, 4, seed=23)
    am = randn(3, 5, seed=24)

    def fn(x, mem, w_in, b_in, w_out, b_out, am):
        return multi_head_attention_forward(x, mem, mem, 4, 2, w_in, b_in, None, None, False, 0.0, w_out,
                                            b_out,
                                            attn_mask=am, need_weights=True, average_attn_weights=False)

    ins = [x, mem, a["w_in"], a["b_in"], a["w_out"], a["b_out"], am]
    check_grad(fn, ins)
    if torch is not None:
        tt = [torch.tensor(v, requires_grad=True) for v in ins]
        to, tw = F.multi_head_attention_forward(tt[0], tt[1], tt[1], 4, 2, tt[2], tt[3], None, None, False,
                                                0.0,
                                                tt[4], tt[5], attn_mask=tt[6], average_attn_weights=False)
        nt = [ng.tensor(v, requires_grad=True) for v in ins]
        no, nw = fn(*nt)
        np.testing.assert_allclose(no.detach().numpy(), to.detach().numpy(), rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(nw.detach().numpy(), tw.detach().numpy(), rtol=1e-10, atol=1e-12)
        (to.sum() + (tw * tw).sum()).backward()
        (no.sum() + (nw * nw).sum()).backward()
        for u, w in zip(nt, tt):
            np.testing.assert_allclose(u.grad.numpy(), w.grad.numpy(), rtol=1e-9, atol=1e-11)


def test_multi_head_attention_forward_errors():
    a = _mha_args()
    x = ng.tensor(randn(3, 2, 4))
    with pytest.raises(RuntimeError, match="Need attn_mask"):
        multi_head_attention_forward(x, x, x, 4, 2, ng.tensor(a["w_in"]), None, None, None, False, 0.0,
                                     ng.tensor(a["w_out"]), None, is_causal=True)
    with pytest.raises(RuntimeError, match="2D attn_mask"):
        multi_head_attention_forward(x, x, x, 4, 2, ng.tensor(a["w_in"]), None, None, None, False, 0.0,
                                     ng.tensor(a["w_out"]), None, attn_mask=ng.tensor(np.zeros((3, 4))))
    with pytest.raises(ValueError, match="multi_head_attention_forward: was expecting embedding dimension"):
        multi_head_attention_forward(x, x, x, 8, 2, ng.tensor(a["w_in"]), None, None, None, False, 0.0,
                                     ng.tensor(a["w_out"]), None)
