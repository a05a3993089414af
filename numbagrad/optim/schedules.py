"""Schedules as pure functions of the step (in the style of optax).

Every factory here returns a callable ``f(step) -> float`` giving an **absolute** value
(a learning rate, a momentum, a weight decay...) at integer (or float) step ``step``
>= 0. The callables hold no state, so they compose: :func:`join` switches between
schedules at given boundaries, each later schedule seeing steps counted from its
own boundary.

Driving an optimizer
--------------------
* :class:`numbagrad.optim.lr_scheduler.ScheduleLR` ``(optimizer, fn)`` sets each
  group's ``lr`` to ``fn(step)`` (absolute), step 0 at construction, one per
  ``scheduler.step()``;
* :func:`as_lambda` ``(fn, base_lr)`` turns it into a multiplier ``fn(step) / base_lr``
  for :class:`~numbagrad.optim.lr_scheduler.LambdaLR` (also ``torch``'s), whose lr is
  ``base_lr * lambda(step)``.

Example::

    lr = schedules.warmup_cosine(init=0.0, peak=1e-3, warmup_steps=100, total_steps=5000)
    sched = lr_scheduler.ScheduleLR(opt, lr)
    for batch in data:
        ...; opt.step(); sched.step()

Boundary convention: a switch at boundary ``b`` takes effect *at* step ``b``
(:func:`piecewise` uses ``values[i]`` for ``boundaries[i-1] <= step < boundaries[i]``,
like ``MultiStepLR``; TensorFlow's ``PiecewiseConstantDecay`` switches one step later).
Steps before 0 are treated as 0 and durations are clamped (``linear`` holds ``end``
after ``steps``, ``cosine_decay`` holds ``alpha * init`` after ``decay_steps``).
"""
import math
from bisect import bisect_right
from numbers import Real

__all__ = ["constant", "linear", "cosine_decay", "exponential_decay", "piecewise", "join",
           "warmup_linear", "warmup_cosine", "as_lambda"]


def _number(name, fn, value):
    if isinstance(value, bool) or not isinstance(value, Real) or not math.isfinite(value):
        raise ValueError(f"schedules.{fn}: {name} must be a finite real number, got {value!r}")
    return float(value)


def _count(name, fn, value, positive=False):
    if isinstance(value, bool) or not isinstance(value, Real) or value != int(value) or value < (1 if positive else 0):
        kind = "a positive" if positive else "a non-negative"
        raise ValueError(f"schedules.{fn}: {name} must be {kind} integer, got {value!r}")
    return int(value)


def _step(step):
    return max(float(step), 0.0)


def constant(value):
    """``f(step) = value``."""
    value = _number("value", "constant", value)

    def schedule(step):
        return value
    return schedule


def linear(start, end, steps):
    """From ``start`` at step 0 to ``end`` at step ``steps`` linearly, then ``end``:
    ``start + (end - start) * min(step, steps) / steps`` (``steps=0``: ``end``)."""
    start = _number("start", "linear", start)
    end = _number("end", "linear", end)
    steps = _count("steps", "linear", steps)

    def schedule(step):
        if steps == 0:
            return end
        t = min(_step(step), steps)
        return start + (end - start) * (t / steps)
    return schedule


def cosine_decay(init, decay_steps, alpha=0.0):
    """Cosine decay from ``init`` to ``alpha * init`` over ``decay_steps``, then held:
    ``init * ((1 - alpha) * (1 + cos(pi * min(step, decay_steps) / decay_steps)) / 2 + alpha)``."""
    init = _number("init", "cosine_decay", init)
    decay_steps = _count("decay_steps", "cosine_decay", decay_steps, positive=True)
    alpha = _number("alpha", "cosine_decay", alpha)

    def schedule(step):
        t = min(_step(step), decay_steps)
        c = 0.5 * (1.0 + math.cos(math.pi * t / decay_steps))
        return init * ((1.0 - alpha) * c + alpha)
    return schedule


def exponential_decay(init, decay_steps, decay_rate, staircase=False):
    """``init * decay_rate ** (step / decay_steps)``; with ``staircase`` the exponent is
    ``floor(step / decay_steps)`` (TensorFlow's ``ExponentialDecay``)."""
    init = _number("init", "exponential_decay", init)
    decay_steps = _count("decay_steps", "exponential_decay", decay_steps, positive=True)
    decay_rate = _number("decay_rate", "exponential_decay", decay_rate)
    if decay_rate < 0:
        raise ValueError(f"schedules.exponential_decay: decay_rate must be >= 0, got {decay_rate}")

    def schedule(step):
        p = _step(step) / decay_steps
        if staircase:
            p = math.floor(p)
        return init * decay_rate ** p
    return schedule


