"""@njit CPU kernels, one module per op family (see ``numbagrad/kernels/__init__.py``)."""
