"""Matrix products with accumulation and diagonal/product helpers (built by a session; see its docstring when filled)."""
__all__ = []

METHODS = ()
"""Names in ``__all__`` that are also ``Tensor`` methods (``x.name(...)`` is ``name(x, ...)``;
in-place ``name_`` forms included). Bound by ``tensor._install_operators``."""
