"""Square float32 matmul: numbagrad vs NumPy (OpenBLAS) vs torch; GFLOP/s = 2 n^3 / t."""
import numpy as np
import pytest

import _perfkit as kit


def _operands(framework, n):
    rng = np.random.default_rng(kit.SEED)
    a = rng.standard_normal((n, n), dtype=kit.DTYPE)
    b = rng.standard_normal((n, n), dtype=kit.DTYPE)
    if framework == "numbagrad":
        import numbagrad as ng
        return ng.matmul, ng.from_numpy(a), ng.from_numpy(b)
    if framework == "torch":
        torch = pytest.importorskip("torch")
        return torch.matmul, torch.from_numpy(a), torch.from_numpy(b)
    return np.matmul, a, b


@pytest.mark.benchmark(**kit.bench_mark(max_time=0.75))
@pytest.mark.parametrize("framework", ("numbagrad", "torch", "numpy"))
@pytest.mark.parametrize("n", kit.MATMUL_SIZES)
def test_matmul(benchmark, framework, n):
    fn, a, b = _operands(framework, n)
    out = kit.run_benchmark(benchmark, f"matmul_{n}", framework, fn, a, b)
    ref = np.asarray(a) @ np.asarray(b)
    np.testing.assert_allclose(np.asarray(out), ref, rtol=1e-3, atol=1e-3 * np.sqrt(n))
