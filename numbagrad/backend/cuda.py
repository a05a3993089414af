"""The CUDA backend: :class:`CudaArray` device arrays, a caching allocator, CUDA kernels.

This module is imported lazily, the first time a CUDA device is asked for
(``backend_for_device("cuda")``), so ``import numbagrad`` never touches CUDA. When numba's
CUDA target is missing or finds no GPU, :func:`available` is False and asking for CUDA
raises one clear error (``numbagrad.backend.dispatch``). Under
``NUMBA_ENABLE_CUDASIM=1`` the backend runs on numba's simulator (kernels execute as
Python on the CPU): that is how the CUDA test suite runs without a GPU.

The primitives keep the CPU backend's names (:class:`CUDABackend` subclasses it). The
CPU primitives that are plain NumPy calls (``np.exp``, ``np.sum``, ``np.pad``, ...) work
unchanged because :class:`CudaArray` implements NumPy's dispatch protocols; the table
:data:`FUNCTIONS` and :meth:`CUDABackend.array_ufunc` route them to CUDA kernels:

* ufuncs -> ``kernels/cuda/elementwise.py`` (flat kernels for same-shape contiguous
  operands or one scalar, an offset/stride kernel for broadcasting and strided views);
* reductions and scans -> ``kernels/cuda/reduce.py`` on a canonical ``(A, K, B)``
  layout (reduce the middle axis), after at most one transposing copy;
* matmul -> ``kernels/cuda/matmul.py`` (a tiled shared-memory GEMM over a batch);
* shape functions -> views plus the strided copy kernel.
"""
import numbers

import numpy as np

from ..device import device as _device
from .base import Backend
from .dispatch import register_backend
from .cuda_array import CudaArray, _contig_strides, _prod

_cuda = None          # numba.cuda, imported on first use (it costs ~0.25 s)
_IMPORT_ERROR = None


def _load():
    global _cuda, _IMPORT_ERROR
    if _cuda is None and _IMPORT_ERROR is None:
        try:
            from numba import cuda
            _cuda = cuda
        except Exception as e:  # numba-cuda not installed
            _IMPORT_ERROR = e
    return _cuda


def available():
    """True when numba's CUDA target is importable and finds a GPU (or the simulator)."""
    if _load() is None:
        return False
    try:
        return bool(_cuda.is_available())
    except Exception:
        return False


def unavailable_reason():
    if _cuda is None:
        return f"numba's CUDA target could not be imported ({_IMPORT_ERROR}); install numbagrad[cuda]"
    return "numba found no usable CUDA GPU/driver"


# ---- module state set up by _init() ------------------------------------------------------------
_POOL = None
_EW = None      # kernels.cuda.elementwise
_L = None       # kernels.cuda._launch
MAXD = 6


def _init():
    global _POOL, _EW, _L, MAXD
    from ..kernels.cuda import _launch, elementwise
    from .cuda_memory import Pool
    _L = _launch
    _EW = elementwise
    MAXD = elementwise.MAXD
    _POOL = Pool(_cuda, _launch.SIM)
    _launch.set_allocator(_alloc)   # launchers' scratch arrays from the pool (injected: kernels sit below)


# ---- allocation ------------------------------------------------------------------------------------
def _alloc(shape, dtype):
    shape = tuple(int(s) for s in shape)
    dtype = np.dtype(dtype)
    blk = _POOL.alloc(_prod(shape) * dtype.itemsize)
    return CudaArray(blk, 0, shape, _contig_strides(shape), dtype)


def _is_scalar(x):
    return isinstance(x, (numbers.Number, np.generic, bool)) or (isinstance(x, np.ndarray) and x.ndim == 0)


def _check_same_device(opname, *xs):
    for x in xs:
        if isinstance(x, np.ndarray) and x.ndim > 0:
            raise RuntimeError(f"{opname}: expected all arrays to be on the same device, got a CUDA array "
                               f"and a CPU array of shape {x.shape}")


def _flat(a):
    """A contiguous 1-D numba device array whose first ``a.size`` elements are ``a``'s (``a``
    must be C-contiguous; flat kernels take the count ``n`` and never read past it). An
    array that starts its block gets the whole block's typed array, which the pool caches
    per allocation (numba then types it once, not at every launch); others a view."""
    return a.base_array if a._off == 0 else a.reshape(-1).dev


def _collapse(shape, *strides_list):
    """Drop size-1 dims and merge dims contiguous in every operand; pad to MAXD."""
    dims = [(n, [st[k] for st in strides_list]) for k, n in enumerate(shape) if n != 1]
    merged = []
    for n, sts in dims:
        if merged:
            pn, psts = merged[-1]
            if all(ps == s * n for ps, s in zip(psts, sts)):
                merged[-1] = (pn * n, sts)
                continue
        merged.append((n, sts))
    if len(merged) > MAXD:
        raise NotImplementedError(f"CUDA elementwise kernels handle up to {MAXD} non-mergeable dimensions, "
                                  f"got shape {shape}")
    pad = MAXD - len(merged)
    shp = (1,) * pad + tuple(n for n, _ in merged)
    out = [(0,) * pad + tuple(sts[i] for _, sts in merged) for i in range(len(strides_list))]
    return shp, out


def _nd_operands(shape, arrays):
    views = [a.broadcast_to(shape) for a in arrays]
    shp, sts = _collapse(shape, *[v._st for v in views])
    args = []
    for v, st in zip(views, sts):
        args += [v.base_array, v._off, st]
    return shp, args


def _scalar_array(v, dtype):
    a = _alloc((), dtype)
    _L.launch(_EW.fill_flat, 1, 1, a.reshape(1).dev, dtype.type(v))
    return a


