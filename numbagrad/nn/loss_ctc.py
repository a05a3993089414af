"""``CTCLoss``, the module of :func:`numbagrad.ops.ctc.ctc_loss` (re-exported here with
``ctc_width``)."""
from ..ops.ctc import ctc_loss, ctc_width  # noqa: F401
from .loss import _Loss

__all__ = ["ctc_loss", "CTCLoss"]


class CTCLoss(_Loss):
    """``ctc_loss`` as a module (``torch.nn.CTCLoss``)."""

    def __init__(self, blank=0, reduction="mean", zero_infinity=False):
        super().__init__(reduction=reduction)
        self.blank = blank
        self.zero_infinity = zero_infinity

    def forward(self, log_probs, targets, input_lengths, target_lengths):
        return ctc_loss(log_probs, targets, input_lengths, target_lengths, self.blank, self.reduction,
                        self.zero_infinity)
