"""``torch.nn.modules.pooling``: numbagrad.nn's classes at PyTorch's path (see :mod:`._mirror`)."""
from ._mirror import mirror

__all__ = mirror(globals(), "MaxPool1d MaxPool2d MaxPool3d MaxUnpool1d MaxUnpool2d MaxUnpool3d AvgPool1d "
                            "AvgPool2d AvgPool3d FractionalMaxPool2d FractionalMaxPool3d LPPool1d LPPool2d "
                            "LPPool3d AdaptiveMaxPool1d AdaptiveMaxPool2d AdaptiveMaxPool3d AdaptiveAvgPool1d "
                            "AdaptiveAvgPool2d AdaptiveAvgPool3d",
                            private="pooling: _MaxPoolNd _LPPoolNd")
