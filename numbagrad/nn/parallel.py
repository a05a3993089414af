"""``torch.nn.parallel``: multi-GPU wrappers. Not available in numbagrad yet (it drives one
GPU, ``cuda:0``). The classes exist, so ``isinstance(model, DataParallel)`` checks and
imports run; constructing one raises ``NotImplementedError``."""
from .. import _unavailable
from .module import Module

DataParallel = _unavailable.cls(
    "numbagrad.nn.parallel.DataParallel",
    "single-process data parallelism: the batch split across the GPUs of this process",
    bases=(Module,))
DistributedDataParallel = _unavailable.cls(
    "numbagrad.nn.parallel.DistributedDataParallel",
    "multi-process data parallelism on numbagrad.distributed: gradients all-reduced across processes",
    bases=(Module,))

__all__ = ["DataParallel", "DistributedDataParallel"]
