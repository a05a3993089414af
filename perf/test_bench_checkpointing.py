"""Gradient checkpointing: a training step of a deep MLP, plain and with
``checkpoint_sequential``, numbagrad vs torch (``torch.utils.checkpoint``,
``use_reentrant=False``) in the same run, threads pinned alike.

The model is 32 x (Linear(1024, 1024) + ReLU), batch 256, float32; the step is
``zero_grad; loss = model(x).square().mean(); loss.backward()`` (no optimizer: the
question is what recomputation costs). The issue's bars: the checkpointed step costs at
most 1.35x the plain one, and holds at most 1/3 of its peak saved-activation memory.
Both figures are numbagrad's against itself; the rows' ng/torch columns compare each
variant with torch's. The peak saved bytes (``numbagrad.memory_stats()``) go into
``extra_info``, and the ratios into the run's notes.
"""
import pytest

import _perfkit as kit

DEPTH, WIDTH, BATCH = (4, 32, 8) if kit.SMOKE else (32, 1024, 256)
SEGMENTS = 6
_title = f"MLP {DEPTH}x{WIDTH} b{BATCH} fwd+bwd"
kit._workload("ckpt_plain", f"{_title}, plain", note="reference for the checkpointed row")
kit._workload("ckpt_segments", f"{_title}, checkpoint_sequential {SEGMENTS} segments",
              note="issue bar: <= 1.35x the plain step and <= 1/3 of its peak saved bytes (numbagrad vs itself)")
PEAK = {}


def _build(framework, checkpointed):
    kit.pin_threads()
    if framework == "torch":
        import torch
        from torch.utils.checkpoint import checkpoint_sequential
        lib = torch
        torch.manual_seed(kit.SEED)
    else:
        import numbagrad as lib
        from numbagrad.utils.checkpoint import checkpoint_sequential
        lib.manual_seed(kit.SEED)
    nn = lib.nn
    layers = []
    for _ in range(DEPTH):
        layers += [nn.Linear(WIDTH, WIDTH), nn.ReLU()]
    model = nn.Sequential(*layers)
    x = lib.randn(BATCH, WIDTH)

    def step():
        model.zero_grad()
        y = checkpoint_sequential(model, SEGMENTS, x, use_reentrant=False) if checkpointed else model(x)
        loss = y.square().mean()
        loss.backward()
        return loss
    return step


@pytest.mark.benchmark(**kit.bench_mark(max_time=3.0))
@pytest.mark.parametrize("framework", ("numbagrad", "torch"))
@pytest.mark.parametrize("checkpointed", (False, True), ids=("plain", "segments"))
def test_checkpointing_step(benchmark, framework, checkpointed):
    if framework == "torch":
        pytest.importorskip("torch")
    step = _build(framework, checkpointed)
    key = "ckpt_segments" if checkpointed else "ckpt_plain"
    if framework == "numbagrad":
        import numbagrad as ng
        step()
        ng.reset_peak_memory_stats()
        base = ng.memory_stats()["saved_bytes"]
        step()
        PEAK[checkpointed] = ng.memory_stats()["saved_bytes_peak"] - base
        benchmark.extra_info["peak_saved_bytes"] = PEAK[checkpointed]
        if len(PEAK) == 2:
            kit.WORKLOADS["ckpt_segments"]["note"] += (
                f"; peak saved bytes {PEAK[True] / 2**20:.1f} MiB vs plain {PEAK[False] / 2**20:.1f} MiB "
                f"({PEAK[True] / PEAK[False]:.2f}x)")
    loss = kit.run_benchmark_timing_first(benchmark, key, framework, step, warm=1)
    v = float(loss.detach())
    assert v == v  # not NaN
