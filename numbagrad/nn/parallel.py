"""``torch.nn.parallel``: :class:`DistributedDataParallel` over ``numbagrad.distributed``.

``DataParallel`` (one process driving several GPUs) is not available: numbagrad drives one
GPU per process; the class exists so that ``isinstance`` checks and imports run, and
constructing it raises ``NotImplementedError``.

How DDP synchronises gradients
------------------------------
At wrap time every rank checks, with one ``Allgather`` of a digest, that all ranks hold
the same parameters and buffers (names, shapes, dtypes; on a mismatch every rank raises
the same error naming the differences), then rank 0's values are broadcast.

The parameters are laid out, in reverse registration order (roughly the order backward
finishes them), in flat *buckets* of at most ``bucket_cap_mb`` (the first at most 1 MiB,
as torch's, so that the first all-reduce starts early), one dtype each: one
contiguous array per bucket, a slice per parameter, plus one flag per parameter. Each
parameter has a post-accumulate-grad hook (``Tensor.register_post_accumulate_grad_hook``,
run by the autograd engine once the parameter's ``.grad`` is final for the pass): it
divides the gradient by the world size into the parameter's slice (in place when ``.grad``
already is that slice), makes ``.grad`` that slice, sets the flag, and once every
parameter of a bucket is in, starts a non-blocking ``Iallreduce`` (SUM) of the bucket,
so communication overlaps the rest of backward. Buckets are started in index order on
every rank (MPI needs the same order of collectives everywhere). Each hook also calls
``Test`` on the newest request: MPICH progresses a non-blocking collective only inside
MPI calls. A callback queued on the engine (``autograd.engine.queue_callback``) runs when
backward ends: it starts any bucket still waiting (a parameter that got no gradient
contributes zeros and a clear flag), waits for all of them, and gives a parameter that
got no gradient here but did on another rank the averaged gradient; one no rank used
keeps its ``.grad`` (None). So ``.grad`` is the averaged gradient as soon as
``backward()`` returns, and ``optimizer.step()`` needs no change.

The buckets are the gradient arena: ``.grad`` stays a view into a bucket (torch's
``gradient_as_bucket_view=True``), so with ``zero_grad(set_to_none=False)`` backward
accumulates straight into the buckets and nothing is copied; with the default
``set_to_none=True`` each parameter's gradient is copied (divided) into its slice once per
step. The optimizers read such a ``.grad`` where it is (``optim/optimizer.py``: a
contiguous gradient is read in place). bfloat16/float16 buckets are float32 (widened on
the way in, rounded back once), and CUDA gradients go through host buckets.

``no_sync()``: forwards run inside it mark their backward as local (gradients accumulate,
no communication); the first forward outside it syncs the accumulated gradients.
DDP talks on its own duplicate of the group's communicator, so collectives the model makes
itself (``SyncBatchNorm``) never interleave with the buckets' requests.
"""
import contextlib
import hashlib
import weakref

import numpy as np

from .. import _unavailable
from ..autograd import engine as _engine
from ..autograd.grad_mode import is_grad_enabled
from ..backend import backend_of
from ..tensor import Tensor
from .module import Module

__all__ = ["DataParallel", "DistributedDataParallel"]

DataParallel = _unavailable.cls(
    "numbagrad.nn.parallel.DataParallel",
    "single-process data parallelism: the batch split across the GPUs of this process "
    "(numbagrad drives one GPU per process; use DistributedDataParallel with one process per GPU)",
    bases=(Module,))

_F32 = np.dtype(np.float32)
_FIRST_BUCKET = 1 << 20


class _Bucket:
    """One flat gradient bucket: ``flat`` holds every parameter's slice then one flag per
    parameter (see the module docstring)."""

    __slots__ = ("params", "dtype", "flat", "views", "gtensors", "flags", "staged", "ready", "count", "req")

    def __init__(self, params):
        self.params = params
        self.dtype = params[0].array.dtype
        wide = self.dtype.itemsize == 2   # float16 / bfloat16: reduced in float32
        host = backend_of(params[0].array).host_memory
        self.staged = wide or not host    # .grad cannot be a view of the (host, float32) bucket
        rdt = _F32 if wide else self.dtype
        sizes = [p.array.size for p in params]
        total = sum(sizes)
        self.flat = np.zeros(total + len(params), rdt)
        self.flags = self.flat[total:]
        self.views, self.gtensors = [], []
        lo = 0
        for p, n in zip(params, sizes):
            v = self.flat[lo:lo + n].reshape(p.array.shape)
            self.views.append(v)
            self.gtensors.append(None if self.staged else Tensor._from_array(v))
            lo += n
        self.ready = [False] * len(params)
        self.count = 0
        self.req = None


