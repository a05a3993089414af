"""Every tunable flag of numbagrad in one place.

Each flag reads an environment variable once, at import; tests and users may also
assign the module attributes before the first kernel of a kind is compiled.

=============================  ==========================================  =========
variable                       meaning                                     default
=============================  ==========================================  =========
NUMBAGRAD_FASTMATH             ``fastmath`` for every @njit kernel          0
NUMBAGRAD_PARALLEL             build the ``parallel=True`` kernel twins     1
NUMBAGRAD_CACHE                ``cache=True`` (on-disk numba cache)         1
NUMBAGRAD_PARALLEL_THRESHOLD   elements from which the parallel twin runs   65536
NUMBAGRAD_REUSE_LARGE_ALLOCS   glibc: serve large arrays from the heap      1
NUMBAGRAD_THREADS_PER_BLOCK    CUDA threads per block (CUDA backend)        256
NUMBAGRAD_CACHE_DIR            numba's kernel cache (``backend/cache.py``)  per user
NUMBAGRAD_COMPILE_NOTICE       a stderr line while kernels compile          1
=============================  ==========================================  =========
"""
import os
import sys as _sys

# Numba's OpenMP workers and OpenBLAS's threads both spin after each call by default and
# then fight over the cores: a 784-512-256-10 MLP step took ~34 ms instead of ~2.7 ms on
# 2 cores. So OpenMP waits passively, and numbagrad's GEMMs run on numba's pool, not on
# NumPy's OpenBLAS threads (kernels/cpu/_blas.py). Passive waiting alone made every
# parallel launch a futex wake-up (76 us for an empty prange on this VM), so libgomp still
# spins 300,000 rounds (its own default for an unloaded machine; a few ms) before it
# sleeps: an empty prange then costs 1.6 us. Both must be set before the OpenMP runtime
# starts, i.e. before the first parallel kernel runs; values the user set win.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("GOMP_SPINCOUNT", "300000")
# numba takes TBB before OpenMP when the ``tbb`` package is installed (the ``mkl`` wheel
# pulls it in). The settings above and every figure in perf/ are for OpenMP, so it comes
# first here too; NUMBA_THREADING_LAYER(_PRIORITY), when the user sets one, wins.
if "NUMBA_THREADING_LAYER" not in os.environ and "NUMBA_THREADING_LAYER_PRIORITY" not in os.environ:
    os.environ["NUMBA_THREADING_LAYER_PRIORITY"] = "omp tbb workqueue"
    if "numba" in _sys.modules:  # numba read its environment already
        _sys.modules["numba"].config.THREADING_LAYER_PRIORITY = ["omp", "tbb", "workqueue"]
# numba's on-disk cache in a per-user, per-version directory (backend/cache.py), set before
# numba reads its environment; NUMBAGRAD_CACHE_DIR, then NUMBA_CACHE_DIR, win.
from . import cache as _cache  # noqa: E402

_cache.configure()


def _env_bool(name, default):
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() not in ("0", "false", "no", "off", "")


def _env_int(name, default):
    value = os.environ.get(name)
    return default if value is None else int(value)


FASTMATH = _env_bool("NUMBAGRAD_FASTMATH", False)
PARALLEL = _env_bool("NUMBAGRAD_PARALLEL", True)
CACHE = _env_bool("NUMBAGRAD_CACHE", True)
# A parallel launch costs ~2 us with the spin count above (~60 us when the workers had to
# be woken). 64K elements was the best threshold over the perf workloads (LeNet-5 step 3.80 ms
# against 4.41 at 512K; the table: perf/README.md, "Measurement notes", backend/config.py).
PARALLEL_THRESHOLD = _env_int("NUMBAGRAD_PARALLEL_THRESHOLD", 1 << 16)
# Keep large freed buffers in the heap instead of returning them to the OS (glibc only):
# a fresh 64 MiB NumPy result is otherwise mmap'ed and page-faulted on every op, which
# held a 16M-element add at ~19 GB/s; reusing heap memory gave ~30 GB/s (the triad
# bandwidth). The cost: the process keeps its peak heap size.
REUSE_LARGE_ALLOCS = _env_bool("NUMBAGRAD_REUSE_LARGE_ALLOCS", True)
THREADS_PER_BLOCK = _env_int("NUMBAGRAD_THREADS_PER_BLOCK", 256)


# ---- fork -------------------------------------------------------------------------------
# A process forked after numba's thread pool has started inherits the pool's state but not
# its threads. Under the GNU OpenMP layer numba terminates the child at its first parallel
# launch ("fork() called from a process already using GNU OpenMP, this is unsafe"), so a
# ``multiprocessing.Pool`` of fork workers loses its tasks and waits forever. The TBB and
# workqueue layers start afresh in the child. So there is one rule, :func:`fork_runs_serial`:
# in such a child every parallel kernel runs its serial twin (the kernels' at-fork handler,
# ``kernels/_threads.py``, applies it; the DataLoader's fork workers rely on it). The serial
# twin computes the same bits, so results do not depend on where they were computed.
def numba_pool_started():
    """Whether numba's threading layer (its OpenMP/TBB/workqueue pool) has been started in
    this process: numba 0.68 sets ``numba.np.ufunc.parallel._is_initialized`` when the first
    parallel kernel launches its threads."""
    mod = _sys.modules.get("numba.np.ufunc.parallel")
    return bool(getattr(mod, "_is_initialized", False))


def fork_unsafe_layer():
    """The started numba threading layer's name if a forked child cannot launch parallel work
    on it (``"omp"`` with GNU OpenMP), else None (not started, TBB, workqueue, Intel OpenMP)."""
    if not numba_pool_started():
        return None
    layer = getattr(_sys.modules["numba.np.ufunc.parallel"], "_threading_layer", None)
    if layer != "omp":
        return None
    omppool = _sys.modules.get("numba.np.ufunc.omppool")
    return "omp" if getattr(omppool, "openmp_vendor", "GNU") == "GNU" else None


def fork_runs_serial():
    """The fork rule: True when a child forked from this process now must run numbagrad's
    kernels serially (see the comment above). Evaluated in the child, where it sees the
    state the parent had at the fork."""
    return fork_unsafe_layer() is not None
