"""Loss modules (``torch.nn.CrossEntropyLoss`` and the rest): the ``_Loss`` / ``_WeightedLoss``
bases and the Module wrappers. The Functions and functional forms live in
:mod:`numbagrad.ops.loss` (cross-entropy, NLL, MSE, L1), :mod:`numbagrad.ops.loss_pointwise`,
:mod:`numbagrad.ops.ctc` and :mod:`numbagrad.ops.loss_metric`; this module re-exports them,
with the modules of :mod:`.loss_pointwise`, :mod:`.loss_ctc` and :mod:`.loss_metric`.
"""
import numpy as np

from ..ops.loss import (cross_entropy, nll_loss, mse_loss, l1_loss,  # noqa: F401
                        _check_reduction, _legacy_reduction)
from ..tensor import Tensor
from .module import Module

__all__ = ["cross_entropy", "nll_loss", "mse_loss", "l1_loss",
           "CrossEntropyLoss", "NLLLoss", "MSELoss", "L1Loss"]


# ---- modules ---------------------------------------------------------------------------
class _Loss(Module):
    def __init__(self, size_average=None, reduce=None, reduction="mean"):
        super().__init__()
        if size_average is not None or reduce is not None:
            reduction = _legacy_reduction(size_average, reduce)
        _check_reduction(reduction, type(self).__name__)
        self.reduction = reduction


class _WeightedLoss(_Loss):
    def __init__(self, weight=None, size_average=None, reduce=None, reduction="mean"):
        super().__init__(size_average, reduce, reduction)
        if weight is not None and not isinstance(weight, Tensor):
            weight = Tensor(np.asarray(weight))
        self.register_buffer("weight", weight)


class CrossEntropyLoss(_WeightedLoss):
    """``cross_entropy`` as a module (``torch.nn.CrossEntropyLoss``); ``weight`` is a buffer."""

    def __init__(self, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean",
                 label_smoothing=0.0):
        super().__init__(weight, size_average, reduce, reduction)
        self.ignore_index = ignore_index
        self.label_smoothing = label_smoothing

    def forward(self, input, target):
        return cross_entropy(input, target, weight=self._buffers["weight"], ignore_index=self.ignore_index,
                             reduction=self.reduction, label_smoothing=self.label_smoothing)


class NLLLoss(_WeightedLoss):
    """``nll_loss`` as a module (``torch.nn.NLLLoss``)."""

    def __init__(self, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"):
        super().__init__(weight, size_average, reduce, reduction)
        self.ignore_index = ignore_index

    def forward(self, input, target):
        return nll_loss(input, target, weight=self._buffers["weight"], ignore_index=self.ignore_index,
                        reduction=self.reduction)


class MSELoss(_Loss):
    """``mse_loss`` as a module (``torch.nn.MSELoss``)."""

    def forward(self, input, target):
        return mse_loss(input, target, reduction=self.reduction)


class L1Loss(_Loss):
    """``l1_loss`` as a module (``torch.nn.L1Loss``)."""

    def forward(self, input, target):
        return l1_loss(input, target, reduction=self.reduction)


# ---- the rest of the loss library (each module imports the helpers above) ----------------------
from . import loss_pointwise as _lp, loss_ctc as _lc, loss_metric as _lm  # noqa: E402
from .loss_pointwise import *  # noqa: E402,F401,F403
from .loss_ctc import *  # noqa: E402,F401,F403
from .loss_metric import *  # noqa: E402,F401,F403

__all__ += _lp.__all__ + _lc.__all__ + _lm.__all__
