"""CUDA L-BFGS kernels (``numbagrad/kernels/cuda/optim_lbfgs.py``) against the CPU ones on
tiny vectors: the two-loop recursion over a history ring that wraps around (and an empty
history), the reductions (dot, ``y``/``s`` with their dot products, ``max|x|``/``sum|x|``
with a NaN), the axpy and the gradient gather (an inactive parameter, an element outside
every block left untouched); float16 against float32 CPU loosely; the whole optimizer on
CUDA parameters against the CPU one.
"""
import os

import numpy as np
import pytest

cuda = pytest.importorskip("numba.cuda")

from numbagrad.kernels.cpu import optim_lbfgs as C  # noqa: E402
from numbagrad.kernels.cuda import optim_lbfgs as G  # noqa: E402
from numbagrad.optim.optimizer import ArenaLayout  # noqa: E402
from reference.lbfgs import curvature_history  # noqa: E402

SIM = os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0")
TOL = {np.float32: dict(rtol=2e-5, atol=1e-6), np.float64: dict(rtol=1e-12, atol=1e-13)}
N = 11


def _history(dtype):
    """3 curvature pairs in a ring of 4 rows, from row 2 (so it wraps)."""
    return curvature_history(dtype, n=N, cap=4, count=3, start=2)


def _direction(kernel, on_device, dtype, count, h, nchunks=2):
    (dirs, stps, ro, g), start, _ = _history(dtype)
    al, d, part = np.zeros(dirs.shape[0], dtype), np.zeros(N, dtype), np.zeros(2 * nchunks)
    arrs = [g, dirs, stps, ro, al, d, part]
    if on_device:
        arrs = [cuda.to_device(a) for a in arrs]
    g, dirs, stps, ro, al, d, part = arrs
    kernel(g, dirs, stps, ro, al, start, count, dtype(h), d, part)
    if on_device:
        return d.copy_to_host(), al.copy_to_host()
    return d, al


