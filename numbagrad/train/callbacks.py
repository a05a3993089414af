"""Callbacks of :class:`~numbagrad.train.Trainer`.

A callback subclasses :class:`Callback` and overrides the hooks it needs; the Trainer calls
only overridden hooks, so an unused hook costs nothing per batch. Hooks, in the order
they run::

    on_fit_start(trainer)
      on_epoch_start(trainer, epoch)                        # epoch is 1-based
        on_batch_start(trainer, batch, batch_idx)           # batch_idx is 0-based in the epoch
        on_batch_end(trainer, batch, batch_idx, logs)       # logs: {"loss": float}
      on_validation_end(trainer, logs)                      # only with val_data: {"val_loss", "val_<m>"}
      on_epoch_end(trainer, epoch, logs)                    # logs: the epoch's row of History
    on_fit_end(trainer)                                     # also after StopTraining
    on_exception(trainer, exception)                        # any other exception, Ctrl-C included

``trainer.global_step`` counts optimizer steps (with ``grad_accum_steps=k``, one per ``k``
batches); ``trainer.optimizer_stepped`` says whether the batch just ended made one.
A callback stops training by setting ``trainer.should_stop = True`` (the epoch finishes,
then ``fit`` returns) or by raising :class:`~numbagrad.train.StopTraining` (``fit``
returns at once). ``state_dict()`` / ``load_state_dict()`` carry its state through
:meth:`Trainer.save` / ``fit(resume_from=...)``: plain data (numbers, str, None, arrays,
dicts and lists of these).

Checkpointing callbacks (:class:`ModelCheckpoint`) run after all others in each hook, so
the state they save includes the other callbacks' updates for that batch or epoch.

In a distributed run (a process group initialised) every rank runs every callback with
the same (reduced) logs, so their decisions agree; only rank 0 writes files (checkpoints,
CSV, TensorBoard) and shows the progress bar.
"""
import math
import numbers
import os
import re
import sys
import time
import warnings

import numpy as np

from ._distributed import is_rank0

__all__ = ["Callback", "EarlyStopping", "ModelCheckpoint", "CSVLogger", "TensorBoardLogger", "ProgressBar",
           "LearningRateMonitor", "TerminateOnNaN", "LambdaCallback", "GradientMonitor"]

HOOKS = ("on_fit_start", "on_fit_end", "on_epoch_start", "on_epoch_end", "on_batch_start", "on_batch_end",
         "on_validation_end", "on_exception")


class Callback:
    """Base class: every hook does nothing (see the module docstring for the hooks)."""

    _runs_last = False   # checkpointing callbacks: after the others in every hook

    def on_fit_start(self, trainer):
        pass

    def on_fit_end(self, trainer):
        pass

    def on_epoch_start(self, trainer, epoch):
        pass

    def on_epoch_end(self, trainer, epoch, logs):
        pass

    def on_batch_start(self, trainer, batch, batch_idx):
        pass

    def on_batch_end(self, trainer, batch, batch_idx, logs):
        pass

    def on_validation_end(self, trainer, logs):
        pass

    def on_exception(self, trainer, exception):
        pass

    def state_dict(self):
        """This callback's state as plain data (default: none)."""
        return {}

    def load_state_dict(self, state):
        """Restore :meth:`state_dict`'s output."""


def _check_mode(who, mode, monitor):
    if mode not in ("min", "max", "auto"):
        raise ValueError(f"{who}: mode must be 'min', 'max' or 'auto', got {mode!r}")
    if mode == "auto":
        # Keras: accuracy-like names are maximised, everything else minimised
        return "max" if monitor is not None and re.search(r"acc|auc|f1|precision|recall|r2", monitor) else "min"
    return mode


def _monitored(who, logs, monitor):
    if monitor not in logs or logs[monitor] is None:
        raise KeyError(f"{who}: monitor={monitor!r} is not in this epoch's logs; the logged names are "
                       f"{sorted(logs)} (val_* names need val_data in fit())")
    return float(logs[monitor])


