"""Stateful metrics: ``update`` batch by batch, ``compute`` once, ``reset`` for the next epoch.

Each metric accumulates *counts* (a confusion matrix, hits and totals, weighted sums), never
batch values, so a metric over many batches equals the metric over the whole data (not a
mean of batch metrics). Updates count through the same functions as the functional
metrics (:func:`numbagrad.metrics.functional.confusion_counts`, ``accuracy_counts``) and
``compute`` finishes with the same formulas, so ``m.update(p, t); m.compute()`` is
``functional.<metric>(p, t)``.

State and merging
-----------------
A metric's state is a small, fixed set of NumPy arrays on the host, named in two class
attributes:

* ``_sum_states``: arrays of a fixed shape (``int64`` counts, ``float64`` sums) that merge
  by **addition**;
* ``_cat_states``: growing 1-D arrays (the scores and targets :class:`AUROC` keeps) that
  merge by **concatenation**.

:meth:`Metric.state_arrays` returns them as a dict of arrays, :meth:`Metric.merge` adds
another metric of the same kind and settings into this one, and :meth:`Metric._merge`
does the same from a dict of arrays. A data-parallel all-reduce needs nothing else: sum
each ``_sum_states`` array over the ranks (an ``MPI_SUM``), gather and concatenate each
``_cat_states`` array, and ``_merge`` the result into a freshly ``reset`` metric (or
:meth:`Metric.load_state_arrays` it).
"""
import math
import re

import numpy as np

from . import _inputs as I
from . import functional as F

__all__ = ["Metric", "Mean", "LossTracker", "Accuracy", "Precision", "Recall", "FBetaScore", "F1Score",
           "ConfusionMatrix", "AUROC"]


class Metric:
    """Base class of the stateful metrics (see the module docstring for the state contract).

    Subclasses set ``_sum_states`` / ``_cat_states``, create their arrays in :meth:`reset`,
    and implement ``update`` and ``compute``; ``_config`` returns the settings two metrics
    must share to be merged.
    """

    _sum_states = ()
    _cat_states = ()

    def __init__(self):
        self.reset()

    # ---- to implement ----------------------------------------------------------------------
    def reset(self):
        """Forget every update."""
        raise NotImplementedError(f"{type(self).__name__} must implement reset() (a subclass of Metric)")

    def update(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} must implement update() (a subclass of Metric)")

    def compute(self):
        raise NotImplementedError(f"{type(self).__name__} must implement compute() (a subclass of Metric)")

    def _config(self):
        return ()

    # ---- state --------------------------------------------------------------------------------
    @property
    def name(self):
        """The metric's key in :func:`numbagrad.metrics.evaluate` results: the class name in
        snake case (``F1Score`` -> ``'f1_score'``)."""
        return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", type(self).__name__).lower()

    def state_arrays(self):
        """``{name: array}`` of the state: the ``_sum_states`` arrays (merge by addition) and
        the ``_cat_states`` arrays concatenated (merge by concatenation). Copies."""
        out = {k: np.array(getattr(self, k)) for k in self._sum_states}
        for k in self._cat_states:
            parts = getattr(self, k)
            out[k] = np.concatenate(parts) if parts else np.empty(0, self._cat_dtype(k))
        return out

    def _cat_dtype(self, name):
        return np.float64

    def load_state_arrays(self, arrays):
        """Replace the state by ``arrays`` (as :meth:`state_arrays` returns them)."""
        self.reset()
        self._merge(arrays)
        return self

    def _merge(self, arrays):
        """Add a dict of state arrays into this metric: ``_sum_states`` by addition,
        ``_cat_states`` by concatenation (the all-reduce hook)."""
        for k in self._sum_states:
            mine = getattr(self, k)
            theirs = np.asarray(arrays[k])
            if theirs.shape != mine.shape:
                raise ValueError(f"{type(self).__name__}.merge(): state {k!r} has shape {tuple(mine.shape)} "
                                 f"here and {tuple(theirs.shape)} in the other metric")
            mine += theirs.astype(mine.dtype, copy=False)
        for k in self._cat_states:
            a = np.asarray(arrays[k])
            if a.size:
                getattr(self, k).append(a.astype(self._cat_dtype(k), copy=False).reshape(-1))

    def merge(self, other):
        """Add the state of ``other`` (a metric of the same class and settings) into this
        one; returns ``self``. ``a.merge(b).compute()`` equals the metric over the union of
        the batches ``a`` and ``b`` saw."""
        if type(other) is not type(self):
            raise TypeError(f"{type(self).__name__}.merge(): cannot merge a {type(other).__name__}")
        if other._config() != self._config():
            raise ValueError(f"{type(self).__name__}.merge(): settings differ: {self._config()} here, "
                             f"{other._config()} in the other metric")
        self._merge(other.state_arrays())
        return self

    def __repr__(self):
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in self._config_items())})"

    def _config_items(self):
        return ()


