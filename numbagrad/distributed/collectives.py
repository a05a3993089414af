"""Collectives on Tensors over the default group: torch.distributed's names and in-place
semantics, each one call of mpi4py's buffer interface (``Allreduce``, ``Iallreduce``,
``Bcast``, ``Allgather``, ``Reduce_scatter_block``, ``Gather``, ``Scatter``, ...) on the
arrays' memory. Nothing goes through pickle.

Every public collective first checks, with one small ``Allgather`` of a signature (the
collective, its reduction, dtype and shape), that all ranks called the same thing; a
mismatch raises the same ``RuntimeError`` on every rank, naming each rank's dtype and
shape, instead of MPI truncating a message or hanging. SyncBatchNorm (:func:`allreduce_array`)
and DDP (``Iallreduce`` on its buckets), whose ranks agree by construction, skip that check.

Memory: a C-contiguous CPU tensor is reduced where it is. A non-contiguous one is
copied to a contiguous buffer and the result copied back; a CUDA tensor goes through the
host (the ``mpich`` wheel is not CUDA-aware). float16 and bfloat16 reductions are widened
to float32 (numbagrad's exact casts), reduced there and rounded back once (to nearest
even); collectives that only move data (broadcast, gathers, scatter) move their 16-bit
patterns as ``uint16``, bit for bit. bool reductions use MPI's logical operations
(SUM/MAX: OR, MIN/PRODUCT: AND).
"""
import numpy as np

from .. import _dtype
from ..backend import backend_of
from ..tensor import Tensor
from .process_group import _comm, _state, mpi

_BF16 = _dtype.bfloat16
_HALF = np.dtype(np.float16)
_F32 = np.dtype(np.float32)


class ReduceOp:
    """``torch.distributed.ReduceOp``: the reductions of :func:`all_reduce` and friends."""
    SUM = "sum"
    AVG = "avg"
    PRODUCT = "product"
    MIN = "min"
    MAX = "max"
    BAND = "band"
    BOR = "bor"
    BXOR = "bxor"
    # torch also accepts the lower-case member names (ReduceOp.SUM == "sum" style lookups)
    _ALL = ("sum", "avg", "product", "min", "max", "band", "bor", "bxor")


_MPI_OP = {"sum": "SUM", "avg": "SUM", "product": "PROD", "min": "MIN", "max": "MAX",
           "band": "BAND", "bor": "BOR", "bxor": "BXOR"}
_BOOL_OP = {"sum": "LOR", "max": "LOR", "min": "LAND", "product": "LAND", "band": "LAND", "bor": "LOR",
            "bxor": "LXOR"}
_CODES = {name: i for i, name in enumerate(("all_reduce", "broadcast", "all_gather", "all_gather_into_tensor",
                                            "reduce_scatter", "reduce_scatter_tensor", "gather", "scatter",
                                            "reduce"))}
_SIG_DIMS = 8


def _op_name(op, who):
    name = getattr(op, "value", op)
    if isinstance(name, str) and name.lower() in ReduceOp._ALL:
        return name.lower()
    raise ValueError(f"{who}: op={op!r} is not a ReduceOp (SUM, AVG, PRODUCT, MIN, MAX, BAND, BOR, BXOR)")


def _mpi_op(MPI, op, dtype, who):
    if dtype == np.bool_:
        if op == "avg":
            raise TypeError(f"{who}: ReduceOp.AVG is not defined for bool tensors")
        return getattr(MPI, _BOOL_OP[op])
    if op in ("band", "bor", "bxor") and dtype.kind not in "iu":
        raise TypeError(f"{who}: ReduceOp.{op.upper()} needs an integer tensor, got {dtype}")
    if op == "avg" and not _dtype.is_float(dtype) and dtype.kind != "c":
        raise TypeError(f"{who}: ReduceOp.AVG needs a floating-point tensor, got {dtype} (use SUM)")
    return getattr(MPI, _MPI_OP[op])


