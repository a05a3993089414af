"""Learning-rate schedulers (``torch.optim.lr_scheduler``).

A scheduler owns an optimizer and rewrites ``group['lr']`` (and, for :class:`CyclicLR`
and :class:`OneCycleLR`, ``group['momentum']`` or ``group['betas'][0]``) of each of its
parameter groups. numbagrad's optimizers read these options from the group at every
``step()``, so a new value takes effect on the next update (the fused kernels get the
learning rate as an argument, nothing is cached in the arena).

Semantics are PyTorch 2.13's, including its two update rules:

* ``scheduler.step()`` uses the *recursive* (chainable) rule of each scheduler, which
  multiplies the group's current ``lr``. Several schedulers on one optimizer therefore
  compose multiplicatively (see :class:`ChainedScheduler`).
* ``scheduler.step(epoch)`` (deprecated in PyTorch, kept here) jumps to ``epoch`` with
  the *closed form* ``_get_closed_form_lr()`` where the scheduler has one.

Construction performs the initial step: ``last_epoch`` becomes 0 and the groups hold
the epoch-0 learning rates. ``base_lrs`` are the groups' ``initial_lr`` (set from
``lr`` by the first scheduler created on the optimizer). ``state_dict()`` is the
scheduler's ``__dict__`` without the optimizer; restore the optimizer's own state dict
too, since it holds the current ``lr`` of each group, which recursive rules build on.
State dicts hold plain Python types only (numbers, str, bool, None, lists, dicts; user
callables are saved as None or their ``__dict__``, as PyTorch does), so ``numbagrad.save``
can write them; :class:`MultiStepLR` saves its ``Counter`` of milestones as a dict.

numbagrad additions: :class:`LinearWarmup` (linear warm-up handing over to another
scheduler) and :class:`ScheduleLR` (absolute learning rates from a
:mod:`numbagrad.optim.schedules` function).
"""
import functools
import math
import numbers
import types
import warnings
import weakref
from bisect import bisect_right
from collections import Counter

from ..tensor import Tensor
from .optimizer import Optimizer

__all__ = ["LRScheduler", "LambdaLR", "MultiplicativeLR", "StepLR", "MultiStepLR", "ConstantLR", "LinearLR",
           "ExponentialLR", "SequentialLR", "PolynomialLR", "CosineAnnealingLR", "ChainedScheduler",
           "ReduceLROnPlateau", "CyclicLR", "CosineAnnealingWarmRestarts", "OneCycleLR",
           "LinearWarmup", "ScheduleLR"]

_EPOCH_WARNING = ("Passing `epoch` to `scheduler.step()` is deprecated (as in PyTorch): when it is given, the "
                  "scheduler's closed form is used instead of the chainable recursive rule, where it has one. "
                  "Call `scheduler.step()` without arguments.")


# ---- helpers --------------------------------------------------------------------------
def _check_optimizer(optimizer):
    if not isinstance(optimizer, Optimizer):
        raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")


def _per_group(name, optimizer, value):
    """``value`` as one entry per parameter group (a scalar is repeated); PyTorch's
    ``_format_param``, error message included."""
    n = len(optimizer.param_groups)
    if isinstance(value, (list, tuple)):
        if len(value) != n:
            raise ValueError(f"{name} must have the same length as optimizer.param_groups. "
                             f"{name} has {len(value)} values, param_groups has {n}.")
        return list(value)
    return [value] * n


def _lrs(optimizer, key="lr"):
    return [group[key] for group in optimizer.param_groups]


def _scaled(lrs, factor):
    """Each of ``lrs`` multiplied by ``factor``."""
    return [lr * factor for lr in lrs]


def _set_lrs(optimizer, values):
    """Write ``values`` into the groups' ``lr``; a Tensor ``lr`` is filled in place (as PyTorch)."""
    groups = optimizer.param_groups
    values = list(values)
    if len(values) != len(groups):
        raise ValueError(f"got {len(values)} learning rates for {len(groups)} parameter groups")
    for group, lr in zip(groups, values):
        if isinstance(group["lr"], Tensor):
            group["lr"].array.fill(lr)
        else:
            group["lr"] = lr


def _set_momentum(group, value, use_beta1):
    if use_beta1:
        group["betas"] = (value, *tuple(group["betas"])[1:])
    else:
        group["momentum"] = value


def _init_cycle_momentum(sched, optimizer, last_epoch, **momenta):
    """Momentum set-up of :class:`CyclicLR` and :class:`OneCycleLR` (``cycle_momentum``):
    ``momenta`` are ``base_momentum`` and ``max_momentum``, made per-group in the order
    given; a fresh run (``last_epoch == -1``) starts each group at its max momentum and
    records both in the group. Sets ``sched.use_beta1``; returns ``(bases, maxes)``."""
    if "momentum" not in optimizer.defaults and "betas" not in optimizer.defaults:
        raise ValueError("optimizer must support momentum or beta1 with `cycle_momentum` option enabled")
    sched.use_beta1 = "betas" in optimizer.defaults
    per_group = {name: _per_group(name, optimizer, value) for name, value in momenta.items()}
    m_bases, m_maxs = per_group["base_momentum"], per_group["max_momentum"]
    if last_epoch == -1:
        for m_max, m_base, group in zip(m_maxs, m_bases, optimizer.param_groups):
            _set_momentum(group, m_max, sched.use_beta1)
            group["max_momentum"] = m_max
            group["base_momentum"] = m_base
    return m_bases, m_maxs


