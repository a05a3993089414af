"""Stateful metrics: accumulated over batches (some missing classes, uneven sizes) they equal
the one-shot functional value and scikit-learn's; ``merge`` / ``state_arrays`` / ``_merge``
combine split data exactly; ``reset``; ``MetricTracker``."""
import copy
import warnings

import numpy as np
import pytest

import numbagrad as ng
from numbagrad import metrics as M

skm = pytest.importorskip("sklearn.metrics")

C = 4
N = 203
CUTS = [0, 7, 50, 51, 120, N]          # uneven batches, one of a single sample


def _data(seed=0):
    r = np.random.default_rng(seed)
    s = r.standard_normal((N, C)).astype(np.float32)
    t = r.integers(0, C, N)
    t[:50] = r.integers(0, 2, 50)       # the first batches lack classes 2 and 3
    return s, t


def _batches(s, t):
    return [(s[a:b], t[a:b]) for a, b in zip(CUTS[:-1], CUTS[1:])]


def _close(a, b):
    np.testing.assert_allclose(np.asarray(a, np.float64), np.asarray(b, np.float64), rtol=1e-12, atol=1e-12)


def _fed(metric, batches, tensors=False):
    for x, y in batches:
        metric.update(ng.tensor(x) if tensors else x, ng.tensor(y) if tensors else y)
    return metric


@pytest.mark.parametrize("average", ["macro", "micro", "weighted", None])
def test_prf_over_batches_equals_one_shot_and_sklearn(average):
    s, t = _data()
    p = s.argmax(axis=1)
    kw = dict(labels=np.arange(C), average=average)
    for cls, fn, ref in ((M.Precision, M.precision, skm.precision_score), (M.Recall, M.recall, skm.recall_score),
                         (M.F1Score, M.f1_score, skm.f1_score)):
        m = _fed(cls(C, average), _batches(s, t), tensors=cls is M.Recall)
        _close(m.compute(), fn(s, t, C, average))
        _close(m.compute(), ref(t, p, **kw))
    m = _fed(M.FBetaScore(C, beta=0.5, average=average), _batches(s, t))
    _close(m.compute(), skm.fbeta_score(t, p, beta=0.5, **kw))


def test_batch_mean_differs_but_accumulated_value_does_not():
    # the point of counting: a mean of batch F1 scores is not the F1 over the data
    s, t = _data()
    batch_mean = np.mean([M.f1_score(x, y, C, zero_division=0) for x, y in _batches(s, t)])
    m = _fed(M.F1Score(C, zero_division=0), _batches(s, t))
    assert abs(batch_mean - m.compute()) > 1e-3
    _close(m.compute(), skm.f1_score(t, s.argmax(1), average="macro", zero_division=0))


@pytest.mark.parametrize("top_k", [1, 2])
def test_accuracy_over_batches(top_k):
    s, t = _data(1)
    m = _fed(M.Accuracy(top_k=top_k), _batches(s, t), tensors=True)
    _close(m.compute(), skm.top_k_accuracy_score(t, s, k=top_k, labels=np.arange(C)))
    m.reset()
    with pytest.warns(M.UndefinedMetricWarning):
        assert m.compute() == 0.0


def test_confusion_matrix_and_auroc_over_batches():
    s, t = _data(2)
    for norm in (None, "true"):
        m = _fed(M.ConfusionMatrix(C, normalize=norm), _batches(s, t))
        _close(m.compute(), skm.confusion_matrix(t, s.argmax(1), labels=np.arange(C), normalize=norm))
    prob = np.exp(s) / np.exp(s).sum(axis=1, keepdims=True)
    for avg in ("macro", "weighted"):
        m = _fed(M.AUROC(C, average=avg), _batches(prob, t))
        _close(m.compute(), skm.roc_auc_score(t, prob, multi_class="ovr", average=avg))
    yb = (t == 1).astype(np.int64)
    m = _fed(M.AUROC(), [(prob[a:b, 1], yb[a:b]) for a, b in zip(CUTS[:-1], CUTS[1:])])
    _close(m.compute(), skm.roc_auc_score(yb, prob[:, 1]))
    with pytest.raises(ValueError, match="AUROC.update"):
        m.update(prob[:3], t[:3])