class Work:
    """The handle an ``async_op=True`` collective returns (``torch.distributed.Work``).

    ``wait()`` blocks until the operation is done and its result is in the tensor(s);
    ``is_completed()`` asks without blocking (and drives MPI's progress)."""

    __slots__ = ("_req", "_finish", "_done")

    def __init__(self, req, finish=None):
        self._req, self._finish, self._done = req, finish, False

    def _complete(self):
        self._done = True
        if self._finish is not None:
            f, self._finish = self._finish, None
            f()

    def wait(self, timeout=None):
        """Block until done; True (torch's return value)."""
        if not self._done:
            self._req.Wait()
            self._complete()
        return True

    def is_completed(self):
        """Whether the operation has finished (its result is then in place)."""
        if not self._done and self._req.Test():
            self._complete()
        return self._done

    def is_success(self):
        """True once completed: MPI errors abort rather than fail one operation."""
        return self.is_completed()

    def exception(self):
        return None


class _Done(Work):
    """A Work that completed at once (a world of one rank, or a blocking fallback)."""
    __slots__ = ()

    def __init__(self):
        super().__init__(None, None)
        self._done = True


# ---- buffers -----------------------------------------------------------------------------------
def _check_tensor(t, who, name):
    if not isinstance(t, Tensor):
        raise TypeError(f"{who}: {name} must be a Tensor, got {type(t).__name__}")
    return t


class _Buf:
    """A contiguous host buffer for a Tensor's values: the tensor's own memory when it can
    be (a C-contiguous CPU array of a type MPI reduces), else a copy that :meth:`store`
    writes back. ``reduce``: float16/bfloat16 are widened to float32; otherwise they are
    moved as ``uint16`` bit patterns."""

    __slots__ = ("t", "buf", "back")

    def __init__(self, t, reduce, fill=True):
        arr = t.array
        host = arr if type(arr) is np.ndarray else backend_of(arr).to_numpy(arr)
        dt = host.dtype
        if dt == _BF16 or dt == _HALF:
            if reduce:
                buf = backend_of(host).astype(host, _F32) if fill else np.empty(host.shape, _F32)
            else:
                buf = (host if host.flags.c_contiguous else np.ascontiguousarray(host)).view(np.uint16)
        elif host.flags.c_contiguous:
            buf = host
        else:
            buf = np.ascontiguousarray(host) if fill else np.empty(host.shape, dt)
        self.t, self.buf = t, buf
        self.back = host is not arr or not np.shares_memory(buf, host)

    def store(self):
        """Put the buffer's values into the tensor (if they are not already there); bump its version."""
        t = self.t
        if self.back:
            arr = t.array
            res = self.buf
            dt = arr.dtype
            if res.dtype != dt:
                res = backend_of(res).astype(res, dt) if res.dtype == _F32 else res.view(dt)
            if type(arr) is np.ndarray:
                np.copyto(arr, res.reshape(arr.shape))
            else:
                arr[...] = backend_of(arr).asarray(res.reshape(arr.shape))
        t._version.value += 1


def _signature(code, op, dtype, shape):
    sig = np.full(4 + _SIG_DIMS, -1, np.int64)
    sig[0] = code
    sig[1] = -1 if op is None else ReduceOp._ALL.index(op)
    sig[2] = _dtype_code(dtype)
    sig[3] = len(shape)
    for i, s in enumerate(shape[:_SIG_DIMS]):
        sig[4 + i] = s
    if len(shape) > _SIG_DIMS:
        sig[4 + _SIG_DIMS - 1] = int(np.prod(shape[_SIG_DIMS - 1:]))
    return sig


_DTYPES = [np.dtype(d) for d in ("bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
                                   "float16", "float32", "float64", "complex64", "complex128")] + [_BF16]


def _dtype_code(dtype):
    try:
        return _DTYPES.index(np.dtype(dtype))
    except ValueError:
        return len(_DTYPES)


