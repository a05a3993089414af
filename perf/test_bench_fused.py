"""Fused linear + bias + relu (``numbagrad.ops.fused.linear_act``), forward + backward,
against torch's ``Linear`` + ``ReLU`` on the same data, threads pinned alike.

Two rows: ``linear_relu_fwd_bwd`` is the fused op; ``linear_relu_fwd_bwd_composed`` is
numbagrad's composed ``linear`` then ``relu`` ops (torch is the same workload in both),
so the table shows what the fusion buys. Every step clears the gradients and runs
``act(x W^T + b).backward(g)`` (input, weight and bias gradients).
"""
import numpy as np
import pytest

import _perfkit as kit

M, K, N = (64, 32, 64) if kit.SMOKE else (4096, 256, 1024)
_TITLE = f"linear+relu fwd+bwd {M}x{K} @ {K}->{N} f32"
kit._workload("linear_relu_fwd_bwd", _TITLE + ", fused", bar=("ratio", "<=", 1.5),
              note="ops.fused.linear_act: GEMM + 1 bias/relu pass; 1 pass + 2 GEMMs back")
kit._workload("linear_relu_fwd_bwd_composed", _TITLE + ", composed ops",
              note="numbagrad linear then relu (no fusion), for comparison")


def _data():
    rng = np.random.default_rng(kit.SEED)
    x = rng.standard_normal((M, K), dtype=np.float32)
    w = (rng.standard_normal((N, K), dtype=np.float32) / np.sqrt(K)).astype(np.float32)
    b = rng.standard_normal(N, dtype=np.float32)
    g = rng.standard_normal((M, N), dtype=np.float32)
    return x, w, b, g


def _step(framework, fused=True):
    kit.pin_threads()
    x, w, b, g = _data()
    if framework == "torch":
        torch = pytest.importorskip("torch")
        tx, tw, tb = (torch.tensor(a, requires_grad=True) for a in (x, w, b))
        tg = torch.tensor(g)

        def step():
            tx.grad = tw.grad = tb.grad = None
            torch.relu(torch.nn.functional.linear(tx, tw, tb)).backward(tg)
            return tw.grad
        return step
    import numbagrad as ng
    from numbagrad.ops.fused import linear_act, _composed
    fn = linear_act if fused else _composed
    nx, nw, nb = (ng.tensor(a, requires_grad=True) for a in (x, w, b))
    ngg = ng.tensor(g)

    def step():
        nx.grad = nw.grad = nb.grad = None
        fn(nx, nw, nb, "relu").backward(ngg)
        return nw.grad
    return step


def _reference():
    x, w, b, g = _data()
    z = x.astype(np.float64) @ w.T.astype(np.float64) + b
    return (g * (z > 0)).T @ x


@pytest.mark.benchmark(**kit.bench_mark(max_time=1.5))
@pytest.mark.parametrize("framework", ("numbagrad", "torch"))
@pytest.mark.parametrize("key", ("linear_relu_fwd_bwd", "linear_relu_fwd_bwd_composed"))
def test_linear_relu_fwd_bwd(benchmark, key, framework):
    step = _step(framework, fused=key == "linear_relu_fwd_bwd")
    gw = kit.run_benchmark(benchmark, key, framework, step, warm=3)
    gw = gw.numpy() if hasattr(gw, "numpy") and not isinstance(gw, np.ndarray) else gw
    np.testing.assert_allclose(np.asarray(gw), _reference(), rtol=1e-3, atol=1e-2 * np.sqrt(M))
