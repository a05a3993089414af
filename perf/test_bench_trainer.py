"""Trainer overhead: one training epoch of the main job (digits MLP 64-128-64-10, batch 32,
shuffled, Adam 1e-3) by ``Trainer.fit`` against the main job's hand-written loop
(``numbagrad/examples/train_digits.py``'s epoch without its bar) over the same model and
data, in the same run.

Three runs, each with its own model, optimizer and loader built alike: A, the hand loop;
B, ``Trainer.fit`` with the default callbacks less the progress bar (``progress=False``:
History only); C, ``Trainer.fit`` with the progress bar forced on (tqdm writing to an
``io.StringIO``). A round runs ``EPOCHS`` epochs of each (one ``fit`` call of that many
epochs, so the bar is made once per fit as in use) and records the time per epoch.
Rounds are interleaved (A, B, C, A, B, C, ...) so every median comes from the same
minutes of a shared machine. Rows: B and C in the numbagrad column, A in
the torch column (a reference column here: no torch involved), so the ratio column is
Trainer / hand loop. The issue's bars: B <= 1.03x, C <= 1.05x.
"""
import io
import time

import numpy as np
import pytest

import _perfkit as kit

ROUNDS = 1 if kit.SMOKE else 30
EPOCHS = 1 if kit.SMOKE else 3     # epochs per fit() call (and per timed hand-loop run)
_NOTE = "torch column: the hand-written numbagrad loop (train_digits's epoch), same model/data; interleaved rounds"
kit._workload("trainer_digits_epoch", "Trainer.fit epoch, digits MLP b32 Adam, no progress bar",
              bar=("ratio", "<=", 1.03), note=_NOTE)
kit._workload("trainer_digits_epoch_bar", "Trainer.fit epoch, digits MLP b32 Adam, progress bar on",
              bar=("ratio", "<=", 1.05), note=_NOTE + "; tqdm to a StringIO")


def _run(kind, X, y):
    import numbagrad as ng
    from numbagrad import optim
    from numbagrad.data import DataLoader, TensorDataset
    from numbagrad.examples.train_digits import build_model
    from numbagrad.nn import functional as F
    from numbagrad.train import ProgressBar, Trainer
    ng.manual_seed(kit.SEED)
    n = 256 if kit.SMOKE else len(y)
    loader = DataLoader(TensorDataset(X[:n], y[:n]), batch_size=32, shuffle=True,
                        generator=ng.Generator().manual_seed(kit.SEED))   # its own: the runs interleave
    model = build_model()
    opt = optim.Adam(model.parameters(), lr=1e-3)
    if kind == "hand":
        losses = []

        def epochs():  # train_digits.main's epochs, bar disabled
            for _ in range(EPOCHS):
                model.train()
                total, count = 0.0, 0
                for xb, yb in loader:
                    loss = F.cross_entropy(model(xb), yb)
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
                    v = loss.item()
                    total += v * len(yb)
                    count += len(yb)
                losses.append(total / count)
        return epochs, model, losses
    cbs = [ProgressBar(file=io.StringIO(), disable=False)] if kind == "bar" else []
    trainer = Trainer(model, opt, F.cross_entropy, callbacks=cbs, progress=False, max_epochs=0)

    def epochs():
        trainer.max_epochs += EPOCHS
        trainer.fit(loader)
    return epochs, model, trainer


@pytest.mark.benchmark(**kit.bench_mark())
def test_trainer_epoch_overhead_digits(benchmark):
    from numbagrad.data import load_digits, train_test_split
    kit.pin_threads()
    X, y = load_digits()
    X_train, _, y_train, _ = train_test_split(X, y, test_size=0.2, seed=0)
    runs = {kind: _run(kind, X_train, y_train) for kind in ("hand", "trainer", "bar")}
    for fn, _, _ in runs.values():
        fn()                             # JIT compile / cache load
    times = {kind: [] for kind in runs}

    def one_round():
        for kind, (fn, _, _) in runs.items():
            t = time.perf_counter()
            fn()
            times[kind].append((time.perf_counter() - t) / EPOCHS)
    benchmark.group = "trainer_digits_epoch"
    benchmark.extra_info.update(workload=f"Trainer.fit epoch vs hand loop, interleaved (a round: 3 x {EPOCHS} "
                                         "epochs)")
    benchmark.pedantic(one_round, rounds=ROUNDS, iterations=1, warmup_rounds=0)
    med = {k: float(np.median(v)) for k, v in times.items()}
    mins = {k: float(np.min(v)) for k, v in times.items()}
    for key, kind in (("trainer_digits_epoch", "trainer"), ("trainer_digits_epoch_bar", "bar")):
        kit.record(key, "numbagrad", med[kind], mins[kind], len(times[kind]))
        kit.record(key, "torch", med["hand"], mins["hand"], len(times["hand"]))
    benchmark.extra_info.update(median_s=med, ratio_trainer=med["trainer"] / med["hand"],
                                ratio_bar=med["bar"] / med["hand"])
    # the three runs trained alike: same seed, same arithmetic
    hand_losses = runs["hand"][2]
    trainer = runs["trainer"][2]
    assert trainer.history["loss"] == hand_losses
    for (k, a), b in zip(runs["hand"][1].state_dict().items(), runs["trainer"][1].state_dict().values()):
        assert np.array_equal(a.numpy(), b.numpy()), k
