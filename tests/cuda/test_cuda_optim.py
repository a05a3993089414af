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

The arena and its drivers (``run_steps``, ``check_steps``, ``check_half``, ``as_f32``)
serve the other CUDA optimizer tests too.
"""
import functools
import os

import numpy as np
import pytest

cuda = pytest.importorskip("numba.cuda")

from numbagrad.kernels.cpu import optim as C  # noqa: E402
from numbagrad.kernels.cuda import optim as G  # noqa: E402
from numbagrad.optim.optimizer import ArenaLayout  # noqa: E402
from optest import block_tables  # noqa: E402

SIM = os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0")
SIZES = (3, 5, 4)
TOTAL = sum(SIZES) + 1          # + one element outside every block
ACTIVE = ([1, 1, 1], [1, 0, 1], [0, 1, 1])
TOL = {np.float32: dict(rtol=1e-5, atol=1e-7), np.float64: dict(rtol=1e-12, atol=1e-14)}
TOL16 = dict(rtol=2e-2, atol=2e-3)
GSRC = np.zeros(2 * len(SIZES), np.int64)
"""The kernels' ``gsrc`` table: every gradient in its arena slot (the CUDA launchers ignore it)."""


def _blocks(sizes=SIZES, block=3):
    return block_tables(sizes, block)


def _grads(dtype, steps=3, seed=1):
    g = np.random.default_rng(seed).standard_normal((steps, TOTAL))
    return g.astype(dtype)


def _start_param(dtype):
    """The parameter arena every test starts from."""
    return np.random.default_rng(0).standard_normal(TOTAL).astype(dtype)


def run_steps(call, arrs, on_device, grads):
    """The steps of ``ACTIVE`` over the tiny arena: ``call(arrs, layout, g)`` each
    step, ``arrs`` (a list or a dict of host arrays) and the block tables moved to the
    device when ``on_device``; returns host copies of ``arrs`` after each step."""
    tables = _blocks()
    is_dict = isinstance(arrs, dict)
    if on_device:
        arrs = {k: cuda.to_device(a) for k, a in arrs.items()} if is_dict else [cuda.to_device(a) for a in arrs]
        tables = [cuda.to_device(a) for a in tables]
    host = (lambda a: a.copy_to_host()) if on_device else (lambda a: a.copy())
    out = []
    for k, act in enumerate(ACTIVE):
        g = grads[k]
        active = np.array(act, np.uint8)
        if on_device:
            g, active = cuda.to_device(g), cuda.to_device(active)
        call(arrs, ArenaLayout(*tables, active, GSRC), g)
        out.append({n: host(a) for n, a in arrs.items()} if is_dict else [host(a) for a in arrs])
    return out


def _named(step, names):
    return list(step.items()) if isinstance(step, dict) else list(zip(names, step))


def check_steps(got, ref, dtype, names=None):
    """The device run ``got`` equals the CPU run ``ref`` after every step, array by array
    (``names`` label list entries; dict entries carry theirs), dtypes included. Then the
    step counts (``steps``) are the per-parameter counts of ``ACTIVE`` and the element
    outside every block (``param``) is untouched."""
    for k in range(len(ACTIVE)):
        for (name, g), (_, r) in zip(_named(got[k], names), _named(ref[k], names)):
            assert g.dtype == r.dtype, name
            np.testing.assert_allclose(g, r, err_msg=f"step {k}: {name}", **TOL[dtype])
    final = dict(_named(got[-1], names))
    if "steps" in final:
        np.testing.assert_array_equal(final["steps"], [2, 4, 8])  # counted per active parameter
    assert final["param"][-1] == _start_param(dtype)[-1]          # outside every block: untouched


def check_half(got, ref, names=None, tol=None):
    """A float16 device run against a float32 CPU run, at the end, loosely (``tol``: per
    name, default ``TOL16``)."""
    for (name, g), (_, r) in zip(_named(got[-1], names), _named(ref[-1], names)):
        np.testing.assert_allclose(np.asarray(g, np.float64), r, err_msg=name, **(tol or {}).get(name, TOL16))
    assert dict(_named(got[-1], names))["param"].dtype == np.float16


def matches_cpu(run, kernels, dtype, scal, names=None):
    """``run(kernel, on_device, dtype, scal, grads)`` with the CPU kernel and with its CUDA
    twin (``kernels``, that pair) on the same gradients, compared by :func:`check_steps`;
    returns the device run."""
    cpu, gpu = kernels
    grads = _grads(dtype)
    ref = run(cpu, False, dtype, scal, grads)
    got = run(gpu, True, dtype, scal, grads)
    check_steps(got, ref, dtype, names)
    return got