def _check_boundaries(fn, boundaries):
    bs = [_count("boundaries", fn, b) for b in boundaries]
    if any(b1 < b0 for b0, b1 in zip(bs, bs[1:])):
        raise ValueError(f"schedules.{fn}: boundaries must be non-decreasing, got {list(boundaries)}")
    return bs


def piecewise(boundaries, values):
    """Piecewise constant: ``values[i]`` for ``boundaries[i-1] <= step < boundaries[i]``
    (``len(values) == len(boundaries) + 1``, boundaries non-decreasing)."""
    bs = _check_boundaries("piecewise", boundaries)
    vs = [_number("values", "piecewise", v) for v in values]
    if len(vs) != len(bs) + 1:
        raise ValueError(f"schedules.piecewise: expected len(values) == len(boundaries) + 1, got {len(vs)} values "
                         f"and {len(bs)} boundaries")

    def schedule(step):
        return vs[bisect_right(bs, _step(step))]
    return schedule


def join(schedules, boundaries):
    """Chain schedules: ``schedules[i]`` runs for ``boundaries[i-1] <= step <
    boundaries[i]`` and sees ``step - boundaries[i-1]`` (the first one sees ``step``).
    ``len(schedules) == len(boundaries) + 1``."""
    fns = list(schedules)
    bs = _check_boundaries("join", boundaries)
    if len(fns) != len(bs) + 1:
        raise ValueError(f"schedules.join: expected len(schedules) == len(boundaries) + 1, got {len(fns)} schedules "
                         f"and {len(bs)} boundaries")
    for f in fns:
        if not callable(f):
            raise TypeError(f"schedules.join: every schedule must be callable, got {type(f).__name__}")

    def schedule(step):
        s = _step(step)
        i = bisect_right(bs, s)
        return fns[i](s - bs[i - 1] if i > 0 else s)
    return schedule


def warmup_linear(init, peak, warmup_steps, total_steps, end=0.0):
    """Linear warm-up from ``init`` to ``peak`` over ``warmup_steps``, then linear decay
    to ``end`` at ``total_steps`` (counted from step 0, warm-up included), then ``end``."""
    warmup_steps = _count("warmup_steps", "warmup_linear", warmup_steps)
    total_steps = _count("total_steps", "warmup_linear", total_steps)
    if total_steps < warmup_steps:
        raise ValueError(f"schedules.warmup_linear: total_steps ({total_steps}) must be >= warmup_steps "
                         f"({warmup_steps})")
    return join([linear(init, peak, warmup_steps), linear(peak, end, total_steps - warmup_steps)], [warmup_steps])


def warmup_cosine(init, peak, warmup_steps, total_steps, end=0.0):
    """Linear warm-up from ``init`` to ``peak`` over ``warmup_steps``, then cosine decay
    from ``peak`` to ``end`` at ``total_steps`` (warm-up included), then ``end``
    (optax's ``warmup_cosine_decay_schedule`` with ``decay_steps = total_steps``)."""
    warmup_steps = _count("warmup_steps", "warmup_cosine", warmup_steps)
    total_steps = _count("total_steps", "warmup_cosine", total_steps)
    if total_steps <= warmup_steps:
        raise ValueError(f"schedules.warmup_cosine: total_steps ({total_steps}) must be > warmup_steps "
                         f"({warmup_steps})")
    peak = _number("peak", "warmup_cosine", peak)
    end = _number("end", "warmup_cosine", end)
    decay_steps = total_steps - warmup_steps

    def decay(step):
        t = min(_step(step), decay_steps)
        return end + (peak - end) * 0.5 * (1.0 + math.cos(math.pi * t / decay_steps))
    return join([linear(init, peak, warmup_steps), decay], [warmup_steps])


def as_lambda(schedule, base_lr):
    """A ``LambdaLR`` multiplier reproducing the absolute ``schedule``:
    ``lambda step: schedule(step) / base_lr`` (``base_lr`` = the group's initial lr)."""
    if not callable(schedule):
        raise TypeError(f"schedules.as_lambda: schedule must be callable, got {type(schedule).__name__}")
    base_lr = _number("base_lr", "as_lambda", base_lr)
    if base_lr == 0:
        raise ValueError("schedules.as_lambda: base_lr must be non-zero")

    def multiplier(step):
        return schedule(step) / base_lr
    return multiplier
