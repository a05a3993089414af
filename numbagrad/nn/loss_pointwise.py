"""The Module wrappers of the regression and classification losses (``torch.nn.BCELoss`` and
the rest); their Functions and functional forms live in :mod:`numbagrad.ops.loss_pointwise`
and are re-exported here."""
import numpy as np

from ..ops import loss_pointwise as _ops_lp
from ..ops.loss_pointwise import *  # noqa: F401,F403
from ..tensor import Tensor
from .loss import _Loss, _WeightedLoss, _legacy_reduction
from .module import Module

__all__ = _ops_lp.__all__ + ["SmoothL1Loss", "HuberLoss", "PoissonNLLLoss", "GaussianNLLLoss", "BCELoss",
                             "BCEWithLogitsLoss", "KLDivLoss", "MultiMarginLoss", "MultiLabelSoftMarginLoss",
                             "FocalLoss"]


# ---- modules ---------------------------------------------------------------------------------------------
class SmoothL1Loss(_Loss):
    """``smooth_l1_loss`` as a module (``torch.nn.SmoothL1Loss``)."""

    def __init__(self, size_average=None, reduce=None, reduction="mean", beta=1.0):
        super().__init__(size_average, reduce, reduction)
        self.beta = beta

    def forward(self, input, target):
        return smooth_l1_loss(input, target, reduction=self.reduction, beta=self.beta)


class HuberLoss(_Loss):
    """``huber_loss`` as a module (``torch.nn.HuberLoss``)."""

    def __init__(self, reduction="mean", delta=1.0):
        super().__init__(reduction=reduction)
        self.delta = delta

    def forward(self, input, target):
        return huber_loss(input, target, reduction=self.reduction, delta=self.delta)


class PoissonNLLLoss(_Loss):
    """``poisson_nll_loss`` as a module (``torch.nn.PoissonNLLLoss``)."""

    def __init__(self, log_input=True, full=False, size_average=None, eps=1e-8, reduce=None, reduction="mean"):
        super().__init__(size_average, reduce, reduction)
        self.log_input = log_input
        self.full = full
        self.eps = eps

    def forward(self, log_input, target):
        return poisson_nll_loss(log_input, target, log_input=self.log_input, full=self.full, eps=self.eps,
                                reduction=self.reduction)


class GaussianNLLLoss(_Loss):
    """``gaussian_nll_loss`` as a module (``torch.nn.GaussianNLLLoss``); ``forward(input, target, var)``."""

    def __init__(self, *, full=False, eps=1e-6, reduction="mean"):
        super().__init__(None, None, reduction)
        self.full = full
        self.eps = eps

    def forward(self, input, target, var):
        return gaussian_nll_loss(input, target, var, full=self.full, eps=self.eps, reduction=self.reduction)


class BCELoss(_WeightedLoss):
    """``binary_cross_entropy`` as a module (``torch.nn.BCELoss``); ``weight`` is a buffer."""

    def forward(self, input, target):
        return binary_cross_entropy(input, target, weight=self._buffers["weight"], reduction=self.reduction)


class BCEWithLogitsLoss(_Loss):
    """``binary_cross_entropy_with_logits`` as a module (``torch.nn.BCEWithLogitsLoss``);
    ``weight`` and ``pos_weight`` are buffers, as in PyTorch."""

    def __init__(self, weight=None, size_average=None, reduce=None, reduction="mean", pos_weight=None):
        super().__init__(size_average, reduce, reduction)
        if weight is not None and not isinstance(weight, Tensor):
            weight = Tensor(np.asarray(weight))
        if pos_weight is not None and not isinstance(pos_weight, Tensor):
            pos_weight = Tensor(np.asarray(pos_weight))
        self.register_buffer("weight", weight)
        self.register_buffer("pos_weight", pos_weight)

    def forward(self, input, target):
        return binary_cross_entropy_with_logits(input, target, self._buffers["weight"],
                                                pos_weight=self._buffers["pos_weight"], reduction=self.reduction)


class KLDivLoss(Module):
    """``kl_div`` as a module (``torch.nn.KLDivLoss``); reductions include 'batchmean'."""

    def __init__(self, size_average=None, reduce=None, reduction="mean", log_target=False):
        super().__init__()
        if size_average is not None or reduce is not None:
            reduction = _legacy_reduction(size_average, reduce)
        if reduction not in ("none", "mean", "sum", "batchmean"):
            raise ValueError(f"KLDivLoss: reduction={reduction!r} is not valid; expected 'none', 'batchmean', "
                             "'mean' or 'sum'")
        self.reduction = reduction
        self.log_target = log_target

    def forward(self, input, target):
        return kl_div(input, target, reduction=self.reduction, log_target=self.log_target)


class MultiMarginLoss(_WeightedLoss):
    """``multi_margin_loss`` as a module (``torch.nn.MultiMarginLoss``); ``weight`` is a buffer."""

    def __init__(self, p=1, margin=1.0, weight=None, size_average=None, reduce=None, reduction="mean"):
        super().__init__(weight, size_average, reduce, reduction)
        if p not in (1, 2):
            raise ValueError(f"MultiMarginLoss: only p == 1 and p == 2 supported, got p={p}")
        if weight is not None and self._buffers["weight"].ndim != 1:
            raise ValueError(f"MultiMarginLoss: weight must be a 1-D tensor, got shape "
                             f"{tuple(self._buffers['weight'].shape)}")
        self.p = p
        self.margin = margin

    def forward(self, input, target):
        return multi_margin_loss(input, target, p=self.p, margin=self.margin, weight=self._buffers["weight"],
                                 reduction=self.reduction)


class MultiLabelSoftMarginLoss(_WeightedLoss):
    """``multilabel_soft_margin_loss`` as a module (``torch.nn.MultiLabelSoftMarginLoss``)."""

    def forward(self, input, target):
        return multilabel_soft_margin_loss(input, target, weight=self._buffers["weight"], reduction=self.reduction)


class FocalLoss(_Loss):
    """``focal_loss`` as a module (numbagrad's own: multi-class softmax focal loss).
    A per-class ``alpha`` is a buffer; a float or None an attribute."""

    def __init__(self, alpha=None, gamma=2.0, reduction="mean", ignore_index=-100):
        super().__init__(None, None, reduction)
        if alpha is not None and not isinstance(alpha, (int, float)):
            if not isinstance(alpha, Tensor):
                alpha = Tensor(np.asarray(alpha, dtype=np.float32))
            self.register_buffer("alpha", alpha)
        else:
            self.alpha = alpha
        self.gamma = gamma
        self.ignore_index = ignore_index

    def forward(self, input, target):
        alpha = self._buffers["alpha"] if "alpha" in self._buffers else self.alpha
        return focal_loss(input, target, alpha=alpha, gamma=self.gamma, reduction=self.reduction,
                          ignore_index=self.ignore_index)
