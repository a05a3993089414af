"""numbagrad in forked children (issue 20): after a parallel kernel has run, a child made by
``os.fork`` or by a ``multiprocessing`` fork pool runs parallel-sized ops to the right
result and exits normally, under each numba threading layer.

Under GNU OpenMP numba terminates such a child at its first parallel launch, so there the
child must run serial kernels (``config.fork_runs_serial``, applied by
``kernels/_threads.py``'s at-fork handler); ``tbb`` and ``workqueue`` start afresh in the
child and keep their parallel kernels. Each case runs in a fresh interpreter under
``timeout`` (a hang is a failure, never a stuck suite)."""
import os
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HANG_GUARD_S = 120

SCRIPT = textwrap.dedent("""
    import multiprocessing as mp
    import os
    import sys

    import numpy as np

    import numbagrad as ng
    from numbagrad.backend import config
    from numbagrad.kernels import _threads

    N = 300_000                     # above config.PARALLEL_THRESHOLD: the parallel twin
    M = 256                         # a 256x256 matmul: the row-split prange GEMM


    def data(seed):
        r = np.random.default_rng(seed)
        return r.standard_normal(N).astype(np.float32), r.standard_normal((M, M)).astype(np.float32)


    def work(seed):
        x, a = data(seed)
        tx, ta = ng.tensor(x), ng.tensor(a)
        s = (tx + tx * 2.0).numpy()
        mm = (ta @ ta).numpy()
        return s, mm, _threads.serial_only()


    def check(seed, s, mm):
        x, a = data(seed)
        assert np.array_equal(s, x + x * np.float32(2.0)), "elementwise result differs"
        ref = a.astype(np.float64) @ a.astype(np.float64)
        assert np.allclose(mm, ref, rtol=1e-4, atol=1e-3), "matmul result differs"


    def pool_task(seed):
        s, mm, serial = work(seed)
        check(seed, s, mm)
        return seed, float(s.sum()), serial


    if __name__ == "__main__":
        layer = sys.argv[1]
        # before any parallel kernel: a child need not go serial
        assert not config.numba_pool_started() and not config.fork_runs_serial()
        s, mm, serial = work(0)
        check(0, s, mm)
        import numba
        assert config.numba_pool_started()
        assert numba.threading_layer() == layer, numba.threading_layer()
        expect_serial = config.fork_runs_serial()
        assert expect_serial == (layer == "omp"), (layer, expect_serial)
        print("parent ok", layer, "serial-in-child", expect_serial, flush=True)

        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                s, mm, serial = work(1)
                check(1, s, mm)
                assert serial == expect_serial
                code = 0
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        print("fork child exit", os.waitstatus_to_exitcode(status), flush=True)

        with mp.get_context("fork").Pool(2) as pool:
            res = pool.map_async(pool_task, range(2, 6)).get(timeout=60)
        assert [r[0] for r in res] == [2, 3, 4, 5]
        assert all(r[2] == expect_serial for r in res)
        print("pool ok", len(res), flush=True)
        # the parent itself still runs parallel kernels after forking
        s, mm, serial = work(7)
        check(7, s, mm)
        assert not serial
        print("parent after ok", flush=True)
""")


def _tbb_loads():
    """Whether numba's TBB layer can load here (its pool module links libtbb, which the
    ``tbb`` or ``mkl`` wheels install); importing it starts no threads."""
    try:
        from numba.np.ufunc import tbbpool  # noqa: F401
    except (ImportError, OSError):
        return False
    return True


def _layers():
    return ["omp", "workqueue",
            pytest.param("tbb", marks=pytest.mark.skipif(not _tbb_loads(), reason="numba's TBB layer cannot load"))]


@pytest.mark.parametrize("layer", _layers())
def test_forked_children_run_parallel_sized_ops(layer, tmp_path):
    script = tmp_path / "fork_case.py"
    script.write_text(SCRIPT)
    env = dict(os.environ, NUMBA_THREADING_LAYER=layer, PYTHONPATH=ROOT)
    env.pop("NUMBA_THREADING_LAYER_PRIORITY", None)
    proc = subprocess.run(["timeout", "-s", "KILL", str(HANG_GUARD_S), sys.executable, str(script), layer],
                          capture_output=True, text=True, env=env, cwd=str(tmp_path))
    out = proc.stdout
    assert proc.returncode == 0, f"rc {proc.returncode}\n{out}\n{proc.stderr[-3000:]}"
    assert f"parent ok {layer} serial-in-child {layer == 'omp'}" in out
    assert "fork child exit 0" in out, out
    assert "pool ok 4" in out and "parent after ok" in out, out
    assert "Terminating" not in proc.stderr, proc.stderr[-3000:]

