"""The counting kernels (``numbagrad/kernels/cpu/metrics.py``): serial and parallel twins against
NumPy references (``np.bincount`` of ``target * C + pred``; a stable descending sort for the top-k
rank), sizes on both sides of ``config.PARALLEL_THRESHOLD``, and accumulation into ``out``."""
import numpy as np
import pytest

from numbagrad.backend import config
from numbagrad.kernels.cpu import metrics as K


@pytest.mark.parametrize("n,c", [(0, 3), (1000, 7), (3 * config.PARALLEL_THRESHOLD + 11, 10),
                                 (config.PARALLEL_THRESHOLD + 5, 300)])
def test_confusion_count_matches_bincount_and_accumulates(n, c):
    r = np.random.default_rng(n)
    t = r.integers(0, c, n)
    p = np.where(r.random(n) < 0.6, t, r.integers(0, c, n))
    ref = np.bincount(t * c + p, minlength=c * c).reshape(c, c)
    out = np.zeros((c, c), np.int64)
    K._confusion_count_cpu(t, p, out)
    np.testing.assert_array_equal(out, ref)
    K._confusion_count_cpu(t, p, out)          # adds to what out holds
    np.testing.assert_array_equal(out, 2 * ref)


def _topk_ref(s, t, k):
    """Hits of a stable descending sort, NaN scores sorted last; a NaN target score misses."""
    rows = np.arange(len(t))
    order = np.argsort(-np.where(np.isnan(s), -np.inf, s), axis=1, kind="stable")[:, :k]
    hit = (order == t[:, None]).any(axis=1) & ~np.isnan(s[rows, t])
    return int(hit.sum())


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n,c", [(50, 4), (config.PARALLEL_THRESHOLD // 8 + 3, 10)])
def test_topk_correct_serial_and_parallel_match_reference(dtype, n, c):
    r = np.random.default_rng(c)
    s = r.integers(0, 4, (n, c)).astype(dtype)          # many ties
    s[::17, 0] = np.nan                                  # NaN scores (some on the target)
    t = r.integers(0, c, n)
    for k in (1, 3, c):
        ref = _topk_ref(s, t, k)
        for twin in (K._topk_correct_cpu.serial, K._topk_correct_cpu.parallel, K._topk_correct_cpu):
            out = np.array([5], np.int64)
            twin(s, t, k, out)
            assert out[0] == 5 + ref, (k, twin)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n,c", [(40, 1), (60, 5), (config.PARALLEL_THRESHOLD // 4 + 1, 6)])
def test_row_argmax_is_numpys(dtype, n, c):
    r = np.random.default_rng(n)
    s = r.integers(0, 3, (n, c)).astype(dtype)          # ties: the first maximum
    s[::5, c // 2] = np.nan                              # NaN: the first NaN, as np.argmax
    s[::11, :] = np.nan
    for twin in (K._row_argmax_cpu.serial, K._row_argmax_cpu.parallel):
        out = np.full(n, -1, np.int64)
        twin(s, out)
        np.testing.assert_array_equal(out, np.argmax(s, axis=1))
