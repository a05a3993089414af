"""Run the whole test suite: the README's test command and what ``.ci/run`` calls.

Eight pytest processes, each a *phase*, run two at a time (``--jobs``, default: the number
of cores), because none of them keeps two cores busy for long:

``cpu``
    ``python -m pytest`` but for the PTX file, ``tests/programs``, ``tests/distributed`` and
    ``tutorials``: the CPU backend's unit tests and a smoke run of ``perf/``. It fills numba's cache
    (``backend/cache.py``: ``~/.cache/numbagrad/<versions>`` unless ``NUMBAGRAD_CACHE_DIR``
    is set) with every CPU kernel.
``tutorials``
    ``python -m pytest tutorials``: every notebook run top to bottom by nbmake, ending in
    its own asserts. After ``avx2``, beside the rest of ``cpu``: ``cpu`` is the longest phase
    and the others wait for its cache, so a core would idle there; the notebooks load
    what ``cpu`` has cached by then and compile the rest (the LSTM and CTC kernels took
    55 s of CPU time in a notebook on a cold cache).
``ptx``
    ``python -m pytest tests/test_cuda_ptx.py``: every CUDA kernel compiled to PTX (NVVM;
    nothing is cached on disk, so it can run beside ``cpu`` without compiling anything
    twice).
``avx2``
    The torch-parity tests of the optimizers, ops and losses, with torch, MKL and numba held
    to AVX2 (``ATEN_CPU_CAPABILITY=avx2``, ``MKL_ENABLE_INSTRUCTIONS=AVX2``,
    ``NUMBA_CPU_NAME=haswell`` with no extra features), so that a test whose assertion
    depends on the instruction set fails here on an AVX-512 machine too, not only on the
    AVX2-only machine CI may land on. Tests that compare numbagrad with itself (serial and
    parallel twins) and the fresh-process provider checks are left out. Its numba cache is
    a directory of its own (``.numba_cache_avx2/``): code compiled for haswell must not
    replace the host's in the shared cache. On a machine without AVX2 the phase is skipped.
``programs``
    ``python -m pytest tests/programs``: PyTorch-style training scripts run unchanged under
    ``numbagrad.compat.install_torch_alias()`` and under real torch, in subprocesses; after
    ``tutorials``, beside the end of ``cpu`` (the core would idle there otherwise: on
    2 cores ``ptx``, ``avx2`` and ``tutorials`` end ~2.5 minutes before ``cpu``), when
    ``cpu`` has cached nearly every kernel their numbagrad runs load.
``mpi``
    ``python -m pytest tests/distributed``: ``numbagrad.distributed``, DDP, SyncBatchNorm
    and the distributed Trainer in real multi-process runs (``mpiexec -n 2`` and ``-n 3``,
    one numba thread per rank); after ``cpu``, so each rank loads the cached kernels
    instead of compiling them (every rank would compile its own).
``cudasim1``, ``cudasim2``
    ``NUMBA_ENABLE_CUDASIM=1 python -m pytest tests/cuda``: the CUDA suite under numba's
    simulator, which must be switched on before numba is imported, hence its own process;
    as two shards (``NUMBAGRAD_TEST_SHARD=1/2``, ``2/2``: every other test) that run side
    by side. It checks the simulated kernels against the CPU kernels, so both shards start
    after ``cpu`` and load those from the cache ``cpu`` filled instead of compiling them
    again.

Each phase writes its output to ``build/test-logs/<phase>.log``; the log is printed when
the phase ends, then a table of the phases' wall times, then one closing line with the
counts of all phases. The exit status is 0 only when every phase passed and each ran at
least one test (pytest's exit status 5, nothing collected, counts as a failure).

    python tools/run_tests.py                 # all phases
    python tools/run_tests.py cpu avx2        # some of them
    python tools/run_tests.py --jobs 1        # one after the other
"""
import argparse
import os
import re
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LOG_DIR = os.path.join(ROOT, "build", "test-logs")

# The parity tests that run again on AVX2: the optimizers against torch (and the NumPy
# emulation of their rounding), LBFGS and the schedulers' training runs, every ops test
# (``check_op`` compares with torch wherever torch has the op) and the loss tests; minus
# the tests that compare numbagrad with itself (serial/parallel twins) or spawn processes.
AVX2_PATHS = ["tests/optim/test_optimizers.py", "tests/optim/test_optim_parity.py", "tests/optim/test_optim_adamx.py",
              "tests/optim/test_optim_adaptive.py", "tests/optim/test_optim_lbfgs.py",
              "tests/optim/test_optim_rounding.py", "tests/optim/test_lr_scheduler.py", "tests/ops",
              "tests/nn/test_loss_ctc.py", "tests/nn/test_loss_metric.py", "tests/nn/test_loss_pointwise.py",
              "tests/nn/test_nn_loss.py", "tests/test_bfloat16.py"]
AVX2_SELECT = "not parallel and not twin and not serial and not provider and not openmp"
AVX2_ENV = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2",
            "NUMBA_CPU_NAME": "haswell", "NUMBA_CPU_FEATURES": "",
            "NUMBA_CACHE_DIR": os.path.join(ROOT, ".numba_cache_avx2"),
            "NUMBAGRAD_CACHE_DIR": os.path.join(ROOT, ".numba_cache_avx2")}


def _has_avx2():
    try:
        with open("/proc/cpuinfo") as f:
            return " avx2" in f.read()
    except OSError:
        return False


