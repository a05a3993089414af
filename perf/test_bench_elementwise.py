"""Large elementwise work: memory-bandwidth-bound, so measured against the machine.

* ``stream``: the bandwidth reference (STREAM triad/copy as parallel @njit loops).
* ``ew_add``: ``x + y`` on 16M float32 elements; GB/s and % of the triad bandwidth
  (bar: >= 70%).
* ``ew_chain``: ``((x*a + b) * c - d) / e`` with Python-float scalars, no grad: five
  unfused ops, as a user writes them.
"""
import numpy as np
import pytest

import _perfkit as kit

FRAMEWORKS = ("numbagrad", "torch", "numpy")
A, B, C, D, E = 1.5, 0.5, 2.0, 0.25, 3.0


def _chain(x):
    return ((x * A + B) * C - D) / E


def _inputs(framework):
    rng = np.random.default_rng(kit.SEED)
    x = rng.standard_normal(kit.EW_N, dtype=kit.DTYPE)
    y = rng.standard_normal(kit.EW_N, dtype=kit.DTYPE)
    if framework == "numbagrad":
        import numbagrad as ng
        return ng.from_numpy(x), ng.from_numpy(y)
    if framework == "torch":
        torch = pytest.importorskip("torch")
        return torch.from_numpy(x), torch.from_numpy(y)
    return x, y


def _no_grad(framework):
    if framework == "numbagrad":
        import numbagrad as ng
        return ng.no_grad()
    if framework == "torch":
        import torch
        return torch.no_grad()
    import contextlib
    return contextlib.nullcontext()


def test_stream_bandwidth(stream_bandwidth):
    """Records the triad/copy rows; the measurement itself is the session fixture."""
    assert stream_bandwidth["stream_triad"]["gbps"] > 0


@pytest.mark.benchmark(**kit.bench_mark(max_time=1.0))
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_add_large(benchmark, framework, stream_bandwidth):
    x, y = _inputs(framework)
    with _no_grad(framework):
        out = kit.run_benchmark(benchmark, "ew_add", framework, lambda: x + y)
    np.testing.assert_allclose(np.asarray(out), np.asarray(x) + np.asarray(y), rtol=1e-6)


@pytest.mark.benchmark(**kit.bench_mark(max_time=1.5))
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_chain_large(benchmark, framework, stream_bandwidth):
    x, _ = _inputs(framework)
    with _no_grad(framework):
        out = kit.run_benchmark(benchmark, "ew_chain", framework, _chain, x)
    np.testing.assert_allclose(np.asarray(out), _chain(np.asarray(x)), rtol=1e-5, atol=1e-6)
