"""``torch.backends.openmp``: whether numbagrad's parallel kernels can run on OpenMP."""
import importlib.util


def is_available():
    """True when numba ships its OpenMP threading layer, the one numbagrad's parallel
    kernels are held to first (``NUMBA_THREADING_LAYER_PRIORITY``). Checked without loading
    it."""
    try:
        return importlib.util.find_spec("numba.np.ufunc.omppool") is not None
    except (ImportError, ValueError):
        return False


__all__ = ["is_available"]
