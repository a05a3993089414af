"""GPU rows: numbagrad's CUDA backend against PyTorch on the same GPU, in the same run.

Skipped unless numba finds a real CUDA GPU (never under the simulator). Rows:

* ``cuda_copy``: device-to-device copy through the driver (``cuMemcpyDtoD``): the
  card's copy bandwidth, the reference for % of bandwidth.
* ``cuda_ew_add``: ``x + y`` on 64M float32 (bar: >= 60% of the copy bandwidth).
* ``cuda_matmul_4096``: GFLOP/s of the tiled GEMM against cuBLAS (through torch).
* ``cuda_mlp_b1024``: the MLP training step at batch 1024 (bar: <= 2x torch).

Every timed call ends with a device synchronisation.
"""
import os
import time

import numpy as np
import pytest

import _fresh_process_step as mlp
import _perfkit as kit


def _gpu():
    if os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0"):
        return False
    try:
        import numbagrad as ng
        return ng.cuda.is_available()
    except Exception:
        return False


pytestmark = pytest.mark.skipif(not _gpu(), reason="no CUDA GPU")


def _torch_cuda():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA on this machine")
    return torch


def _sync(framework):
    if framework == "torch":
        import torch
        torch.cuda.synchronize()
    else:
        import numbagrad as ng
        ng.cuda.synchronize()


def test_copy_bandwidth():
    from numba import cuda
    a = cuda.device_array(kit.CUDA_EW_N, np.float32)
    b = cuda.device_array(kit.CUDA_EW_N, np.float32)
    times = []
    for _ in range(20):
        cuda.synchronize()
        t = time.perf_counter()
        b.copy_to_device(a)
        cuda.synchronize()
        times.append(time.perf_counter() - t)
    best = min(times)
    nbytes = 2 * a.nbytes
    kit.BANDWIDTH["cuda_copy"] = dict(gbps=nbytes / best / 1e9, seconds=best, n=kit.CUDA_EW_N, repeats=20)
    kit.record("cuda_copy", "numbagrad", float(np.median(times)), best, len(times))


def _pair(framework, n, shape=None):
    rng = np.random.default_rng(kit.SEED)
    shape = shape or (n,)
    x = rng.standard_normal(shape, dtype=np.float32)
    y = rng.standard_normal(shape, dtype=np.float32)
    if framework == "torch":
        torch = _torch_cuda()
        return torch.from_numpy(x).cuda(), torch.from_numpy(y).cuda()
    import numbagrad as ng
    return ng.tensor(x, device="cuda"), ng.tensor(y, device="cuda")


@pytest.mark.benchmark(**kit.bench_mark(max_time=1.0))
@pytest.mark.parametrize("framework", ("numbagrad", "torch"))
def test_cuda_add(benchmark, framework):
    x, y = _pair(framework, kit.CUDA_EW_N)

    def f():
        z = x + y
        _sync(framework)
        return z
    out = kit.run_benchmark(benchmark, "cuda_ew_add", framework, f)
    k = 1000
    np.testing.assert_allclose(out[:k].cpu().numpy(), x[:k].cpu().numpy() + y[:k].cpu().numpy(), rtol=1e-6)


@pytest.mark.benchmark(**kit.bench_mark(max_time=2.0))
@pytest.mark.parametrize("framework", ("numbagrad", "torch"))
def test_cuda_matmul(benchmark, framework):
    a, b = _pair(framework, 0, (4096, 4096))

    def f():
        c = a @ b
        _sync(framework)
        return c
    out = kit.run_benchmark(benchmark, "cuda_matmul_4096", framework, f)
    ref = a[:64].cpu().numpy().astype(np.float64) @ b.cpu().numpy().astype(np.float64)
    np.testing.assert_allclose(out[:64].cpu().numpy(), ref, rtol=1e-3, atol=1e-2)


@pytest.mark.benchmark(**kit.bench_mark(max_time=2.0))
@pytest.mark.parametrize("framework", ("numbagrad", "torch"))
def test_cuda_mlp_step(benchmark, framework):
    if framework == "torch":
        _torch_cuda()
    step = mlp.build(framework, kit.CUDA_MLP_BATCH, kit.MLP_SIZES, seed=kit.SEED, device="cuda")
    kit.run_training_benchmark(benchmark, f"cuda_mlp_b{kit.CUDA_MLP_BATCH}", framework, step, warm=5, slack=1e-3)
