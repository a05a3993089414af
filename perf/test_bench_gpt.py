"""One training step of a tiny character-level GPT (float32): forward, cross_entropy over
every position, backward, AdamW -- numbagrad vs an identical torch model in the same run.

The model (one definition, :func:`make_gpt`, built with either framework's ``nn``)::

    token Embedding(65, 128) + learned positional Embedding(64, 128)
    2 x TransformerEncoderLayer(128, 4 heads, dim_feedforward=512, GELU, dropout=0,
                                batch_first=True, norm_first=True)   # pre-norm blocks,
                                causal self-attention (the causal mask + is_causal hint)
    LayerNorm(128) - Linear(128, 65)

Batch 16, T = 64. The numbagrad model loads the torch model's state dict, so both start
from the same weights (the first losses agree to 1e-6). Bar from issue 4: <= 1.5x torch
(torch ~41 ms here).

Measured while 4-6 other jobs shared the 2 cores, so wall-clock medians with 2 threads
swung from 0.4x to 11x between runs (a descheduled BLAS thread stalls every GEMM). The
stable figure was CPU time per step with one thread each (``time.process_time``, median
of 30): torch 39 ms, numbagrad 43 ms. Where numbagrad's 43 ms go (cProfile, same
setting): Linear GEMMs 19.6 ms; exact GELU forward + backward 7.3 ms (its erf is a
scalar loop; torch's vectorised GELU takes ~3 ms for the same two calls); attention
5.8 ms (two layers, fused core forward + backward); bias/residual adds 2.6 ms; LayerNorm
1.7 ms; AdamW 1 ms; autograd engine 0.6 ms.
"""
import numpy as np
import pytest

import _perfkit as kit

VOCAB = 65
if kit.SMOKE:
    D, HEADS, LAYERS, T, BATCH = 16, 2, 1, 8, 2
else:
    D, HEADS, LAYERS, T, BATCH = 128, 4, 2, 64, 16
kit._workload("tiny_gpt_step", f"tiny GPT d{D} {LAYERS}x{HEADS}h T{T} train step b{BATCH}",
              bar=("ratio", "<=", 1.5), note="emb + pre-norm causal blocks + LN + head, cross_entropy, AdamW")


def make_gpt(fw, nn, layer_norm, embedding):
    """The GPT module class of framework ``fw`` (``torch`` or ``numbagrad``)."""

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Parameter(fw.randn(VOCAB, D) * 0.02)
            self.wpe = nn.Parameter(fw.randn(T, D) * 0.02)
            self.blocks = nn.ModuleList([
                nn.TransformerEncoderLayer(D, HEADS, dim_feedforward=4 * D, dropout=0.0, activation="gelu",
                                           batch_first=True, norm_first=True) for _ in range(LAYERS)])
            self.ln_f = layer_norm(D)
            self.head = nn.Linear(D, VOCAB)
            self.register_buffer("mask", fw.tensor(np.triu(np.full((T, T), -np.inf, np.float32), 1)))
            self.register_buffer("pos", fw.tensor(np.arange(T, dtype=np.int64)))

        def forward(self, idx):
            x = embedding(idx, self.wte) + embedding(self.pos, self.wpe)
            for b in self.blocks:
                x = b(x, src_mask=self.mask, is_causal=True)
            return self.head(self.ln_f(x))

    return GPT


def build(framework, seed=kit.SEED):
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, VOCAB, size=(BATCH, T), dtype=np.int64)
    tgt = rng.integers(0, VOCAB, size=(BATCH * T,), dtype=np.int64)
    try:
        import torch
    except ImportError:
        torch = None
    if torch is None and framework == "torch":
        pytest.skip("torch is not installed")
    tmodel = None
    if torch is not None:  # the numbagrad model starts from torch's weights
        torch.set_num_threads(kit.THREADS)
        torch.manual_seed(seed)
        tmodel = make_gpt(torch, torch.nn, torch.nn.LayerNorm, torch.nn.functional.embedding)()
    if framework == "torch":
        fw, model, xt, yt = torch, tmodel, torch.from_numpy(idx), torch.from_numpy(tgt)
    else:
        import numbagrad as fw
        fw.manual_seed(seed)
        model = make_gpt(fw, fw.nn, fw.nn.LayerNorm, fw.nn.functional.embedding)()
        if tmodel is not None:
            model.load_state_dict({k: v.detach().numpy() for k, v in tmodel.state_dict().items()})
        xt, yt = fw.tensor(idx), fw.tensor(tgt)
    opt = fw.optim.AdamW(model.parameters(), lr=1e-3)
    cross_entropy = fw.nn.functional.cross_entropy

    def step():
        opt.zero_grad()
        loss = cross_entropy(model(xt).reshape(-1, VOCAB), yt)
        loss.backward()
        opt.step()
        return loss

    return step


@pytest.mark.benchmark(**kit.bench_mark(max_time=2.0))
@pytest.mark.parametrize("framework", ("numbagrad", "torch"))
def test_tiny_gpt_train_step(benchmark, framework):
    step = build(framework)
    first = float(step().item())
    kit.run_benchmark(benchmark, "tiny_gpt_step", framework, step, warm=3)
    last = float(step().item())
    # not a timing check: the step must really train (a fixed batch is memorised)
    assert last == last and last < first, (first, last)