def _track_optimizer_step(optimizer):
    """Wrap ``optimizer.step`` (once) so that it records that it ran; schedulers use this
    to warn when ``scheduler.step()`` comes before the first ``optimizer.step()``."""
    current = optimizer.step
    if getattr(current, "_wrapped_by_lr_sched", False):
        return
    unbound = current.__func__
    owner = weakref.ref(optimizer)

    @functools.wraps(unbound)
    def step(*args, **kwargs):
        opt = owner()
        opt._opt_called = True
        return unbound(opt, *args, **kwargs)

    step._wrapped_by_lr_sched = True
    optimizer.step = step


def _warn_get_lr_outside_step(sched):
    if not getattr(sched, "_get_lr_called_within_step", False):
        warnings.warn("To get the last learning rate computed by the scheduler, please use `get_last_lr()`.",
                      UserWarning, stacklevel=3)


def _per_group_callables(optimizer, fns, count_error, type_error):
    """``fns`` (one callable, or one per parameter group) as a list of one per group.
    ``count_error`` is formatted with ``n`` (groups) and ``got``; ``type_error`` with
    ``type`` (the offending value's type name)."""
    n = len(optimizer.param_groups)
    if isinstance(fns, (list, tuple)):
        if len(fns) != n:
            raise ValueError(count_error.format(n=n, got=len(fns)))
        fns = list(fns)
    else:
        fns = [fns] * n
    for fn in fns:
        if not callable(fn):
            raise TypeError(type_error.format(type=type(fn).__name__))
    return fns


def _callable_state(fn):
    """State of a user callable: None for a plain function, the ``__dict__`` of a
    callable object (PyTorch's convention)."""
    return None if isinstance(fn, types.FunctionType) else dict(fn.__dict__)


def _state_with(owner, key, value):
    """``owner.__dict__`` without the optimizer, with ``key`` replaced by ``value``."""
    sd = {k: v for k, v in owner.__dict__.items() if k not in ("optimizer", key)}
    sd[key] = value
    return sd


def _load_state_with(owner, state_dict, key, *default):
    """Load ``state_dict`` but ``key`` into ``owner.__dict__``; return the entry ``key``
    (``default`` where given and missing, a KeyError otherwise)."""
    sd = dict(state_dict)
    saved = sd.pop(key, *default)
    owner.__dict__.update(sd)
    return saved


# ---- base -----------------------------------------------------------------------------
class LRScheduler:
    """Base class of the epoch-indexed schedulers (``torch.optim.lr_scheduler.LRScheduler``).

    Subclasses implement ``get_lr()`` (the recursive rule, evaluated after
    ``last_epoch`` has been advanced) and optionally ``_get_closed_form_lr()``.
    """

    _get_lr_called_within_step = False
    _is_initial = False

    def __init__(self, optimizer, last_epoch=-1):
        _check_optimizer(optimizer)
        self.optimizer = optimizer
        if last_epoch == -1:
            for group in optimizer.param_groups:
                group.setdefault("initial_lr", group["lr"])
        else:
            for i, group in enumerate(optimizer.param_groups):
                if "initial_lr" not in group:
                    raise KeyError(f"param 'initial_lr' is not specified in param_groups[{i}] when resuming a "
                                   f"scheduler with last_epoch={last_epoch} >= 0: load the optimizer's state dict "
                                   "first, or use last_epoch=-1 for a fresh run")
        self.base_lrs = _lrs(optimizer, "initial_lr")
        self.last_epoch = last_epoch
        _track_optimizer_step(optimizer)
        self._initial_step()

    def _initial_step(self):
        self._step_count = 0
        self._is_initial = True
        try:
            self.step()
        finally:
            self._is_initial = False

    def state_dict(self):
        """Everything but the optimizer (``self.__dict__``), as PyTorch."""
        return {k: v for k, v in self.__dict__.items() if k != "optimizer"}

    def load_state_dict(self, state_dict):
        self.__dict__.update(state_dict)

    def get_last_lr(self):
        """The learning rates of the groups after the last ``step()``."""
        return self._last_lr

    def get_lr(self):
        raise NotImplementedError

    def _check_order(self):
        if self._step_count == 1:
            if not getattr(self.optimizer.step, "_wrapped_by_lr_sched", False):
                warnings.warn("`optimizer.step()` seems to have been overridden after the learning rate scheduler "
                              "was created; make sure to call `optimizer.step()` before `lr_scheduler.step()`.",
                              UserWarning, stacklevel=3)
            elif not getattr(self.optimizer, "_opt_called", False):
                warnings.warn("Detected call of `lr_scheduler.step()` before `optimizer.step()`. Call them in the "
                              "opposite order: `optimizer.step()` before `lr_scheduler.step()`, otherwise the "
                              "first value of the learning rate schedule is skipped.", UserWarning, stacklevel=3)

    def step(self, epoch=None):
        """Advance one epoch (recursive rule), or jump to ``epoch`` (closed form)."""
        self._check_order()
        self._step_count += 1
        if epoch is not None:
            warnings.warn(_EPOCH_WARNING, UserWarning, stacklevel=2)
        self._update_lr(epoch)

    def _update_lr(self, epoch=None):
        if epoch is None:
            self.last_epoch += 1
            rule = self.get_lr
        else:
            self.last_epoch = epoch
            rule = getattr(self, "_get_closed_form_lr", self.get_lr)
        self._apply_lrs(self._within_step(rule))

    def _within_step(self, rule):
        """``rule()`` (``get_lr`` or the closed form) called as from ``step()``: no
        ``get_last_lr`` warning."""
        self._get_lr_called_within_step = True
        try:
            return rule()
        finally:
            self._get_lr_called_within_step = False

    def _apply_lrs(self, values):
        _set_lrs(self.optimizer, values)
        self._last_lr = _lrs(self.optimizer)


_LRScheduler = LRScheduler


