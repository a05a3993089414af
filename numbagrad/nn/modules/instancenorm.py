"""``torch.nn.modules.instancenorm``: numbagrad.nn's classes at PyTorch's path (see :mod:`._mirror`)."""
from ._mirror import mirror

__all__ = mirror(globals(), "InstanceNorm1d InstanceNorm2d InstanceNorm3d LazyInstanceNorm1d LazyInstanceNorm2d "
                            "LazyInstanceNorm3d",
                            private="normalization: _NormBase _InstanceNorm")
