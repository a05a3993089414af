"""``numbagrad.train`` callbacks: EarlyStopping against scripted values, ModelCheckpoint's
files, CSVLogger and TensorBoardLogger against History (TensorBoard's own
EventAccumulator reads the event files), TerminateOnNaN, GradientMonitor against NumPy,
ProgressBar, LambdaCallback, and the callbacks' state through a checkpoint."""
import csv
import io
import math
import os

import numpy as np
import pytest

import _trainer_helpers as H
import numbagrad as ng
from numbagrad import optim
from numbagrad.data import DataLoader
from numbagrad.nn import functional as F
from numbagrad.train import (CSVLogger, EarlyStopping, GradientMonitor, LambdaCallback, ModelCheckpoint,
                             ProgressBar, TensorBoardLogger, TerminateOnNaN, Trainer)


def _scripted(values, *callbacks, max_epochs=None, model=None, **kw):
    """A trainer whose epoch logs have ``score`` = values[epoch - 1]."""
    model = model or H.mlp(0)
    snaps = {}

    def start(t, epoch):
        t.record("score", values[epoch - 1])

    def end(t, epoch, logs):
        snaps[epoch] = H.params(t.model)
    tr = Trainer(model, optim.SGD(model.parameters(), lr=0.1), F.cross_entropy,
                 max_epochs=max_epochs or len(values), progress=False,
                 callbacks=[LambdaCallback(on_epoch_start=start, on_epoch_end=end), *callbacks], **kw)
    return tr, snaps


def _data(n=64):
    return DataLoader(H.dataset(n), batch_size=32, shuffle=True)


def test_early_stopping_patience_and_restore_best_weights():
    es = EarlyStopping("score", mode="min", patience=2, restore_best_weights=True)
    tr, snaps = _scripted([3.0, 2.0, 2.5, 2.4, 2.6, 1.0], es)
    hist = tr.fit(_data())
    # best at epoch 2; epochs 3 and 4 do not improve: stop after epoch 4
    assert hist.epoch == [1, 2, 3, 4] and es.stopped_epoch == 4 and es.best_epoch == 2 and es.best == 2.0
    assert "did not improve" in tr.stop_reason
    H.assert_params_equal(H.params(tr.model), snaps[2])


def test_early_stopping_min_delta_max_mode_and_no_restore():
    es = EarlyStopping("score", mode="max", patience=1, min_delta=0.1)
    tr, snaps = _scripted([1.0, 1.05, 1.2], es)
    hist = tr.fit(_data())
    assert hist.epoch == [1, 2] and es.best == 1.0             # 1.05 is within min_delta
    H.assert_params_equal(H.params(tr.model), snaps[2])         # weights not restored
    es = EarlyStopping("score", mode="auto", patience=3)       # 'score' is minimised in auto mode
    tr, _ = _scripted([1.0, 0.9, 0.8], es)
    assert tr.fit(_data()).epoch == [1, 2, 3] and es.stopped_epoch == 0
    es = EarlyStopping("val_loss")
    tr, _ = _scripted([1.0], es)
    with pytest.raises(KeyError, match="monitor='val_loss' is not in this epoch's logs"):
        tr.fit(_data())
    with pytest.raises(ValueError, match="patience must be an int >= 0, got -1"):
        EarlyStopping(patience=-1)


def test_model_checkpoint_keep_last_and_save_best_only(tmp_path):
    mc = ModelCheckpoint(tmp_path / "all", keep_last=2)
    tr, _ = _scripted([3.0, 1.0, 2.0, 0.5], mc)
    tr.fit(_data())                                            # 2 steps an epoch
    assert sorted(os.listdir(tmp_path / "all")) == ["epoch=3-step=6.h5", "epoch=4-step=8.h5", "last.h5"]
    assert mc.last_model_path.endswith("epoch=4-step=8.h5")
    best = ModelCheckpoint(tmp_path / "best", monitor="score", mode="min", save_best_only=True)
    tr, snaps = _scripted([3.0, 1.0, 2.0, 1.5], best)
    tr.fit(_data())
    assert sorted(os.listdir(tmp_path / "best")) == ["epoch=1-step=2.h5", "epoch=2-step=4.h5", "last.h5"]
    assert best.best == 1.0 and best.best_model_path.endswith("epoch=2-step=4.h5")
    state = ng.load(best.best_model_path)
    saved = {k: v.numpy() for k, v in state["model"].items()}
    H.assert_params_equal(saved, snaps[2])
    assert state["callbacks"]["ModelCheckpoint"]["best"] == 1.0
    # no stray temporary files: every write was an atomic rename
    assert not [f for f in os.listdir(tmp_path / "best") if ".tmp-" in f]
    with pytest.raises(ValueError, match="save_best_only=True needs monitor="):
        ModelCheckpoint(tmp_path, save_best_only=True)


