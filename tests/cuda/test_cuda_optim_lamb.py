"""CUDA fused LAMB and Lion (``numbagrad/kernels/cuda/optim_lamb.py``) against the CPU
kernels, step for step, on the tiny arena of ``test_cuda_optim.py`` (parameters of 3, 5
and 4 elements in blocks of 3, one trailing element outside every block, three steps
with changing ``active`` patterns and different starting step counts).

LAMB: with and without adaptation (the trust-ratio passes), weight decay, the ``||p||``
clamp, no bias correction, maximize and both ``torch.lerp`` branches; its per-block
partial sums also with a grid of several thread blocks (the simulator otherwise runs
one). Lion: weight decay, maximize, beta edge values. float16 arenas against a float32
CPU arena at a loose tolerance. Then the optimizers on CUDA parameters against the
same on the CPU, and every kernel compiles to PTX.
"""
import os

import numpy as np
import pytest

cuda = pytest.importorskip("numba.cuda")

from numbagrad.kernels.cpu import optim_lamb as C  # noqa: E402
from numbagrad.kernels.cuda import optim_lamb as G  # noqa: E402
from test_cuda_optim import (SIZES, TOL, TOTAL, _blocks, _grads, _start_param, half_matches_f32_cpu,  # noqa: E402
                             matches_cpu, run_steps)

SIM = os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0")
NBLK = len(_blocks()[0])
LAMB_NAMES = ["param", "exp_avg", "exp_avg_sq", "update", "steps", "seg_scal", "blk_part"]
LAMB_KERNELS = (C._lamb_step_cpu, G._lamb_step_cuda)


def _lamb_scalars(dtype, lr, betas=(0.9, 0.999), eps=1e-6, wd=0.0, clamp=10.0, bias_correction=True,
                  always_adapt=False, maximize=False):
    t = np.dtype(dtype).type
    beta1, beta2 = betas
    omb1 = t(1.0 - beta1)
    return (lr, beta1, beta2, omb1, t(1) - omb1, t(beta2), t(1.0 - beta2), t(eps), t(wd),
            t(-1.0 if maximize else 1.0), np.inf if clamp is None else clamp, bias_correction,
            always_adapt or wd != 0.0, abs(1.0 - beta1) < 0.5)


def _run_lamb(kernel, on_device, dtype, scal, grads):
    """Three steps; the host arrays of ``LAMB_NAMES`` after each."""
    adapt = scal[12]
    arrs = [_start_param(dtype), np.zeros(TOTAL, dtype), np.zeros(TOTAL, dtype), np.zeros(TOTAL, dtype),
            np.array([0, 2, 5], np.float32), np.zeros(2 * len(SIZES), dtype), np.zeros(2 * NBLK)]

    def call(a, layout, g):
        p, m, v, upd, steps, seg, part = a
        kernel(p, g, m, v, upd if adapt else g, layout, steps, seg, part, scal)
    return run_steps(call, arrs, on_device, grads)


LAMB_CASES = {
    "adapt_wd": dict(lr=0.1, wd=0.05),
    "always_adapt": dict(lr=0.1, always_adapt=True),
    "plain": dict(lr=0.1),
    "clamp_maximize": dict(lr=0.1, wd=0.1, clamp=0.5, maximize=True),
    "no_clamp_no_bias_correction": dict(lr=0.05, wd=0.01, clamp=None, bias_correction=False),
    "lerp_large_weight": dict(lr=0.1, betas=(0.3, 0.9), eps=1e-3, always_adapt=True),
}


@pytest.mark.parametrize("case", list(LAMB_CASES))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_lamb_matches_cpu(dtype, case):
    scal = _lamb_scalars(dtype, **LAMB_CASES[case])
    got = matches_cpu(_run_lamb, LAMB_KERNELS, dtype, scal, LAMB_NAMES)
    if not scal[12]:
        assert not got[-1][3].any() and not got[-1][6].any()  # no adaptation: no scratch written


