"""CUDA fused Adam/AdamW and SGD over a flat arena (``numbagrad/kernels/cuda/optim.py``)
against the CPU kernels, step for step.

The arena holds three parameters of 3, 5 and 4 elements cut into blocks of at most 3
elements (so parameters span several blocks, as large ones do with the optimizer's real
block size) plus one trailing element outside every block (left untouched). Three
steps run with changing ``active`` patterns, so per-parameter step counts and SGD's
first-momentum-step flag diverge between parameters. Adam/AdamW with amsgrad on/off,
weight decay, maximize and both ``torch.lerp`` branches; SGD with/without momentum,
dampening, nesterov, weight decay and maximize. float16 arenas are checked against a
float32 CPU arena at a loose tolerance.
"""
import os

import numpy as np
import pytest

cuda = pytest.importorskip("numba.cuda")

from numbagrad.kernels.cpu import optim as C  # noqa: E402
from numbagrad.kernels.cuda import optim as G  # noqa: E402

SIM = os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0")
SIZES = (3, 5, 4)
TOTAL = sum(SIZES) + 1          # + one element outside every block
ACTIVE = ([1, 1, 1], [1, 0, 1], [0, 1, 1])
TOL = {np.float32: dict(rtol=1e-5, atol=1e-7), np.float64: dict(rtol=1e-12, atol=1e-14)}
TOL16 = dict(rtol=2e-2, atol=2e-3)


def _blocks(sizes=SIZES, block=3):
    starts, ends, segs, off = [], [], [], 0
    for s, n in enumerate(sizes):
        for lo in range(off, off + n, block):
            starts.append(lo)
            ends.append(min(lo + block, off + n))
            segs.append(s)
        off += n
    return tuple(np.array(v, np.int64) for v in (starts, ends, segs))


def _grads(dtype, steps=3, seed=1):
    g = np.random.default_rng(seed).standard_normal((steps, TOTAL))
    return g.astype(dtype)


def _adam_scalars(dtype, lr, betas, eps, wd, decoupled, maximize, amsgrad):
    t = np.dtype(dtype).type
    beta1, beta2 = betas
    omb1 = t(1.0 - beta1)
    return (lr, beta1, beta2, omb1, t(1) - omb1, t(beta2), t(1.0 - beta2), t(eps),
            t(0.0 if decoupled else wd), t(1.0 - lr * wd if decoupled else 1.0), t(-1.0 if maximize else 1.0),
            amsgrad, abs(1.0 - beta1) < 0.5)


def _run_adam(kernel, on_device, dtype, scal, amsgrad, grads):
    """Three steps; returns the host arrays (param, m, v, vmax, steps, seg_scal) after each."""
    n = len(SIZES)
    param = np.random.default_rng(0).standard_normal(TOTAL).astype(dtype)
    arrs = [param, np.zeros(TOTAL, dtype), np.zeros(TOTAL, dtype), np.zeros(TOTAL, dtype),
            np.zeros(n, np.float32), np.zeros(2 * n, dtype)]
    arrs[4][:] = [0, 2, 5]      # parameters at different step counts
    tables = _blocks()
    if on_device:
        arrs = [cuda.to_device(a) for a in arrs]
        tables = [cuda.to_device(a) for a in tables]
    p, m, v, vmax, steps, seg = arrs
    out = []
    for k, act in enumerate(ACTIVE):
        g = grads[k]
        active = np.array(act, np.uint8)
        if on_device:
            g, active = cuda.to_device(g), cuda.to_device(active)
        kernel(p, g, m, v, vmax if amsgrad else v, *tables, active, steps, seg, *scal)
        out.append([a.copy_to_host() if on_device else a.copy() for a in arrs])
    return out


ADAM_CASES = {
    "adam": dict(betas=(0.9, 0.999), wd=0.0, decoupled=False, maximize=False),
    "adam_l2_maximize": dict(betas=(0.9, 0.99), wd=0.1, decoupled=False, maximize=True),
    "adamw": dict(betas=(0.9, 0.999), wd=0.05, decoupled=True, maximize=False),
    "adamw_lerp_large_weight": dict(betas=(0.3, 0.9), wd=0.05, decoupled=True, maximize=True),
}


@pytest.mark.parametrize("amsgrad", [False, True])
@pytest.mark.parametrize("case", list(ADAM_CASES))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_adam_matches_cpu(dtype, case, amsgrad):
    scal = _adam_scalars(dtype, lr=0.1, eps=1e-8, amsgrad=amsgrad, **ADAM_CASES[case])
    grads = _grads(dtype)
    ref = _run_adam(C._adam_step_cpu, False, dtype, scal, amsgrad, grads)
    got = _run_adam(G._adam_step_cuda, True, dtype, scal, amsgrad, grads)
    for k in range(len(ACTIVE)):
        for name, g, r in zip(["param", "exp_avg", "exp_avg_sq", "max_exp_avg_sq", "steps", "seg_scal"],
                              got[k], ref[k]):
            assert g.dtype == r.dtype
            np.testing.assert_allclose(g, r, err_msg=f"step {k}: {name}", **TOL[dtype])
    final = got[-1]
    np.testing.assert_array_equal(final[4], [2, 4, 8])  # steps counted per active parameter
    start = np.random.default_rng(0).standard_normal(TOTAL).astype(dtype)
    assert final[0][-1] == start[-1]                     # outside every block: untouched