def test_csv_logger_matches_history(tmp_path):
    path = tmp_path / "log.csv"
    tr, _ = _scripted([3.0, 1.0, 2.0], CSVLogger(path), metrics=["accuracy"])
    hist = tr.fit(_data(), val_data=_data())
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    assert [int(r["epoch"]) for r in rows] == [1, 2, 3]
    assert set(rows[0]) == {"epoch", "loss", "accuracy", "val_loss", "val_accuracy", "score"}
    for k in hist.keys():
        assert [float(r[k]) for r in rows] == hist[k]
    assert [float(r["score"]) for r in rows] == [3.0, 1.0, 2.0]


def test_tensorboard_logger_event_files_load_in_tensorboard(tmp_path):
    pytest.importorskip("tensorboardX")
    ea_mod = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
    tr, _ = _scripted([3.0, 1.0], TensorBoardLogger(tmp_path), metrics=["accuracy"])
    hist = tr.fit(_data(), val_data=_data())
    acc = ea_mod.EventAccumulator(str(tmp_path))
    acc.Reload()
    tags = set(acc.Tags()["scalars"])
    assert {"epoch/loss", "epoch/val_loss", "epoch/accuracy", "epoch/val_accuracy", "epoch/score",
            "step/loss"} <= tags
    for k in hist.keys():
        events = acc.Scalars(f"epoch/{k}")
        assert [e.step for e in events] == hist.epoch
        np.testing.assert_array_equal([e.value for e in events], np.float32(hist[k]))
    steps, values = hist.steps("loss")
    events = acc.Scalars("step/loss")
    assert [e.step for e in events] == steps.tolist()
    np.testing.assert_array_equal([e.value for e in events], values.astype(np.float32))


def test_summary_writer_namespace_is_tensorboardx():
    tbx = pytest.importorskip("tensorboardX")
    from numbagrad.utils.tensorboard import SummaryWriter
    assert SummaryWriter is tbx.SummaryWriter


def test_terminate_on_nan_names_epoch_step_and_loss():
    model = H.mlp(0)
    calls = [0]

    def loss_fn(out, y):
        calls[0] += 1
        loss = F.cross_entropy(out, y)
        return loss * float("nan") if calls[0] == 4 else loss
    snaps = {}
    tr = Trainer(model, optim.SGD(model.parameters(), lr=0.1), loss_fn, max_epochs=5, progress=False,
                 callbacks=[TerminateOnNaN(), EarlyStopping("loss", restore_best_weights=True),
                            LambdaCallback(on_epoch_end=lambda t, e, logs: snaps.update({e: H.params(t.model)}))])
    with pytest.warns(RuntimeWarning, match=r"loss is nan at epoch 2, batch 1, step 4; training stopped"):
        hist = tr.fit(_data())
    assert hist.epoch == [1] and "loss is nan" in hist.stop_reason
    # the NaN step wrote NaN into the weights; the best state (epoch 1) is what fit leaves
    H.assert_params_equal(H.params(model), snaps[1])