class EarlyStopping(Callback):
    """Stop when ``monitor`` has not improved for ``patience`` epochs (Keras's
    ``EarlyStopping``).

    Parameters
    ----------
    monitor : str, default ``"val_loss"``
        A logged per-epoch name.
    mode : ``"min"``, ``"max"`` or ``"auto"`` (``max`` for accuracy-like names)
    patience : int, default 0
        Epochs without improvement before stopping (0: stop at the first one).
    min_delta : float, default 0
        An improvement must beat the best value by more than this.
    restore_best_weights : bool, default False
        At the end of ``fit`` (also after a stop or :class:`StopTraining`), load the
        parameters and buffers of the best epoch into the model.

    Attributes: ``best``, ``best_epoch``, ``wait``, ``stopped_epoch`` (0 if it never stopped).
    """

    def __init__(self, monitor="val_loss", mode="auto", patience=0, min_delta=0.0, restore_best_weights=False):
        if isinstance(patience, bool) or not isinstance(patience, numbers.Integral) or patience < 0:
            raise ValueError(f"EarlyStopping: patience must be an int >= 0, got {patience!r}")
        if not isinstance(min_delta, numbers.Real) or min_delta < 0 or math.isnan(min_delta):
            raise ValueError(f"EarlyStopping: min_delta must be a number >= 0, got {min_delta!r}")
        self.monitor = monitor
        self.mode = _check_mode("EarlyStopping", mode, monitor)
        self.patience = int(patience)
        self.min_delta = float(min_delta)
        self.restore_best_weights = bool(restore_best_weights)
        self.best = math.inf if self.mode == "min" else -math.inf
        self.best_epoch = 0
        self.wait = 0
        self.stopped_epoch = 0
        self.best_weights = None

    def _improved(self, value):
        if self.mode == "min":
            return value < self.best - self.min_delta
        return value > self.best + self.min_delta

    def on_epoch_end(self, trainer, epoch, logs):
        value = _monitored("EarlyStopping", logs, self.monitor)
        if self._improved(value):
            self.best, self.best_epoch, self.wait = value, epoch, 0
            if self.restore_best_weights:
                self.best_weights = {k: np.array(v.array if hasattr(v, "array") else v, copy=True)
                                     for k, v in trainer.model.state_dict().items()}
            return
        self.wait += 1
        if self.wait >= self.patience:
            self.stopped_epoch = epoch
            trainer.should_stop = True
            trainer.stop_reason = (f"EarlyStopping: {self.monitor} did not improve on {self.best:.6g} "
                                   f"(epoch {self.best_epoch}) for {self.wait} epoch(s)")

    def on_fit_end(self, trainer):
        if self.restore_best_weights and self.best_weights is not None:
            from ..tensor import Tensor
            trainer.model.load_state_dict({k: Tensor._from_array(v.copy()) for k, v in self.best_weights.items()})

    def state_dict(self):
        return {"best": self.best, "best_epoch": self.best_epoch, "wait": self.wait,
                "stopped_epoch": self.stopped_epoch, "best_weights": self.best_weights}

    def load_state_dict(self, state):
        self.best = float(state["best"])
        self.best_epoch = int(state["best_epoch"])
        self.wait = int(state["wait"])
        self.stopped_epoch = int(state["stopped_epoch"])
        bw = state.get("best_weights")
        self.best_weights = None if bw is None else {k: np.asarray(v) for k, v in bw.items()}


