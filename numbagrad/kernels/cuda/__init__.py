"""CUDA twins of the CPU kernels (``kernels/cpu/<family>.py`` <-> ``kernels/cuda/<family>.py``).

Importing this package needs numba's CUDA target (numba-cuda); the CUDA backend imports
it lazily, only once a CUDA device is asked for.
"""
