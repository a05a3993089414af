"""The main job: ``python -m numbagrad`` trains the default MLP on the digits to >= 95%
through the Trainer; ``--model cnn`` trains a small CNN."""
import os
import re
import subprocess
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_python_m_numbagrad_reaches_95_percent():
    # 10 of the default 20 epochs already clear the bar (about 97%) in a few seconds.
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-m", "numbagrad", "--epochs", "10"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    epochs = re.findall(r"epoch\s+(\d+)/10\s+train loss ([0-9.]+)", proc.stdout)
    assert [int(e) for e, _ in epochs] == list(range(1, 11))
    losses = [float(v) for _, v in epochs]
    assert losses[-1] < losses[0] / 5
    acc = float(re.search(r"test accuracy: ([0-9.]+)", proc.stdout).group(1))
    assert acc >= 0.95, proc.stdout


def test_main_in_process_quiet(capsys):
    from numbagrad.examples.train_digits import main
    result = main(["--epochs", "6", "--batch-size", "32", "--lr", "2e-3", "--seed", "1", "--quiet"])
    out = capsys.readouterr().out
    assert "epoch" not in out and "test accuracy" in out
    assert result["test_accuracy"] >= 0.9 and len(result["train_losses"]) == 6


def test_help():
    from numbagrad.examples.train_digits import parse_args
    args = parse_args([])
    assert (args.epochs, args.batch_size, args.lr, args.seed, args.quiet) == (20, 32, 1e-3, 0, False)
    with pytest.raises(SystemExit):
        parse_args(["--bogus"])


def test_checkpoint_every_epoch_and_resume_is_bit_identical(tmp_path, capsys):
    """A run stopped after epoch 2 and resumed from its checkpoint ends where a run that
    never stopped ends: the same per-epoch losses (exactly) and the same weights."""
    import numbagrad as ng
    from numbagrad.examples.train_digits import main
    common = ["--epochs", "4", "--seed", "3", "--quiet"]
    full = main(common + ["--checkpoint", str(tmp_path / "full.ckpt")])
    main(["--epochs", "2", "--seed", "3", "--quiet", "--checkpoint", str(tmp_path / "cut.ckpt")])
    assert ng.load(tmp_path / "cut.ckpt")["epoch"] == 2
    resumed = main(common + ["--checkpoint", str(tmp_path / "cut.ckpt"), "--resume"])
    assert resumed["train_losses"] == full["train_losses"] and len(full["train_losses"]) == 4
    a, b = ng.load(tmp_path / "full.ckpt"), ng.load(tmp_path / "cut.ckpt")
    assert a["epoch"] == b["epoch"] == 4
    for k in a["model"]:
        assert np.array_equal(a["model"][k].numpy(), b["model"][k].numpy()), k
    assert resumed["test_accuracy"] == full["test_accuracy"]


def test_async_checkpoint_writes_the_same_final_state(tmp_path):
    """--async-checkpoint (a background saver process) leaves the same file as the
    synchronous saves once main() returns, and resuming from it works the same."""
    import numbagrad as ng
    from numbagrad.examples.train_digits import main
    common = ["--epochs", "3", "--seed", "5", "--quiet"]
    sync = main(common + ["--checkpoint", str(tmp_path / "sync.ckpt")])
    asyn = main(common + ["--checkpoint", str(tmp_path / "async.ckpt"), "--async-checkpoint"])
    assert asyn["train_losses"] == sync["train_losses"]
    a, b = ng.load(tmp_path / "sync.ckpt"), ng.load(tmp_path / "async.ckpt")
    assert a["epoch"] == b["epoch"] == 3 and a["train_losses"] == b["train_losses"]
    for k in a["model"]:
        assert np.array_equal(a["model"][k].numpy(), b["model"][k].numpy()), k
    np.testing.assert_array_equal(a["loader"]["order"] if a["loader"]["order"] is not None else [],
                                  b["loader"]["order"] if b["loader"]["order"] is not None else [])


def test_cnn_defaults_and_a_short_run(capsys):
    """--model cnn has its own --epochs/--lr defaults (explicit values win); two epochs of
    its one-cycle schedule already classify most digits (the full 15 reach >= 98.5%)."""
    from numbagrad.examples.train_digits import main, parse_args
    a = parse_args(["--model", "cnn"])
    assert (a.model, a.epochs, a.lr, a.patience) == ("cnn", 15, 5e-3, 5)
    assert parse_args(["--model", "cnn", "--epochs", "3", "--lr", "1e-2"]).epochs == 3
    with pytest.raises(SystemExit):
        parse_args(["--model", "resnet"])
    result = main(["--model", "cnn", "--epochs", "2", "--seed", "1"])
    out = capsys.readouterr().out
    assert [ln.split()[:2] for ln in out.splitlines() if ln.startswith("epoch")] == [["epoch", "1/2"],
                                                                                     ["epoch", "2/2"]]
    assert len(result["train_losses"]) == 2 and result["test_accuracy"] >= 0.9, out


def test_early_stopping_stays_stopped_on_resume(tmp_path):
    """--patience: a run whose training loss stops improving ends early, and --resume from
    its checkpoint trains nothing more (lr 0: the loss never improves after epoch 1)."""
    import numbagrad as ng
    from numbagrad.examples.train_digits import main
    args = ["--epochs", "10", "--lr", "0", "--patience", "2", "--quiet", "--checkpoint", str(tmp_path / "es.ckpt")]
    first = main(args)
    assert len(first["train_losses"]) == 3 and ng.load(tmp_path / "es.ckpt")["epoch"] == 3
    again = main(args + ["--resume"])
    assert again["train_losses"] == first["train_losses"]


def test_resume_needs_a_checkpoint_path():
    from numbagrad.examples.train_digits import parse_args
    with pytest.raises(SystemExit):
        parse_args(["--resume"])
