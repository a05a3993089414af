"""Reductions and cumulative scans over the middle axis of a C-contiguous ``(A, K, B)`` array.

Contract
--------
On the CPU NumPy does this work (``np.sum``, ``np.max``, ``np.argmax``, ``np.cumsum``,
...), so NumPy is the reference. The backend glue reshapes or permutes a reduction over
any set of axes into this canonical form:

* ``reduce_mid(x, out, op)``: ``x`` is a C-contiguous ``(A, K, B)`` array and ``out`` a
  C-contiguous ``(A, B)`` array; ``out[a, b] = op(x[a, :, b])``. ``op`` is one of
  ``"sum"``, ``"prod"``, ``"max"``, ``"min"``, ``"any"``, ``"all"``, ``"argmax"``,
  ``"argmin"``, ``"sumsq"`` (sum of squares), ``"abssum"`` (sum of ``|x|``) and
  ``"absmax"`` (max of ``|x|``).
* ``scan_mid(x, out, op)``: ``out[a, k, b] = op(x[a, :k+1, b])`` for ``op`` in
  ``"sum"``, ``"prod"`` (``np.cumsum`` / ``np.cumprod``); ``out`` has ``x``'s shape.

Semantics are NumPy's:

* ``out``'s dtype is NumPy's result dtype, and the accumulation runs in it (``int64``
  for a bool or int32 sum), except that float16 accumulates in float32 (the final store
  narrows);
* ``max``/``min``/``absmax`` propagate NaN; ``argmax``/``argmin`` write the first index
  of the extreme into an int64 ``out``, a NaN counting as the extreme (the first NaN
  wins); ``any``/``all`` write bool (NaN counts as true);
* ``K == 0`` gives the identity (0 for the sums, 1 for ``prod``, False for ``any``,
  True for ``all``); the glue raises for ``max``/``min``/``argmax``/``argmin`` of an
  empty axis before launching.

Design
------
Each op is an element map (element -> accumulator, e.g. ``x*x`` for ``sumsq``) and an
associative combine (``+``, ``*``, NaN-propagating max, ...). The launcher passes the
op's identity as a scalar of the accumulation dtype (``ident``); it seeds every
accumulator and also fixes the accumulator's type inside the kernel
(``type(ident)(x[...])``). Two kernel families, chosen at launch by :func:`_use_rows`:

* **rows** (``B == 1``, a contiguous row per output; or few outputs over a long axis):
  one block of ``ROW_TPB`` threads per output, each thread folding ``x[a, t::ROW_TPB, b]``
  (coalesced when ``B == 1``), then a shared-memory tree reduction. A shared array's
  dtype is a compile-time constant, so there is one row kernel per (op, accumulator
  dtype), built by a factory.
* **columns** (``B > 1``): one thread per output ``(a, b)`` looping over ``K``;
  neighbouring threads read neighbouring ``b``, so every load is coalesced. One kernel
  per op (generic in the dtypes).

``any``/``all`` of float16 have their own kernels that test ``float32(x) != 0``
(numba-cuda compares halves through an external call that spills to local memory, and
``bool(half)`` is invalid NVVM IR). ``argmax``/``argmin`` carry (value, index) pairs;
the combine prefers a NaN, then the larger (smaller) value, then the lower index, so the
tree order does not matter.

Scans: one thread per ``(a, b)`` looping over ``K`` (columns), or for long contiguous
rows one block per row that scans chunks of ``ROW_TPB`` elements in shared memory
(Hillis-Steele) and carries the running total from chunk to chunk.

The thresholds of :func:`_use_rows` were not measured on a GPU (none was available
when this was written); both families are correct for every shape.
"""
import numpy as np
from numba import cuda, float32, types as nbt
from numba.np.numpy_support import from_dtype

from ._launch import ROW_TPB, SIM, cuda_kernel, device_fn, from_template, grid_kernel, launch, launch_rows
from ._blockreduce import block_tree

# the names be.kernel(family, name) resolves (see numbagrad/kernels/__init__.py)
ENTRY_POINTS = ()

# ---- element maps: (element, ident) -> accumulator value ---------------------------------------


@device_fn
def _map_cast(v, ident):
    return type(ident)(v)


@device_fn
def _map_sq(v, ident):
    w = type(ident)(v)
    return w * w


