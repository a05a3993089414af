"""Starting ranks from Python (tests, notebooks, benchmarks): the ``mpiexec`` command line.

A training script itself is launched from a shell (``mpiexec -n 4 python -m mpi4py
train.py``, or ``srun`` on a Slurm cluster); this only finds the launcher that the
``mpich`` wheel (``pip install numbagrad[mpi]``) or the system MPI put on the machine.
"""
import os
import shutil
import sys


def mpiexec_path():
    """The ``mpiexec`` on ``PATH`` or beside this Python (a virtual environment's ``bin``);
    ``FileNotFoundError`` naming the extra when there is none."""
    exe = shutil.which("mpiexec") or shutil.which("mpiexec", path=os.path.dirname(sys.executable))
    if exe is None:
        raise FileNotFoundError("mpiexec was not found on PATH nor beside this Python: install an MPI "
                                "launcher, e.g. pip install numbagrad[mpi] (the mpich wheel brings one)")
    return exe


def mpiexec_argv(n, *command):
    """``[mpiexec, "-n", n, *command]``: ``command`` run on ``n`` ranks (``sys.executable`` and a
    script path, typically)."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"mpiexec_argv: n must be a positive int, got {n!r}")
    return [mpiexec_path(), "-n", str(n), *map(str, command)]