@pytest.mark.parametrize("count,h", [(3, 0.7), (0, 1.0)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_direction_matches_cpu(dtype, count, h):
    ref_d, ref_al = _direction(C._lbfgs_direction_cpu, False, dtype, count, h)
    d, al = _direction(G._lbfgs_direction_cuda, True, dtype, count, h)
    assert d.dtype == dtype
    np.testing.assert_allclose(d, ref_d, **TOL[dtype])
    np.testing.assert_allclose(al[:count], ref_al[:count], **TOL[dtype])
    if count == 0:
        (_, _, _, g), _, _ = _history(dtype)
        np.testing.assert_array_equal(d, -g)


def test_direction_float16_matches_float32_cpu():
    ref_d, _ = _direction(C._lbfgs_direction_cpu, False, np.float32, 3, 0.5)
    (dirs, stps, ro, g), start, count = _history(np.float32)
    # the CPU reference sees the half-rounded inputs
    ref_in = [a.astype(np.float16).astype(np.float32) for a in (g, dirs, stps, ro)]
    ref_d = np.zeros(N, np.float32)
    C._lbfgs_direction_cpu(*ref_in, np.zeros(4, np.float32), start, count, np.float32(0.5), ref_d, np.zeros(4))
    dev = [cuda.to_device(a.astype(np.float16)) for a in (g, dirs, stps, ro)]
    d = cuda.to_device(np.zeros(N, np.float16))
    G._lbfgs_direction_cuda(*dev, cuda.to_device(np.zeros(4, np.float16)), start, count, np.float16(0.5), d,
                            cuda.to_device(np.zeros(4)))
    np.testing.assert_allclose(d.copy_to_host().astype(np.float32), ref_d, rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_reductions_match_cpu(dtype):
    rng = np.random.default_rng(3)
    a, b, p = (rng.standard_normal(N).astype(dtype) for _ in range(3))
    part = np.zeros(2 * 3)
    D = lambda x: cuda.to_device(x)  # noqa: E731
    assert G._lbfgs_dot_cuda(D(a), D(b), D(part)) == pytest.approx(C._lbfgs_dot_cpu(a, b, part), rel=1e-13)
    got = G._lbfgs_absstats_cuda(D(a), D(part))
    ref = C._lbfgs_absstats_cpu(a, part)
    assert got[0] == ref[0] and got[1] == pytest.approx(ref[1], rel=1e-13)
    y, s = D(np.zeros(N, dtype)), D(np.zeros(N, dtype))
    got = G._lbfgs_pair_cuda(D(a), D(b), D(p), dtype(0.25), y, s, D(part))
    ry, rs = np.zeros(N, dtype), np.zeros(N, dtype)
    ref = C._lbfgs_pair_cpu(a, b, p, dtype(0.25), ry, rs, part)
    np.testing.assert_allclose(got, ref, rtol=1e-13)
    np.testing.assert_array_equal(y.copy_to_host(), ry)
    np.testing.assert_array_equal(s.copy_to_host(), rs)
    a[4] = np.nan
    assert np.isnan(G._lbfgs_absstats_cuda(D(a), D(part))[0])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_axpy_and_gather_match_cpu(dtype):
    rng = np.random.default_rng(5)
    x, d, grad = (rng.standard_normal(N).astype(dtype) for _ in range(3))
    gx = cuda.to_device(x)
    G._lbfgs_axpy_cuda(gx, cuda.to_device(d), dtype(-0.3))
    C._lbfgs_axpy_cpu(x, d, dtype(-0.3))
    np.testing.assert_allclose(gx.copy_to_host(), x, **TOL[dtype])
    # parameters of 4, 3 and 3 elements in blocks of at most 3; the last element is in no block
    tables = [np.array(v, np.int64) for v in ([0, 3, 4, 7], [3, 4, 7, 10], [0, 0, 1, 2])]
    active = np.array([1, 0, 1], np.uint8)
    out = np.full(N, 9, dtype)
    gsrc = np.zeros(6, np.int64)  # every gradient in the arena (the CUDA launcher ignores it)
    C._lbfgs_gather_cpu(grad, ArenaLayout(*tables, active, gsrc), out)
    gout = cuda.to_device(np.full(N, 9, dtype))
    G._lbfgs_gather_cuda(cuda.to_device(grad), ArenaLayout(*[cuda.to_device(t) for t in tables],
                                                           cuda.to_device(active), gsrc), gout)
    np.testing.assert_array_equal(gout.copy_to_host(), out)
    np.testing.assert_array_equal(out[4:7], 0)
    assert out[-1] == 9


@pytest.mark.parametrize("line_search", [None, "strong_wolfe"])
def test_optimizer_on_cuda_matches_cpu(line_search):
    """The optimizer on CUDA parameters (autograd closure) follows the CPU run (the simulator
    runs a shortened version: every kernel launch is simulated thread by thread)."""
    steps, max_iter = (1, 3) if SIM else (3, 8)
    import numbagrad as ng
    from numbagrad import nn
    from numbagrad.optim.lbfgs import LBFGS
    rng = np.random.default_rng(0)
    A, b = rng.standard_normal((40, 9)), rng.standard_normal(40)
    init = [rng.standard_normal(5), rng.standard_normal(4)]
    runs = []
    for device in ("cpu", "cuda"):
        P = [nn.Parameter(ng.tensor(a.copy(), device=device)) for a in init]
        At, bt = ng.tensor(A, device=device), ng.tensor(b, device=device)
        opt = LBFGS(P, line_search_fn=line_search, history_size=4, max_iter=max_iter)

        def closure():
            opt.zero_grad()
            x = ng.cat([P[0], P[1]])
            loss = ((At @ x - bt) ** 2).mean() + (x ** 4).sum() * 0.01
            loss.backward()
            return loss
        for _ in range(steps):
            opt.step(closure)
        runs.append(([p.detach().cpu().numpy() for p in P], dict(opt.state[P[0]])))
    (pc, sc), (pg, sg) = runs
    for a, c in zip(pg, pc):
        np.testing.assert_allclose(a, c, rtol=1e-8, atol=1e-10)
    assert (sg["func_evals"], sg["n_iter"], len(sg["old_dirs"])) == (sc["func_evals"], sc["n_iter"],
                                                                     len(sc["old_dirs"]))
