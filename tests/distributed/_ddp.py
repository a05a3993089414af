"""Run under ``mpiexec -n N`` by test_ddp.py: DistributedDataParallel and SyncBatchNorm
against one process on the whole batch (each rank computes that reference itself,
without communication). Any failed check raises, which aborts the job (non-zero exit)."""
import sys

import numpy as np

import numbagrad as ng
import numbagrad.distributed as dist
from numbagrad import nn
from numbagrad.nn.parallel import DistributedDataParallel as DDP

ng.set_num_threads(1)
dist.init_process_group(backend="mpi")
R, W = dist.get_rank(), dist.get_world_size()
B = 4 * W * 3            # global batch, divisible by the world size


def mlp(seed, bn=False):
    ng.manual_seed(seed)
    layers = [nn.Linear(6, 16), nn.Tanh()]
    if bn:
        layers.append(nn.BatchNorm1d(16))
    layers += [nn.Linear(16, 8), nn.ReLU(), nn.Linear(8, 3)]
    return nn.Sequential(*layers)


def data(step, n=B):
    rng = np.random.default_rng(100 + step)
    return (ng.tensor(rng.standard_normal((n, 6)).astype(np.float32)),
            ng.tensor(rng.integers(0, 3, n)))


def close(a, b, what, rtol=2e-5, atol=2e-6):
    a = a.detach().numpy() if isinstance(a, ng.Tensor) else np.asarray(a)
    b = b.detach().numpy() if isinstance(b, ng.Tensor) else np.asarray(b)
    if not np.allclose(a, b, rtol=rtol, atol=atol):
        raise AssertionError(f"rank {R}: {what}: max abs diff {np.abs(a - b).max()}")


def train(opt_name, accumulate, distributed, set_to_none, bn=False, steps=4, cap=None):
    """Params after ``steps`` optimizer steps; each step is ``accumulate`` micro-batches of
    the global batch B (the distributed run takes its rank's contiguous share of each)."""
    model = mlp(1, bn)
    if distributed:
        if R != 0:                        # different initial values: DDP broadcasts rank 0's
            for p in model.parameters():
                p.array[...] = 7.0
        if bn:
            model = nn.SyncBatchNorm.convert_sync_batchnorm(model)
        net = DDP(model, bucket_cap_mb=cap) if cap else DDP(model)
    else:
        net = model
    opt = (ng.optim.SGD(net.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-3) if opt_name == "sgd"
           else ng.optim.Adam(net.parameters(), lr=1e-2))
    loss_fn = nn.CrossEntropyLoss()
    per = B // W
    for step in range(steps):
        opt.zero_grad(set_to_none=set_to_none)
        for k in range(accumulate):
            x, y = data(step * 10 + k)
            if distributed:
                x, y = x[R * per:(R + 1) * per], y[R * per:(R + 1) * per]
            last = k == accumulate - 1
            if distributed and not last:
                with net.no_sync():
                    loss = loss_fn(net(x), y) / accumulate
                    loss.backward()
            else:
                loss = loss_fn(net(x), y) / accumulate
                loss.backward()
        opt.step()
    return {n.removeprefix("module."): p.detach().numpy().copy() for n, p in net.named_parameters()}, net


# ---- parity: SGD and Adam, with and without no_sync accumulation, both zero_grad modes ---------
for opt_name in ("sgd", "adam"):
    for accumulate in (1, 3):
        for set_to_none in (True, False):
            ref, _ = train(opt_name, accumulate, False, set_to_none)
            got, net = train(opt_name, accumulate, True, set_to_none, cap=0.0005 if accumulate == 3 else None)
            for n in ref:
                close(got[n], ref[n], f"{opt_name} accumulate={accumulate} set_to_none={set_to_none} {n}")
assert len(net._buckets) > 1, "a small bucket_cap_mb gives several buckets"
assert list(net.state_dict())[0].startswith("module."), list(net.state_dict())
assert net.module is not None and isinstance(net.module, nn.Sequential)

# every rank ends with the same parameters, bit for bit
for n, p in net.named_parameters():
    mine = p.detach().numpy().copy()
    rank0 = ng.tensor(mine.copy())
    dist.broadcast(rank0, 0)
    assert np.array_equal(rank0.numpy(), mine), (R, n)

