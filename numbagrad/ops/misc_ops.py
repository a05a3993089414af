"""More tensor ops under PyTorch's names (filled in by a session)."""
__all__ = []

METHODS = ()
"""Names in ``__all__`` that are also ``Tensor`` methods; bound by ``tensor._install_operators``."""
