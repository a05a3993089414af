"""Every tunable flag of numbagrad in one place.

Each flag reads an environment variable once, at import; tests and users may also
assign the module attributes before the first kernel of a kind is compiled.

=============================  ==========================================  =========
variable                       meaning                                     default
=============================  ==========================================  =========
NUMBAGRAD_FASTMATH             ``fastmath`` for every @njit kernel          0
NUMBAGRAD_PARALLEL             build the ``parallel=True`` kernel twins     1
NUMBAGRAD_CACHE                ``cache=True`` (on-disk numba cache)         1
NUMBAGRAD_PARALLEL_THRESHOLD   elements from which the parallel twin runs   524288
NUMBAGRAD_REUSE_LARGE_ALLOCS   glibc: serve large arrays from the heap      1
NUMBAGRAD_THREADS_PER_BLOCK    CUDA threads per block (CUDA backend)        256
=============================  ==========================================  =========
"""
import os

# Numba's OpenMP workers and OpenBLAS's threads both spin after each call by default and
# then fight over the cores: a 784-512-256-10 MLP step took ~34 ms instead of ~2.7 ms on
# 2 cores. Passive waiting must be chosen before the OpenMP runtime starts, i.e. before
# the first parallel kernel runs; a value the user set wins.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


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
# With passive OpenMP waiting, a parallel launch costs ~60 us (sleeping workers must be
# woken): a float32 add of 256K elements took 82 us serial and 112 us parallel, of 1M
# elements 416 us serial and 276 us parallel (2 cores). Smaller inputs take the serial twin.
PARALLEL_THRESHOLD = _env_int("NUMBAGRAD_PARALLEL_THRESHOLD", 1 << 19)
# Keep large freed buffers in the heap instead of returning them to the OS (glibc only):
# a fresh 64 MiB NumPy result is otherwise mmap'ed and page-faulted on every op, which
# held a 16M-element add at ~19 GB/s; reusing heap memory gave ~30 GB/s (the triad
# bandwidth). The cost: the process keeps its peak heap size.
REUSE_LARGE_ALLOCS = _env_bool("NUMBAGRAD_REUSE_LARGE_ALLOCS", True)
THREADS_PER_BLOCK = _env_int("NUMBAGRAD_THREADS_PER_BLOCK", 256)