@pytest.mark.parametrize("amsgrad", [False, True])
def test_adam_float16_arena_matches_float32_cpu(amsgrad):
    kw = ADAM_CASES["adamw"]
    scal16 = _adam_scalars(np.float16, lr=0.05, eps=1e-4, amsgrad=amsgrad, **kw)
    # the CPU reference sees the same (half-rounded) per-element scalars, in float32
    scal32 = tuple(np.float32(s) if isinstance(s, np.float16) else s for s in scal16)
    grads = _grads(np.float16)
    ref = _run_adam(C._adam_step_cpu, False, np.float32, scal32, amsgrad, grads.astype(np.float32))
    got = _run_adam(G._adam_step_cuda, True, np.float16, scal16, amsgrad, grads)
    for g, r in zip(got[-1], ref[-1]):
        np.testing.assert_allclose(g.astype(np.float32), r, **TOL16)
    assert got[-1][0].dtype == np.float16


def _sgd_scalars(dtype, lr, momentum, dampening, wd, nesterov, maximize):
    t = np.dtype(dtype).type
    return (t(-lr), t(momentum), t(1.0 - dampening), t(wd), t(-1.0 if maximize else 1.0), momentum != 0.0,
            nesterov)


def _run_sgd(kernel, on_device, dtype, scal, grads):
    n = len(SIZES)
    use_m = scal[5]
    arrs = [np.random.default_rng(0).standard_normal(TOTAL).astype(dtype), np.zeros(TOTAL, dtype),
            np.zeros(n, np.uint8)]
    tables = _blocks()
    if on_device:
        arrs = [cuda.to_device(a) for a in arrs]
        tables = [cuda.to_device(a) for a in tables]
    p, buf, has_buf = arrs
    out = []
    for k, act in enumerate(ACTIVE):
        g = grads[k]
        active = np.array(act, np.uint8)
        if on_device:
            g, active = cuda.to_device(g), cuda.to_device(active)
        kernel(p, g, buf if use_m else g, *tables, active, has_buf, *scal)
        out.append([a.copy_to_host() if on_device else a.copy() for a in arrs])
    return out


SGD_CASES = {
    "plain": dict(momentum=0.0, dampening=0.0, wd=0.0, nesterov=False, maximize=False),
    "plain_wd_maximize": dict(momentum=0.0, dampening=0.0, wd=0.1, nesterov=False, maximize=True),
    "momentum": dict(momentum=0.9, dampening=0.0, wd=0.0, nesterov=False, maximize=False),
    "momentum_dampening_wd": dict(momentum=0.8, dampening=0.3, wd=0.05, nesterov=False, maximize=False),
    "nesterov_maximize": dict(momentum=0.9, dampening=0.0, wd=0.01, nesterov=True, maximize=True),
}


@pytest.mark.parametrize("case", list(SGD_CASES))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sgd_matches_cpu(dtype, case):
    scal = _sgd_scalars(dtype, lr=0.1, **SGD_CASES[case])
    grads = _grads(dtype)
    ref = _run_sgd(C._sgd_step_cpu, False, dtype, scal, grads)
    got = _run_sgd(G._sgd_step_cuda, True, dtype, scal, grads)
    for k in range(len(ACTIVE)):
        for name, g, r in zip(["param", "momentum_buffer", "has_buf"], got[k], ref[k]):
            np.testing.assert_allclose(g, r, err_msg=f"step {k}: {name}", **TOL[dtype])
    expect_flags = [1, 1, 1] if SGD_CASES[case]["momentum"] else [0, 0, 0]
    np.testing.assert_array_equal(got[-1][2], expect_flags)
    np.testing.assert_array_equal(got[0][2], expect_flags)


def test_sgd_float16_arena_matches_float32_cpu():
    scal16 = _sgd_scalars(np.float16, lr=0.1, **SGD_CASES["nesterov_maximize"])
    scal32 = tuple(np.float32(s) if isinstance(s, np.float16) else s for s in scal16)
    grads = _grads(np.float16)
    ref = _run_sgd(C._sgd_step_cpu, False, np.float32, scal32, grads.astype(np.float32))
    got = _run_sgd(G._sgd_step_cuda, True, np.float16, scal16, grads)
    for g, r in zip(got[-1], ref[-1]):
        np.testing.assert_allclose(g.astype(np.float32), r, **TOL16)


def test_launchers_mirror_cpu_signatures():
    import inspect
    for name in ["adam_step", "sgd_step"]:
        cpu = getattr(C, f"_{name}_cpu").serial.py_func
        gpu = getattr(G, f"_{name}_cuda")
        assert list(inspect.signature(gpu).parameters) == list(inspect.signature(cpu).parameters), name


# ---- PTX: every kernel of the module compiles (no simulator) -----------------------------------
@pytest.mark.skipif(SIM, reason="compile_ptx cannot run under the CUDA simulator")
def test_optim_kernels_compile_to_ptx():
    from numbagrad.kernels.cuda._launch import REGISTRY
    kernels = [k for k in REGISTRY if k.name.startswith(G.__name__ + ".")]
    assert len(kernels) >= 4
    for k in kernels:
        for sig in k.example_signatures():
            ptx, _ = cuda.compile_ptx(k.fn, sig, cc=(8, 0))
            assert ".entry" in ptx, (k.name, sig)
