"""numbagrad.distributed, DDP and SyncBatchNorm in real multi-process runs (``mpiexec``).

The scripts (``_collectives.py``, ``_ddp.py``, ``_failure.py``) do the checks inside the
ranks against NumPy and against one process on the whole batch, and raise on the first
failure; a raise aborts the job, so a zero exit status with every rank's ``OK`` line is
the pass condition. Odd world sizes (3) catch splits and averages that only work for 2."""
import time

import pytest



def assert_ok(proc, n):
    out = proc.stdout
    assert proc.returncode == 0, out[-6000:]
    for r in range(n):
        assert f"OK rank {r} of {n}" in out, out[-6000:]


@pytest.mark.parametrize("n", [2, 3])
def test_collectives_against_numpy(mpirun, n):
    assert_ok(mpirun(n, "_collectives.py"), n)


@pytest.mark.parametrize("n", [2, 3])
def test_ddp_and_sync_batchnorm_equal_one_process_on_the_whole_batch(mpirun, n):
    assert_ok(mpirun(n, "_ddp.py"), n)


def test_a_raising_rank_aborts_the_job_with_its_traceback(mpirun):
    t0 = time.monotonic()
    proc = mpirun(3, "_failure.py", "raise", timeout=60)
    took = time.monotonic() - t0
    out = proc.stdout
    assert proc.returncode != 0, out
    assert "[rank 2] Traceback (most recent call last):" in out, out
    assert "[rank 2] ValueError: deliberate failure on rank 2" in out, out
    assert "UNREACHABLE" not in out, out
    assert took < 60


def test_a_sigkilled_rank_ends_the_job(mpirun):
    proc = mpirun(2, "_failure.py", "kill", timeout=60)   # a hang raises TimeoutExpired
    assert proc.returncode != 0, proc.stdout
    assert "UNREACHABLE" not in proc.stdout, proc.stdout
