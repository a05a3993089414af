"""Multi-process tests: each runs a script of this folder (``_*.py``, not collected) under
``mpiexec -n N`` with a timeout, one numba thread per rank. Skipped without mpi4py or
``mpiexec``."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent


def mpiexec(n, script, *args, timeout=120):
    """Run ``script`` (a file of this folder) on ``n`` ranks; the CompletedProcess (stdout and
    stderr merged in ``stdout``)."""
    pytest.importorskip("mpi4py")
    from numbagrad.distributed.launch import mpiexec_argv
    try:
        argv = mpiexec_argv(n, sys.executable, HERE / script, *args)
    except FileNotFoundError as e:
        pytest.skip(str(e))
    env = dict(os.environ, NUMBA_NUM_THREADS="1", OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    env["PYTHONPATH"] = os.pathsep.join([str(HERE.parents[1])] + [p for p in [env.get("PYTHONPATH")] if p])
    return subprocess.run(argv, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout,
                          cwd=str(HERE.parents[1]))


@pytest.fixture
def mpirun():
    """``mpirun(n, script, *args, timeout=...)``: see :func:`mpiexec`."""
    return mpiexec
