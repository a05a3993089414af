"""Decorators that turn a plain Python loop into the kernels numbagrad launches.

Flags come from :mod:`numbagrad.backend.config`, never from a decorator call site.
"""
import types

from numba import njit

from ..backend import config


def _renamed(fn, suffix):
    # NOTE: numba's on-disk cache is keyed by the function's qualified name and line,
    # not by the compile flags, so a serial and a parallel dispatcher built from the
    # same function would load each other's machine code. A renamed copy gets its own
    # cache entry.
    g = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__ + suffix,
                           fn.__defaults__, fn.__closure__)
    g.__qualname__ = fn.__qualname__ + suffix
    g.__doc__ = fn.__doc__
    return g


def cpu_jit(fn=None, *, parallel=False):
    """``numba.njit`` with numbagrad's flags (cache, fastmath, error_model='numpy').

    ``error_model='numpy'`` lets loops that divide vectorise (a fused Adam ran 3.6x
    faster with it); division by zero then gives inf/nan like NumPy does.
    """
    def deco(f):
        return njit(cache=config.CACHE, fastmath=config.FASTMATH, error_model="numpy",
                    parallel=parallel and config.PARALLEL)(f)
    return deco if fn is None else deco(fn)


def scalar_helper(fn):
    """A scalar function inlined into kernels of every target (CPU now, CUDA later)."""
    return njit(cache=config.CACHE, fastmath=config.FASTMATH, error_model="numpy",
                inline="always")(fn)


class FlatKernel:
    """A flat (1-D, contiguous) loop kernel with a serial and a parallel twin.

    The kernel is written once with ``prange``; calls whose first argument has fewer
    than ``config.PARALLEL_THRESHOLD`` elements run the serial twin, others the
    parallel one. The choice looks only at ``args[0].size``; elementwise kernels take
    1-D C-contiguous arrays (callers pass ``a.reshape(-1)``), row kernels (softmax)
    take 2-D ones.
    """

    __slots__ = ("serial", "parallel", "__name__", "__dict__")

    def __init__(self, fn):
        self.serial = cpu_jit(fn)
        self.parallel = cpu_jit(_renamed(fn, "_par"), parallel=True) if config.PARALLEL else self.serial
        self.__name__ = fn.__name__
        self.__doc__ = fn.__doc__

    def __call__(self, *args):
        if args[0].size >= config.PARALLEL_THRESHOLD:
            return self.parallel(*args)
        return self.serial(*args)


def flat_kernel(fn):
    """Decorator form of :class:`FlatKernel`."""
    return FlatKernel(fn)
