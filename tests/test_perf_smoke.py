"""Smoke-run the ``perf/`` benchmark suite once (tiny sizes, one round) so it never rots.

Timings are not checked: only that every benchmark runs and the summary table is built.
"""
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.skipif(not os.path.isdir(os.path.join(ROOT, "perf")), reason="no perf/ suite in this checkout")
def test_perf_suite_smoke_runs():
    pytest.importorskip("pytest_benchmark")
    env = dict(os.environ, NUMBAGRAD_PERF_SMOKE="1")
    proc = subprocess.run([sys.executable, "-m", "pytest", "perf", "-q", "-p", "no:cacheprovider"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-6000:]
    assert "numbagrad vs torch (perf/)" in out, out[-6000:]
