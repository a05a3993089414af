"""CUDA fused RMSprop, Adagrad and Adadelta over a flat arena
(``numbagrad/kernels/cuda/optim_adaptive.py``) against the CPU kernels, step for step.

The tiny arena of ``test_cuda_optim.py`` (three parameters of 3, 5 and 4 elements cut
into blocks of at most 3, plus one trailing element outside every block), non-zero
starting state, per-parameter step counts that start apart, and three steps with
changing ``active`` patterns. RMSprop plain / centered (both ``torch.lerp`` branches) /
momentum, weight decay and maximize; Adagrad with lr decay (per-parameter rates), weight
decay, maximize; Adadelta with weight decay and maximize. float16 arenas are checked
against a float32 CPU arena at a loose tolerance. Plus: the launchers take the CPU
kernels' arguments, and every kernel compiles to PTX (real toolchain only).
"""
import os

import numpy as np
import pytest

cuda = pytest.importorskip("numba.cuda")

from numbagrad.kernels.cpu import optim_adaptive as C  # noqa: E402
from numbagrad.kernels.cuda import optim_adaptive as G  # noqa: E402
from test_cuda_optim import (SIZES, TOTAL, _grads, _start_param, as_f32, check_half, check_steps,  # noqa: E402
                             run_steps)

SIM = os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0")
NSEG = len(SIZES)
START_STEPS = [0, 2, 5]


def _state(dtype, names):
    """Starting arrays: param (standard normal), then one positive state buffer per name
    (``grad_avg`` small enough that ``square_avg - grad_avg**2`` stays positive)."""
    r = np.random.default_rng(7)
    arrs = {"param": _start_param(dtype)}
    for name in names:
        arrs[name] = ((r.random(TOTAL) * 0.5 + 0.05) * (0.2 if name == "grad_avg" else 1.0)).astype(dtype)
    arrs["steps"] = np.array(START_STEPS, np.float32)
    arrs["seg_scal"] = np.zeros(2 * NSEG, dtype)
    return arrs


def _run(kernel, on_device, dtype, names, grads, call):
    """Three steps of ``call(kernel, arrs, tables, g, active)`` from ``_state(dtype, names)``;
    the host copies of every array after each step."""
    return run_steps(lambda a, layout, g: call(kernel, a, layout, g), _state(dtype, names),
                     on_device, grads)


def _check(dtype, names, call):
    grads = _grads(dtype)
    ref = _run(getattr(C, call.cpu), False, dtype, names, grads, call)
    got = _run(getattr(G, call.gpu), True, dtype, names, grads, call)
    check_steps(got, ref, dtype)
    return got


def _check_half(names, call16, call32):
    grads = _grads(np.float16)
    ref = _run(getattr(C, call32.cpu), False, np.float32, names, grads.astype(np.float32), call32)
    got = _run(getattr(G, call16.gpu), True, np.float16, names, grads, call16)
    check_half(got, ref)


# ---- RMSprop ------------------------------------------------------------------------------------
def _rmsprop_call(dtype, lr, alpha, eps, wd, momentum, centered, maximize):
    t = np.dtype(dtype).type
    oma = t(1.0 - alpha)
    scal = (t(-lr), t(alpha), oma, t(1) - oma, t(eps), t(wd), t(-1.0 if maximize else 1.0), t(momentum),
            centered, momentum > 0, abs(1.0 - alpha) < 0.5)
    return _rmsprop_caller(scal)


def _rmsprop_caller(scal):
    def call(kernel, a, layout, g):
        kernel(a["param"], g, a["square_avg"], a["grad_avg"], a["momentum_buffer"], layout, a["steps"],
               scal)
    call.cpu, call.gpu, call.scal = "_rmsprop_step_cpu", "_rmsprop_step_cuda", scal
    return call


RMS_NAMES = ("square_avg", "grad_avg", "momentum_buffer")
RMS_CASES = {
    "plain": dict(alpha=0.99, wd=0.0, momentum=0.0, centered=False, maximize=False),
    "wd_maximize": dict(alpha=0.9, wd=0.1, momentum=0.0, centered=False, maximize=True),
    "centered": dict(alpha=0.99, wd=0.0, momentum=0.0, centered=True, maximize=False),
    "centered_lerp_large_weight": dict(alpha=0.3, wd=0.05, momentum=0.0, centered=True, maximize=False),
    "momentum": dict(alpha=0.99, wd=0.0, momentum=0.9, centered=False, maximize=False),
    "centered_momentum_wd_maximize": dict(alpha=0.95, wd=0.01, momentum=0.5, centered=True, maximize=True),
}


@pytest.mark.parametrize("case", list(RMS_CASES))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_rmsprop_matches_cpu(dtype, case):
    kw = RMS_CASES[case]
    got = _check(dtype, RMS_NAMES, _rmsprop_call(dtype, lr=0.05, eps=1e-8, **kw))
    start = _state(dtype, RMS_NAMES)
    if not kw["centered"]:
        np.testing.assert_array_equal(got[-1]["grad_avg"], start["grad_avg"])
    if not kw["momentum"]:
        np.testing.assert_array_equal(got[-1]["momentum_buffer"], start["momentum_buffer"])


def test_rmsprop_float16_arena_matches_float32_cpu():
    c16 = _rmsprop_call(np.float16, lr=0.05, eps=1e-4, **RMS_CASES["centered_momentum_wd_maximize"])
    _check_half(RMS_NAMES, c16, _rmsprop_caller(as_f32(c16.scal)))


