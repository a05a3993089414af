"""One workload's step times in this process, for perf/test_bench_busy.py.

    python perf/_busy_run.py WORKLOAD FRAMEWORK STEPS [--busy N] [--start-at T]

WORKLOAD: ``digits`` (an epoch of the digits MLP 64-128-64-10, batch 32, Adam: the main
job's loop by hand), ``gpt`` (a step of perf/test_bench_gpt.py's tiny GPT) or ``lstm``
(perf/test_bench_lstm.py's step). After warm-up, ``STEPS`` timed steps (``quiet``);
then, with ``--busy N``, N pure-Python busy loops (one process each) start, and
``STEPS`` more are timed beside them (``busy``) before they are stopped. ``--start-at``:
wait until ``time.time()`` reaches T before the timed steps (two jobs started together).
Prints ``PERF_RESULT {"quiet": [...], "busy": [...], "threads": n}``.
"""
import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _perfkit as kit  # noqa: E402

BUSY_LOOP = "while True: pass"


def digits(framework):
    from sklearn.datasets import load_digits
    X, y = load_digits(return_X_y=True)
    X, y = (X / 16.0).astype(np.float32), y.astype(np.int64)
    if framework == "torch":
        import torch as fw
        fw.set_num_threads(kit.THREADS)
    else:
        import numbagrad as fw
    fw.manual_seed(0)
    nn = fw.nn
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, 10))
    opt = fw.optim.Adam(model.parameters(), lr=1e-3)
    xt, yt = fw.tensor(X), fw.tensor(y)
    rng = np.random.default_rng(0)

    def epoch():
        perm = rng.permutation(len(X))
        for i in range(0, len(X), 32):
            idx = fw.tensor(perm[i:i + 32])
            loss = nn.functional.cross_entropy(model(xt[idx]), yt[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
        return loss

    return epoch


def build(workload, framework):
    if workload == "digits":
        return digits(framework)
    if workload == "gpt":
        import test_bench_gpt
        return test_bench_gpt.build(framework)
    import test_bench_lstm
    return test_bench_lstm._build(framework)


def _timed(step, n):
    times = []
    for _ in range(n):
        t = time.perf_counter()
        step()
        times.append(time.perf_counter() - t)
    return times


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("workload", choices=("digits", "gpt", "lstm"))
    ap.add_argument("framework", choices=("numbagrad", "torch"))
    ap.add_argument("steps", type=int)
    ap.add_argument("--busy", type=int, default=0)
    ap.add_argument("--start-at", type=float, default=0.0)
    a = ap.parse_args()
    step = build(a.workload, a.framework)
    for _ in range(3):
        step()
    if a.start_at:
        time.sleep(max(0.0, a.start_at - time.time()))
    out = {"quiet": _timed(step, a.steps), "busy": []}
    if a.busy:
        busy = [subprocess.Popen([sys.executable, "-c", BUSY_LOOP]) for _ in range(a.busy)]
        try:
            time.sleep(0.2)
            out["busy"] = _timed(step, a.steps)
        finally:
            for p in busy:
                p.kill()
                p.wait()
    if a.framework == "torch":
        import torch
        threads = torch.get_num_threads()
    else:
        import numba
        threads = numba.get_num_threads()
    out["threads"] = threads
    print("PERF_RESULT " + json.dumps(out))


if __name__ == "__main__":
    main()