class _CallablesScheduler(LRScheduler):
    """A scheduler with one user callable per parameter group in the attribute
    ``_fns_attr``. ``state_dict()`` saves them as None (functions) or the ``__dict__`` of
    callable objects, and ``load_state_dict()`` updates those objects (PyTorch's
    ``LambdaLR`` convention)."""

    _fns_attr = None
    _fns_state_required = True   # load_state_dict raises KeyError without the entry

    def state_dict(self):
        return _state_with(self, self._fns_attr, [_callable_state(fn) for fn in getattr(self, self._fns_attr)])

    def load_state_dict(self, state_dict):
        default = () if self._fns_state_required else (None,)
        saved = _load_state_with(self, state_dict, self._fns_attr, *default)
        if saved is not None:
            for fn, st in zip(getattr(self, self._fns_attr), saved):
                if st is not None:
                    fn.__dict__.update(st)


class _LambdaBase(_CallablesScheduler):
    _fns_attr = "lr_lambdas"

    def __init__(self, optimizer, lr_lambda, last_epoch=-1):
        self.optimizer = optimizer
        self.lr_lambdas = _per_group_callables(optimizer, lr_lambda, "Expected {n} lr_lambdas, but got {got}",
                                               "lr_lambda should be a function, but got {type}")
        super().__init__(optimizer, last_epoch)


class LambdaLR(_LambdaBase):
    """``lr = base_lr * lr_lambda(epoch)``; ``lr_lambda`` is a function or one per group."""

    def get_lr(self):
        _warn_get_lr_outside_step(self)
        return [base * fn(self.last_epoch) for fn, base in zip(self.lr_lambdas, self.base_lrs)]


class MultiplicativeLR(_LambdaBase):
    """Each step multiplies the group's lr by ``lr_lambda(epoch)`` (not at epoch 0)."""

    def get_lr(self):
        _warn_get_lr_outside_step(self)
        if self._is_initial:
            return _lrs(self.optimizer)
        return [g["lr"] * fn(self.last_epoch) for fn, g in zip(self.lr_lambdas, self.optimizer.param_groups)]


def _positive_int(cls, name, v):
    """``v`` if it is a positive int, else ValueError naming the scheduler, argument and value
    (a zero would divide by zero at the first ``step()``)."""
    if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v <= 0:
        raise ValueError(f"{cls}: {name} must be a positive integer, got {v!r}")
    return int(v)


class StepLR(LRScheduler):
    """Multiply the lr by ``gamma`` every ``step_size`` epochs."""

    def __init__(self, optimizer, step_size, gamma=0.1, last_epoch=-1):
        self.step_size = _positive_int("StepLR", "step_size", step_size)
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        _warn_get_lr_outside_step(self)
        e = self.last_epoch
        if e == 0 or e % self.step_size != 0:
            return _lrs(self.optimizer)
        return _scaled(_lrs(self.optimizer), self.gamma)

    def _get_closed_form_lr(self):
        k = self.last_epoch // self.step_size
        return _scaled(self.base_lrs, self.gamma ** k)


class MultiStepLR(LRScheduler):
    """Multiply the lr by ``gamma`` at each milestone (repeated milestones count twice)."""

    def __init__(self, optimizer, milestones, gamma=0.1, last_epoch=-1):
        self.milestones = Counter(milestones)
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        _warn_get_lr_outside_step(self)
        hits = self.milestones.get(self.last_epoch, 0)
        if hits == 0:
            return _lrs(self.optimizer)
        return _scaled(_lrs(self.optimizer), self.gamma ** hits)

    def _get_closed_form_lr(self):
        passed = bisect_right(sorted(self.milestones.elements()), self.last_epoch)
        return _scaled(self.base_lrs, self.gamma ** passed)

    def state_dict(self):
        """As :meth:`LRScheduler.state_dict`, with ``milestones`` as a plain dict
        ``{epoch: count}`` (PyTorch keeps the ``Counter``, which checkpoint formats
        without pickle cannot hold)."""
        return _state_with(self, "milestones", {int(k): int(v) for k, v in self.milestones.items()})

    def load_state_dict(self, state_dict):
        milestones = _load_state_with(self, state_dict, "milestones", None)
        if milestones is not None:  # a dict or a Counter (PyTorch's state)
            self.milestones = Counter({int(k): int(v) for k, v in dict(milestones).items()})


def _check_unit(factor, what, zero_allowed=True):
    """Raise unless ``0 <= factor <= 1`` (``0 < factor`` where not ``zero_allowed``)."""
    if factor > 1.0 or factor < 0 or (factor == 0 and not zero_allowed):
        raise ValueError(f"{what} must be in {'[' if zero_allowed else '('}0, 1], got {factor}")


class _FactorLR(LRScheduler):
    """A schedule that multiplies the base lrs by a factor of the epoch, in PyTorch's chainable
    form: epoch 0 scales the current lrs by ``_first_factor()``, each later epoch ``e`` by
    ``_ratio(e)`` (the factor's change since epoch ``e - 1``; None: unchanged)."""

    def get_lr(self):
        _warn_get_lr_outside_step(self)
        e = self.last_epoch
        if e == 0:
            return _scaled(_lrs(self.optimizer), self._first_factor())
        ratio = self._ratio(e)
        return _lrs(self.optimizer) if ratio is None else _scaled(_lrs(self.optimizer), ratio)


class ConstantLR(_FactorLR):
    """Scale the lr by ``factor`` until epoch ``total_iters``, then restore it."""

    def __init__(self, optimizer, factor=1.0 / 3, total_iters=5, last_epoch=-1):
        _check_unit(factor, "ConstantLR: the multiplicative factor")
        self.factor = factor
        self.total_iters = total_iters
        super().__init__(optimizer, last_epoch)

    def _first_factor(self):
        return self.factor

    def _ratio(self, e):
        return 1.0 / self.factor if e == self.total_iters else None

    def _get_closed_form_lr(self):
        f = self.factor + (self.last_epoch >= self.total_iters) * (1 - self.factor)
        return _scaled(self.base_lrs, f)


