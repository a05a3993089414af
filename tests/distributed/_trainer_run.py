"""Ranks of ``test_trainer_distributed.py``: ``mpiexec -n W python _trainer_run.py MODE DIR``
(the test's launcher sets ``NUMBA_NUM_THREADS=1``).

``train`` (2 ranks): every rank first trains the reference on one process (before the
process group exists), then the same ``Trainer`` runs distributed; the two must agree to
float32 rounding (history and parameters), only rank 0 writes files and shows progress,
and a checkpoint is written in the middle of an accumulation window of epoch 2. The
GradScaler's found-inf flag is checked to be agreed over the ranks, and two error paths
raise on every rank.
``resume`` (any number of ranks; :func:`resume` on one process without a group): resume
from that checkpoint and end where the reference ended. Rank 0 writes
``DIR/<mode>-<world>.ok`` when its checks passed.
"""
import io
import os
import sys

import numpy as np

import numbagrad as ng
from numbagrad import nn, optim
from numbagrad.amp import GradScaler
from numbagrad.data import DataLoader, TensorDataset, load_digits
from numbagrad.metrics import AUROC, Accuracy, F1Score
from numbagrad.train import CSVLogger, LambdaCallback, LearningRateMonitor, ModelCheckpoint, ProgressBar, Trainer

N_TRAIN, N_VAL = 147, 61     # batches of 32: 4 full and one of 19 (shares 9/10, or 6/6/7); val 25, 25, 11
MID = dict(epoch=2, batch=2)  # the checkpoint: after the 3rd batch of epoch 2, one batch into a window


def data(num_workers=0):
    X, y = load_digits()
    X = X.numpy()
    y = y.numpy()
    train = DataLoader(TensorDataset(ng.tensor(X[:N_TRAIN]), ng.tensor(y[:N_TRAIN])), batch_size=32, shuffle=True,
                       num_workers=num_workers)
    xv, yv = X[N_TRAIN:N_TRAIN + N_VAL], y[N_TRAIN:N_TRAIN + N_VAL]
    val = [(ng.tensor(xv[i:i + 25]), ng.tensor(yv[i:i + 25])) for i in range(0, N_VAL, 25)]
    return train, val


def make_trainer(callbacks=()):
    ng.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
    opt = optim.Adam(model.parameters(), lr=0.01)
    sched = optim.lr_scheduler.OneCycleLR(opt, max_lr=0.02, total_steps=9)
    metrics = {"accuracy": Accuracy(), "f1": F1Score(10), "auroc": AUROC(10)}
    return Trainer(model, opt, nn.CrossEntropyLoss(), scheduler=sched, scheduler_interval="step", metrics=metrics,
                   max_epochs=3, grad_accum_steps=2, clip_grad_norm=1.0,
                   grad_scaler=GradScaler("cpu", init_scale=2.0 ** 10), seed=1, progress=False,
                   callbacks=[LearningRateMonitor(), *callbacks])


def params(trainer):
    return {k: v.numpy().copy() for k, v in trainer.model.state_dict().items()}


def check_same(hist, ps, ref_hist, ref_ps, what):
    """Histories and parameters equal to float32 rounding; counts-based metrics within one
    sample of each other (a logit tie could flip one prediction)."""
    assert sorted(hist) == sorted(ref_hist), (what, sorted(hist), sorted(ref_hist))
    for k in ref_hist:
        a, b = np.asarray(hist[k], np.float64), np.asarray(ref_hist[k], np.float64)
        assert a.shape == b.shape, (what, k, a, b)
        atol = 1.5 / N_TRAIN if k in ("accuracy", "f1", "auroc") else 2.0 / N_VAL if k.startswith("val_") and \
            k != "val_loss" else 1e-7
        np.testing.assert_allclose(a, b, rtol=2e-6, atol=atol, err_msg=f"{what}: {k}")
    assert ps.keys() == ref_ps.keys()
    for k in ref_ps:
        np.testing.assert_allclose(ps[k], ref_ps[k], rtol=1e-5, atol=1e-6, err_msg=f"{what}: parameter {k}")


def as_dict(history):
    return {k: list(v) for k, v in history.to_dict()["history"].items()}


def reference():
    """The uninterrupted run on one process (no process group yet)."""
    trainer = make_trainer()
    train, val = data()
    hist = as_dict(trainer.fit(train, val))
    return hist, params(trainer)


