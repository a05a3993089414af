"""``torch.nn.modules.batchnorm``: numbagrad.nn's classes at PyTorch's path (see :mod:`._mirror`)."""
from ._mirror import mirror

__all__ = mirror(globals(), "BatchNorm1d LazyBatchNorm1d BatchNorm2d LazyBatchNorm2d BatchNorm3d "
                            "LazyBatchNorm3d SyncBatchNorm",
                            private="normalization: _NormBase _BatchNorm")
