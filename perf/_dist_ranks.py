"""Ranks of ``perf/test_bench_distributed.py``; rank 0 prints one line ``PERF_RESULT {json}``.

    python perf/_dist_ranks.py step mlp|gpt ROUNDS            # one process, no MPI: the baseline
    mpiexec -n 2 python perf/_dist_ranks.py step mlp|gpt ROUNDS   # DDP, the same per-rank batch
    mpiexec -n 2 python perf/_dist_ranks.py allreduce ROUNDS [gloo]

``step``: the perf suite's training steps (the MLP 784-512-256-10 of ``_fresh_process_step``
at batch 256, Adam; the tiny GPT of ``test_bench_gpt``, AdamW), one numba thread per rank;
under ``mpiexec -n N`` the model is wrapped in DDP and every rank trains on its own batch
of the same size. A round is ``STEPS`` steps; the result is seconds per step (rank 0's
clock; the ranks are in lock step through the gradient all-reduce).

``allreduce``: 10M float32 gradient values (four parameters of 2.5M) averaged through DDP's
buckets, hooks and end-of-backward wait exactly as a backward pass drives them (fresh
``.grad`` arrays each round, as after ``zero_grad()``), against one raw ``MPI.Allreduce``
of a 10M buffer, rounds interleaved, a barrier before each timed call. ``gloo``: torch's
``all_reduce`` of a 10M tensor over gloo as well (same ranks, TCP on localhost). Two
floors, interleaved with them, both ranks at once and no communication: ``copy``, the
four fresh gradients copied into one 10M buffer (what any bucketed all-reduce of fresh
``.grad`` arrays must do first, torch's DDP too), and ``scale``, a 10M buffer multiplied in
place by ``1/world_size`` (what averaging gradients already in the buckets adds to a sum).
"""
import json
import os
import sys
import time

os.environ.setdefault("NUMBA_NUM_THREADS", "1")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

import _perfkit as kit  # noqa: E402

STEPS = 2 if kit.SMOKE else 5
BATCH = 4 if kit.SMOKE else 256
N_ALLREDUCE = 10_000 if kit.SMOKE else 10_000_000


def _world():
    """(rank, world size, dist module or None): MPI only under a launcher (mpiexec sets PMI_*)."""
    if not any(k.startswith(("PMI_", "HYDRA_", "OMPI_")) for k in os.environ):
        return 0, 1, None
    import numbagrad.distributed as dist
    dist.init_process_group("mpi")
    return dist.get_rank(), dist.get_world_size(), dist


def _mlp_step(ng, wrap):
    import _fresh_process_step as mlp
    x, y = mlp._data(BATCH, kit.MLP_SIZES, 1 + _world_rank)
    ng.manual_seed(0)
    model = wrap(mlp._layers(ng.nn, kit.MLP_SIZES))
    opt = ng.optim.Adam(model.parameters(), lr=1e-3)
    xt, yt = ng.tensor(x), ng.tensor(y)

    def step():
        opt.zero_grad()
        loss = ng.nn.functional.cross_entropy(model(xt), yt)
        loss.backward()
        opt.step()
    return step


def _gpt_step(ng, wrap):
    import test_bench_gpt as g
    rng = np.random.default_rng(1 + _world_rank)
    idx = ng.tensor(rng.integers(0, g.VOCAB, size=(g.BATCH, g.T), dtype=np.int64))
    tgt = ng.tensor(rng.integers(0, g.VOCAB, size=(g.BATCH * g.T,), dtype=np.int64))
    ng.manual_seed(0)
    model = wrap(g.make_gpt(ng, ng.nn, ng.nn.LayerNorm, ng.nn.functional.embedding)())
    opt = ng.optim.AdamW(model.parameters(), lr=1e-3)

    def step():
        opt.zero_grad()
        loss = ng.nn.functional.cross_entropy(model(idx).reshape(-1, g.VOCAB), tgt)
        loss.backward()
        opt.step()
    return step