class ModelCheckpoint(Callback):
    """Write the whole training state (:meth:`Trainer.save`) to ``.h5`` files, atomically.

    Files are ``{dirpath}/epoch={E}-step={S}.h5`` (``S``: ``trainer.global_step``) and a
    copy of the newest at ``{dirpath}/last.h5``; each can be passed to
    ``fit(..., resume_from=path)``. On ``KeyboardInterrupt`` (Ctrl-C) during ``fit`` the
    state of the last finished batch is written to ``last.h5`` before the interrupt goes on.

    Parameters
    ----------
    dirpath : str or path (created if missing)
    monitor : str or None
        With ``save_best_only``, the per-epoch name whose best value decides.
    mode : ``"min"``, ``"max"`` or ``"auto"``
    save_best_only : bool, default False
        Write an epoch's file only when ``monitor`` improved.
    every_n_epochs : int or None, default 1
        Write at the end of every n-th epoch (None or 0: never at epoch ends).
    every_n_steps : int or None
        Also write after every n-th optimizer step (mid-epoch).
    keep_last : int or None
        Keep only the newest ``keep_last`` epoch/step files this callback wrote
        (``last.h5`` is kept).

    Attributes: ``best``, ``best_model_path``, ``last_model_path``, ``saved`` (paths kept).
    """

    _runs_last = True

    def __init__(self, dirpath, monitor=None, mode="auto", save_best_only=False, every_n_epochs=1,
                 every_n_steps=None, keep_last=None):
        for name, v in (("every_n_epochs", every_n_epochs), ("every_n_steps", every_n_steps),
                        ("keep_last", keep_last)):
            if v is not None and (isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < 0):
                raise ValueError(f"ModelCheckpoint: {name} must be None or an int >= 0, got {v!r}")
        if keep_last == 0:
            raise ValueError("ModelCheckpoint: keep_last must be None or >= 1, got 0")
        if save_best_only and monitor is None:
            raise ValueError("ModelCheckpoint: save_best_only=True needs monitor= (e.g. monitor='val_loss')")
        self.dirpath = os.fspath(dirpath)
        self.monitor = monitor
        self.mode = _check_mode("ModelCheckpoint", mode, monitor)
        self.save_best_only = bool(save_best_only)
        self.every_n_epochs = every_n_epochs or 0
        self.every_n_steps = every_n_steps or 0
        self.keep_last = keep_last
        self.best = math.inf if self.mode == "min" else -math.inf
        self.best_model_path = None
        self.last_model_path = None
        self.saved = []

    def _write(self, trainer, name):
        rank0 = is_rank0()           # every rank saves (it is collective); rank 0 writes
        if rank0:
            os.makedirs(self.dirpath, exist_ok=True)
        path = os.path.join(self.dirpath, name)
        last = os.path.join(self.dirpath, "last.h5")
        if name != "last.h5":
            if path in self.saved:        # the same step written again (an epoch's last batch, then its end)
                self.saved.remove(path)
            self.saved.append(path)
            self.last_model_path = path
        trainer.save(path)
        if path != last:
            trainer.save(last)
        if self.keep_last is not None:
            while len(self.saved) > self.keep_last:
                old = self.saved.pop(0)
                if rank0 and (old != self.best_model_path or not self.save_best_only):
                    try:
                        os.remove(old)
                    except FileNotFoundError:
                        pass
        return path

    def _name(self, trainer):
        return f"epoch={trainer.epoch}-step={trainer.global_step}.h5"

    def on_batch_end(self, trainer, batch, batch_idx, logs):
        if self.every_n_steps and trainer.optimizer_stepped and trainer.global_step % self.every_n_steps == 0:
            self._write(trainer, self._name(trainer))

    def on_epoch_end(self, trainer, epoch, logs):
        if not self.every_n_epochs or epoch % self.every_n_epochs:
            return
        if self.monitor is not None:
            value = _monitored("ModelCheckpoint", logs, self.monitor)
            better = value < self.best if self.mode == "min" else value > self.best
            if better:
                self.best = value
            elif self.save_best_only:
                return
        path = self._name(trainer)
        if self.monitor is not None and self.best == value:
            self.best_model_path = os.path.join(self.dirpath, path)
        self._write(trainer, path)

    def on_exception(self, trainer, exception):
        if not isinstance(exception, KeyboardInterrupt):
            return
        if trainer._consistent:
            self._write(trainer, "last.h5")
        else:
            warnings.warn("ModelCheckpoint: KeyboardInterrupt inside a training step (not through Ctrl-C, which "
                          "waits for the step to end): the state is not a batch boundary, so no checkpoint was "
                          f"written; the last one is {self.last_model_path!r}", RuntimeWarning, stacklevel=2)

    def state_dict(self):
        return {"best": self.best, "best_model_path": self.best_model_path,
                "last_model_path": self.last_model_path, "saved": list(self.saved)}

    def load_state_dict(self, state):
        self.best = float(state["best"])
        self.best_model_path = state["best_model_path"]
        self.last_model_path = state["last_model_path"]
        self.saved = list(state["saved"])