def _agree(comm, who, op, dtype, shape, extra=""):
    """Check, collectively, that every rank called ``who`` with the same op, dtype and shape;
    the same RuntimeError on every rank otherwise."""
    if _state.world_size == 1:
        return
    mine = _signature(_CODES[who], op, dtype, shape)
    every = np.empty((_state.world_size, mine.size), np.int64)
    comm.Allgather(mine, every)
    if (every == mine).all():
        return
    names = {v: k for k, v in _CODES.items()}
    rows = []
    for r, s in enumerate(every):
        call = names.get(int(s[0]), "?")
        shp = tuple(int(x) for x in s[4:4 + min(int(s[3]), _SIG_DIMS)]) if s[3] >= 0 else ()
        opn = ReduceOp._ALL[int(s[1])].upper() if s[1] >= 0 else None
        dts = str(_DTYPES[int(s[2])]) if 0 <= s[2] < len(_DTYPES) else "another dtype"
        rows.append(f"rank {r}: {call}" + (f"(op={opn})" if opn else "") + f" of {dts} {shp}")
    raise RuntimeError(f"{who}: the ranks disagree (rank {_state.rank} is this one){extra}; every rank must "
                       "call the same collective on tensors of the same dtype and shape: " + "; ".join(rows))


def _issue(comm, call, args, fin, async_op, **kw):
    """One MPI collective ``call`` (``"Allreduce"``, ``"Bcast"``, ...) on ``args``: its
    non-blocking twin (``Iallreduce``) in a :class:`Work` when ``async_op``, else the blocking
    call; ``fin`` (or None) runs once the data is in place. Returns the Work or None."""
    if async_op:
        return Work(getattr(comm, "I" + call[0].lower() + call[1:])(*args, **kw), fin)
    getattr(comm, call)(*args, **kw)
    if fin is not None:
        fin()
    return None


def _rooted(who, group, tensor, lst, root, root_name, list_name):
    """The checks of gather/scatter: ``(comm, root, whether this rank is the root)``; the root
    passes ``world_size`` tensors like ``tensor``, the others None."""
    comm = _comm(who, group)
    _check_tensor(tensor, who, "tensor")
    root = _check_rank(root, who, root_name)
    me = _state.rank == root
    if me:
        _check_list(lst, _state.world_size, who, list_name, tensor)
    elif lst:
        raise ValueError(f"{who}: {list_name} must be None (or empty) on rank {_state.rank}, which is not "
                         f"{root_name}={root}")
    _agree(comm, who, None, tensor.dtype, tuple(tensor.shape))
    return comm, root, me


# ---- all_reduce ---------------------------------------------------------------------------------
def allreduce_array(comm, arr, op="sum", async_op=False, then=None):
    """In-place all-reduce of a C-contiguous NumPy array of a type MPI reduces (no checks):
    the primitive SyncBatchNorm uses. ``op`` a :class:`ReduceOp` name; AVG divides the sum
    by the world size; ``then()`` runs after. Returns a :class:`Work` when ``async_op``, else None."""
    MPI = mpi()
    mop = _mpi_op(MPI, op, arr.dtype, "all_reduce")
    n = _state.world_size

    def finish():
        if op == "avg":
            np.divide(arr, n, out=arr)
        if then is not None:
            then()
    return _issue(comm, "Allreduce", (MPI.IN_PLACE, arr), finish, async_op, op=mop)


def all_reduce(tensor, op=ReduceOp.SUM, group=None, async_op=False):
    """Reduce ``tensor`` across all ranks, in place, so that every rank ends with the result
    (``MPI_Allreduce``; ``Iallreduce`` when ``async_op``, returning a :class:`Work`).

    ``op``: :class:`ReduceOp` (SUM, AVG, PRODUCT, MIN, MAX; BAND/BOR/BXOR on integers)."""
    who = "all_reduce"
    comm = _comm(who, group)
    _check_tensor(tensor, who, "tensor")
    op = _op_name(op, who)
    _agree(comm, who, op, tensor.dtype, tuple(tensor.shape))
    b = _Buf(tensor, reduce=True)
    return allreduce_array(comm, b.buf, op, async_op, then=b.store)


