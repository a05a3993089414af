"""``torch.utils.data.distributed``: :class:`~numbagrad.data.DistributedSampler` at torch's import path."""
from .sampler import DistributedSampler  # noqa: F401

__all__ = ["DistributedSampler"]