class LinearLR(_FactorLR):
    """Scale the lr by a factor going linearly from ``start_factor`` to ``end_factor``
    over ``total_iters`` epochs."""

    def __init__(self, optimizer, start_factor=1.0 / 3, end_factor=1.0, total_iters=5, last_epoch=-1):
        _check_unit(start_factor, "LinearLR: start_factor", zero_allowed=False)
        _check_unit(end_factor, "LinearLR: end_factor")
        self.start_factor = start_factor
        self.end_factor = end_factor
        self.total_iters = total_iters
        super().__init__(optimizer, last_epoch)

    def _first_factor(self):
        return self.start_factor

    def _ratio(self, e):
        if self._is_initial or e > self.total_iters:
            return None
        d = self.end_factor - self.start_factor
        # factor(e) / factor(e - 1), with factor(e) = start + d * e / total_iters
        return 1.0 + d / (self.total_iters * self.start_factor + (e - 1) * d)

    def _get_closed_form_lr(self):
        d = self.end_factor - self.start_factor
        f = self.start_factor + d * min(self.total_iters, self.last_epoch) / self.total_iters
        return _scaled(self.base_lrs, f)


class ExponentialLR(LRScheduler):
    """Multiply the lr by ``gamma`` every epoch."""

    def __init__(self, optimizer, gamma, last_epoch=-1):
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        _warn_get_lr_outside_step(self)
        if self._is_initial:
            return _lrs(self.optimizer)
        return _scaled(_lrs(self.optimizer), self.gamma)

    def _get_closed_form_lr(self):
        return _scaled(self.base_lrs, self.gamma ** self.last_epoch)


class PolynomialLR(LRScheduler):
    """``lr = base_lr * (1 - min(epoch, total_iters) / total_iters) ** power``."""

    def __init__(self, optimizer, total_iters=5, power=1.0, last_epoch=-1):
        self.total_iters = total_iters
        self.power = power
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        _warn_get_lr_outside_step(self)
        e = self.last_epoch
        if self._is_initial or e > self.total_iters:
            return _lrs(self.optimizer)
        T = self.total_iters
        ratio = ((1.0 - e / T) / (1.0 - (e - 1) / T)) ** self.power
        return _scaled(_lrs(self.optimizer), ratio)

    def _get_closed_form_lr(self):
        T = self.total_iters
        f = (1.0 - min(T, self.last_epoch) / T) ** self.power
        return _scaled(self.base_lrs, f)


class CosineAnnealingLR(LRScheduler):
    """Cosine annealing from ``base_lr`` to ``eta_min`` over ``T_max`` epochs (SGDR
    without restarts; past ``T_max`` the recursive rule follows the cosine back up)."""

    def __init__(self, optimizer, T_max, eta_min=0.0, last_epoch=-1):
        self.T_max = T_max
        self.eta_min = eta_min
        super().__init__(optimizer, last_epoch)

    def _closed(self, base, e):
        return self.eta_min + (base - self.eta_min) * (1 + math.cos(e * math.pi / self.T_max)) / 2

    def get_lr(self):
        _warn_get_lr_outside_step(self)
        e, T, lo = self.last_epoch, self.T_max, self.eta_min
        groups = self.optimizer.param_groups
        if self._is_initial:
            return _lrs(self.optimizer)
        if self._step_count == 1 and e > 0:
            return [self._closed(base, e) for base in self.base_lrs]
        if (e - 1 - T) % (2 * T) == 0:
            # at the bottom of the cosine the ratio rule would divide by ~0: step up additively
            return [g["lr"] + (base - lo) * (1 - math.cos(math.pi / T)) / 2 for base, g in zip(self.base_lrs, groups)]
        ratio = (1 + math.cos(math.pi * e / T)) / (1 + math.cos(math.pi * (e - 1) / T))
        return [ratio * (g["lr"] - lo) + lo for g in groups]

    def _get_closed_form_lr(self):
        return [self.eta_min + (base - self.eta_min) * (1 + math.cos(math.pi * self.last_epoch / self.T_max)) / 2
                for base in self.base_lrs]


# ---- compositions ---------------------------------------------------------------------
def _check_children(owner, optimizer, schedulers):
    name = type(owner).__name__
    for i, s in enumerate(schedulers):
        if not hasattr(s, "optimizer"):
            raise TypeError(f"{name}: the scheduler at index {i} should have `optimizer` as its attribute")
        if isinstance(s, ReduceLROnPlateau):
            raise ValueError(f"{name} does not support `ReduceLROnPlateau` (its step() needs a metric), but got "
                             f"one at index {i}")
        if s.optimizer is not optimizer:
            raise ValueError(f"{name} expects all schedulers to belong to the same optimizer, but the scheduler "
                             f"{type(s).__name__} at index {i} has a different one")


class _Composite(LRScheduler):
    """A scheduler over child schedulers (``_schedulers``): its state holds theirs."""

    def state_dict(self):
        return _state_with(self, "_schedulers", [s.state_dict() for s in self._schedulers])

    def load_state_dict(self, state_dict):
        children = _load_state_with(self, state_dict, "_schedulers")
        for s, st in zip(self._schedulers, children):
            s.load_state_dict(st)


