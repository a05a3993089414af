"""CUDA CTC kernels (``numbagrad/kernels/cuda/ctc.py``) against the CPU kernels on tiny
shapes (T <= 6, N <= 2, C <= 4, S <= 3): every forward output (``lab``, ``smask``, the
alphas inside each sample's band, ``nll``, ``loss``) and the gradient, for float32 and
float64, with repeated labels, a zero-length target, an impossible alignment (with and
without ``zero_infinity``) and an input shorter than ``T``; float16 log-probabilities
(computed in float32) against the float32 CPU kernels.
"""
import os

import numpy as np
import pytest

cuda = pytest.importorskip("numba.cuda")

from numbagrad.kernels.cpu import ctc as C  # noqa: E402
from numbagrad.kernels.cuda import ctc as G  # noqa: E402
from numbagrad.ops.ctc import ctc_width  # noqa: E402

SIM = os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0")
TOL = {np.float32: dict(rtol=2e-5, atol=2e-6), np.float64: dict(rtol=1e-12, atol=1e-13)}
TOL16 = dict(rtol=2e-2, atol=2e-3)

# (targets padded to S=3, input lengths, target lengths) with T=6, N=2, C=4 (blank 0)
CASES = {
    "repeats": (np.array([[1, 1, 2], [3, 2, 0]]), [6, 5], [3, 2]),
    "empty_and_short": (np.array([[2, 0, 0], [1, 3, 1]]), [4, 6], [0, 3]),
    "impossible": (np.array([[1, 1, 1], [2, 3, 0]]), [4, 0], [3, 1]),  # needs T >= 5; T_b = 0
}


def _log_probs(T, N, nc, dtype, seed=0):
    x = np.random.default_rng(seed).standard_normal((T, N, nc)) * 1.5
    lp = x - np.log(np.exp(x).sum(-1, keepdims=True))
    return np.ascontiguousarray(lp.astype(dtype))


def _arrays(tg, il, tl, T, nc, ct, ldt):
    N = len(il)
    W = ctc_width(tg.shape[1])
    return dict(targets=np.ascontiguousarray(tg, np.int64), il=np.asarray(il, np.int64),
                tl=np.asarray(tl, np.int64), lab=np.zeros((N, W), np.int64), smask=np.zeros((N, W), ct),
                alpha=np.zeros((N, T, W), ct), nll=np.zeros(N, ct), loss=np.zeros(N, ldt),
                work=np.zeros((N, 3 * W + nc), ct), grad=np.zeros((T, N, nc), ldt))


def _run(mod, lp, a, zi, gscale):
    names = ["lab", "smask", "alpha", "nll", "loss"]
    if mod is C:
        C._ctc_loss_fwd_cpu(lp, a["targets"], a["il"], a["tl"], 0, zi, *[a[k] for k in names])
        C._ctc_loss_bwd_cpu(lp, a["il"], a["tl"], zi, a["lab"], a["smask"], a["alpha"], a["nll"], gscale,
                            a["work"], a["grad"])
        return {k: a[k] for k in names + ["grad"]}
    d = {k: cuda.to_device(v) for k, v in a.items()}
    dlp, dg = cuda.to_device(lp), cuda.to_device(gscale)
    G._ctc_loss_fwd_cuda(dlp, d["targets"], d["il"], d["tl"], 0, zi, *[d[k] for k in names])
    G._ctc_loss_bwd_cuda(dlp, d["il"], d["tl"], zi, d["lab"], d["smask"], d["alpha"], d["nll"], dg,
                         d["work"], d["grad"])
    return {k: d[k].copy_to_host() for k in names + ["grad"]}


def _compare(got, ref, il, tl, tol):
    np.testing.assert_array_equal(got["lab"], ref["lab"])
    np.testing.assert_array_equal(got["smask"], ref["smask"])
    for b, (T_b, L) in enumerate(zip(il, tl)):  # alphas inside the sample's band only
        np.testing.assert_allclose(got["alpha"][b, :T_b, :2 * L + 1], ref["alpha"][b, :T_b, :2 * L + 1], **tol)
    for k in ("nll", "loss", "grad"):
        np.testing.assert_allclose(got[k].astype(np.float64), ref[k].astype(np.float64), err_msg=k, **tol)


@pytest.mark.parametrize("zi", [False, True])
@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_ctc_matches_cpu(dtype, case, zi):
    tg, il, tl = CASES[case]
    T, nc = 6, 4
    lp = _log_probs(T, 2, nc, dtype)
    gscale = np.array([0.7, -1.3], dtype)
    ref = _run(C, lp, _arrays(tg, il, tl, T, nc, dtype, dtype), zi, gscale)
    got = _run(G, lp, _arrays(tg, il, tl, T, nc, dtype, dtype), zi, gscale)
    _compare(got, ref, il, tl, TOL[dtype])
    if case == "impossible":
        assert np.isinf(got["nll"][0]) and got["loss"][0] == (0 if zi else np.inf)
        assert np.isnan(got["grad"][:4, 0]).all() != zi


def test_ctc_float16_matches_float32_cpu():
    tg, il, tl = CASES["repeats"]
    T, nc = 6, 4
    lp16 = _log_probs(T, 2, nc, np.float16)
    gscale = np.array([0.5, 1.0], np.float32)
    ref = _run(C, lp16.astype(np.float32), _arrays(tg, il, tl, T, nc, np.float32, np.float32), False, gscale)
    got = _run(G, lp16, _arrays(tg, il, tl, T, nc, np.float32, np.float16), False, gscale)
    assert got["loss"].dtype == np.float16 and got["grad"].dtype == np.float16
    _compare(got, ref, il, tl, TOL16)
