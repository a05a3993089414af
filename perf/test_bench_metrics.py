"""Metrics: ``confusion_matrix`` and ``f1_score`` (macro) over 1M predictions of 10 classes,
numbagrad vs scikit-learn on the same ``int64`` labels, in the same run.

scikit-learn takes the place of torch in the comparison table (the "torch" column and the
``ng/torch`` ratio of these two rows are scikit-learn's; ``extra_info["framework"]`` says
so). Both are told the class set (``num_classes=10`` / ``labels=range(10)``), so neither
pays for discovering it. numbagrad's figure includes its input checks (every label
against ``[0, C)``) and the counting kernel (``kernels/cpu/metrics.py``).

Bar (issue 17): numbagrad at least 5x faster, i.e. ratio <= 0.2. The first numbagrad call
(JIT compile or cache load) is timed separately into ``extra_info["first_call_s"]``.
"""
import numpy as np
import pytest

import _perfkit as kit

N = 10_000 if kit.SMOKE else 1_000_000
C = 10
_REF = "torch column: scikit-learn"

kit._workload("metrics_confusion_1M", f"confusion_matrix {N / 1e6:g}M preds, {C} classes (vs scikit-learn)",
              bar=("ratio", "<=", 0.2), note=_REF)
kit._workload("metrics_f1_1M", f"f1_score macro {N / 1e6:g}M preds, {C} classes (vs scikit-learn)",
              bar=("ratio", "<=", 0.2), note=_REF)


def _data():
    r = np.random.default_rng(kit.SEED)
    t = r.integers(0, C, N)
    p = np.where(r.random(N) < 0.7, t, r.integers(0, C, N))
    return p, t


def _step(which, framework):
    kit.pin_threads()
    p, t = _data()
    if framework == "sklearn":
        skm = pytest.importorskip("sklearn.metrics")
        labels = np.arange(C)
        if which == "confusion":
            return lambda: skm.confusion_matrix(t, p, labels=labels)
        return lambda: skm.f1_score(t, p, labels=labels, average="macro")
    from numbagrad import metrics
    if which == "confusion":
        return lambda: metrics.confusion_matrix(p, t, C)
    return lambda: metrics.f1_score(p, t, C, "macro")


@pytest.mark.benchmark(**kit.bench_mark(max_time=1.5))
@pytest.mark.parametrize("framework", ("numbagrad", "sklearn"))
@pytest.mark.parametrize("which", ("confusion", "f1"))
def test_metrics(benchmark, which, framework):
    key = {"confusion": "metrics_confusion_1M", "f1": "metrics_f1_1M"}[which]
    step = _step(which, framework)
    out = kit.run_benchmark_timing_first(benchmark, key, "numbagrad" if framework == "numbagrad" else "torch",
                                         step, warm=2)
    benchmark.extra_info["framework"] = "scikit-learn" if framework == "sklearn" else framework
    # not a timing check: both give the reference value (a NumPy bincount, written here)
    p, t = _data()
    cm = np.bincount(t * C + p, minlength=C * C).reshape(C, C)
    if which == "confusion":
        np.testing.assert_array_equal(out, cm)
    else:
        tp = np.diag(cm).astype(np.float64)
        f1 = np.mean(2 * tp / (cm.sum(0) + cm.sum(1)))
        assert abs(out - f1) < 1e-12
