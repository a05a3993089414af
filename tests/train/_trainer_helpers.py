"""Shared pieces of the ``numbagrad.train`` tests: a digits subset, a tiny MLP with
dropout, and comparisons of histories and parameters bit for bit."""
import numpy as np

import numbagrad as ng
from numbagrad import nn
from numbagrad.data import TensorDataset, load_digits

_DIGITS = None


def digits(n=192):
    """The first ``n`` digits: (X float32 (n, 64) scaled to [0, 1], y int64 (n,))."""
    global _DIGITS
    if _DIGITS is None:
        X, y = load_digits()
        _DIGITS = (X.numpy() / 16.0, y.numpy())
    X, y = _DIGITS
    return ng.tensor(X[:n].astype(np.float32)), ng.tensor(y[:n].copy())


def dataset(n=192):
    return TensorDataset(*digits(n))


def mlp(seed=0, dropout=0.2, hidden=16, dtype=None):
    ng.manual_seed(seed)
    layers = [nn.Linear(64, hidden), nn.ReLU()]
    if dropout:
        layers.append(nn.Dropout(dropout))
    layers.append(nn.Linear(hidden, 10))
    model = nn.Sequential(*layers)
    return model.double() if dtype == "float64" else model


def params(model):
    return {k: v.numpy().copy() for k, v in model.state_dict().items()}


def assert_params_equal(a, b):
    assert a.keys() == b.keys()
    for k in a:
        assert a[k].dtype == b[k].dtype and np.array_equal(a[k], b[k]), k


def assert_history_equal(h1, h2):
    d1, d2 = h1.to_dict(), h2.to_dict()
    assert d1["epoch"] == d2["epoch"]
    assert d1["history"].keys() == d2["history"].keys()
    for k in d1["history"]:
        assert np.array_equal(d1["history"][k], d2["history"][k], equal_nan=True), k
    assert d1["steps"].keys() == d2["steps"].keys()
    for k in d1["steps"]:
        assert d1["steps"][k]["step"] == d2["steps"][k]["step"], k
        assert np.array_equal(d1["steps"][k]["value"], d2["steps"][k]["value"], equal_nan=True), k


def resume_setup(ckpt_dir, workers=0, model_seed=0, max_epochs=3, extra=()):
    """The resume tests' run: shuffled digits (6 batches an epoch, workers optional),
    dropout, Adam, OneCycleLR per step, accuracy, EarlyStopping and LearningRateMonitor
    (callbacks with state), a ModelCheckpoint every 4 steps and every epoch."""
    from numbagrad import optim
    from numbagrad.data import DataLoader
    from numbagrad.nn import functional as F
    from numbagrad.optim import lr_scheduler as L
    from numbagrad.train import EarlyStopping, LearningRateMonitor, ModelCheckpoint, Trainer
    model = mlp(model_seed)
    opt = optim.Adam(model.parameters(), lr=1e-2)
    kw = dict(num_workers=workers, persistent_workers=True) if workers else {}
    loader = DataLoader(dataset(), batch_size=32, shuffle=True, **kw)
    val = DataLoader(TensorDataset(*digits(64)), batch_size=40)
    sched = L.OneCycleLR(opt, 0.05, total_steps=max_epochs * len(loader))
    cbs = list(extra) + [ModelCheckpoint(ckpt_dir, every_n_steps=4), LearningRateMonitor(),
           EarlyStopping("val_loss", patience=10, restore_best_weights=True)]
    trainer = Trainer(model, opt, F.cross_entropy, scheduler=sched, scheduler_interval="step",
                      metrics=["accuracy"], max_epochs=max_epochs, seed=1, callbacks=cbs, progress=False)
    return trainer, loader, val
