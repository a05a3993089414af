"""``GradScaler.unscale_``: the fused unscale + inf/NaN check over an optimizer's gradients,
numbagrad vs torch's ``GradScaler("cpu").unscale_`` on the same data, threads pinned alike.

The gradients are the clipping benchmark's 50 float32 arrays of varied sizes (10M elements
in all), set once, as separate arrays (what backward leaves after ``zero_grad()``): numbagrad's
kernel reads and writes them where they are through the optimizer arena's address table (one
kernel call for the bucket); torch runs ``_amp_foreach_non_finite_check_and_unscale_`` over the
list. A second row does the same over 64M elements (256 MiB of gradients), beyond any cache, so
the bandwidth figure cannot be a cache artefact: 10M float32 gradients are 40 MB, which the
host's last-level cache may largely hold between rounds.

Each timed call is ``scaler.unscale_(opt); scaler.update(new_scale)`` with the scale
alternating between 0.5 and 2.0, so every call really multiplies (by 2, then by 0.5: the
values stay where they started; an unscale by exactly 1 stores nothing) and the per-iteration
state is reset. GB/s counts 8 bytes an element (one read, one write); the bar is >= 70% of the
STREAM triad bandwidth measured in the same run (``stream_bandwidth``). The first numbagrad
call (JIT compile or cache load, plus building the arena) is timed apart into
``extra_info["first_call_s"]``.
"""
import numpy as np
import pytest

import _perfkit as kit
from test_bench_clip import _data

N_LARGE = 100_000 if kit.SMOKE else 64_000_000
TOTAL = sum(g.size for g in _data())

kit._workload("grad_scaler_unscale_10m", f"GradScaler.unscale_ + inf check, 50 grads, {TOTAL / 1e6:g}M f32",
              kind="bytes", work=8 * TOTAL, bar=("bw", ">=", 70.0),
              note="8 B/element: 1 read + 1 write, in place; % of measured triad")
kit._workload("grad_scaler_unscale_64m", f"GradScaler.unscale_ + inf check, 50 grads, {N_LARGE / 1e6:g}M f32",
              kind="bytes", work=8 * N_LARGE, bar=("bw", ">=", 70.0),
              note="same, 256 MiB of gradients: beyond the caches")


def _large_data():
    r = np.random.default_rng(kit.SEED + 3)
    sizes = [g.size for g in _data()]
    scaled = [max(1, n * N_LARGE // TOTAL) for n in sizes]
    scaled[int(np.argmax(scaled))] += N_LARGE - sum(scaled)
    return [r.standard_normal(n, dtype=kit.DTYPE) for n in scaled]


def _build(framework, gs):
    kit.pin_threads()
    if framework == "torch":
        torch = pytest.importorskip("torch")
        lib = torch
        ps = [torch.nn.Parameter(torch.zeros(g.shape)) for g in gs]
        for p, g in zip(ps, gs):
            p.grad = torch.from_numpy(g.copy())
    else:
        import numbagrad as ng
        lib = ng
        ps = [ng.nn.Parameter(ng.zeros(*g.shape)) for g in gs]
        for p, g in zip(ps, gs):
            p.grad = ng.tensor(g.copy())
    opt = lib.optim.SGD(ps, lr=0.0)
    scaler = lib.amp.GradScaler("cpu", init_scale=0.5)
    scaler.scale(lib.ones(()))
    state = {"next": 2.0}

    def step():
        scaler.unscale_(opt)
        scaler.update(state["next"])
        state["next"] = 2.5 - state["next"]      # 0.5 <-> 2.0
        return ps
    return step, ps


def _bench(benchmark, key, framework, gs):
    step, ps = _build(framework, gs)
    out = kit.run_benchmark_timing_first(benchmark, key, framework, step, warm=3)
    # not a timing check: an odd number of calls so far multiplied by 2 once more than by 0.5
    # (or the reverse); either way every value is its start times a power of two
    for p, g in zip(out[:3], gs):
        v = kit.to_numpy(p.grad)
        ratio = v[np.abs(g) > 1e-3] / g[np.abs(g) > 1e-3]
        assert np.all(np.log2(np.abs(ratio)) % 1 == 0) and np.isfinite(v).all()


@pytest.mark.benchmark(**kit.bench_mark(max_time=1.5))
@pytest.mark.parametrize("framework", ("numbagrad", "torch"))
def test_unscale_10m(benchmark, framework, stream_bandwidth):
    _bench(benchmark, "grad_scaler_unscale_10m", framework, _data())


@pytest.mark.benchmark(**kit.bench_mark(max_time=2.0))
@pytest.mark.parametrize("framework", ("numbagrad", "torch"))
def test_unscale_64m(benchmark, framework, stream_bandwidth):
    _bench(benchmark, "grad_scaler_unscale_64m", framework, _large_data())