def test_gradient_monitor_norms_match_numpy():
    grads = []
    model = H.mlp(0)

    def grab(t, batch, i, logs):
        grads.append({n: p.grad.numpy().astype(np.float64) for n, p in t.model.named_parameters()})
    tr = Trainer(model, optim.SGD(model.parameters(), lr=0.1), F.cross_entropy, max_epochs=2, progress=False,
                 callbacks=[GradientMonitor(), LambdaCallback(on_batch_end=grab)])
    hist = tr.fit(_data(96))
    names = [n for n, _ in model.named_parameters()]
    for n in names:
        steps, values = hist.steps(f"grad_norm/{n}")
        assert steps.tolist() == list(range(1, 7))
        np.testing.assert_allclose(values, [np.linalg.norm(g[n].ravel()) for g in grads], rtol=1e-12)
    total = [np.sqrt(sum(np.linalg.norm(g[n].ravel()) ** 2 for n in names)) for g in grads]
    np.testing.assert_allclose(hist.steps("grad_norm/total")[1], total, rtol=1e-12)
    assert hist["grad_norm/total"][0] == pytest.approx(np.mean(total[:3]), rel=1e-12)


def test_progress_bar_on_off_and_live_loss():
    buf = io.StringIO()
    tr, _ = _scripted([1.0, 2.0], ProgressBar(file=buf, disable=False, leave=True))
    tr.fit(_data())
    text = buf.getvalue()
    assert "epoch 1/2" in text and "epoch 2/2" in text and "loss=" in text
    quiet = io.StringIO()                   # not a terminal: off by default
    tr, _ = _scripted([1.0], ProgressBar(file=quiet))
    tr.fit(_data())
    assert quiet.getvalue() == ""
    # progress=None adds a bar only when stderr is a terminal (not under pytest's capture)
    model = H.mlp(0)
    opt = optim.SGD(model.parameters(), lr=0.1)
    assert not any(isinstance(c, ProgressBar) for c in Trainer(model, opt, F.cross_entropy).callbacks)
    assert any(isinstance(c, ProgressBar) for c in Trainer(model, opt, F.cross_entropy, progress=True).callbacks)


def test_lambda_callback_hook_order_and_errors():
    order = []
    hooks = {h: (lambda h: lambda t, *a: order.append(h))(h) for h in
             ("on_fit_start", "on_epoch_start", "on_batch_start", "on_batch_end", "on_validation_end",
              "on_epoch_end", "on_fit_end")}
    model = H.mlp(0)
    tr = Trainer(model, optim.SGD(model.parameters(), lr=0.1), F.cross_entropy, progress=False,
                 callbacks=[LambdaCallback(**hooks)])
    tr.fit(_data(), val_data=_data())
    assert order == ["on_fit_start", "on_epoch_start", "on_batch_start", "on_batch_end", "on_batch_start",
                     "on_batch_end", "on_validation_end", "on_epoch_end", "on_fit_end"]
    seen = []
    tr = Trainer(model, optim.SGD(model.parameters(), lr=0.1), F.cross_entropy, progress=False,
                 callbacks=[LambdaCallback(on_exception=lambda t, e: seen.append(type(e).__name__),
                                           on_batch_end=lambda t, b, i, logs: 1 / 0)])
    with pytest.raises(ZeroDivisionError):
        tr.fit(_data())
    assert seen == ["ZeroDivisionError"]
    with pytest.raises(TypeError, match="unknown hook 'on_step'"):
        LambdaCallback(on_step=print)


def test_callback_states_travel_through_a_checkpoint(tmp_path):
    es = EarlyStopping("score", patience=5, restore_best_weights=True)
    tr, _ = _scripted([3.0, 1.0, 2.0], es, ModelCheckpoint(tmp_path))
    tr.fit(_data())
    es2 = EarlyStopping("score", patience=5, restore_best_weights=True)
    tr2, _ = _scripted([3.0, 1.0, 2.0], es2, ModelCheckpoint(tmp_path / "b"), model=H.mlp(4))
    tr2.load(str(tmp_path / "last.h5"))
    assert (es2.best, es2.best_epoch, es2.wait) == (1.0, 2, 1)
    H.assert_params_equal({k: v for k, v in es2.best_weights.items()}, es.best_weights)
    assert tr2.epoch == 3 and tr2.global_step == 6 and math.isclose(tr2.history["score"][1], 1.0)
