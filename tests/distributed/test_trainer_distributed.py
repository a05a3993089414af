"""``Trainer.fit`` under a process group (``numbagrad/train/_distributed.py``).

The multi-process checks run inside the ranks of ``_trainer_run.py`` (see its docstring):
two ranks train what one process trains, to float32 rounding (a shuffled DataLoader whose
last batch splits 9/10, gradient accumulation with an odd last window, clipping, a
GradScaler, a per-step schedule, accuracy/F1/AUROC, list-of-batches validation); only
rank 0 writes files; GradScaler's found-inf flag is agreed; ranks reducing different
names raise on every rank; and a checkpoint written by
two ranks in the middle of an accumulation window resumes on three ranks and on one
process (here, without a process group) to the uninterrupted run's end. (``_trainer_run.py
resume DIR 1`` resumes with a DataLoader worker per rank; left out here for time.)"""
import importlib.util
from pathlib import Path

import numpy as np
import pytest

import numbagrad as ng
from numbagrad.train import _distributed as D

HERE = Path(__file__).parent


def _ok(proc, path):
    assert proc.returncode == 0, proc.stdout[-6000:]
    assert path.exists(), proc.stdout[-6000:]


def test_two_ranks_train_as_one_process_and_the_checkpoint_resumes_on_3_ranks_and_on_1(mpirun, tmp_path):
    _ok(mpirun(2, "_trainer_run.py", "train", str(tmp_path), timeout=90), tmp_path / "train-2.ok")
    assert (tmp_path / "ckpt-rank0" / "last.h5").exists() and (tmp_path / "log-rank0.csv").exists()
    assert not (tmp_path / "ckpt-rank1").exists() and not (tmp_path / "log-rank1.csv").exists()
    _ok(mpirun(3, "_trainer_run.py", "resume", str(tmp_path), timeout=90), tmp_path / "resume-3.ok")
    # world size 1: this process, which has no process group
    spec = importlib.util.spec_from_file_location("_trainer_run", HERE / "_trainer_run.py")
    run = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(run)
    assert not ng.distributed.is_initialized()
    run.resume(str(tmp_path))


@pytest.mark.parametrize("n,world", [(7, 2), (19, 3), (2, 3), (1, 2), (32, 4)])
def test_shares_partition_each_batch(n, world):
    x = np.arange(n * 3).reshape(n, 3)
    batch = (ng.tensor(x), {"y": np.arange(n), "names": [f"s{i}" for i in range(n)]}, "tag")
    parts, counts = [], []
    for r in range(world):
        (xs, rest, tag), m = D.slice_batch(batch, n, r, world)
        assert tag == "tag"
        counts.append(m)
        if m:
            assert xs.shape[0] == m and len(rest["y"]) == m and len(rest["names"]) == m
            parts.append(xs.numpy())
            assert rest["names"] == [f"s{i}" for i in rest["y"]]
        else:                      # an empty share: the first sample, weighted 0
            assert np.array_equal(xs.numpy(), x[:1])
    assert np.array_equal(np.concatenate(parts), x)        # in order, each sample once
    assert sum(counts) == n and max(counts) - min(counts) <= 1
    shard = D._Shard()
    weights = []
    for m in counts:
        shard.n, shard.n_local = n, m
        weights.append(shard.weight(world))
    # the rank-average of weight_r * mean_r is the mean over the batch
    means = [x[D.shard_bounds(n, r, world)[0]:D.shard_bounds(n, r, world)[1]].mean() if m else 0.0
             for r, m in enumerate(counts)]
    np.testing.assert_allclose(sum(w * mu for w, mu in zip(weights, means)) / world, x.mean(), rtol=1e-12)
