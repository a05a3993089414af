"""Gradient clipping: ``clip_grad_norm_(params, max_norm)`` over 50 float32 gradients of varied
sizes totalling 10M elements, numbagrad vs torch on the same data, threads pinned alike.

Two rows: the gradients as 50 separate arrays (numbagrad's address table is rebuilt every
call, as for fresh gradients after ``zero_grad(set_to_none=True)``), and numbagrad's
gradients after an optimizer step has copied them into its flat arena (one span; torch,
which has no arena, runs the same separate-tensor call there). A step reads float32
C-contiguous gradients where they are, so the setup hands the optimizer float64 copies of
the same values, which it casts into its float32 slots (exactly) and rebinds ``p.grad`` to;
gradients kept there stay there (``zero_grad(set_to_none=False)`` then backward). Every call really scales: the
``max_norm`` passed shrinks by 0.1% a call, so the clip coefficient stays below 1 (numbagrad
skips the pass when it is exactly 1) and the values stay far from subnormals.

Bar: numbagrad <= 1x torch. The first numbagrad call (JIT compile or cache load) is timed
separately into ``extra_info["first_call_s"]``.
"""
import numpy as np
import pytest

import _perfkit as kit

N_GRADS = 50
TOTAL = 50_000 if kit.SMOKE else 10_000_000

kit._workload("clip_grad_norm_50", f"clip_grad_norm_ 50 grads, {TOTAL / 1e6:g}M f32 total, separate arrays",
              bar=("ratio", "<=", 1.0),
              note="norm over all + scale all; sizes varied")
kit._workload("clip_grad_norm_50_arena", "clip_grad_norm_ 50 grads, same, numbagrad grads in the optimizer arena",
              bar=("ratio", "<=", 1.0), note="after an optimizer step (one flat span); torch: separate tensors")


def _sizes():
    r = np.random.default_rng(kit.SEED)
    w = r.lognormal(0.0, 1.5, N_GRADS)
    s = np.maximum(1, np.floor(w / w.sum() * TOTAL)).astype(np.int64)
    s[np.argmax(s)] += TOTAL - s.sum()
    return [int(v) for v in s]


def _data():
    r = np.random.default_rng(kit.SEED + 1)
    return [r.standard_normal(n, dtype=kit.DTYPE) for n in _sizes()]


def _ref_norm(gs):
    return float(np.sqrt(sum(np.dot(g.astype(np.float64), g.astype(np.float64)) for g in gs)))


def _build(framework, arena):
    kit.pin_threads()
    gs = _data()
    state = {"max_norm": 0.5 * _ref_norm(gs)}
    if framework == "torch":
        torch = pytest.importorskip("torch")
        ps = [torch.nn.Parameter(torch.zeros(g.shape)) for g in gs]
        for p, g in zip(ps, gs):
            p.grad = torch.from_numpy(g.copy())
        clip = torch.nn.utils.clip_grad_norm_
        fresh = None
    else:
        import numbagrad as ng
        from numbagrad import nn, optim
        from numbagrad.kernels.cpu import clip as kclip
        from numbagrad.nn.utils import clip_grad_norm_ as clip
        ps = [nn.Parameter(ng.tensor(np.zeros_like(g))) for g in gs]
        for p, g in zip(ps, gs):
            # arena: another dtype, which the optimizer's step casts into its float32 arena
            p.grad = ng.tensor(g.astype(np.float64) if arena else g.copy())
        if arena:
            optim.SGD(ps, lr=0.0).step()      # gradients now live in the flat arena
            base = ps[0].grad.array.base
            assert base is not None and all(p.grad.array.base is base for p in ps)
            fresh = None
        else:
            fresh = kclip._TABLES          # cleared each call: tables rebuilt, as for fresh arrays

    def step():
        if fresh is not None:
            fresh.clear()
        m = state["max_norm"]
        state["max_norm"] = m * 0.999
        return clip(ps, m)
    return step, gs


def _bench(benchmark, key, framework, arena):
    step, gs = _build(framework, arena)
    ref = _ref_norm(gs)
    total = kit.run_benchmark_timing_first(benchmark, key, framework, step, warm=3)
    # not a timing check: the first call returned the norm of the original gradients
    np.testing.assert_allclose(float(total.item()), ref, rtol=1e-4)


@pytest.mark.benchmark(**kit.bench_mark(max_time=1.5))
@pytest.mark.parametrize("framework", ("numbagrad", "torch"))
def test_clip_grad_norm_separate(benchmark, framework):
    _bench(benchmark, "clip_grad_norm_50", framework, arena=False)


@pytest.mark.benchmark(**kit.bench_mark(max_time=1.5))
@pytest.mark.parametrize("framework", ("numbagrad", "torch"))
def test_clip_grad_norm_arena(benchmark, framework):
    _bench(benchmark, "clip_grad_norm_50_arena", framework, arena=True)