def test_lamb_partials_with_several_thread_blocks(monkeypatch):
    """A grid of two thread blocks striding over the arena blocks gives the same result."""
    scal = _lamb_scalars(np.float64, **LAMB_CASES["clamp_maximize"])
    grads = _grads(np.float64)
    ref = _run_lamb(G._lamb_step_cuda, True, np.float64, scal, grads)
    monkeypatch.setattr(G, "MAX_BLOCKS", 2)
    got = _run_lamb(G._lamb_step_cuda, True, np.float64, scal, grads)
    for g, r in zip(got[-1], ref[-1]):
        np.testing.assert_array_equal(g, r)


@pytest.mark.parametrize("case", ["adapt_wd", "plain"])
def test_lamb_float16_arena_matches_float32_cpu(case):
    kw = dict(LAMB_CASES[case], eps=1e-3)
    half_matches_f32_cpu(_run_lamb, LAMB_KERNELS, _lamb_scalars(np.float16, **kw), LAMB_NAMES,
                         tol={"blk_part": dict(rtol=2e-2, atol=1e-2)})


def _lion_scalars(dtype, lr, betas=(0.9, 0.99), wd=0.0, maximize=False):
    t = np.dtype(dtype).type
    b1, b2 = betas
    return (t(-lr), t(b1), t(1.0 - b1), t(b2), t(1.0 - b2), t(1.0 - lr * wd), t(-1.0 if maximize else 1.0))


LION_NAMES = ["param", "exp_avg", "steps"]
LION_KERNELS = (C._lion_step_cpu, G._lion_step_cuda)


def _run_lion(kernel, on_device, dtype, scal, grads):
    def call(a, layout, g):
        p, m, steps = a
        kernel(p, g, m, layout, steps, scal)
    return run_steps(call, [_start_param(dtype), np.zeros(TOTAL, dtype), np.array([0, 2, 5], np.float32)],
                     on_device, grads)


LION_CASES = {
    "plain": dict(lr=0.1),
    "wd_maximize": dict(lr=0.1, wd=0.5, maximize=True),
    "beta_edges": dict(lr=0.05, betas=(0.0, 1.0), wd=0.1),
}


@pytest.mark.parametrize("case", list(LION_CASES))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_lion_matches_cpu(dtype, case):
    matches_cpu(_run_lion, LION_KERNELS, dtype, _lion_scalars(dtype, **LION_CASES[case]), LION_NAMES)


def test_lion_float16_arena_matches_float32_cpu():
    half_matches_f32_cpu(_run_lion, LION_KERNELS, _lion_scalars(np.float16, **LION_CASES["wd_maximize"]), LION_NAMES)


@pytest.mark.parametrize("make", ["lamb", "lion"])
def test_optimizers_on_cuda_parameters_match_cpu(make):
    import numbagrad as ng
    from numbagrad import nn
    from numbagrad.optim.lamb import Lamb
    from numbagrad.optim.lion import Lion
    rng = np.random.default_rng(0)
    init = [rng.standard_normal(s) for s in [(2, 3), (4,)]]
    grads = [[rng.standard_normal(a.shape) for a in init] for _ in range(3)]
    out = {}
    for device in ("cpu", "cuda"):
        P = [nn.Parameter(ng.tensor(a.copy())) for a in init]
        for p in P:
            p.array = p.array if device == "cpu" else ng.tensor(p.array, device=device).array  # as Module.to does
        o = (Lamb(P, lr=0.1, weight_decay=0.05) if make == "lamb"
             else Lion(P, lr=0.1, weight_decay=0.1, maximize=True))
        for k, gs in enumerate(grads):
            for i, (p, g) in enumerate(zip(P, gs)):
                p.grad = None if (k == 1 and i == 0) else ng.tensor(g, device=device)
            o.step()
        out[device] = [p.detach().cpu().numpy() for p in P] + [o.state[P[0]]["exp_avg"].cpu().numpy(),
                                                               o.state[P[0]]["step"].cpu().numpy()]
    for c, g in zip(out["cpu"], out["cuda"]):
        np.testing.assert_allclose(g, c, **TOL[np.float64])
    assert out["cuda"][-1] == 2.0