# ---- copies ------------------------------------------------------------------------------------------
def assign(dst, value):
    """``dst[...] = value`` (a scalar, a CudaArray broadcast to ``dst``, or a host array)."""
    n = dst.size
    if n == 0:
        return
    if _is_scalar(value):
        v = dst.dtype.type(value.item() if isinstance(value, np.ndarray) else value)
        if dst.is_c_contiguous():
            _L.launch(_EW.fill_flat, n, n, _flat(dst), v)
        else:
            shp, (st,) = _collapse(dst.shape, dst._st)
            _L.launch(_EW.fill_nd, n, n, dst.base_array, dst._off, shp, st, v)
        return
    if isinstance(value, np.ndarray):
        value = from_numpy(value)
    if not isinstance(value, CudaArray):
        raise TypeError(f"cannot assign a {type(value).__name__} to a CUDA array")
    while value.ndim > dst.ndim and value.shape[0] == 1:  # NumPy drops leading 1-dims here
        value = value[0]
    src = value.broadcast_to(dst.shape)
    if dst.dtype == np.bool_ and src.dtype != np.bool_:
        kern = _EW.to_bool_nd
    elif src.dtype == dst.dtype and dst.is_c_contiguous() and src.is_c_contiguous():
        _L.launch(_EW.copy_flat, n, n, _flat(src), _flat(dst))
        return
    else:
        kern = _EW.copy_nd
    if src._blk is dst._blk and _overlaps(src, dst):
        src = copy(src)
    shp, (ss, ds) = _collapse(dst.shape, src._st, dst._st)
    _L.launch(kern, n, n, shp, src.base_array, src._off, ss, dst.base_array, dst._off, ds)


def _overlaps(a, b):
    def span(x):
        lo = hi = x._off
        for n, s in zip(x.shape, x._st):
            if s > 0:
                hi += (n - 1) * s
            else:
                lo += (n - 1) * s
        return lo, hi
    (al, ah), (bl, bh) = span(a), span(b)
    if a.dtype.itemsize != b.dtype.itemsize:
        return True
    return not (ah < bl or bh < al)


def copy(a, dtype=None):
    out = _alloc(a.shape, a.dtype if dtype is None else dtype)
    assign(out, a)
    return out


def from_numpy(host):
    shape = np.shape(host)
    host = np.ascontiguousarray(host)  # (makes 0-d inputs 1-d: the shape is kept above)
    out = _alloc(shape, host.dtype)
    if out.size:
        out.reshape(-1).dev.copy_to_device(host.reshape(-1))
    return out


def to_numpy(a):
    if a.size == 0:
        return np.empty(a.shape, a.dtype)
    src = a if (a.is_c_contiguous() and all(s >= 0 for s in a._st)) else copy(a)
    return src.reshape(-1).dev.copy_to_host().reshape(a.shape)


# ---- ufuncs --------------------------------------------------------------------------------------------
_RESOLVED = {}


def _resolve(ufunc, keys):
    k = (ufunc, keys)
    r = _RESOLVED.get(k)
    if r is None:
        r = _RESOLVED[k] = ufunc.resolve_dtypes(keys + (None,) * ufunc.nout)
    return r


def _key(x):
    if isinstance(x, CudaArray):
        return x.dtype
    if isinstance(x, (bool, np.bool_)):
        return bool if isinstance(x, bool) else np.dtype(np.bool_)
    if isinstance(x, np.generic):
        return x.dtype
    if isinstance(x, np.ndarray):
        return x.dtype
    if isinstance(x, numbers.Integral):
        return int
    if isinstance(x, numbers.Real):
        return float
    raise TypeError(f"unsupported operand of type {type(x).__name__} for a CUDA ufunc")


def elementwise(ufunc, inputs, out=None):
    _check_same_device(ufunc.__name__, *inputs)
    inputs = tuple(x[()] if isinstance(x, np.ndarray) else x for x in inputs)
    try:
        dts = _resolve(ufunc, tuple(_key(x) for x in inputs))
    except TypeError as e:
        raise TypeError(f"{ufunc.__name__}: no CUDA loop for operand dtypes "
                        f"{[str(_key(x)) for x in inputs]} ({e})") from None
    nin = ufunc.nin
    in_dts, out_dt = dts[:nin], dts[nin]
    ops = []
    for x, dt in zip(inputs, in_dts):
        if isinstance(x, CudaArray):
            ops.append(x if x.dtype == dt else copy(x, dt))
        else:
            ops.append(dt.type(x))
    half = any(dt == np.float16 for dt in in_dts)
    kerns = _EW.KERNELS.get((ufunc, half))
    if kerns is None:
        raise TypeError(f"numpy.{ufunc.__name__} is not implemented for CUDA arrays")
    arrays = [x for x in ops if isinstance(x, CudaArray)]
    shape = np.broadcast_shapes(*[a.shape for a in arrays]) if arrays else ()
    if out is not None:
        if out.shape != shape:
            raise ValueError(f"{ufunc.__name__}: output shape {out.shape} doesn't match the broadcast shape {shape}")
        if out.dtype != out_dt:
            tmp = elementwise(ufunc, inputs)
            assign(out, tmp)
            return out
        res = out
    else:
        res = _alloc(shape, out_dt)
    n = res.size
    if n == 0:
        return res
    contig = res.is_c_contiguous()
    if nin == 1:
        (a,) = ops
        if contig and a.is_c_contiguous() and a.shape == shape:
            _L.launch(kerns["v"], n, n, _flat(a), _flat(res))
        else:
            shp, args = _nd_operands(shape, [a, res])
            _L.launch(kerns["nd"], n, n, shp, *args)
        return res
    a, b = ops
    sa, sb = not isinstance(a, CudaArray), not isinstance(b, CudaArray)
    if contig:
        if not sa and not sb and a.shape == b.shape == shape and a.is_c_contiguous() and b.is_c_contiguous():
            _L.launch(kerns["vv"], n, n, _flat(a), _flat(b), _flat(res))
            return res
        if sb and a.shape == shape and a.is_c_contiguous():
            _L.launch(kerns["vs"], n, n, _flat(a), b, _flat(res))
            return res
        if sa and b.shape == shape and b.is_c_contiguous():
            _L.launch(kerns["sv"], n, n, a, _flat(b), _flat(res))
            return res
    if sa:
        a = _scalar_array(a, in_dts[0])
    if sb:
        b = _scalar_array(b, in_dts[1])
    if res._blk in (a._blk, b._blk) and (_overlaps(res, a) and res._st != a.broadcast_to(shape)._st
                                         or _overlaps(res, b) and res._st != b.broadcast_to(shape)._st):
        tmp = elementwise(ufunc, (a, b))
        assign(res, tmp)
        return res
    shp, args = _nd_operands(shape, [a, b, res])
    _L.launch(kerns["nd"], n, n, shp, *args)
    return res


