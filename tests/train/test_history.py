"""``numbagrad.train.History``: per-epoch series with nan where a name is missing, per-step
series, ``to_dict`` / ``to_csv`` (read back exactly) / ``plot`` (Agg backend) and its
checkpoint state."""
import csv
import io
import math

import numpy as np
import pytest

from numbagrad.train import History


def _history():
    h = History()
    h.log_epoch(1, {"loss": 0.5, "acc": 0.25})
    h.log_epoch(2, {"loss": 0.1 + 0.2, "acc": 0.5, "val_loss": 1 / 3})     # val_loss first seen in epoch 2
    h.log_epoch(3, {"loss": 0.25, "val_loss": 0.2})                        # acc missing in epoch 3
    for step, v in enumerate([1.0, 0.75, 0.5]):
        h.log_step(step + 1, "loss", v)
    h.log_step(3, "lr", 0.01)
    return h


def test_series_are_aligned_with_nan_for_missing_values():
    h = _history()
    assert h.epoch == [1, 2, 3] and len(h) == 3
    assert h["loss"] == [0.5, 0.1 + 0.2, 0.25]
    assert math.isnan(h["val_loss"][0]) and h["val_loss"][1:] == [1 / 3, 0.2]
    assert h["acc"][:2] == [0.25, 0.5] and math.isnan(h["acc"][2])
    steps, values = h.steps("loss")
    assert steps.dtype == np.int64 and steps.tolist() == [1, 2, 3] and values.tolist() == [1.0, 0.75, 0.5]
    with pytest.raises(KeyError, match="no per-step series 'acc'; the per-step names are \\['loss', 'lr'\\]"):
        h.steps("acc")


def test_to_dict_and_to_csv_read_back_exactly(tmp_path):
    h = _history()
    d = h.to_dict()
    assert d["epoch"] == [1, 2, 3] and d["history"]["loss"] == h["loss"]
    assert d["steps"] == {"loss": {"step": [1, 2, 3], "value": [1.0, 0.75, 0.5]}, "lr": {"step": [3], "value": [0.01]}}
    text = h.to_csv(tmp_path / "h.csv")
    assert (tmp_path / "h.csv").read_text() == text
    rows = list(csv.DictReader(io.StringIO(text)))
    assert list(rows[0]) == ["epoch", "loss", "acc", "val_loss"]
    for k in ("loss", "acc", "val_loss"):
        np.testing.assert_array_equal([float(r[k]) for r in rows], h[k])   # repr: exact, nan kept


def test_state_dict_round_trip_is_exact():
    h = _history()
    h.stop_reason = "because"
    h2 = History()
    h2.load_state_dict(h.state_dict())
    assert h2.to_dict()["steps"] == h.to_dict()["steps"] and h2.stop_reason == "because"
    for k in h.keys():
        np.testing.assert_array_equal(h2[k], h[k])
    with pytest.raises(ValueError, match="History.load_state_dict: expected a dict with the keys"):
        h2.load_state_dict({"epoch": []})


def test_plot_draws_each_name_with_its_val_series():
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    h = _history()
    fig = h.plot()
    axes = fig.get_axes()
    assert [a.get_ylabel() for a in axes] == ["loss", "acc"]
    labels = [line.get_label() for line in axes[0].get_lines()]
    assert labels == ["loss", "val_loss"]
    np.testing.assert_array_equal(axes[0].get_lines()[0].get_ydata(), h["loss"])
    np.testing.assert_array_equal(axes[0].get_lines()[0].get_xdata(), [1, 2, 3])
    plt.close(fig)
    fig = h.plot("acc")
    assert len(fig.get_axes()) == 1
    plt.close(fig)
    with pytest.raises(KeyError, match="no per-epoch series 'nope'"):
        h.plot(["nope"])
