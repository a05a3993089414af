"""``torch.nn.modules.dropout``: numbagrad.nn's classes at PyTorch's path (see :mod:`._mirror`)."""
from ._mirror import mirror

__all__ = mirror(globals(), "Dropout Dropout1d Dropout2d Dropout3d AlphaDropout FeatureAlphaDropout",
                            private="activation: _DropoutNd")
