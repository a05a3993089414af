"""Functional metrics: one call over whole predictions, scikit-learn's values.

Inputs
------
``pred`` and ``target`` may be numbagrad Tensors (CPU or CUDA), NumPy arrays or lists;
``pred`` is read as

* **scores**: ``pred.ndim == target.ndim + 1``: logits or probabilities of shape ``(N, C)``
  (or ``(N, C, d1, ...)`` with targets ``(N, d1, ...)``, the class axis second as in
  PyTorch); the prediction is the arg-max class (first maximum on ties);
* **binary probabilities**: a floating ``pred`` of ``target``'s shape; the prediction is
  ``pred > threshold`` (pass ``threshold=0.0`` for logits), with ``C = 2``;
* **class indices**: an integer (or bool) ``pred`` of ``target``'s shape.

``target`` holds class indices (integers, bools, or floats with integral values). Every
label is checked against ``[0, num_classes)`` before a kernel runs: a bad one raises a
``ValueError`` naming the function, the argument, the value and its position. When
``num_classes`` is left out it is ``C`` for scores, 2 for binary probabilities, and
``max(pred, target) + 1`` for class indices (so, unlike scikit-learn, classes below the
largest label that appear nowhere are still counted as classes: pass ``num_classes``).

Results: Python floats for scalars, NumPy ``float64`` arrays for per-class results
(``average=None``), a NumPy ``(C, C)`` matrix for :func:`confusion_matrix` (``int64``
counts, ``float64`` when normalised), whatever the device of the inputs.

Undefined values (0/0) follow scikit-learn's ``zero_division``: ``'warn'`` gives 0.0 and an
:class:`UndefinedMetricWarning`, ``0``, ``1`` or ``np.nan`` give that value silently; averages
skip NaN entries.

How it runs
-----------
The classification metrics are computed from counts: the confusion matrix (``int64``,
``kernels/{cpu,cuda}/metrics.py``, ``_confusion_count``; scores go through ``_row_argmax``
first) and the number of top-k hits (``_topk_correct``). The stateful metrics (:mod:`numbagrad.metrics.stateful`) add the same
counts batch by batch through the same functions (:func:`confusion_counts`,
:func:`accuracy_counts`) and finish with the same formulas (:func:`prf_from_confusion`), so
a metric over many batches equals the metric over the whole data. ROC AUC and average
precision sort the scores on the host in NumPy (``float64``, scikit-learn's tie handling);
the regression metrics are NumPy reductions in ``float64``.
"""
import math
import numbers

import numpy as np

from ..backend import backend_of
from . import _inputs as I
from ._inputs import UndefinedMetricWarning

__all__ = ["accuracy", "binary_accuracy", "precision", "recall", "f1_score", "fbeta_score",
           "precision_recall_fscore", "confusion_matrix", "roc_auc", "average_precision",
           "mean_squared_error", "mean_absolute_error", "r2_score", "UndefinedMetricWarning"]

_AVERAGES = ("macro", "micro", "weighted", "binary", None)


# ---- input preparation ------------------------------------------------------------------------
class _Prepared:
    """``pred``/``target`` read for counting: ``kind`` is ``'scores'`` (``pred`` a C-contiguous
    ``(M, C)`` float array) or ``'labels'`` (``pred`` 1-D ``int64``); ``target`` is 1-D
    ``int64``; every label checked against ``[0, num_classes)``."""

    __slots__ = ("kind", "pred", "target", "num_classes")

    def __init__(self, kind, pred, target, num_classes):
        self.kind, self.pred, self.target, self.num_classes = kind, pred, target, num_classes


def _scores_2d(p):
    """Scores ``(N, C, *rest)`` as a C-contiguous ``(N * prod(rest), C)`` float array."""
    if p.dtype.kind != "f" or (I.on_cpu(p) and p.dtype == np.float16):
        p = p.astype(np.float32 if p.dtype.kind == "f" else np.float64)
    if p.ndim > 2:
        p = np.moveaxis(p, 1, -1).reshape(-1, p.shape[1])
    return I.contiguous(p)


