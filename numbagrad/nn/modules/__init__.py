"""``torch.nn.modules``: PyTorch's import paths for numbagrad.nn's layers.

``numbagrad.nn.modules.<name>`` holds what ``torch.nn.modules.<name>`` holds, grouped as
PyTorch groups it (``batchnorm.BatchNorm2d``, ``activation.MultiheadAttention``,
``sparse.Embedding``), so programs that import from these paths run. The classes are
numbagrad.nn's own objects (defined in ``numbagrad/nn/<family>.py``), not copies: each
submodule is built by :func:`._mirror.mirror`. PyTorch's submodules whose classes
numbagrad has none of yet (``lazy``, ...) are absent.
"""
from . import (activation, batchnorm, channelshuffle, container, conv, distance, dropout, flatten, fold,  # noqa: F401
               instancenorm, linear, loss, module, normalization, padding, pixelshuffle, pooling, rnn, sparse,
               transformer, upsampling)

__all__ = []
for _sub in (activation, batchnorm, channelshuffle, container, conv, distance, dropout, flatten, fold, instancenorm,
             linear, loss, module, normalization, padding, pixelshuffle, pooling, rnn, sparse, transformer, upsampling):
    globals().update((_n, getattr(_sub, _n)) for _n in _sub.__all__)
    __all__ += _sub.__all__
del _sub
