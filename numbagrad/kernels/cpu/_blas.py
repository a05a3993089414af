"""BLAS from inside ``@njit`` kernels, and the CPU backend's matmul built on it.

Why numbagrad calls BLAS itself
-------------------------------
NumPy's ``matmul`` runs on NumPy's OpenBLAS, whose worker threads keep spinning for a
while after every GEMM. numba's own threads (the ``prange`` kernels that run between
the GEMMs: activations, pooling, im2col, norms) then share the two cores with a
spinning thread, and every kernel after a GEMM ran up to 2x slower. Measured on the
LeNet-5 training step (numba's default OpenMP layer): 8-34 ms median, bimodal, against
4.1-4.5 ms with NumPy's BLAS on one thread (torch: 4.0 ms). So on the CPU numbagrad runs
its GEMMs on one thread pool, numba's: a ``prange`` over batch entries and row blocks,
each task one single-threaded BLAS call.

Which BLAS
----------
Kernels call CBLAS's ``?gemm`` through two symbols, ``numbagrad_cblas_sgemm`` and
``numbagrad_cblas_dgemm``, declared here as external functions and bound when this module
is imported (``llvmlite``'s ``add_symbol``) to the first provider found:

1. **MKL** (the ``mkl`` wheel, ``pip install numbagrad[mkl]``), switched to its sequential
   layer: every call runs in the caller's thread. Single-threaded on this machine's
   AVX-512 cores it ran 64x784 @ 784x512 at 165 GFLOP/s against OpenBLAS's 97, and
   128-row blocks at 147 against 125: the GEMMs of a training step ~1.3x faster. It is
   skipped when the process already has ``libmkl_rt`` loaded (a NumPy built on MKL), since
   switching a shared MKL to one thread would limit NumPy too.
2. **SciPy's OpenBLAS** (``scipy_cblas_?gemm``): with pip's wheels a library, and a thread
   pool, apart from NumPy's (``numpy.libs/libscipy_openblas64_-*.so``).
   :func:`serial_private_blas` sets it to one thread around numbagrad's calls and gives
   the old count back (two direct ``openblas_set_num_threads`` calls, well under a
   microsecond), so a user's own ``scipy.linalg`` calls keep their threads. Where SciPy and
   NumPy share one BLAS (a system or conda OpenBLAS/MKL) it is not used.

``NUMBAGRAD_BLAS=mkl|openblas|none`` picks one (``none``: NumPy's matmul everywhere).
With no provider, :func:`private_blas_available` is False and the callers keep NumPy's
``matmul``. The compiled kernels name only the symbols, never an address, so they stay in
numba's on-disk cache whichever provider a later process binds. Operands' leading
dimensions and ``beta`` pass through, so any 2-D block with one unit stride (a row block,
a transposed view, a column slice) is a GEMM operand without a copy, and a kernel can
accumulate (``beta = 1``).
"""
import ctypes
import os
from contextlib import contextmanager

import numpy as np
from numba import prange, types

from ...backend import config
from .._jit import cpu_helper, cpu_jit

__all__ = ["gemm", "matmul", "private_blas_available", "serial_private_blas", "prime"]

_i32 = types.int32
_vp = types.voidptr


def _cblas_gemm(name, real):
    # cblas_?gemm(order, transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc), LP64
    return types.ExternalFunction(name, types.void(_i32, _i32, _i32, _i32, _i32, _i32, real, _vp, _i32,
                                                   _vp, _i32, real, _vp, _i32))


_SGEMM_SYM, _DGEMM_SYM = "numbagrad_cblas_sgemm", "numbagrad_cblas_dgemm"
_sgemm = _cblas_gemm(_SGEMM_SYM, types.float32)
_dgemm = _cblas_gemm(_DGEMM_SYM, types.float64)
_COL_MAJOR = 102
_N, _T = 111, 112          # CblasNoTrans, CblasTrans


@cpu_helper
def _operand(a, isz):
    """(transpose flag, leading dimension) of a row-major 2-D block for the column-major
    BLAS, which sees it transposed: unit stride along columns -> 'n', along rows -> 't'."""
    m, k = a.shape
    s0 = a.strides[0] // isz
    s1 = a.strides[1] // isz
    if s1 == 1 and (m <= 1 or s0 >= k):
        return _N, max(s0, k, 1)
    return _T, max(s1, m, 1)