def prepare(fn, pred, target, num_classes=None, threshold=0.5):
    """Read ``pred`` and ``target`` as the module docstring says, and check every label."""
    p = I.as_array(pred, fn, "pred")
    t = I.as_array(target, fn, "target")
    I.same_device(fn, p, t)
    num_classes = I.check_num_classes(fn, num_classes)
    I.check_label_dtype(fn, "target", t)
    if p.ndim == t.ndim + 1:
        if p.shape[0] != t.shape[0] or tuple(p.shape[2:]) != tuple(t.shape[1:]):
            raise I.shape_error(fn, p, t, "do not match: scores must be (N, C, *rest) for targets (N, *rest)")
        c = int(p.shape[1])
        if c < 1:
            raise I.shape_error(fn, p, t, "give no class (C = 0)")
        if num_classes is not None and num_classes != c:
            raise ValueError(f"{fn}(): num_classes={num_classes} but pred of shape {tuple(p.shape)} "
                             f"scores {c} classes")
        I.check_labels(fn, "target", t, c)
        return _Prepared("scores", _scores_2d(p), I.labels_int64(t), c)
    if tuple(p.shape) != tuple(t.shape):
        raise I.shape_error(fn, p, t, "do not match: give class indices or binary probabilities of "
                                      "target's shape, or scores with one more (class) dimension")
    if p.dtype.kind == "f":          # binary probabilities (or logits with threshold=0)
        if num_classes not in (None, 2):
            raise ValueError(f"{fn}(): a floating pred of target's shape is read as binary probabilities "
                             f"(C = 2), but num_classes={num_classes}; pass integer class indices or "
                             f"(N, C) scores")
        if not isinstance(threshold, numbers.Real):
            raise TypeError(f"{fn}(): threshold must be a number, got {threshold!r}")
        I.check_labels(fn, "target", t, 2)
        return _Prepared("labels", I.labels_int64(p > threshold), I.labels_int64(t), 2)
    I.check_label_dtype(fn, "pred", p)
    if num_classes is None:
        if p.size == 0:
            num_classes = 1
        else:
            plo, phi = I.label_range(p)
            tlo, thi = I.label_range(t)
            if plo < 0:
                I.fail_labels(fn, "pred", p, int(max(phi, thi)) + 1)
            if tlo < 0:
                I.fail_labels(fn, "target", t, int(max(phi, thi)) + 1)
            num_classes = int(max(phi, thi)) + 1
    I.check_labels(fn, "pred", p, num_classes)
    I.check_labels(fn, "target", t, num_classes)
    return _Prepared("labels", I.labels_int64(p), I.labels_int64(t), num_classes)


# ---- counts (shared with the stateful metrics) ---------------------------------------------------
def _confusion_of(prep):
    """The ``(C, C)`` ``int64`` confusion counts of prepared inputs, as a NumPy array."""
    c = prep.num_classes
    pred = prep.pred
    be = backend_of(prep.target)
    if prep.kind == "scores":
        pred = be.empty(prep.target.size, np.int64)
        if pred.size:
            be.kernel("metrics", "row_argmax")(prep.pred, pred)
    out = be.zeros((c, c), np.int64)
    if prep.target.size:
        be.kernel("metrics", "confusion_count")(prep.target, pred, out)
    return I.host(out)


def confusion_counts(fn, pred, target, num_classes=None, threshold=0.5):
    """``(C, C)`` ``int64`` counts, rows the true class, columns the predicted one."""
    return _confusion_of(prepare(fn, pred, target, num_classes, threshold))


def _check_top_k(fn, top_k):
    if isinstance(top_k, bool) or not isinstance(top_k, numbers.Integral) or top_k < 1:
        raise ValueError(f"{fn}(): top_k must be a positive integer, got {top_k!r}")
    return int(top_k)


def accuracy_counts(fn, pred, target, top_k=1, num_classes=None, threshold=0.5):
    """``(hits, total)``: how many samples are right (the target among the ``top_k`` highest
    scores, or equal to the predicted class), out of how many."""
    top_k = _check_top_k(fn, top_k)
    prep = prepare(fn, pred, target, num_classes, threshold)
    n = int(prep.target.size)
    if prep.kind == "scores":
        if top_k > prep.num_classes:
            raise ValueError(f"{fn}(): top_k={top_k} is larger than the number of classes "
                             f"{prep.num_classes} (pred of shape {tuple(prep.pred.shape)})")
        be = backend_of(prep.target)
        out = be.zeros(1, np.int64)
        if n:
            be.kernel("metrics", "topk_correct")(prep.pred, prep.target, top_k, out)
        return int(I.item(out)), n
    if top_k != 1:
        raise ValueError(f"{fn}(): top_k={top_k} needs (N, C) scores, but pred holds one class per sample")
    return (int(I.item(np.count_nonzero(prep.pred == prep.target))) if n else 0), n


