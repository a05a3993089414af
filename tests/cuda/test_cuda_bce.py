"""CUDA fused BCE-with-logits (``numbagrad/kernels/cuda/bce.py``) against the CPU kernels,
forward (per-element loss, returned total) and backward, on tiny shapes.

Cases: no weights, per-column weight / pos_weight (row stride 0), full-size ones (row
stride L), a short last row, logits of +-1e4 and a NaN; ``need_total`` off; the empty
input; float16 against the float32 CPU kernels; several blocks' partial sums (a grid of
more than one block, which the simulator otherwise never launches). Then the losses of
``ops/loss_pointwise.py`` on CUDA tensors against the CPU (``optest.check_device``).
"""
import os

import numpy as np
import pytest

cuda = pytest.importorskip("numba.cuda")

from numbagrad.kernels.cpu import bce as C  # noqa: E402
from numbagrad.kernels.cuda import bce as G  # noqa: E402

SIM = os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0")
TOL = {np.float32: dict(rtol=2e-6, atol=1e-6), np.float64: dict(rtol=1e-13, atol=1e-13)}
TOL16 = dict(rtol=2e-2, atol=2e-3)


def _case(n, L, dtype, w_mode, pw_mode, seed=0):
    r = np.random.default_rng(seed)
    x = (r.standard_normal(n) * 4).astype(dtype)
    if n >= 4:
        x[:4] = [1e4, -1e4, 0.0, -20.0]
    y = r.random(n).astype(dtype)

    def aux(mode, scale):
        if mode is None:
            return np.zeros(1, dtype), 0
        if mode == "col":
            return (r.random(L) * scale + 0.2).astype(dtype), 0
        return (r.random(n) * scale + 0.2).astype(dtype), L
    w, w_rs = aux(w_mode, 1.0)
    pw, pw_rs = aux(pw_mode, 3.0)
    return x, y, w, w_rs, pw, pw_rs, w_mode is not None, pw_mode is not None


def _run(mod, args, L, dtype, gout, per_elem, need_total=True):
    x = args[0]
    n = x.size
    loss, grad = np.zeros(n, dtype), np.zeros(n, dtype)
    if mod is C:
        tot = C._bce_logits_fwd_cpu(*args, L, loss, need_total)
        C._bce_logits_bwd_cpu(*args, L, gout, per_elem, grad)
        return tot, loss, grad
    d = [cuda.to_device(a) if isinstance(a, np.ndarray) else a for a in args]
    dl, dg = cuda.to_device(loss), cuda.to_device(grad)
    tot = G._bce_logits_fwd_cuda(*d, L, dl, need_total)
    G._bce_logits_bwd_cuda(*d, L, cuda.to_device(gout), per_elem, dg)
    return tot, dl.copy_to_host(), dg.copy_to_host()


MODES = [(None, None), ("col", None), (None, "col"), ("col", "full"), ("full", "col"), ("full", "full")]


@pytest.mark.parametrize("w_mode,pw_mode", MODES, ids=str)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_bce_logits_matches_cpu(dtype, w_mode, pw_mode):
    n, L = 11, 4                        # three rows, the last one short
    args = _case(n, L, dtype, w_mode, pw_mode)
    for per_elem, gout in [(True, np.linspace(-1, 2, n).astype(dtype)), (False, np.array([0.7], dtype))]:
        ref = _run(C, args, L, dtype, gout, per_elem)
        got = _run(G, args, L, dtype, gout, per_elem)
        assert type(got[0]) is np.float64
        np.testing.assert_allclose(got[0], ref[0], **TOL[dtype])
        for g, r in zip(got[1:], ref[1:]):
            assert g.dtype == np.dtype(dtype) and np.isfinite(g).all()
            np.testing.assert_allclose(g, r, **TOL[dtype])


def test_bce_logits_nan_and_no_total():
    n, L = 6, 6
    args = list(_case(n, L, np.float64, None, "col"))
    args[0] = args[0].copy()
    args[0][2] = np.nan
    gout = np.ones(1)
    ref = _run(C, args, L, np.float64, gout, False)
    got = _run(G, args, L, np.float64, gout, False, need_total=False)
    assert got[0] == 0.0 and np.isnan(ref[0])
    np.testing.assert_allclose(got[1], ref[1], **TOL[np.float64])   # NaN where the CPU has NaN
    np.testing.assert_allclose(got[2], ref[2], **TOL[np.float64])
    assert np.isnan(got[1][2]) and np.isfinite(np.delete(got[1], 2)).all()


