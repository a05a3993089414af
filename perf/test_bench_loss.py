"""Loss steps: forward + backward of ``ctc_loss`` on ``(T, N, C)`` float32 log-probabilities
(T=100, N=32, C=28, S=20 padded targets, full input and target lengths) and of
``cross_entropy`` on a ``(4096, 1000)`` float32 logit batch, numbagrad vs torch on the same
data, threads pinned alike.

Bars: numbagrad <= 1x torch for both. The first numbagrad call (JIT compile or cache load of
the kernels) is timed separately and stored in the benchmark's ``extra_info`` as
``first_call_s``; it is not part of the steady-state figure.
"""
import numpy as np
import pytest

import _perfkit as kit

if kit.SMOKE:
    CTC_T, CTC_N, CTC_C, CTC_S = 10, 2, 5, 3
    CE_SHAPE = (8, 10)
else:
    CTC_T, CTC_N, CTC_C, CTC_S = 100, 32, 28, 20
    CE_SHAPE = (4096, 1000)

kit._workload("ctc_loss_fwd_bwd", f"ctc_loss fwd+bwd T={CTC_T} N={CTC_N} C={CTC_C} S={CTC_S}",
              bar=("ratio", "<=", 1.0),
              note="float32 log_softmax outputs, padded targets, reduction='mean', grad w.r.t. log_probs")
kit._workload("cross_entropy_fwd_bwd", f"cross_entropy fwd+bwd ({CE_SHAPE[0]}, {CE_SHAPE[1]}) f32",
              bar=("ratio", "<=", 1.0), note="class-index targets, reduction='mean', grad w.r.t. logits")


def _ctc_data():
    rng = np.random.default_rng(kit.SEED)
    x = rng.standard_normal((CTC_T, CTC_N, CTC_C)).astype(np.float64)
    lp = (x - np.log(np.exp(x).sum(-1, keepdims=True))).astype(kit.DTYPE)
    tg = rng.integers(1, CTC_C, (CTC_N, CTC_S)).astype(np.int64)
    il = np.full(CTC_N, CTC_T, np.int64)
    tl = np.full(CTC_N, CTC_S, np.int64)
    return lp, tg, il, tl


def _ce_data():
    rng = np.random.default_rng(kit.SEED)
    x = rng.standard_normal(CE_SHAPE, dtype=kit.DTYPE)
    t = rng.integers(0, CE_SHAPE[1], CE_SHAPE[0]).astype(np.int64)
    return x, t


def _grad_step(xt, loss):
    """The benchmarked step: clear ``xt.grad``, backward ``loss(xt)``, return the gradient."""
    def step():
        xt.grad = None
        loss(xt).backward()
        return xt.grad
    return step


def _build_ctc(framework):
    kit.pin_threads()
    lp, tg, il, tl = _ctc_data()
    if framework == "torch":
        torch = pytest.importorskip("torch")
        tgt, ilt, tlt = torch.from_numpy(tg), torch.from_numpy(il), torch.from_numpy(tl)
        return _grad_step(torch.from_numpy(lp).requires_grad_(True),
                          lambda xt: torch.nn.functional.ctc_loss(xt, tgt, ilt, tlt))
    import numbagrad as ng
    from numbagrad.nn.loss_ctc import ctc_loss
    return _grad_step(ng.tensor(lp, requires_grad=True), lambda xt: ctc_loss(xt, tg, il, tl))


def _build_ce(framework):
    kit.pin_threads()
    x, t = _ce_data()
    if framework == "torch":
        torch = pytest.importorskip("torch")
        tt = torch.from_numpy(t)
        return _grad_step(torch.from_numpy(x).requires_grad_(True),
                          lambda xt: torch.nn.functional.cross_entropy(xt, tt))
    import numbagrad as ng
    from numbagrad.nn.functional import cross_entropy
    tt = ng.tensor(t)
    return _grad_step(ng.tensor(x, requires_grad=True), lambda xt: cross_entropy(xt, tt))


@pytest.mark.benchmark(**kit.bench_mark(max_time=1.5))
@pytest.mark.parametrize("framework", ("numbagrad", "torch"))
def test_ctc_loss_fwd_bwd(benchmark, framework):
    step = _build_ctc(framework)
    grad = kit.run_benchmark_timing_first(benchmark, "ctc_loss_fwd_bwd", framework, step, warm=3)
    # not a timing check: for log_softmax inputs every gradient row sums to 0
    # (alignment posteriors and exp(log_probs) both sum to 1 over the classes)
    g = kit.to_numpy(grad)
    assert g.shape == (CTC_T, CTC_N, CTC_C) and np.isfinite(g).all()
    np.testing.assert_allclose(g.sum(-1), 0.0, atol=1e-5)


@pytest.mark.benchmark(**kit.bench_mark(max_time=1.5))
@pytest.mark.parametrize("framework", ("numbagrad", "torch"))
def test_cross_entropy_fwd_bwd(benchmark, framework):
    step = _build_ce(framework)
    grad = kit.run_benchmark_timing_first(benchmark, "cross_entropy_fwd_bwd", framework, step, warm=3)
    # not a timing check: (softmax - onehot) / N rows sum to 0, the target column is negative
    x, t = _ce_data()
    g = kit.to_numpy(grad)
    assert g.shape == x.shape
    np.testing.assert_allclose(g.sum(1), 0.0, atol=1e-6)
    assert (g[np.arange(len(t)), t] < 0).all()
