"""One training step of a one-layer LSTM classifier (float32): LSTM 64->128 over T=50
steps at batch 32, a linear head 128->10 on the last step's output, cross_entropy,
backward, Adam -- numbagrad vs torch on the same data, threads pinned alike.

Bar from the issue: <= 1.2x torch. numbagrad's LSTM layer is one autograd node: one GEMM
for the input projection of all 50 steps, then per step one GEMM ``h @ W_hh^T`` into a
preallocated buffer plus the fused cell kernel; backward one GEMM and one fused kernel
per step, then single GEMMs for dW_hh, dW_ih (and dx, skipped here: the data needs no
gradient). Smoke mode (``NUMBAGRAD_PERF_SMOKE=1``) shrinks it to T=4, batch 4, 8->16.
"""

import numpy as np
import pytest

import _perfkit as kit

if kit.SMOKE:
    T, B, N_IN, HIDDEN, N_OUT = 4, 4, 8, 16, 10
else:
    T, B, N_IN, HIDDEN, N_OUT = 50, 32, 64, 128, 10
KEY = "lstm_step"
kit._workload(KEY, f"LSTM {N_IN}->{HIDDEN} T={T} b{B} + linear head, train step", bar=("ratio", "<=", 1.2),
              note="fwd + head(last step) + cross_entropy + bwd + Adam")


def _data(seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((T, B, N_IN)).astype(np.float32)
    y = rng.integers(0, N_OUT, size=B).astype(np.int64)
    return x, y


def _build(framework):
    x, y = _data(kit.SEED)
    kit.pin_threads()
    if framework == "torch":
        torch = pytest.importorskip("torch")
        nn = torch.nn
        torch.manual_seed(kit.SEED)
        lstm, head = nn.LSTM(N_IN, HIDDEN), nn.Linear(HIDDEN, N_OUT)
        params = list(lstm.parameters()) + list(head.parameters())
        opt = torch.optim.Adam(params, lr=1e-3)
        xt, yt = torch.from_numpy(x), torch.from_numpy(y)
        ce = torch.nn.functional.cross_entropy
    else:
        import numbagrad as ng
        from numbagrad.nn import Linear
        from numbagrad.nn.rnn import LSTM
        ng.manual_seed(kit.SEED)
        lstm, head = LSTM(N_IN, HIDDEN), Linear(HIDDEN, N_OUT)
        params = list(lstm.parameters()) + list(head.parameters())
        opt = ng.optim.Adam(params, lr=1e-3)
        xt, yt = ng.tensor(x), ng.tensor(y)
        ce = ng.nn.functional.cross_entropy

    def step():
        opt.zero_grad()
        out, _ = lstm(xt)
        loss = ce(head(out[-1]), yt)
        loss.backward()
        opt.step()
        return loss

    return step


@pytest.mark.benchmark(**kit.bench_mark(max_time=2.0))
@pytest.mark.parametrize("framework", ("numbagrad", "torch"))
def test_lstm_train_step(benchmark, framework):
    kit.run_training_benchmark(benchmark, KEY, framework, _build(framework), warm=5, slack=1e-3)
