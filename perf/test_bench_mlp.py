"""One training step of an MLP (784-512-256-10, float32): forward, cross_entropy,
backward, Adam step -- numbagrad vs torch on the same data, threads pinned alike.

Bars from the issue: batch 128 <= 1.5x torch, batch 32 <= 2x torch. The workload itself
lives in ``_fresh_process_step.build`` so the fresh-process benchmark times the same step.
"""
import pytest

import _fresh_process_step as mlp
import _perfkit as kit


def _build(framework, batch):
    if framework == "torch":
        pytest.importorskip("torch")
    try:
        return mlp.build(framework, batch, kit.MLP_SIZES, seed=kit.SEED, threads=kit.THREADS)
    except mlp.Unavailable as exc:
        pytest.skip(str(exc))


@pytest.mark.benchmark(**kit.bench_mark(max_time=1.5))
@pytest.mark.parametrize("framework", ("numbagrad", "torch"))
@pytest.mark.parametrize("batch", kit.MLP_BATCHES)
def test_mlp_train_step(benchmark, framework, batch):
    kit.run_training_benchmark(benchmark, f"mlp_b{batch}", framework, _build(framework, batch), warm=5, slack=1e-3)