@device_fn
def _map_abs(v, ident):
    return abs(type(ident)(v))


@device_fn
def _map_nonzero(v, ident):
    # NaN != 0, so NaN counts as true (NumPy's any/all)
    return v != type(v)(0)


@device_fn
def _map_nonzero_half(v, ident):
    # NOTE: numba-cuda compares two halves through an external cuda_fp16 call (its
    # arguments spill to local memory) and bool(half) is invalid NVVM IR: compare in float32.
    return float32(v) != float32(0)


# ---- combines ------------------------------------------------------------------------------------


@device_fn
def _add(a, b):
    return a + b


@device_fn
def _mul(a, b):
    return a * b


@device_fn
def _max_nan(a, b):
    # a NaN in either operand wins (np.max propagates NaN)
    return a if (a >= b or a != a) else b


@device_fn
def _min_nan(a, b):
    return a if (a <= b or a != a) else b


@device_fn
def _or(a, b):
    return a or b


@device_fn
def _and(a, b):
    return a and b


@device_fn
def _argmax_better(v, i, bv, bi):
    """Whether (v, i) beats the current best (bv, bi) for argmax: a NaN first (the
    lowest index among NaNs), then the larger value, then the lower index."""
    if bv != bv:
        return v != v and i < bi
    if v != v:
        return True
    return v > bv or (v == bv and i < bi)


@device_fn
def _argmin_better(v, i, bv, bi):
    if bv != bv:
        return v != v and i < bi
    if v != v:
        return True
    return v < bv or (v == bv and i < bi)


_OPS = {
    "sum": (_map_cast, _add),
    "prod": (_map_cast, _mul),
    "sumsq": (_map_sq, _add),
    "abssum": (_map_abs, _add),
    "max": (_map_cast, _max_nan),
    "min": (_map_cast, _min_nan),
    "absmax": (_map_abs, _max_nan),
    "any": (_map_nonzero, _or),
    "all": (_map_nonzero, _and),
    "any_f16": (_map_nonzero_half, _or),
    "all_f16": (_map_nonzero_half, _and),
}
_ARG_OPS = {"argmax": _argmax_better, "argmin": _argmin_better}
REDUCE_OPS = tuple(op for op in _OPS if not op.endswith("_f16")) + tuple(_ARG_OPS)
SCAN_OPS = ("sum", "prod")

# ---- dtypes: (input, output) pairs each op is declared (PTX-checked) for --------------------------

_F16, _F32, _F64 = np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)
_I32, _I64, _BOOL = np.dtype(np.int32), np.dtype(np.int64), np.dtype(np.bool_)
_FLOAT_PAIRS = [(_F32, _F32), (_F16, _F16), (_F64, _F64)]
_PAIRS = {
    "sum": _FLOAT_PAIRS + [(_I32, _I64), (_I64, _I64), (_BOOL, _I64)],
    "prod": _FLOAT_PAIRS + [(_I32, _I64), (_I64, _I64)],
    "sumsq": _FLOAT_PAIRS,
    "abssum": _FLOAT_PAIRS,
    "absmax": _FLOAT_PAIRS,
    "max": _FLOAT_PAIRS + [(_I32, _I32), (_I64, _I64), (_BOOL, _BOOL)],
    "min": _FLOAT_PAIRS + [(_I32, _I32), (_I64, _I64), (_BOOL, _BOOL)],
    "any": [(d, _BOOL) for d in (_F32, _F64, _I32, _I64, _BOOL)],
    "all": [(d, _BOOL) for d in (_F32, _F64, _I32, _I64, _BOOL)],
    "any_f16": [(_F16, _BOOL)],
    "all_f16": [(_F16, _BOOL)],
    "argmax": [(d, _I64) for d in (_F32, _F16, _F64, _I32, _I64, _BOOL)],
    "argmin": [(d, _I64) for d in (_F32, _F16, _F64, _I32, _I64, _BOOL)],
}


def _nb(dt):
    return from_dtype(np.dtype(dt))


def _acc_dtype(dt):
    """Accumulation dtype for values of dtype ``dt``: float32 for float16, else ``dt``."""
    dt = np.dtype(dt)
    return _F32 if dt == _F16 else dt


