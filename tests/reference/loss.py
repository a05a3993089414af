"""Plain float64 NumPy references for the losses."""
import numpy as np

from .reduce import logsumexp


def cross_entropy(x, t, weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.0):
    """``torch.nn.functional.cross_entropy`` for (N, C) logits and class-index targets."""
    n, c = x.shape
    logp = x - logsumexp(x, 1, keepdims=True)
    w = np.ones(c) if weight is None else weight
    keep = t != ignore_index
    ts = np.where(keep, t, 0)
    nll = -logp[np.arange(n), ts] * w[ts]
    smooth = -(logp * w).sum(1) / c
    loss = ((1 - label_smoothing) * nll + label_smoothing * smooth) * keep
    if reduction == "none":
        return loss
    if reduction == "sum":
        return loss.sum()
    return loss.sum() / (w[ts] * keep).sum()