def phases():
    """name -> (argv, extra environment, phase it waits for, what it runs), in start order."""
    py = [sys.executable, "-m", "pytest"]
    ptx = "tests/test_cuda_ptx.py"
    return {
        "cpu": (py + [f"--ignore={ptx}", "--ignore=tests/programs", "--ignore=tutorials",
                      "--ignore=tests/distributed"], {}, None,
                "unit tests, perf smoke"),
        "ptx": (py + [ptx], {}, None, "every CUDA kernel compiled to PTX"),
        "avx2": (py + ["-k", AVX2_SELECT] + AVX2_PATHS, AVX2_ENV, None,
                 "torch-parity tests with torch, MKL and numba held to AVX2"),
        "tutorials": (py + ["tutorials"], {}, "avx2", "the tutorial notebooks (nbmake), top to bottom"),
        "programs": (py + ["tests/programs"], {}, "tutorials",
                     "PyTorch-style programs under the torch alias, against real torch"),
        "mpi": (py + ["tests/distributed"], {}, "cpu", "multi-process runs under mpiexec (numbagrad.distributed)"),
        **{f"cudasim{i}": (py + ["tests/cuda"], {"NUMBA_ENABLE_CUDASIM": "1", "NUMBAGRAD_TEST_SHARD": f"{i}/2"},
                           "cpu", f"the CUDA suite under the simulator, shard {i}/2") for i in (1, 2)},
    }


_COUNT = re.compile(r"(\d+) (passed|failed|skipped|xfailed|xpassed|errors?|deselected)")


def _counts(log_text):
    """The counts of pytest's closing line (``== 3 failed, 10 passed in 2.0s ==``)."""
    for line in reversed(log_text.splitlines()):
        if re.search(r" in [0-9.]+s", line) and _COUNT.search(line):
            out = {}
            for n, kind in _COUNT.findall(line):
                out["error" if kind.startswith("error") else kind] = int(n)
            return out
    return {}


class Phase:
    def __init__(self, name, argv, env, after, what):
        self.name, self.argv, self.env, self.after, self.what = name, argv, env, after, what
        self.proc = self.log = None
        self.start = self.wall = None
        self.rc = None

    def launch(self):
        os.makedirs(LOG_DIR, exist_ok=True)
        self.log_path = os.path.join(LOG_DIR, f"{self.name}.log")
        self.log = open(self.log_path, "w")
        env = dict(os.environ, PYTHONUNBUFFERED="1", **self.env)
        self.start = time.perf_counter()
        print(f"[run_tests] {time.strftime('%H:%M:%S')} start {self.name}: {self.what}", flush=True)
        self.proc = subprocess.Popen(self.argv, cwd=ROOT, env=env, stdout=self.log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL)

    def poll(self):
        if self.proc is None or self.rc is not None:
            return self.rc
        rc = self.proc.poll()
        if rc is not None:
            self.rc, self.wall = rc, time.perf_counter() - self.start
            self.log.close()
            with open(self.log_path) as f:
                self.text = f.read()
            self.counts = _counts(self.text)
        return self.rc

    @property
    def ok(self):
        return self.rc == 0 and sum(self.counts.get(k, 0) for k in ("passed", "xfailed")) > 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("names", nargs="*", help="phases to run (default: all)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="phases at once (default: cores)")
    args = ap.parse_args(argv)
    table = phases()
    if not _has_avx2():
        print("[run_tests] this CPU has no AVX2: the avx2 phase is skipped", flush=True)
        table.pop("avx2")
    names = args.names or list(table)
    unknown = [n for n in names if n not in table]
    if unknown:
        ap.error(f"unknown phase(s) {unknown}; choose from {list(table)}")
    todo = [Phase(n, *table[n]) for n in table if n in names]
    running, done = [], []
    t0 = time.perf_counter()
    while todo or running:
        finished = {p.name for p in done}
        ready = [p for p in todo if p.after is None or p.after in finished or p.after not in names]
        while ready and len(running) < max(1, args.jobs):
            ph = ready.pop(0)
            todo.remove(ph)
            ph.launch()
            running.append(ph)
        time.sleep(0.5)
        for ph in [p for p in running if p.poll() is not None]:
            running.remove(ph)
            done.append(ph)
            print(f"\n{'=' * 30} phase {ph.name}: exit {ph.rc}, {ph.wall:.0f} s {'=' * 30}", flush=True)
            sys.stdout.write(ph.text)
            if ph.rc == 5 or (ph.rc == 0 and not ph.ok):
                print(f"[run_tests] phase {ph.name} ran no test: counted as a failure", flush=True)
            print(f"[run_tests] {time.strftime('%H:%M:%S')} end {ph.name}", flush=True)
    total = time.perf_counter() - t0
    print(f"\n[run_tests] phases ({args.jobs} at once), wall times:")
    for ph in done:
        c = ", ".join(f"{n} {k}" for k, n in ph.counts.items()) or "no pytest summary"
        print(f"  {ph.name:8s} {ph.wall:7.0f} s  exit {ph.rc}  {'ok' if ph.ok else 'FAILED'}  ({c})")
    print(f"  {'all':8s} {total:7.0f} s")
    agg = {k: sum(ph.counts.get(k, 0) for ph in done) for k in ("passed", "failed", "skipped", "error")}
    bad = [ph.name for ph in done if not ph.ok]
    if bad:
        print(f"[run_tests] failed phases: {', '.join(bad)}")
    # the closing line, in the plain form CI reads: every phase's counts together
    print(f"tests: {agg['passed']} passed, {agg['failed'] + agg['error']} failed, {agg['skipped']} skipped",
          flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