def where(cond, a=None, b=None):
    if a is None and b is None:
        return nonzero(cond)
    _check_same_device("where", cond, a, b)
    cond = cond if isinstance(cond, CudaArray) else _scalar_array(bool(cond), np.dtype(np.bool_))
    if cond.dtype != np.bool_:
        cond = copy(cond, np.bool_)
    dt = np.result_type(*[x.dtype if isinstance(x, CudaArray) else
                          (x if not isinstance(x, (np.generic, np.ndarray)) else x.dtype) for x in (a, b)])
    ops = []
    for x in (a, b):
        if isinstance(x, CudaArray):
            ops.append(x if x.dtype == dt else copy(x, dt))
        else:
            ops.append(_scalar_array(x, dt))
    shape = np.broadcast_shapes(cond.shape, ops[0].shape, ops[1].shape)
    res = _alloc(shape, dt)
    if res.size:
        shp, args = _nd_operands(shape, [cond, ops[0], ops[1], res])
        _L.launch(_EW.where_nd, res.size, res.size, shp, *args)
    return res


# ---- reductions ----------------------------------------------------------------------------------------
def _axes(axis, ndim):
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, numbers.Integral):
        axis = (axis,)
    out = []
    for a in axis:
        a = int(a)
        if not -max(ndim, 1) <= a < max(ndim, 1):
            raise np.exceptions.AxisError(a, ndim)
        out.append(a % ndim if ndim else 0)
    return tuple(sorted(set(out)))


def _canonical(a, axes):
    """``a`` as a contiguous (A, K, B) array reducing over K, and the kept shape."""
    nd = a.ndim
    kept = [k for k in range(nd) if k not in axes]
    K = _prod(a.shape[k] for k in axes)
    run = bool(axes) and list(axes) == list(range(axes[0], axes[-1] + 1))
    if run and a.is_c_contiguous() and all(s >= 0 for s in a._st):
        A = _prod(a.shape[:axes[0]])
        B = _prod(a.shape[axes[-1] + 1:])
        return a.reshape(A, K, B), kept
    x = copy(a.transpose(kept + list(axes)))
    return x.reshape(_prod(a.shape[k] for k in kept), K, 1), kept


def _reduce(op, a, axis=None, keepdims=False, out_dtype=None, opname=None):
    from ..kernels.cuda.reduce import reduce_mid
    a = a if isinstance(a, CudaArray) else from_numpy(np.asarray(a))
    axes = _axes(axis, a.ndim)
    x3, kept = _canonical(a, axes)
    if x3.shape[1] == 0 and op in ("max", "min", "argmax", "argmin"):
        raise ValueError(f"zero-size array to reduction operation {opname or op} which has no identity")
    out = _alloc((x3.shape[0], x3.shape[2]), out_dtype or a.dtype)
    if out.size:
        reduce_mid(x3, out, op)
    shape = tuple(1 if k in axes else a.shape[k] for k in range(a.ndim)) if keepdims else \
        tuple(a.shape[k] for k in kept)
    return out.reshape(shape)


def _sum_dtype(dt, dtype):
    if dtype is not None:
        return np.dtype(dtype)
    if dt.kind in "biu":
        return np.dtype(np.int64) if dt.kind != "u" else np.dtype(np.uint64)
    return dt


def sum(a, axis=None, dtype=None, out=None, keepdims=False, **kw):
    r = _reduce("sum", a, axis, keepdims, _sum_dtype(a.dtype, dtype))
    return _to_out(r, out)


def prod(a, axis=None, dtype=None, out=None, keepdims=False, **kw):
    return _to_out(_reduce("prod", a, axis, keepdims, _sum_dtype(a.dtype, dtype)), out)


def amax(a, axis=None, out=None, keepdims=False, **kw):
    return _to_out(_reduce("max", a, axis, keepdims, opname="maximum"), out)


def amin(a, axis=None, out=None, keepdims=False, **kw):
    return _to_out(_reduce("min", a, axis, keepdims, opname="minimum"), out)


def _arg(op, a, axis=None, out=None, keepdims=False):
    if axis is None:
        r = _reduce(op, a.reshape(-1), 0, False, np.dtype(np.int64), opname=op)
        return r.reshape((1,) * a.ndim) if keepdims else r
    return _reduce(op, a, axis, keepdims, np.dtype(np.int64), opname=op)


def argmax(a, axis=None, out=None, keepdims=False):
    return _arg("argmax", a, axis, out, keepdims)


def argmin(a, axis=None, out=None, keepdims=False):
    return _arg("argmin", a, axis, out, keepdims)


def any_(a, axis=None, out=None, keepdims=False, **kw):
    return _reduce("any", a, axis, keepdims, np.dtype(np.bool_))


def all_(a, axis=None, out=None, keepdims=False, **kw):
    return _reduce("all", a, axis, keepdims, np.dtype(np.bool_))