def _reduce_acc(op, x_dtype, out_dtype):
    if op in _ARG_OPS:
        return _acc_dtype(x_dtype)
    if op in ("any", "all", "any_f16", "all_f16"):
        return _BOOL
    return _acc_dtype(out_dtype)


def _identity(op, acc):
    """The identity of ``op`` as a NumPy scalar of dtype ``acc`` (the kernels' seed)."""
    acc = np.dtype(acc)
    t = acc.type
    if op in ("sum", "sumsq", "abssum", "absmax"):
        return t(0)
    if op == "prod":
        return t(1)
    if op in ("any", "any_f16"):
        return np.bool_(False)
    if op in ("all", "all_f16"):
        return np.bool_(True)
    if op in ("max", "argmax", "min", "argmin"):
        low = op in ("max", "argmax")
        if acc.kind == "f":
            return t(-np.inf if low else np.inf)
        if acc.kind == "b":
            return np.bool_(not low)
        info = np.iinfo(acc)
        return t(info.min if low else info.max)
    raise ValueError(f"reduce_mid: unknown op {op!r}; expected one of {REDUCE_OPS}")


def _reduce_sigs(pairs, op):
    return [(nbt.Array(_nb(xd), 3, "C"), nbt.Array(_nb(od), 2, "C"), _nb(_reduce_acc(op, xd, od)))
            for xd, od in pairs]


def _scan_sigs(pairs):
    return [(nbt.Array(_nb(xd), 3, "C"), nbt.Array(_nb(od), 3, "C"), _nb(_acc_dtype(od)))
            for xd, od in pairs]


# ---- kernel factories ---------------------------------------------------------------------------
# A column kernel runs one thread per output (a, b), a row kernel one block per output; both
# call a device function ``body(a, b, x, out, ident, ..)`` that does one output's work.


def _col_kernel(body):
    """One thread per output ``(a, b)``: per column ``x[a, :, b]``."""
    return grid_kernel(__name__, "kernel", "x, out, ident", body, "x", (0, 2))


def _row_kernel(body, *shared_types):
    """One block of ``ROW_TPB`` threads per output ``(a, b)``, grid-striding over outputs;
    ``body(a, b, x, out, ident, t, sh0, ..)`` gets the thread index and one shared array of
    ``ROW_TPB`` elements per type in ``shared_types``. The loop over outputs is uniform
    over the block, so the barriers in ``body`` are safe."""
    sh = [f"sh{j}" for j in range(len(shared_types))]
    src = ("def kernel(x, out, ident):\n"
           + "".join(f"    {v} = cuda.shared.array(ROW_TPB, T{j})\n" for j, v in enumerate(sh))
           + "    B = x.shape[2]\n"
           "    n = x.shape[0] * B\n"
           "    t = cuda.threadIdx.x\n"
           "    r = cuda.blockIdx.x\n"
           "    while r < n:\n"
           "        a = r // B\n"
           f"        body(a, r - a * B, x, out, ident, t, {', '.join(sh)})\n"
           "        r += cuda.gridDim.x\n")
    env = {"cuda": cuda, "ROW_TPB": ROW_TPB, "body": body}
    env.update((f"T{j}", T) for j, T in enumerate(shared_types))
    return from_template(__name__, "kernel", src, env)


def _col_reduce(fmap, combine):
    @device_fn
    def body(a, b, x, out, ident):
        acc = ident
        for k in range(x.shape[1]):
            acc = combine(acc, fmap(x[a, k, b], ident))
        out[a, b] = acc
    return _col_kernel(body)


def _row_reduce(fmap, combine, acc_t):
    tree = block_tree(combine)

    @device_fn
    def body(a, b, x, out, ident, t, sh):
        """Each thread folds k = t, t + ROW_TPB, ...; then a tree over the block."""
        acc = ident
        k = t
        while k < x.shape[1]:
            acc = combine(acc, fmap(x[a, k, b], ident))
            k += ROW_TPB
        tree(sh, t, acc)
        # Only thread 0 reads sh[0] (and only it writes sh[0] for the next row), and
        # the tree's last barrier ended every other read: no barrier needed here.
        if t == 0:
            out[a, b] = sh[0]
    return _row_kernel(body, acc_t)