def test_bce_logits_partial_sums_over_blocks(monkeypatch):
    monkeypatch.setattr(G, "MAX_BLOCKS", 3)
    n, L = 2 * G.ROW_TPB + 5, 5         # three blocks, the last partly idle
    args = _case(n, L, np.float64, "full", "col")
    ref = _run(C, args, L, np.float64, np.ones(1), False)
    got = _run(G, args, L, np.float64, np.ones(1), False)
    np.testing.assert_allclose(got[0], ref[0], **TOL[np.float64])
    np.testing.assert_allclose(got[1], ref[1], **TOL[np.float64])


def test_bce_logits_empty():
    z = cuda.to_device(np.zeros(0, np.float32))
    one = cuda.to_device(np.zeros(1, np.float32))
    assert G._bce_logits_fwd_cuda(z, z, one, 0, one, 0, False, False, 1, z, True) == 0.0
    G._bce_logits_bwd_cuda(z, z, one, 0, one, 0, False, False, 1, one, False, z)


@pytest.mark.parametrize("w_mode,pw_mode", [(None, None), ("col", "full")], ids=str)
def test_bce_logits_float16_matches_float32_cpu(w_mode, pw_mode):
    n, L = 9, 3
    a16 = _case(n, L, np.float16, w_mode, pw_mode)
    a32 = tuple(a.astype(np.float32) if isinstance(a, np.ndarray) else a for a in a16)
    gout = np.linspace(-1, 1, n)
    ref = _run(C, a32, L, np.float32, gout.astype(np.float32), True)
    got = _run(G, a16, L, np.float16, gout.astype(np.float16), True)
    np.testing.assert_allclose(got[0], ref[0], **TOL16)
    for g, r in zip(got[1:], ref[1:]):
        assert g.dtype == np.float16
        np.testing.assert_allclose(g.astype(np.float32), r, **TOL16)


# ---- the losses on CUDA tensors ---------------------------------------------------------------------
def _device_cases():
    import numbagrad as ng
    from numbagrad.nn import loss_pointwise as L
    r = np.random.default_rng(3)
    x = r.standard_normal((2, 3)) * 3
    x[0, 0] = 1e4
    t = (r.random((2, 3)) > 0.5) * 1.0
    p = 1 / (1 + np.exp(-r.standard_normal((2, 3))))
    idx = np.array([2, 0])
    pw = ng.tensor(np.array([0.5, 2.0, 1.5]))

    def on(a, like):  # an auxiliary tensor on the input's device and dtype
        return ng.tensor(a.astype(like.dtype)).to(like.device)
    return {
        "bce_logits": (lambda a, b: L.binary_cross_entropy_with_logits(a, b, pos_weight=on(pw.numpy(), a)), [x, t]),
        "bce_logits_none": (lambda a, b: L.binary_cross_entropy_with_logits(a, b, reduction="none"), [x, t]),
        "bce": (lambda a, b: L.binary_cross_entropy(a, b, reduction="sum"), [p, t]),
        "smooth_l1": (lambda a, b: L.smooth_l1_loss(a, b, beta=0.5), [x * 0.1, t]),
        "kl_div": (lambda a, b: L.kl_div(a, b, reduction="batchmean"), [x * 0.1, p]),
        "focal": (lambda a: L.focal_loss(a, ng.tensor(idx).to(a.device), gamma=0.5), [x]),
        "sigmoid_focal": (lambda a, b: L.sigmoid_focal_loss(a, b, reduction="mean"), [x, t]),
        "multi_margin": (lambda a: L.multi_margin_loss(a, ng.tensor(idx).to(a.device)), [x * 0.1]),
    }


@pytest.mark.parametrize("name", ["bce_logits", "bce_logits_none", "bce", "smooth_l1", "kl_div", "focal",
                                  "sigmoid_focal", "multi_margin"])
def test_losses_on_cuda_match_cpu(name):
    from optest import check_device
    fn, inputs = _device_cases()[name]
    check_device(fn, None, inputs, dtypes=(np.float64,))
