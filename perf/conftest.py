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

# NOTE: numbagrad and torch share this process, and their thread pools interfere
# through OpenMP. Measured here (MLP 784-512-256-10 step, batch 128, 2 threads; alone:
# numbagrad 2.7 ms, torch 2.4-3.3 ms, each in its own process):
#   numba "omp" layer, numba first:  torch 9-11 ms (torch binds to the system libgomp
#                                    numba loaded: both ask for soname libgomp.so.1)
#   numba "omp" layer, torch first:  numbagrad 28-34 ms (torch's libgomp threads spin;
#                                    OMP_WAIT_POLICY=passive fixes numbagrad, but slows
#                                    torch to 5 ms)
#   "workqueue" layer, numba first:  torch 5.3 ms
#   "workqueue" layer, torch first:  numbagrad 2.8 ms, torch 2.4 ms  <- used here
# So the in-process suite runs numba's workqueue layer (unless NUMBA_THREADING_LAYER is
# set) and imports torch before numba starts any threads. The fresh-process rows run
# each framework alone with its defaults (numba's own layer choice) and report their
# steady-step time too, as a cross-check.
USER_THREADING_LAYER = os.environ.get("NUMBA_THREADING_LAYER")
os.environ.setdefault("NUMBA_THREADING_LAYER", "workqueue")
try:
    import torch  # noqa: F401
except ImportError:
    torch = None
import numba  # noqa: E402

numba.config.THREADING_LAYER = os.environ["NUMBA_THREADING_LAYER"]  # in case numba came in earlier

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
