"""``torch.backends.mkl``: whether numbagrad's GEMMs call MKL."""


def is_available():
    """True when numbagrad's CPU GEMMs are bound to MKL (the ``mkl`` wheel's sequential
    layer; ``numbagrad.kernels.cpu._blas.PROVIDER == "mkl"``). False when they call SciPy's
    OpenBLAS or NumPy's matmul (``NUMBAGRAD_BLAS`` picks)."""
    from ..kernels.cpu import _blas   # imported (and bound) by numbagrad's CPU backend already
    return _blas.PROVIDER == "mkl"


__all__ = ["is_available"]