# ---- Adagrad ------------------------------------------------------------------------------------
def _adagrad_call(dtype, lr, lr_decay, eps, wd, maximize):
    t = np.dtype(dtype).type
    return _adagrad_caller((lr, lr_decay, t(eps), t(wd), t(-1.0 if maximize else 1.0)))


def _adagrad_caller(scal):
    def call(kernel, a, layout, g):
        kernel(a["param"], g, a["sum"], layout, a["steps"], a["seg_scal"], scal)
    call.cpu, call.gpu, call.scal = "_adagrad_step_cpu", "_adagrad_step_cuda", scal
    return call


ADAGRAD_CASES = {
    "plain": dict(lr_decay=0.0, wd=0.0, maximize=False),
    "lr_decay_wd_maximize": dict(lr_decay=0.1, wd=0.05, maximize=True),
}


@pytest.mark.parametrize("case", list(ADAGRAD_CASES))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_adagrad_matches_cpu(dtype, case):
    kw = ADAGRAD_CASES[case]
    got = _check(dtype, ("sum",), _adagrad_call(dtype, lr=0.1, eps=1e-10, **kw))
    # the decayed rate of each parameter, from its own step count
    expect = [-0.1 / (1 + (s - 1) * kw["lr_decay"]) for s in got[-1]["steps"]]
    np.testing.assert_allclose(got[-1]["seg_scal"][0::2], expect, rtol=1e-6)


def test_adagrad_float16_arena_matches_float32_cpu():
    c16 = _adagrad_call(np.float16, lr=0.1, eps=1e-4, **ADAGRAD_CASES["lr_decay_wd_maximize"])
    _check_half(("sum",), c16, _adagrad_caller(as_f32(c16.scal)))


# ---- Adadelta -----------------------------------------------------------------------------------
def _adadelta_call(dtype, lr, rho, eps, wd, maximize):
    t = np.dtype(dtype).type
    return _adadelta_caller((t(-lr), t(rho), t(1.0 - rho), t(eps), t(wd), t(-1.0 if maximize else 1.0)))


def _adadelta_caller(scal):
    def call(kernel, a, layout, g):
        kernel(a["param"], g, a["square_avg"], a["acc_delta"], layout, a["steps"], scal)
    call.cpu, call.gpu, call.scal = "_adadelta_step_cpu", "_adadelta_step_cuda", scal
    return call


ADADELTA_CASES = {
    "plain": dict(lr=1.0, rho=0.9, wd=0.0, maximize=False),
    "wd_maximize": dict(lr=0.5, rho=0.5, wd=0.1, maximize=True),
}


@pytest.mark.parametrize("case", list(ADADELTA_CASES))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_adadelta_matches_cpu(dtype, case):
    _check(dtype, ("square_avg", "acc_delta"), _adadelta_call(dtype, eps=1e-6, **ADADELTA_CASES[case]))


def test_adadelta_float16_arena_matches_float32_cpu():
    c16 = _adadelta_call(np.float16, eps=1e-4, **ADADELTA_CASES["wd_maximize"])
    _check_half(("square_avg", "acc_delta"), c16, _adadelta_caller(as_f32(c16.scal)))


# ---- the optimizers on CUDA parameters ----------------------------------------------------------
def _train_model(device, make, steps=3):
    import numbagrad as ng
    ng.manual_seed(0)
    m = ng.nn.Linear(3, 2).to(device)
    extra = ng.nn.Linear(1, 2).to(device).bias
    opt = make([m.weight, m.bias])
    rng = np.random.default_rng(0)
    x = ng.tensor(rng.standard_normal((4, 3)).astype(np.float32), device=device)
    for k in range(steps):
        if k == 1:
            opt.add_param_group({"params": [extra]})  # Adagrad: state created on its first step
        opt.zero_grad()
        ((m(x) * m(x)).sum() + (extra * extra).sum()).backward()
        opt.step()
    params = [p.detach().cpu().numpy() for p in (m.weight, m.bias, extra)]
    state = {(i, k): v.cpu().numpy() for i, p in enumerate((m.weight, extra)) for k, v in opt.state[p].items()}
    return params, state, opt


@pytest.mark.parametrize("which", ["rmsprop", "adagrad", "adadelta"])
def test_optimizers_on_cuda_parameters_match_cpu(which):
    from numbagrad.optim.adadelta import Adadelta
    from numbagrad.optim.adagrad import Adagrad
    from numbagrad.optim.rmsprop import RMSprop
    make = {"rmsprop": lambda P: RMSprop(P, lr=1e-2, momentum=0.9, centered=True, weight_decay=0.01),
            "adagrad": lambda P: Adagrad(P, lr=0.1, lr_decay=0.1, initial_accumulator_value=0.5),
            "adadelta": lambda P: Adadelta(P, lr=1.0, weight_decay=0.01)}[which]
    p_cpu, s_cpu, _ = _train_model("cpu", make)
    p_gpu, s_gpu, opt = _train_model("cuda", make)
    for a, b in zip(p_gpu, p_cpu):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    for k in s_cpu:
        np.testing.assert_allclose(s_gpu[k], s_cpu[k], rtol=1e-5, atol=1e-6, err_msg=str(k))
    import numbagrad as ng
    assert s_gpu[(1, "step")] == 2.0
    if which == "adagrad":  # the later parameter's sum started at initial_accumulator_value
        assert (s_gpu[(1, "sum")] > 0.5).all()
    for group in opt.param_groups:
        for p in group["params"]:
            for key, v in opt.state[p].items():
                if key != "step":
                    assert v.device == ng.device("cuda"), key


# ---- launchers and PTX ----------------------------------------------------------------------------
