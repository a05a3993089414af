"""``numbagrad.train.Trainer``: the loop against hand-written loops (bit for bit where the
arithmetic is the same, float64 tolerances where it is rearranged), seeded runs, exact
resume (mid-epoch, between epochs, with workers, in a fresh process), evaluate/predict,
accumulation, clipping, the step-closure form, ReduceLROnPlateau, StopTraining, Ctrl-C,
and observation."""
import os
import signal
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import _trainer_helpers as H
import numbagrad as ng
from numbagrad import nn, optim
from numbagrad.data import DataLoader
from numbagrad.nn import functional as F
from numbagrad.optim import lr_scheduler as L
from numbagrad.train import (EarlyStopping, LambdaCallback, LearningRateMonitor, ModelCheckpoint, StopTraining, Trainer)

HERE = os.path.dirname(os.path.abspath(__file__))


def _loader(n=192, bs=32, shuffle=True, **kw):
    return DataLoader(H.dataset(n), batch_size=bs, shuffle=shuffle, **kw)


def test_fit_equals_the_hand_written_loop_bit_for_bit():
    # the main job's loop (zero_grad, backward, step; loss weighted by batch size)
    model = H.mlp(3)
    opt = optim.Adam(model.parameters(), lr=1e-2)
    ng.manual_seed(11)
    loader = _loader(100, 16)        # a short last batch: the mean is sample-weighted
    losses = []
    for _ in range(2):
        model.train()
        total, count = 0.0, 0
        for xb, yb in loader:
            loss = F.cross_entropy(model(xb), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item() * len(yb)
            count += len(yb)
        losses.append(total / count)
    expected = H.params(model)

    model = H.mlp(3)
    tr = Trainer(model, optim.Adam(model.parameters(), lr=1e-2), F.cross_entropy, max_epochs=2, seed=11,
                 progress=False)
    hist = tr.fit(_loader(100, 16))
    H.assert_params_equal(H.params(model), expected)
    assert hist["loss"] == losses
    assert hist.epoch == [1, 2] and tr.global_step == 14 and len(hist.steps("loss")[0]) == 14
    assert hist.steps("loss")[0].tolist() == list(range(1, 15))


def test_two_seeded_runs_are_bit_identical():
    def run(seed, scramble):
        model = H.mlp(0)
        opt = optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        ng.manual_seed(scramble)         # scrambled differently each run: the Trainer's seed decides
        np.random.seed(scramble)
        tr = Trainer(model, opt, nn.CrossEntropyLoss(), max_epochs=2, seed=seed, metrics=["accuracy"],
                     callbacks=[LearningRateMonitor()], progress=False)
        return tr.fit(_loader(), val_data=_loader(64, 40, shuffle=False)), H.params(model)
    (h1, p1), (h2, p2) = run(7, 100), run(7, 200)
    H.assert_history_equal(h1, h2)
    H.assert_params_equal(p1, p2)
    assert set(h1.keys()) == {"loss", "accuracy", "val_loss", "val_accuracy", "lr"}
    h3, _ = run(8, 100)                  # another seed: another shuffle and dropout
    assert h3["loss"] != h1["loss"]


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    """The resume tests' reference run, with its checkpoints."""
    d = tmp_path_factory.mktemp("ckpt")
    tr, loader, val = H.resume_setup(str(d))
    hist = tr.fit(loader, val)
    return d, hist, H.params(tr.model), tr


def test_checkpoint_files(uninterrupted):
    d, hist, _, tr = uninterrupted
    names = sorted(os.listdir(d))
    # every 4 optimizer steps and every epoch end (6 batches an epoch), plus last.h5
    assert names == sorted(["epoch=1-step=4.h5", "epoch=1-step=6.h5", "epoch=2-step=8.h5", "epoch=2-step=12.h5",
                            "epoch=3-step=16.h5", "epoch=3-step=18.h5", "last.h5"])
    state = ng.load(str(d / "epoch=2-step=8.h5"))
    assert state["epoch"] == 2 and state["step"] == 8 and state["batch_in_epoch"] == 2
    assert state["epoch_in_progress"] is True and state["loader"]["num_yielded"] == 2
    assert ng.load(str(d / "last.h5"))["step"] == 18


@pytest.mark.parametrize("name", ["epoch=2-step=8.h5", "epoch=1-step=6.h5", "epoch=3-step=16.h5"])
def test_resume_in_process_is_bit_identical(uninterrupted, tmp_path, name):
    d, hist, final, ref = uninterrupted
    tr, loader, val = H.resume_setup(str(tmp_path), model_seed=5)   # other weights, overwritten by the load
    ng.manual_seed(4321)                                             # and a scrambled generator
    resumed = tr.fit(loader, val, resume_from=str(d / name))
    H.assert_history_equal(resumed, hist)
    H.assert_params_equal(H.params(tr.model), final)
    es_ref, es = [[c for c in t.callbacks if isinstance(c, EarlyStopping)][0] for t in (ref, tr)]
    assert (es.best, es.best_epoch, es.wait) == (es_ref.best, es_ref.best_epoch, es_ref.wait)


def test_resume_with_workers_is_bit_identical(tmp_path):
    # the same run with a worker process: the reference and the resumed run, mid-epoch
    ref, loader, val = H.resume_setup(str(tmp_path / "a"), workers=1, max_epochs=2)
    hist = ref.fit(loader, val)
    tr, loader2, val2 = H.resume_setup(str(tmp_path / "b"), workers=1, model_seed=5, max_epochs=2)
    resumed = tr.fit(loader2, val2, resume_from=str(tmp_path / "a" / "epoch=2-step=8.h5"))
    H.assert_history_equal(resumed, hist)
    H.assert_params_equal(H.params(tr.model), H.params(ref.model))
    loader._shutdown_workers()
    loader2._shutdown_workers()


def test_resume_in_a_fresh_process_is_bit_identical(uninterrupted, tmp_path):
    d, hist, final, _ = uninterrupted
    out = tmp_path / "out.h5"
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {HERE!r})
        import numbagrad as ng
        import _trainer_helpers as H
        tr, loader, val = H.resume_setup({str(tmp_path)!r}, model_seed=9)
        hist = tr.fit(loader, val, resume_from={str(d / "epoch=2-step=8.h5")!r})
        ng.save({{"params": H.params(tr.model), "history": hist.state_dict()}}, {str(out)!r})
    """)
    subprocess.run([sys.executable, "-c", script], check=True, timeout=120)
    got = ng.load(str(out))
    H.assert_params_equal(got["params"], final)
    resumed = ng.train.History()
    resumed.load_state_dict(got["history"])
    H.assert_history_equal(resumed, hist)


def test_resume_mid_epoch_needs_a_resumable_loader(uninterrupted, tmp_path):
    d, _, _, _ = uninterrupted
    tr, loader, val = H.resume_setup(str(tmp_path))
    batches = list(loader)
    with pytest.raises(ValueError, match=r"middle of epoch 2 \(after 2 batches\).*list.*no load_state_dict"):
        tr.fit(batches, resume_from=str(d / "epoch=2-step=8.h5"))
    # between epochs a plain iterable works
    tr, loader, val = H.resume_setup(str(tmp_path))
    h = tr.fit(batches, val, resume_from=str(d / "epoch=1-step=6.h5"))
    assert h.epoch == [1, 2, 3]
    with pytest.raises(ValueError, match="not a Trainer checkpoint"):
        ng.save({"x": 1}, str(tmp_path / "x.h5"))
        tr.load(str(tmp_path / "x.h5"))


def test_keyboard_interrupt_writes_a_resumable_checkpoint(uninterrupted, tmp_path):
    d, hist, final, _ = uninterrupted

    def stop(trainer, batch, i, logs):
        if trainer.epoch == 2 and i == 3:
            raise KeyboardInterrupt
    tr, loader, val = H.resume_setup(str(tmp_path), extra=[LambdaCallback(on_batch_end=stop)])
    with pytest.raises(KeyboardInterrupt):
        tr.fit(loader, val)
    state = ng.load(str(tmp_path / "last.h5"))
    assert (state["epoch"], state["batch_in_epoch"], state["step"]) == (2, 4, 10)
    tr, loader, val = H.resume_setup(str(tmp_path / "b"), model_seed=5)
    H.assert_history_equal(tr.fit(loader, val, resume_from=str(tmp_path / "last.h5")), hist)
    H.assert_params_equal(H.params(tr.model), final)


@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(),
                    reason="signal handlers are installed from the main thread only")
def test_ctrl_c_finishes_the_batch_then_checkpoints_and_reraises(tmp_path):
    model = H.mlp(0)
    sent = []
    before = signal.getsignal(signal.SIGINT)

    def sigint(trainer, batch, i):
        if trainer.global_step == 3 and not sent:
            sent.append(i)
            # only to the Trainer's handler (never to pytest's own): it defers it to the end of this batch
            assert signal.getsignal(signal.SIGINT) is not before
            os.kill(os.getpid(), signal.SIGINT)
    tr = Trainer(model, optim.SGD(model.parameters(), lr=0.1), F.cross_entropy, max_epochs=2, progress=False,
                 callbacks=[LambdaCallback(on_batch_start=sigint), ModelCheckpoint(tmp_path, every_n_epochs=0)])
    with pytest.raises(KeyboardInterrupt):
        tr.fit(_loader())
    assert signal.getsignal(signal.SIGINT) is before
    state = ng.load(str(tmp_path / "last.h5"))
    assert state["step"] == 4 and state["batch_in_epoch"] == 4      # the interrupted batch finished


def test_grad_accumulation_equals_one_large_batch():
    X, y = H.digits(64)
    X = X.double()
    batches = [(X[i:i + 16], y[i:i + 16]) for i in range(0, 64, 16)]
    model = H.mlp(2, dropout=0, dtype="float64")
    ref = H.mlp(2, dropout=0, dtype="float64")
    F.cross_entropy(ref(X), y).backward()
    expected = {n: p.grad.numpy().copy() for n, p in ref.named_parameters()}
    grads = []

    def grab(trainer, batch, i, logs):
        if trainer.optimizer_stepped:
            grads.append({n: p.grad.numpy().copy() for n, p in trainer.model.named_parameters()})
    before = H.params(model)
    tr = Trainer(model, optim.SGD(model.parameters(), lr=0.5), F.cross_entropy, grad_accum_steps=4,
                 callbacks=[LambdaCallback(on_batch_end=grab)], progress=False)
    tr.fit(batches)
    assert tr.global_step == 1 and len(grads) == 1
    for n in expected:
        np.testing.assert_allclose(grads[0][n], expected[n], rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(H.params(model)[n], before[n] - 0.5 * expected[n], rtol=1e-12, atol=1e-15)
    # 5 batches with k=2: steps after batches 2, 4 and the epoch's short last window
    tr = Trainer(model, optim.SGD(model.parameters(), lr=0.5), F.cross_entropy, grad_accum_steps=2,
                 progress=False)
    tr.fit(batches + batches[:1])
    assert tr.global_step == 3


def test_clip_grad_norm_scales_the_gradient_to_the_bound():
    X, y = H.digits(32)
    X = X.double()
    model = H.mlp(4, dropout=0, dtype="float64")
    ref = H.mlp(4, dropout=0, dtype="float64")
    F.cross_entropy(ref(X), y).backward()
    g = {n: p.grad.numpy() for n, p in ref.named_parameters()}
    norm = np.sqrt(sum(float(np.sum(v * v)) for v in g.values()))
    assert norm > 0.05
    seen = {}
    tr = Trainer(model, optim.SGD(model.parameters(), lr=0.1), F.cross_entropy, clip_grad_norm=0.05,
                 progress=False, callbacks=[LambdaCallback(on_batch_end=lambda t, b, i, logs: seen.update(
                     {n: p.grad.numpy().copy() for n, p in t.model.named_parameters()}))])
    tr.fit([(X, y)])
    for n in g:
        np.testing.assert_allclose(seen[n], g[n] * (0.05 / (norm + 1e-6)), rtol=1e-10, atol=1e-15)  # torch: + 1e-6


def test_autocast_and_grad_scaler_equal_the_hand_written_amp_loop():
    def hand():
        model = H.mlp(1)
        opt = optim.Adam(model.parameters(), lr=1e-2)
        scaler = ng.amp.GradScaler("cpu", init_scale=2.0 ** 10)
        ng.manual_seed(2)
        for xb, yb in _loader(96, 32):
            opt.zero_grad()
            with ng.autocast("cpu", dtype=ng.bfloat16):
                loss = F.cross_entropy(model(xb), yb)
            scaler.scale(loss).backward()
            scaler.unscale_(opt)
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            scaler.step(opt)
            scaler.update()
        return H.params(model)
    expected = hand()
    model = H.mlp(1)
    opt = optim.Adam(model.parameters(), lr=1e-2)
    tr = Trainer(model, opt, F.cross_entropy, autocast=ng.bfloat16, clip_grad_norm=1.0, seed=2, progress=False,
                 grad_scaler=ng.amp.GradScaler("cpu", init_scale=2.0 ** 10))
    tr.fit(_loader(96, 32))
    H.assert_params_equal(H.params(model), expected)


def test_step_closure_form_matches_the_loss_fn_form():
    def run(**kw):
        model = H.mlp(0)
        tr = Trainer(model, optim.Adam(model.parameters(), lr=1e-2), max_epochs=2, seed=3, metrics=["accuracy"],
                     progress=False, **kw)
        return tr.fit(_loader(), val_data=_loader(64, 32, shuffle=False)), H.params(model)

    def step(model, batch):
        x, y = batch
        out = model(x)
        return F.cross_entropy(out, y), out
    h1, p1 = run(loss_fn=F.cross_entropy)
    h2, p2 = run(step=step)
    H.assert_history_equal(h1, h2)
    H.assert_params_equal(p1, p2)
    # a loss alone, and batches of any structure (here dicts): no metrics, the loss logged
    model = H.mlp(0)
    X, y = H.digits(64)
    tr = Trainer(model, optim.SGD(model.parameters(), lr=0.1),
                 step=lambda m, b: F.cross_entropy(m(b["x"]), b["y"]), progress=False)
    hist = tr.fit([{"x": X[:40], "y": y[:40]}, {"x": X[40:], "y": y[40:]}])
    l1, l2 = hist.steps("loss")[1]
    assert list(hist.keys()) == ["loss"] and hist["loss"][0] == pytest.approx((40 * l1 + 24 * l2) / 64, rel=1e-15)


def _np_cross_entropy(logits, y):
    z = logits - logits.max(1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(1, keepdims=True))
    return -logp[np.arange(len(y)), y]


def test_evaluate_and_predict_use_eval_mode_and_restore_modes():
    model = nn.Sequential(nn.Linear(64, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Dropout(0.5), nn.Linear(16, 10))
    model.train()
    model[3].eval()                              # a mixed state, restored as it was
    modes = [m.training for m in model.modules()]
    tr = Trainer(model, optim.SGD(model.parameters(), lr=0.1), F.cross_entropy, metrics=["accuracy"],
                 progress=False)
    X, y = H.digits(70)
    data = [(X[:32], y[:32]), (X[32:64], y[32:64]), (X[64:], y[64:])]   # unequal batches
    out = tr.predict(data)
    assert [m.training for m in model.modules()] == modes and out.requires_grad is False
    model.eval()
    with ng.no_grad():
        ref = model(X).numpy()
    model.train()
    model[3].eval()
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-5, atol=1e-6)
    res = tr.evaluate(data)
    assert [m.training for m in model.modules()] == modes
    yn = y.numpy()
    np.testing.assert_allclose(res["loss"], _np_cross_entropy(ref.astype(np.float64), yn).mean(), rtol=1e-5)
    assert res["accuracy"] == np.mean(ref.argmax(1) == yn)


def test_logged_loss_and_val_loss_are_sample_weighted_means():
    X, y = H.digits(50)
    batches = [(X[:20], y[:20]), (X[20:45], y[20:45]), (X[45:], y[45:])]
    seen = []
    model = H.mlp(0, dropout=0)
    tr = Trainer(model, optim.SGD(model.parameters(), lr=0.0), F.cross_entropy, progress=False,
                 callbacks=[LambdaCallback(on_batch_end=lambda t, b, i, logs: seen.append((logs["loss"], len(b[1]))))])
    hist = tr.fit(batches, val_data=batches)
    with ng.no_grad():
        per_sample = _np_cross_entropy(model(X).numpy().astype(np.float64), y.numpy())
    losses, sizes = np.array(seen).T
    assert hist["loss"][0] == pytest.approx(np.sum(losses * sizes) / 50, rel=1e-12)
    assert hist["loss"][0] == pytest.approx(per_sample.mean(), rel=1e-5)       # lr 0: the same weights
    assert hist["val_loss"][0] == pytest.approx(per_sample.mean(), rel=1e-5)
    assert hist.steps("loss")[1].tolist() == losses.tolist()


def test_reduce_lr_on_plateau_steps_on_the_monitored_value():
    scores = [5.0, 4.0, 4.5, 4.2, 3.0]
    model = H.mlp(0)
    opt = optim.SGD(model.parameters(), lr=0.1)
    tr = Trainer(model, opt, F.cross_entropy, scheduler=L.ReduceLROnPlateau(opt, factor=0.5, patience=0),
                 scheduler_monitor="score", max_epochs=5, progress=False,
                 callbacks=[LearningRateMonitor(),
                            LambdaCallback(on_epoch_start=lambda t, e: t.record("score", scores[e - 1]))])
    hist = tr.fit(_loader(64))
    # patience 0: each epoch that does not beat the best halves the rate for the next ones
    assert hist["lr"] == [0.1, 0.1, 0.1, 0.05, 0.025]
    assert hist["score"] == scores
    with pytest.raises(ValueError, match="scheduler_interval='epoch'"):
        Trainer(model, opt, F.cross_entropy, scheduler=L.ReduceLROnPlateau(opt), scheduler_interval="step")


def test_lr_monitor_per_step_schedule():
    model = H.mlp(0)
    opt = optim.SGD(model.parameters(), lr=0.8)
    tr = Trainer(model, opt, F.cross_entropy, scheduler=L.LambdaLR(opt, lambda s: 0.5 ** s),
                 scheduler_interval="step", max_epochs=2, progress=False, callbacks=[LearningRateMonitor()])
    hist = tr.fit(_loader(96))
    steps, lrs = hist.steps("lr")
    assert lrs.tolist() == [0.8 * 0.5 ** k for k in range(6)] and steps.tolist() == list(range(6))
    assert hist["lr"] == [(0.8 + 0.4 + 0.2) / 3, (0.8 * 0.5 ** 3 + 0.8 * 0.5 ** 4 + 0.8 * 0.5 ** 5) / 3]


def test_stop_training_from_the_step_ends_fit_cleanly():
    calls = []

    def step(model, batch):
        if calls.count("b") == 8:
            raise StopTraining("enough")
        calls.append("b")
        return F.cross_entropy(model(batch[0]), batch[1])
    model = H.mlp(0)
    tr = Trainer(model, optim.SGD(model.parameters(), lr=0.1), step=step, max_epochs=5, progress=False,
                 callbacks=[LambdaCallback(on_fit_end=lambda t: calls.append("end"))])
    hist = tr.fit(_loader(96))                   # 3 batches an epoch: stops in epoch 3
    assert tr.stop_reason == "enough" == hist.stop_reason
    assert hist.epoch == [1, 2] and len(hist.steps("loss")[0]) == 8 and calls[-1] == "end"


def test_observe_records_and_detaches_tags():
    model = H.mlp(0, dropout=0)
    W0, b0 = model[0].weight.detach().numpy().copy(), model[0].bias.detach().numpy().copy()
    X, y = H.digits(64)
    checks = []

    def at_end(t, batch, i, logs):
        checks.append(t.tags["h2"].grad_fn is not None)         # the step's graph, still there

    def at_start(t, batch, i):
        if "h2" in t.tags:
            checks.append(t.tags["h2"].grad_fn is None)         # detached after the step
    tr = Trainer(model, optim.SGD(model.parameters(), lr=0.1), F.cross_entropy, max_epochs=2, progress=False,
                 callbacks=[LambdaCallback(on_batch_end=at_end, on_batch_start=at_start)])
    tr.observe(model[0], "h2", reduce=lambda t: (t * t).mean())
    ng.reset_peak_memory_stats()
    hist = tr.fit([(X[:32], y[:32]), (X[32:], y[32:])])
    assert len(checks) == 7 and all(checks)
    h = X[:32].numpy().astype(np.float64) @ W0.T.astype(np.float64) + b0
    steps, values = hist.steps("h2")
    assert steps.tolist() == [1, 2, 3, 4]
    np.testing.assert_allclose(values[0], np.mean(h * h), rtol=1e-5)
    assert hist["h2"][0] == pytest.approx((values[0] + values[1]) / 2, rel=1e-15)
    assert tr.tags["h2"].grad_fn is None and ng.memory_stats()["saved_bytes"] == 0
    # no tags outside training steps
    tr.tags.clear()
    tr.evaluate([(X, y)])
    assert tr.tags == {}
    # a step that does not run the module records nothing for it
    tr.max_epochs = 3
    tr.fit([(X[:32], y[:32])])
    def step(m, b):                  # runs model[0] only on batches whose x has 64 columns
        x = m[0](b[0]) if b[0].shape[1] == 64 else b[0]
        return m[2](m[1](x)).sum()
    other = Trainer(model, optim.SGD(model.parameters(), lr=0.1), step=step, progress=False)
    other.observe(model[0], "h")
    h = other.fit([(X[:4], None), (ng.randn(4, 16), None), (ng.randn(4, 16), None)])
    assert h.steps("h")[0].tolist() == [1]       # the stale tag of step 1 is not recorded again
    assert len(tr.history.steps("h2")[0]) == 5


def test_constructor_errors_name_the_argument():
    model = H.mlp(0)
    opt = optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(TypeError, match="exactly one of loss_fn .* and step="):
        Trainer(model, opt)
    with pytest.raises(TypeError, match="model must be a numbagrad.nn.Module"):
        Trainer(lambda x: x, opt, F.cross_entropy)
    with pytest.raises(ValueError, match="grad_accum_steps must be an int >= 1, got 0"):
        Trainer(model, opt, F.cross_entropy, grad_accum_steps=0)
    with pytest.raises(ValueError, match="scheduler_interval must be 'epoch' or 'step', got 'batch'"):
        Trainer(model, opt, F.cross_entropy, scheduler_interval="batch")
    with pytest.raises(ValueError, match="clip_grad_norm must be None or a number > 0, got -1"):
        Trainer(model, opt, F.cross_entropy, clip_grad_norm=-1)
    with pytest.raises(ValueError, match="unknown metric name 'f2'"):
        Trainer(model, opt, F.cross_entropy, metrics=["f2"])
    with pytest.raises(TypeError, match="a batch must be \\(input, target\\) with loss_fn"):
        Trainer(model, opt, F.cross_entropy, progress=False).fit([ng.randn(4, 64)])
    with pytest.raises(ValueError, match="Trainer.record: name must be a str other than 'loss'"):
        Trainer(model, opt, F.cross_entropy).record("loss", 1.0)


def test_pipeline_and_plain_iterables_train_alike():
    from numbagrad.data import Pipeline
    X, y = H.digits(80)
    results = []
    for data in (Pipeline.from_tensors(X, y).batch(32), [(X[i:i + 32], y[i:i + 32]) for i in range(0, 80, 32)]):
        model = H.mlp(0)
        tr = Trainer(model, optim.Adam(model.parameters(), lr=1e-2), F.cross_entropy, max_epochs=2, seed=0,
                     progress=False)
        results.append((tr.fit(data, val_data=data), H.params(model)))
    H.assert_history_equal(results[0][0], results[1][0])
    H.assert_params_equal(results[0][1], results[1][1])
