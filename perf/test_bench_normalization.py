"""Normalisation layers, forward + backward on float32 inputs: numbagrad vs torch in the same
process, threads pinned alike. No bars: reference rows for the fused normalisation kernels.

* ``layernorm_fwd_bwd``: ``LayerNorm(1024)`` on ``(4096, 1024)``;
* ``batchnorm2d_fwd_bwd``: ``BatchNorm2d(32)`` in training mode on ``(32, 32, 32, 32)``
  (running statistics updated every step).

One step is ``y = layer(x)``, ``y.backward(g)`` with a fixed upstream gradient, and the
input's and parameters' ``.grad`` reset. The first numbagrad call (JIT compile or cache load)
is recorded in the benchmark's ``extra_info["first_call_s"]``, apart from the steady state.
"""
import time

import numpy as np
import pytest

import _perfkit as kit

LN_SHAPE = (64, 32) if kit.SMOKE else (4096, 1024)
BN_SHAPE = (4, 4, 4, 4) if kit.SMOKE else (32, 32, 32, 32)
kit._workload("layernorm_fwd_bwd", f"LayerNorm({LN_SHAPE[1]}) fwd+bwd {'x'.join(map(str, LN_SHAPE))} f32",
              note="fused row kernels; dweight/dbias as per-chunk partial sums; no bar")
kit._workload("batchnorm2d_fwd_bwd",
              f"BatchNorm2d({BN_SHAPE[1]}) train fwd+bwd {'x'.join(map(str, BN_SHAPE))} f32",
              note="per-channel stats + normalise + running-stat update, fused backward; no bar")


def _build(framework, kind):
    shape = LN_SHAPE if kind == "layernorm" else BN_SHAPE
    rng = np.random.default_rng(kit.SEED)
    x = rng.standard_normal(shape, dtype=kit.DTYPE) * 2 + 0.5
    g = rng.standard_normal(shape, dtype=kit.DTYPE)
    kit.pin_threads()
    if framework == "torch":
        torch = pytest.importorskip("torch")
        layer = torch.nn.LayerNorm(shape[1]) if kind == "layernorm" else torch.nn.BatchNorm2d(shape[1])
        xt = torch.from_numpy(x).requires_grad_(True)
        gt = torch.from_numpy(g)
    else:
        import numbagrad as ng
        from numbagrad.nn.normalization import BatchNorm2d, LayerNorm
        layer = LayerNorm(shape[1]) if kind == "layernorm" else BatchNorm2d(shape[1])
        xt = ng.tensor(x, requires_grad=True)
        gt = ng.tensor(g)
    params = list(layer.parameters())

    def step():
        xt.grad = None
        for p in params:
            p.grad = None
        y = layer(xt)
        y.backward(gt)
        return xt.grad, params[0].grad

    return step, x, g


def _check(kind, x, g, gx, gw):
    """Not a timing check: the gradients equal a float64 NumPy evaluation of the formulas."""
    axes = (1,) if kind == "layernorm" else (0, 2, 3)
    x64, g64 = x.astype(np.float64), g.astype(np.float64)
    m = x64.mean(axes, keepdims=True)
    xhat = (x64 - m) / np.sqrt(x64.var(axes, keepdims=True) + 1e-5)
    gxhat = g64 * np.sqrt(1.0 / (x64.var(axes, keepdims=True) + 1e-5))
    ref_gx = gxhat - gxhat.mean(axes, keepdims=True) - xhat * (gxhat * xhat).mean(axes, keepdims=True)
    ref_gw = (g64 * xhat).sum(0 if kind == "layernorm" else (0, 2, 3))
    np.testing.assert_allclose(np.asarray(gx), ref_gx, rtol=2e-3, atol=2e-3)
    np.testing.assert_allclose(np.asarray(gw), ref_gw, rtol=2e-3, atol=2e-2)


def _np(t):
    return t.detach().numpy() if hasattr(t, "detach") else t


@pytest.mark.benchmark(**kit.bench_mark(max_time=1.0))
@pytest.mark.parametrize("framework", ("numbagrad", "torch"))
@pytest.mark.parametrize("kind", ("layernorm", "batchnorm2d"))
def test_normalization_fwd_bwd(benchmark, kind, framework):
    step, x, g = _build(framework, kind)
    t0 = time.perf_counter()
    step()
    benchmark.extra_info["first_call_s"] = time.perf_counter() - t0
    gx, gw = kit.run_benchmark(benchmark, f"{kind}_fwd_bwd", framework, step, warm=3)
    _check(kind, x, g, _np(gx), _np(gw))
