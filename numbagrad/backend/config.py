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
# A parallel launch costs ~1.5 us even on a 4-element array (measured here), while a
# 16M-element relu ran 2.2x faster on 2 cores: small inputs take the serial twin.
PARALLEL_THRESHOLD = _env_int("NUMBAGRAD_PARALLEL_THRESHOLD", 1 << 16)
THREADS_PER_BLOCK = _env_int("NUMBAGRAD_THREADS_PER_BLOCK", 256)