def reduce(tensor, dst=0, op=ReduceOp.SUM, group=None, async_op=False):
    """Reduce ``tensor`` across all ranks into rank ``dst``'s tensor, in place (``MPI_Reduce``);
    the other ranks' tensors are left as they were."""
    who = "reduce"
    comm = _comm(who, group)
    _check_tensor(tensor, who, "tensor")
    dst = _check_rank(dst, who, "dst")
    op = _op_name(op, who)
    _agree(comm, who, op, tensor.dtype, tuple(tensor.shape))
    MPI = mpi()
    b = _Buf(tensor, reduce=True)
    mop = _mpi_op(MPI, op, b.buf.dtype, who)
    me = _state.rank == dst
    send = MPI.IN_PLACE if me else b.buf
    recv = b.buf if me else None

    def finish():
        if me:
            if op == "avg":
                np.divide(b.buf, _state.world_size, out=b.buf)
            b.store()
    return _issue(comm, "Reduce", (send, recv), finish, async_op, op=mop, root=dst)


def _check_rank(r, who, name):
    if isinstance(r, bool) or not isinstance(r, (int, np.integer)) or not 0 <= r < _state.world_size:
        raise ValueError(f"{who}: {name}={r!r} is not a rank of the group (0..{_state.world_size - 1})")
    return int(r)


# ---- broadcast ----------------------------------------------------------------------------------
def broadcast(tensor, src=0, group=None, async_op=False, group_src=None):
    """Copy rank ``src``'s ``tensor`` into every other rank's ``tensor``, in place (``MPI_Bcast``)."""
    who = "broadcast"
    comm = _comm(who, group)
    _check_tensor(tensor, who, "tensor")
    src = _check_rank(src if group_src is None else group_src, who, "src")
    _agree(comm, who, None, tensor.dtype, tuple(tensor.shape))
    b = _Buf(tensor, reduce=False, fill=_state.rank == src)
    fin = b.store if _state.rank != src else None
    return _issue(comm, "Bcast", (b.buf,), fin, async_op, root=src)


# ---- gathers ------------------------------------------------------------------------------------
def _flat_buf(t, reduce):
    """A tensor's values as a contiguous host array (uint16 bits for 16-bit floats unless ``reduce``)."""
    return _Buf(t, reduce).buf


def _check_list(lst, n, who, name, like):
    if not isinstance(lst, (list, tuple)) or len(lst) != n:
        got = f"{len(lst)} tensors" if isinstance(lst, (list, tuple)) else type(lst).__name__
        raise ValueError(f"{who}: {name} must be a list of world_size={n} tensors, got {got}")
    for i, t in enumerate(lst):
        _check_tensor(t, who, f"{name}[{i}]")
        if tuple(t.shape) != tuple(like.shape) or t.dtype != like.dtype:
            raise ValueError(f"{who}: {name}[{i}] is {t.dtype} {tuple(t.shape)}, but the tensor is "
                             f"{like.dtype} {tuple(like.shape)}; they must match")


def _store_rows(rows, outs):
    """Write row ``i`` of a ``(world_size, ...)`` host array (uint16 bits for 16-bit floats) into ``outs[i]``."""
    for i, t in enumerate(outs):
        b = _Buf.__new__(_Buf)
        b.t, b.buf, b.back = t, rows[i], True
        b.store()


def all_gather(tensor_list, tensor, group=None, async_op=False):
    """Every rank's ``tensor`` into ``tensor_list[r]`` on every rank (``MPI_Allgather``)."""
    who = "all_gather"
    comm = _comm(who, group)
    _check_tensor(tensor, who, "tensor")
    _check_list(tensor_list, _state.world_size, who, "tensor_list", tensor)
    _agree(comm, who, None, tensor.dtype, tuple(tensor.shape))
    send = _flat_buf(tensor, False)
    rows = np.empty((_state.world_size,) + send.shape, send.dtype)
    return _issue(comm, "Allgather", (send, rows), lambda: _store_rows(rows, tensor_list), async_op)


def all_gather_into_tensor(output_tensor, input_tensor, group=None, async_op=False):
    """Every rank's ``input_tensor`` concatenated (shape ``(world_size * n, ...)``) or stacked
    (``(world_size, n, ...)``) into ``output_tensor`` on every rank."""
    who = "all_gather_into_tensor"
    comm = _comm(who, group)
    _check_tensor(input_tensor, who, "input_tensor")
    _check_tensor(output_tensor, who, "output_tensor")
    _check_stacked(output_tensor, input_tensor, who, "output_tensor", "input_tensor")
    _agree(comm, who, None, input_tensor.dtype, tuple(input_tensor.shape))
    send = _flat_buf(input_tensor, False)
    out = _Buf(output_tensor, reduce=False, fill=False)
    return _issue(comm, "Allgather", (send, out.buf), out.store, async_op)


