"""``MaxPool2d(2)`` forward + backward on a float32 (N, C, H, W) batch: numbagrad vs torch in the
same process, threads pinned alike. No bar: a reference row for the pooling kernels.

One step is ``y = pool(x)``, ``y.backward(g)`` with a fixed upstream gradient, and the input's
``.grad`` reset. The first numbagrad call (JIT compile or cache load) is recorded in the
benchmark's ``extra_info["first_call_s"]``, apart from the steady-state timing.
"""
import time

import numpy as np
import pytest

import _perfkit as kit

SHAPE = (2, 2, 8, 8) if kit.SMOKE else (32, 32, 32, 32)
KEY = "maxpool2d_fwd_bwd"
kit._workload(KEY, f"MaxPool2d(2) fwd+bwd {'x'.join(map(str, SHAPE))} f32",
              note="forward with argmax indices + backward scatter; no bar")


def _build(framework):
    rng = np.random.default_rng(kit.SEED)
    x = rng.standard_normal(SHAPE, dtype=kit.DTYPE)
    g = rng.standard_normal(SHAPE[:2] + (SHAPE[2] // 2, SHAPE[3] // 2), dtype=kit.DTYPE)
    kit.pin_threads()
    if framework == "torch":
        torch = pytest.importorskip("torch")
        pool = torch.nn.MaxPool2d(2)
        xt = torch.from_numpy(x).requires_grad_(True)
        gt = torch.from_numpy(g)
    else:
        import numbagrad as ng
        from numbagrad.nn.pooling import MaxPool2d
        pool = MaxPool2d(2)
        xt = ng.tensor(x, requires_grad=True)
        gt = ng.tensor(g)

    def step():
        xt.grad = None
        y = pool(xt)
        y.backward(gt)
        return xt.grad

    return step, x, g


@pytest.mark.benchmark(**kit.bench_mark(max_time=1.0))
@pytest.mark.parametrize("framework", ("numbagrad", "torch"))
def test_maxpool2d_fwd_bwd(benchmark, framework):
    step, x, g = _build(framework)
    t0 = time.perf_counter()
    grad = step()
    benchmark.extra_info["first_call_s"] = time.perf_counter() - t0
    kit.run_benchmark(benchmark, KEY, framework, step, warm=3)
    # not a timing check: the gradient lands on each window's maximum
    N, C, H, W = x.shape
    win = x.reshape(N, C, H // 2, 2, W // 2, 2).transpose(0, 1, 2, 4, 3, 5).reshape(N, C, H // 2, W // 2, 4)
    onehot = win == win.max(-1, keepdims=True)
    ref = (onehot * g[..., None]).reshape(N, C, H // 2, W // 2, 2, 2).transpose(0, 1, 2, 4, 3, 5)
    np.testing.assert_array_equal(np.asarray(grad.numpy()), ref.reshape(x.shape))
