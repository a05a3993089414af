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


def exact_jit(fn):
    """``cpu_jit`` with fastmath off, always: kernels whose rounding is specified (AMP's
    unscale, which must match torch bit for bit)."""
    return _njit(fn, False, False)


def reduction_jit(fn):
    """A serial float64 reduction over one span: ``cpu_jit``'s flags, but fastmath
    ``reassoc`` and ``contract`` only.

    NOTE: the one departure from ``cpu_jit``'s flags: LLVM may then split a sum over
    vector lanes (10M float32 squares: 1.6 ms against 12.7 ms with eight scalar
    accumulators, 19 ms with one; LAMB's block sums 5x faster). No ``nnan``/``ninf``, so
    NaN and inf still propagate; only the summation order changes, as in any SIMD sum,
    and it is fixed by the compiled code (deterministic for a build, the same in the
    serial and parallel twins that call it).
    """
    return _njit(fn, False, {"reassoc", "contract"})


def nogil_jit(fn=None, *, error_model="numpy"):
    """``njit(cache, nogil=True)`` without fastmath: byte-moving loops that run in worker
    threads beside the GIL (``numbagrad/io``'s chunked readers and writers)."""
    def deco(f):
        return njit(cache=config.CACHE, nogil=True, error_model=error_model)(f)
    return deco if fn is None else deco(fn)


def gil_copy(dispatcher, suffix):
    """A build of a ``nogil_jit`` dispatcher's Python function that keeps the GIL (a renamed
    copy: its own cache entry), for many short calls from a background thread: releasing
    and taking back the GIL at every call hands it to the other threads each time, and
    with a busy thread beside it each take waits a switch interval (5 ms)."""
    opts = dispatcher.targetoptions
    return njit(cache=config.CACHE, error_model=opts.get("error_model", "numpy"))(_renamed(dispatcher.py_func, suffix))


def serial_copy(dispatcher, suffix):
    """A serial build of a parallel dispatcher's Python function with its flags (a renamed
    copy: its own cache entry)."""
    opts = dispatcher.targetoptions
    return njit(cache=config.CACHE, fastmath=opts.get("fastmath", False),
                error_model=opts.get("error_model", "numpy"))(_renamed(dispatcher.py_func, suffix))


def scalar_helper(fn):
    """A scalar function inlined into kernels of every target (``kernels/scalar.py``: the
    CPU kernels and the CUDA ones call it); numba inlines its IR at each call site."""
    return njit(cache=config.CACHE, fastmath=config.FASTMATH, error_model="numpy",
                inline="always")(fn)


def cpu_helper(fn):
    """A helper of the CPU kernels only (``kernels/cpu/``): an ordinary ``cpu_jit``
    function, called, not inlined by numba. LLVM inlines it into its callers all the
    same (the callee's module is linked in before the final optimisation), so the
    machine code runs as fast, but numba types and compiles it once per signature instead
    of once per call site: ``_rowreduce.vmax`` calls its ``_larger`` 15 times, and
    ``loss._max8`` took 0.47 s to compile with ``inline='always'`` against 0.26 s with
    calls; the same 50k-element max ran in 7.2 us either way."""
    return _njit(fn, False)


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


class TwinKernel(FlatKernel):
    """:class:`FlatKernel`'s twins for N-d arrays: the work size is ``args[work].size``."""

    __slots__ = ("work",)

    def __init__(self, fn, work):
        super().__init__(fn)
        self.work = work

    def __call__(self, *args):
        if args[self.work].size >= config.PARALLEL_THRESHOLD:
            return self.parallel(*args)
        return self.serial(*args)


def twin_kernel(work):
    """Decorator form of :class:`TwinKernel`: ``@twin_kernel(work=2)``."""
    return lambda fn: TwinKernel(fn, work)
