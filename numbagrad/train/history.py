"""``History``: what a :class:`~numbagrad.train.Trainer` logged, per epoch and per step.

Per epoch (Keras's ``History.history``): ``loss``, ``val_loss``, ``<metric>``,
``val_<metric>`` and the epoch means of every scalar recorded with
:meth:`Trainer.record` or tagged with :meth:`Trainer.observe`. Per step: the batch
``loss`` and every recorded scalar, each with the global step it was recorded at.

A name first logged in a later epoch gets ``nan`` for the epochs before it, and a name
missing from an epoch gets ``nan`` there, so every per-epoch series has one value per
epoch.
"""
import io
import math

import numpy as np

__all__ = ["History"]


class History:
    """Per-epoch and per-step series of logged scalars.

    Attributes
    ----------
    epoch : list of int
        The epochs logged (1-based).
    history : dict of str to list of float
        One value per entry of ``epoch`` for each name (``nan`` where it was not logged).
    step_history : dict of str to (list of int, list of float)
        For each name, the global steps it was recorded at and the values.

    ``history["loss"]`` is the same as ``history.history["loss"]``.
    """

    def __init__(self):
        self.epoch = []
        self.history = {}
        self.step_history = {}
        self.stop_reason = None

    # ---- writing (the Trainer calls these) ------------------------------------------------
    def log_epoch(self, epoch, logs):
        """Append one epoch's ``{name: float}``."""
        n = len(self.epoch)
        for k, v in logs.items():
            if k not in self.history:
                self.history[k] = [math.nan] * n
            self.history[k].append(float(v))
        for k, series in self.history.items():
            if len(series) == n:      # not logged this epoch
                series.append(math.nan)
        self.epoch.append(int(epoch))

    def log_step(self, step, name, value):
        """Append ``value`` at global ``step`` to the per-step series ``name``."""
        s = self.step_history.get(name)
        if s is None:
            s = self.step_history[name] = ([], [])
        s[0].append(step)
        s[1].append(value)

    # ---- reading ---------------------------------------------------------------------------
    def __getitem__(self, name):
        return self.history[name]

    def __contains__(self, name):
        return name in self.history

    def __len__(self):
        return len(self.epoch)

    def keys(self):
        return self.history.keys()

    def steps(self, name):
        """``(steps, values)`` of the per-step series ``name`` as NumPy arrays (int64, float64)."""
        if name not in self.step_history:
            raise KeyError(f"History.steps: no per-step series {name!r}; the per-step names are "
                           f"{sorted(self.step_history)}")
        s, v = self.step_history[name]
        return np.asarray(s, np.int64), np.asarray(v, np.float64)

    def to_dict(self):
        """Plain data: ``{"epoch": [...], "history": {name: [...]}, "steps": {name:
        {"step": [...], "value": [...]}}}`` (lists of Python ints and floats)."""
        return {"epoch": list(self.epoch),
                "history": {k: list(v) for k, v in self.history.items()},
                "steps": {k: {"step": list(s), "value": list(v)} for k, (s, v) in self.step_history.items()}}

    def to_csv(self, path=None):
        """The per-epoch series as CSV (a header ``epoch,<names...>`` and one row per epoch,
        floats written with ``repr`` so they read back exactly). Writes ``path`` if given;
        returns the text."""
        names = list(self.history)
        buf = io.StringIO()
        buf.write(",".join(["epoch"] + names) + "\n")
        for i, e in enumerate(self.epoch):
            buf.write(",".join([str(e)] + [repr(self.history[k][i]) for k in names]) + "\n")
        text = buf.getvalue()
        if path is not None:
            with open(path, "w", newline="") as f:
                f.write(text)
        return text

    def plot(self, keys=None, *, ax=None):
        """Plot per-epoch series with matplotlib (an optional extra): one axes per name,
        ``val_<name>`` drawn on the same axes as ``<name>``. ``keys``: the names to plot
        (default: every logged name that does not start with ``val_``). Returns the
        figure."""
        try:
            import matplotlib.pyplot as plt
        except ImportError as e:  # pragma: no cover - matplotlib is in the test extra
            raise ImportError("History.plot needs matplotlib: pip install matplotlib") from e
        if keys is None:
            keys = [k for k in self.history if not k.startswith("val_")]
        elif isinstance(keys, str):
            keys = [keys]
        keys = list(keys)
        for k in keys:
            if k not in self.history:
                raise KeyError(f"History.plot: no per-epoch series {k!r}; logged names are {sorted(self.history)}")
        if ax is not None:
            axes = [ax] * len(keys)
            fig = ax.figure
        else:
            fig, axes = plt.subplots(len(keys) or 1, 1, figsize=(6, 2.5 * max(1, len(keys))), squeeze=False)
            axes = list(axes[:, 0])
        for a, k in zip(axes, keys):
            a.plot(self.epoch, self.history[k], marker="o", label=k)
            v = "val_" + k
            if v in self.history:
                a.plot(self.epoch, self.history[v], marker="o", label=v)
            a.set_xlabel("epoch")
            a.set_ylabel(k)
            a.legend()
        fig.tight_layout()
        return fig

    # ---- checkpoints -----------------------------------------------------------------------
    def state_dict(self):
        """For ``numbagrad.save``: series as NumPy arrays (one dataset each, not one
        attribute per value)."""
        return {"epoch": np.asarray(self.epoch, np.int64),
                "history": {k: np.asarray(v, np.float64) for k, v in self.history.items()},
                "steps": {k: {"step": np.asarray(s, np.int64), "value": np.asarray(v, np.float64)}
                          for k, (s, v) in self.step_history.items()},
                "stop_reason": self.stop_reason}

    def load_state_dict(self, state):
        """Restore :meth:`state_dict`'s output (floats come back bit for bit)."""
        if not isinstance(state, dict) or not {"epoch", "history", "steps"} <= set(state):
            raise ValueError("History.load_state_dict: expected a dict with the keys 'epoch', 'history' and "
                             f"'steps', got {type(state).__name__}"
                             + (f" with keys {sorted(state)}" if isinstance(state, dict) else ""))
        self.epoch = [int(e) for e in np.asarray(state["epoch"]).reshape(-1)]
        self.history = {k: [float(x) for x in np.asarray(v).reshape(-1)] for k, v in state["history"].items()}
        self.step_history = {k: ([int(x) for x in np.asarray(d["step"]).reshape(-1)],
                                 [float(x) for x in np.asarray(d["value"]).reshape(-1)])
                             for k, d in state["steps"].items()}
        self.stop_reason = state.get("stop_reason")

    def __repr__(self):
        return f"History(epochs={len(self.epoch)}, names={list(self.history)})"
