"""pytest configuration of the ``perf/`` benchmark suite.

* ``python -m pytest perf`` runs the benchmarks even though ``setup.cfg`` passes
  ``--benchmark-disable`` to every run (that default keeps benchmark fixtures in unit
  tests to a single call); ``--benchmark-disable`` typed on the command line still wins.
* ``NUMBAGRAD_PERF_SMOKE=1`` shrinks every workload and runs one round of each, to check
  that the suite still works (``tests/test_perf_smoke.py``).
* At the end, a comparison table (numbagrad vs torch vs NumPy, ratios, GB/s, GFLOP/s,
  % of measured bandwidth, the bars from the issue) is printed and written to
  ``perf/results/last_run.md`` and ``.json``.
"""
import os
import time

# NOTE: numbagrad and torch share this process. Both run on OpenMP: torch on its own
# libgomp, numba (its default "omp" layer) on the system one. Session 1 measured the
# pools interfering (numbagrad 28-34 ms on the MLP step with torch imported first) and ran
# the suite on numba's "workqueue" layer. Since numbagrad runs its GEMMs on numba's pool
# instead of NumPy's OpenBLAS threads and sets libgomp's spin count (numbagrad/__init__.py,
# kernels/cpu/_blas.py), numba's default layer is the fast one, and torch's figures did not
# move (2 cores, medians, omp vs workqueue, torch / numbagrad, ms): LeNet-5 3.98 / 4.65 vs
# 4.30 / 8.59; MLP b128 2.54 / 3.03 vs 2.56 / 6.03; tiny GPT 20.5 / 28.7 vs 21.5 / 48.9;
# Conv2d 4.22 / 7.06 vs 4.35 / 8.57. So the suite runs numba's own default layer, as a
# user gets it (NUMBA_THREADING_LAYER still overrides), and imports torch first. The
# fresh-process rows run each framework alone, as a cross-check. numbagrad is imported
# before numba's first parallel launch (the STREAM kernels of perf/_stream.py): its
# configuration puts OpenMP first, as a user's process gets it; before, a STREAM kernel
# launched first and numba took TBB (the ``mkl`` wheel installs it), so every figure was
# measured on a layer users do not get.
USER_THREADING_LAYER = os.environ.get("NUMBA_THREADING_LAYER")
try:
    import torch  # noqa: F401
except ImportError:
    torch = None
try:
    import numbagrad  # noqa: F401,E402
except ImportError:
    pass
import numba  # noqa: E402,F401

import pytest  # noqa: E402

import _perfkit as kit  # noqa: E402

kit.USER_THREADING_LAYER = USER_THREADING_LAYER


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    # Runs before pytest-benchmark's own (trylast) pytest_configure reads the options.
    if not hasattr(config.option, "benchmark_enable"):
        return  # pytest-benchmark not installed: the benchmark fixture errors clearly
    if "--benchmark-disable" not in config.invocation_params.args:  # addopts are not in .args
        config.option.benchmark_enable = True
    args = config.invocation_params.args
    if not any(str(a).startswith("--benchmark-columns") for a in args):
        config.option.benchmark_columns = ["min", "median", "iqr", "rounds", "iterations"]
    if kit.SMOKE:
        config.option.benchmark_min_rounds = 1
        config.option.benchmark_max_time = 0.0
        config.option.benchmark_min_time = 0.0
        config.option.benchmark_warmup = False
        config.option.benchmark_calibration_precision = 1
    else:
        config.option.benchmark_min_rounds = max(config.option.benchmark_min_rounds, 5)
    kit.SESSION["start"] = time.perf_counter()
    kit.SESSION["loadavg_start"] = kit._loadavg()
    kit.pin_threads()


@pytest.fixture(autouse=True)
def _seed():
    import numpy as np
    np.random.seed(kit.SEED)
    try:
        import numbagrad as ng
        ng.manual_seed(kit.SEED)
    except ImportError:
        pass
    try:
        import torch
        torch.manual_seed(kit.SEED)
    except ImportError:
        pass
    kit.pin_threads()
    yield


@pytest.fixture(scope="session")
def stream_bandwidth():
    """The machine's memory bandwidth as a STREAM-style parallel @njit kernel sees it.

    Triad ``a[i] = b[i] + s*c[i]`` and copy ``a[i] = b[i]`` over preallocated float32
    arrays of the elementwise workload's size (and a larger-than-L3 triad), best of
    ``kit.BW_REPEATS`` runs each. Triad at the workload size is the reference for
    "% of measured bandwidth": the same access pattern (2 reads, 1 write) and working
    set as ``x + y``. Bytes follow STREAM's convention (write-allocate not counted).
    """
    from _stream import measure_bandwidth
    measure_bandwidth()
    return kit.BANDWIDTH


def _is_partial(config):
    """True when the run selected a subset of perf/ (-k, -m, node ids, single files)."""
    if config.option.keyword or config.option.markexpr:
        return True
    paths = [a for a in config.args]
    return not paths or any(os.path.abspath(p.split("::")[0]) != kit.PERF_DIR for p in paths)


@pytest.hookimpl(trylast=True)
def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if not kit.RESULTS and not kit.FRESH:
        return
    start = kit.SESSION.get("start") or time.perf_counter()
    term, md, data = kit.render(time.perf_counter() - start)
    terminalreporter.write_sep("=", "numbagrad vs torch (perf/)")
    for line in term:
        terminalreporter.write_line(line)
    try:
        path = kit.write_results(md, data, partial=_is_partial(config))
        terminalreporter.write_line(f"\nwritten: {os.path.relpath(path)} (+ .json)")
    except OSError as exc:  # a read-only checkout must not fail the run
        terminalreporter.write_line(f"\ncould not write results: {exc}")
