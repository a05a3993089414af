"""``torch.backends.mkl``: whether numbagrad's GEMMs call MKL."""


def is_available():
    """True when numbagrad's CPU GEMMs are bound to MKL (the ``mkl`` wheel's sequential
    layer; the CPU backend's ``blas_provider``). False when they call SciPy's OpenBLAS or
    NumPy's matmul (``NUMBAGRAD_BLAS`` picks)."""
    from ..backend.dispatch import backend_for_device
    return backend_for_device("cpu").blas_provider == "mkl"


__all__ = ["is_available"]