class SequentialLR(_Composite):
    """Run ``schedulers[i]`` between ``milestones[i-1]`` and ``milestones[i]``. At a
    milestone the next scheduler restarts at its epoch 0 (closed form where it has one)."""

    def __init__(self, optimizer, schedulers, milestones, last_epoch=-1):
        if len(schedulers) < 1:
            raise ValueError("SequentialLR expects at least one scheduler, but got no scheduler")
        _check_children(self, optimizer, schedulers)
        if len(milestones) != len(schedulers) - 1:
            raise ValueError(f"SequentialLR expects one milestone fewer than schedulers, but got "
                             f"{len(schedulers)} schedulers and {len(milestones)} milestones")
        self._schedulers = schedulers
        self._milestones = milestones
        self.last_epoch = last_epoch + 1
        self.optimizer = optimizer
        # undo the initial steps the children took when they were built ...
        for group in optimizer.param_groups:
            group["lr"] = group["initial_lr"]
        self.recursive_undo()
        # ... and take the initial step of the one that is active at epoch 0
        first = self._schedulers[bisect_right(self._milestones, 0)]
        first._initial_step()
        self._last_lr = first.get_last_lr()

    def recursive_undo(self, sched=None):
        """Step back ``last_epoch`` of every (nested) child scheduler."""
        s = self if sched is None else sched
        if hasattr(s, "_schedulers"):
            for child in s._schedulers:
                self.recursive_undo(child)
        elif hasattr(s, "last_epoch"):
            s.last_epoch -= 1

    def step(self):
        self.last_epoch += 1
        idx = bisect_right(self._milestones, self.last_epoch)
        sched = self._schedulers[idx]
        if idx > 0 and self._milestones[idx - 1] == self.last_epoch:
            sched._update_lr(0)
        else:
            sched.step()
        self._last_lr = sched.get_last_lr()



class ChainedScheduler(_Composite):
    """Step every scheduler in turn at each ``step()``; with recursive rules their
    factors multiply."""

    def __init__(self, schedulers, optimizer=None):
        if len(schedulers) < 1:
            raise ValueError("ChainedScheduler expects at least one scheduler to be chained, but got no scheduler")
        optimizer = optimizer or schedulers[0].optimizer
        _check_children(self, optimizer, schedulers)
        self._schedulers = schedulers
        self.optimizer = optimizer
        self._last_lr = _lrs(schedulers[-1].optimizer)

    def step(self):
        for s in self._schedulers:
            s.step()
        self._last_lr = _lrs(self._schedulers[-1].optimizer)



# ---- metric-driven --------------------------------------------------------------------
class ReduceLROnPlateau(LRScheduler):
    """Multiply the lr by ``factor`` once the metric has not improved for more than
    ``patience`` epochs; then wait ``cooldown`` epochs. ``step(metrics)``.

    Improvement: ``mode='min'``: ``a < best * (1 - threshold)`` (``rel``) or
    ``a < best - threshold`` (``abs``); ``'max'`` mirrors it. The lr never goes below
    ``min_lr`` (a float, or one per group) and changes smaller than ``eps`` are ignored.
    """

    def __init__(self, optimizer, mode="min", factor=0.1, patience=10, threshold=1e-4, threshold_mode="rel",
                 cooldown=0, min_lr=0, eps=1e-8):
        if factor >= 1.0:
            raise ValueError(f"ReduceLROnPlateau: factor should be < 1.0, got {factor}")
        self.factor = factor
        _check_optimizer(optimizer)
        self.optimizer = optimizer
        if isinstance(min_lr, (list, tuple)):
            if len(min_lr) != len(optimizer.param_groups):
                raise ValueError(f"expected {len(optimizer.param_groups)} min_lrs, got {len(min_lr)}")
            self.default_min_lr = None
            self.min_lrs = list(min_lr)
        else:
            self.default_min_lr = min_lr
            self.min_lrs = [min_lr] * len(optimizer.param_groups)
        self.patience = patience
        self.cooldown = cooldown
        self.eps = eps
        self.last_epoch = 0
        self._last_lr = _lrs(optimizer)
        self._init_is_better(mode=mode, threshold=threshold, threshold_mode=threshold_mode)
        self._reset()

    def _reset(self):
        self.best = self.mode_worse
        self.cooldown_counter = 0
        self.num_bad_epochs = 0

    def step(self, metrics, epoch=None):
        current = float(metrics)
        if epoch is None:
            epoch = self.last_epoch + 1
        else:
            warnings.warn(_EPOCH_WARNING, UserWarning, stacklevel=2)
        self.last_epoch = epoch
        if self._is_better(current, self.best):
            self.best = current
            self.num_bad_epochs = 0
        else:
            self.num_bad_epochs += 1
        if self.in_cooldown:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0  # bad epochs during cooldown are not counted
        if self.num_bad_epochs > self.patience:
            self._reduce_lr(epoch)
            self.cooldown_counter = self.cooldown
            self.num_bad_epochs = 0
        self._last_lr = _lrs(self.optimizer)

    def _reduce_lr(self, epoch):
        groups = self.optimizer.param_groups
        if len(groups) != len(self.min_lrs):
            if self.default_min_lr is None:
                raise RuntimeError(f"ReduceLROnPlateau: the optimizer has {len(groups)} param groups but min_lrs has "
                                   f"{len(self.min_lrs)} entries (a group was added after the scheduler was "
                                   "created); update `min_lrs`")
            self.min_lrs = [self.default_min_lr] * len(groups)
        for i, group in enumerate(groups):
            old = float(group["lr"])
            new = max(old * self.factor, self.min_lrs[i])
            if old - new > self.eps:
                group["lr"] = new

    @property
    def in_cooldown(self):
        return self.cooldown_counter > 0

    def _is_better(self, a, best):
        if self.mode == "min":
            return a < best * (1.0 - self.threshold) if self.threshold_mode == "rel" else a < best - self.threshold
        return a > best * (self.threshold + 1.0) if self.threshold_mode == "rel" else a > best + self.threshold

    def _init_is_better(self, mode, threshold, threshold_mode):
        if mode not in ("min", "max"):
            raise ValueError(f"ReduceLROnPlateau: mode {mode!r} is unknown (expected 'min' or 'max')")
        if threshold_mode not in ("rel", "abs"):
            raise ValueError(f"ReduceLROnPlateau: threshold mode {threshold_mode!r} is unknown "
                             "(expected 'rel' or 'abs')")
        self.mode_worse = math.inf if mode == "min" else -math.inf
        self.mode = mode
        self.threshold = threshold
        self.threshold_mode = threshold_mode

    def load_state_dict(self, state_dict):
        self.__dict__.update(state_dict)
        self._init_is_better(mode=self.mode, threshold=self.threshold, threshold_mode=self.threshold_mode)


