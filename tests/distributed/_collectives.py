"""Run under ``mpiexec -n N`` by test_collectives.py: every collective against NumPy on
rank-dependent inputs that every rank can recompute. Any failed check raises, which
aborts the job (non-zero exit)."""
import numpy as np

import numbagrad as ng
import numbagrad.distributed as dist
from numbagrad.distributed import ReduceOp

ng.set_num_threads(1)
assert dist.is_available() and not dist.is_initialized()
dist.init_process_group()
R, W = dist.get_rank(), dist.get_world_size()
assert dist.is_initialized() and dist.get_backend() == "mpi"


def value(r, shape, dtype, salt=0):
    """What rank ``r`` contributes: distinct per rank, exactly representable."""
    rng = np.random.default_rng(1000 * salt + r)
    if np.dtype(dtype) == np.bool_:
        return rng.integers(0, 2, shape).astype(bool)
    if np.dtype(dtype).kind in "iu":
        return rng.integers(1, 5, shape).astype(dtype)
    return (rng.integers(-8, 9, shape) / 4).astype(dtype)


def equal(t, expected, what, exact=True):
    got = t.detach().numpy() if isinstance(t, ng.Tensor) else t
    if got.dtype == ng.bfloat16:
        got = got.astype(np.float32)
    ok = np.array_equal(got, expected) if exact else np.allclose(got, expected, rtol=1e-6, atol=1e-6)
    assert ok and got.shape == np.shape(expected), f"rank {R}: {what}: got {got} expected {expected}"


REF = {ReduceOp.SUM: np.sum, ReduceOp.AVG: np.mean, ReduceOp.MAX: np.max, ReduceOp.MIN: np.min,
       ReduceOp.PRODUCT: np.prod}

# ---- all_reduce: every op, dtypes, layouts, async -------------------------------------------------
for dtype in (np.float32, np.float64, np.int64, np.int32):
    for op, ref in REF.items():
        if op == ReduceOp.AVG and np.dtype(dtype).kind == "i":
            continue
        every = np.stack([value(r, (3, 4), dtype, 1) for r in range(W)])
        t = ng.tensor(value(R, (3, 4), dtype, 1))
        v0 = t._version.value
        dist.all_reduce(t, op=op)
        equal(t, ref(every, axis=0).astype(dtype), f"all_reduce {op} {np.dtype(dtype)}", exact=op != ReduceOp.AVG)
        assert t._version.value > v0
# non-contiguous (a transposed view) is reduced and written back into the viewed memory
base = ng.tensor(value(R, (4, 3), np.float32, 2))
view = base.t()
dist.all_reduce(view, op=ReduceOp.MAX)
equal(base, np.max([value(r, (4, 3), np.float32, 2) for r in range(W)], axis=0), "all_reduce of a transposed view")
# bfloat16: reduced in float32, rounded once
b16 = ng.tensor(value(R, (5,), np.float32, 3)).to(ng.bfloat16)
dist.all_reduce(b16)
assert b16.dtype == ng.bfloat16
equal(b16, np.sum([value(r, (5,), np.float32, 3) for r in range(W)], axis=0), "all_reduce bfloat16")
# bool: logical reductions
flags = ng.tensor(value(R, (6,), bool, 4))
dist.all_reduce(flags, op=ReduceOp.MAX)
equal(flags, np.any([value(r, (6,), bool, 4) for r in range(W)], axis=0), "all_reduce bool MAX (any)")
# async
t = ng.tensor(value(R, (1000,), np.float32, 5))
work = dist.all_reduce(t, op=ReduceOp.SUM, async_op=True)
assert isinstance(work, dist.Work) and work.wait() is True and work.is_completed()
equal(t, np.sum([value(r, (1000,), np.float32, 5) for r in range(W)], axis=0), "async all_reduce")
# 0-d
s = ng.tensor(float(R + 1))
dist.all_reduce(s)
equal(s, np.array(W * (W + 1) / 2, np.float32), "0-d all_reduce")

# ---- reduce ----------------------------------------------------------------------------------------
t = ng.tensor(value(R, (2, 2), np.float64, 6))
dist.reduce(t, dst=W - 1, op=ReduceOp.SUM)
equal(t, np.sum([value(r, (2, 2), np.float64, 6) for r in range(W)], axis=0) if R == W - 1
      else value(R, (2, 2), np.float64, 6), "reduce to the last rank")

# ---- broadcast ---------------------------------------------------------------------------------------
for src in range(W):
    for dtype in (np.float32, np.int64):
        t = ng.tensor(value(R, (2, 3), dtype, 7))
        dist.broadcast(t, src=src)
        equal(t, value(src, (2, 3), dtype, 7), f"broadcast from {src}")
t = ng.tensor(value(R, (3,), np.float32, 8)).to(ng.bfloat16)
w = dist.broadcast(t, src=0, async_op=True)
w.wait()
equal(t, value(0, (3,), np.float32, 8), "async bfloat16 broadcast (bit patterns)")