def _col_arg(better):
    @device_fn
    def body(a, b, x, out, ident):
        K = x.shape[1]
        bv = ident
        bi = K
        for k in range(K):
            v = type(ident)(x[a, k, b])
            if better(v, k, bv, bi):
                bv = v
                bi = k
        out[a, b] = bi
    return _col_kernel(body)


def _row_arg(better, acc_t):
    @device_fn
    def body(a, b, x, out, ident, t, sv, si):
        """Each thread's (value, index) best of k = t, t + ROW_TPB, ...; then the pairs
        reduced in shared memory (the tie rule makes the tree order irrelevant)."""
        K = x.shape[1]
        bv = ident
        bi = K
        k = t
        while k < K:
            v = type(ident)(x[a, k, b])
            if better(v, k, bv, bi):
                bv = v
                bi = k
            k += ROW_TPB
        sv[t] = bv
        si[t] = bi
        cuda.syncthreads()
        s = ROW_TPB // 2
        while s > 0:
            if t < s:
                if better(sv[t + s], si[t + s], sv[t], si[t]):
                    sv[t] = sv[t + s]
                    si[t] = si[t + s]
            cuda.syncthreads()
            s //= 2
        if t == 0:
            out[a, b] = si[0]
    return _row_kernel(body, acc_t, nbt.int64)


def _col_scan(combine):
    @device_fn
    def body(a, b, x, out, ident):
        """out[a, k, b] = combine of x[a, :k+1, b]."""
        acc = ident
        for k in range(x.shape[1]):
            acc = combine(acc, type(ident)(x[a, k, b]))
            out[a, k, b] = acc
    return _col_kernel(body)


def _row_scan(combine, acc_t):
    @device_fn
    def body(a, b, x, out, ident, t, sh):
        """Chunks of ROW_TPB elements are scanned in shared memory (Hillis-Steele) and
        offset by the carried total."""
        K = x.shape[1]
        carry = ident
        k0 = 0
        while k0 < K:
            k = k0 + t
            v = ident
            if k < K:
                v = type(ident)(x[a, k, b])
            sh[t] = v
            cuda.syncthreads()
            off = 1
            while off < ROW_TPB:
                w = ident
                if t >= off:
                    w = sh[t - off]
                cuda.syncthreads()
                if t >= off:
                    sh[t] = combine(w, sh[t])
                cuda.syncthreads()
                off *= 2
            if k < K:
                out[a, k, b] = combine(carry, sh[t])
            carry = combine(carry, sh[ROW_TPB - 1])
            cuda.syncthreads()  # every thread has read sh[ROW_TPB - 1] before the next chunk
            k0 += ROW_TPB
    return _row_kernel(body, acc_t)


# ---- declarations -------------------------------------------------------------------------------

_COL = {}
"""op -> column kernel."""
_ROW = {}
"""(op, accumulator dtype) -> row kernel (created on demand for undeclared dtypes)."""
_SCAN_COL = {}
_SCAN_ROW = {}


def _make_row(op, acc, pair=None):
    """Declare the row kernel of ``op`` accumulating in ``acc``; a kernel made on demand
    for an undeclared dtype gets the launch's ``(x dtype, out dtype)`` as its signature."""
    acc = np.dtype(acc)
    name = f"{__name__}._reduce_rows_{op}_{acc.name}"
    if op in _ARG_OPS:
        fn = _row_arg(_ARG_OPS[op], _nb(acc))
    else:
        fn = _row_reduce(*_OPS[op], _nb(acc))
    sigs = [s for s in _reduce_sigs(_PAIRS[op] + ([pair] if pair else []), op) if s[2] == _nb(acc)]
    k = _ROW[op, acc] = cuda_kernel(sigs, name=name)(fn)
    return k


def _make_scan_row(op, acc, pair=None):
    acc = np.dtype(acc)
    sigs = [s for s in _scan_sigs(_PAIRS[op] + ([pair] if pair else [])) if s[2] == _nb(acc)]
    fn = _row_scan(_add if op == "sum" else _mul, _nb(acc))
    k = _SCAN_ROW[op, acc] = cuda_kernel(sigs, name=f"{__name__}._scan_rows_{op}_{acc.name}")(fn)
    return k


