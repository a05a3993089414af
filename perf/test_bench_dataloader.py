"""DataLoader throughput on the digits (1,797 x 64 float32, int64 labels) as a
``TensorDataset``, batch 64, shuffled: numbagrad with ``num_workers=0`` and with 2
persistent workers against torch's ``DataLoader`` with the same settings over torch
tensors of the same data, in the same run, plus the rate at which the digits MLP training
step (the main job's 64-128-64-10 model, Adam, cross-entropy; ``python -m numbagrad``)
consumes batches of 64.

A round is one whole epoch (29 batches, the epoch's order drawn and, with workers, the
pipeline refilled at its start, as a training loop sees it); the time per batch is the
epoch's time over its batches, so the rows read as 1 / (batches/s). Worker start-up
(spawning the processes, importing the framework there, the first batch) is excluded
from the steady state: the loader is built and one epoch run before timing, and the
start-up is timed apart (``extra_info["startup_s"]`` and the row's note). torch's
workers use its default start method on Linux (fork); numbagrad's use spawn (fork is
refused once numba's thread pool has run, see ``numbagrad.data.DataLoader``).

Bars (issue 17): 2 workers deliver at least 3x the batches/s the training step consumes
(the step row's note says it), and at least torch's throughput with the same workers
(ratio <= 1 on the 2-worker row).
"""
import time

import numpy as np
import pytest

import _perfkit as kit

BATCH = 64
ROUNDS = 1 if kit.SMOKE else 15

kit._workload("dl_digits_w0", f"DataLoader digits b{BATCH} shuffle, num_workers=0 (per batch)",
              note="main-process loading; an epoch per round")
kit._workload("dl_digits_w2", f"DataLoader digits b{BATCH} shuffle, 2 persistent workers (per batch)",
              bar=("ratio", "<=", 1.0), note="steady state; start-up apart (filled in by the test)")
kit._workload("dl_digits_step", f"digits MLP 64-128-64-10 train step b{BATCH} (consumer)",
              note="(filled in by the test: 2 workers' batches/s over the step's steps/s, bar >= 3x)")

_PER_BATCH = {}   # (framework, workers) -> median seconds per batch
_STARTUP = {}     # (framework, workers) -> seconds from DataLoader() to the first batch


def _data():
    from numbagrad.data import load_digits
    return load_digits(as_numpy=True)


def _loader(framework, workers):
    X, y = _data()
    kw = dict(batch_size=BATCH, shuffle=True)
    if workers:
        kw.update(num_workers=workers, persistent_workers=True)
    if framework == "torch":
        torch = pytest.importorskip("torch")
        from torch.utils.data import DataLoader, TensorDataset
        torch.manual_seed(kit.SEED)
        return DataLoader(TensorDataset(torch.from_numpy(X), torch.from_numpy(y)), **kw)
    import numbagrad as ng
    from numbagrad.data import DataLoader, TensorDataset
    ng.manual_seed(kit.SEED)
    return DataLoader(TensorDataset(ng.from_numpy(X), ng.from_numpy(y)), **kw)


def _note_rows():
    w2 = {fw: _PER_BATCH.get((fw, 2)) for fw in ("numbagrad", "torch")}
    start = {fw: _STARTUP.get((fw, 2)) for fw in ("numbagrad", "torch")}
    if w2["numbagrad"]:
        parts = [f"{fw} {1 / w2[fw]:.0f} batches/s" for fw in ("numbagrad", "torch") if w2[fw]]
        parts += [f"{fw} start-up {start[fw]:.2f} s" for fw in ("numbagrad", "torch") if start[fw]]
        kit.WORKLOADS["dl_digits_w2"]["note"] = "steady state; " + "; ".join(parts)
    step = _PER_BATCH.get(("numbagrad", "step"))
    if step and w2["numbagrad"]:
        ratio = step / w2["numbagrad"]
        kit.WORKLOADS["dl_digits_step"]["note"] = (
            f"{1 / step:.0f} steps/s; 2 workers deliver {ratio:.1f}x that (bar >= 3x: "
            f"{'met' if ratio >= 3 else 'MISSED'})"
            + (f"; torch's 2 workers {step / w2['torch']:.1f}x" if w2["torch"] else ""))


@pytest.mark.benchmark(**kit.bench_mark())
@pytest.mark.parametrize("workers", (0, 2))
@pytest.mark.parametrize("framework", ("numbagrad", "torch"))
def test_dataloader_digits(benchmark, framework, workers):
    kit.pin_threads()
    key = f"dl_digits_w{workers}"
    t = time.perf_counter()
    loader = _loader(framework, workers)
    it = iter(loader)
    first = next(it)
    startup = time.perf_counter() - t
    for _ in it:    # the rest of the warm-up epoch
        pass
    n = len(loader)
    seen = []

    def epoch():
        count = 0
        for xb, yb in loader:
            count += xb.shape[0]
        seen.append(count)

    benchmark.group = key
    benchmark.extra_info.update(framework=framework, workload=kit.WORKLOADS[key]["title"], batches=n,
                                startup_s=startup)
    benchmark.pedantic(epoch, rounds=ROUNDS, iterations=1, warmup_rounds=1)
    stats = getattr(benchmark, "stats", None)
    if stats is not None:  # None when benchmarks are disabled
        s = stats.stats
        kit.record(key, framework, s.median / n, s.min / n, s.rounds)
        benchmark.extra_info["batches_per_s"] = n / s.median
        _PER_BATCH[(framework, workers)] = s.median / n
        _STARTUP[(framework, workers)] = startup
        _note_rows()
    # not timing: every epoch delivered every sample once, as float32 rows of 64
    assert set(seen) == {1797} and tuple(first[0].shape) == (BATCH, 64)
    assert str(first[0].dtype).endswith("float32")
    if workers and framework == "numbagrad":
        loader._shutdown_workers()
    del it, loader


@pytest.mark.benchmark(**kit.bench_mark())
def test_digits_train_step_consumption(benchmark):
    """The main job's step on batches of 64, as ``numbagrad/examples/train_digits.py`` runs it."""
    import numbagrad as ng
    from numbagrad import optim
    from numbagrad.examples.train_digits import build_model
    from numbagrad.nn import functional as F
    kit.pin_threads()
    ng.manual_seed(kit.SEED)
    X, y = _data()
    r = np.random.default_rng(kit.SEED)
    idx = r.permutation(len(X))[:BATCH]
    xb, yb = ng.from_numpy(X[idx]), ng.from_numpy(y[idx])
    model = build_model()
    opt = optim.Adam(model.parameters(), lr=1e-3)

    def step():
        loss = F.cross_entropy(model(xb), yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item()

    first = step()
    kit.run_benchmark(benchmark, "dl_digits_step", "numbagrad", step, warm=5)
    stats = getattr(benchmark, "stats", None)
    if stats is not None:
        _PER_BATCH[("numbagrad", "step")] = stats.stats.median
        _note_rows()
    assert step() < first   # the step trains