def _ratio(fn, num, den, zero_division, what):
    if den == 0:
        z = I.check_zero_division(fn, zero_division)
        if zero_division == "warn":
            I.warn_undefined(f"{fn}(): {what} is ill-defined on zero samples and is set to 0.0. "
                             f"Use the zero_division parameter to control this behavior.")
        return z
    return num / den


# ---- classification -----------------------------------------------------------------------------
def accuracy(pred, target, top_k=1, *, num_classes=None, threshold=0.5, zero_division="warn"):
    """Fraction of samples classified right; top-k accuracy for scores.

    Parameters
    ----------
    pred : Tensor, array or list
        Scores ``(N, C)`` (logits or probabilities), class indices ``(N,)`` or binary
        probabilities ``(N,)`` (module docstring).
    target : Tensor, array or list
        Class indices ``(N,)``.
    top_k : int
        With scores, a sample counts as right when its target is among its ``top_k`` highest
        scores (ties: the lower class index ranks first). Must be 1 for class indices, and at
        most ``C``.
    num_classes, threshold
        See the module docstring.
    zero_division : 'warn', 0, 1 or np.nan
        The value for zero samples.

    Returns
    -------
    float
        scikit-learn's ``accuracy_score`` (``top_k_accuracy_score`` for ``top_k > 1``).

    Example
    -------
    >>> accuracy([[0.1, 0.9], [0.8, 0.2]], [1, 1])
    0.5
    """
    hits, n = accuracy_counts("accuracy", pred, target, top_k, num_classes, threshold)
    return float(_ratio("accuracy", hits, n, zero_division, "Accuracy"))


def binary_accuracy(pred, target, threshold=0.5, *, zero_division="warn"):
    """Fraction of ``pred > threshold`` equal to ``target`` (0/1), over all elements.

    ``pred`` holds probabilities (or logits with ``threshold=0.0``) of ``target``'s shape,
    any shape; ``target`` holds 0/1 (ints, bools or floats). Returns a float.
    """
    fn = "binary_accuracy"
    p = I.as_array(pred, fn, "pred")
    t = I.as_array(target, fn, "target")
    if tuple(p.shape) != tuple(t.shape):
        raise I.shape_error(fn, p, t, "must have one shape")
    if p.dtype.kind not in "biuf":
        raise TypeError(f"{fn}(): pred must be numeric, got dtype {p.dtype}")
    if p.dtype.kind != "f":
        p = p.astype(np.float64)
    hits, n = accuracy_counts(fn, p, t, 1, 2, threshold)
    return float(_ratio(fn, hits, n, zero_division, "Accuracy"))


def _check_average(fn, average, allowed=_AVERAGES):
    if average not in allowed:
        raise ValueError(f"{fn}(): average must be one of {', '.join(repr(a) for a in allowed)}, "
                         f"got {average!r}")


def _nanaverage(a, weights=None):
    a = np.asarray(a, np.float64)
    keep = ~np.isnan(a)
    if a.size == 0 or not keep.any():
        return math.nan
    if weights is not None:
        w = np.asarray(weights, np.float64)[keep]
        if w.sum() != 0:
            return float(np.dot(a[keep], w) / w.sum())
    return float(a[keep].mean())


def _divide(fn, num, den, zero_division, metric, modifier, warn):
    """``num / den`` elementwise (float64), 0/0 entries set to ``zero_division``'s value."""
    num = np.asarray(num, np.float64)
    den = np.asarray(den, np.float64)
    mask = den == 0
    out = num / np.where(mask, 1.0, den)
    if mask.any():
        out[mask] = I.check_zero_division(fn, zero_division)
        if warn and zero_division == "warn":
            I.warn_undefined(f"{fn}(): {metric} is ill-defined and being set to 0.0 in "
                             f"{'labels' if out.size > 1 else 'the label'} with no {modifier} samples. "
                             f"Use the zero_division parameter to control this behavior.")
    return out