def mean(a, axis=None, dtype=None, out=None, keepdims=False, **kw):
    dt = np.dtype(dtype) if dtype is not None else (a.dtype if a.dtype.kind == "f" else np.dtype(np.float64))
    axes = _axes(axis, a.ndim)
    n = _prod(a.shape[k] for k in axes)
    s = _reduce("sum", a, axis, keepdims, dt)
    return _to_out(elementwise(np.true_divide, (s, dt.type(n) if n else dt.type(0))), out)


def var(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, **kw):
    dt = np.dtype(dtype) if dtype is not None else (a.dtype if a.dtype.kind == "f" else np.dtype(np.float64))
    axes = _axes(axis, a.ndim)
    n = _prod(a.shape[k] for k in axes)
    m = mean(a, axis=axis, dtype=dt, keepdims=True)
    d = elementwise(np.subtract, (a if a.dtype == dt else copy(a, dt), m))
    s = _reduce("sumsq", d, axis, keepdims, dt)
    return _to_out(elementwise(np.true_divide, (s, dt.type(max(n - ddof, 0)))), out)


def std(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, **kw):
    return _to_out(elementwise(np.sqrt, (var(a, axis, dtype, None, ddof, keepdims),)), out)


def _scan(op, a, axis=None, dtype=None, out=None):
    from ..kernels.cuda.reduce import scan_mid
    if axis is None:
        a, axis = a.reshape(-1), 0
    axis = _axes(axis, a.ndim)[0] if a.ndim else 0
    dt = _sum_dtype(a.dtype, dtype)
    x = ascontiguousarray(a.reshape(1) if a.ndim == 0 else a, dt)
    A, K, B = _prod(x.shape[:axis]), x.shape[axis], _prod(x.shape[axis + 1:])
    res = _alloc(x.shape, dt)
    if res.size:
        scan_mid(x.reshape(A, K, B), res.reshape(A, K, B), op)
    return _to_out(res.reshape(a.shape) if a.ndim else res, out)


def cumsum(a, axis=None, dtype=None, out=None):
    return _scan("sum", a, axis, dtype, out)


def cumprod(a, axis=None, dtype=None, out=None):
    return _scan("prod", a, axis, dtype, out)


def _to_out(r, out):
    if out is None:
        return r
    out = out[0] if isinstance(out, tuple) else out
    assign(out, r)
    return out


# ---- matmul ----------------------------------------------------------------------------------------------
def _batch3(x, batch, m, n):
    """``x`` broadcast to ``batch + (m, n)`` as a 3-D view (copying only if needed)."""
    v = x.broadcast_to(tuple(batch) + (m, n))
    if any(s < 0 for s in v._st):
        v = copy(v)
    if not batch:
        return v._view((1, m, n), (0,) + v._st, v._off)
    shp, sts = _collapse(tuple(batch), v._st[:len(batch)])
    bdims = [(s, st) for s, st in zip(shp, sts[0]) if s != 1]
    if len(bdims) <= 1:
        bt, bs = bdims[0] if bdims else (1, 0)
        return v._view((bt, m, n), (bs,) + v._st[-2:], v._off)
    c = copy(v)
    return c.reshape(_prod(batch), m, n)


def matmul(a, b, out=None):
    from ..kernels.cuda.matmul import matmul as _mm
    _check_same_device("matmul", a, b)
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError("matmul: Input operand does not have enough dimensions")
    dt = _resolve(np.matmul, (a.dtype, b.dtype))[2]
    a = a if a.dtype == dt else copy(a, dt)
    b = b if b.dtype == dt else copy(b, dt)
    a2 = a.reshape(1, -1) if a.ndim == 1 else a
    b2 = b.reshape(-1, 1) if b.ndim == 1 else b
    M, K = a2.shape[-2:]
    K2, N = b2.shape[-2:]
    if K != K2:
        raise ValueError(f"matmul: Input operand 1 has a mismatch in its core dimension 0 "
                         f"(size {K2} is different from {K}); shapes {a.shape} and {b.shape}")
    batch = np.broadcast_shapes(a2.shape[:-2], b2.shape[:-2])
    res = _alloc(tuple(batch) + (M, N), dt)
    if res.size:
        if K == 0:
            assign(res, 0)
        else:
            _mm(_batch3(a2, batch, M, K), _batch3(b2, batch, K, N), res.reshape(_prod(batch), M, N))
    shape = tuple(batch) + ((M,) if a.ndim > 1 else ()) + ((N,) if b.ndim > 1 else ())
    return _to_out(res.reshape(shape), out)


# ---- shape functions -------------------------------------------------------------------------------------
def _norm_axis(axis, ndim):
    if not -ndim <= axis < ndim:
        raise np.exceptions.AxisError(axis, ndim)
    return axis % ndim


def concatenate(arrays, axis=0, out=None, dtype=None, **kw):
    arrays = [x if isinstance(x, CudaArray) else from_numpy(np.asarray(x)) for x in arrays]
    if axis is None:
        arrays, axis = [x.reshape(-1) for x in arrays], 0
    nd = arrays[0].ndim
    axis = _norm_axis(axis, nd)
    dt = np.dtype(dtype) if dtype is not None else np.result_type(*[x.dtype for x in arrays])
    for x in arrays:
        if x.ndim != nd or any(x.shape[k] != arrays[0].shape[k] for k in range(nd) if k != axis):
            raise ValueError(f"concatenate: all the input array dimensions except for the concatenation axis "
                             f"must match exactly; got shapes {[y.shape for y in arrays]}")
    shape = list(arrays[0].shape)
    shape[axis] = builtins_sum(x.shape[axis] for x in arrays)
    res = _alloc(shape, dt)
    pos = 0
    for x in arrays:
        k = x.shape[axis]
        if k:
            idx = (slice(None),) * axis + (slice(pos, pos + k),)
            assign(res[idx], x)
        pos += k
    return _to_out(res, out)


