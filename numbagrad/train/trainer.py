"""``Trainer``: the training loop, written once (Keras's ``fit``, Lightning's ``Trainer``).

Two forms::

    Trainer(model, optimizer, loss_fn, max_epochs=10, metrics=["accuracy"]).fit(train, val)
    Trainer(model, optimizer, step=lambda model, batch: loss_or_(loss, outputs)).fit(train)

Each training batch runs: ``on_batch_start`` callbacks; ``zero_grad`` at the start of each
accumulation window; the forward (under ``autocast`` if given) and the loss;
``backward`` of ``loss / grad_accum_steps`` (scaled by the ``GradScaler`` if given); after
``grad_accum_steps`` batches (or the epoch's last one), unscale, clip and the optimizer
step, then a per-step scheduler's ``step()``; metric updates under ``no_grad``; the
observed tags reduced and recorded; ``on_batch_end`` callbacks; then the tags are detached.
Gradients are zeroed at the start of a window, not after the step, so ``on_batch_end``
callbacks (:class:`~numbagrad.train.GradientMonitor`) see them.

Logged names (Keras/Lightning): ``loss`` (the epoch's sample-weighted mean of the batch
losses), ``<metric>``, ``val_loss``, ``val_<metric>``, and the epoch means of recorded
scalars. They go into :class:`~numbagrad.train.History`, which :meth:`Trainer.fit` returns.

Exact resume: :meth:`Trainer.save` writes model, optimizer, scheduler, scaler, the
DataLoader's position, every RNG (numbagrad's, Python's ``random``, NumPy's legacy global
one), the history, the epoch's running sums and metric states, gradients of an unfinished
accumulation window and each callback's ``state_dict()`` to one HDF5 file
(``numbagrad.save``); ``fit(data, resume_from=path)`` continues from there, mid-epoch
included, and gives the uninterrupted run's history and parameters bit for bit.

Data parallel: when a process group is initialised (``numbagrad.distributed``), ``fit``
runs unchanged on every rank: the model is wrapped in ``DistributedDataParallel`` (unless
it is one), each batch of ``train_data`` / ``val_data`` is the global batch, of which each
rank trains on its share (a DataLoader's share only is loaded), the batch losses, metrics
and recorded scalars are reduced over the ranks, only rank 0 shows progress and writes
files, and checkpoints hold the global position, so they resume on any number of ranks.
See ``numbagrad/train/_distributed.py`` for the details.
"""
import contextlib
import copy
import math
import numbers
import random as _pyrandom
import signal
import threading

import numpy as np

from .. import random as _ngrandom
from ..autograd import no_grad
from ..tensor import Tensor
from . import _distributed as _dp
from .callbacks import HOOKS, Callback, ModelCheckpoint, ProgressBar
from .history import History

__all__ = ["Trainer", "StopTraining"]

FORMAT = "numbagrad.train.Trainer"
FORMAT_VERSION = 1


class StopTraining(Exception):
    """Raise from anywhere inside :meth:`Trainer.fit` (a callback, the step function, a
    loss) to end training cleanly: ``fit`` returns the history so far, ``on_fit_end``
    callbacks run (so :class:`EarlyStopping` restores its best weights), and the message
    is kept as ``trainer.stop_reason`` and ``history.stop_reason``. The epoch in progress
    is not added to the per-epoch history (its steps are in the per-step one)."""


def _check_int(who, name, v, lo):
    if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < lo:
        raise ValueError(f"{who}: {name} must be an int >= {lo}, got {v!r}")
    return int(v)


def _batch_size(obj):
    """Samples in a target or batch: the leading size of its first tensor or array (depth
    first through tuples, lists and dict values), else a list's length, else 1."""
    shape = getattr(obj, "shape", None)
    if shape is not None:
        return int(shape[0]) if len(shape) else 1
    items = obj.values() if isinstance(obj, dict) else obj if isinstance(obj, (list, tuple)) else ()
    for item in items:
        if item is not None and (hasattr(item, "shape") or isinstance(item, (list, tuple, dict))):
            return _batch_size(item)
    return len(obj) if isinstance(obj, list) else 1      # a list of labels


def _to_device(obj, device):
    if isinstance(obj, Tensor):
        return obj if obj.device.type == device.type else obj.to(device)
    if isinstance(obj, (list, tuple)):
        return type(obj)(_to_device(o, device) for o in obj)
    if isinstance(obj, dict):
        return {k: _to_device(v, device) for k, v in obj.items()}
    return obj


def _scalar(v):
    if isinstance(v, Tensor):
        return v.item()
    if isinstance(v, np.ndarray):
        return float(v.reshape(()))
    return float(v)


def _overrides(cb, hook):
    """Whether ``cb`` does something in ``hook`` (an override or an instance attribute)."""
    return hook in vars(cb) or getattr(type(cb), hook) is not getattr(Callback, hook)


def _python_rng_state():
    version, internal, gauss = _pyrandom.getstate()
    return {"version": int(version), "state": np.asarray(internal, np.int64), "gauss_next": gauss}