def prf_from_confusion(fn, cm, beta=1.0, average="macro", zero_division="warn", pos_label=1,
                       warn_for=("precision", "recall", "f-score")):
    """``(precision, recall, f_beta)`` from a ``(C, C)`` confusion matrix (rows true):
    scikit-learn's ``precision_recall_fscore_support`` over labels ``0..C-1``."""
    _check_average(fn, average)
    I.check_zero_division(fn, zero_division)
    if not isinstance(beta, numbers.Real) or beta < 0 or math.isnan(beta):
        raise ValueError(f"{fn}(): beta must be a number >= 0, got {beta!r}")
    cm = np.asarray(cm)
    tp = np.diagonal(cm).astype(np.float64)
    pred_sum = cm.sum(axis=0).astype(np.float64)
    true_sum = cm.sum(axis=1).astype(np.float64)
    if average == "binary":
        c = cm.shape[0]
        if c > 2:
            raise ValueError(f"{fn}(): average='binary' needs at most 2 classes, got {c}; choose "
                             f"average='macro', 'micro', 'weighted' or None")
        if not (isinstance(pos_label, numbers.Integral) and 0 <= pos_label < max(c, 2)):
            raise ValueError(f"{fn}(): pos_label={pos_label!r} is not a class index in [0, {max(c, 2)})")
        # (a matrix of one class, inferred from labels that are all 0, lacks class 1: count 0)
        tp, pred_sum, true_sum = (np.concatenate([v, np.zeros(2)])[pos_label:pos_label + 1]
                                  for v in (tp, pred_sum, true_sum))
    elif average == "micro":
        tp, pred_sum, true_sum = (np.array([v.sum()]) for v in (tp, pred_sum, true_sum))
    precision = _divide(fn, tp, pred_sum, zero_division, "Precision", "predicted", "precision" in warn_for)
    recall = _divide(fn, tp, true_sum, zero_division, "Recall", "true", "recall" in warn_for)
    if math.isinf(beta):
        f = recall
    elif beta == 0:
        f = precision
    else:
        b2 = float(beta) ** 2
        f = _divide(fn, (1 + b2) * tp, b2 * true_sum + pred_sum, zero_division, "F-score",
                    "true nor predicted", "f-score" in warn_for)
    if average is None:
        return precision, recall, f
    weights = true_sum if average == "weighted" else None
    return _nanaverage(precision, weights), _nanaverage(recall, weights), _nanaverage(f, weights)


def precision_recall_fscore(pred, target, beta=1.0, num_classes=None, average="macro", *,
                            zero_division="warn", threshold=0.5, pos_label=1):
    """``(precision, recall, f_beta)`` in one pass over the data (see :func:`precision`)."""
    fn = "precision_recall_fscore"
    _check_average(fn, average)
    cm = confusion_counts(fn, pred, target, num_classes, threshold)
    return prf_from_confusion(fn, cm, beta, average, zero_division, pos_label)


_PRF_DOC = """{title}

    Parameters
    ----------
    pred, target : Tensor, array or list
        Scores ``(N, C)``, class indices ``(N,)`` or binary probabilities ``(N,)``, and the
        true class indices (see :mod:`numbagrad.metrics.functional`).{beta}
    num_classes : int, optional
        ``C``; inferred when left out (module docstring).
    average : 'macro', 'micro', 'weighted', 'binary' or None
        ``'macro'``: unweighted mean over classes; ``'micro'``: from the summed counts;
        ``'weighted'``: mean weighted by each class's support (true count); ``'binary'``:
        the score of class ``pos_label`` alone (needs ``C <= 2``); ``None``: the per-class
        scores as a NumPy array.
    zero_division : 'warn', 0, 1 or np.nan
        Value of a 0/0 score; ``'warn'`` sets 0.0 and warns (:class:`UndefinedMetricWarning`).
    threshold : float
        For binary probabilities: the prediction is ``pred > threshold``.
    pos_label : int
        The positive class for ``average='binary'``.

    Returns
    -------
    float, or a NumPy ``float64`` array of shape ``(C,)`` for ``average=None``.
    Equals scikit-learn's ``{sk}(target, pred_labels, labels=range(C), ...)``.
    """


def _prf_public(which, fn, pred, target, beta, num_classes, average, zero_division, threshold, pos_label):
    _check_average(fn, average)
    I.check_zero_division(fn, zero_division)
    cm = confusion_counts(fn, pred, target, num_classes, threshold)
    warn_for = {0: ("precision",), 1: ("recall",), 2: ("f-score",)}[which]
    return prf_from_confusion(fn, cm, beta, average, zero_division, pos_label, warn_for)[which]