for _op in tuple(_OPS) + tuple(_ARG_OPS):
    if _op in _ARG_OPS:
        _fn = _col_arg(_ARG_OPS[_op])
    else:
        _fn = _col_reduce(*_OPS[_op])
    _COL[_op] = cuda_kernel(_reduce_sigs(_PAIRS[_op], _op), name=f"{__name__}._reduce_cols_{_op}")(_fn)
    for _acc in sorted({_reduce_acc(_op, xd, od) for xd, od in _PAIRS[_op]}, key=str):
        _make_row(_op, _acc)

for _op in SCAN_OPS:
    _SCAN_COL[_op] = cuda_kernel(_scan_sigs(_PAIRS[_op]), name=f"{__name__}._scan_cols_{_op}")(
        _col_scan(_add if _op == "sum" else _mul))
    for _acc in sorted({_acc_dtype(od) for _, od in _PAIRS[_op]}, key=str):
        _make_scan_row(_op, _acc)


# ---- launchers ----------------------------------------------------------------------------------

_ROWS_MIN_K = 2 if SIM else 16
"""Below this many elements per output, a row block would idle most of its threads."""
_ROWS_MAX_OUTPUTS = 4 if SIM else 2048
_ROWS_LONG_K = 16 if SIM else 4096
"""With B > 1, use one block per output anyway when there are at most
``_ROWS_MAX_OUTPUTS`` outputs and each folds at least ``_ROWS_LONG_K`` elements: the
column kernel would run too few threads (its reads stay uncoalesced in rows)."""
_SCAN_ROWS_MIN_K = ROW_TPB // 2
"""Contiguous rows (B == 1) at least this long are scanned one block per row (at least
half the block busy); shorter ones one thread per row."""


def _use_rows(A, K, B):
    if B == 1:
        return K >= _ROWS_MIN_K
    return A * B <= _ROWS_MAX_OUTPUTS and K >= _ROWS_LONG_K


def reduce_mid(x, out, op):
    """``out[a, b] = op(x[a, :, b])`` for a C-contiguous ``(A, K, B)`` ``x`` into a
    C-contiguous ``(A, B)`` ``out`` (see the module docstring for the ops and dtypes)."""
    A, K, B = x.shape
    _reduce_mid(x, out, op, _use_rows(A, K, B))


def _reduce_mid(x, out, op, rows):
    """:func:`reduce_mid` with the kernel family forced (``rows``: one block per output)."""
    if op not in REDUCE_OPS:
        raise ValueError(f"reduce_mid: unknown op {op!r}; expected one of {REDUCE_OPS}")
    if op in ("any", "all") and x.dtype == _F16:
        op += "_f16"
    A, K, B = x.shape
    n = A * B
    if n == 0:
        return
    acc = _reduce_acc(op, x.dtype, out.dtype)
    ident = _identity(op, acc)
    if rows:
        k = _ROW.get((op, acc)) or _make_row(op, acc, (np.dtype(x.dtype), np.dtype(out.dtype)))
        launch_rows(k, n, x, out, ident)
    else:
        launch(_COL[op], n, x, out, ident)


def scan_mid(x, out, op):
    """``out[a, k, b] = op(x[a, :k+1, b])`` (``op`` "sum" or "prod", NumPy's cumsum /
    cumprod) for C-contiguous ``(A, K, B)`` ``x`` and ``out``."""
    A, K, B = x.shape
    _scan_mid(x, out, op, B == 1 and K >= _SCAN_ROWS_MIN_K)


def _scan_mid(x, out, op, rows):
    if op not in SCAN_OPS:
        raise ValueError(f"scan_mid: unknown op {op!r}; expected one of {SCAN_OPS}")
    A, K, B = x.shape
    n = A * B
    if n == 0 or K == 0:
        return
    acc = _acc_dtype(out.dtype)
    ident = acc.type(0 if op == "sum" else 1)
    if rows:
        k = _SCAN_ROW.get((op, acc)) or _make_scan_row(op, acc, (np.dtype(x.dtype), np.dtype(out.dtype)))
        launch_rows(k, n, x, out, ident)
    else:
        launch(_SCAN_COL[op], n, x, out, ident)


KERNELS = (tuple(_COL.values()) + tuple(_ROW.values())
           + tuple(_SCAN_COL.values()) + tuple(_SCAN_ROW.values()))
"""Every kernel declared by this module at import (for the PTX check)."""

__all__ = ["reduce_mid", "scan_mid", "REDUCE_OPS", "SCAN_OPS"]