def _set_python_rng_state(s):
    _pyrandom.setstate((int(s["version"]), tuple(int(x) for x in np.asarray(s["state"])),
                        None if s["gauss_next"] is None else float(s["gauss_next"])))


def _numpy_rng_state():
    name, keys, pos, has_gauss, cached = np.random.get_state()
    return {"name": str(name), "keys": np.asarray(keys, np.uint32), "pos": int(pos), "has_gauss": int(has_gauss),
            "cached_gaussian": float(cached)}


def _set_numpy_rng_state(s):
    np.random.set_state((s["name"], np.asarray(s["keys"], np.uint32), int(s["pos"]), int(s["has_gauss"]),
                         float(s["cached_gaussian"])))


class Trainer:
    """Fit, evaluate and predict with a model, an optimizer and a loss (or a step function).

    Parameters
    ----------
    model : numbagrad.nn.Module
    optimizer : numbagrad.optim.Optimizer
    loss_fn : callable ``loss_fn(outputs, target) -> 0-d Tensor``, or None with ``step=``
    step : callable ``step(model, batch) -> loss`` or ``-> (loss, outputs)``, optional
        The step-closure form: the function computes the loss from a whole batch (any
        structure); the Trainer does backward, accumulation, clipping, scaling and the
        optimizer step. ``outputs`` (if returned) and ``batch[1]`` feed the metrics.
        In a distributed fit it receives the ``DistributedDataParallel`` wrapper (its
        forward decides whether backward syncs; ``model.module`` is yours).
    scheduler : LR scheduler, optional
    scheduler_interval : ``"epoch"`` (default) or ``"step"``
        When ``scheduler.step()`` runs: after each epoch (after validation) or after each
        optimizer step. A ``ReduceLROnPlateau`` steps per epoch on ``scheduler_monitor``.
    scheduler_monitor : str, optional
        The logged name a ``ReduceLROnPlateau`` steps on (default ``"val_loss"`` when
        ``fit`` has ``val_data``, else ``"loss"``).
    metrics : dict ``{name: metric}``, or a list of stateful metrics or ``"accuracy"``
        :mod:`numbagrad.metrics` stateful metrics (``reset``/``update(outputs, target)``/
        ``compute``); logged as ``<name>`` and ``val_<name>`` (a list's names are each
        metric's ``name``).
    callbacks : iterable of :class:`~numbagrad.train.Callback`
    max_epochs : int, default 1
    grad_accum_steps : int, default 1
        Batches per optimizer step; each batch's loss is divided by it, so with a mean
        loss and equal batch sizes the gradient is that of one k-times larger batch.
    clip_grad_norm : float, optional
        Clip the total gradient L2 norm to this (after unscaling) before each step.
    autocast : None, True, a dtype, or a dict of ``numbagrad.autocast`` arguments
        Run forward and loss under ``numbagrad.autocast`` (``True``: the device's default
        lower-precision dtype).
    grad_scaler : numbagrad.amp.GradScaler, optional
    device : str or numbagrad.device, default ``"cpu"``
        Batches are moved there (the model must already be there).
    seed : int, optional
        ``fit`` seeds numbagrad's generator, Python's ``random`` and NumPy's global RNG
        with it (not when resuming), so two runs give the same history bit for bit.
    progress : bool or None, default None
        Add a :class:`ProgressBar` (None: only when stderr is a terminal). In a
        distributed run only rank 0 shows it.
    shard_data : bool, default True
        In a distributed run (a process group is initialised), give each rank its share
        of every batch of ``train_data`` / ``val_data`` (see the module docstring).
        ``False`` (or a DataLoader over a ``DistributedSampler``): each rank trains on
        what its own data yields; the model is still wrapped and the logs reduced.

    Attributes
    ----------
    history : History
    epoch : int
        The current (or last) epoch, 1-based; 0 before the first.
    global_step : int
        Optimizer steps taken.
    batch_in_epoch : int
        Batches trained in the current epoch.
    should_stop : bool
        Set it (from a callback) to end ``fit`` after the current epoch.
    stop_reason : str or None
    tags : dict
        The observed outputs of the current step (see :meth:`observe`).

    The callbacks are fixed at construction (the Trainer keeps, per hook, the list of
    callbacks that override it).
    """

    def __init__(self, model, optimizer, loss_fn=None, *, step=None, scheduler=None, scheduler_interval="epoch",
                 scheduler_monitor=None, metrics=None, callbacks=(), max_epochs=1, grad_accum_steps=1,
                 clip_grad_norm=None, autocast=None, grad_scaler=None, device="cpu", seed=None, progress=None,
                 shard_data=True):
        from ..device import device as _device
        from ..nn import Module
        from ..optim.lr_scheduler import ReduceLROnPlateau
        who = "Trainer"
        if not isinstance(model, Module):
            raise TypeError(f"{who}: model must be a numbagrad.nn.Module, got {type(model).__name__}")
        if not (hasattr(optimizer, "step") and hasattr(optimizer, "zero_grad")):
            raise TypeError(f"{who}: optimizer must be an optimizer (with step() and zero_grad()), got "
                            f"{type(optimizer).__name__}")
        if (loss_fn is None) == (step is None):
            raise TypeError(f"{who}: give exactly one of loss_fn (Trainer(model, optimizer, loss_fn)) and step= "
                            f"(Trainer(model, optimizer, step=fn)); got "
                            + ("both" if loss_fn is not None else "neither"))
        for name, fn in (("loss_fn", loss_fn), ("step", step)):
            if fn is not None and not callable(fn):
                raise TypeError(f"{who}: {name} must be callable, got {type(fn).__name__}")
        if scheduler_interval not in ("epoch", "step"):
            raise ValueError(f"{who}: scheduler_interval must be 'epoch' or 'step', got {scheduler_interval!r}")
        self._plateau = isinstance(scheduler, ReduceLROnPlateau)
        if self._plateau and scheduler_interval != "epoch":
            raise ValueError(f"{who}: a ReduceLROnPlateau scheduler steps on an epoch's metric: use "
                             "scheduler_interval='epoch'")
        if scheduler is not None and not hasattr(scheduler, "step"):
            raise TypeError(f"{who}: scheduler must be an LR scheduler, got {type(scheduler).__name__}")
        if clip_grad_norm is not None and (isinstance(clip_grad_norm, bool) or not isinstance(
                clip_grad_norm, numbers.Real) or not clip_grad_norm > 0):
            raise ValueError(f"{who}: clip_grad_norm must be None or a number > 0, got {clip_grad_norm!r}")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, numbers.Integral)):
            raise TypeError(f"{who}: seed must be an int or None, got {type(seed).__name__} {seed!r}")
        if grad_scaler is not None and not hasattr(grad_scaler, "scale"):
            raise TypeError(f"{who}: grad_scaler must be a numbagrad.amp.GradScaler, got "
                            f"{type(grad_scaler).__name__}")
        self.model = model
        self._module = _dp.unwrap(model)  # what checkpoints hold (without DDP's "module." prefix)
        self._net = model                 # what training calls: the DDP wrapper in a distributed fit
        self._ddp = None
        self._views = {}                  # id(data) -> (data, its rank's view), for distributed runs
        self._view = None                 # the training data's view in a distributed fit
        self._dist = None                 # (rank, world size) during a distributed fit
        self.shard_data = bool(shard_data)
        self.optimizer = optimizer
        self.loss_fn = loss_fn
        self.step_fn = step
        self.scheduler = scheduler
        self.scheduler_interval = scheduler_interval
        self.scheduler_monitor = scheduler_monitor
        self.max_epochs = _check_int(who, "max_epochs", max_epochs, 0)
        self.grad_accum_steps = _check_int(who, "grad_accum_steps", grad_accum_steps, 1)
        self.clip_grad_norm = None if clip_grad_norm is None else float(clip_grad_norm)
        self.grad_scaler = grad_scaler
        self.device = _device(device)
        self.seed = None if seed is None else int(seed)
        self._autocast = self._make_autocast(autocast)
        self.metrics = self._make_metrics(metrics)
        self.val_metrics = {k: copy.deepcopy(m) for k, m in self.metrics.items()}
        cbs = list(callbacks)
        for cb in cbs:
            if not isinstance(cb, Callback):
                raise TypeError(f"{who}: callbacks must be numbagrad.train.Callback instances, got "
                                f"{type(cb).__name__}")
        if progress is None:
            import sys
            progress = bool(getattr(sys.stderr, "isatty", lambda: False)())
        if progress and not any(isinstance(cb, ProgressBar) for cb in cbs):
            cbs.append(ProgressBar(disable=False))
        # checkpointing callbacks last (stable), so what they save includes the others' updates
        self.callbacks = [cb for cb in cbs if not cb._runs_last] + [cb for cb in cbs if cb._runs_last]
        self._hooks = {h: [getattr(cb, h) for cb in self.callbacks if _overrides(cb, h)] for h in HOOKS}
        self._params = [p for p in model.parameters() if p.requires_grad]
        self.history = History()
        self.epoch = 0
        self.global_step = 0
        self.batch_in_epoch = 0
        self.optimizer_stepped = False
        self.should_stop = False
        self.stop_reason = None
        self.tags = {}
        self._observers = {}
        self._observing = False
        self._fresh = []                 # names observed in the current step, in order
        self._epoch_in_progress = False
        self._accum = 0
        self._loss_total = 0.0
        self._loss_count = 0
        self._records = {}
        self._pending_loader = None      # a loaded loader state, for the next fit()
        self._resumed = False
        self._fitted = False
        self._consistent = True          # the state is a batch/epoch boundary (a checkpoint resumes exactly)
        self._interrupt = False
        self._train_data = None

    # ---- construction helpers --------------------------------------------------------------
    def _make_autocast(self, spec):
        if spec is None or spec is False:
            return None
        from ..amp import autocast
        if spec is True:
            return autocast(self.device.type)
        if isinstance(spec, dict):
            return autocast(**{"device_type": self.device.type, **spec})
        return autocast(self.device.type, dtype=spec)

    @staticmethod
    def _make_metrics(metrics):
        from .. import metrics as M
        if metrics is None:
            return {}
        if isinstance(metrics, dict):
            items = list(metrics.items())
        elif isinstance(metrics, (list, tuple)):
            items = []
            for m in metrics:
                if isinstance(m, str):
                    if m not in ("accuracy", "acc"):
                        raise ValueError(f"Trainer: unknown metric name {m!r}; pass a metric object "
                                         "(numbagrad.metrics.F1Score(...)) or 'accuracy'")
                    m = M.Accuracy()
                items.append((getattr(m, "name", type(m).__name__.lower()), m))
        else:
            raise TypeError(f"Trainer: metrics must be a dict {{name: metric}} or a list, got "
                            f"{type(metrics).__name__}")
        out = {}
        for name, m in items:
            if isinstance(m, str) and m in ("accuracy", "acc"):
                m = M.Accuracy()
            if not all(hasattr(m, a) for a in ("reset", "update", "compute")):
                raise TypeError(f"Trainer: metric {name!r} must be a stateful metric with reset/update/compute, "
                                f"got {type(m).__name__}")
            if not isinstance(name, str) or name in out or name == "loss" or name.startswith("val_"):
                raise ValueError(f"Trainer: metric name {name!r} is repeated, reserved ('loss') or starts with "
                                 "'val_'; name the metrics with a dict")
            out[name] = m
        return out

    # ---- observation -----------------------------------------------------------------------
    def record(self, name, value):
        """Record a scalar (a number or a one-element Tensor) under ``name`` at the current
        step: it joins the per-step series, and the epoch's mean goes into the per-epoch
        history (``History[name]``)."""
        if not isinstance(name, str) or name in ("loss", "epoch") or name in self.metrics:
            raise ValueError(f"Trainer.record: name must be a str other than 'loss', 'epoch' and the metric "
                             f"names, got {name!r}")
        v = _scalar(value)
        r = self._records.get(name)
        if r is None:
            self._records[name] = [v, 1]
        else:
            r[0] += v
            r[1] += 1
        self.history.log_step(self.global_step, name, v)

    def observe(self, module, name, reduce=None):
        """Tag ``module``'s output during training steps as ``trainer.tags[name]``.

        A forward hook keeps the output of the step's last call of ``module``; after the
        step ``reduce(output)`` (default: the mean) is recorded under ``name`` (see
        :meth:`record`), and after ``on_batch_end`` the tag is replaced by its detached
        copy, so no graph outlives its step. A step that does not call ``module`` records
        nothing for it. Validation, ``evaluate`` and ``predict`` do not tag. Returns the
        hook's handle (``.remove()``)."""
        from ..nn import Module
        if not isinstance(module, Module):
            raise TypeError(f"Trainer.observe: module must be a numbagrad.nn.Module, got {type(module).__name__}")
        if not isinstance(name, str):
            raise TypeError(f"Trainer.observe: name must be a str, got {type(name).__name__}")
        if reduce is not None and not callable(reduce):
            raise TypeError(f"Trainer.observe: reduce must be callable, got {type(reduce).__name__}")
        if name in self._observers:
            raise ValueError(f"Trainer.observe: {name!r} is already observed")
        tags, fresh = self.tags, self._fresh

        def hook(mod, args, output):
            if self._observing:
                if name not in fresh:
                    fresh.append(name)
                tags[name] = output
        handle = module.register_forward_hook(hook)
        self._observers[name] = (reduce if reduce is not None else (lambda t: t.mean()), handle)
        return handle

    def running_loss(self):
        """The mean training loss of the epoch so far (nan before its first batch)."""
        return self._loss_total / self._loss_count if self._loss_count else math.nan

    # ---- the loop ----------------------------------------------------------------------------
    def _call(self, hook, *args):
        for fn in self._hooks[hook]:
            fn(self, *args)

    def _forward(self, batch, net=None):
        """``(loss, outputs, target)`` of one batch, through ``net`` (default: the model)."""
        net = self.model if net is None else net
        if self.step_fn is not None:
            out = self.step_fn(net, batch)
            loss, outputs = out if isinstance(out, tuple) else (out, None)
            target = batch[1] if isinstance(batch, (tuple, list)) and len(batch) >= 2 else None
        else:
            if not isinstance(batch, (tuple, list)) or len(batch) != 2:
                raise TypeError(f"Trainer: a batch must be (input, target) with loss_fn; got "
                                f"{type(batch).__name__}" + (f" of length {len(batch)}" if hasattr(batch, "__len__")
                                                             else "") + "; use step= for other batch structures")
            x, target = batch
            outputs = net(x)
            loss = self.loss_fn(outputs, target)
        if not isinstance(loss, Tensor):
            raise TypeError(f"Trainer: the loss must be a Tensor, got {type(loss).__name__}")
        return loss, outputs, target

    def _optimizer_step(self):
        scaler, opt = self.grad_scaler, self.optimizer
        if self.clip_grad_norm is not None:
            from ..nn.utils import clip_grad_norm_
            if scaler is not None:
                scaler.unscale_(opt)
            clip_grad_norm_(self._params, self.clip_grad_norm)
        if scaler is not None:
            scaler.step(opt)
            scaler.update()
        else:
            opt.step()
        self._accum = 0
        self.global_step += 1
        self.optimizer_stepped = True
        if self.scheduler is not None and self.scheduler_interval == "step":
            self.scheduler.step()

    def _train_batch(self, batch, batch_idx):
        self.optimizer_stepped = False
        if self._hooks["on_batch_start"]:
            self._call("on_batch_start", batch, batch_idx)
        self._consistent = False
        if self.device.type != "cpu":
            batch = _to_device(batch, self.device)
        if self._accum == 0:
            self.optimizer.zero_grad()
        k = self.grad_accum_steps
        ddp, n_local = (self._ddp if self._dist is not None else None), None
        # DDP decides at the forward whether its backward syncs: not before a window's last batch
        local = ddp.no_sync() if ddp is not None and self._accum + 1 < k else contextlib.nullcontext()
        self._observing = bool(self._observers)
        try:
            with local:
                if self._autocast is not None:
                    with self._autocast:
                        loss, outputs, target = self._forward(batch, self._net)
                else:
                    loss, outputs, target = self._forward(batch, self._net)
        finally:
            self._observing = False
        bl = loss / k if k > 1 else loss
        if ddp is not None:              # a distributed fit: weight this rank's share (module docstring)
            n_local = self._view.current.n_local if self._view is not None else _batch_size(
                target if target is not None else batch)
            w = self._view.current.weight(self._dist[1]) if self._view is not None else 1.0
            if w != 1.0:
                bl = bl * w
        if self.grad_scaler is not None:
            bl = self.grad_scaler.scale(bl)
        bl.backward()
        self._accum += 1
        if self._accum == k:
            self._optimizer_step()
        v = loss.item()
        if n_local is None:
            n = _batch_size(target if target is not None else batch)
        else:                             # the global batch's loss, the same on every rank
            tot = _dp.all_reduce_array(np.array([v * n_local if n_local else 0.0, n_local], np.float64))
            n = int(tot[1])
            v = tot[0] / n if n else math.nan
        self._loss_total += v * n
        self._loss_count += n
        self.history.log_step(self.global_step, "loss", v)
        if self.metrics and outputs is not None and target is not None and n_local != 0:
            with no_grad():
                out = outputs.detach() if isinstance(outputs, Tensor) else outputs
                for m in self.metrics.values():
                    m.update(out, target)
        self.batch_in_epoch += 1
        fresh = self._fresh                   # tags set by this step's forward
        if fresh:
            with no_grad():
                for name in fresh:
                    self.record(name, self._observers[name][0](self.tags[name]))
        self._consistent = True
        if self._hooks["on_batch_end"]:
            self._call("on_batch_end", batch, batch_idx, {"loss": v})
        if fresh:
            tags = self.tags
            for name in fresh:
                t = tags[name]
                tags[name] = t.detach() if isinstance(t, Tensor) else t
            fresh.clear()
        if self._interrupt:
            raise KeyboardInterrupt

    def _run_epoch(self):
        model = self.model
        resumed, self._resumed = self._epoch_in_progress and self._resumed, False
        if not resumed:                       # else: continue the loaded epoch
            self.epoch += 1
            self.batch_in_epoch = 0
            self._accum = 0                   # (an epoch cut short by an exception may have left one)
            self._loss_total, self._loss_count = 0.0, 0
            self._records = {}
            for m in self.metrics.values():
                m.reset()
            self._epoch_in_progress = True
        model.train()
        if self._hooks["on_epoch_start"]:
            self._call("on_epoch_start", self.epoch)
        idx = self.batch_in_epoch
        for batch in self._train_data:
            self._train_batch(batch, idx)
            idx += 1
        self._consistent = False
        if self._accum:                       # a last, short accumulation window
            self.optimizer_stepped = False
            if self._dist is not None:        # its last backward ran under no_sync
                _dp.sync_grads(self._params)
            self._optimizer_step()
        logs = {"loss": self.running_loss()}
        if self._dist is not None:            # each rank's counts -> the global ones
            _dp.merge_metrics(self.metrics)
        for name, m in self.metrics.items():
            logs[name] = float(m.compute())
        if self._val_data is not None:
            val = self._evaluate(self._val_data, "val_", self.val_metrics)
            logs.update(val)
            if self._hooks["on_validation_end"]:
                self._call("on_validation_end", val)
        if self._dist is not None:
            self._records = _dp.merge_records(self._records)
        for name, (s, c) in self._records.items():
            logs[name] = s / c
        if self._dist is not None and self._dist[0] != 0:
            self._local_states_zero()         # the global states now live on rank 0 (what checkpoints hold)
        if self.scheduler is not None and self.scheduler_interval == "epoch":
            if self._plateau:
                key = self.scheduler_monitor or ("val_loss" if self._val_data is not None else "loss")
                if key not in logs:
                    raise KeyError(f"Trainer: scheduler_monitor={key!r} is not in this epoch's logs "
                                   f"{sorted(logs)}")
                self.scheduler.step(logs[key])
            else:
                self.scheduler.step()
        self._epoch_in_progress = False
        self.batch_in_epoch = 0
        self.history.log_epoch(self.epoch, logs)
        self._consistent = True
        if self._hooks["on_epoch_end"]:
            self._call("on_epoch_end", self.epoch, logs)
        if self._dist is not None:            # a callback that stopped on one rank stops all
            self.should_stop = _dp.any_rank(self.should_stop)
        if self._interrupt:
            raise KeyboardInterrupt

    def _local_states_zero(self):
        """Reset this rank's running metric states: in a distributed run, after a merge or
        a load, rank 0 alone holds the global ones, so the next merge counts them once."""
        for m in self.metrics.values():
            m.reset()

    def _rank_view(self, data):
        """``data`` as this rank sees it in a distributed run (see ``_distributed.py``):
        a sharded view, or ``data`` itself (``shard_data=False``, a DistributedSampler)."""
        if data is None or isinstance(data, (_dp.ShardedLoader, _dp.SlicedBatches)):
            return data
        if not self.shard_data or _dp.already_sharded(data):
            return data
        hit = self._views.get(id(data))
        if hit is None or hit[0] is not data:
            rank, world = self._dist
            view = (_dp.ShardedLoader(data, rank, world) if _dp.shardable(data)
                    else _dp.SlicedBatches(data, rank, world, _batch_size))
            hit = self._views[id(data)] = (data, view)
        return hit[1]

    def _start_distributed(self, train_data, val_data):
        """Wrap the model in DDP (once) and return the ranks' views of the data."""
        from ..nn.parallel import DistributedDataParallel
        for name, m in self.metrics.items():
            if not (hasattr(m, "state_arrays") and hasattr(m, "load_state_arrays")):
                raise TypeError(f"Trainer.fit: metric {name!r} ({type(m).__name__}) has no state_arrays() / "
                                "load_state_arrays(), which a distributed fit needs to merge its state over the "
                                "ranks; subclass numbagrad.metrics.Metric (see numbagrad/metrics/stateful.py)")
        if self._ddp is None:
            self._ddp = (self.model if isinstance(self.model, DistributedDataParallel)
                         else DistributedDataParallel(self.model))
        self._net = self._ddp
        train_view = self._rank_view(train_data)
        self._view = train_view if isinstance(train_view, (_dp.ShardedLoader, _dp.SlicedBatches)) else None
        return train_view, self._rank_view(val_data)

    def fit(self, train_data, val_data=None, *, resume_from=None):
        """Train for ``max_epochs`` epochs (counting those already done); returns
        :attr:`history`.

        ``train_data`` / ``val_data``: a DataLoader, a Pipeline, or any re-iterable of
        ``(input, target)`` batches (any batch structure with ``step=``).
        ``resume_from``: a file from :meth:`save` or :class:`ModelCheckpoint`: the state is
        loaded (:meth:`load`) and training continues where it was saved, mid-epoch
        included; that needs ``train_data`` with ``load_state_dict`` (a DataLoader).

        Ctrl-C: with a :class:`ModelCheckpoint`, the first Ctrl-C lets the batch in
        progress finish, writes ``last.h5`` and raises ``KeyboardInterrupt`` (a second
        Ctrl-C interrupts at once)."""
        if resume_from is not None:
            self.load(resume_from)
        elif self.seed is not None and not self._fitted:
            _ngrandom.manual_seed(self.seed)
            _pyrandom.seed(self.seed)
            np.random.seed(self.seed % (1 << 32))
        self._dist = _dp.group_info()
        if self._dist is not None:
            train_data, val_data = self._start_distributed(train_data, val_data)
        self._train_data = train_data
        self._val_data = val_data
        if self._resumed:
            self._restore_loader(train_data, self._pending_loader)
            self._pending_loader = None
        self._fitted = True
        self.should_stop = False
        self.stop_reason = None
        self._interrupt = False
        restore_sigint = self._install_sigint()
        try:
            self._call("on_fit_start")
            try:
                while (self.epoch < self.max_epochs or self._epoch_in_progress) and not self.should_stop:
                    self._run_epoch()
            except StopTraining as e:
                self.stop_reason = str(e) or "StopTraining"
                self._epoch_in_progress = False   # the unfinished epoch is not resumed by a later fit()
            self.history.stop_reason = self.stop_reason
            self._call("on_fit_end")
        except BaseException as e:
            for cb in self.callbacks:
                if _overrides(cb, "on_exception"):
                    cb.on_exception(self, e)
            raise
        finally:
            restore_sigint()
            self._net, self._dist, self._view = self.model, None, None
            self._train_data = None
            self._fresh.clear()
            for name in list(self.tags):       # no graph kept after fit, whatever ended it
                t = self.tags[name]
                self.tags[name] = t.detach() if isinstance(t, Tensor) else t
        return self.history

    def _install_sigint(self):
        if (not any(isinstance(cb, ModelCheckpoint) for cb in self.callbacks)
                or threading.current_thread() is not threading.main_thread()):
            return lambda: None
        prev = signal.getsignal(signal.SIGINT)

        def handler(signum, frame):
            if self._interrupt or self._consistent and not self._epoch_in_progress:
                # a second Ctrl-C, or one between epochs: interrupt now
                signal.signal(signal.SIGINT, prev)
                if callable(prev):
                    prev(signum, frame)
                raise KeyboardInterrupt
            self._interrupt = True        # the batch in progress finishes, then it raises

        try:
            signal.signal(signal.SIGINT, handler)
        except ValueError:  # pragma: no cover - not the main interpreter
            return lambda: None

        def restore():
            if signal.getsignal(signal.SIGINT) is handler:
                signal.signal(signal.SIGINT, prev)
        return restore

    # ---- evaluation -------------------------------------------------------------------------
    def _evaluate(self, data, prefix, metrics):
        modes = [(m, m.training) for m in self.model.modules()]
        self.model.eval()
        for m in metrics.values():
            m.reset()
        total, count = 0.0, 0
        view = data if isinstance(data, (_dp.ShardedLoader, _dp.SlicedBatches)) else None
        try:
            with no_grad(), (self._autocast if self._autocast is not None else contextlib.nullcontext()):
                for batch in data:
                    if self.device.type != "cpu":
                        batch = _to_device(batch, self.device)
                    loss, outputs, target = self._forward(batch)
                    n = view.current.n_local if view is not None else _batch_size(
                        target if target is not None else batch)
                    if n:
                        total += loss.item() * n
                        count += n
                    if outputs is not None and target is not None and n:
                        for m in metrics.values():
                            m.update(outputs, target)
        finally:
            for m, mode in modes:
                m.training = mode
        if self._dist is not None:            # the sums over every rank's share
            total, count = _dp.all_reduce_array(np.array([total, count], np.float64))
            count = int(count)
            _dp.merge_metrics(metrics)
        logs = {prefix + "loss": total / count if count else math.nan}
        for name, m in metrics.items():
            logs[prefix + name] = float(m.compute())
        return logs

    def evaluate(self, data):
        """The mean loss and the metrics over ``data`` (eval mode, ``no_grad``; every
        submodule's mode is restored): ``{"loss": float, "<metric>": float, ...}``. In a
        distributed run (call it on every rank) each rank evaluates its share of each
        batch and the results are reduced, as in ``fit``."""
        if self._dist is not None:            # (inside fit: a callback's call)
            return self._evaluate(self._rank_view(data), "", self.val_metrics)
        self._dist = _dp.group_info()
        try:
            view = self._rank_view(data) if self._dist is not None else data
            return self._evaluate(view, "", self.val_metrics)
        finally:
            self._dist = None

    def predict(self, data):
        """The model's outputs over ``data`` in eval mode under ``no_grad`` (modes restored).
        A batch that is a tuple or list is ``(input, ...)``: its first element goes in.
        In a distributed run every rank predicts all of ``data`` (nothing is sharded).
        Returns one Tensor (outputs concatenated along dim 0), or a list of the batches'
        outputs where they are not Tensors."""
        from ..ops import cat
        modes = [(m, m.training) for m in self.model.modules()]
        self.model.eval()
        outs = []
        try:
            with no_grad(), (self._autocast if self._autocast is not None else contextlib.nullcontext()):
                for batch in data:
                    x = batch[0] if isinstance(batch, (tuple, list)) else batch
                    if self.device.type != "cpu":
                        x = _to_device(x, self.device)
                    outs.append(self.model(x))
        finally:
            for m, mode in modes:
                m.training = mode
        if outs and all(isinstance(o, Tensor) for o in outs):
            return cat(outs, 0)
        return outs

    # ---- checkpoints ------------------------------------------------------------------------
    def _callback_keys(self):
        seen, out = {}, []
        for cb in self.callbacks:
            name = type(cb).__name__
            i = seen.get(name, 0)
            seen[name] = i + 1
            out.append((name if i == 0 else f"{name}_{i}", cb))
        return out

    def state_dict(self):
        """Everything :meth:`load` needs for an exact resume, as plain data.

        In a distributed run it is collective (call it on every rank): the running metric
        states and records are merged over the ranks and an unfinished accumulation
        window's gradients averaged (each rank's own stay as they are), so the state is
        that of the whole run, whatever the number of ranks."""
        loader = None
        if self._train_data is not None and hasattr(self._train_data, "state_dict"):
            loader = self._train_data.state_dict()
        info = _dp.group_info()
        metrics = {k: m for k, m in self.metrics.items() if hasattr(m, "state_arrays")}
        if info is not None:
            metric_states = _dp.merge_metrics(metrics, keep_local=True)
            records = _dp.merge_records(self._records)
        else:
            metric_states = {k: m.state_arrays() for k, m in metrics.items()}
            records = self._records
        grads = None
        if self._accum:
            if info is not None:
                grads = _dp.sync_grads(self._params, copy=True)
            else:
                grads = [None if p.grad is None else np.array(p.grad.array, copy=True) for p in self._params]
        return {
            "format": FORMAT, "format_version": FORMAT_VERSION,
            "model": self._module.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": None if self.scheduler is None else self.scheduler.state_dict(),
            "scaler": None if self.grad_scaler is None else self.grad_scaler.state_dict(),
            "loader": loader,
            "rng": {"numbagrad": _ngrandom.get_rng_state(), "python": _python_rng_state(),
                    "numpy": _numpy_rng_state()},
            "history": self.history.state_dict(),
            "callbacks": {k: cb.state_dict() for k, cb in self._callback_keys()},
            "epoch": self.epoch, "step": self.global_step, "batch_in_epoch": self.batch_in_epoch,
            "epoch_in_progress": bool(self._epoch_in_progress),
            "running": {"loss_total": self._loss_total, "loss_count": self._loss_count,
                        "records": {k: [s, c] for k, (s, c) in records.items()},
                        "metrics": metric_states,
                        "accum": self._accum, "grads": grads},
        }

    def save(self, path):
        """Write :meth:`state_dict` to ``path`` with ``numbagrad.save`` (HDF5, atomic).

        In a distributed run call it on every rank (as :class:`ModelCheckpoint` does): the
        state is gathered from all of them, rank 0 writes the file, and every rank returns
        once it is written."""
        from ..io import save
        state = self.state_dict()
        if _dp.is_rank0():
            save(state, path)
        if _dp.group_info() is not None:
            from .. import distributed
            distributed.barrier()

    def load(self, path):
        """Restore a state written by :meth:`save` into this trainer (same model, optimizer,
        scheduler, scaler and callbacks as the saved one). The loader position is applied
        to the ``train_data`` of the next :meth:`fit`."""
        from ..io import load
        state = load(path) if not isinstance(path, dict) else path
        if not isinstance(state, dict) or state.get("format") != FORMAT:
            raise ValueError(f"Trainer.load: {path!r} is not a Trainer checkpoint (written by Trainer.save or "
                             "ModelCheckpoint)")
        if (state["scheduler"] is None) != (self.scheduler is None):
            raise ValueError("Trainer.load: the checkpoint " + ("has no" if state["scheduler"] is None else "has a")
                             + " scheduler state, but this trainer " + ("has a" if self.scheduler is not None
                                                                        else "has no") + " scheduler")
        if (state["scaler"] is None) != (self.grad_scaler is None):
            raise ValueError("Trainer.load: the checkpoint and this trainer differ in having a grad_scaler")
        self._module.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        if self.scheduler is not None:
            self.scheduler.load_state_dict(state["scheduler"])
        if self.grad_scaler is not None:
            self.grad_scaler.load_state_dict(state["scaler"])
        self.history.load_state_dict(state["history"])
        saved_cbs = state["callbacks"]
        for key, cb in self._callback_keys():
            if key in saved_cbs:
                cb.load_state_dict(saved_cbs[key])
        run = state["running"]
        self._loss_total = float(run["loss_total"])
        self._loss_count = int(run["loss_count"])
        self._records = {k: [float(s), _dp._count(c)] for k, (s, c) in run["records"].items()}
        for k, m in self.metrics.items():
            if k in run["metrics"]:
                m.load_state_arrays(run["metrics"][k])
            else:
                m.reset()
        info = _dp.group_info()
        if info is not None and info[0] != 0:
            self._local_states_zero()    # the saved (global) states count once: on rank 0
        self._accum = int(run["accum"])
        if run["grads"] is not None:
            for p, g in zip(self._params, run["grads"]):
                if g is None:
                    p.grad = None
                elif p.grad is not None and p.grad.shape == g.shape:
                    p.grad.array[...] = g
                else:
                    p.grad = Tensor._from_array(np.array(g, copy=True))
        self.epoch = int(state["epoch"])
        self.global_step = int(state["step"])
        self.batch_in_epoch = int(state["batch_in_epoch"])
        self._epoch_in_progress = bool(state["epoch_in_progress"])
        self._resumed = True
        self._fitted = True
        self._pending_loader = state["loader"]
        rng = state["rng"]
        _ngrandom.set_rng_state(rng["numbagrad"])
        _set_python_rng_state(rng["python"])
        _set_numpy_rng_state(rng["numpy"])

    def _mid_epoch_error(self, data):
        return (f"Trainer.fit(resume_from=...): the checkpoint was written in the middle of epoch {self.epoch} "
                f"(after {self.batch_in_epoch} batches), but train_data ({type(data).__name__}) cannot be "
                "resumed at a position: it has no load_state_dict(). Use a numbagrad DataLoader, or resume from a "
                "checkpoint written at an epoch's end")

    def _restore_loader(self, data, state):
        """Put ``data`` where the loaded state was: a DataLoader's position; anything else
        only between epochs (or before an epoch's first batch)."""
        mid_epoch = self._epoch_in_progress and self.batch_in_epoch
        if state is not None and hasattr(data, "load_state_dict"):
            data.load_state_dict(state)
        elif mid_epoch:
            raise ValueError(self._mid_epoch_error(data))