def _check_stacked(big, small, who, big_name, small_name):
    n = _state.world_size
    bs, ss = tuple(big.shape), tuple(small.shape)
    ok = bs == (n,) + ss or (len(ss) >= 1 and bs == (n * ss[0],) + ss[1:])
    if not ok or big.dtype != small.dtype:
        raise ValueError(f"{who}: {big_name} is {big.dtype} {bs}, {small_name} is {small.dtype} {ss}; with "
                         f"world_size={n} {big_name} must be {small.dtype} of shape "
                         f"{((n * ss[0],) + ss[1:]) if ss else (n,)} or {(n,) + ss}")


def gather(tensor, gather_list=None, dst=0, group=None, async_op=False):
    """Every rank's ``tensor`` into ``gather_list[r]`` on rank ``dst`` (``MPI_Gather``); the
    other ranks pass ``gather_list=None``."""
    comm, dst, me = _rooted("gather", group, tensor, gather_list, dst, "dst", "gather_list")
    send = _flat_buf(tensor, False)
    rows = np.empty((_state.world_size,) + send.shape, send.dtype) if me else None
    fin = (lambda: _store_rows(rows, gather_list)) if me else None
    return _issue(comm, "Gather", (send, rows), fin, async_op, root=dst)


def scatter(tensor, scatter_list=None, src=0, group=None, async_op=False):
    """``scatter_list[r]`` of rank ``src`` into rank r's ``tensor`` (``MPI_Scatter``); the other
    ranks pass ``scatter_list=None``."""
    comm, src, me = _rooted("scatter", group, tensor, scatter_list, src, "src", "scatter_list")
    out = _Buf(tensor, reduce=False, fill=False)
    rows = np.stack([_flat_buf(t, False) for t in scatter_list]) if me else None
    return _issue(comm, "Scatter", (rows, out.buf), out.store, async_op, root=src)


# ---- reduce-scatter -----------------------------------------------------------------------------
def _reduce_scatter(comm, who, op, send, out, async_op):
    MPI = mpi()
    mop = _mpi_op(MPI, op, send.dtype, who)

    def finish():
        if op == "avg":
            np.divide(out.buf, _state.world_size, out=out.buf)
        out.store()
    return _issue(comm, "Reduce_scatter_block", (send, out.buf), finish, async_op, op=mop)


def reduce_scatter(output, input_list, op=ReduceOp.SUM, group=None, async_op=False):
    """``output`` on rank r gets the reduction over ranks of their ``input_list[r]``
    (``MPI_Reduce_scatter_block``)."""
    who = "reduce_scatter"
    comm = _comm(who, group)
    _check_tensor(output, who, "output")
    _check_list(input_list, _state.world_size, who, "input_list", output)
    op = _op_name(op, who)
    _agree(comm, who, op, output.dtype, tuple(output.shape))
    send = np.stack([_Buf(t, True).buf for t in input_list])
    return _reduce_scatter(comm, who, op, send, _Buf(output, True, fill=False), async_op)


def reduce_scatter_tensor(output, input, op=ReduceOp.SUM, group=None, async_op=False):
    """``output`` on rank r gets the reduction over ranks of chunk r of ``input``
    (``input``: ``(world_size * n, ...)`` or ``(world_size, n, ...)``)."""
    who = "reduce_scatter_tensor"
    comm = _comm(who, group)
    _check_tensor(output, who, "output")
    _check_tensor(input, who, "input")
    _check_stacked(input, output, who, "input", "output")
    op = _op_name(op, who)
    _agree(comm, who, op, output.dtype, tuple(output.shape))
    send = _Buf(input, True).buf
    return _reduce_scatter(comm, who, op, send, _Buf(output, True, fill=False), async_op)
