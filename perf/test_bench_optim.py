"""Fused Adam: one ``optimizer.step()`` over 50 float32 parameters of varied sizes
totalling 10M elements (the sizes of the clipping benchmark), numbagrad vs torch on the
same data, threads pinned alike.

Each side's gradients are set once and every timed call is a full ``step()``: numbagrad's
fused kernel reads the 50 gradient arrays where they are (through its address table, no
copy into the arena, as after any backward); torch reads its ``.grad`` tensors. Effective bandwidth counts 28 bytes per parameter: read param,
grad, exp_avg, exp_avg_sq and write param, exp_avg, exp_avg_sq (4 bytes each).

Two rows, one numbagrad measurement: against torch's ``fused=True`` (its one-kernel CPU
Adam) and against its default (a per-tensor loop on the CPU). Bars: faster than torch
fused, and at least 40 GB/s. The first numbagrad step (JIT compile or cache load, plus
building the arena) is timed apart into ``extra_info["first_call_s"]``.
"""
import numpy as np
import pytest

import _perfkit as kit
from test_bench_clip import _data

TOTAL = sum(g.size for g in _data())
BYTES = 28 * TOTAL

kit._workload("adam_10m_fused", f"Adam step, 50 params, {TOTAL / 1e6:g}M f32 (torch fused=True)", kind="bytes",
              work=BYTES, bar=(("ratio", "<", 1.0), ("gbps", ">=", 40.0)),
              note="28 B/param: 4 reads + 3 writes")
kit._workload("adam_10m_loop", f"Adam step, 50 params, {TOTAL / 1e6:g}M f32 (torch default, for-loop)",
              kind="bytes", work=BYTES, note="same numbagrad run; torch's CPU default")


def _build(framework, fused=False):
    kit.pin_threads()
    gs = _data()
    r = np.random.default_rng(kit.SEED + 2)
    ws = [r.standard_normal(g.shape, dtype=kit.DTYPE) for g in gs]
    if framework == "torch":
        torch = pytest.importorskip("torch")
        ps = [torch.nn.Parameter(torch.from_numpy(w.copy())) for w in ws]
        for p, g in zip(ps, gs):
            p.grad = torch.from_numpy(g.copy())
        opt = torch.optim.Adam(ps, lr=1e-3, fused=True) if fused else torch.optim.Adam(ps, lr=1e-3)
    else:
        import numbagrad as ng
        from numbagrad import nn, optim
        ps = [nn.Parameter(ng.tensor(w.copy())) for w in ws]
        for p, g in zip(ps, gs):
            p.grad = ng.tensor(g.copy())
        opt = optim.Adam(ps, lr=1e-3)

    def step():
        opt.step()
        return ps
    return step, ws, gs


@pytest.mark.benchmark(**kit.bench_mark(max_time=2.0))
@pytest.mark.parametrize("framework", ("numbagrad", "torch_fused", "torch_loop"))
def test_adam_step_10m(benchmark, framework):
    fw = "torch" if framework.startswith("torch") else "numbagrad"
    step, ws, gs = _build(fw, fused=framework == "torch_fused")
    key = "adam_10m_loop" if framework == "torch_loop" else "adam_10m_fused"
    ps = kit.run_benchmark_timing_first(benchmark, key, fw, step, warm=3)
    if fw == "numbagrad":
        res = kit.RESULTS.get(key, {}).get("numbagrad")
        if res is not None:
            kit.record("adam_10m_loop", "numbagrad", res["median"], res["min"], res["rounds"])
    _check_moved_against_gradient(ps, ws, gs)


def _check_moved_against_gradient(ps, ws, gs):
    # not a timing check: with a constant gradient every Adam step moves each weight by
    # about -lr * sign(g), so after all the steps each weight has moved against its sign
    for p, w, g in zip(ps[:3], ws, gs):
        moved = kit.to_numpy(p) - w
        assert np.all(moved * np.sign(g) <= 0)