def _value(fn, x):
    """A float64 NumPy array of a Tensor / array / number."""
    a = I.as_array(x, fn, "value")
    if a.dtype.kind not in "biuf":
        raise TypeError(f"{fn}(): value must be numeric, got dtype {a.dtype}")
    return np.asarray(I.host(a), np.float64)


class Mean(Metric):
    """Weighted mean of every value seen: ``sum(value * weight) / sum(weight)``.

    ``update(value, weight=1.0)``: ``value`` a number, Tensor or array (each element counts,
    with ``weight`` broadcast against it). ``compute()`` returns a float; nan with an
    :class:`UndefinedMetricWarning` before any update. State: ``total``, ``weight``
    (float64 scalars, merged by addition).
    """

    _sum_states = ("total", "weight")

    def reset(self):
        self.total = np.zeros((), np.float64)
        self.weight = np.zeros((), np.float64)

    def update(self, value, weight=1.0):
        fn = f"{type(self).__name__}.update"
        v = _value(fn, value)
        w = _value(fn, weight)
        try:
            v, w = np.broadcast_arrays(v, w)
        except ValueError:
            raise ValueError(f"{fn}(): weight of shape {w.shape} does not broadcast against value of "
                             f"shape {v.shape}") from None
        if np.any(w < 0):
            raise ValueError(f"{fn}(): weights must be >= 0")
        self.total += np.sum(v * w)
        self.weight += np.sum(w)

    def compute(self):
        if self.weight == 0:
            I.warn_undefined(f"{type(self).__name__}.compute(): no value was seen; the mean is set to nan.")
            return math.nan
        return float(self.total / self.weight)


class LossTracker(Mean):
    """The mean loss over an epoch, weighting each batch by its size.

    ``update(loss, batch_size=1)``: ``loss`` is the batch's mean loss (a scalar Tensor, which
    may require grad: only its value is read, or a number); with the batch size given,
    :meth:`compute` is the mean over samples, whatever the last batch's size.
    """

    def update(self, loss, batch_size=1):
        fn = "LossTracker.update"
        v = _value(fn, loss)
        if v.size != 1:
            raise ValueError(f"{fn}(): loss must be a scalar, got shape {v.shape}")
        if not (isinstance(batch_size, (int, np.integer, float)) and batch_size >= 0):
            raise ValueError(f"{fn}(): batch_size must be a number >= 0, got {batch_size!r}")
        super().update(v.reshape(()), float(batch_size))


class Accuracy(Metric):
    """Accuracy (top-k with scores) over every batch: ``hits / total``.

    Same inputs and settings as :func:`numbagrad.metrics.functional.accuracy`. State:
    ``correct``, ``total`` (``int64``, merged by addition).
    """

    _sum_states = ("correct", "total")

    def __init__(self, top_k=1, *, num_classes=None, threshold=0.5, zero_division="warn"):
        self.top_k = F._check_top_k("Accuracy", top_k)
        self.num_classes = I.check_num_classes("Accuracy", num_classes)
        self.threshold = threshold
        self.zero_division = zero_division
        I.check_zero_division("Accuracy", zero_division)
        super().__init__()

    def reset(self):
        self.correct = np.zeros((), np.int64)
        self.total = np.zeros((), np.int64)

    def update(self, pred, target):
        hits, n = F.accuracy_counts("Accuracy.update", pred, target, self.top_k, self.num_classes,
                                    self.threshold)
        self.correct += hits
        self.total += n

    def compute(self):
        return float(F._ratio("Accuracy.compute", int(self.correct), int(self.total), self.zero_division,
                              "Accuracy"))

    def _config(self):
        return (self.top_k, self.num_classes, self.threshold)

    def _config_items(self):
        return (("top_k", self.top_k), ("num_classes", self.num_classes))


class _ConfusionMetric(Metric):
    """A metric computed from the ``(C, C)`` confusion matrix (``confmat``, ``int64``,
    merged by addition)."""

    _sum_states = ("confmat",)

    def __init__(self, num_classes, *, threshold=0.5):
        self.num_classes = I.check_num_classes(type(self).__name__, num_classes, allow_none=False)
        self.threshold = threshold
        super().__init__()

    def reset(self):
        self.confmat = np.zeros((self.num_classes, self.num_classes), np.int64)

    def update(self, pred, target):
        """Count one batch (inputs as in :mod:`numbagrad.metrics.functional`)."""
        self.confmat += F.confusion_counts(f"{type(self).__name__}.update", pred, target, self.num_classes,
                                           self.threshold)

    def _config(self):
        return (self.num_classes, self.threshold)

    def _config_items(self):
        return (("num_classes", self.num_classes),)