def run_step(which, rounds, dist):
    import numbagrad as ng
    ng.set_num_threads(1)
    wrap = (lambda m: ng.nn.parallel.DistributedDataParallel(m)) if dist is not None and _world_size > 1 \
        else (lambda m: m)
    step = (_mlp_step if which == "mlp" else _gpt_step)(ng, wrap)
    for _ in range(3):
        step()
    times = []
    for _ in range(rounds):
        if dist is not None:
            dist.barrier()
        t0 = time.perf_counter()
        for _ in range(STEPS):
            step()
        times.append((time.perf_counter() - t0) / STEPS)
    return dict(median=float(np.median(times)), min=float(np.min(times)), rounds=rounds)


def run_allreduce(rounds, dist, gloo):
    import numbagrad as ng
    from numbagrad import nn
    from numbagrad.autograd import engine
    from numbagrad.distributed.process_group import _comm, mpi
    MPI = mpi()
    comm = _comm("perf")
    ng.set_num_threads(1)

    class Flat(nn.Module):
        def __init__(self):
            super().__init__()
            self.ps = nn.ParameterList([nn.Parameter(ng.zeros(N_ALLREDUCE // 4)) for _ in range(4)])

    model = Flat()
    ddp = nn.parallel.DistributedDataParallel(model)
    params = list(model.parameters())
    rng = np.random.default_rng(_world_rank)
    grads = [rng.standard_normal(p.shape).astype(np.float32) for p in params]

    def ddp_sync():
        # what a backward pass does: hooks in backward's order, then the queued callback
        for p, g in zip(params, grads):
            p.grad = ng.Tensor._from_array(g)
        ddp.__dict__["_sync_pass"] = True
        callbacks = []
        engine._CALLBACKS.append(callbacks)
        try:
            for p in reversed(params):
                for h in engine._POST_HOOKS[id(p)][1]:
                    h(p)
        finally:
            engine._CALLBACKS.pop()
        for cb in callbacks:
            cb()

    raw = np.empty(N_ALLREDUCE, np.float32)
    ddp_sync()
    # correctness of what was timed: the average over ranks of every rank's gradients
    every = [np.random.default_rng(r).standard_normal(params[0].shape).astype(np.float32) for r in range(_world_size)]
    assert np.allclose(params[0].grad.numpy(), np.mean(every, axis=0), rtol=1e-5, atol=1e-6)
    tg = None
    if gloo:
        import torch
        import torch.distributed as tdist
        tdist.init_process_group("gloo", init_method="tcp://127.0.0.1:29517", rank=_world_rank,
                                 world_size=_world_size)
        tg = torch.zeros(N_ALLREDUCE)
    out = {"ddp": [], "raw": [], "gloo": [], "copy": [], "scale": []}
    scale = np.float32(1.0 / _world_size)
    for _ in range(rounds):
        for kind in out:
            if kind == "gloo" and tg is None:
                continue
            raw[...] = 1.0
            comm.Barrier()
            t0 = time.perf_counter()
            if kind == "ddp":
                ddp_sync()
            elif kind == "raw":
                comm.Allreduce(MPI.IN_PLACE, raw, op=MPI.SUM)
            elif kind == "copy":
                lo = 0
                for g in grads:
                    np.copyto(raw[lo:lo + g.size], g)
                    lo += g.size
            elif kind == "scale":
                np.multiply(raw, scale, out=raw)
            else:
                tdist.all_reduce(tg)
            out[kind].append(time.perf_counter() - t0)
    if tg is not None:
        tdist.destroy_process_group()
    return {k: dict(median=float(np.median(v)), min=float(np.min(v)), rounds=len(v)) for k, v in out.items() if v}


if __name__ == "__main__":
    mode = sys.argv[1]
    _world_rank, _world_size, _dist = _world()
    if mode == "step":
        result = run_step(sys.argv[2], int(sys.argv[3]), _dist)
    else:
        result = run_allreduce(int(sys.argv[2]), _dist, len(sys.argv) > 3 and sys.argv[3] == "gloo")
    result["world_size"] = _world_size
    if _world_rank == 0:
        print("PERF_RESULT " + json.dumps(result), flush=True)