@pytest.mark.parametrize("make", [lambda: M.F1Score(C, None), lambda: M.Accuracy(2), lambda: M.ConfusionMatrix(C),
                                  lambda: M.AUROC(C), lambda: M.Mean()])
def test_merge_of_split_data_equals_one_metric(make):
    s, t = _data(3)
    prob = np.exp(s) / np.exp(s).sum(axis=1, keepdims=True)
    bs = _batches(prob, t)

    def feed(m, part):
        for x, y in part:
            m.update(x, y) if not isinstance(m, M.Mean) else m.update(x.max(axis=1), y)
        return m
    whole = feed(make(), bs).compute()
    a, b = feed(make(), bs[:2]), feed(make(), bs[2:])
    _close(copy.deepcopy(a).merge(b).compute(), whole)
    # the all-reduce path: state arrays summed / concatenated outside, then loaded
    sa, sb = a.state_arrays(), b.state_arrays()
    reduced = {k: (sa[k] + sb[k] if k in a._sum_states else np.concatenate([sa[k], sb[k]])) for k in sa}
    _close(make().load_state_arrays(reduced).compute(), whole)
    c = make()
    c._merge(sa)
    c._merge(sb)
    _close(c.compute(), whole)
    a.reset()
    _close(a.merge(feed(make(), bs)).compute(), whole)


def test_merge_refuses_other_settings():
    with pytest.raises(ValueError, match="settings differ"):
        M.F1Score(3).merge(M.F1Score(3, "micro"))
    with pytest.raises(TypeError, match="cannot merge a Recall"):
        M.Precision(3).merge(M.Recall(3))
    with pytest.raises(ValueError, match="num_classes must be a positive integer"):
        M.Precision(None)


def test_state_arrays_are_documented_sets():
    assert set(M.F1Score(3).state_arrays()) == {"confmat"}
    assert set(M.Accuracy().state_arrays()) == {"correct", "total"}
    assert set(M.Mean().state_arrays()) == {"total", "weight"}
    assert set(M.AUROC().state_arrays()) == {"scores", "target"}


def test_mean_and_loss_tracker_weight_by_batch_size():
    r = np.random.default_rng(4)
    losses = r.random(N)
    lt, mean = M.LossTracker(), M.Mean()
    for a, b in zip(CUTS[:-1], CUTS[1:]):
        x = ng.tensor(losses[a:b], requires_grad=True)
        lt.update(x.mean(), batch_size=b - a)
        mean.update(losses[a:b])
    _close(lt.compute(), losses.mean())
    _close(mean.compute(), losses.mean())
    w = r.random(N)
    m = M.Mean()
    m.update(losses, w)
    _close(m.compute(), np.average(losses, weights=w))
    m.reset()
    with pytest.warns(M.UndefinedMetricWarning):
        assert np.isnan(m.compute())
    with pytest.raises(ValueError, match="loss must be a scalar"):
        lt.update(np.ones(3))


def test_metric_tracker_summary_and_history():
    tr = M.MetricTracker()
    tr.observe("accuracy", 0.9)
    tr.observe("loss", ng.tensor(0.5), weight=3)
    tr.observe("loss", 0.1, weight=1)
    tr.observe("accuracy", 0.93)
    assert tr.summary() == f"accuracy: {0.915:.4f} loss: {(1.5 + 0.1) / 4:.4f}"
    tr.reset()
    acc = M.Accuracy()
    acc.update(np.array([1, 0]), np.array([1, 1]))
    tr.observe("accuracy", acc)
    tr.reset()
    tr.reset()                                  # nothing observed: no epoch added
    assert tr.history["accuracy"] == pytest.approx([0.915, 0.5])
    assert tr.history["loss"][0] == pytest.approx(0.4) and np.isnan(tr.history["loss"][1])
    with pytest.raises(TypeError, match="name must be"):
        tr.observe(3, 1.0)


def test_update_checks_labels_like_the_functional_form():
    m = M.F1Score(3)
    with pytest.raises(ValueError, match=r"F1Score.update\(\): target holds 3 at position 2"):
        m.update(np.zeros((3, 3)), np.array([0, 1, 3]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert np.all(m.confmat == 0)         # nothing counted from the bad batch
