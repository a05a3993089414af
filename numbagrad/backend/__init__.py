"""Backends: one object per device kind that allocates arrays and launches kernels.

Ops never test the device themselves; they ask :func:`backend_of` for the backend
of their input arrays and call its primitives and capabilities, the names of
:data:`numbagrad.backend.base.CONTRACT`, which both :class:`CPUBackend` and
:class:`CUDABackend` implement (``backend/base.py``).
"""
from .dispatch import backend_of, backend_for_device, register_backend  # noqa: F401
