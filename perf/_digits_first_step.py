"""The main job's cold start as a user meets it: ``python -m numbagrad`` (the digits MLP)
in a fresh process, timed from the top of this script to the end of its first training
step (the first ``Optimizer.step``), and to the end of the job. Prints one line
``PERF_RESULT {json}``. The caller picks the kernel cache with ``NUMBA_CACHE_DIR`` (an
empty directory: every kernel compiles).

    NUMBA_CACHE_DIR=$(mktemp -d) python perf/_digits_first_step.py
"""
import time

_T0 = time.perf_counter()  # before any other import: the clock for "since process start"

import json  # noqa: E402
import os  # noqa: E402


def main():
    import numbagrad as ng
    from numbagrad.examples import train_digits
    first = {}
    step = ng.optim.Adam.step  # the job's optimizer

    def timed_step(self, *args, **kwargs):
        out = step(self, *args, **kwargs)
        first.setdefault("to_first_step_s", time.perf_counter() - _T0)
        return out

    ng.optim.Adam.step = timed_step
    result = train_digits.main(["--quiet"])
    print("PERF_RESULT " + json.dumps({
        "framework": "numbagrad", "pid": os.getpid(), "numba_cache_dir": os.environ.get("NUMBA_CACHE_DIR"),
        "to_first_step_s": first["to_first_step_s"], "job_s": time.perf_counter() - _T0,
        "test_accuracy": result["test_accuracy"], "kernels_compiled": ng.backend.cache.compiled()}), flush=True)


if __name__ == "__main__":
    main()