def precision(pred, target, num_classes=None, average="macro", *, zero_division="warn", threshold=0.5,
              pos_label=1):
    return _prf_public(0, "precision", pred, target, 1.0, num_classes, average, zero_division, threshold,
                       pos_label)


def recall(pred, target, num_classes=None, average="macro", *, zero_division="warn", threshold=0.5,
           pos_label=1):
    return _prf_public(1, "recall", pred, target, 1.0, num_classes, average, zero_division, threshold,
                       pos_label)


def fbeta_score(pred, target, beta, num_classes=None, average="macro", *, zero_division="warn",
                threshold=0.5, pos_label=1):
    return _prf_public(2, "fbeta_score", pred, target, beta, num_classes, average, zero_division,
                       threshold, pos_label)


def f1_score(pred, target, num_classes=None, average="macro", *, zero_division="warn", threshold=0.5,
             pos_label=1):
    return _prf_public(2, "f1_score", pred, target, 1.0, num_classes, average, zero_division, threshold,
                       pos_label)


precision.__doc__ = _PRF_DOC.format(title="Precision ``tp / (tp + fp)`` per class, averaged.", beta="",
                                    sk="precision_score")
recall.__doc__ = _PRF_DOC.format(title="Recall ``tp / (tp + fn)`` per class, averaged.", beta="",
                                 sk="recall_score")
f1_score.__doc__ = _PRF_DOC.format(title="F1 score ``2 tp / (2 tp + fp + fn)`` per class, averaged.",
                                   beta="", sk="f1_score")
fbeta_score.__doc__ = _PRF_DOC.format(
    title="F-beta score ``(1 + b^2) tp / ((1 + b^2) tp + b^2 fn + fp)`` per class, averaged.",
    beta="\n    beta : float\n        Weight of recall (``>= 0``; 0 gives precision, inf recall).",
    sk="fbeta_score")


def confusion_matrix(pred, target, num_classes=None, normalize=None, *, threshold=0.5):
    """The ``(C, C)`` confusion matrix: entry ``[i, j]`` counts samples of true class ``i``
    predicted as ``j`` (scikit-learn's layout).

    Parameters
    ----------
    pred, target, num_classes, threshold
        See :mod:`numbagrad.metrics.functional`.
    normalize : None, 'true', 'pred' or 'all'
        Divide by the row sums (``'true'``), the column sums (``'pred'``) or the total;
        rows or columns that sum to 0 become 0, as in scikit-learn.

    Returns
    -------
    numpy.ndarray
        ``int64`` counts, or ``float64`` when normalised.

    Example
    -------
    >>> confusion_matrix([0, 1, 1], [0, 1, 0])
    array([[1, 1],
           [0, 1]])
    """
    fn = "confusion_matrix"
    if normalize not in (None, "true", "pred", "all"):
        raise ValueError(f"{fn}(): normalize must be None, 'true', 'pred' or 'all', got {normalize!r}")
    return normalize_confusion(confusion_counts(fn, pred, target, num_classes, threshold), normalize)


def normalize_confusion(cm, normalize):
    if normalize is None:
        return cm
    cm = cm.astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        if normalize == "true":
            cm = cm / cm.sum(axis=1, keepdims=True)
        elif normalize == "pred":
            cm = cm / cm.sum(axis=0, keepdims=True)
        else:
            cm = cm / cm.sum()
    return np.nan_to_num(cm)


