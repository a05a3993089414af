"""``torch.nn.modules.channelshuffle``: numbagrad.nn's classes at PyTorch's path (see :mod:`._mirror`)."""
from ._mirror import mirror

__all__ = mirror(globals(), "ChannelShuffle")
