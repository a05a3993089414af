"""Speed on a busy machine: each workload beside two pure-Python busy loops (one process
each, started and stopped by the benchmark), against its own time alone, numbagrad and
torch alike; and two digits jobs started together against one alone.

Each run is a fresh process (``perf/_busy_run.py``): warm-up, ``STEPS`` timed steps alone,
then the busy loops start and ``STEPS`` more are timed beside them. Medians. Issue 21's
goals (2 cores): the digits job beside two busy loops takes at most 3x its quiet time and
at most 1/5 of torch's time under the same load; the tiny GPT and LSTM steps hold at most
2.5x their quiet time; two digits jobs started together each finish within 2.5x of one
job alone. The table's ratio column is numbagrad / torch under load; the notes give each
framework's slowdown (busy / quiet) and the goals' verdicts.

What makes numbagrad hold up: parallel kernels fall back to one thread while their
launches show the cores are contended (``numbagrad/kernels/_threads.py``), and small
GEMMs (the digits MLP's) no longer run parallel at all. Before that, the digits epoch took
1038 ms beside two busy loops against 21 ms alone (torch: 154 ms).
"""
import json
import os
import subprocess
import sys
import time

import pytest

import _perfkit as kit

SCRIPT = os.path.join(kit.PERF_DIR, "_busy_run.py")
BUSY = 2
# smoke mode (the test suite's run of perf/): the digits job only, one step each
STEPS = {"digits": 3, "gpt": 8, "lstm": 12} if not kit.SMOKE else {"digits": 1}
START_DELAY = 4.0 if kit.SMOKE else 8.0   # s: both jobs imported and warmed up by then
TITLES = {"digits": "digits MLP 64-128-64-10 epoch b32 (the main job's loop)",
          "gpt": "tiny GPT train step (perf/test_bench_gpt.py)",
          "lstm": "LSTM train step (perf/test_bench_lstm.py)"}
GOALS = {"digits": 3.0, "gpt": 2.5, "lstm": 2.5}
for _w in STEPS:
    kit._workload(f"busy_{_w}", f"{TITLES[_w]}, beside {BUSY} busy-loop processes",
                  bar=("ratio", "<=", 0.2) if _w == "digits" else None,
                  note=f"goal: <= {GOALS[_w]}x its own quiet time")
kit._workload("busy_two_jobs", "two digits jobs started together (each job's epoch)",
              note="goal: each <= 2.5x one job alone")
QUIET = {}    # (workload, framework) -> median quiet step, s


def _median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2]


def _launch(workload, framework, busy=0, start_at=0.0):
    env = dict(os.environ)
    env["PYTHONPATH"] = kit.REPO_ROOT + os.pathsep + env.get("PYTHONPATH", "")
    cmd = [sys.executable, SCRIPT, workload, framework, str(STEPS[workload]), "--busy", str(busy),
           "--start-at", str(start_at)]
    return subprocess.Popen(cmd, env=env, cwd=kit.PERF_DIR, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def _result(proc):
    out, err = proc.communicate(timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(proc.args)} exited {proc.returncode}:\n{out}\n{err[-4000:]}")
    lines = [ln for ln in out.splitlines() if ln.startswith("PERF_RESULT ")]
    return json.loads(lines[-1][len("PERF_RESULT "):])


def _note(workload):
    res = kit.RESULTS.get(f"busy_{workload}", {})
    parts = []
    for fw in ("numbagrad", "torch"):
        if fw in res and (workload, fw) in QUIET:
            q = QUIET[(workload, fw)]
            parts.append(f"{fw} {res[fw]['median'] * 1e3:.1f} ms vs {q * 1e3:.1f} ms alone "
                         f"({res[fw]['median'] / q:.1f}x)")
    if ("numbagrad" in res) and (workload, "numbagrad") in QUIET:
        slow = res["numbagrad"]["median"] / QUIET[(workload, "numbagrad")]
        verdict = "(smoke)" if kit.SMOKE else "met" if slow <= GOALS[workload] else "MISSED"
        parts.append(f"numbagrad's slowdown goal <= {GOALS[workload]}x: {verdict}")
    kit.WORKLOADS[f"busy_{workload}"]["note"] = "; ".join(parts)


@pytest.mark.parametrize("framework", ("numbagrad", "torch"))
@pytest.mark.parametrize("workload", tuple(STEPS))
def test_beside_busy_loops(benchmark, workload, framework):
    if framework == "torch":
        if kit.SMOKE:
            pytest.skip("smoke mode: numbagrad only")
        pytest.importorskip("torch")
    benchmark.group = f"busy_{workload}"
    got = {}

    def once():
        got.update(_result(_launch(workload, framework, busy=BUSY)))

    benchmark.pedantic(once, rounds=1, iterations=1)
    QUIET[(workload, framework)] = _median(got["quiet"])
    busy = sorted(got["busy"])
    kit.record(f"busy_{workload}", framework, _median(busy), busy[0], len(busy))
    _note(workload)


def test_two_jobs_together(benchmark):
    benchmark.group = "busy_two_jobs"
    got = []

    def once():
        start = time.time() + START_DELAY
        procs = [_launch("digits", "numbagrad", start_at=start) for _ in range(2)]
        got.extend(_result(p) for p in procs)

    benchmark.pedantic(once, rounds=1, iterations=1)
    alone = QUIET.get(("digits", "numbagrad"))
    if alone is None:
        alone = _median(_result(_launch("digits", "numbagrad"))["quiet"])
    each = [_median(r["quiet"]) for r in got]
    kit.record("busy_two_jobs", "numbagrad", max(each), min(each), len(each))
    worst = max(each) / alone
    verdict = "(smoke)" if kit.SMOKE else "met" if worst <= 2.5 else "MISSED"
    kit.WORKLOADS["busy_two_jobs"]["note"] = (
        f"each job's epoch {', '.join(f'{e * 1e3:.1f}' for e in each)} ms vs {alone * 1e3:.1f} ms alone "
        f"(worst {worst:.2f}x; goal <= 2.5x: {verdict})")