# ---- cyclical -------------------------------------------------------------------------
class CyclicLR(LRScheduler):
    """Cyclical learning rate between ``base_lr`` and ``max_lr`` (Smith, 2017), stepped
    per batch. Policies ``triangular``, ``triangular2``, ``exp_range`` or a custom
    ``scale_fn`` (of the cycle number or of the iteration, ``scale_mode``). With
    ``cycle_momentum`` the momentum (SGD ``momentum``, Adam ``betas[0]``) cycles
    inversely between ``max_momentum`` and ``base_momentum``."""

    def __init__(self, optimizer, base_lr, max_lr, step_size_up=2000, step_size_down=None, mode="triangular",
                 gamma=1.0, scale_fn=None, scale_mode="cycle", cycle_momentum=True, base_momentum=0.8,
                 max_momentum=0.9, last_epoch=-1):
        _check_optimizer(optimizer)
        self.optimizer = optimizer
        base_lrs = _per_group("base_lr", optimizer, base_lr)
        if last_epoch == -1:
            for lr, group in zip(base_lrs, optimizer.param_groups):
                group["lr"] = lr
        self.max_lrs = _per_group("max_lr", optimizer, max_lr)
        up = float(step_size_up)
        down = float(step_size_down) if step_size_down is not None else up
        self.total_size = up + down
        self.step_ratio = up / self.total_size
        if mode not in ("triangular", "triangular2", "exp_range") and scale_fn is None:
            raise ValueError(f"CyclicLR: mode {mode!r} is invalid and scale_fn is None")
        self.mode = mode
        self.gamma = gamma
        self._scale_fn_custom = scale_fn
        self.scale_mode = scale_mode
        self._init_scale_fn()
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            self.base_momentums, self.max_momentums = _init_cycle_momentum(
                self, optimizer, last_epoch, base_momentum=base_momentum, max_momentum=max_momentum)
        super().__init__(optimizer, last_epoch)
        self.base_lrs = base_lrs

    def _init_scale_fn(self):
        # built-in policies force their scale mode (PyTorch does the same)
        if self._scale_fn_custom is None:
            if self.mode in ("triangular", "triangular2"):
                self.scale_mode = "cycle"
            elif self.mode == "exp_range":
                self.scale_mode = "iterations"

    def scale_fn(self, x):
        if self._scale_fn_custom is not None:
            return self._scale_fn_custom(x)
        if self.mode == "triangular":
            return 1.0
        if self.mode == "triangular2":
            return 1 / (2.0 ** (x - 1))
        return self.gamma ** x

    def get_lr(self):
        _warn_get_lr_outside_step(self)
        e = self.last_epoch
        cycle = math.floor(1 + e / self.total_size)
        x = 1.0 + e / self.total_size - cycle
        if x <= self.step_ratio:
            frac = x / self.step_ratio
        else:
            frac = (x - 1) / (self.step_ratio - 1)
        scale = self.scale_fn(cycle if self.scale_mode == "cycle" else e)
        lrs = [base + ((top - base) * frac) * scale for base, top in zip(self.base_lrs, self.max_lrs)]
        if self.cycle_momentum:
            for group, m_base, m_max in zip(self.optimizer.param_groups, self.base_momentums, self.max_momentums):
                _set_momentum(group, m_max - ((m_max - m_base) * frac) * scale, self.use_beta1)
        return lrs

    def state_dict(self):
        fn = self._scale_fn_custom
        return _state_with(self, "_scale_fn_custom", None if fn is None else _callable_state(fn))

    def load_state_dict(self, state_dict):
        fn_state = _load_state_with(self, state_dict, "_scale_fn_custom", None)
        custom = self._scale_fn_custom
        if fn_state is not None and custom is not None:
            custom.__dict__.update(fn_state)
        self._init_scale_fn()


class CosineAnnealingWarmRestarts(LRScheduler):
    """Cosine annealing with warm restarts (SGDR): period ``T_0``, multiplied by
    ``T_mult`` after each restart. ``step(epoch)`` accepts fractional epochs
    (``step(epoch + i / iters)`` inside an epoch)."""

    def __init__(self, optimizer, T_0, T_mult=1, eta_min=0.0, last_epoch=-1):
        if not isinstance(T_0, int) or T_0 <= 0:
            raise ValueError(f"Expected positive integer T_0, but got {T_0}")
        if not isinstance(T_mult, int) or T_mult < 1:
            raise ValueError(f"Expected integer T_mult >= 1, but got {T_mult}")
        if not isinstance(eta_min, (float, int)):
            raise ValueError(f"Expected float or int eta_min, but got {eta_min} of type {type(eta_min).__name__}")
        self.T_0 = T_0
        self.T_i = T_0
        self.T_mult = T_mult
        self.eta_min = eta_min
        self.T_cur = last_epoch
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        _warn_get_lr_outside_step(self)
        c = (1 + math.cos(math.pi * self.T_cur / self.T_i)) / 2
        return [self.eta_min + (base - self.eta_min) * c for base in self.base_lrs]

    def step(self, epoch=None):
        if epoch is None and self.last_epoch < 0:
            epoch = 0
        if epoch is None:
            epoch = self.last_epoch + 1
            self.T_cur = self.T_cur + 1
            if self.T_cur >= self.T_i:
                self.T_cur = self.T_cur % self.T_i
                self.T_i = self.T_i * self.T_mult
        else:
            if epoch < 0:
                raise ValueError(f"Expected non-negative epoch, but got {epoch}")
            if epoch >= self.T_0:
                if self.T_mult == 1:
                    self.T_cur = epoch % self.T_0
                else:
                    # number of completed periods: T_0 * (T_mult**n - 1) / (T_mult - 1) <= epoch
                    n = int(math.log(epoch / self.T_0 * (self.T_mult - 1) + 1, self.T_mult))
                    self.T_cur = epoch - self.T_0 * (self.T_mult ** n - 1) / (self.T_mult - 1)
                    self.T_i = self.T_0 * self.T_mult ** n
            else:
                self.T_i = self.T_0
                self.T_cur = epoch
        self.last_epoch = math.floor(epoch)
        self._apply_lrs(self._within_step(self.get_lr))


