"""CUDA attention kernels (``numbagrad/kernels/cuda/attention.py``) against the CPU twins,
and ``scaled_dot_product_attention`` / ``MultiheadAttention`` on ``device="cuda"``
against the CPU.

Shapes are tiny (B=1, H=2, L=3, S<=5, E=4): the simulator costs ~0.3 ms per simulated
thread. The kernel cases cover: no mask, a float mask broadcast over the heads (stride-0
view read at row ``(n // mdiv) % Nm``), causal rows, a fully masked row (0, or NaN with
``empty_nan``) and dropout (the mask must equal the CPU's bit for bit: same hash).
"""

import numpy as np
import pytest

cuda = pytest.importorskip("numba.cuda")

import numbagrad as ng  # noqa: E402
from numbagrad.kernels.cpu import attention as C  # noqa: E402
from numbagrad.kernels.cuda import attention as G  # noqa: E402
from numbagrad.ops.attention import scaled_dot_product_attention as sdpa  # noqa: E402
from optest import check_device, randn  # noqa: E402

TOL = {np.float32: dict(rtol=1e-5, atol=1e-6), np.float64: dict(rtol=1e-12, atol=1e-14)}


def _mask(dtype, N=2, L=3, S=5):
    m = randn(1, L, S, seed=3)
    m[0, 1, :] = -np.inf          # row 1: every key masked
    m[0, 2, 1] = -np.inf
    return np.broadcast_to(m.astype(dtype), (1, L, S))  # one mask row for every n (mdiv = N)


def _fwd(mod, sfx, s, mask, has_mask, causal, empty_nan, dropout, seed=np.uint64(7), p_drop=0.4):
    dt = s.dtype.type
    thr = np.uint64(int(round(p_drop * 2 ** 53))) if dropout else np.uint64(0)
    dscale = dt(1 / (1 - p_drop)) if dropout else dt(1)
    p = np.empty_like(s)
    pd = np.empty_like(s)
    dm = np.zeros(s.shape, np.uint8)
    args = (s, mask, 2, has_mask, causal, dt(0.7), empty_nan, dropout, seed, thr, dscale, p, pd, dm)
    k = getattr(mod, f"_attn_softmax_fwd_{sfx}")
    if sfx == "cpu":
        k(*args)
        return p, pd, dm
    d = [cuda.to_device(np.ascontiguousarray(a)) if isinstance(a, np.ndarray) and a is not mask else a
         for a in args]
    dmask_dev = cuda.to_device(np.ascontiguousarray(mask))
    d[1] = dmask_dev
    k(*d)
    return d[-3].copy_to_host(), d[-2].copy_to_host(), d[-1].copy_to_host()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("has_mask,causal,empty_nan,dropout", [
    (False, False, False, False), (True, False, False, False), (True, False, True, False),
    (False, True, False, False), (True, True, False, True)])
def test_fwd_bwd_match_cpu(dtype, has_mask, causal, empty_nan, dropout):
    s = np.ascontiguousarray(randn(2, 3, 5, seed=1) * 2, dtype=dtype)
    mask = _mask(dtype)
    p, pd, dm = _fwd(C, "cpu", s, mask, has_mask, causal, empty_nan, dropout)
    p_d, pd_d, dm_d = _fwd(G, "cuda", s, mask, has_mask, causal, empty_nan, dropout)
    np.testing.assert_allclose(p_d, p, **TOL[dtype])
    if has_mask:
        assert (np.isnan(p_d[:, 1]).all() if empty_nan else (p_d[:, 1] == 0).all())
    if causal:
        assert (p_d[:, 0, 1:] == 0).all()
    if dropout:
        np.testing.assert_array_equal(dm_d, dm)
        np.testing.assert_allclose(pd_d, pd, **TOL[dtype])
    # backward, from the CPU forward's probabilities
    if empty_nan:
        return
    dp = np.ascontiguousarray(randn(2, 3, 5, seed=2), dtype=dtype)
    ds = np.empty_like(dp)
    args = (dp, p, dm, dropout, dtype(1 / 0.6) if dropout else dtype(1), dtype(0.7))
    C._attn_softmax_bwd_cpu(*args, ds)
    d = [cuda.to_device(a) if isinstance(a, np.ndarray) else a for a in args]
    d.append(cuda.to_device(np.empty_like(dp)))
    G._attn_softmax_bwd_cuda(*d)
    np.testing.assert_allclose(d[-1].copy_to_host(), ds, **TOL[dtype])


def test_float16_matches_float32_cpu():
    s16 = (randn(2, 3, 5, seed=4) * 2).astype(np.float16)
    mask = np.broadcast_to(np.zeros((1, 1, 1), np.float16), (1, 3, 5))
    p32, _, _ = _fwd(C, "cpu", s16.astype(np.float32), mask.astype(np.float32), False, True, False, False)
    p16, _, _ = _fwd(G, "cuda", s16, mask, False, True, False, False)
    assert p16.dtype == np.float16
    np.testing.assert_allclose(p16.astype(np.float32), p32, rtol=1e-3, atol=1e-4)


# ---- the op on device="cuda" against the CPU op ---------------------------------------------------------
B, H, L, S, E = 1, 2, 3, 4, 4


@pytest.mark.parametrize("case", ["plain", "causal", "bool_mask", "float_mask", "dropout"])
def test_sdpa_on_device(case):
    q, k, v = randn(B, H, L, E, seed=5), randn(B, H, S, E, seed=6), randn(B, H, S, E, seed=7)
    inputs = [q, k, v]
    kw = {}
    if case == "causal":
        kw["is_causal"] = True
    elif case == "bool_mask":
        m = np.ones((L, S), bool)
        m[0, 1:] = False
        inputs.append(m)
    elif case == "float_mask":
        inputs.append(randn(B, 1, L, S, seed=8))
    elif case == "dropout":
        kw["dropout_p"] = 0.5

    def fn(*ts):
        return sdpa(*ts[:3], attn_mask=ts[3] if len(ts) > 3 else None, **kw)
    check_device(fn, None, inputs, dtypes=(np.float32,) if case != "plain" else (np.float32, np.float64))


def test_multihead_attention_on_device():
    import copy
    from numbagrad.nn.attention import MultiheadAttention
    ng.manual_seed(0)
    m = MultiheadAttention(E, H, batch_first=True)
    md = copy.deepcopy(m).to("cuda")
    x = randn(B, L, E, seed=9).astype(np.float32)
    kpm = np.array([[False, False, True]])
    g = randn(B, L, E, seed=10).astype(np.float32)
    xc = ng.tensor(x, requires_grad=True)
    out_c, w_c = m(xc, xc, xc, key_padding_mask=ng.tensor(kpm))
    (out_c * ng.tensor(g)).sum().backward()
    xd = ng.tensor(x, device="cuda", requires_grad=True)
    out_d, w_d = md(xd, xd, xd, key_padding_mask=ng.tensor(kpm, device="cuda"))
    (out_d * ng.tensor(g, device="cuda")).sum().backward()
    assert out_d.device == ng.device("cuda") and xd.grad.device == ng.device("cuda")
    tol = dict(rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out_d.detach().cpu().numpy(), out_c.detach().numpy(), **tol)
    np.testing.assert_allclose(w_d.detach().cpu().numpy(), w_c.detach().numpy(), **tol)
    np.testing.assert_allclose(xd.grad.cpu().numpy(), xc.grad.numpy(), **tol)
    for name, p in m.named_parameters():
        np.testing.assert_allclose(md.get_parameter(name).grad.cpu().numpy(), p.grad.numpy(), err_msg=name,
                                   **tol)
