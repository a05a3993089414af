"""``MetricTracker``: running means of named values over an epoch, a one-line summary, and
the per-epoch history."""
import numbers

from .stateful import Mean, Metric

__all__ = ["MetricTracker"]


class MetricTracker:
    """Collect named values during an epoch; :meth:`summary` prints their means.

    ``observe(name, value, weight=1.0)`` adds a value (a number, a scalar Tensor or array,
    or a stateful :class:`~numbagrad.metrics.Metric`, whose ``compute()`` is taken) to
    ``name``'s weighted running mean (pass the batch size as ``weight`` for per-sample
    means). :meth:`compute` returns ``{name: mean}`` in the order names were first
    observed; :meth:`summary` formats it on one line, ``"accuracy: 0.9150 loss: 0.4231"``.
    :meth:`reset` closes the epoch: each mean is appended to :attr:`history` (``{name:
    [one value per epoch]}``, Keras's layout; a name missing from an epoch gets nan there),
    and the running means start again.

    Example
    -------
    >>> t = MetricTracker()
    >>> t.observe("loss", 0.5); t.observe("loss", 0.3)
    >>> t.summary()
    'loss: 0.4000'
    """

    def __init__(self, fmt="{:.4f}"):
        self.fmt = fmt
        self._means = {}
        self.history = {}
        self._epochs = 0

    def observe(self, name, value, weight=1.0):
        if not isinstance(name, str) or not name:
            raise TypeError(f"MetricTracker.observe(): name must be a non-empty string, got {name!r}")
        if isinstance(value, Metric):
            value = value.compute()
        if isinstance(value, numbers.Number) and not isinstance(value, bool):
            value = float(value)
        m = self._means.get(name)
        if m is None:
            m = self._means[name] = Mean()
        try:
            m.update(value, weight)
        except (TypeError, ValueError) as e:
            raise type(e)(f"MetricTracker.observe({name!r}): {e}") from None

    def compute(self):
        """``{name: mean}`` of the current epoch."""
        return {k: m.compute() for k, m in self._means.items()}

    def summary(self):
        """One line, ``"name: value name: value"`` with each mean formatted by ``fmt``."""
        return " ".join(f"{k}: {self.fmt.format(v)}" for k, v in self.compute().items())

    def reset(self):
        """Close the epoch: append its means to :attr:`history`, then start again. An epoch
        with nothing observed adds nothing."""
        if not self._means:
            return
        values = self.compute()
        for k in self.history.keys() | values.keys():
            col = self.history.setdefault(k, [float("nan")] * self._epochs)
            col.append(values.get(k, float("nan")))
        self._epochs += 1
        self._means = {}

    def __repr__(self):
        return f"MetricTracker({self.summary() or 'empty'}; {self._epochs} epochs in history)"