class ConfusionMatrix(_ConfusionMetric):
    """The confusion matrix over every batch (rows: true class, columns: predicted).

    ``compute()`` returns a NumPy ``(C, C)`` array: ``int64`` counts, or ``float64`` with
    ``normalize='true'|'pred'|'all'`` (as :func:`numbagrad.metrics.functional.confusion_matrix`).
    """

    def __init__(self, num_classes, normalize=None, *, threshold=0.5):
        if normalize not in (None, "true", "pred", "all"):
            raise ValueError(f"ConfusionMatrix(): normalize must be None, 'true', 'pred' or 'all', "
                             f"got {normalize!r}")
        self.normalize = normalize
        super().__init__(num_classes, threshold=threshold)

    def compute(self):
        return F.normalize_confusion(self.confmat.copy(), self.normalize)


class FBetaScore(_ConfusionMetric):
    """F-beta score over every batch; settings as :func:`numbagrad.metrics.functional.fbeta_score`
    (``num_classes`` required here: it fixes the state's shape)."""

    _which = 2
    _warn_for = ("f-score",)

    def __init__(self, num_classes, beta=1.0, average="macro", *, zero_division="warn", threshold=0.5,
                 pos_label=1):
        name = type(self).__name__
        F._check_average(name, average)
        I.check_zero_division(name, zero_division)
        self.beta = beta
        self.average = average
        self.zero_division = zero_division
        self.pos_label = pos_label
        super().__init__(num_classes, threshold=threshold)

    def compute(self):
        """Float, or a NumPy array of per-class scores for ``average=None``."""
        return F.prf_from_confusion(f"{type(self).__name__}.compute", self.confmat, self.beta, self.average,
                                    self.zero_division, self.pos_label, self._warn_for)[self._which]

    def _config(self):
        return super()._config() + (self.beta, self.average, self.pos_label)

    def _config_items(self):
        return super()._config_items() + (("average", self.average),)


class F1Score(FBetaScore):
    """F1 score over every batch (:func:`numbagrad.metrics.functional.f1_score`)."""

    def __init__(self, num_classes, average="macro", *, zero_division="warn", threshold=0.5, pos_label=1):
        super().__init__(num_classes, 1.0, average, zero_division=zero_division, threshold=threshold,
                         pos_label=pos_label)


class Precision(F1Score):
    """Precision over every batch (:func:`numbagrad.metrics.functional.precision`)."""

    _which = 0
    _warn_for = ("precision",)


class Recall(F1Score):
    """Recall over every batch (:func:`numbagrad.metrics.functional.recall`)."""

    _which = 1
    _warn_for = ("recall",)


class AUROC(Metric):
    """ROC AUC over every batch (:func:`numbagrad.metrics.functional.roc_auc`).

    ROC AUC depends on the order of all scores, so this metric keeps every score and target
    it is given: O(N) host memory (8 bytes per score and per target). State: ``scores``
    (float64, ``(N * C,)`` flattened row by row) and ``target`` (``int64``), merged by
    concatenation.
    """

    _cat_states = ("scores", "target")

    def __init__(self, num_classes=None, average="macro"):
        F._check_average("AUROC", average, ("macro", "micro", "weighted", None))
        self.num_classes = I.check_num_classes("AUROC", num_classes)
        self.average = average
        self._width = None        # columns of the scores seen (None: binary (N,) scores)
        super().__init__()

    def reset(self):
        self.scores = []
        self.target = []

    def _cat_dtype(self, name):
        return np.int64 if name == "target" else np.float64

    def update(self, scores, target):
        s, t, c = F._ranking_inputs("AUROC.update", scores, target, self.num_classes)
        if self.scores and c != self._width:
            raise ValueError(f"AUROC.update(): scores of shape {s.shape} after batches of "
                             f"{'(N,)' if self._width is None else f'(N, {self._width})'} scores")
        self._width = c
        self.scores.append(s.reshape(-1))
        self.target.append(t)

    def compute(self):
        a = self.state_arrays()
        width = self._width if self._width is not None else self.num_classes
        s = a["scores"] if width is None else a["scores"].reshape(-1, width)
        return F.roc_auc(s, a["target"], self.num_classes, self.average)

    def _merge(self, arrays):
        if self._width is None and np.asarray(arrays["scores"]).size and np.asarray(arrays["target"]).size:
            n_s, n_t = np.asarray(arrays["scores"]).size, np.asarray(arrays["target"]).size
            if n_s != n_t:
                self._width = n_s // n_t
        super()._merge(arrays)

    def merge(self, other):
        if type(other) is AUROC and self._width is not None and other._width is not None \
                and self._width != other._width:
            raise ValueError(f"AUROC.merge(): scores of {self._width} columns here, {other._width} in the other")
        if self._width is None:
            self._width = getattr(other, "_width", None)
        return super().merge(other)

    def _config(self):
        return (self.num_classes, self.average)

    def _config_items(self):
        return (("num_classes", self.num_classes), ("average", self.average))
