"""The CUDA optimizer twins after an inf gradient (issue 20): the same NaN and inf pattern
as the CPU kernels, which ``tests/test_edge_numerics.py`` holds to torch's. A zero weight
decay must not turn a NaN or inf parameter into a NaN gradient (torch adds no decay
then), so running sums of squares stay +inf, not NaN. Tiny arenas (the simulator)."""
import warnings

import numpy as np
import pytest

import numbagrad as ng
from numbagrad import nn, optim

INF = float("inf")
CASES = [("Adam", dict(amsgrad=True)), ("AdamW", dict(weight_decay=0.0)), ("Adam", dict(weight_decay=0.1)),
         ("Adamax", {}), ("RAdam", {}), ("NAdam", {}), ("RMSprop", dict(centered=True, momentum=0.9)),
         ("Adagrad", {}), ("Adadelta", {}), ("SGD", dict(momentum=0.9)), ("SGD", {}), ("Lamb", {}), ("Lion", {})]
GRADS = (np.array([1.0, 2.0, -0.5], np.float32), np.array([INF, -INF, 0.25], np.float32),
         np.array([1.0, 1.0, 1.0], np.float32))


def _run(device, name, kw):
    p = nn.Parameter(ng.tensor(np.ones(3, np.float32), device=device))
    opt = getattr(optim, name)([p], lr=0.1, **kw)
    for g in GRADS:
        p.grad = ng.tensor(g, device=device)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            opt.step()
    st = {k: v.cpu().numpy() for k, v in opt.state[p].items() if hasattr(v, "shape") and v.ndim}
    return p.detach().cpu().numpy(), st


@pytest.mark.parametrize("name,kw", CASES, ids=[f"{n}-{'-'.join(kw) or 'plain'}" for n, kw in CASES])
def test_cuda_twin_keeps_cpu_nan_inf_pattern(name, kw):
    p_gpu, st_gpu = _run("cuda", name, kw)
    p_cpu, st_cpu = _run("cpu", name, kw)
    assert set(st_gpu) == set(st_cpu)
    for what, a, b in [("param", p_gpu, p_cpu)] + [(k, st_gpu[k], st_cpu[k]) for k in st_cpu]:
        assert np.array_equal(np.isnan(a), np.isnan(b)), (what, a, b)
        assert np.array_equal(np.isposinf(a), np.isposinf(b)), (what, a, b)
        assert np.array_equal(np.isneginf(a), np.isneginf(b)), (what, a, b)
        fin = np.isfinite(b)
        np.testing.assert_allclose(a[fin], b[fin], rtol=1e-5, atol=1e-6, err_msg=what)
    if not kw.get("weight_decay"):
        for k in ("exp_avg_sq", "max_exp_avg_sq", "exp_inf", "square_avg", "sum"):
            if k in st_gpu:
                assert np.isposinf(st_gpu[k][:2]).all(), (k, st_gpu[k])