def _describe(module):
    """Lines ``kind name dtype shape`` for every parameter and buffer, in order."""
    lines = [f"parameter {n} {p.dtype} {tuple(p.shape)}" for n, p in module.named_parameters()]
    lines += [f"buffer {n} {b.dtype} {tuple(b.shape)}" for n, b in module.named_buffers()]
    return lines


def _check_architecture(comm, rank, n, module):
    """Every rank raises the same RuntimeError when the ranks' modules differ."""
    from numbagrad.distributed.process_group import mpi
    lines = _describe(module)
    text = "\n".join(lines).encode()
    mine = np.frombuffer(hashlib.sha256(text).digest(), np.uint8).copy()
    every = np.empty((n, mine.size), np.uint8)
    comm.Allgather(mine, every)
    if (every == mine).all():
        return
    MPI = mpi()
    size = np.array([len(text)], np.int64)
    sizes = np.empty(n, np.int64)
    comm.Allgather(size, sizes)
    allbytes = np.empty(int(sizes.sum()), np.uint8)
    displ = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    comm.Allgatherv(np.frombuffer(text, np.uint8), [allbytes, sizes, displ, MPI.BYTE])
    descs = [allbytes[d:d + s].tobytes().decode().split("\n") if s else []
             for d, s in zip(displ, sizes)]
    ref = {ln.split(" ")[1]: ln for ln in descs[0]}
    problems = []
    for r in range(1, n):
        other = {ln.split(" ")[1]: ln for ln in descs[r]}
        missing = [k for k in ref if k not in other]
        extra = [k for k in other if k not in ref]
        differ = [f"{k} (rank 0: {' '.join(ref[k].split(' ')[2:])}, rank {r}: {' '.join(other[k].split(' ')[2:])})"
                  for k in ref if k in other and ref[k] != other[k]]
        order = not (missing or extra or differ) and list(ref) != list(other)
        parts = []
        if missing:
            parts.append("missing " + ", ".join(missing))
        if extra:
            parts.append("extra " + ", ".join(extra))
        if differ:
            parts.append("different " + ", ".join(differ))
        if order:
            parts.append("the same names in another order")
        if parts:
            problems.append(f"rank {r} vs rank 0: " + "; ".join(parts))
    raise RuntimeError(f"DistributedDataParallel: the ranks' modules differ (this is rank {rank}); every rank "
                       "must wrap the same architecture: " + " | ".join(problems))