class CSVLogger(Callback):
    """Write each epoch's logs as a CSV row to ``path`` (the header is rewritten whenever a
    new name appears, so the file always equals ``History.to_csv()``)."""

    def __init__(self, path):
        self.path = os.fspath(path)

    def on_epoch_end(self, trainer, epoch, logs):
        from ..io._atomic import atomic_path
        if not is_rank0():
            return
        with atomic_path(self.path) as tmp:
            trainer.history.to_csv(tmp)


class _ClosesHandle(Callback):
    """A callback holding a handle with a ``close()`` (the attribute named ``_handle``: a
    writer, a bar), which it closes and drops when fit ends, normally or by an exception."""

    _handle = None

    def on_fit_end(self, trainer):
        handle = getattr(self, self._handle)
        if handle is not None:
            handle.close()
            setattr(self, self._handle, None)

    def on_exception(self, trainer, exception):
        self.on_fit_end(trainer)


class TensorBoardLogger(_ClosesHandle):
    """Write every per-epoch value (tag ``epoch/<name>``, step = epoch) and every per-step
    value (tag ``step/<name>``, step = global step) to TensorBoard event files under
    ``logdir`` through ``tensorboardX`` (an optional extra:
    ``pip install numbagrad[tensorboard]``)."""

    _handle = "writer"

    def __init__(self, logdir, flush_secs=10):
        try:
            import tensorboardX  # noqa: F401
        except ImportError as e:
            raise ImportError("TensorBoardLogger needs tensorboardX, an optional extra: "
                              "pip install 'numbagrad[tensorboard]' (or pip install tensorboardX)") from e
        self.logdir = os.fspath(logdir)
        self.flush_secs = flush_secs
        self.writer = None
        self._sent = {}

    def on_fit_start(self, trainer):
        from tensorboardX import SummaryWriter
        if self.writer is None and is_rank0():
            self.writer = SummaryWriter(self.logdir, flush_secs=self.flush_secs)

    def on_epoch_end(self, trainer, epoch, logs):
        if self.writer is None:          # not rank 0
            return
        for k, v in logs.items():
            self.writer.add_scalar(f"epoch/{k}", v, epoch)
        for k, (steps, values) in trainer.history.step_history.items():
            start = self._sent.get(k, 0)
            for s, v in zip(steps[start:], values[start:]):
                self.writer.add_scalar(f"step/{k}", v, s)
            self._sent[k] = len(steps)
        self.writer.flush()

    def state_dict(self):
        return {"sent": dict(self._sent)}

    def load_state_dict(self, state):
        self._sent = {k: int(v) for k, v in state["sent"].items()}


class ProgressBar(_ClosesHandle):
    """A tqdm bar over each epoch's batches with the running mean loss, then the epoch's
    logs (loss, metrics, val_*) when the epoch ends.

    Parameters
    ----------
    file : stream, default ``sys.stderr``
    disable : bool or None, default None (on when ``file`` is a terminal)
    leave : bool, default False (one bar, reused epoch after epoch, removed at the end;
        True: each epoch's bar stays on its own line)
    mininterval : float, default 0.1
        Seconds between redraws. The bar's count and postfix are handed to tqdm only
        when a redraw is due, so a batch costs one clock read.
    """

    _handle = "bar"

    def __init__(self, file=None, disable=None, leave=False, mininterval=0.1):
        self.file = file
        self.disable = disable
        self.leave = leave
        self.mininterval = float(mininterval)
        self.bar = None
        self._pending = 0
        self._next = 0.0

    def _stream(self):
        return self.file if self.file is not None else sys.stderr

    def enabled(self):
        if not is_rank0():
            return False
        if self.disable is not None:
            return not self.disable
        isatty = getattr(self._stream(), "isatty", None)
        return bool(isatty and isatty())

    def on_epoch_start(self, trainer, epoch):
        if not self.enabled():
            return
        try:
            total = len(trainer._train_data)
        except TypeError:
            total = None
        desc = f"epoch {epoch}/{trainer.max_epochs}"
        if self.bar is not None and not self.leave:
            # tqdm's reset() without its immediate redraw (the next one is due in mininterval)
            bar = self.bar
            bar.n = bar.last_print_n = 0
            bar.total = total
            bar.start_t = bar.last_print_t = bar._time()
            bar.desc = desc + ": "
        else:
            from tqdm import tqdm
            self.bar = tqdm(total=total, desc=desc, unit="batch", leave=self.leave, file=self._stream(),
                            disable=False, mininterval=self.mininterval)
        self._pending = 0
        self._next = time.monotonic() + self.mininterval

    def on_batch_end(self, trainer, batch, batch_idx, logs):
        if self.bar is None:
            return
        self._pending += 1
        now = time.monotonic()
        if now >= self._next:
            self._next = now + self.mininterval
            self.bar.set_postfix(loss=f"{trainer.running_loss():.4f}", refresh=False)
            self.bar.update(self._pending)
            self._pending = 0

    def on_epoch_end(self, trainer, epoch, logs):
        if self.bar is None:
            return
        self.bar.n += self._pending
        self._pending = 0
        # shown at once when each epoch keeps its line; else with the next redraw
        self.bar.set_postfix({k: f"{v:.4f}" for k, v in logs.items()}, refresh=self.leave)
        if self.leave:
            self.bar.close()
            self.bar = None


