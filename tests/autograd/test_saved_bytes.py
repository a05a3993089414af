"""Saved-activation accounting (``numbagrad/autograd/saved.py``, ``ng.memory_stats()``) when the
parameters live in an optimizer's flat arena: a saved array is counted by its root buffer,
and parameters, their views (LayerNorm's flattened weight, ``w.t()``) and the arena they
share are not activations. Expected sizes are computed from the shapes with NumPy, and the
count is checked against what ``tracemalloc`` sees the forward keep."""
import tracemalloc

import numpy as np

import numbagrad as ng
from numbagrad import nn
from numbagrad.autograd.saved import _root

N, D, H = 64, 384, 256


def _model_in_arena():
    """Linear(D, H) -> LayerNorm(H) whose parameters an AdamW step moved into its arena."""
    ng.manual_seed(0)
    m = nn.Sequential(nn.Linear(D, H), nn.LayerNorm(H))
    opt = ng.optim.AdamW(m.parameters(), lr=1e-3)
    m(ng.randn(N, D)).sum().backward()
    opt.step()
    roots = {id(_root(p.array)) for p in m.parameters()}
    arena = _root(next(m.parameters()).array)
    assert len(roots) == 1 and arena.nbytes >= sum(p.numel() * 4 for p in m.parameters())  # one arena
    return m, opt, arena


def _saved_by(fn):
    before = ng.memory_stats()["saved_bytes"]
    out = fn()
    return out, ng.memory_stats()["saved_bytes"] - before


def test_parameters_in_an_arena_and_their_views_are_not_activations():
    m, opt, arena = _model_in_arena()
    x = ng.randn(N, D)
    f32 = np.dtype(np.float32).itemsize
    # Linear saves its input (and its weight: not counted); LayerNorm saves its input, the
    # per-row mean and rstd (and the flattened weight, a view of the arena: not counted)
    expect = x.numpy().nbytes + np.empty((N, H), np.float32).nbytes + 2 * N * f32
    base = ng.memory_stats()["saved_bytes"]
    y, saved = _saved_by(lambda: m(x))
    assert saved == expect, (saved, expect, arena.nbytes)
    y.sum().backward()
    assert ng.memory_stats()["saved_bytes"] == base          # all released after backward

    # a view an op makes of a parameter (w.t()) is the parameter's memory too; x is counted once
    w = m[0].weight
    y, saved = _saved_by(lambda: x.matmul(w.t()) + x.matmul(w.t()))
    assert saved == x.numpy().nbytes
    del y
    assert ng.memory_stats()["saved_bytes"] == base

    # a copy of a parameter (not its storage) is an activation again
    y, saved = _saved_by(lambda: x.matmul(w.t().clone()))
    assert saved == x.numpy().nbytes + w.numel() * f32
    del y
    assert ng.memory_stats()["saved_bytes"] == base


def test_saved_bytes_agree_with_tracemalloc_when_params_are_in_an_arena():
    """What stays allocated after the forward (the graph's saved arrays) is what
    ``saved_bytes`` reports; counting the arena would overshoot by its size."""
    m, opt, arena = _model_in_arena()
    run = lambda: m(ng.randn(N, D)).sum()  # noqa: E731
    run()                                  # warm-up: kernels compiled, work buffers allocated
    before = ng.memory_stats()["saved_bytes"]
    tracemalloc.start()
    y = run()
    held, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    saved = ng.memory_stats()["saved_bytes"] - before
    assert arena.nbytes > 0.5 * saved                      # the check can tell the arena apart
    assert saved > 0 and abs(held - saved) <= 0.05 * saved + 64 * 1024, (held, saved, arena.nbytes)
    del y
    assert ng.memory_stats()["saved_bytes"] == before
