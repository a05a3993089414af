"""``numbagrad.metrics.functional`` against scikit-learn on random predictions: every averaging
mode and ``zero_division`` value, classes absent from the targets or from everything, scores,
class indices and binary probabilities as inputs; then the input checks."""
import warnings

import numpy as np
import pytest

import numbagrad as ng
from numbagrad import metrics as M

skm = pytest.importorskip("sklearn.metrics")

C = 5
N = 240
AVERAGES = ["macro", "micro", "weighted", None]


def _softmax(s):
    e = np.exp(s - s.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _case(kind, seed=0):
    """``(scores (N, C), target (N,))``: ``all`` classes present; ``absent_true``: class 3 never
    a target; ``absent_both``: class 4 neither a target nor ever predicted."""
    r = np.random.default_rng(seed)
    s = r.standard_normal((N, C))
    t = r.integers(0, C, N)
    if kind == "absent_true":
        t[t == 3] = 1
    elif kind == "absent_both":
        t[t == 4] = 0
        s[:, 4] = -10.0
    return s, t


def _close(a, b):
    np.testing.assert_allclose(np.asarray(a, np.float64), np.asarray(b, np.float64), rtol=1e-12, atol=1e-12,
                               equal_nan=True)


@pytest.mark.parametrize("kind", ["all", "absent_true", "absent_both"])
def test_prf_every_average_matches_sklearn(kind):
    s, t = _case(kind)
    p = s.argmax(axis=1)
    labels = np.arange(C)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for avg in AVERAGES:
            for zd in (0, 1, np.nan):
                kw = dict(labels=labels, average=avg, zero_division=zd)
                _close(M.precision(s, t, C, avg, zero_division=zd), skm.precision_score(t, p, **kw))
                _close(M.recall(p, t, C, avg, zero_division=zd), skm.recall_score(t, p, **kw))
                _close(M.f1_score(s, t, C, avg, zero_division=zd), skm.f1_score(t, p, **kw))
                for beta in (0.5, 2.0):
                    _close(M.fbeta_score(p, t, beta, C, avg, zero_division=zd),
                           skm.fbeta_score(t, p, beta=beta, **kw))
            pr, rc, f = M.precision_recall_fscore(ng.tensor(s), ng.tensor(t), 2.0, C, avg)
            ref = skm.precision_recall_fscore_support(t, p, beta=2.0, labels=labels, average=avg)
            for a, b in zip((pr, rc, f), ref[:3]):
                _close(a, b)


def test_per_class_results_are_numpy_and_scalars_are_floats():
    s, t = _case("all")
    assert type(M.f1_score(s, t)) is float
    per = M.f1_score(s, t, average=None)
    assert isinstance(per, np.ndarray) and per.shape == (C,) and per.dtype == np.float64


def test_undefined_scores_warn_like_sklearn():
    s, t = _case("absent_both")
    with pytest.warns(M.UndefinedMetricWarning, match="Precision is ill-defined"):
        v = M.precision(s, t, C, None)
    assert v[4] == 0.0
    with pytest.warns(M.UndefinedMetricWarning, match="Recall is ill-defined"):
        M.recall(s, t, C)
    with pytest.warns(M.UndefinedMetricWarning, match="F-score is ill-defined"):
        M.f1_score(s, t, C)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert M.precision(s, t, C, None, zero_division=1)[4] == 1.0
        assert np.isnan(M.recall(s, t, C, None, zero_division=np.nan)[4])
        # the macro mean skips NaN classes, as scikit-learn's does
        _close(M.recall(s, t, C, zero_division=np.nan),
               skm.recall_score(t, s.argmax(1), labels=np.arange(C), average="macro", zero_division=np.nan))


@pytest.mark.parametrize("avg", ["binary", "macro", "micro", "weighted", None])
def test_binary_probabilities_match_sklearn(avg):
    r = np.random.default_rng(3)
    prob = r.random(N)
    t = (r.random(N) < 0.4).astype(np.int64)
    p = (prob > 0.3).astype(np.int64)
    kw = dict(average=avg, labels=[0, 1]) if avg != "binary" else {}
    _close(M.precision(prob, t, average=avg, threshold=0.3), skm.precision_score(t, p, **kw))
    _close(M.recall(ng.tensor(prob.astype(np.float32)), ng.tensor(t), average=avg, threshold=0.3),
           skm.recall_score(t, p, **kw))
    _close(M.f1_score(list(prob), list(t), average=avg, threshold=0.3), skm.f1_score(t, p, **kw))
    if avg == "binary":
        _close(M.f1_score(prob, t, average=avg, threshold=0.3, pos_label=0),
               skm.f1_score(t, p, pos_label=0))


@pytest.mark.parametrize("normalize", [None, "true", "pred", "all"])
@pytest.mark.parametrize("kind", ["all", "absent_both"])
def test_confusion_matrix_matches_sklearn(normalize, kind):
    s, t = _case(kind)
    p = s.argmax(axis=1)
    ref = skm.confusion_matrix(t, p, labels=np.arange(C), normalize=normalize)
    for pred in (s, p, ng.tensor(p.astype(np.int32))):
        cm = M.confusion_matrix(pred, t, C, normalize)
        assert isinstance(cm, np.ndarray) and cm.shape == (C, C)
        assert cm.dtype == (np.int64 if normalize is None else np.float64)
        _close(cm, ref)


def test_confusion_matrix_of_nd_scores_moves_the_class_axis():
    r = np.random.default_rng(1)
    s = r.standard_normal((4, C, 3, 2)).astype(np.float32)
    t = r.integers(0, C, (4, 3, 2))
    ref = skm.confusion_matrix(t.reshape(-1), s.argmax(axis=1).reshape(-1), labels=np.arange(C))
    _close(M.confusion_matrix(s, t), ref)


@pytest.mark.parametrize("k", [1, 2, 4])
def test_topk_accuracy_matches_sklearn(k):
    s, t = _case("absent_true")
    ref = skm.top_k_accuracy_score(t, s, k=k, labels=np.arange(C))
    _close(M.accuracy(s, t, top_k=k), ref)
    _close(M.accuracy(ng.tensor(s.astype(np.float32)), ng.tensor(t), k), ref)


def test_accuracy_of_indices_and_binary_accuracy():
    s, t = _case("all")
    p = s.argmax(axis=1)
    _close(M.accuracy(p, t), skm.accuracy_score(t, p))
    r = np.random.default_rng(4)
    prob = r.random((30, 4))
    y = (r.random((30, 4)) < 0.5).astype(np.float32)
    ref = skm.accuracy_score(y.reshape(-1), (prob > 0.6).reshape(-1))
    _close(M.binary_accuracy(prob, y, threshold=0.6), ref)
    _close(M.accuracy(prob.reshape(-1), y.reshape(-1), threshold=0.6), ref)


def test_topk_ties_rank_the_lower_class_first():
    # scores with ties; reference: a stable descending sort, written here in NumPy
    r = np.random.default_rng(5)
    s = r.integers(0, 3, (200, C)).astype(np.float64)
    t = r.integers(0, C, 200)
    for k in (1, 2, 3):
        order = np.argsort(-s, axis=1, kind="stable")[:, :k]
        ref = np.mean([t[i] in order[i] for i in range(200)])
        _close(M.accuracy(s, t, top_k=k), ref)
    _close(M.accuracy(s, t), np.mean(s.argmax(axis=1) == t))


# ---- ranking ---------------------------------------------------------------------------------------
def _binary_scores(seed, ties):
    r = np.random.default_rng(seed)
    s = r.random(N)
    if ties:
        s = np.round(s * 8) / 8
    return s, (r.random(N) < 0.3).astype(np.int64)


@pytest.mark.parametrize("ties", [False, True])
def test_binary_roc_auc_and_ap_match_sklearn(ties):
    s, t = _binary_scores(6, ties)
    _close(M.roc_auc(s, t), skm.roc_auc_score(t, s))
    _close(M.average_precision(ng.tensor(s), ng.tensor(t)), skm.average_precision_score(t, s))


@pytest.mark.parametrize("avg", ["macro", "weighted", None, "micro"])
def test_one_vs_rest_roc_auc_and_ap_match_sklearn(avg):
    s, t = _case("all", seed=7)
    prob = _softmax(s)
    prob = np.round(prob * 20) / 20          # ties
    onehot = (t[:, None] == np.arange(C)).astype(np.int64)
    # one-vs-rest is scikit-learn's multilabel scoring of the one-hot targets
    _close(M.roc_auc(prob, t, C, avg), skm.roc_auc_score(onehot, prob, average=avg))
    _close(M.average_precision(prob, t, average=avg), skm.average_precision_score(onehot, prob, average=avg))


def test_multiclass_roc_auc_equals_sklearn_ovr():
    s, t = _case("all", seed=8)
    prob = _softmax(s)
    for avg in ("macro", "weighted"):
        _close(M.roc_auc(prob, t, average=avg), skm.roc_auc_score(t, prob, multi_class="ovr", average=avg))


def test_undefined_ranking_metrics_warn():
    s = np.linspace(0, 1, 10)
    with pytest.warns(M.UndefinedMetricWarning, match="only one class"):
        assert np.isnan(M.roc_auc(s, np.zeros(10, np.int64)))
    with pytest.warns(M.UndefinedMetricWarning, match="no positive"):
        assert M.average_precision(s, np.zeros(10, np.int64)) == 0.0
    with pytest.raises(ValueError, match=r"roc_auc\(\): scores holds nan at position 3"):
        M.roc_auc(np.where(np.arange(10) == 3, np.nan, s), np.arange(10) % 2)


# ---- regression ----------------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(50,), (50, 3)])
@pytest.mark.parametrize("multioutput", ["uniform_average", "raw_values"])
def test_regression_matches_sklearn(shape, multioutput):
    r = np.random.default_rng(9)
    y = r.standard_normal(shape)
    p = y + 0.5 * r.standard_normal(shape)
    for ours, ref in ((M.mean_squared_error, skm.mean_squared_error),
                      (M.mean_absolute_error, skm.mean_absolute_error), (M.r2_score, skm.r2_score)):
        # float32 inputs, computed in float64 (scikit-learn given the same values in float64)
        p32, y32 = p.astype(np.float32), y.astype(np.float32)
        _close(ours(ng.tensor(p32), y32, multioutput=multioutput),
               ref(y32.astype(np.float64), p32.astype(np.float64), multioutput=multioutput))


def test_r2_of_a_constant_target_follows_sklearn():
    y = np.ones(6)
    assert M.r2_score(y, y) == skm.r2_score(y, y) == 1.0
    assert M.r2_score(y + 0.1, y) == skm.r2_score(y, y + 0.1) == 0.0


# ---- input checks ------------------------------------------------------------------------------------
def test_bad_labels_name_function_argument_value_and_position():
    t = np.array([0, 1, 2, 7, 1])
    with pytest.raises(ValueError, match=r"f1_score\(\): target holds 7 at position 3, .*\[0, 5\)"):
        M.f1_score(np.zeros((5, 5)), t)
    with pytest.raises(ValueError, match=r"precision\(\): pred holds -1 at position 2"):
        M.precision(np.array([0, 1, -1, 0, 0]), np.zeros(5, np.int64), 3)
    with pytest.raises(ValueError, match=r"recall\(\): target holds 3 at position 1, .*\[0, 3\)"):
        M.recall(np.array([0, 1, 2]), np.array([0, 3, 2]), 3)
    with pytest.raises(ValueError, match=r"confusion_matrix\(\): target holds 1.5 at position 0"):
        M.confusion_matrix(np.array([0, 1]), np.array([1.5, 0.0]))
    with pytest.raises(ValueError, match=r"accuracy\(\): target holds 2 at position \(1, 0\)"):
        M.accuracy(np.zeros((2, 2, 2)), np.array([[0, 1], [2, 0]]))
    with pytest.raises(ValueError, match=r"binary_accuracy\(\): target holds 2 at position 1"):
        M.binary_accuracy(np.array([0.1, 0.9]), np.array([0, 2]))


def test_shape_and_argument_errors():
    with pytest.raises(ValueError, match=r"pred of shape \(4, 3\) and target of shape \(5,\)"):
        M.accuracy(np.zeros((4, 3)), np.zeros(5, np.int64))
    with pytest.raises(ValueError, match=r"pred of shape \(4,\) and target of shape \(5,\)"):
        M.f1_score(np.zeros(4, np.int64), np.zeros(5, np.int64))
    with pytest.raises(ValueError, match=r"accuracy\(\): top_k=4 is larger than the number of classes 3"):
        M.accuracy(np.zeros((2, 3)), np.zeros(2, np.int64), top_k=4)
    with pytest.raises(ValueError, match="top_k=2 needs"):
        M.accuracy(np.zeros(2, np.int64), np.zeros(2, np.int64), top_k=2)
    with pytest.raises(ValueError, match=r"num_classes=4 but pred of shape \(2, 3\)"):
        M.f1_score(np.zeros((2, 3)), np.zeros(2, np.int64), num_classes=4)
    with pytest.raises(ValueError, match="average must be one of"):
        M.precision(np.zeros(2, np.int64), np.zeros(2, np.int64), average="samples")
    with pytest.raises(ValueError, match="zero_division must be"):
        M.recall(np.zeros(2, np.int64), np.zeros(2, np.int64), zero_division=2)
    with pytest.raises(ValueError, match="average='binary' needs at most 2 classes"):
        M.f1_score(np.array([0, 1, 2]), np.array([0, 1, 2]), average="binary")
    with pytest.raises(ValueError, match="normalize must be"):
        M.confusion_matrix([0], [0], normalize="rows")
    with pytest.raises(TypeError, match="target must hold class indices"):
        M.accuracy(np.zeros((2, 2)), np.array(["a", "b"]))