# ---- ranking: ROC AUC and average precision ---------------------------------------------------------
def _ranking_inputs(fn, scores, target, num_classes):
    """``(scores float64 (N,) or (N, C), target int64 (N,), C or None)`` on the host."""
    s = I.as_array(scores, fn, "scores")
    t = I.as_array(target, fn, "target")
    I.same_device(fn, s, t, ("scores", "target"))
    num_classes = I.check_num_classes(fn, num_classes)
    I.check_label_dtype(fn, "target", t)
    if s.dtype.kind not in "biuf":
        raise TypeError(f"{fn}(): scores must be numeric, got dtype {s.dtype}")
    if t.ndim != 1 or s.ndim not in (1, 2) or s.shape[0] != t.shape[0]:
        raise ValueError(f"{fn}(): scores of shape {tuple(s.shape)} and target of shape {tuple(t.shape)} "
                         f"do not match: give (N,) scores (binary) or (N, C) scores (one-vs-rest) "
                         f"for (N,) targets")
    if s.ndim == 2:
        c = int(s.shape[1])
        if num_classes is not None and num_classes != c:
            raise ValueError(f"{fn}(): num_classes={num_classes} but scores of shape {tuple(s.shape)} "
                             f"score {c} classes")
    else:
        if num_classes not in (None, 2):
            raise ValueError(f"{fn}(): (N,) scores are binary, but num_classes={num_classes}")
        c = None
    I.check_labels(fn, "target", t, c or 2)
    s = np.asarray(I.host(s), np.float64)
    bad = np.flatnonzero(~np.isfinite(s.reshape(-1)))
    if bad.size:
        where = np.unravel_index(int(bad[0]), s.shape)
        where = int(where[0]) if len(where) == 1 else tuple(int(w) for w in where)
        raise ValueError(f"{fn}(): scores holds {s.reshape(-1)[bad[0]].item()!r} at position {where}; "
                         f"scores must be finite")
    return s, np.asarray(I.host(t)).astype(np.int64).reshape(-1), c


def _binary_auc(fn, s, y):
    """ROC AUC of scores ``s`` for boolean labels ``y``: the Mann-Whitney statistic with
    mid-ranks for ties, which equals the trapezoidal area under scikit-learn's ROC curve."""
    npos = int(np.count_nonzero(y))
    nneg = y.size - npos
    if npos == 0 or nneg == 0:
        I.warn_undefined(f"{fn}(): only one class is present in target; ROC AUC is not defined "
                         f"in that case and is set to nan.")
        return math.nan
    order = np.argsort(s, kind="mergesort")
    ss = s[order]
    # tie groups [start, end) of the sorted scores; mid-rank (1-based) of each group
    edge = np.flatnonzero(np.diff(ss)) + 1
    start = np.concatenate(([0], edge))
    end = np.concatenate((edge, [ss.size]))
    mid = (start + end + 1) / 2.0
    ranks = np.repeat(mid, end - start)
    rank_pos = ranks[y[order]].sum()
    return float((rank_pos - npos * (npos + 1) / 2.0) / (npos * nneg))


def _binary_ap(fn, s, y):
    """Average precision ``sum_k (R_k - R_{k-1}) P_k`` over the distinct thresholds, from the
    highest (scikit-learn's ``average_precision_score``, ties grouped)."""
    npos = int(np.count_nonzero(y))
    if npos == 0:
        I.warn_undefined(f"{fn}(): no positive sample in target; average precision is set to 0.0.")
        return 0.0
    order = np.argsort(s, kind="mergesort")[::-1]
    ss = s[order]
    last = np.concatenate((np.flatnonzero(np.diff(ss)), [ss.size - 1]))   # end of each tie group
    tps = np.cumsum(y[order])[last].astype(np.float64)
    prec = tps / (last + 1)
    rec = tps / npos
    return float(np.sum(np.diff(np.concatenate(([0.0], rec))) * prec))


def _ranking(fn, binary, scores, target, num_classes, average):
    _check_average(fn, average, ("macro", "micro", "weighted", None))
    s, t, c = _ranking_inputs(fn, scores, target, num_classes)
    if c is None:
        return binary(fn, s, t == 1)
    onehot = t[:, None] == np.arange(c)[None, :]
    if average == "micro":
        return binary(fn, s.reshape(-1), onehot.reshape(-1))
    per = np.array([binary(fn, s[:, k], onehot[:, k]) for k in range(c)])
    if average is None:
        return per
    return _nanaverage(per, onehot.sum(axis=0) if average == "weighted" else None)


def roc_auc(scores, target, num_classes=None, average="macro"):
    """Area under the ROC curve: binary, or one-vs-rest over the columns of ``(N, C)`` scores.

    Parameters
    ----------
    scores : Tensor, array or list
        ``(N,)`` scores of the positive class (binary), or ``(N, C)`` scores, one column per
        class (probabilities or logits: only their order matters). Must be finite.
    target : Tensor, array or list
        ``(N,)`` 0/1 labels (binary) or class indices.
    num_classes : int, optional
        ``C``, checked against ``scores``.
    average : 'macro', 'weighted', 'micro' or None
        Over the one-vs-rest columns: the unweighted mean, the mean weighted by each class's
        prevalence, the AUC of all columns flattened against the one-hot targets, or the
        per-class array. Ignored for binary scores.

    Returns
    -------
    float or numpy.ndarray
        scikit-learn's ``roc_auc_score`` (``multi_class='ovr'``; ``'micro'``: on the one-hot
        targets). Ties count one half. A class with no positive or no negative sample has no
        AUC: nan and an :class:`UndefinedMetricWarning`, skipped by the averages.
    """
    return _ranking("roc_auc", _binary_auc, scores, target, num_classes, average)