class OneCycleLR(LRScheduler):
    """The 1cycle policy (Smith & Topin, 2018), stepped per batch: the lr rises from
    ``max_lr / div_factor`` to ``max_lr`` over ``pct_start`` of ``total_steps``, then
    anneals (``'cos'`` or ``'linear'``) to ``initial_lr / final_div_factor``;
    ``three_phase`` first comes back down to ``initial_lr`` symmetrically. Momentum
    (SGD ``momentum`` / Adam ``betas[0]``) cycles inversely. Stepping more than
    ``total_steps`` times raises ``ValueError``."""

    def __init__(self, optimizer, max_lr, total_steps=None, epochs=None, steps_per_epoch=None, pct_start=0.3,
                 anneal_strategy="cos", cycle_momentum=True, base_momentum=0.85, max_momentum=0.95,
                 div_factor=25.0, final_div_factor=1e4, three_phase=False, last_epoch=-1):
        _check_optimizer(optimizer)
        self.optimizer = optimizer
        if total_steps is not None:
            if not isinstance(total_steps, int) or total_steps <= 0:
                raise ValueError(f"Expected positive integer total_steps, but got {total_steps}")
            self.total_steps = total_steps
        elif epochs is not None and steps_per_epoch is not None:
            if not isinstance(epochs, int) or epochs <= 0:
                raise ValueError(f"Expected positive integer epochs, but got {epochs}")
            if not isinstance(steps_per_epoch, int) or steps_per_epoch <= 0:
                raise ValueError(f"Expected positive integer steps_per_epoch, but got {steps_per_epoch}")
            self.total_steps = epochs * steps_per_epoch
        else:
            raise ValueError("You must define either total_steps OR (epochs AND steps_per_epoch)")
        N = self.total_steps
        up_end = float(pct_start * N) - 1
        if three_phase:
            self._schedule_phases = [
                dict(end_step=up_end, start_lr="initial_lr", end_lr="max_lr",
                     start_momentum="max_momentum", end_momentum="base_momentum"),
                dict(end_step=float(2 * pct_start * N) - 2, start_lr="max_lr", end_lr="initial_lr",
                     start_momentum="base_momentum", end_momentum="max_momentum"),
                dict(end_step=N - 1, start_lr="initial_lr", end_lr="min_lr",
                     start_momentum="max_momentum", end_momentum="max_momentum")]
        else:
            self._schedule_phases = [
                dict(end_step=up_end, start_lr="initial_lr", end_lr="max_lr",
                     start_momentum="max_momentum", end_momentum="base_momentum"),
                dict(end_step=N - 1, start_lr="max_lr", end_lr="min_lr",
                     start_momentum="base_momentum", end_momentum="max_momentum")]
        if not isinstance(pct_start, float) or pct_start < 0 or pct_start > 1:
            raise ValueError(f"Expected float between 0 and 1 pct_start, but got {pct_start}")
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"anneal_strategy must be one of 'cos' or 'linear', instead got {anneal_strategy}")
        self._anneal_func_type = anneal_strategy
        max_lrs = _per_group("max_lr", optimizer, max_lr)
        if last_epoch == -1:
            for top, group in zip(max_lrs, optimizer.param_groups):
                group["initial_lr"] = top / div_factor
                group["max_lr"] = top
                group["min_lr"] = group["initial_lr"] / final_div_factor
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            _init_cycle_momentum(self, optimizer, last_epoch, max_momentum=max_momentum, base_momentum=base_momentum)
        super().__init__(optimizer, last_epoch)

    @staticmethod
    def _annealing_cos(start, end, pct):
        return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)

    @staticmethod
    def _annealing_linear(start, end, pct):
        return (end - start) * pct + start

    def _anneal_func(self, start, end, pct):
        if self._anneal_func_type == "cos":
            return self._annealing_cos(start, end, pct)
        return self._annealing_linear(start, end, pct)

    def get_lr(self):
        _warn_get_lr_outside_step(self)
        t = self.last_epoch
        if t > self.total_steps:
            raise ValueError(f"Tried to step {t} times. The specified number of total steps is {self.total_steps}")
        lrs = []
        last = len(self._schedule_phases) - 1
        for group in self.optimizer.param_groups:
            start = 0.0
            for i, ph in enumerate(self._schedule_phases):
                end = ph["end_step"]
                if t <= end or i == last:
                    pct = (t - start) / (end - start)
                    lr = self._anneal_func(group[ph["start_lr"]], group[ph["end_lr"]], pct)
                    if self.cycle_momentum:
                        mom = self._anneal_func(group[ph["start_momentum"]], group[ph["end_momentum"]], pct)
                    break
                start = end
            lrs.append(lr)
            if self.cycle_momentum:
                _set_momentum(group, mom, self.use_beta1)
        return lrs


