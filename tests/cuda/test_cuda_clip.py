"""CUDA gradient-clipping kernels (``numbagrad/kernels/cuda/clip.py``) against the CPU ones
on tiny shapes: the norm for every norm type (several gradients, an empty one, a 0-d one, NaN),
the clip scaling (a coefficient below 1, and exactly 1: nothing written), value clamping, and
float16 against the float32 CPU kernels."""
import math
import os

import numpy as np
import pytest

cuda = pytest.importorskip("numba.cuda")

from numbagrad.kernels.cpu import clip as C  # noqa: E402
from numbagrad.kernels.cuda import clip as G  # noqa: E402

SIM = os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0")


def _grads(dtype, seed=0, nan=False):
    r = np.random.default_rng(seed)
    gs = [(r.standard_normal(s) * 2).astype(dtype) for s in [(3, 2), (0,), (5,), (1,), (2, 2)]]
    gs.append(np.zeros(3, dtype))
    if nan:
        gs[2][1] = np.nan
    return gs


@pytest.mark.parametrize("norm_type", [2.0, 1.0, 3.0, math.inf, -math.inf, 0.0])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_grad_norm_matches_cpu(norm_type, dtype):
    gs = _grads(dtype)
    ref = np.zeros(1)
    C._grad_norm_cpu(gs, norm_type, ref)
    out = cuda.to_device(np.zeros(1))
    G._grad_norm_cuda([cuda.to_device(g) for g in gs], norm_type, out)
    np.testing.assert_allclose(out.copy_to_host(), ref, rtol=1e-12)


def test_grad_norm_nan_empty_and_several_blocks(monkeypatch):
    gs = _grads(np.float64, nan=True)
    for p in (2.0, math.inf, 1.0):
        out = cuda.to_device(np.zeros(1))
        G._grad_norm_cuda([cuda.to_device(g) for g in gs], p, out)
        assert np.isnan(out.copy_to_host()[0])
    out = cuda.to_device(np.ones(1))
    G._grad_norm_cuda([], 2.0, out)
    assert out.copy_to_host()[0] == 0.0
    monkeypatch.setattr(G, "MAX_BLOCKS", 3)          # several parts per gradient
    g = [np.linspace(-1, 1, 2 * G.ROW_TPB + 5)]
    ref = np.zeros(1)
    C._grad_norm_cpu(g, 2.0, ref)
    out = cuda.to_device(np.zeros(1))
    G._grad_norm_cuda([cuda.to_device(a) for a in g], 2.0, out)
    np.testing.assert_allclose(out.copy_to_host(), ref, rtol=1e-12)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("max_norm", [0.5, 1e6])
def test_grad_scale_and_clamp_match_cpu(dtype, max_norm):
    gs = _grads(dtype, seed=1)
    n = np.zeros(1)
    C._grad_norm_cpu(gs, 2.0, n)
    total = np.array([n[0]], dtype)
    cpu = [g.copy() for g in gs]
    C._grad_scale_cpu(cpu, total, max_norm)
    d = [cuda.to_device(g) for g in gs]
    G._grad_scale_cuda(d, cuda.to_device(total), max_norm)
    for a, b in zip(d, cpu):
        np.testing.assert_allclose(a.copy_to_host(), b, rtol=1e-6 if dtype == np.float32 else 1e-14)
    cpu = [g.copy() for g in gs]
    cpu[0][0, 0] = np.nan
    d = [cuda.to_device(g) for g in cpu]
    C._grad_clamp_cpu(cpu, -0.4, 0.4)
    G._grad_clamp_cuda(d, -0.4, 0.4)
    for a, b in zip(d, cpu):
        np.testing.assert_array_equal(a.copy_to_host(), b)


def test_float16_matches_float32_cpu():
    gs = _grads(np.float16, seed=2)
    g32 = [g.astype(np.float32) for g in gs]
    ref = np.zeros(1)
    C._grad_norm_cpu(g32, 2.0, ref)
    out = cuda.to_device(np.zeros(1))
    d = [cuda.to_device(g) for g in gs]
    G._grad_norm_cuda(d, 2.0, out)
    np.testing.assert_allclose(out.copy_to_host(), ref, rtol=1e-6)
    G._grad_scale_cuda(d, cuda.to_device(np.array([ref[0]], np.float16)), 0.5)
    C._grad_scale_cpu(g32, np.array([ref[0]], np.float32), 0.5)
    for a, b in zip(d, g32):
        assert a.dtype == np.float16
        np.testing.assert_allclose(a.copy_to_host().astype(np.float32), b, rtol=2e-3, atol=1e-3)


def test_clip_grad_norm_on_cuda_tensors_matches_cpu():
    import numbagrad as ng
    from numbagrad import nn
    from numbagrad.nn.utils import clip_grad_norm_, clip_grad_value_
    gs = _grads(np.float32, seed=3)
    for fn, args in ((clip_grad_norm_, (0.7,)), (clip_grad_value_, (0.3,))):
        res = []
        for device in ("cpu", "cuda"):
            ps = []
            for g in gs:
                p = nn.Parameter(ng.tensor(np.zeros_like(g)))
                p.array = ng.tensor(np.zeros_like(g)).to(device).array
                p.grad = ng.tensor(g.copy()).to(device)
                ps.append(p)
            out = fn(ps, *args)
            res.append((None if out is None else out.cpu().item(), [p.grad.cpu().numpy() for p in ps]))
        if res[0][0] is not None:
            np.testing.assert_allclose(res[1][0], res[0][0], rtol=1e-6)
        for a, b in zip(res[1][1], res[0][1]):
            np.testing.assert_allclose(a, b, rtol=1e-6)
