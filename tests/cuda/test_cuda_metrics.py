"""The CUDA counting kernels (``numbagrad/kernels/cuda/metrics.py``) against the CPU kernels on
tiny inputs (at most 64 samples: the simulator costs ~0.3 ms a thread): confusion counts with
repeated cells (atomics) added into a non-zero matrix, top-k hits with ties and NaN scores in
float32, float64 and float16 (compared with the CPU kernel on the float32 widening), row
arg-max with ties and NaN; then a
functional metric end to end on CUDA tensors."""
import os

import numpy as np
import pytest

cuda = pytest.importorskip("numba.cuda")

from numbagrad.kernels.cpu import metrics as C  # noqa: E402
from numbagrad.kernels.cuda import metrics as G  # noqa: E402

SIM = os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0")


@pytest.mark.parametrize("n,c", [(0, 2), (37, 3), (64, 5)])
def test_confusion_count_matches_cpu(n, c):
    r = np.random.default_rng(n)
    t = r.integers(0, c, n)
    p = np.where(r.random(n) < 0.5, t, r.integers(0, c, n))
    start = r.integers(0, 9, (c, c))
    cpu = start.copy()
    C._confusion_count_cpu(t, p, cpu)
    out = cuda.to_device(start.copy())
    G._confusion_count_cuda(cuda.to_device(t), cuda.to_device(p), out)
    np.testing.assert_array_equal(out.copy_to_host(), cpu)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_topk_correct_matches_cpu(dtype):
    r = np.random.default_rng(1)
    n, c = 24, 5
    s = r.integers(0, 3, (n, c)).astype(dtype)      # ties
    s[::7, 2] = np.nan
    t = r.integers(0, c, n)
    for k in (1, 2, c):
        cpu = np.array([3], np.int64)
        C._topk_correct_cpu(s.astype(np.float32) if dtype == np.float16 else s, t, k, cpu)
        out = cuda.to_device(np.array([3], np.int64))
        G._topk_correct_cuda(cuda.to_device(s), cuda.to_device(t), k, out)
        assert out.copy_to_host()[0] == cpu[0], k


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_row_argmax_matches_cpu(dtype):
    r = np.random.default_rng(3)
    s = r.integers(0, 3, (20, 4)).astype(dtype)
    s[::6, 1] = np.nan
    cpu = np.empty(20, np.int64)
    C._row_argmax_cpu(s.astype(np.float32) if dtype == np.float16 else s, cpu)
    out = cuda.to_device(np.full(20, -1, np.int64))
    G._row_argmax_cuda(cuda.to_device(s), out)
    np.testing.assert_array_equal(out.copy_to_host(), cpu)


def test_functional_metrics_on_cuda_tensors():
    import numbagrad as ng
    from numbagrad import metrics as M
    r = np.random.default_rng(2)
    s = r.standard_normal((16, 3)).astype(np.float32)
    t = r.integers(0, 3, 16)
    st, tt = ng.tensor(s, device="cuda"), ng.tensor(t, device="cuda")
    np.testing.assert_array_equal(M.confusion_matrix(st, tt), M.confusion_matrix(s, t))
    assert M.accuracy(st, tt, top_k=2) == M.accuracy(s, t, top_k=2)
    assert M.f1_score(st.argmax(1), tt, 3, None).tolist() == M.f1_score(s.argmax(1), t, 3, None).tolist()
    with pytest.raises(ValueError, match=r"target holds 3 at position 4"):
        M.accuracy(st, ng.tensor(np.where(np.arange(16) == 4, 3, t), device="cuda"))
