"""Decorators that turn a plain Python loop into the kernels numbagrad launches.

Flags come from :mod:`numbagrad.backend.config`, never from a decorator call site.
"""
import types

from numba import njit

from ..backend import cache, config
from ._threads import AdaptiveKernel

cache.watch_compiles()


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
        if parallel and config.PARALLEL:
            # not a flat kernel: its work is not args[0]'s size alone (a GEMM's three operands)
            return AdaptiveKernel(_njit(f, True), key_args=3)
        return _njit(f, False)
    return deco if fn is None else deco(fn)


def _njit(f, parallel, fastmath=None):
    return njit(cache=config.CACHE, fastmath=config.FASTMATH if fastmath is None else fastmath,
                error_model="numpy", parallel=parallel)(f)


def scalar_helper(fn):
    """A scalar function inlined into kernels of every target (CPU now, CUDA later)."""
    return njit(cache=config.CACHE, fastmath=config.FASTMATH, error_model="numpy",
                inline="always")(fn)


class FlatKernel:
    """A flat (1-D, contiguous) loop kernel with a serial and a parallel twin.

    The kernel is written once with ``prange``; calls whose first argument has fewer
    than ``config.PARALLEL_THRESHOLD`` elements run the serial twin, others the
    parallel one (an :class:`~numbagrad.kernels._threads.AdaptiveKernel`, which runs on
    one thread while the cores are busy). The choice looks only at
    ``args[0].size``; elementwise kernels take 1-D C-contiguous arrays (callers pass
    ``a.reshape(-1)``), row kernels (softmax) take 2-D ones. ``fastmath``: overrides
    ``config.FASTMATH`` (kernels whose rounding is specified, like GradScaler's).
    Subclasses choose on another size (:meth:`pick`).
    """

    __slots__ = ("serial", "parallel", "__name__", "__dict__")

    def __init__(self, fn, fastmath=None):
        self.serial = _njit(fn, False, fastmath)
        self.parallel = (AdaptiveKernel(_njit(_renamed(fn, "_par"), True, fastmath), serial=self.serial)
                         if config.PARALLEL else self.serial)
        self.__name__ = fn.__name__
        self.__doc__ = fn.__doc__

    def pick(self, size):
        """The twin for ``size`` elements of work."""
        return self.parallel if size >= config.PARALLEL_THRESHOLD else self.serial

    def __call__(self, *args):
        if args[0].size >= config.PARALLEL_THRESHOLD:
            return self.parallel(*args)
        return self.serial(*args)


def flat_kernel(fn):
    """Decorator form of :class:`FlatKernel`."""
    return FlatKernel(fn)
