"""``evaluate(model, data, metrics)``: run a model over a dataset in eval mode and return its
metrics; ``evaluate_many`` does it for several datasets."""
import copy
import numbers

import numpy as np

from ..autograd import no_grad
from .stateful import Mean, Metric

__all__ = ["evaluate", "evaluate_many"]


def _metric_dict(metrics):
    """``{name: Metric or callable}`` out of a dict, a list of metrics, or one metric."""
    if isinstance(metrics, Metric):
        metrics = [metrics]
    if isinstance(metrics, dict):
        items = list(metrics.items())
    elif isinstance(metrics, (list, tuple)):
        items = []
        for m in metrics:
            if not isinstance(m, Metric):
                raise TypeError(f"evaluate(): a list of metrics must hold Metric objects (give callables "
                                f"in a dict, with their names), got {type(m).__name__}")
            items.append((m.name, m))
    else:
        raise TypeError(f"evaluate(): metrics must be a dict {{name: metric}}, a list of Metric objects "
                        f"or one Metric, got {type(metrics).__name__}")
    out = {}
    for name, m in items:
        if not isinstance(name, str):
            raise TypeError(f"evaluate(): metric names must be strings, got {name!r}")
        if name in out:
            raise ValueError(f"evaluate(): two metrics are named {name!r}")
        if not (isinstance(m, Metric) or callable(m)):
            raise TypeError(f"evaluate(): metric {name!r} must be a Metric or a callable "
                            f"(output, target) -> number, got {type(m).__name__}")
        out[name] = m
    return out


def _batch_size(y):
    shape = getattr(y, "shape", None)
    if shape is None:
        shape = np.shape(y)
    return int(shape[0]) if len(shape) else 1


def _to(x, device):
    if device is None:
        return x
    if isinstance(x, (list, tuple)):
        return type(x)(_to(v, device) for v in x)
    return x.to(device) if hasattr(x, "to") else x


def evaluate(model, data, metrics, *, device=None):
    """Run ``model`` over ``data`` in eval mode under ``no_grad`` and return the metrics.

    Parameters
    ----------
    model : nn.Module (or any callable)
        Called as ``model(x)`` (``model(*x)`` when ``x`` is a tuple or list). A Module is put
        in eval mode for the run; afterwards every submodule gets back the training flag it
        had (so a partly frozen model keeps its mix), and grad mode is restored.
    data : iterable of ``(x, y)`` batches
        A DataLoader, a list of tuples, a generator.
    metrics : dict, list of Metric, or a Metric
        ``{name: metric}``. A stateful :class:`~numbagrad.metrics.Metric` is ``reset``,
        ``update(output, y)`` on every batch and ``compute``-d at the end, so its value is
        over the whole data. Any other callable ``(output, y) -> number`` (a loss module, a
        functional metric) is taken per batch and averaged weighted by the batch size
        (``y.shape[0]``): exact for a per-batch mean such as a ``reduction='mean'`` loss. A
        list of metrics is keyed by their :attr:`~Metric.name`.
    device : optional
        When given, each ``x`` and ``y`` is moved there (``.to(device)``) first.

    Returns
    -------
    dict
        ``{name: value}`` in the order of ``metrics``.

    Example
    -------
    >>> from numbagrad import metrics
    >>> evaluate(model, loader, {"accuracy": metrics.Accuracy(), "loss": nn.CrossEntropyLoss()})  # doctest: +SKIP
    {'accuracy': 0.915, 'loss': 0.4231}
    """
    ms = _metric_dict(metrics)
    means = {name: Mean() for name, m in ms.items() if not isinstance(m, Metric)}
    for m in ms.values():
        if isinstance(m, Metric):
            m.reset()
    modules = list(model.modules()) if hasattr(model, "modules") and hasattr(model, "train") else []
    modes = [(mod, mod.training) for mod in modules]
    try:
        if modules:
            model.eval()
        with no_grad():
            for k, batch in enumerate(data):
                try:
                    x, y = batch
                except (TypeError, ValueError):
                    raise ValueError(f"evaluate(): batch {k} of data is not an (x, y) pair "
                                     f"(got {type(batch).__name__})") from None
                x, y = _to(x, device), _to(y, device)
                out = model(*x) if isinstance(x, (list, tuple)) else model(x)
                n = None
                for name, m in ms.items():
                    if isinstance(m, Metric):
                        m.update(out, y)
                    else:
                        v = m(out, y)
                        if n is None:
                            n = _batch_size(y)
                        means[name].update(v if not isinstance(v, numbers.Number) else float(v), n)
    finally:
        for mod, mode in modes:
            mod.__dict__["training"] = mode
    return {name: (m.compute() if isinstance(m, Metric) else means[name].compute()) for name, m in ms.items()}


def evaluate_many(model, datasets, metrics, *, device=None):
    """:func:`evaluate` on each of several datasets: ``{split: {name: value}}``.

    ``datasets`` is ``{split: data}`` (e.g. ``{"train": train_loader, "val": val_loader}``);
    each split is scored with its own copy of ``metrics`` (deep copies, so the metrics
    passed in are left as they were).
    """
    if not isinstance(datasets, dict):
        raise TypeError(f"evaluate_many(): datasets must be a dict {{split: data}}, got {type(datasets).__name__}")
    return {split: evaluate(model, data, copy.deepcopy(metrics), device=device) for split, data in datasets.items()}
