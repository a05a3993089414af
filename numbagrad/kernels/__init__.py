"""Pure array kernels: preallocated outputs in, nothing allocated, no numbagrad objects.

``kernels/cpu/<family>.py`` holds the @njit kernels of an op family; the CUDA twins will
live in ``kernels/cuda/<family>.py`` under the same names. Scalar math used by both
targets is written once in ``kernels/scalar.py``.
"""