class LearningRateMonitor(Callback):
    """Record the learning rate each batch was trained with: ``lr`` (one parameter group)
    or ``lr/group<i>``; the per-epoch value is the epoch's mean."""

    def on_batch_start(self, trainer, batch, batch_idx):
        groups = trainer.optimizer.param_groups
        if len(groups) == 1:
            trainer.record("lr", float(groups[0]["lr"]))
        else:
            for i, g in enumerate(groups):
                trainer.record(f"lr/group{i}", float(g["lr"]))


class TerminateOnNaN(Callback):
    """Stop (:class:`StopTraining`) at the first batch whose loss is NaN or infinite, with
    a ``RuntimeWarning`` naming the epoch, the batch, the global step and the loss."""

    def on_batch_end(self, trainer, batch, batch_idx, logs):
        loss = logs["loss"]
        if not math.isfinite(loss):
            from .trainer import StopTraining
            msg = (f"TerminateOnNaN: loss is {loss} at epoch {trainer.epoch}, batch {batch_idx}, "
                   f"step {trainer.global_step}; training stopped")
            warnings.warn(msg, RuntimeWarning, stacklevel=2)
            raise StopTraining(msg)


class LambdaCallback(Callback):
    """A callback from functions: ``LambdaCallback(on_epoch_end=lambda trainer, epoch,
    logs: ...)``; any hook of :class:`Callback` may be given (same arguments)."""

    def __init__(self, **hooks):
        for name, fn in hooks.items():
            if name not in HOOKS:
                raise TypeError(f"LambdaCallback: unknown hook {name!r}; the hooks are {list(HOOKS)}")
            if not callable(fn):
                raise TypeError(f"LambdaCallback: {name} must be callable, got {type(fn).__name__}")
            setattr(self, name, fn)


class GradientMonitor(Callback):
    """Record the L2 norm of each parameter's gradient after every optimizer step
    (``grad_norm/<parameter name>``) and of all of them together (``grad_norm/total``),
    flodl's per-parameter gradient report without the hand-written loop. With a
    ``clip_grad_norm`` the norms are those after clipping (what the optimizer used).

    Parameters
    ----------
    every_n_steps : int, default 1
    """

    def __init__(self, every_n_steps=1):
        if isinstance(every_n_steps, bool) or not isinstance(every_n_steps, numbers.Integral) or every_n_steps < 1:
            raise ValueError(f"GradientMonitor: every_n_steps must be an int >= 1, got {every_n_steps!r}")
        self.every_n_steps = int(every_n_steps)
        self._params = None

    def on_fit_start(self, trainer):
        self._params = [(n, p) for n, p in trainer.model.named_parameters() if p.requires_grad]

    def on_batch_end(self, trainer, batch, batch_idx, logs):
        if not trainer.optimizer_stepped or trainer.global_step % self.every_n_steps:
            return
        total = 0.0
        for name, p in self._params:
            if p.grad is None:
                continue
            g = np.asarray(p.grad.cpu().array if p.grad.device.type != "cpu" else p.grad.array)
            sq = float(np.dot(g.ravel().astype(np.float64), g.ravel().astype(np.float64)))
            total += sq
            trainer.record(f"grad_norm/{name}", math.sqrt(sq))
        trainer.record("grad_norm/total", math.sqrt(total))