def half_matches_f32_cpu(run, kernels, scal16, names=None, tol=None):
    """Like :func:`matches_cpu` for a float16 arena on the device, against the CPU kernel
    in float32 on the same half-rounded scalars and gradients (:func:`check_half`)."""
    cpu, gpu = kernels
    grads = _grads(np.float16)
    ref = run(cpu, False, np.float32, as_f32(scal16), grads.astype(np.float32))
    got = run(gpu, True, np.float16, scal16, grads)
    check_half(got, ref, names, tol)


def as_f32(scal):
    """The CPU reference of a half arena sees the same (half-rounded) scalars, in float32."""
    return tuple(np.float32(s) if isinstance(s, np.float16) else s for s in scal)


def _adam_scalars(dtype, lr, betas, eps, wd, decoupled, maximize, amsgrad):
    t = np.dtype(dtype).type
    beta1, beta2 = betas
    omb1 = t(1.0 - beta1)
    return (lr, beta1, beta2, omb1, t(1) - omb1, t(beta2), t(1.0 - beta2), t(eps),
            t(0.0 if decoupled else wd), t(1.0 - lr * wd if decoupled else 1.0), t(-1.0 if maximize else 1.0),
            amsgrad, abs(1.0 - beta1) < 0.5)


ADAM_NAMES = ["param", "exp_avg", "exp_avg_sq", "max_exp_avg_sq", "steps", "seg_scal"]
ADAM_KERNELS = (C._adam_step_cpu, G._adam_step_cuda)


def _run_adam(kernel, on_device, dtype, scal, grads, amsgrad):
    """Three steps; the host arrays of ``ADAM_NAMES`` after each."""
    n = len(SIZES)
    arrs = [_start_param(dtype), np.zeros(TOTAL, dtype), np.zeros(TOTAL, dtype), np.zeros(TOTAL, dtype),
            np.array([0, 2, 5], np.float32), np.zeros(2 * n, dtype)]   # parameters at different step counts

    def call(a, layout, g):
        p, m, v, vmax, steps, seg = a
        kernel(p, g, m, v, vmax if amsgrad else v, layout, steps, seg, scal)
    return run_steps(call, arrs, on_device, grads)


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
    matches_cpu(functools.partial(_run_adam, amsgrad=amsgrad), ADAM_KERNELS, dtype, scal, ADAM_NAMES)


@pytest.mark.parametrize("amsgrad", [False, True])
def test_adam_float16_arena_matches_float32_cpu(amsgrad):
    kw = ADAM_CASES["adamw"]
    scal16 = _adam_scalars(np.float16, lr=0.05, eps=1e-4, amsgrad=amsgrad, **kw)
    half_matches_f32_cpu(functools.partial(_run_adam, amsgrad=amsgrad), ADAM_KERNELS, scal16, ADAM_NAMES)


def _sgd_scalars(dtype, lr, momentum, dampening, wd, nesterov, maximize):
    t = np.dtype(dtype).type
    return (t(-lr), t(momentum), t(1.0 - dampening), t(wd), t(-1.0 if maximize else 1.0), momentum != 0.0,
            nesterov)


SGD_NAMES = ["param", "momentum_buffer", "has_buf"]
SGD_KERNELS = (C._sgd_step_cpu, G._sgd_step_cuda)


def _run_sgd(kernel, on_device, dtype, scal, grads):
    use_m = scal[5]

    def call(a, layout, g):
        p, buf, has_buf = a
        kernel(p, g, buf if use_m else g, layout, has_buf, scal)
    return run_steps(call, [_start_param(dtype), np.zeros(TOTAL, dtype), np.zeros(len(SIZES), np.uint8)], on_device,
                     grads)


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
    got = matches_cpu(_run_sgd, SGD_KERNELS, dtype, _sgd_scalars(dtype, lr=0.1, **SGD_CASES[case]), SGD_NAMES)
    expect_flags = [1, 1, 1] if SGD_CASES[case]["momentum"] else [0, 0, 0]
    np.testing.assert_array_equal(got[-1][2], expect_flags)
    np.testing.assert_array_equal(got[0][2], expect_flags)


def test_sgd_float16_arena_matches_float32_cpu():
    half_matches_f32_cpu(_run_sgd, SGD_KERNELS, _sgd_scalars(np.float16, lr=0.1, **SGD_CASES["nesterov_maximize"]),
                         SGD_NAMES)


# ---- PTX: every kernel of the module compiles (no simulator) -----------------------------------
