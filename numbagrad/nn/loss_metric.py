"""The Module wrappers of the metric-learning losses and distances (``torch.nn.PairwiseDistance``,
``torch.nn.TripletMarginLoss``, ...); their Functions and functional forms live in
:mod:`numbagrad.ops.loss_metric` and are re-exported here."""
from ..ops import loss_metric as _ops_lm
from ..ops.loss_metric import *  # noqa: F401,F403
from ..ops.loss_metric import _margin_positive
from .loss import _Loss
from .module import Module

__all__ = _ops_lm.__all__ + ["PairwiseDistance", "CosineSimilarity", "TripletMarginLoss",
                             "TripletMarginWithDistanceLoss", "CosineEmbeddingLoss", "HingeEmbeddingLoss",
                             "MarginRankingLoss", "ContrastiveLoss"]


# ---- modules ---------------------------------------------------------------------------------
class PairwiseDistance(Module):
    """``pairwise_distance`` as a module (``torch.nn.PairwiseDistance``)."""

    def __init__(self, p=2.0, eps=1e-6, keepdim=False):
        super().__init__()
        self.norm = p
        self.eps = eps
        self.keepdim = keepdim

    def forward(self, x1, x2):
        return pairwise_distance(x1, x2, self.norm, self.eps, self.keepdim)


class CosineSimilarity(Module):
    """``cosine_similarity`` as a module (``torch.nn.CosineSimilarity``)."""

    def __init__(self, dim=1, eps=1e-8):
        super().__init__()
        self.dim = dim
        self.eps = eps

    def forward(self, x1, x2):
        return cosine_similarity(x1, x2, self.dim, self.eps)


class TripletMarginLoss(_Loss):
    """``triplet_margin_loss`` as a module (``torch.nn.TripletMarginLoss``)."""

    def __init__(self, margin=1.0, p=2.0, eps=1e-6, swap=False, size_average=None, reduce=None,
                 reduction="mean"):
        super().__init__(size_average, reduce, reduction)
        _margin_positive(margin, "TripletMarginLoss")
        self.margin = margin
        self.p = p
        self.eps = eps
        self.swap = swap

    def forward(self, anchor, positive, negative):
        return triplet_margin_loss(anchor, positive, negative, margin=self.margin, p=self.p, eps=self.eps,
                                   swap=self.swap, reduction=self.reduction)


class TripletMarginWithDistanceLoss(_Loss):
    """``triplet_margin_with_distance_loss`` as a module
    (``torch.nn.TripletMarginWithDistanceLoss``); ``distance_function`` defaults to a
    :class:`PairwiseDistance` submodule, as in torch (a Module given is registered too)."""

    def __init__(self, *, distance_function=None, margin=1.0, swap=False, reduction="mean"):
        super().__init__(size_average=None, reduce=None, reduction=reduction)
        _margin_positive(margin, "TripletMarginWithDistanceLoss")
        self.distance_function = distance_function if distance_function is not None else PairwiseDistance()
        self.margin = margin
        self.swap = swap

    def forward(self, anchor, positive, negative):
        return triplet_margin_with_distance_loss(anchor, positive, negative,
                                                 distance_function=self.distance_function, margin=self.margin,
                                                 swap=self.swap, reduction=self.reduction)


class _MarginLoss(_Loss):
    """A loss whose one option is ``margin`` (default 0), with the legacy reduction arguments."""

    def __init__(self, margin=0.0, size_average=None, reduce=None, reduction="mean"):
        super().__init__(size_average, reduce, reduction)
        self.margin = margin


class CosineEmbeddingLoss(_MarginLoss):
    """``cosine_embedding_loss`` as a module (``torch.nn.CosineEmbeddingLoss``)."""

    def forward(self, input1, input2, target):
        return cosine_embedding_loss(input1, input2, target, margin=self.margin, reduction=self.reduction)


class HingeEmbeddingLoss(_MarginLoss):
    """``hinge_embedding_loss`` as a module (``torch.nn.HingeEmbeddingLoss``)."""

    def __init__(self, margin=1.0, size_average=None, reduce=None, reduction="mean"):
        super().__init__(margin, size_average, reduce, reduction)

    def forward(self, input, target):
        return hinge_embedding_loss(input, target, margin=self.margin, reduction=self.reduction)


class MarginRankingLoss(_MarginLoss):
    """``margin_ranking_loss`` as a module (``torch.nn.MarginRankingLoss``)."""

    def forward(self, input1, input2, target):
        return margin_ranking_loss(input1, input2, target, margin=self.margin, reduction=self.reduction)


class ContrastiveLoss(_Loss):
    """``contrastive_loss`` as a module (numbagrad's own; see :func:`contrastive_loss`)."""

    def __init__(self, margin=1.0, reduction="mean"):
        super().__init__(size_average=None, reduce=None, reduction=reduction)
        self.margin = margin

    def forward(self, x1, x2, target):
        return contrastive_loss(x1, x2, target, margin=self.margin, reduction=self.reduction)
