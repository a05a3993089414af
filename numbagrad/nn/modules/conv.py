"""``torch.nn.modules.conv``: numbagrad.nn's classes at PyTorch's path (see :mod:`._mirror`)."""
from ._mirror import mirror

__all__ = mirror(globals(), "Conv1d Conv2d Conv3d ConvTranspose1d ConvTranspose2d ConvTranspose3d LazyConv1d "
                            "LazyConv2d LazyConv3d LazyConvTranspose1d LazyConvTranspose2d LazyConvTranspose3d",
                            private="conv: _ConvNd")
