"""Conv2d training step: forward + backward of ``Conv2d(16, 32, 3, padding=1)`` on a
32x16x32x32 float32 batch with a fixed random upstream gradient (input, weight and bias
gradients), numbagrad vs torch on the same data, threads pinned alike.

Bar: numbagrad <= 2x torch. The first numbagrad call (JIT compile or cache load of the
im2col/col2im kernels) is timed separately and stored in the benchmark's ``extra_info``
as ``first_call_s``; it is not part of the steady-state figure.
"""
import numpy as np
import pytest

import _perfkit as kit

if kit.SMOKE:
    CONV_SHAPE = (2, 3, 8, 8)
    CONV_OUT = 4
else:
    CONV_SHAPE = (32, 16, 32, 32)
    CONV_OUT = 32

_N, _C, _H, _W = CONV_SHAPE
kit._workload("conv2d_fwd_bwd", f"Conv2d {_C}->{CONV_OUT} 3x3 pad 1, x {_N}x{_C}x{_H}x{_W} f32, fwd+bwd",
              bar=("ratio", "<=", 2.0),
              note="forward + backward (grad of x, weight, bias), random upstream grad")


def _data():
    rng = np.random.default_rng(kit.SEED)
    x = rng.standard_normal(CONV_SHAPE, dtype=kit.DTYPE)
    g = rng.standard_normal((_N, CONV_OUT, _H, _W), dtype=kit.DTYPE)
    w = (rng.standard_normal((CONV_OUT, _C, 3, 3), dtype=kit.DTYPE) * 0.1).astype(kit.DTYPE)
    b = rng.standard_normal(CONV_OUT, dtype=kit.DTYPE)
    return x, w, b, g


def _build(framework):
    kit.pin_threads()
    x, w, b, g = _data()
    if framework == "torch":
        torch = pytest.importorskip("torch")
        m = torch.nn.Conv2d(_C, CONV_OUT, 3, padding=1)
        with torch.no_grad():
            m.weight.copy_(torch.from_numpy(w))
            m.bias.copy_(torch.from_numpy(b))
        xt = torch.from_numpy(x).requires_grad_(True)
        gt = torch.from_numpy(g)
    else:
        import numbagrad as ng
        from numbagrad.nn.conv import Conv2d
        m = Conv2d(_C, CONV_OUT, 3, padding=1)
        m.load_state_dict({"weight": w, "bias": b})
        xt = ng.tensor(x, requires_grad=True)
        gt = ng.tensor(g)

    def step():
        xt.grad = None
        m.zero_grad(set_to_none=True)
        m(xt).backward(gt)
        return xt.grad, m.weight.grad, m.bias.grad
    return step


@pytest.mark.benchmark(**kit.bench_mark(max_time=1.5))
@pytest.mark.parametrize("framework", ("numbagrad", "torch"))
def test_conv2d_fwd_bwd(benchmark, framework):
    step = _build(framework)
    grads = kit.run_benchmark_timing_first(benchmark, "conv2d_fwd_bwd", framework, step, warm=3)
    # not a timing check: the step computes the right gradients (bias grad = sum of g)
    x, w, b, g = _data()
    np.testing.assert_allclose(kit.to_numpy(grads[2]), g.sum(axis=(0, 2, 3)), rtol=1e-4, atol=1e-2)
    assert kit.to_numpy(grads[0]).shape == x.shape and kit.to_numpy(grads[1]).shape == w.shape
