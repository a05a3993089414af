"""The CUDA unscale kernel (``numbagrad/kernels/cuda/amp.py``) against the CPU kernel on tiny
arenas (three parameters of 9, 14 and 9 elements cut into blocks of at most 4, one of them
inactive, one element outside every block), with inf/NaN injected: float32 and float64 bit
for bit, float16 against NumPy's float32 multiply rounded to half; then ``GradScaler`` over
an Adam whose parameters live on the CUDA backend, step for step against the same run on
the CPU."""
import os

import numpy as np
import pytest

cuda = pytest.importorskip("numba.cuda")

from numbagrad.kernels.cpu import amp as C  # noqa: E402
from numbagrad.kernels.cuda import amp as G  # noqa: E402
from optest import block_tables  # noqa: E402

SIM = os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0")
SIZES = (9, 14, 9)
TOTAL = sum(SIZES) + 1


def _tables(block=4):
    return block_tables(SIZES, block)


def _grad(dtype, bad, seed=0):
    g = (np.random.default_rng(seed).standard_normal(TOTAL) * 300).astype(dtype)
    for pos, v in bad:
        g[pos] = v
    return g


def _run_both(g, active, inv):
    st, en, sg = _tables()
    gsrc = np.zeros(2 * len(SIZES), np.int64)
    cpu, f_cpu = g.copy(), np.zeros(1, np.float32)
    if g.dtype != np.float16:
        C._unscale_check_cpu(cpu, st, en, sg, active, gsrc, np.float32(inv), f_cpu)
    d, f_gpu = cuda.to_device(g.copy()), cuda.to_device(np.zeros(1, np.float32))
    G._unscale_check_cuda(d, cuda.to_device(st), cuda.to_device(en), cuda.to_device(sg), cuda.to_device(active),
                          gsrc, np.float32(inv), f_gpu)
    return cpu, f_cpu[0], d.copy_to_host(), f_gpu.copy_to_host()[0]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", ["finite", "nan_active", "inf_inactive", "ninf_active_one"])
def test_matches_cpu_kernel(dtype, case):
    bad = {"finite": [], "nan_active": [(3, np.nan)], "inf_inactive": [(12, np.inf)],
           "ninf_active_one": [(25, -np.inf)]}[case]
    active = np.array([1, 0, 1], np.uint8)
    inv = np.float32(1.0) if case == "ninf_active_one" else np.float32(1 / 3.0e4)
    g = _grad(dtype, bad)
    cpu, f_cpu, gpu, f_gpu = _run_both(g, active, inv)
    np.testing.assert_array_equal(gpu, cpu)
    assert f_gpu == f_cpu == (1.0 if case in ("nan_active", "ninf_active_one") else 0.0)
    np.testing.assert_array_equal(gpu[9:23], g[9:23])      # the inactive parameter
    assert gpu[-1] == g[-1]                                # outside every block


def test_float16_multiplies_in_float32():
    g = _grad(np.float16, [(20, np.inf)], seed=1)
    active = np.array([1, 1, 0], np.uint8)
    inv = np.float32(1 / 19660.8)
    _, _, gpu, found = _run_both(g, active, inv)
    ref = g.copy()
    ref[:23] = (g[:23].astype(np.float32) * inv).astype(np.float16)
    np.testing.assert_array_equal(gpu, ref)
    assert gpu.dtype == np.float16 and found == 1.0


def _train(device, steps=4):
    import numbagrad as ng
    from numbagrad import nn
    r = np.random.default_rng(0)
    ps = [nn.Parameter(ng.tensor(r.standard_normal(s).astype(np.float32), device=device)) for s in ((3, 2), (5,))]
    opt = ng.optim.Adam([{"params": [ps[0]]}, {"params": [ps[1]], "lr": 0.05}], lr=0.1)
    scaler = ng.amp.GradScaler(device, init_scale=2.0 ** 10, growth_interval=2)
    log = []
    for k in range(steps):
        c = [r.standard_normal(s).astype(np.float32) for s in ((3, 2), (5,))]
        if k == 1:
            c[1][2] = np.inf
        opt.zero_grad()
        loss = sum((p * ng.tensor(v, device=device)).sum() for p, v in zip(ps, c))
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        grads = [p.grad.cpu().numpy().copy() for p in ps]
        scaler.step(opt)
        scaler.update()
        log.append((scaler.get_scale(), grads, [p.detach().cpu().numpy().copy() for p in ps]))
    return log, ps


def test_grad_scaler_on_cuda_parameters_matches_cpu():
    import numbagrad as ng
    ref, _ = _train("cpu")
    out, ps = _train("cuda")
    for k, ((s0, g0, p0), (s1, g1, p1)) in enumerate(zip(ref, out)):
        assert s1 == s0, k
        for a, b in zip(g1, g0):
            np.testing.assert_array_equal(a, b)
        for a, b in zip(p1, p0):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert [s for s, _, _ in out] == [1024.0, 512.0, 512.0, 1024.0]
    assert all(p.grad.device == ng.device("cuda") for p in ps)
