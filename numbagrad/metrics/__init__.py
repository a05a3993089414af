"""``numbagrad.metrics``: classification and regression metrics, functional and stateful.

* Functional (:mod:`.functional`): ``accuracy``, ``binary_accuracy``, ``precision``,
  ``recall``, ``f1_score``, ``fbeta_score``, ``confusion_matrix``, ``roc_auc``,
  ``average_precision``, ``mean_squared_error``, ``mean_absolute_error``, ``r2_score``:
  scikit-learn's values; scalars as Python floats, per-class results and confusion
  matrices as NumPy arrays.
* Stateful (:mod:`.stateful`): ``Mean``, ``LossTracker``, ``Accuracy``, ``Precision``,
  ``Recall``, ``F1Score``, ``FBetaScore``, ``ConfusionMatrix``, ``AUROC`` with
  ``update`` / ``compute`` / ``reset`` / ``merge`` and ``state_arrays``: counts accumulate,
  so many batches give the metric over the whole data.
* :class:`MetricTracker` (running means, a one-line summary, history) and
  :func:`evaluate` / :func:`evaluate_many` (a model over data, eval mode, ``no_grad``).

The counting kernels are ``kernels/{cpu,cuda}/metrics.py``.
"""
from ._inputs import UndefinedMetricWarning
from .functional import (accuracy, binary_accuracy, precision, recall, f1_score, fbeta_score,
                         precision_recall_fscore, confusion_matrix, roc_auc, average_precision,
                         mean_squared_error, mean_absolute_error, r2_score)
from .stateful import (Metric, Mean, LossTracker, Accuracy, Precision, Recall, FBetaScore, F1Score,
                       ConfusionMatrix, AUROC)
from .tracker import MetricTracker
from .evaluate import evaluate, evaluate_many
from . import functional

__all__ = ["UndefinedMetricWarning", "accuracy", "binary_accuracy", "precision", "recall", "f1_score",
           "fbeta_score", "precision_recall_fscore", "confusion_matrix", "roc_auc", "average_precision",
           "mean_squared_error", "mean_absolute_error", "r2_score", "Metric", "Mean", "LossTracker",
           "Accuracy", "Precision", "Recall", "FBetaScore", "F1Score", "ConfusionMatrix", "AUROC",
           "MetricTracker", "evaluate", "evaluate_many", "functional"]