def stack(arrays, axis=0, out=None, **kw):
    arrays = list(arrays)
    nd = arrays[0].ndim + 1
    axis = _norm_axis(axis, nd)
    for x in arrays:
        if x.shape != arrays[0].shape:
            raise ValueError("stack: all input arrays must have the same shape")
    return _to_out(concatenate([expand_dims(x, axis) for x in arrays], axis), out)


def expand_dims(a, axis):
    axes = (axis,) if isinstance(axis, numbers.Integral) else tuple(axis)
    nd = a.ndim + len(axes)
    axes = sorted(_norm_axis(x, nd) for x in axes)
    shape = list(a.shape)
    for x in axes:
        shape.insert(x, 1)
    st = list(a._st)
    for x in axes:
        st.insert(x, 0)
    return a._view(shape, st, a._off)


def flip(m, axis=None):
    axes = _axes(axis, m.ndim)
    off = m._off
    st = list(m._st)
    for k in axes:
        if m.shape[k]:
            off += (m.shape[k] - 1) * st[k]
        st[k] = -st[k]
    return copy(m._view(m.shape, st, off))


def roll(a, shift, axis=None):
    if axis is None:
        return roll(a.reshape(-1), shift, 0).reshape(a.shape)
    shifts = (shift,) if isinstance(shift, numbers.Integral) else tuple(shift)
    axes = (axis,) if isinstance(axis, numbers.Integral) else tuple(axis)
    if len(shifts) == 1:
        shifts = shifts * len(axes)
    res = a
    for s, ax in zip(shifts, axes):
        ax = _norm_axis(ax, a.ndim)
        n = a.shape[ax]
        s = s % n if n else 0
        if not s:
            continue
        pre = (slice(None),) * ax
        res = concatenate([res[pre + (slice(n - s, n),)], res[pre + (slice(0, n - s),)]], axis=ax)
    return res if res is not a else copy(a)


def pad(array, pad_width, mode="constant", constant_values=0, **kw):
    a = array
    pw = np.broadcast_to(np.asarray(pad_width, dtype=np.int64), (a.ndim, 2)).tolist()
    shape = [n + lo + hi for n, (lo, hi) in zip(a.shape, pw)]
    res = _alloc(shape, a.dtype)
    inner = tuple(slice(lo, lo + n) for n, (lo, hi) in zip(a.shape, pw))
    if mode == "constant":
        assign(res, constant_values if _is_scalar(constant_values) else 0)
        assign(res[inner], a)
        return res
    assign(res[inner], a)
    # edge / reflect / symmetric / wrap, one axis at a time, by copying slabs
    for ax, (lo, hi) in enumerate(pw):
        n = a.shape[ax]
        pre = (slice(None),) * ax
        for j in range(lo):      # position lo-1-j, i.e. distance j+1 to the left of the data
            d = j + 1
            src = _pad_src(mode, n, -d)
            assign(res[pre + (lo - d,)], res[pre + (lo + src,)])
        for j in range(hi):
            d = j + 1
            src = _pad_src(mode, n, n - 1 + d)
            assign(res[pre + (lo + n - 1 + d,)], res[pre + (lo + src,)])
    return res


def _pad_src(mode, n, i):
    """The data index that padding position ``i`` (outside [0, n)) copies."""
    if mode == "edge":
        return 0 if i < 0 else n - 1
    if mode == "wrap":
        return i % n
    if mode == "reflect":
        if n == 1:
            return 0
        p = 2 * (n - 1)
        i = i % p
        return i if i < n else p - i
    if mode == "symmetric":
        p = 2 * n
        i = i % p
        return i if i < n else p - 1 - i
    raise NotImplementedError(f"pad: mode {mode!r} is not implemented for CUDA arrays")