@cpu_helper
def gemm(a, b, c, beta):
    """``c = a @ b + beta * c`` for 2-D float32/float64 blocks, each with a unit stride in
    one dimension (``c`` in its last); one single-threaded BLAS call, in the caller's
    thread. ``k == 0`` is the caller's to handle (BLAS then only scales ``c``)."""
    m, k = a.shape
    n = b.shape[1]
    isz = a.itemsize
    ta, lda = _operand(a, isz)
    tb, ldb = _operand(b, isz)
    ldc = max(c.strides[0] // isz, n, 1)
    # row-major C = A B is column-major C^T = B^T A^T
    if isz == 4:
        _sgemm(_COL_MAJOR, tb, ta, n, m, k, np.float32(1.0), b.ctypes, ldb, a.ctypes, lda, np.float32(beta),
               c.ctypes, ldc)
    else:
        _dgemm(_COL_MAJOR, tb, ta, n, m, k, 1.0, b.ctypes, ldb, a.ctypes, lda, np.float64(beta), c.ctypes, ldc)


def _bmm_body(a, b, c, ntask, by_cols):
    # a (B, M, K), b (B, K, N), c (B, M, N): task t takes batch entry t // per and the
    # (t % per)-th block of rows of c (or of columns, with ``by_cols``: short matrices,
    # where a row block would leave BLAS a handful of rows)
    nb, m = a.shape[0], a.shape[1]
    n = b.shape[2]
    per = ntask // nb
    for t in prange(ntask):
        i = t // per
        j = t - i * per
        if by_cols:
            r0 = j * n // per
            r1 = (j + 1) * n // per
            if r1 > r0:
                gemm(a[i], b[i, :, r0:r1], c[i, :, r0:r1], 0.0)
        else:
            r0 = j * m // per
            r1 = (j + 1) * m // per
            if r1 > r0:
                gemm(a[i, r0:r1], b[i], c[i, r0:r1], 0.0)


_bmm_par_jit = cpu_jit(_bmm_body, parallel=True)


@cpu_jit
def _bmm_ser_jit(a, b, c):
    for i in range(a.shape[0]):
        gemm(a[i], b[i], c[i], 0.0)


@cpu_jit
def _mm_ser_jit(a, b, c):
    gemm(a, b, c, 0.0)


def _mm_body(a, b, c, ntask, by_cols):
    m, n = c.shape
    for j in prange(ntask):
        if by_cols:
            r0 = j * n // ntask
            r1 = (j + 1) * n // ntask
            if r1 > r0:
                gemm(a, b[:, r0:r1], c[:, r0:r1], 0.0)
        else:
            r0 = j * m // ntask
            r1 = (j + 1) * m // ntask
            if r1 > r0:
                gemm(a[r0:r1], b, c[r0:r1], 0.0)


_mm_par_jit = cpu_jit(_mm_body, parallel=True)


class _OneLayout:
    """A GEMM kernel compiled once per dtype for any memory layout.

    numba specialises on each argument's layout (C, F, A) and on read-only-ness (the views
    ``np.broadcast_to`` returns), so the matmuls of one MLP step compiled three parallel
    variants. These kernels only pass pointers and strides to BLAS, so one variant over
    'A' arrays (operands read-only) serves every call: the first call of a dtype compiles
    (or loads from the cache) that variant, and calls convert other layouts to it. Only
    the dtypes a program uses compile: the float64 variants took ~4 s of a cold float32
    run's ~20 s of compiling (the digits job) when both were built up front."""

    __slots__ = ("jit", "ndim", "extra", "ready")

    def __init__(self, jit, ndim, extra):
        self.jit, self.ndim, self.extra, self.ready = jit, ndim, extra, {}

    def __call__(self, *args):
        dt = args[0].dtype
        if dt not in self.ready:
            t = types.float32 if dt == np.float32 else types.float64
            ro = types.Array(t, self.ndim, "A", readonly=True)
            self.jit.disable_compile(False)
            self.jit.compile((ro, ro, types.Array(t, self.ndim, "A")) + self.extra)
            self.jit.disable_compile(True)   # from now on other layouts convert to the 'A' variant
            self.ready[dt] = True
        return self.jit(*args)


_bmm_par = _OneLayout(_bmm_par_jit, 3, (types.intp, types.boolean))
_bmm_ser = _OneLayout(_bmm_ser_jit, 3, ())
_mm_par = _OneLayout(_mm_par_jit, 2, (types.intp, types.boolean))
_mm_ser = _OneLayout(_mm_ser_jit, 2, ())


def mm_into(a, b, out):
    """``out = a @ b`` for 2-D float32/float64 arrays (BLAS operands as :func:`gemm` takes
    them, ``out`` C-contiguous): the lean call for loops of small GEMMs (a recurrent
    layer's steps), meant to run inside one ``with serial_private_blas():``."""
    m, k = a.shape
    n = out.shape[1]
    if k == 0:
        out[...] = 0
        return out
    if PROVIDER is None:
        return np.matmul(a, b, out=out)
    threads = _threads()
    if threads > 1 and m * n * k >= PARALLEL_MACS:
        _mm_par(a, b, out, threads, m < 64 * threads and n > m)
    else:
        _mm_ser(a, b, out)
    return out


# ---- the provider: MKL or SciPy's private OpenBLAS ---------------------------------------------
_STATE = {}


def _load_mkl():
    """``(cblas_sgemm, cblas_dgemm, None)`` of the ``mkl`` wheel's runtime in sequential
    mode, or None."""
    try:
        from importlib import metadata
        files = metadata.files("mkl") or ()
    except Exception:  # not installed
        return None
    libs = sorted(str(f.locate()) for f in files if os.path.basename(str(f)).startswith("libmkl_rt.so"))
    if not libs:
        return None
    path = libs[0]
    if hasattr(os, "RTLD_NOLOAD"):
        try:
            ctypes.CDLL(path, mode=os.RTLD_NOLOAD)
            return None      # already loaded by someone else: theirs to configure
        except OSError:
            pass
    try:
        dll = ctypes.CDLL(path)
        dll.MKL_Set_Threading_Layer.argtypes = [ctypes.c_int]
        dll.MKL_Set_Threading_Layer(1)       # MKL_THREADING_SEQUENTIAL, before any other call
        return dll.cblas_sgemm, dll.cblas_dgemm, None
    except (OSError, AttributeError):
        return None


def _load_scipy_openblas():
    """``(cblas_sgemm, cblas_dgemm, (get_num_threads, set_num_threads))`` of the OpenBLAS
    that only SciPy loaded, or None."""
    try:
        import scipy
        import scipy.linalg.cython_blas  # noqa: F401 -- loads SciPy's BLAS
        from threadpoolctl import ThreadpoolController
        root = os.path.dirname(os.path.realpath(scipy.__file__))
        dirs = (root + os.sep, root + ".libs" + os.sep)
        # a library inside SciPy's own install is SciPy's alone; a shared system or conda
        # BLAS lives elsewhere and is left alone
        own = [lc.filepath for lc in ThreadpoolController().select(internal_api="openblas").lib_controllers
               if os.path.realpath(lc.filepath).startswith(dirs)]
        if len(own) != 1:
            return None
        dll = ctypes.CDLL(own[0], mode=os.RTLD_NOLOAD | os.RTLD_GLOBAL) if hasattr(os, "RTLD_NOLOAD") \
            else ctypes.CDLL(own[0])
        for pre in ("scipy_", ""):
            for suf in ("", "64_", "_64"):
                get = getattr(dll, f"{pre}openblas_get_num_threads{suf}", None)
                put = getattr(dll, f"{pre}openblas_set_num_threads{suf}", None)
                sg = getattr(dll, f"{pre}cblas_sgemm{suf}", None)
                dg = getattr(dll, f"{pre}cblas_dgemm{suf}", None)
                if None not in (get, put, sg, dg):
                    get.restype, get.argtypes = ctypes.c_int, []
                    put.restype, put.argtypes = None, [ctypes.c_int]
                    return sg, dg, (get, put)
    except Exception:  # no SciPy, no threadpoolctl, or an unknown BLAS layout
        pass
    return None


def _bind():
    """Bind the kernels' two GEMM symbols to the first provider (see the module docstring);
    returns its name, or None."""
    import llvmlite.binding as ll
    choice = os.environ.get("NUMBAGRAD_BLAS", "").strip().lower()
    if choice in ("none", "numpy", "off"):
        order = ()
    elif choice in ("openblas", "scipy"):
        order = (("openblas", _load_scipy_openblas),)
    else:
        order = (("mkl", _load_mkl), ("openblas", _load_scipy_openblas))
    for name, load in order:
        found = load()
        if found is not None:
            sg, dg, threads = found
            ll.add_symbol(_SGEMM_SYM, ctypes.cast(sg, ctypes.c_void_p).value)
            ll.add_symbol(_DGEMM_SYM, ctypes.cast(dg, ctypes.c_void_p).value)
            _STATE["threads"] = threads
            return name
    return None


PROVIDER = _bind()
"""``"mkl"``, ``"openblas"`` (SciPy's) or None: the BLAS numbagrad's kernels call."""


def private_blas_available():
    """True when numbagrad's kernels can call a BLAS that NumPy does not share."""
    return PROVIDER is not None


def prime():
    """Kept for callers of earlier versions: the symbols are bound at import, nothing to resolve."""


@contextmanager
def serial_private_blas():
    """Run the body with the kernels' BLAS on one thread: SciPy's OpenBLAS is set to one
    thread and restored after; MKL runs sequential already; a no-op without a provider."""
    lib = _STATE.get("threads")
    if lib is None:
        yield
        return
    get, put = lib
    old = get()
    if old != 1:
        put(1)
    try:
        yield
    finally:
        if old != 1:
            put(old)


# ---- matmul ------------------------------------------------------------------------------------
PARALLEL_MACS = 1 << 20
"""GEMMs with at least this many multiply-adds are split over numba's threads. At 1 << 18
the digits MLP's 32x64 @ 64x128 (~5 us of BLAS) was split too, and its epoch took 20.8 ms
on 2 threads against 16.8 ms on one."""


def _unit(a):
    """``a`` if each of its matrices is a BLAS operand as it is (a unit stride in one of the
    last two dimensions, the other at least the row length), else a C-contiguous copy."""
    isz = a.itemsize
    m, k = a.shape[-2:]
    s0, s1 = a.strides[-2:]
    if (s1 == isz and (m <= 1 or s0 >= k * isz)) or (s0 == isz and (k <= 1 or s1 >= m * isz)):
        return a
    return np.ascontiguousarray(a)


def matmul(a, b, out=None):
    """``np.matmul(a, b, out=out)``; float32/float64 operands of at least 2 dimensions run
    on numbagrad's threads (see the module docstring), everything else on NumPy."""
    dt = a.dtype
    if (a.ndim < 2 or b.ndim < 2 or dt != b.dtype or dt not in (np.float32, np.float64)
            or type(a) is not np.ndarray or type(b) is not np.ndarray or not private_blas_available()
            or (out is not None and (out.dtype != dt or type(out) is not np.ndarray))):
        return np.matmul(a, b, out=out)
    m, k = a.shape[-2:]
    k2, n = b.shape[-2:]
    if k != k2:
        return np.matmul(a, b, out=out)  # NumPy's error message
    if a.ndim == 2 and b.ndim == 2:          # the common case, without broadcast_to's ~7 us a call
        batch = ()
    else:
        batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    shape = batch + (m, n)
    if out is not None and out.shape != shape:
        return np.matmul(a, b, out=out)
    nb = 1
    for d in batch:
        nb *= d
    if not batch:
        a3 = a[None]
        b3 = b[None]
    elif b.ndim == 2 and a.ndim > 2 and a.flags.c_contiguous:
        a3 = a.reshape(1, nb * m, k)          # fold the batch into the rows: one GEMM
        b3 = b.reshape(1, k, n)
    else:
        a3 = np.broadcast_to(a, batch + (m, k)).reshape(nb, m, k)
        b3 = np.broadcast_to(b, batch + (k, n)).reshape(nb, k, n)
    res = out if out is not None and out.flags.c_contiguous else np.empty(shape, dt)
    c3 = res.reshape(a3.shape[0], a3.shape[1], n)
    if c3.size:
        if k == 0:
            c3[...] = 0
        else:
            a3, b3 = _unit(a3), _unit(b3)
            nb, rows = a3.shape[0], a3.shape[1]
            macs = nb * rows * n * k
            threads = _threads()
            with serial_private_blas():
                if threads > 1 and macs >= PARALLEL_MACS:
                    per = 1 if nb >= threads else -(-threads // nb)
                    # Columns for short matrices (a row block would leave BLAS a handful
                    # of rows) and for wide ones: each row task packs all of B, each column
                    # task all of A. 128x784 @ 784x512 (B a transposed view): 422 us by
                    # rows, 329 us by columns; at n < 4m rows won or tied (2 threads, MKL).
                    by_cols = (rows < 64 * per and n > rows) or n >= 4 * rows
                    _bmm_par(a3, b3, c3, nb * per, by_cols)
                else:
                    _bmm_ser(a3, b3, c3)
    if out is not None and res is not out:
        out[...] = res
        return out
    return res


def _threads():
    """numba's thread count for this thread (1 with ``config.PARALLEL`` off), cheaply:
    ``numba.get_num_threads()`` costs ~3 us a call (it checks the pool is up), the raw
    getter behind it ~0.2 us, and a recurrent layer asks twice a time step."""
    if not config.PARALLEL:
        return 1
    raw = _STATE.get("nthreads")
    if raw is None:
        import numba
        from numba.np.ufunc import parallel
        numba.get_num_threads()              # starts the pool
        raw = getattr(parallel, "_get_num_threads", None) or numba.get_num_threads
        _STATE["nthreads"] = raw
    return raw()


num_threads = _threads