class DistributedDataParallel(Module):
    """Data-parallel training across processes (``torch.nn.parallel.DistributedDataParallel``).

    Each rank runs the wrapped ``module`` on its own part of the batch; backward averages the
    gradients over the ranks, bucket by bucket while backward still runs (see the module
    docstring), so every rank's optimizer makes the same step.

    Parameters
    ----------
    module : Module
        The model, the same architecture on every rank (checked); rank 0's parameters and
        buffers are broadcast to the others.
    device_ids, output_device, dim : accepted for torch's signature (one device per process).
    broadcast_buffers : bool
        Broadcast rank 0's buffers (BatchNorm's running statistics) at each training forward.
    process_group : None, the default group.
    bucket_cap_mb : float
        The largest bucket, in MiB (default 25).
    find_unused_parameters : bool
        Accepted; parameters without a gradient are always handled (see the module docstring).
    gradient_as_bucket_view : bool
        Accepted; ``.grad`` always becomes a view of its bucket.

    Example
    -------
    Run with ``mpiexec -n 2 python train.py``::

        import numbagrad.distributed as dist
        dist.init_process_group()
        model = nn.parallel.DistributedDataParallel(model)
        sampler = data.DistributedSampler(dataset)      # each rank its share of every epoch
        for epoch in range(epochs):
            sampler.set_epoch(epoch)
            for x, y in data.DataLoader(dataset, batch_size=64, sampler=sampler):
                opt.zero_grad()
                loss_fn(model(x), y).backward()          # gradients averaged over the ranks
                opt.step()
    """

    def __init__(self, module, device_ids=None, output_device=None, dim=0, broadcast_buffers=True,
                 init_sync=True, process_group=None, bucket_cap_mb=None, find_unused_parameters=False,
                 check_reduction=False, gradient_as_bucket_view=False, static_graph=False,
                 delay_all_reduce_named_params=None, param_to_hook_all_reduce=None, mixed_precision=None,
                 device_mesh=None, skip_all_reduce_unused_params=False):
        super().__init__()
        from numbagrad.distributed.process_group import _comm, _state
        if not isinstance(module, Module):
            raise TypeError(f"DistributedDataParallel: module must be an nn.Module, got {type(module).__name__}")
        base = _comm("DistributedDataParallel", process_group)
        if bucket_cap_mb is None:
            bucket_cap_mb = 25
        if not bucket_cap_mb > 0:
            raise ValueError(f"DistributedDataParallel: bucket_cap_mb must be positive, got {bucket_cap_mb}")
        self.module = module
        self.device_ids = device_ids
        self.output_device = output_device
        self.dim = dim
        self.broadcast_buffers = bool(broadcast_buffers)
        self.find_unused_parameters = bool(find_unused_parameters)
        self.gradient_as_bucket_view = True
        self.static_graph = bool(static_graph)
        self.bucket_bytes_cap = int(bucket_cap_mb * (1 << 20))
        self.require_backward_grad_sync = True
        self.require_forward_param_sync = True
        d = self.__dict__
        d["_rank"], d["_world"] = _state.rank, _state.world_size
        d["_comm"] = base.Dup()         # DDP's own channel (see the module docstring)
        _check_architecture(d["_comm"], self._rank, self._world, module)
        if init_sync and self._world > 1:
            self._broadcast([p for p in module.parameters()] + [b for b in module.buffers() if b is not None])
        params = [p for p in module.parameters() if p.requires_grad]
        d["_buckets"] = self._make_buckets(params)
        d["_sync_pass"] = True          # decided at forward: does the coming backward sync?
        d["_in_pass"] = False           # a backward pass with hooks fired is running
        d["_next"] = 0                  # the next bucket to start (in order)
        d["_inflight"] = []
        ref = weakref.ref(self)
        d["_handles"] = []
        for bi, b in enumerate(self._buckets):
            for i, p in enumerate(b.params):
                self._handles.append(p.register_post_accumulate_grad_hook(_Hook(ref, bi, i)))

    def _make_buckets(self, params):
        buckets, cur, size, key = [], [], 0, None
        for p in reversed(params):
            k = (type(p.array), p.array.dtype)
            nbytes = p.array.nbytes
            # the first bucket is small (as torch's, 1 MiB), so communication starts early in backward
            cap = min(_FIRST_BUCKET, self.bucket_bytes_cap) if not buckets else self.bucket_bytes_cap
            if cur and (k != key or size + nbytes > cap):
                buckets.append(_Bucket(cur))
                cur, size = [], 0
            cur.append(p)
            size += nbytes
            key = k
        if cur:
            buckets.append(_Bucket(cur))
        return buckets

    def _broadcast(self, tensors):
        from numbagrad.distributed.collectives import _Buf
        root = self._rank == 0
        for t in tensors:
            b = _Buf(t, reduce=False, fill=root)
            self._comm.Bcast(b.buf, root=0)
            if not root:
                b.store()

    # ---- forward ----------------------------------------------------------------------------
    def forward(self, *inputs, **kwargs):
        if self._in_pass:    # a backward whose hooks fired and that ended without our callback
            self._finish()
        grad = is_grad_enabled()
        if self.broadcast_buffers and self._world > 1 and grad and self.module.training:
            bufs = [b for b in self.module.buffers() if b is not None]
            if bufs:
                self._broadcast(bufs)
        self.__dict__["_sync_pass"] = self.require_backward_grad_sync
        return self.module(*inputs, **kwargs)

    @contextlib.contextmanager
    def no_sync(self):
        """Inside, forwards (and their backwards) do not synchronise gradients: they accumulate
        locally; the first backward of a forward run outside syncs the sum (``DDP.no_sync``)."""
        old = self.require_backward_grad_sync
        self.require_backward_grad_sync = False
        try:
            yield
        finally:
            self.require_backward_grad_sync = old

    # ---- backward: the hooks ------------------------------------------------------------------
    def _on_grad(self, bi, i, p):
        if not self._sync_pass:
            return
        d = self.__dict__
        if not d["_in_pass"]:
            d["_in_pass"] = True
            d["_next"] = 0
            for b in self._buckets:
                b.count = 0
                b.ready = [False] * len(b.params)
                b.flags.fill(0)
                b.req = None
            _engine.queue_callback(self._finish)
        b = self._buckets[bi]
        if b.ready[i]:
            return
        self._take(b, i, p)
        b.count += 1
        if b.count == len(b.params):
            self._launch_ready()
        elif self._inflight:
            self._inflight[-1].Test()   # drive MPICH's progress of the buckets in flight

    def _take(self, b, i, p):
        """Gradient of ``p`` divided by the world size into its slice; ``.grad`` becomes the slice."""
        g = p.grad.array
        v = b.views[i]
        n = self._world
        if g is v:
            if n != 1:
                np.divide(v, n, out=v)
        elif b.staged:
            host = backend_of(g).to_numpy(g)
            if host.dtype != v.dtype:
                host = backend_of(host).astype(host, v.dtype)
            np.divide(host, n, out=v)
        else:
            np.divide(g, n, out=v, casting="unsafe")
            p.grad = b.gtensors[i]
        b.ready[i] = True
        b.flags[i] = 1

    def _launch_ready(self):
        bs = self._buckets
        while self._next < len(bs) and bs[self._next].count == len(bs[self._next].params):
            self._launch(bs[self._next])

    def _launch(self, b):
        self.__dict__["_next"] += 1
        if self._world == 1:
            return
        from numbagrad.distributed.process_group import mpi
        MPI = mpi()
        b.req = self._comm.Iallreduce(MPI.IN_PLACE, b.flat, op=MPI.SUM)
        self._inflight.append(b.req)

    def _finish(self):
        """End of backward: start the buckets still waiting, wait for all, hand out gradients."""
        d = self.__dict__
        if not d["_in_pass"]:
            return
        d["_in_pass"] = False
        bs = self._buckets
        for k in range(self._next, len(bs)):
            b = bs[k]
            for i, ok in enumerate(b.ready):
                if not ok:
                    b.views[i].fill(0)
            b.count = len(b.params)
            self._launch(b)
        if self._inflight:
            from numbagrad.distributed.process_group import mpi
            mpi().Request.Waitall(self._inflight)
            self._inflight.clear()
        for b in bs:
            if b.staged or not all(b.ready):
                self._hand_out(b)

    def _hand_out(self, b):
        for i, p in enumerate(b.params):
            if b.flags[i] == 0:
                continue                 # no rank had a gradient: .grad untouched
            v = b.views[i]
            if not b.staged:
                if not b.ready[i]:
                    p.grad = b.gtensors[i]
                continue
            dt = p.array.dtype
            host = backend_of(v).astype(v, dt) if v.dtype != dt else v.copy()
            arr = backend_of(p.array).asarray(host)   # the CPU's is host itself
            if p.grad is not None and p.grad.array.shape == arr.shape and type(p.grad.array) is type(arr) \
                    and p.grad.array.dtype == dt and type(arr) is np.ndarray:
                np.copyto(p.grad.array, arr)
            else:
                p.grad = Tensor._from_array(arr)

    def extra_repr(self):
        return (f"world_size={self._world}, buckets={len(self._buckets)}, "
                f"bucket_cap_mb={self.bucket_bytes_cap / 2**20:g}")


class _Hook:
    """A parameter's post-accumulate-grad hook; holds DDP weakly (the engine's hook table
    lives as long as the parameter)."""
    __slots__ = ("ref", "bi", "i")

    def __init__(self, ref, bi, i):
        self.ref, self.bi, self.i = ref, bi, i

    def __call__(self, p):
        ddp = self.ref()
        if ddp is not None:
            ddp._on_grad(self.bi, self.i, p)