def moveaxis(a, source, destination):
    src = [source] if isinstance(source, numbers.Integral) else list(source)
    dst = [destination] if isinstance(destination, numbers.Integral) else list(destination)
    src = [_norm_axis(s, a.ndim) for s in src]
    dst = [_norm_axis(d, a.ndim) for d in dst]
    order = [k for k in range(a.ndim) if k not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return a.transpose(order)


def split(ary, indices_or_sections, axis=0):
    n = ary.shape[axis]
    if isinstance(indices_or_sections, numbers.Integral):
        if n % indices_or_sections:
            raise ValueError("array split does not result in an equal division")
        step = n // indices_or_sections
        bounds = list(range(0, n + 1, step))
    else:
        bounds = [0] + list(indices_or_sections) + [n]
    pre = (slice(None),) * _norm_axis(axis, ary.ndim)
    return [ary[pre + (slice(lo, hi),)] for lo, hi in zip(bounds[:-1], bounds[1:])]


def nonzero(a):
    h = to_numpy(a)
    return tuple(from_numpy(i) for i in np.nonzero(h))


def clip(a, a_min=None, a_max=None, out=None, **kw):
    r = a
    if a_min is not None:
        r = elementwise(np.maximum, (r, a_min))
    if a_max is not None:
        r = elementwise(np.minimum, (r, a_max))
    return _to_out(r if r is not a else copy(a), out)


def take(a, indices, axis=None, out=None, mode="raise"):
    from ..kernels.cuda.indexing import _index_select_fwd_cuda
    if axis is None:
        a, axis = a.reshape(-1), 0
    axis = _norm_axis(axis, a.ndim)
    idx = indices if isinstance(indices, CudaArray) else from_numpy(np.asarray(indices, dtype=np.int64))
    flat = copy(idx, np.int64).reshape(-1) if idx.dtype != np.int64 or not idx.is_c_contiguous() else idx.reshape(-1)
    ac = a if a.is_c_contiguous() else copy(a)
    A = _prod(a.shape[:axis])
    N = a.shape[axis]
    B = _prod(a.shape[axis + 1:])
    res = _alloc((A, flat.size, B), a.dtype)
    if res.size:
        _index_select_fwd_cuda(ac.reshape(A, N, B), flat, res)
    return _to_out(res.reshape(a.shape[:axis] + idx.shape + a.shape[axis + 1:]), out)


def ascontiguousarray(a, dtype=None, **kw):
    if dtype is not None and np.dtype(dtype) != a.dtype:
        return copy(a, dtype)
    return a if a.is_c_contiguous() and all(s >= 0 for s in a._st) else copy(a)


def copyto(dst, src, casting="same_kind", where=None):
    if where is not None:
        src = globals()["where"](where, src, dst)
    assign(dst, src)


def empty_like(prototype, dtype=None, shape=None, **kw):
    return _alloc(prototype.shape if shape is None else shape, prototype.dtype if dtype is None else dtype)


def zeros_like(a, dtype=None, shape=None, **kw):
    r = empty_like(a, dtype, shape)
    assign(r, 0)
    return r


def ones_like(a, dtype=None, shape=None, **kw):
    r = empty_like(a, dtype, shape)
    assign(r, 1)
    return r


def full_like(a, fill_value, dtype=None, shape=None, **kw):
    r = empty_like(a, dtype, shape)
    assign(r, fill_value)
    return r


def _isclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    d = elementwise(np.absolute, (elementwise(np.subtract, (a, b)),))
    lim = elementwise(np.add, (elementwise(np.multiply, (elementwise(np.absolute, (b,)) if isinstance(b, CudaArray)
                                                          else abs(b), rtol)), atol))
    r = elementwise(np.less_equal, (d, lim))
    if equal_nan:
        r = elementwise(np.logical_or, (r, elementwise(np.logical_and, (elementwise(np.isnan, (a,)),
                                                                          elementwise(np.isnan, (b,))))))
    return r


def allclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    return bool(all_(_isclose(a, b, rtol, atol, equal_nan)).item())


def _round(a, decimals=0, out=None):
    if decimals:
        s = 10.0 ** decimals
        return _to_out(elementwise(np.true_divide, (elementwise(np.rint, (elementwise(np.multiply, (a, s)),)), s)), out)
    return _to_out(elementwise(np.rint, (a,)), out)


def result_type(*arrays_and_dtypes):
    return np.result_type(*[x.dtype if isinstance(x, CudaArray) else x for x in arrays_and_dtypes])


def _shape(a):
    return a.shape


builtins_sum = __builtins__["sum"] if isinstance(__builtins__, dict) else __builtins__.sum

FUNCTIONS = {
    np.sum: sum, np.prod: prod, np.max: amax, np.amax: amax, np.min: amin, np.amin: amin,
    np.argmax: argmax, np.argmin: argmin, np.any: any_, np.all: all_, np.mean: mean,
    np.var: var, np.std: std, np.cumsum: cumsum, np.cumprod: cumprod,
    np.reshape: lambda a, *shape, **kw: a.reshape(*shape),
    np.ravel: lambda a, order="C": a.reshape(-1),
    np.transpose: lambda a, axes=None: a.transpose(axes) if axes is not None else a.transpose(),
    np.swapaxes: lambda a, x, y: a.swapaxes(x, y), np.moveaxis: moveaxis,
    np.expand_dims: expand_dims, np.squeeze: lambda a, axis=None: a.squeeze(axis),
    np.broadcast_to: lambda a, shape, subok=False: a.broadcast_to(shape),
    np.ascontiguousarray: ascontiguousarray, np.copyto: copyto,
    np.copy: lambda a, order="K", subok=False: copy(a),
    np.concatenate: concatenate, np.stack: stack, np.split: split, np.array_split: split,
    np.flip: flip, np.roll: roll, np.pad: pad, np.where: where, np.clip: clip, np.take: take,
    np.nonzero: nonzero, np.empty_like: empty_like, np.zeros_like: zeros_like,
    np.ones_like: ones_like, np.full_like: full_like, np.shape: _shape,
    np.ndim: lambda a: a.ndim, np.size: lambda a, axis=None: a.size if axis is None else a.shape[axis],
    np.result_type: result_type, np.isclose: _isclose, np.allclose: allclose,
    np.round: _round, np.around: _round, np.matmul: matmul,
    np.may_share_memory: lambda a, b, max_work=None: (isinstance(a, CudaArray) and isinstance(b, CudaArray)
                                                      and a._blk is b._blk and _overlaps(a, b)),
    np.shares_memory: lambda a, b, max_work=None: (isinstance(a, CudaArray) and isinstance(b, CudaArray)
                                                   and a._blk is b._blk and _overlaps(a, b)),
    np.count_nonzero: lambda a, axis=None, keepdims=False: sum(elementwise(np.not_equal, (a, 0)), axis,
                                                                keepdims=keepdims),
    np.dot: lambda a, b, out=None: matmul(a, b, out) if a.ndim and b.ndim else elementwise(np.multiply, (a, b)),
}


# ---- the backend object ---------------------------------------------------------------------------------------
class CUDABackend(Backend):
    """Array primitives on :class:`CudaArray` (see the module docstring; the contract:
    ``backend/base.py``). The NumPy-named primitives come from the base class and run this
    module's kernels through ``CudaArray``'s NumPy protocols (``FUNCTIONS``)."""

    name = "cuda"
    device = _device("cuda:0")
    array_type = CudaArray
    FUNCTIONS = FUNCTIONS
    kernel_dtypes = frozenset(np.dtype(t) for t in (np.float16, np.float32, np.float64))  # float16 widened inside

    def kernel(self, family, name):
        """The CUDA launcher ``_<name>_cuda`` of ``numbagrad/kernels/cuda/<family>.py``;
        it takes the same arguments as the CPU kernel ``_<name>_cpu``. ``name`` must be one
        of the family's ``ENTRY_POINTS`` (see ``numbagrad/kernels/__init__.py``); a CPU
        entry point without a CUDA twin raises NotImplementedError."""
        k = self._kernels.get((family, name))
        return k if k is not None else self._load_kernel("cuda", family, name)

    @staticmethod
    def _not_an_entry(family, name):
        import importlib.util
        cpu = importlib.util.find_spec(f"numbagrad.kernels.cpu.{family}")
        if cpu and name in getattr(importlib.import_module(cpu.name), "ENTRY_POINTS", ()):
            raise NotImplementedError(f"kernel {family}.{name} has no CUDA twin yet")

    # ---- capabilities (see backend/base.py) ------------------------------------------
    @staticmethod
    def mm_into(a, b, out):
        return matmul(a, b, out)

    @staticmethod
    def rows(a):
        """``a`` itself: indexing a device array gives its leading-axis views."""
        return a

    # ---- allocation and conversion --------------------------------------------------
    @staticmethod
    def asarray(data, dtype=None):
        if isinstance(data, CudaArray):
            return data if dtype is None or np.dtype(dtype) == data.dtype else copy(data, dtype)
        return from_numpy(np.asarray(data, dtype=dtype))

    @staticmethod
    def array(data, dtype=None):
        if isinstance(data, CudaArray):
            return copy(data, dtype)
        return from_numpy(np.array(data, dtype=dtype))

    @staticmethod
    def empty(shape, dtype=float):
        return _alloc((shape,) if isinstance(shape, numbers.Integral) else shape, dtype)

    @staticmethod
    def zeros(shape, dtype=float):
        r = CUDABackend.empty(shape, dtype)
        assign(r, 0)
        return r

    @staticmethod
    def ones(shape, dtype=float):
        r = CUDABackend.empty(shape, dtype)
        assign(r, 1)
        return r

    @staticmethod
    def full(shape, fill_value, dtype=None):
        dt = np.dtype(dtype) if dtype is not None else np.asarray(fill_value).dtype
        r = CUDABackend.empty(shape, dt)
        assign(r, fill_value)
        return r

    empty_like = staticmethod(empty_like)
    zeros_like = staticmethod(zeros_like)

    @staticmethod
    def arange(*args, dtype=None):
        return from_numpy(np.arange(*args, dtype=dtype))

    @staticmethod
    def linspace(*args, **kw):
        return from_numpy(np.linspace(*args, **kw))

    @staticmethod
    def eye(*args, **kw):
        return from_numpy(np.eye(*args, **kw))

    to_numpy = staticmethod(to_numpy)
    from_numpy = staticmethod(from_numpy)

    @staticmethod
    def astype(a, dtype):
        return copy(a, dtype)

    copy = staticmethod(copy)
    assign = staticmethod(assign)

    @staticmethod
    def flat(a):
        return ascontiguousarray(a).reshape(-1)

    @staticmethod
    def contiguous(a):
        return ascontiguousarray(a)

    @staticmethod
    def broadcast_to(a, shape):
        return a.broadcast_to(shape)

    copy_into = staticmethod(assign)

    def signbit(self, a):
        """``copysign(1, a) < 0``: the sign bit, read through two elementwise kernels."""
        return self.less(np.copysign(1.0, a), 0)

    # ---- elementwise -------------------------------------------------------------------
    def add(self, a, b):
        return elementwise(np.add, (a, b))

    def sub(self, a, b):
        return elementwise(np.subtract, (a, b))

    def mul(self, a, b):
        return elementwise(np.multiply, (a, b))

    def div(self, a, b):
        return elementwise(np.true_divide, (a, b))

    @staticmethod
    def neg(a):
        return elementwise(np.negative, (a,))

    @staticmethod
    def accumulate(dst, src):
        if (src.shape == dst.shape and src.dtype == dst.dtype and dst.dtype.kind == "f"
                and dst.is_c_contiguous() and src.is_c_contiguous()):
            n = dst.size
            _L.launch(_EW.axpy_flat, n, n, _flat(dst), dst.dtype.type(1), _flat(src))
            return dst
        return elementwise(np.add, (dst, src), out=dst)

    @staticmethod
    def all_finite(a):
        return bool(all_(elementwise(np.isfinite, (a,))).item())

    sum = staticmethod(sum)
    where = staticmethod(where)
    matmul = staticmethod(matmul)

    # ---- NumPy protocol entry points -------------------------------------------------------
    @staticmethod
    def array_ufunc(ufunc, method, inputs, kwargs):
        out = kwargs.pop("out", None)
        if isinstance(out, tuple):
            out = out[0] if len(out) == 1 else out
        kwargs.pop("casting", None)
        dtype = kwargs.pop("dtype", None)
        if kwargs.pop("where", True) is not True or kwargs:
            raise TypeError(f"numpy.{ufunc.__name__}: arguments {sorted(kwargs)} are not supported "
                            "for CUDA arrays")
        if method == "__call__":
            if ufunc is np.matmul:
                return matmul(*inputs, out=out)
            r = elementwise(ufunc, inputs, out)
            return r if dtype is None or r.dtype == np.dtype(dtype) else copy(r, dtype)
        if method == "reduce":
            red = {np.add: sum, np.multiply: prod, np.maximum: amax, np.minimum: amin,
                   np.logical_and: all_, np.logical_or: any_}.get(ufunc)
            if red is None:
                raise TypeError(f"numpy.{ufunc.__name__}.reduce is not implemented for CUDA arrays")
            return red(*inputs, out=out) if out is not None else red(*inputs)
        if method == "at" and ufunc is np.add:
            return _add_at(*inputs)
        raise TypeError(f"numpy.{ufunc.__name__}.{method} is not implemented for CUDA arrays")

    @staticmethod
    def advanced_getitem(a, idx):
        if isinstance(idx, tuple) and len(idx) == 1:
            idx = idx[0]
        if isinstance(idx, tuple) and all(isinstance(i, (list, np.ndarray, CudaArray, numbers.Integral))
                                          for i in idx) and len(idx) <= a.ndim:
            rest = a.shape[len(idx):]
            bshape = np.broadcast_shapes(*[np.shape(i) if not isinstance(i, CudaArray) else i.shape for i in idx])
            r = take(ascontiguousarray(a).reshape((-1,) + rest), _flat_index(a, idx), axis=0)
            return r.reshape(tuple(bshape) + rest)
        if isinstance(idx, (list, np.ndarray, CudaArray)):
            idx = idx if isinstance(idx, CudaArray) else from_numpy(np.asarray(idx))
            if idx.dtype == np.bool_:
                if idx.shape != a.shape[:idx.ndim]:
                    raise IndexError(f"boolean index of shape {idx.shape} does not match array of shape {a.shape}")
                flat = nonzero(idx.reshape(-1))[0]
                return take(a.reshape((-1,) + a.shape[idx.ndim:]), flat, axis=0)
            if idx.dtype.kind not in "iu":
                raise IndexError("arrays used as indices must be of integer (or boolean) type")
            return take(a, _wrap_negative(idx, a.shape[0]), axis=0)
        raise NotImplementedError(f"CUDA arrays: advanced index {idx!r} is not supported; "
                                  "use index_select/gather")

    @staticmethod
    def advanced_setitem(a, idx, value):
        """``a[idx] = value`` for integer/boolean index arrays on the leading axes (a
        scatter; with duplicate indices the last write wins, as in NumPy)."""
        from ..kernels.cuda.indexing import _scatter_fwd_cuda
        if not isinstance(idx, tuple):
            idx = (idx,)
        if not all(isinstance(i, (list, np.ndarray, CudaArray, numbers.Integral)) for i in idx) \
                or len(idx) > a.ndim:
            raise NotImplementedError(f"CUDA arrays: assignment through the index {idx!r} is not supported")
        flat = _flat_index(a, idx)
        rest = a.shape[len(idx) if not (len(idx) == 1 and _is_bool_index(idx[0])) else np.ndim(idx[0]):]
        B = _prod(rest)
        M = flat.size
        target = a if a.is_c_contiguous() else copy(a)
        t3 = target.reshape(1, -1, B)
        src = value if isinstance(value, CudaArray) else _scalar_array(value, a.dtype)
        src = ascontiguousarray(src.broadcast_to((M,) + tuple(rest)))
        if src.dtype != a.dtype:
            src = copy(src, a.dtype)
        index = ascontiguousarray(flat.reshape(M, 1).broadcast_to((M, B)))
        if M and B:
            _scatter_fwd_cuda(t3, index.reshape(1, M, B), src.reshape(1, M, B))
        if target is not a:
            assign(a, target)


def _is_bool_index(i):
    return (isinstance(i, CudaArray) and i.dtype == np.bool_) or (
        not isinstance(i, CudaArray) and np.asarray(i).dtype == np.bool_)


def _flat_index(a, idx):
    """Row numbers into ``a.reshape(-1, *a.shape[k:])`` for index arrays on the first k axes."""
    if len(idx) == 1 and _is_bool_index(idx[0]):
        m = idx[0] if isinstance(idx[0], CudaArray) else from_numpy(np.asarray(idx[0]))
        if m.shape != a.shape[:m.ndim]:
            raise IndexError(f"boolean index of shape {m.shape} does not match array of shape {a.shape}")
        return nonzero(m.reshape(-1))[0]
    arrs = [i if isinstance(i, CudaArray) else from_numpy(np.asarray(i, dtype=np.int64)) for i in idx]
    for i in arrs:
        if i.dtype.kind not in "iu":
            raise IndexError("arrays used as indices must be of integer (or boolean) type")
    shape = np.broadcast_shapes(*[i.shape for i in arrs])
    flat = None
    for d, i in enumerate(arrs):
        i = _wrap_negative(copy(i, np.int64), a.shape[d])
        flat = i if flat is None else elementwise(np.add, (elementwise(np.multiply, (flat, np.int64(a.shape[d]))), i))
    return ascontiguousarray(flat.broadcast_to(shape)).reshape(-1)


def _wrap_negative(idx, n):
    neg = elementwise(np.less, (idx, 0))
    return where(neg, elementwise(np.add, (idx, idx.dtype.type(n))), idx)


def _add_at(out, idx, vals):
    from ..kernels.cuda.indexing import _index_add_fwd_cuda
    if not isinstance(idx, tuple):
        idx = (idx,)
    k = len(idx) if not (len(idx) == 1 and _is_bool_index(idx[0])) else np.ndim(idx[0])
    idx = _flat_index(out, idx)  # rows of out.reshape(-1, *out.shape[k:]), negatives wrapped
    rest = out.shape[k:]
    N = _prod(out.shape[:k])
    B = _prod(rest)
    vals = vals if isinstance(vals, CudaArray) else _scalar_array(vals, out.dtype)
    src = ascontiguousarray(vals.reshape((-1,) + rest).broadcast_to((idx.size,) + rest)
                            if vals.size == idx.size * B else vals.broadcast_to((idx.size,) + rest))
    if src.dtype != out.dtype:
        src = copy(src, out.dtype)
    target = out if out.is_c_contiguous() else copy(out)
    _index_add_fwd_cuda(target.reshape(1, N, B), idx, src.reshape(1, idx.size, B), out.dtype.type(1))
    if target is not out:
        assign(out, target)


CUDA_BACKEND = None


def get_backend():
    """The CUDA backend, created and registered on first use; raises if CUDA is unavailable."""
    global CUDA_BACKEND
    if CUDA_BACKEND is None:
        if not available():
            raise RuntimeError(unavailable_reason())
        _init()
        be = CUDABackend()
        CudaArray._be = be
        register_backend(CudaArray, "cuda", be)
        CUDA_BACKEND = be
    return CUDA_BACKEND


def pool():
    get_backend()
    return _POOL
