"""``evaluate`` / ``evaluate_many``: a model over a DataLoader or a list of batches, in eval mode
under ``no_grad``, every submodule's mode restored afterwards; the values against the
functional metrics (and scikit-learn) on the outputs of the whole data at once."""
import numpy as np
import pytest

import numbagrad as ng
from numbagrad import metrics as M
from numbagrad import nn
from numbagrad.data import DataLoader, TensorDataset

skm = pytest.importorskip("sklearn.metrics")


class _Probe(nn.Module):
    """Records the grad mode and its own training flag at each call."""

    def __init__(self):
        super().__init__()
        self.seen = []

    def forward(self, x):
        self.seen.append((ng.is_grad_enabled(), self.training))
        return x


def _model():
    ng.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Dropout(0.5), nn.Linear(16, 3), _Probe())


def _data(n=70):
    r = np.random.default_rng(0)
    x = r.standard_normal((n, 6)).astype(np.float32)
    y = r.integers(0, 3, n)
    return x, y


def test_evaluate_over_a_dataloader_equals_the_whole_data():
    model = _model()
    x, y = _data()
    loader = DataLoader(TensorDataset(ng.tensor(x), ng.tensor(y)), batch_size=16)
    res = M.evaluate(model, loader, {"accuracy": M.Accuracy(), "f1": M.F1Score(3, "weighted"),
                                     "loss": nn.CrossEntropyLoss(), "auroc": M.AUROC(3)})
    assert list(res) == ["accuracy", "f1", "loss", "auroc"]
    model.eval()
    with ng.no_grad():
        out = model(ng.tensor(x))
        loss = float(nn.CrossEntropyLoss()(out, ng.tensor(y)).item())
    s = out.numpy()
    assert res["accuracy"] == pytest.approx(skm.accuracy_score(y, s.argmax(1)), abs=1e-12)
    assert res["f1"] == pytest.approx(skm.f1_score(y, s.argmax(1), average="weighted"), abs=1e-12)
    assert res["loss"] == pytest.approx(loss, rel=1e-5)     # batch means weighted by batch size (last: 6)
    assert res["auroc"] == pytest.approx(M.roc_auc(s, y), abs=1e-12)


def test_modes_are_restored_and_grad_is_off():
    model = _model()
    model[2].eval()                      # a mixed state: dropout frozen, the rest training
    x, y = _data(20)
    M.evaluate(model, [(ng.tensor(x[:10]), ng.tensor(y[:10])), (ng.tensor(x[10:]), y[10:])], [M.Accuracy()])
    assert model[4].seen == [(False, False), (False, False)]
    assert [m.training for m in model] == [True, True, False, True, True] and model.training
    assert ng.is_grad_enabled()
    model.eval()
    res = M.evaluate(model, [(x, y)], M.Accuracy())
    assert not model.training and list(res) == ["accuracy"]


def test_modes_are_restored_after_an_error():
    model = _model()
    with pytest.raises(ValueError, match=r"batch 0 of data is not an \(x, y\) pair"):
        M.evaluate(model, [(1, 2, 3)], {"acc": M.Accuracy()})
    assert model.training and all(m.training for m in model)
    with pytest.raises(ValueError, match=r"Accuracy.update\(\): target holds 5"):
        M.evaluate(model, [(ng.tensor(_data(4)[0]), np.array([0, 1, 5, 0]))], {"acc": M.Accuracy()})
    assert model.training and all(m.training for m in model)


def test_evaluate_many_scores_each_split_with_fresh_metrics():
    model = _model()
    x, y = _data()
    acc = M.Accuracy()
    res = M.evaluate_many(model, {"a": [(ng.tensor(x[:30]), y[:30])], "b": [(ng.tensor(x[30:]), y[30:])]},
                          {"acc": acc})
    model.eval()
    with ng.no_grad():
        pred = model(ng.tensor(x)).numpy().argmax(1)
    assert res["a"]["acc"] == pytest.approx(np.mean(pred[:30] == y[:30]))
    assert res["b"]["acc"] == pytest.approx(np.mean(pred[30:] == y[30:]))
    assert int(acc.total) == 0           # the metric passed in was copied, not fed


def test_bad_metrics_argument():
    with pytest.raises(TypeError, match="metrics must be a dict"):
        M.evaluate(_model(), [], "accuracy")
    with pytest.raises(TypeError, match="must hold Metric objects"):
        M.evaluate(_model(), [], [M.accuracy])