# ---- all_gather, all_gather_into_tensor ------------------------------------------------------------
outs = [ng.zeros(2, 3) for _ in range(W)]
dist.all_gather(outs, ng.tensor(value(R, (2, 3), np.float32, 9)))
for r in range(W):
    equal(outs[r], value(r, (2, 3), np.float32, 9), f"all_gather row {r}")
cat = ng.zeros(2 * W, 3)
dist.all_gather_into_tensor(cat, ng.tensor(value(R, (2, 3), np.float32, 10)))
equal(cat, np.concatenate([value(r, (2, 3), np.float32, 10) for r in range(W)]), "all_gather_into_tensor concat")
stk = ng.zeros(W, 2, 3, dtype=ng.int64)
dist.all_gather_into_tensor(stk, ng.tensor(value(R, (2, 3), np.int64, 11)), async_op=True).wait()
equal(stk, np.stack([value(r, (2, 3), np.int64, 11) for r in range(W)]), "all_gather_into_tensor stacked async")

# ---- reduce_scatter, reduce_scatter_tensor ------------------------------------------------------------
ins = [ng.tensor(value(R, (4,), np.float32, 20 + j)) for j in range(W)]
out = ng.zeros(4)
dist.reduce_scatter(out, ins, op=ReduceOp.SUM)
equal(out, np.sum([value(r, (4,), np.float32, 20 + R) for r in range(W)], axis=0), "reduce_scatter")
big = ng.tensor(value(R, (2 * W, 3), np.float32, 30))
out = ng.zeros(2, 3)
dist.reduce_scatter_tensor(out, big, op=ReduceOp.AVG)
every = np.stack([value(r, (2 * W, 3), np.float32, 30) for r in range(W)])
equal(out, every.mean(axis=0)[2 * R:2 * R + 2], "reduce_scatter_tensor AVG", exact=False)

# ---- gather, scatter -------------------------------------------------------------------------------------
dst = W - 1
lst = [ng.zeros(3) for _ in range(W)] if R == dst else None
dist.gather(ng.tensor(value(R, (3,), np.float32, 40)), lst, dst=dst)
if R == dst:
    for r in range(W):
        equal(lst[r], value(r, (3,), np.float32, 40), f"gather row {r}")
src = 0
lst = [ng.tensor(value(j, (2,), np.float32, 41)) for j in range(W)] if R == src else None
out = ng.zeros(2)
dist.scatter(out, lst, src=src)
equal(out, value(R, (2,), np.float32, 41), "scatter")

# ---- barrier ------------------------------------------------------------------------------------------------
dist.barrier()
dist.barrier(async_op=True).wait()

# ---- errors: the same RuntimeError on every rank, naming each rank's shape -----------------------------
try:
    dist.all_reduce(ng.ones(2 + R))
except RuntimeError as e:
    msg = str(e)
    assert "all_reduce: the ranks disagree" in msg and "rank 0: all_reduce(op=SUM) of float32 (2,)" in msg \
        and "rank 1: all_reduce(op=SUM) of float32 (3,)" in msg, msg
else:
    raise AssertionError("mismatched shapes did not raise")
try:
    dist.all_reduce(ng.ones(3, dtype=ng.float64 if R == 0 else ng.float32))
except RuntimeError as e:
    assert "float64 (3,)" in str(e) and "float32 (3,)" in str(e), str(e)
else:
    raise AssertionError("mismatched dtypes did not raise")
try:
    (dist.all_reduce if R == 0 else dist.broadcast)(ng.ones(3))
except RuntimeError as e:
    assert "rank 1: broadcast" in str(e), str(e)
else:
    raise AssertionError("different collectives did not raise")
for bad, match in ((lambda: dist.broadcast(ng.ones(2), src=W), "src="),
                   (lambda: dist.all_reduce(np.ones(2)), "must be a Tensor"),
                   (lambda: dist.all_reduce(ng.ones(2), op="mean"), "not a ReduceOp"),
                   (lambda: dist.all_reduce(ng.ones(2, dtype=ng.int64), op=ReduceOp.AVG), "floating-point"),
                   (lambda: dist.all_gather([ng.zeros(2)], ng.ones(2)), "list of world_size"),
                   (lambda: dist.all_gather_into_tensor(ng.zeros(5), ng.ones(2)), "must be float32 of shape"),
                   (lambda: dist.init_process_group(), "twice"),
                   (lambda: dist.get_rank(group=object()), "only the default group")):
    try:
        bad()
    except (ValueError, TypeError) as e:
        assert match in str(e), (match, str(e))
    else:
        raise AssertionError(f"no error for {match}")
dist.barrier()   # the checks above left no message behind: the group still works
t = ng.ones(2)
dist.all_reduce(t)
equal(t, np.full(2, W, np.float32), "after the errors")
dist.destroy_process_group()
try:
    dist.get_rank()
except ValueError as e:
    assert "Default process group has not been initialized" in str(e)
else:
    raise AssertionError("get_rank after destroy_process_group did not raise")
print(f"OK rank {R} of {W}", flush=True)