def average_precision(scores, target, num_classes=None, average="macro"):
    """Average precision (area under the step-wise precision-recall curve): binary, or
    one-vs-rest over the columns of ``(N, C)`` scores.

    Same arguments as :func:`roc_auc`. Returns scikit-learn's ``average_precision_score``
    (the multiclass case on the one-hot targets). A class without positive samples scores
    0.0 with an :class:`UndefinedMetricWarning`, as in scikit-learn.
    """
    return _ranking("average_precision", _binary_ap, scores, target, num_classes, average)


# ---- regression -------------------------------------------------------------------------------------
def _regression_inputs(fn, pred, target, multioutput):
    if multioutput not in ("uniform_average", "raw_values"):
        raise ValueError(f"{fn}(): multioutput must be 'uniform_average' or 'raw_values', got {multioutput!r}")
    p = I.as_array(pred, fn, "pred")
    t = I.as_array(target, fn, "target")
    I.same_device(fn, p, t)
    if tuple(p.shape) != tuple(t.shape):
        raise I.shape_error(fn, p, t, "must have one shape")
    if p.ndim not in (1, 2):
        raise ValueError(f"{fn}(): pred and target must be (N,) or (N, outputs), got shape {tuple(p.shape)}")
    if p.shape[0] == 0:
        raise ValueError(f"{fn}(): pred and target hold no sample (shape {tuple(p.shape)})")
    for name, a in (("pred", p), ("target", t)):
        if a.dtype.kind not in "biuf":
            raise TypeError(f"{fn}(): {name} must be numeric, got dtype {a.dtype}")
    p = np.asarray(I.host(p), np.float64)
    t = np.asarray(I.host(t), np.float64)
    return p.reshape(p.shape[0], -1), t.reshape(t.shape[0], -1)


def _reduce_outputs(v, multioutput):
    return v if multioutput == "raw_values" else float(np.mean(v))


def mean_squared_error(pred, target, multioutput="uniform_average"):
    """Mean of ``(pred - target)^2`` (float64) per output, averaged over outputs unless
    ``multioutput='raw_values'``: scikit-learn's ``mean_squared_error``."""
    p, t = _regression_inputs("mean_squared_error", pred, target, multioutput)
    return _reduce_outputs(np.mean((p - t) ** 2, axis=0), multioutput)


def mean_absolute_error(pred, target, multioutput="uniform_average"):
    """Mean of ``|pred - target|`` (float64) per output, averaged over outputs unless
    ``multioutput='raw_values'``: scikit-learn's ``mean_absolute_error``."""
    p, t = _regression_inputs("mean_absolute_error", pred, target, multioutput)
    return _reduce_outputs(np.mean(np.abs(p - t), axis=0), multioutput)


def r2_score(pred, target, multioutput="uniform_average"):
    """Coefficient of determination ``1 - SS_res / SS_tot`` per output (float64).

    As scikit-learn's ``r2_score`` (``force_finite=True``): a constant target gives 1.0 when
    predicted exactly and 0.0 otherwise; fewer than two samples give nan with an
    :class:`UndefinedMetricWarning`.
    """
    fn = "r2_score"
    p, t = _regression_inputs(fn, pred, target, multioutput)
    if p.shape[0] < 2:
        I.warn_undefined(f"{fn}(): R^2 is not well-defined with fewer than two samples; set to nan.")
        return _reduce_outputs(np.full(p.shape[1], math.nan), multioutput)
    ss_res = np.sum((t - p) ** 2, axis=0)
    ss_tot = np.sum((t - t.mean(axis=0)) ** 2, axis=0)
    ok = ss_tot != 0
    r2 = np.where(ok, 1.0 - ss_res / np.where(ok, ss_tot, 1.0), np.where(ss_res == 0, 1.0, 0.0))
    return _reduce_outputs(r2, multioutput)
