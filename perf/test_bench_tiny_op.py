"""Per-op overhead: ``a + b`` on 4-element float32 tensors.

``grad``: ``a`` requires grad, so each call builds a graph node (bar: <= 3x torch).
``nograd``: the same call under ``no_grad``. NumPy's ``a + b`` is the floor.
"""
import operator

import numpy as np
import pytest

import _perfkit as kit


def _operands(framework):
    a = np.arange(1, kit.TINY_N + 1, dtype=kit.DTYPE)
    b = np.full(kit.TINY_N, 0.5, dtype=kit.DTYPE)
    if framework == "numbagrad":
        import numbagrad as ng
        return ng.tensor(a, requires_grad=True), ng.tensor(b), ng.no_grad
    if framework == "torch":
        torch = pytest.importorskip("torch")
        return torch.tensor(a, requires_grad=True), torch.tensor(b), torch.no_grad
    import contextlib
    return a, b, contextlib.nullcontext


@pytest.mark.benchmark(**kit.bench_mark(max_time=1.0))
@pytest.mark.parametrize("framework", ("numbagrad", "torch", "numpy"))
def test_tiny_add_grad(benchmark, framework):
    a, b, _ = _operands(framework)
    out = kit.run_benchmark(benchmark, "tiny_add_grad", framework, operator.add, a, b, warm=1000)
    if framework != "numpy":
        assert out.requires_grad and out.grad_fn is not None


@pytest.mark.benchmark(**kit.bench_mark(max_time=1.0))
@pytest.mark.parametrize("framework", ("numbagrad", "torch", "numpy"))
def test_tiny_add_nograd(benchmark, framework):
    a, b, no_grad = _operands(framework)
    with no_grad():
        out = kit.run_benchmark(benchmark, "tiny_add_nograd", framework, operator.add, a, b, warm=1000)
    if framework != "numpy":
        assert out.grad_fn is None