# ---- numbagrad additions --------------------------------------------------------------
class LinearWarmup(LRScheduler):
    """Linear learning-rate warm-up, then hand over to another scheduler (numbagrad).

    For ``t < warmup_steps`` (``t`` = ``last_epoch``, 0 after construction)::

        lr = base_lr * (start_factor + (1 - start_factor) * t / warmup_steps)

    so the lr climbs linearly from ``start_factor * base_lr`` and would reach
    ``base_lr`` at ``t = warmup_steps``. From ``t = warmup_steps`` on:

    * ``after=None``: ``lr = base_lr``;
    * ``after=sched`` (a scheduler built on the same optimizer *before* this one): it
      takes over as if the warm-up had not happened, with its own step count starting
      at 0: at ``t = warmup_steps`` the groups get the lrs ``sched`` set at its
      construction (its epoch 0), and each later ``step()`` steps ``sched`` once, so at
      ``t`` it is at its epoch ``t - warmup_steps``. ``get_last_lr()`` then reports its
      values. ``sched`` must not be stepped by anyone else (don't also put it in a
      :class:`ChainedScheduler`). Example: 500 warm-up steps into a cosine decay::

          sched = LinearWarmup(opt, 500, after=CosineAnnealingLR(opt, T_max=9500))

      This equals ``SequentialLR([LinearLR(start_factor, total_iters=W), sched], [W])``
      where that works (tested), and also restarts nested Sequential/Chained
      schedulers, which ``SequentialLR`` cannot.

    ``base_lr`` is the group's ``initial_lr`` (its ``lr`` when the first scheduler was
    created, e.g. ``max_lr / div_factor`` for :class:`OneCycleLR`). The warm-up values
    are computed in closed form (they do not multiply other schedulers' factors, so
    don't put this in a :class:`ChainedScheduler`). ``start_factor`` is in ``[0, 1]``;
    the default 0 starts from ``lr = 0``. ``step()`` takes no epoch argument.
    ``state_dict()`` includes ``after``'s.
    """

    def __init__(self, optimizer, warmup_steps, after=None, start_factor=0.0, last_epoch=-1):
        _check_optimizer(optimizer)
        if isinstance(warmup_steps, bool) or not isinstance(warmup_steps, int) or warmup_steps < 0:
            raise ValueError(f"LinearWarmup: warmup_steps must be a non-negative integer, got {warmup_steps!r}")
        if not 0.0 <= start_factor <= 1.0:
            raise ValueError(f"LinearWarmup: start_factor must be in [0, 1], got {start_factor}")
        if after is not None:
            if not isinstance(after, LRScheduler):
                raise TypeError(f"LinearWarmup: `after` must be a learning-rate scheduler, got {type(after).__name__}")
            _check_children(self, optimizer, [after])
        self.warmup_steps = warmup_steps
        self.start_factor = start_factor
        self.after = after
        # the lrs ``after`` set at its epoch 0; it is not stepped during the warm-up, so
        # restoring these is all it takes for it to resume from its epoch 0
        self._after_start_lrs = list(after.get_last_lr()) if after is not None else None
        super().__init__(optimizer, last_epoch)

    def _warmup_lrs(self, t):
        f = self.start_factor + (1.0 - self.start_factor) * t / self.warmup_steps
        return _scaled(self.base_lrs, f)

    def get_lr(self):
        _warn_get_lr_outside_step(self)
        t = self.last_epoch
        if t < self.warmup_steps:
            return self._warmup_lrs(t)
        if self.after is None:
            return list(self.base_lrs)
        return list(self.after.get_last_lr())

    def step(self):
        self._check_order()
        self._step_count += 1
        self.last_epoch += 1
        t = self.last_epoch
        if t < self.warmup_steps or self.after is None:
            _set_lrs(self.optimizer, self._within_step(self.get_lr))
        elif t == self.warmup_steps:
            _set_lrs(self.optimizer, self._after_start_lrs)
        else:
            self.after.step()
        self._last_lr = _lrs(self.optimizer)

    def state_dict(self):
        return _state_with(self, "after", self.after.state_dict() if self.after is not None else None)

    def load_state_dict(self, state_dict):
        after = _load_state_with(self, state_dict, "after", None)
        if after is not None and self.after is not None:
            self.after.load_state_dict(after)


class ScheduleLR(_CallablesScheduler):
    """Set each group's lr to ``schedule(last_epoch)``: an *absolute* learning rate from
    a function of the step (numbagrad), e.g. one of :mod:`numbagrad.optim.schedules`::

        sched = ScheduleLR(opt, schedules.warmup_cosine(0.0, 1e-3, 100, 10_000))

    ``schedule`` is one callable or one per parameter group. Unlike :class:`LambdaLR`
    (which multiplies ``base_lr`` by the function's value) the groups' own lrs are
    ignored; ``step(epoch)`` evaluates the schedule at ``epoch``. Not chainable.
    ``state_dict()`` saves callable objects' ``__dict__`` (functions as None), as
    :class:`LambdaLR`.
    """

    _fns_attr = "schedules"
    _fns_state_required = False

    def __init__(self, optimizer, schedule, last_epoch=-1):
        _check_optimizer(optimizer)
        self.schedules = _per_group_callables(
            optimizer, schedule, "ScheduleLR: expected {n} schedules (one per param group), got {got}",
            "ScheduleLR: schedule should be a callable, got {type}")
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        _warn_get_lr_outside_step(self)
        return [float(fn(self.last_epoch)) for fn in self.schedules]

    _get_closed_form_lr = get_lr