# ---- SyncBatchNorm: forward, gradients and running statistics of the global batch ----------------
ng.manual_seed(3)
bn_ref = nn.BatchNorm2d(5, momentum=0.3)
bn_ref.weight.array[...] = np.linspace(0.5, 2.0, 5)
bn_ref.bias.array[...] = np.linspace(-1.0, 1.0, 5)
sync = nn.SyncBatchNorm.convert_sync_batchnorm(nn.Sequential(nn.BatchNorm2d(5, momentum=0.3)))[0]
sync.load_state_dict(bn_ref.state_dict())
assert isinstance(sync, nn.SyncBatchNorm)
rng = np.random.default_rng(5)
for it in range(2):
    xg = (rng.standard_normal((2 * W, 5, 3, 4)) * 3 + 1).astype(np.float32)
    wg = rng.standard_normal(xg.shape).astype(np.float32)
    x_ref = ng.tensor(xg, requires_grad=True)
    (bn_ref(x_ref) * ng.tensor(wg)).sum().backward()
    x_loc = ng.tensor(xg[2 * R:2 * R + 2].copy(), requires_grad=True)
    out = sync(x_loc)
    (out * ng.tensor(wg[2 * R:2 * R + 2])).sum().backward()
    close(x_loc.grad, x_ref.grad.numpy()[2 * R:2 * R + 2], "SyncBatchNorm input grad", rtol=1e-4, atol=1e-5)
    for name in ("weight", "bias"):
        g = getattr(sync, name).grad
        dist.all_reduce(g)               # local sums; their total is the global batch's
        close(g, getattr(bn_ref, name).grad, f"SyncBatchNorm {name} grad", rtol=1e-4, atol=1e-4)
        getattr(sync, name).grad = None
        getattr(bn_ref, name).grad = None
    close(sync.running_mean, bn_ref.running_mean, "running_mean", rtol=1e-5, atol=1e-6)
    close(sync.running_var, bn_ref.running_var, "running_var", rtol=1e-5, atol=1e-6)
# forward values: the global batch's statistics
bn_ref.train()
sync.train()
xg = rng.standard_normal((2 * W, 5, 2, 2)).astype(np.float32)
close(sync(ng.tensor(xg[2 * R:2 * R + 2])), bn_ref(ng.tensor(xg)).detach().numpy()[2 * R:2 * R + 2],
      "SyncBatchNorm forward", rtol=1e-4, atol=1e-5)
sync.eval()
bn_ref.eval()
close(sync(ng.tensor(xg[2 * R:2 * R + 2])), bn_ref(ng.tensor(xg[2 * R:2 * R + 2])), "SyncBatchNorm eval")

# DDP + SyncBatchNorm training equals BatchNorm on the whole batch
ref, _ = train("sgd", 1, False, True, bn=True)
got, net = train("sgd", 1, True, True, bn=True)
for n in ref:
    close(got[n], ref[n], f"DDP+SyncBatchNorm {n}", rtol=1e-4, atol=1e-5)

# ---- a parameter used on one rank only gets the average; one no rank used keeps .grad None -------
class TwoHeads(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(3, 2)
        self.b = nn.Linear(3, 2)
        self.never = nn.Linear(3, 2)

    def forward(self, x, use_b):
        return self.a(x) + (self.b(x) if use_b else 0)


ng.manual_seed(0)
m = TwoHeads()
ddp = DDP(m, find_unused_parameters=True)
x = ng.ones(4, 3)
ddp(x, R == 0).sum().backward()
gb = m.b.weight.grad.numpy()
close(gb, np.full((2, 3), 4.0 / W), "unused-on-some-ranks parameter: the average over ranks")
assert m.never.weight.grad is None
close(m.a.weight.grad, np.full((2, 3), 4.0), "used parameter")

# ---- architecture mismatch: every rank raises, naming the difference -----------------------------
bad = nn.Sequential(nn.Linear(4, 5 if R == W - 1 else 6), nn.Linear(5 if R == W - 1 else 6, 2))
try:
    DDP(bad)
except RuntimeError as e:
    msg = str(e)
    assert "0.weight" in msg and f"rank {W - 1} vs rank 0" in msg and "different" in msg, msg
else:
    raise AssertionError(f"rank {R}: DDP on different architectures did not raise")
extra = nn.Sequential(nn.Linear(4, 4), *([nn.Linear(4, 4)] if R == 1 else []))
try:
    DDP(extra)
except RuntimeError as e:
    assert "extra 1.weight, 1.bias" in str(e), str(e)
else:
    raise AssertionError("an extra layer on one rank did not raise")

# ---- bfloat16 parameters: reduced in float32 buckets, .grad rounded back once ---------------------
def bf16_grads(r_slices, distributed):
    ng.manual_seed(4)
    m = nn.Sequential(nn.Linear(6, 5), nn.Tanh(), nn.Linear(5, 3)).to(ng.bfloat16)
    net = DDP(m) if distributed else m
    x, y = data(99)
    per = B // W
    grads = []
    for r in r_slices:
        net.zero_grad()
        nn.CrossEntropyLoss()(net(x[r * per:(r + 1) * per].to(ng.bfloat16)), y[r * per:(r + 1) * per]).backward()
        assert all(p.grad.dtype == ng.bfloat16 for p in m.parameters())
        grads.append([p.grad.float().numpy().copy() for p in m.parameters()])
    return grads


local = bf16_grads(range(W), False)                  # every rank's local gradients, computed here
want = [np.mean([g[i] for g in local], axis=0) for i in range(len(local[0]))]
got = bf16_grads([R], True)[0]
for a, b in zip(got, want):
    close(a, b, "bfloat16 DDP gradient", rtol=1e-2, atol=1e-3)

# ---- buffers are broadcast from rank 0 --------------------------------------------------------------
bnm = nn.Sequential(nn.Linear(2, 3), nn.BatchNorm1d(3))
bnm[1].running_mean.array[...] = R + 1.0
ddp = DDP(bnm)
close(bnm[1].running_mean, np.ones(3), "buffers broadcast at wrap")
dist.barrier()
dist.destroy_process_group()
assert not dist.is_initialized()
print(f"OK rank {R} of {W}", flush=True)
sys.exit(0)