def check_found_inf_agreed(rank):
    """A gradient with an inf on rank 1 only: every rank skips the step and backs off."""
    p = nn.Parameter(ng.ones(4))
    opt = optim.SGD([p], lr=1.0)
    scaler = GradScaler("cpu", init_scale=4.0)
    (scaler.scale(p.sum())).backward()
    if rank == 1:
        p.grad.array[2] = np.inf
    scaler.step(opt)
    scaler.update()
    assert np.array_equal(p.detach().numpy(), np.ones(4, np.float32)), (rank, p.detach().numpy())
    assert scaler.get_scale() == 2.0, (rank, scaler.get_scale())


def check_errors(rank):
    """Ranks that disagree on the names they reduce raise on every rank, each naming its
    own; a metric without the merge contract is refused before any collective."""
    from numbagrad.train import _distributed as D
    try:
        D.merge_records({"a": [1.0, 1]} if rank == 0 else {"b": [1.0, 1]})
    except RuntimeError as e:
        assert "different names" in str(e) and ("['a']" if rank == 0 else "['b']") in str(e), str(e)
    else:
        raise AssertionError(f"rank {rank}: merge_records of different names did not raise")

    class Plain:                       # reset/update/compute only: no state_arrays()
        def reset(self):
            pass

        def update(self, outputs, target):
            pass

        def compute(self):
            return 0.0
    model = nn.Linear(64, 10)
    trainer = Trainer(model, optim.SGD(model.parameters(), lr=0.1), nn.CrossEntropyLoss(),
                      metrics={"plain": Plain()}, progress=False)
    try:
        trainer.fit([(ng.zeros(4, 64), ng.zeros(4, dtype=ng.int64))])
    except TypeError as e:
        assert "'plain'" in str(e) and "state_arrays" in str(e), str(e)
    else:
        raise AssertionError(f"rank {rank}: a metric without state_arrays() was accepted")


def resume(out_dir, world=1, num_workers=0):
    """Resume from ``mid.h5`` (on the process group's ranks, or on one process without
    one; the DataLoader with ``num_workers``) and check the end against the reference."""
    ref = np.load(os.path.join(out_dir, "reference.npz"), allow_pickle=False)
    ref_hist = {k[2:]: ref[k] for k in ref.files if k.startswith("h/")}
    ref_ps = {k[2:]: ref[k] for k in ref.files if k.startswith("p/")}
    trainer = make_trainer()
    train, val = data(num_workers)
    hist = as_dict(trainer.fit(train, val, resume_from=os.path.join(out_dir, "mid.h5")))
    check_same(hist, params(trainer), ref_hist, ref_ps, f"resumed on {world} rank(s) vs one process")


def main():
    mode, out_dir = sys.argv[1], sys.argv[2]
    if mode == "train":
        ref_hist, ref_ps = reference()
    import numbagrad.distributed as dist
    dist.init_process_group("mpi")
    rank, world = dist.get_rank(), dist.get_world_size()
    ckpt = os.path.join(out_dir, "mid.h5")
    if mode == "train":
        bar = io.StringIO()
        save_mid = LambdaCallback(on_batch_end=lambda tr, b, i, logs: tr.save(ckpt)
                                  if (tr.epoch, i) == (MID["epoch"], MID["batch"]) else None)
        files = [ModelCheckpoint(os.path.join(out_dir, f"ckpt-rank{rank}")),
                 CSVLogger(os.path.join(out_dir, f"log-rank{rank}.csv")), ProgressBar(file=bar, disable=False),
                 save_mid]
        trainer = make_trainer(files)
        train, val = data()
        hist = as_dict(trainer.fit(train, val))
        check_same(hist, params(trainer), ref_hist, ref_ps, f"rank {rank} of {world} vs one process")
        wrote = [os.path.exists(os.path.join(out_dir, f"ckpt-rank{rank}", "last.h5")),
                 os.path.exists(os.path.join(out_dir, f"log-rank{rank}.csv")), bool(bar.getvalue())]
        assert wrote == [rank == 0] * 3, (rank, wrote)
        check_found_inf_agreed(rank)
        check_errors(rank)
        if rank == 0:
            np.savez(os.path.join(out_dir, "reference.npz"),
                     **{f"h/{k}": np.asarray(v) for k, v in ref_hist.items()},
                     **{f"p/{k}": v for k, v in ref_ps.items()})
    else:
        resume(out_dir, world, num_workers=int(sys.argv[3]) if len(sys.argv) > 3 else 0)
    if rank == 0:
        open(os.path.join(out_dir, f"{mode}-{world}.ok"), "w").close()


if __name__ == "__main__":
    main()
