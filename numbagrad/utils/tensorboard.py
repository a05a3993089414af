"""``torch.utils.tensorboard``. Not available in numbagrad yet: constructing
:class:`SummaryWriter` raises ``NotImplementedError``."""
from .. import _unavailable

SummaryWriter = _unavailable.cls(
    "numbagrad.utils.tensorboard.SummaryWriter",
    "a writer of TensorBoard event files (scalars, histograms) under log_dir, as torch's SummaryWriter")

__all__ = ["SummaryWriter"]
