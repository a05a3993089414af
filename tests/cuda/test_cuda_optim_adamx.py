"""CUDA fused Adamax / RAdam / NAdam over a flat arena
(``numbagrad/kernels/cuda/optim_adamx.py``) against the CPU kernels, step for step.

The tiny arena of ``test_cuda_optim.py`` (three parameters of 3, 5 and 4 elements in
blocks of at most 3, one trailing element outside every block), three steps with
changing ``active`` patterns. Step counts start at [0, 2, 5], so within one call RAdam
has parameters on both sides of the ``rho_t > 5`` switch, and NAdam's per-parameter mu
products start apart. Options: weight decay (L2 and decoupled), maximize, both
``torch.lerp`` branches. float16 arenas are checked against a float32 CPU arena at a
loose tolerance. Also: launchers take the CPU kernels' arguments, kernels compile to PTX.
"""
import functools
import os

import numpy as np
import pytest

cuda = pytest.importorskip("numba.cuda")

from numbagrad.kernels.cpu import optim_adamx as C  # noqa: E402
from numbagrad.kernels.cuda import optim_adamx as G  # noqa: E402
from test_cuda_optim import SIZES, TOTAL, half_matches_f32_cpu, matches_cpu, run_steps  # noqa: E402

SIM = os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0")
N = len(SIZES)
STEPS0 = [0, 2, 5]


def _ct(dtype):
    return np.float64 if dtype == np.float64 else np.float32


def _state(name, dtype):
    """Host arrays: [param, buf_a, buf_b, steps, (mu_product,) seg_scal]."""
    rng = np.random.default_rng(0)
    arrs = [rng.standard_normal(TOTAL).astype(dtype), np.zeros(TOTAL, dtype),
            np.abs(rng.standard_normal(TOTAL)).astype(dtype) * dtype(0.1), np.array(STEPS0, np.float32)]
    if name == "adamax":
        arrs[1] = (rng.standard_normal(TOTAL) * 0.1).astype(dtype)
        arrs.append(np.zeros(2 * N, dtype))
    else:
        if name == "nadam":
            arrs.append(np.array([1.0, 0.85, 0.7], np.float32))
        arrs.append(np.zeros(3 * N, _ct(dtype)))
    return arrs


def _run(name, kernel, on_device, dtype, scal, grads):
    """Three steps; the host arrays of ``FIELDS[name]`` after each."""
    def call(a, layout, g):
        kernel(a[0], g, a[1], a[2], layout, *a[3:], scal)
    return run_steps(call, _state(name, dtype), on_device, grads)


def _scalars(name, dtype, lr, betas, eps, wd, decoupled, maximize, md=4e-3):
    t = np.dtype(dtype).type
    beta1, beta2 = betas
    omb1 = t(1.0 - beta1)
    small = abs(1.0 - beta1) < 0.5
    sign = t(-1.0 if maximize else 1.0)
    if name == "adamax":
        return (lr, beta1, omb1, t(1) - omb1, t(beta2), t(eps), t(wd), sign, small)
    tail = (omb1, t(1) - omb1, t(beta2), t(1.0 - beta2), t(eps), t(0.0 if decoupled else wd),
            t(1.0 - lr * wd if decoupled else 1.0), sign, small)
    if name == "radam":
        return (beta1, beta2, t(lr)) + tail
    return (lr, beta1, beta2, md) + tail


CASES = {
    "plain": dict(betas=(0.9, 0.999), wd=0.0, decoupled=False, maximize=False),
    "l2_maximize": dict(betas=(0.5, 0.9), wd=0.1, decoupled=False, maximize=True),
    "decoupled_lerp_large_weight": dict(betas=(0.3, 0.9), wd=0.05, decoupled=True, maximize=False),
}
NAMES = ["adamax", "radam", "nadam"]
FIELDS = {"adamax": ["param", "exp_avg", "exp_inf", "steps", "seg_scal"],
          "radam": ["param", "exp_avg", "exp_avg_sq", "steps", "seg_scal"],
          "nadam": ["param", "exp_avg", "exp_avg_sq", "steps", "mu_product", "seg_scal"]}


def _kernels(name):
    return getattr(C, f"_{name}_step_cpu"), getattr(G, f"_{name}_step_cuda")


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_matches_cpu(dtype, name, case):
    kw = dict(CASES[case])
    if name == "adamax" and kw["decoupled"]:
        kw["decoupled"] = False  # Adamax has L2 decay only
    scal = _scalars(name, dtype, lr=0.1, eps=1e-8, **kw)
    got = matches_cpu(functools.partial(_run, name), _kernels(name), dtype, scal, FIELDS[name])
    if name == "radam" and case == "plain":
        # parameter 0 (steps 1, 2) is never rectified; parameter 2 (steps 6..8) always
        assert got[-1][4][2] == 0.0 and got[-1][4][8] > 0.0


@pytest.mark.parametrize("name", NAMES)
def test_float16_arena_matches_float32_cpu(name):
    scal16 = _scalars(name, np.float16, lr=0.05, eps=1e-4, **CASES["plain"])
    half_matches_f32_cpu(functools.partial(_run, name), _kernels(name), scal16, FIELDS[name])


def _optimizer_run(name, device, steps=4):
    import numbagrad as ng
    from numbagrad.optim.adamax import Adamax
    from numbagrad.optim.nadam import NAdam
    from numbagrad.optim.radam import RAdam
    cls = {"adamax": Adamax, "radam": RAdam, "nadam": NAdam}[name]
    ng.manual_seed(0)
    P = list(ng.nn.Linear(3, 2).to(device).parameters())   # shapes (2, 3) and (2,)
    shapes = [(2, 3), (2,)]
    rng = np.random.default_rng(0)
    grads = [[rng.standard_normal(s).astype(np.float32) for s in shapes] for _ in range(steps)]
    kw = dict(lr=0.05, weight_decay=0.1)
    if name != "adamax":
        kw["decoupled_weight_decay"] = True
    o = cls(P, **kw)
    for k in range(steps):
        for i, (p, g) in enumerate(zip(P, grads[k])):
            p.grad = None if (k == 0 and i == 1) else ng.tensor(g, device=device)
        o.step()
    return P, o


@pytest.mark.parametrize("name", NAMES)
def test_optimizer_on_the_cuda_backend_matches_cpu(name):
    """The optimizer class end to end on CUDA arrays (arena, scratch, NAdam's mu products
    as 0-d device views) against the same run on the CPU."""
    import numbagrad as ng
    P0, o0 = _optimizer_run(name, "cpu")
    P1, o1 = _optimizer_run(name, "cuda")
    for p, q in zip(P1, P0):
        assert p.device == ng.device("cuda")
        np.testing.assert_allclose(p.detach().cpu().numpy(), q.detach().numpy(), rtol=1e-5, atol=1e-6)
    for p, q in zip(P1, P0):
        assert list(o1.state[p]) == list(o0.state[q])
        for key, val in o0.state[q].items():
            np.testing.assert_allclose(o1.state[p][key].cpu().numpy(), val.numpy(), rtol=1e-5, atol=1e-6,
                                       err_msg=key)
    assert o1.state[P1[1]]["step"].item() == 3.0
