"""Indexing: ``x[idx]``, ``x[idx] = v``, gather/scatter, index_select/index_add,
masked_fill/masked_select, take_along_dim, one_hot, embedding, and the in-place
writers (``fill_``, ``zero_``, ``copy_``, ``masked_fill_``, ``scatter_add_``, ...).

Conventions
-----------
* Basic indexing (ints, slices, ``None``, ``...``) returns a *view* sharing the input's
  storage and version counter; advanced indexing (integer/bool tensors, arrays or lists)
  returns a copy, as in NumPy and PyTorch.
* The dim-wise ops see a tensor as a 3-D array ``(A, N, B)`` with ``dim`` in the middle
  and launch the kernels of ``numbagrad/kernels/cpu/indexing.py`` on that view; index
  arrays are checked here (dtype, range, shape) so the kernels can trust them, the range
  again in backward (``ops/_check.py``: a saved index may share memory with the caller's).
* Index, mask and target tensors that backward reads are named to
  :func:`~numbagrad.autograd.function.keep_versions`, so writing them after the forward
  makes backward raise, as in PyTorch.
* Backward of every gather-like op is a scatter-add that accumulates duplicate indices.
* In-place forms write straight into ``input.array`` when no graph is being recorded;
  under recording they run the out-of-place op and rebase ``input`` onto its result.
"""
import math

import numpy as np

from ..autograd.function import Function, keep_versions
from ..autograd.grad_mode import _state
from ..backend import backend_of
from ..tensor import Tensor
from ._check import check_index, out_of_range
from ._util import as_tensor_arg, wrap_dim

__all__ = ["getitem", "setitem", "gather", "scatter", "scatter_add", "index_select", "index_add",
           "take_along_dim", "take", "masked_fill", "masked_select", "one_hot", "embedding",
           "nonzero", "argwhere", "masked_fill_", "scatter_", "scatter_add_", "index_add_",
           "fill_", "zero_", "copy_", "tril", "triu"]


# ---- helpers -----------------------------------------------------------------------------------
def _kernel(arr, name):
    return backend_of(arr).kernel("indexing", name)


def _contig(a):
    """``a`` if C-contiguous, else a C-contiguous copy (0-d stays 0-d, unlike
    ``np.ascontiguousarray``)."""
    return a if a.flags.c_contiguous else backend_of(a).copy(a)


def _overlaps(a, b):
    """Whether two arrays may share memory (an in-place op reading its own output)."""
    return type(a) is type(b) and np.may_share_memory(a, b)


def _on(like, a):
    """Backend array ``a`` moved to the backend of ``like`` (itself when already there)."""
    if type(a) is type(like):
        return a
    return backend_of(like).from_numpy(backend_of(a).to_numpy(a))


def _same_device(opname, what, t, like):
    """Raise when Tensor ``t`` (an index, mask or source) is not on the device of array ``like``."""
    if type(t.array) is not type(like):
        raise RuntimeError(f"{opname}: expected all tensors to be on the same device, got the {what} on "
                           f"{t.device} and the input on {backend_of(like).device}")


def _dims3(shape, dim):
    """``shape`` as ``(A, N, B)`` around axis ``dim``."""
    return math.prod(shape[:dim]), shape[dim], math.prod(shape[dim + 1:])


def _index_arg(index, opname, what="index", like=None):
    """An index argument as a C-contiguous int64 backend array; rejects other dtypes.

    With ``like`` (the data array the index addresses), an index Tensor must be on its
    device, and a list/NumPy index is moved there."""
    if isinstance(index, Tensor):
        a = index.array
        if like is not None:
            _same_device(opname, what, index, like)
    else:
        a = np.asarray(index)
        if a.size == 0 and a.dtype.kind == "f" and not isinstance(index, np.ndarray):
            a = a.astype(np.int64)  # an empty Python list
        if like is not None and a.dtype.kind in "iu":
            a = backend_of(like).asarray(a)
    if a.dtype.kind not in "iu":
        raise RuntimeError(f"{opname}: expected an integer (int32/int64) {what} tensor, "
                           f"got dtype {a.dtype}")
    return _contig(a.astype(np.int64, copy=False))


def _wrap_negative(idx, n):
    if idx.size and int(idx.min()) < 0:
        return idx + (idx < 0) * n
    return idx


def _sum_to(g, shape):
    """Sum ``g`` down to ``shape`` (the backward of a broadcast assignment)."""
    be = backend_of(g)
    shape = tuple(shape)
    if g.ndim < len(shape):  # NumPy lets a value carry extra leading 1-dims
        g = g.reshape((1,) * (len(shape) - g.ndim) + g.shape)
    return be.sum_to_shape(g, shape)


def _as_grad(g, dtype):
    g = g if isinstance(g, np.ndarray) or not np.isscalar(g) else np.asarray(g)
    return g if g.dtype == dtype else g.astype(dtype)


def _recording(*tensors):
    return _state.enabled and any(isinstance(t, Tensor) and t.requires_grad for t in tensors)


def _rebase(input, name, result):
    """Make ``input`` hold ``result`` after an in-place op that ran out of place."""
    if input._check_inplace(name) or not (_state.enabled and result.requires_grad):
        return input._inplace_result(name, result)
    # ``input`` needs no grad but the written value does (PyTorch's CopySlices case):
    # ``input`` joins the graph as the output of the out-of-place node.
    if input._base is not None:
        raise RuntimeError(f"{name}: writing a tensor that requires grad into a view is not supported; "
                           "write into the base tensor or use the out-of-place op")
    return input._inplace_result(name, result)


def _inplace(input, name, others, direct, out_of_place):
    """The in-place protocol: out of place + rebase while recording, else write directly."""
    if _recording(input, *others):
        input._check_inplace(name)  # a leaf requiring grad, or a view of one, raises here
        return _rebase(input, name, out_of_place())
    direct(input.array)
    input._bump_version()
    return input


# ---- x[idx] ----------------------------------------------------------------------------------
_SLICE_ALL = slice(None)


def _norm_index(idx, opname):
    """Unwrap Tensors and lists in an index. Returns ``(index_tuple, basic)``."""
    items = idx if type(idx) is tuple else (idx,)
    out = []
    basic = True
    for it in items:
        if it is None or it is Ellipsis or type(it) is slice:
            out.append(it)
            continue
        if isinstance(it, (bool, np.bool_)):
            out.append(bool(it))
            basic = False
            continue
        if isinstance(it, (int, np.integer)):
            out.append(int(it))
            continue
        if isinstance(it, Tensor):
            a = it.array
        elif isinstance(it, (list, tuple, range, np.ndarray)) or hasattr(it, "__array__"):
            a = np.asarray(it)  # a ``range`` indexes like the list of its integers, as in PyTorch
            if a.size == 0 and a.dtype.kind == "f" and not isinstance(it, np.ndarray):
                a = a.astype(np.int64)
        else:
            raise IndexError(f"{opname}: only integers, slices, None, Ellipsis and integer or bool "
                             f"tensors are valid indices, got {type(it).__name__} {it!r}")
        if a.dtype.kind not in "iub":
            raise IndexError(f"{opname}: tensors used as indices must be integer (long, int) or bool "
                             f"tensors, got dtype {a.dtype}")
        if a.ndim == 0 and a.dtype.kind in "iu":
            out.append(int(a))  # a 0-d integer index acts like an int, as in PyTorch
            continue
        basic = False
        out.append(a)
    return tuple(out), basic


def _check_advanced(opname, idx, shape, like):
    """Range-check the integer arrays of a normalised advanced index against the axes they
    index, unless ``like`` is a NumPy array (NumPy checks its own indexing): a device
    backend's advanced indexing (CUDA's ``take``, scatter and index-add) runs kernels that
    do not."""
    if isinstance(like, np.ndarray):
        return
    used = sum(0 if it is None or it is Ellipsis or type(it) is bool else
               (it.ndim if hasattr(it, "dtype") and it.dtype == np.bool_ else 1) for it in idx)
    ax = 0
    for it in idx:
        if it is None or type(it) is bool:
            continue
        if it is Ellipsis:
            ax += len(shape) - used
        elif hasattr(it, "dtype") and it.dtype == np.bool_:
            ax += it.ndim
        else:
            if hasattr(it, "dtype") and ax < len(shape):
                check_index(opname, it, shape[ax], ax, shape, allow_negative=True)
            ax += 1


def _index_error(opname, e, shape):
    return IndexError(f"{opname}: {e} (tensor shape {tuple(shape)})")


def _advanced_plan(idx, shape):
    """How to scatter the gradient of ``x[idx]`` back: ``("assign",)`` when no integer
    array can repeat a position, ``("rows", axis)`` for one integer array on one axis with
    full slices elsewhere (the ``index_add`` kernel), else ``("add_at",)``."""
    arrays = [i for i, it in enumerate(idx) if hasattr(it, "dtype") and it.dtype.kind in "iu"]
    if not arrays:
        return ("assign",)
    if len(arrays) == 1 and all(it is Ellipsis or (type(it) is slice and it == _SLICE_ALL) or k == arrays[0]
                                for k, it in enumerate(idx)):
        n_ell = sum(1 for it in idx if it is Ellipsis)
        if n_ell <= 1:
            k = arrays[0]
            if n_ell:
                e = next(i for i, it in enumerate(idx) if it is Ellipsis)
                fill = len(shape) - (len(idx) - 1)
                k = k if k < e else k - 1 + fill
            return ("rows", k)
    return ("add_at",)


class GetItemView(Function):
    """Basic indexing: a view of the input."""
    view_of = 0

    @staticmethod
    def forward(ctx, x, idx):
        ctx.meta = (x.shape, idx)
        try:
            return x[idx if Ellipsis in idx else idx + (Ellipsis,)]  # "..." keeps 0-d results arrays
        except IndexError as e:
            raise _index_error("getitem", e, x.shape) from None

    @staticmethod
    def backward(ctx, g):
        shape, idx = ctx.meta
        out = backend_of(g).zeros(shape, g.dtype)
        out[idx] = g
        return out, None


def _indices_on(x, idx):
    """``idx`` with its index arrays on ``x``'s device (``idx`` itself when they are)."""
    tx = type(x)
    for it in idx:
        if hasattr(it, "dtype") and type(it) is not tx:
            return tuple(_on(x, it) if hasattr(it, "dtype") else it for it in idx)
    return idx


def _take_fallback(x, idx, plan):
    """``x[idx]`` for a backend whose arrays take one index array on axis 0 only (CUDA):
    one integer (or 1-D bool) array on axis ``k`` with full slices around it becomes
    ``np.take`` along ``k``, range-checked and wrapped here. Returns ``(y, idx, plan)``."""
    pos = [j for j, it in enumerate(idx) if hasattr(it, "dtype")]
    if len(pos) != 1 or any(it is Ellipsis for it in idx):  # (``in`` would compare arrays)
        raise NotImplementedError(f"getitem: advanced index {idx!r} is not supported on this device")
    j = pos[0]
    index, n = idx[j], x.shape[j]
    if index.dtype == np.bool_:
        if index.ndim != 1 or not all(type(it) is slice and it == _SLICE_ALL for i, it in enumerate(idx) if i != j):
            raise NotImplementedError(f"getitem: advanced index {idx!r} is not supported on this device")
        if index.shape[0] != n:
            raise IndexError(f"getitem: boolean index did not match indexed array along axis {j}; size of axis "
                             f"is {n} but size of corresponding boolean axis is {index.shape[0]} "
                             f"(tensor shape {tuple(x.shape)})")
        index = np.nonzero(index)[0].astype(np.int64, copy=False)
        plan = ("rows", j)
    elif plan[0] != "rows":
        raise NotImplementedError(f"getitem: advanced index {idx!r} is not supported on this device")
    check_index("getitem", index, n, j, x.shape, allow_negative=True)
    index = _wrap_negative(index, n)
    idx = idx[:j] + (index,) + idx[j + 1:]
    return np.take(x, index, axis=j), idx, plan


def _add_rows(out_shape, k, flat, g):
    """``out = zeros(out_shape)``, then ``out[.., flat[i], ..] += g[.., i, ..]`` along axis
    ``k`` (the ``index_add`` kernel; float16 accumulates in float32: CPU @njit has none)."""
    be = backend_of(g)
    half = g.dtype == np.float16
    gs = g.astype(np.float32) if half else g
    out = be.zeros(out_shape, gs.dtype)
    A, N, B = _dims3(out_shape, k)
    if out.size and flat.size:
        _kernel(gs, "index_add_fwd")(out.reshape(A, N, B), flat, _contig(gs).reshape(A, flat.size, B),
                                     gs.dtype.type(1))
    return out.astype(g.dtype) if half else out


class GetItemAdvanced(Function):
    """Advanced indexing: a copy; backward scatter-adds (duplicates accumulate)."""

    @staticmethod
    def forward(ctx, x, idx):
        idx = _indices_on(x, idx)
        plan = _advanced_plan(idx, x.shape)
        _check_advanced("getitem", idx, x.shape, x)
        try:
            y = x[idx]
        except IndexError as e:
            raise _index_error("getitem", e, x.shape) from None
        except NotImplementedError:
            y, idx, plan = _take_fallback(x, idx, plan)
        ctx.meta = (x.shape, idx, plan)
        return y

    @staticmethod
    def backward(ctx, g):
        shape, idx, plan = ctx.meta
        be = backend_of(g)
        out = be.zeros(shape, g.dtype)
        if plan[0] != "rows":  # checked again: the arrays may alias the caller's
            _check_advanced("getitem backward", idx, shape, g)
        if plan[0] == "assign":
            try:
                out[idx] = g
            except NotImplementedError:  # no advanced assignment on this backend (CUDA)
                if not (hasattr(idx[0], "dtype") and all(it is Ellipsis or (type(it) is slice and it == _SLICE_ALL)
                                                         for it in idx[1:])):
                    raise
                # x[mask, ...]: scatter-add g into the flattened positions of the mask
                m = idx[0]
                flat = np.nonzero(m.reshape(-1))[0].astype(np.int64, copy=False)
                out = _add_rows((m.size,) + tuple(shape[m.ndim:]), 0, flat, g).reshape(shape)
        elif plan[0] == "rows":
            k = plan[1]
            index = next(it for it in idx if hasattr(it, "dtype"))
            A, N, B = _dims3(shape, k)
            flat = _contig(index.astype(np.int64, copy=False).reshape(-1))
            check_index("getitem backward", flat, N, k, shape, allow_negative=True)  # may alias the user's index
            flat = _wrap_negative(flat, N)
            src = _contig(g).reshape(A, flat.size, B)
            _kernel(g, "index_add_fwd")(out.reshape(A, N, B), flat, src, g.dtype.type(1))
        else:
            np.add.at(out, idx, g)
        return out, None


def getitem(input, idx):
    """``input[idx]`` (``Tensor.__getitem__``): a view for basic indices, a copy otherwise."""
    if type(idx) is int or type(idx) is slice:
        return GetItemView.apply(input, (idx,))
    tensors = idx if type(idx) is tuple else (idx,)
    idx, basic = _norm_index(idx, "getitem")
    if basic:
        return GetItemView.apply(input, idx)
    return keep_versions(GetItemAdvanced.apply(input, idx), *tensors)


def take(input, index):
    """``input`` seen as 1-D, indexed by ``index`` (negative indices count from the end)."""
    from .shape import reshape
    idx = _index_arg(index, "take", like=input.array)
    check_index("take", idx, input.array.size, 0, input.shape, allow_negative=True)
    return keep_versions(GetItemAdvanced.apply(reshape(input, -1), (idx,)), index)


# ---- x[idx] = v -----------------------------------------------------------------------------
class IndexPut(Function):
    """Out-of-place ``x[idx] = v`` (used by ``setitem`` while recording)."""

    @staticmethod
    def forward(ctx, x, v, idx):
        be = backend_of(x)
        out = be.copy(x)
        _check_advanced("setitem", idx, x.shape, x)
        try:
            out[idx] = v
        except IndexError as e:
            raise _index_error("setitem", e, x.shape) from None
        except ValueError as e:
            raise ValueError(f"setitem: {e} (tensor shape {tuple(x.shape)}, value shape "
                             f"{tuple(np.shape(v))})") from None
        ctx.meta = (idx, np.shape(v), getattr(v, "dtype", None))
        return out

    @staticmethod
    def backward(ctx, g):
        idx, vshape, vdtype = ctx.meta
        nx, nv = ctx.needs_input_grad[:2]
        _check_advanced("setitem backward", idx, g.shape, g)
        gx = gv = None
        if nx:
            gx = backend_of(g).copy(g)
            gx[idx] = 0
        if nv:
            gi = g[idx]
            gv = _as_grad(_sum_to(np.asarray(gi) if isinstance(gi, np.generic) else gi, vshape), vdtype)
        return gx, gv, None


def setitem(input, idx, value):
    """``input[idx] = value`` (``Tensor.__setitem__``).

    Writes in place (bumping the version) unless a graph is being recorded through
    ``input`` or ``value``; then it runs out of place and rebases ``input`` onto the
    result. A leaf that requires grad raises under grad mode, as in PyTorch.
    """
    idx, _ = _norm_index(idx, "setitem")
    if _recording(input, value):
        input._check_inplace("__setitem__")
        if not isinstance(value, Tensor):
            value = np.asarray(value, dtype=input.dtype)
        return _rebase(input, "__setitem__", IndexPut.apply(input, value, idx))
    v = value.array if isinstance(value, Tensor) else value
    _check_advanced("setitem", idx, input.shape, input.array)
    try:
        input.array[idx] = v
    except IndexError as e:
        raise _index_error("setitem", e, input.shape) from None
    except ValueError as e:
        raise ValueError(f"setitem: {e} (tensor shape {tuple(input.shape)}, value shape "
                         f"{tuple(np.shape(v))})") from None
    input._bump_version()
    return input


# ---- gather / scatter -------------------------------------------------------------------------
def _check_gather_shapes(opname, x_shape, dim, idx_shape, src_shape=None):
    xs, ids = tuple(x_shape) or (1,), tuple(idx_shape) or (1,)
    if len(ids) != len(xs):
        raise RuntimeError(f"{opname}: index of shape {tuple(idx_shape)} must have the same number of "
                           f"dimensions as input of shape {tuple(x_shape)}")
    for d in range(len(xs)):
        if d != dim and ids[d] > xs[d]:
            raise RuntimeError(f"{opname}: index of shape {tuple(idx_shape)} is larger than input of "
                               f"shape {tuple(x_shape)} at dimension {d} (only dimension {dim} may be)")
    if src_shape is not None:
        ss = tuple(src_shape) or (1,)
        if len(ss) != len(ids) or any(i > s for i, s in zip(ids, ss)):
            raise RuntimeError(f"{opname}: index of shape {tuple(idx_shape)} must be no larger than src "
                               f"of shape {tuple(src_shape)} in every dimension")


def _region(idx_shape, dim, ndim):
    return tuple(_SLICE_ALL if d == dim else slice(0, idx_shape[d]) for d in range(ndim))


def _gather_arrays(x, dim, idx):
    """``out[..i..] = x[.., idx[..i..], ..]`` for checked arrays of equal ndim (>= 1)."""
    be = backend_of(x)
    if any(d != dim and idx.shape[d] != x.shape[d] for d in range(x.ndim)):
        x = x[_region(idx.shape, dim, x.ndim)]
    x = _contig(x)
    out = be.empty(idx.shape, x.dtype)
    if out.size:
        A, N, B = _dims3(x.shape, dim)
        M = idx.shape[dim]
        _kernel(x, "gather_fwd")(x.reshape(A, N, B), idx.reshape(A, M, B), out.reshape(A, M, B))
    return out


def _scatter_into(kind, out, dim, idx, src):
    """Scatter ``src`` (array, or a scalar for ``kind='fill'``) into ``out`` in place along
    ``dim``: ``kind`` is ``'add'``, ``'set'`` or ``'fill'``. ``out`` may be strided."""
    if idx.size == 0:
        return
    be = backend_of(out)
    if out.ndim == 0:
        out = out.reshape(1)
    if idx.ndim == 0:
        idx = idx.reshape(1)
    if kind != "fill" and src.ndim == 0:
        src = src.reshape(1)
    region = _region(idx.shape, dim, out.ndim)
    view = out[region]
    writeback = not view.flags.c_contiguous
    target = be.copy(view) if writeback else view
    A, N, B = _dims3(target.shape, dim)
    M = idx.shape[dim]
    idx3 = idx.reshape(A, M, B)
    if kind == "fill":
        _kernel(out, "scatter_fill_fwd")(target.reshape(A, N, B), idx3, out.dtype.type(src))
    else:
        if src.shape != idx.shape:
            src = src[tuple(slice(0, s) for s in idx.shape)]
        src = _contig(src.astype(out.dtype, copy=False))
        if _overlaps(src, target):  # e.g. x.scatter_add_(0, idx, x): read a snapshot
            src = backend_of(src).copy(src)
        name = "scatter_add_fwd" if kind == "add" else "scatter_fwd"
        _kernel(out, name)(target.reshape(A, N, B), idx3, src.reshape(A, M, B))
    if writeback:
        out[region] = target


def _gather_grad_src(g, dim, idx, src_shape, src_dtype):
    """The gradient of a scatter's ``src``: ``g`` gathered at ``idx``, padded to ``src_shape``."""
    be = backend_of(g)
    vals = _gather_arrays(g.reshape(1) if g.ndim == 0 else g, dim, idx.reshape(1) if idx.ndim == 0 else idx)
    shp = tuple(src_shape) or (1,)
    if vals.shape != shp:
        full = be.zeros(shp, g.dtype)
        full[tuple(slice(0, s) for s in vals.shape)] = vals
        vals = full
    return _as_grad(vals.reshape(src_shape), src_dtype)


class Gather(Function):
    @staticmethod
    def forward(ctx, x, dim, idx):
        ctx.meta = (x.shape, dim, idx)
        if x.ndim == 0 or idx.ndim == 0:
            out = _gather_arrays(x.reshape(x.shape or (1,)), dim, idx.reshape(idx.shape or (1,)))
            return out.reshape(idx.shape)
        return _gather_arrays(x, dim, idx)

    @staticmethod
    def backward(ctx, g):
        shape, dim, idx = ctx.meta
        check_index("gather backward", idx, shape[dim] if shape else 1, dim, shape)  # may alias the user's index
        gx = backend_of(g).zeros(shape, g.dtype)
        _scatter_into("add", gx, dim, idx, _contig(g))
        return gx, None, None


def _gather_args(opname, input, dim, index):
    input = as_tensor_arg(input, opname)
    idx = _index_arg(index, opname, like=input.array)
    dim = wrap_dim(dim, input.ndim, opname)
    _check_gather_shapes(opname, input.shape, dim, idx.shape)
    n = input.shape[dim] if input.ndim else 1
    check_index(opname, idx, n, dim, input.shape)
    return input, dim, idx


def gather(input, dim, index, sparse_grad=False):
    """``out[i][j][k] = input[index[i][j][k]][j][k]`` for ``dim=0`` (and so on): ``index``
    has ``input``'s number of dimensions and is no larger than it except along ``dim``."""
    input, dim, idx = _gather_args("gather", input, dim, index)
    return keep_versions(Gather.apply(input, dim, idx), index)


def _scatter_args(opname, input, dim, index, src):
    input = as_tensor_arg(input, opname)
    idx = _index_arg(index, opname, like=input.array)
    dim = wrap_dim(dim, input.ndim, opname)
    _check_gather_shapes(opname, input.shape, dim, idx.shape, None if src is None else src.shape)
    n = input.shape[dim] if input.ndim else 1
    check_index(opname, idx, n, dim, input.shape)
    return input, dim, idx


class ScatterAdd(Function):
    @staticmethod
    def forward(ctx, x, dim, idx, src):
        ctx.meta = (dim, idx, src.shape, src.dtype)
        out = backend_of(x).copy(x)
        _scatter_into("add", out, dim, idx, src)
        return out

    @staticmethod
    def backward(ctx, g):
        dim, idx, sshape, sdtype = ctx.meta
        nx, _, _, ns = ctx.needs_input_grad
        if ns:  # the saved index may alias the user's
            check_index("scatter_add backward", idx, g.shape[dim] if g.ndim else 1, dim, g.shape)
        return (g if nx else None, None, None,
                _gather_grad_src(g, dim, idx, sshape, sdtype) if ns else None)


class Scatter(Function):
    @staticmethod
    def forward(ctx, x, dim, idx, src):
        is_arr = hasattr(src, "shape") and not np.isscalar(src)
        ctx.meta = (dim, idx, src.shape if is_arr else None, getattr(src, "dtype", None))
        out = backend_of(x).copy(x)
        _scatter_into("set" if is_arr else "fill", out, dim, idx, src)
        return out

    @staticmethod
    def backward(ctx, g):
        dim, idx, sshape, sdtype = ctx.meta
        nx, _, _, ns = ctx.needs_input_grad
        check_index("scatter backward", idx, g.shape[dim] if g.ndim else 1, dim, g.shape)  # may alias the user's
        gx = gs = None
        if nx:
            gx = backend_of(g).copy(g)
            _scatter_into("fill", gx, dim, idx, 0)
        if ns and sshape is not None:
            gs = _gather_grad_src(g, dim, idx, sshape, sdtype)
        return gx, None, None, gs


def _src_arg(src, opname, like):
    if isinstance(src, Tensor):
        _same_device(opname, "source", src, like.array)
        return src
    if isinstance(src, (np.ndarray, list)):
        return Tensor._from_array(backend_of(like.array).asarray(np.asarray(src), like.dtype))
    raise TypeError(f"{opname}: src must be a Tensor, got {type(src).__name__}")


def scatter_add(input, dim, index, src):
    """A copy of ``input`` with ``src`` added at ``index`` along ``dim`` (duplicates add up)."""
    src = _src_arg(src, "scatter_add", input)
    input, dim, idx = _scatter_args("scatter_add", input, dim, index, src)
    return keep_versions(ScatterAdd.apply(input, dim, idx, src), index if src.requires_grad else None)


def scatter(input, dim, index, src=None, value=None, reduce=None):
    """A copy of ``input`` with ``src`` (a tensor) or ``value`` (a scalar) written at ``index``
    along ``dim``. ``reduce='add'`` is :func:`scatter_add`."""
    if src is None:
        src = value
    if src is None:
        raise TypeError("scatter: expected src or value")
    if reduce is not None:
        if reduce != "add" or not isinstance(src, Tensor):
            raise NotImplementedError(f"scatter: reduce={reduce!r} is not supported (only 'add' with a "
                                      "tensor src)")
        return scatter_add(input, dim, index, src)
    if isinstance(src, (np.ndarray, list)):
        src = _src_arg(src, "scatter", input)
    if isinstance(src, Tensor):
        input, dim, idx = _scatter_args("scatter", input, dim, index, src)
        return keep_versions(Scatter.apply(input, dim, idx, src), index)
    input, dim, idx = _scatter_args("scatter", input, dim, index, None)
    return keep_versions(Scatter.apply(input, dim, idx, src), index)


def scatter_add_(input, dim, index, src):
    """In-place :func:`scatter_add`."""
    src = _src_arg(src, "scatter_add_", input)
    _, d, idx = _scatter_args("scatter_add_", input, dim, index, src)
    return _inplace(input, "scatter_add_", (src,),
                    lambda out: _scatter_into("add", out, d, idx, src.array),
                    lambda: keep_versions(ScatterAdd.apply(input, d, idx, src), index if src.requires_grad else None))


def scatter_(input, dim, index, src=None, value=None, reduce=None):
    """In-place :func:`scatter`."""
    if src is None:
        src = value
    if reduce is not None:
        if reduce != "add" or not isinstance(src, Tensor):
            raise NotImplementedError(f"scatter_: reduce={reduce!r} is not supported (only 'add')")
        return scatter_add_(input, dim, index, src)
    if isinstance(src, (np.ndarray, list)):
        src = _src_arg(src, "scatter_", input)
    is_t = isinstance(src, Tensor)
    _, d, idx = _scatter_args("scatter_", input, dim, index, src if is_t else None)
    return _inplace(input, "scatter_", (src,),
                    lambda out: _scatter_into("set" if is_t else "fill", out, d, idx,
                                              src.array if is_t else src),
                    lambda: keep_versions(Scatter.apply(input, d, idx, src), index))


def take_along_dim(input, indices, dim=None):
    """Values of ``input`` at ``indices`` along ``dim`` (the flattened input when ``dim`` is
    None); ``input`` and ``indices`` broadcast in the other dimensions and negative
    indices count from the end, as ``torch.take_along_dim``."""
    from .shape import reshape, expand
    input = as_tensor_arg(input, "take_along_dim")
    idx = _index_arg(indices, "take_along_dim", "indices", like=input.array)
    if dim is None:
        input, idx, dim = reshape(input, -1), idx.reshape(-1), 0
    else:
        dim = wrap_dim(dim, input.ndim, "take_along_dim", scalar_ok=False)
        xs, ids = tuple(input.shape) or (1,), tuple(idx.shape) or (1,)
        if len(xs) != len(ids):
            raise RuntimeError(f"take_along_dim: input of shape {tuple(input.shape)} and indices of shape "
                               f"{tuple(idx.shape)} should have the same number of dimensions")
        bs = []
        for d, (a, b) in enumerate(zip(xs, ids)):
            if d == dim or a == b or b == 1:
                bs.append(a)
            elif a == 1:
                bs.append(b)
            else:
                raise RuntimeError(f"take_along_dim: input of shape {tuple(input.shape)} and indices of "
                                   f"shape {tuple(idx.shape)} are not broadcastable at dimension {d}")
        xshape = tuple(bs)
        ishape = tuple(ids[d] if d == dim else bs[d] for d in range(len(bs)))
        if input.ndim and xshape != tuple(input.shape):
            input = expand(input, xshape)
        if input.ndim == 0:
            ishape = idx.shape
        if tuple(idx.shape) != ishape:
            idx = _contig(backend_of(idx).broadcast_to(idx, ishape))
    n = input.shape[dim] if input.ndim else 1
    check_index("take_along_dim", idx, n, dim, input.shape, allow_negative=True)
    idx = _wrap_negative(idx, n)
    if _recording(input) and isinstance(indices, Tensor) and _overlaps(idx, indices.array):
        idx = backend_of(idx).copy(idx)  # as torch: backward reads its own copy, later writes are fine
    return Gather.apply(input, dim, idx)


# ---- index_select / index_add --------------------------------------------------------------------
def _vector_index(opname, index, what="index", like=None):
    idx = _index_arg(index, opname, what, like)
    if idx.ndim > 1:
        raise RuntimeError(f"{opname}: {what} must be a vector (0-d or 1-d), got shape {tuple(idx.shape)}")
    return idx.reshape(-1)


class IndexSelect(Function):
    @staticmethod
    def forward(ctx, x, dim, idx):
        be = backend_of(x)
        ctx.meta = (x.shape, dim, idx)
        shape = x.shape or (1,)
        xc = _contig(x).reshape(shape)
        A, N, B = _dims3(shape, dim)
        M = idx.size
        out = be.empty(shape[:dim] + (M,) + shape[dim + 1:], x.dtype)
        if out.size:
            _kernel(x, "index_select_fwd")(xc.reshape(A, N, B), idx, out.reshape(A, M, B))
        return out.reshape(()) if x.ndim == 0 else out

    @staticmethod
    def backward(ctx, g):
        shape, dim, idx = ctx.meta
        be = backend_of(g)
        gx = be.zeros(shape, g.dtype)
        if g.size:
            A, N, B = _dims3(shape or (1,), dim)
            check_index("index_select backward", idx, N, dim, shape)  # may alias the user's index
            _kernel(g, "index_add_fwd")(gx.reshape(A, N, B), idx, _contig(g).reshape(A, idx.size, B),
                                        g.dtype.type(1))
        return gx, None, None


def index_select(input, dim, index):
    """The entries of ``input`` at the positions ``index`` (a vector) along ``dim``."""
    input = as_tensor_arg(input, "index_select")
    idx = _vector_index("index_select", index, like=input.array)
    dim = wrap_dim(dim, input.ndim, "index_select")
    n = input.shape[dim] if input.ndim else 1
    if input.ndim == 0 and idx.size != 1:
        raise RuntimeError(f"index_select: index to a 0-d tensor can have only 1 value, got {idx.size}")
    check_index("index_select", idx, n, dim, input.shape)
    return keep_versions(IndexSelect.apply(input, dim, idx), index)


def _index_add_into(out, dim, idx, src, alpha):
    """``out[.., idx[i], ..] += alpha * src[.., i, ..]`` in place; ``out`` may be strided."""
    if idx.size == 0:
        return
    be = backend_of(out)
    shape = out.shape or (1,)
    writeback = not out.flags.c_contiguous
    target = be.copy(out) if writeback else out
    A, N, B = _dims3(shape, dim)
    src = _contig(src.astype(out.dtype, copy=False))
    if _overlaps(src, target):  # e.g. x.index_add_(0, idx, x): read a snapshot
        src = be.copy(src)
    src3 = src.reshape(A, idx.size, B)
    _kernel(out, "index_add_fwd")(target.reshape(A, N, B), idx, src3, out.dtype.type(alpha))
    if writeback:
        out[...] = target


class IndexAdd(Function):
    @staticmethod
    def forward(ctx, x, dim, idx, src, alpha):
        ctx.meta = (dim, idx, src.shape, src.dtype, alpha)
        out = backend_of(x).copy(x)
        _index_add_into(out, dim, idx, src, alpha)
        return out

    @staticmethod
    def backward(ctx, g):
        dim, idx, sshape, sdtype, alpha = ctx.meta
        nx, _, _, ns, _ = ctx.needs_input_grad
        gs = None
        if ns:
            be = backend_of(g)
            shape = g.shape or (1,)
            A, N, B = _dims3(shape, dim)
            check_index("index_add backward", idx, N, dim, g.shape)  # may alias the user's index
            gs = be.empty(shape[:dim] + (idx.size,) + shape[dim + 1:], g.dtype)
            if gs.size:
                _kernel(g, "index_select_fwd")(_contig(g).reshape(A, N, B), idx, gs.reshape(A, idx.size, B))
            if alpha != 1:
                gs = be.mul(gs, g.dtype.type(alpha))
            gs = _as_grad(gs.reshape(sshape), sdtype)
        return (g if nx else None), None, None, gs, None


def _index_add_args(opname, input, dim, index, source):
    idx = _vector_index(opname, index, like=input.array)
    dim = wrap_dim(dim, input.ndim, opname)
    shape = tuple(input.shape) or (1,)
    want = shape[:dim] + (idx.size,) + shape[dim + 1:]
    sshape = tuple(source.shape) or (1,)
    if sshape != want:
        raise RuntimeError(f"{opname}: source of shape {tuple(source.shape)} does not match: expected "
                           f"{want} for input of shape {tuple(input.shape)}, dim {dim} and "
                           f"{idx.size} indices")
    check_index(opname, idx, shape[dim], dim, input.shape)
    return dim, idx


def index_add(input, dim, index, source, alpha=1):
    """A copy of ``input`` with ``alpha * source`` added at the rows ``index`` along ``dim``
    (duplicate indices accumulate)."""
    input = as_tensor_arg(input, "index_add")
    source = _src_arg(source, "index_add", input)
    dim, idx = _index_add_args("index_add", input, dim, index, source)
    # PyTorch keeps the index for the source's gradient only
    return keep_versions(IndexAdd.apply(input, dim, idx, source, alpha), index if source.requires_grad else None)


def index_add_(input, dim, index, source, alpha=1):
    """In-place :func:`index_add`."""
    source = _src_arg(source, "index_add_", input)
    d, idx = _index_add_args("index_add_", input, dim, index, source)
    return _inplace(input, "index_add_", (source,),
                    lambda out: _index_add_into(out, d, idx, source.array, alpha),
                    lambda: keep_versions(IndexAdd.apply(input, d, idx, source, alpha),
                                          index if source.requires_grad else None))


# ---- masks -------------------------------------------------------------------------------------
def _mask_arg(mask, opname, like):
    """A bool mask array on the device of ``like`` (a mask Tensor must already be there)."""
    if isinstance(mask, Tensor):
        m = mask.array
        _same_device(opname, "mask", mask, like)
    else:
        m = np.asarray(mask)
        if m.dtype.kind == "b":
            m = backend_of(like).asarray(m)
    if m.dtype.kind != "b":
        raise RuntimeError(f"{opname}: expected a boolean mask, got mask of dtype {m.dtype}")
    return m


def _value_arg(value, opname):
    if isinstance(value, Tensor):
        if value.ndim != 0:
            raise RuntimeError(f"{opname}: value must be a 0-dimensional tensor or a number, got a tensor "
                               f"of shape {tuple(value.shape)}")
        return value
    if isinstance(value, (bool, int, float, np.generic)):
        return value
    raise TypeError(f"{opname}: value must be a number or a 0-d tensor, got {type(value).__name__}")


def _broadcast_shape(opname, a, b, what="mask"):
    try:
        return tuple(np.broadcast_shapes(tuple(a), tuple(b)))
    except ValueError:
        raise RuntimeError(f"{opname}: {what} of shape {tuple(b)} is not broadcastable with the tensor of "
                           f"shape {tuple(a)}") from None


class MaskedFill(Function):
    @staticmethod
    def forward(ctx, x, mask, value):
        be = backend_of(x)
        ctx.meta = (x.shape, mask, getattr(value, "dtype", None))
        _broadcast_shape("masked_fill", x.shape, mask.shape)
        return be.where(mask, value, x).astype(x.dtype, copy=False)

    @staticmethod
    def backward(ctx, g):
        shape, mask, vdtype = ctx.meta
        be = backend_of(g)
        nx, _, nv = ctx.needs_input_grad
        zero = g.dtype.type(0)
        gx = be.sum_to_shape(be.where(mask, zero, g), shape) if nx else None
        gv = _as_grad(be.sum(be.where(mask, g, zero)), vdtype) if nv else None
        return gx, None, gv


def masked_fill(input, mask, value):
    """``input`` with ``value`` where ``mask`` (bool, broadcasting) is True."""
    input = as_tensor_arg(input, "masked_fill")
    return keep_versions(MaskedFill.apply(input, _mask_arg(mask, "masked_fill", input.array),
                                          _value_arg(value, "masked_fill")), mask)


def _triangle(opname, input, diagonal, lower):
    input = as_tensor_arg(input, opname)
    if input.ndim < 2:
        raise RuntimeError(f"{opname}: input tensor must have at least 2 dimensions, got shape {tuple(input.shape)}")
    if not isinstance(diagonal, (int, np.integer)) or isinstance(diagonal, bool):
        raise TypeError(f"{opname}: diagonal must be an int, got {type(diagonal).__name__}")
    m, n = input.shape[-2:]
    keep = np.tri(m, n, int(diagonal) if lower else int(diagonal) - 1, dtype=bool)
    # zero outside the kept triangle (exact zeros even where input is inf/NaN, as torch);
    # the gradient passes through the kept elements only (MaskedFill's backward)
    return masked_fill(input, ~keep if lower else keep, 0)


def tril(input, diagonal=0):
    """The lower triangle of the last two dimensions: elements ``(i, j)`` with
    ``j - i <= diagonal``, zeros elsewhere (``torch.tril``)."""
    return _triangle("tril", input, diagonal, True)


def triu(input, diagonal=0):
    """The upper triangle of the last two dimensions: elements ``(i, j)`` with
    ``j - i >= diagonal``, zeros elsewhere (``torch.triu``)."""
    return _triangle("triu", input, diagonal, False)


def masked_fill_(input, mask, value):
    """In-place :func:`masked_fill`; ``mask`` must broadcast to ``input``'s shape."""
    m = _mask_arg(mask, "masked_fill_", input.array)
    value = _value_arg(value, "masked_fill_")
    if _broadcast_shape("masked_fill_", input.shape, m.shape) != tuple(input.shape):
        raise RuntimeError(f"masked_fill_: mask of shape {tuple(m.shape)} does not broadcast to the "
                           f"tensor's shape {tuple(input.shape)}")

    def direct(out):
        np.copyto(out, value.array if isinstance(value, Tensor) else value, casting="unsafe", where=m)
    return _inplace(input, "masked_fill_", (value,), direct,
                    lambda: keep_versions(MaskedFill.apply(input, m, value), mask))


class MaskedSelect(Function):
    @staticmethod
    def forward(ctx, x, mask):
        be = backend_of(x)
        shape = _broadcast_shape("masked_select", x.shape, mask.shape)
        mb = be.broadcast_to(mask, shape)
        ctx.meta = (x.shape, shape, mb)
        return be.broadcast_to(x, shape)[mb]

    @staticmethod
    def backward(ctx, g):
        xshape, shape, mb = ctx.meta
        be = backend_of(g)
        flat = np.nonzero(mb.reshape(-1))[0].astype(np.int64, copy=False)
        full = _add_rows((mb.size,), 0, flat, g).reshape(shape)
        return be.sum_to_shape(full, xshape), None


def masked_select(input, mask):
    """The 1-D tensor of the entries of ``input`` where ``mask`` (broadcasting) is True."""
    input = as_tensor_arg(input, "masked_select")
    return keep_versions(MaskedSelect.apply(input, _mask_arg(mask, "masked_select", input.array)), mask)


def nonzero(input, as_tuple=False):
    """Indices of the non-zero entries: an int64 tensor of shape ``(n, ndim)``, or a tuple
    of ``ndim`` 1-D tensors with ``as_tuple=True``."""
    a = input.array if isinstance(input, Tensor) else np.asarray(input)
    a1 = a.reshape(1) if a.ndim == 0 else a
    be = backend_of(a1)
    cols = [c.astype(np.int64, copy=False) for c in a1.nonzero()]
    if as_tuple:
        return tuple(Tensor._from_array(c) for c in cols)
    if a.ndim == 0:
        return Tensor._from_array(be.zeros((cols[0].size, 0), np.int64))
    return Tensor._from_array(_contig(be.stack(cols, axis=1)))


def argwhere(input):
    """The indices of the nonzero elements as an ``(n, ndim)`` int64 tensor: :func:`nonzero`."""
    return nonzero(input)


# ---- one_hot / embedding -------------------------------------------------------------------------
def one_hot(tensor, num_classes=-1):
    """int64 tensor of shape ``tensor.shape + (num_classes,)`` with a 1 at each class index;
    ``num_classes=-1`` infers ``max + 1``."""
    a = tensor.array if isinstance(tensor, Tensor) else np.asarray(tensor)
    if a.dtype.kind not in "iu":
        raise RuntimeError(f"one_hot: expected an integer (index) tensor, got dtype {a.dtype}")
    be = backend_of(a)
    if num_classes == -1:
        if a.size == 0:
            raise RuntimeError("one_hot: can not infer the number of classes from an empty tensor; "
                               "pass num_classes")
        num_classes = int(a.max()) + 1
    bad = out_of_range(a, 0, num_classes)
    if bad is not None and bad < 0:
        raise RuntimeError(f"one_hot: class values must be non-negative, got {bad}")
    if bad is not None:
        raise RuntimeError(f"one_hot: class value {bad} is out of range for num_classes={num_classes} "
                           f"(input shape {tuple(a.shape)})")
    out = be.zeros((a.size, num_classes), np.int64)
    if a.size and num_classes:
        _kernel(a, "one_hot_fwd")(_contig(a.astype(np.int64, copy=False).reshape(-1)), out)
    return Tensor._from_array(out.reshape(a.shape + (num_classes,)))


class Embedding(Function):
    @staticmethod
    def forward(ctx, w, idx, padding_idx, scale_grad_by_freq, out_shape):
        be = backend_of(w)
        ctx.meta = (w.shape, idx, padding_idx, scale_grad_by_freq)
        out = be.empty((idx.size, w.shape[1]), w.dtype)
        if out.size:
            _kernel(w, "embedding_fwd")(_contig(w), idx, out)
        return out.reshape(out_shape)

    @staticmethod
    def backward(ctx, g):
        wshape, idx, padding_idx, scale = ctx.meta
        be = backend_of(g)
        check_index("embedding backward", idx, wshape[0], 0, wshape)  # may alias the user's index
        g2 = _contig(g).reshape(idx.size, wshape[1])
        if scale and idx.size:
            hidx = be.to_numpy(idx)  # a host bincount (a no-op transfer on the CPU)
            counts = np.bincount(hidx, minlength=wshape[0])
            g2 = be.div(g2, be.asarray(counts[hidx].astype(g.dtype)[:, None]))
        gw = be.zeros(wshape, g.dtype)
        if g2.size:
            _kernel(g, "embedding_bwd")(gw, idx, g2, padding_idx)
        return gw, None, None, None, None


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
              sparse=False):
    """Rows of ``weight`` (``num_embeddings x dim``) at the integer ``input``: output shape
    ``input.shape + (dim,)``. The row ``padding_idx`` gets no gradient; ``max_norm``
    renormalises the looked-up rows of ``weight`` in place first (as PyTorch does)."""
    idx = _index_arg(input, "embedding", "input", like=weight.array)
    if weight.ndim != 2:
        raise RuntimeError(f"embedding: weight must be 2-D (num_embeddings, embedding_dim), got shape "
                           f"{tuple(weight.shape)}")
    n = weight.shape[0]
    bad = out_of_range(idx, 0, n)
    if bad is not None:
        raise IndexError(f"embedding: index {bad} is out of range for an embedding table of {n} rows "
                         f"(weight shape {tuple(weight.shape)})")
    if padding_idx is None:
        pad = -1
    else:
        if not -n <= padding_idx < n:
            raise ValueError(f"embedding: padding_idx {padding_idx} must be within num_embeddings ({n})")
        pad = int(padding_idx) % n
    flat = idx.reshape(-1)
    if max_norm is not None and flat.size:
        w = weight.array
        be = backend_of(w)
        rows = np.unique(be.to_numpy(flat))  # the norms are computed on the host
        sel = be.to_numpy(w[be.asarray(rows)]).astype(np.float64)
        norms = np.linalg.norm(sel, ord=norm_type, axis=1)
        scale = np.where(norms > max_norm, max_norm / (norms + 1e-7), 1.0)
        new = (sel * scale[:, None]).astype(w.dtype)
        try:
            w[be.asarray(rows)] = be.asarray(new)
        except NotImplementedError:  # a backend without advanced assignment: the scatter kernel
            r = be.asarray(rows.astype(np.int64))
            _scatter_into("set", w, 0, _contig(be.broadcast_to(r.reshape(-1, 1), new.shape)), be.asarray(new))
        weight._bump_version()
    return keep_versions(Embedding.apply(weight, flat, pad, bool(scale_grad_by_freq), idx.shape + (weight.shape[1],)),
                         input)


# ---- fill_ / zero_ / copy_ -----------------------------------------------------------------------
class Fill(Function):
    @staticmethod
    def forward(ctx, x, value):
        ctx.vdtype = getattr(value, "dtype", None)
        return backend_of(x).full(x.shape, value, x.dtype)

    @staticmethod
    def backward(ctx, g):
        nx, nv = ctx.needs_input_grad
        be = backend_of(g)
        # The old values are overwritten: their gradient is zero (materialised, as PyTorch does).
        return (be.zeros(g.shape, g.dtype) if nx else None), (_as_grad(be.sum(g), ctx.vdtype) if nv else None)


def fill_(input, value):
    """Set every entry of ``input`` to ``value`` (a number or a 0-d tensor), in place."""
    value = _value_arg(value, "fill_")

    def direct(out):
        out[...] = value.array if isinstance(value, Tensor) else value
    return _inplace(input, "fill_", (value,), direct, lambda: Fill.apply(input, value))


def zero_(input):
    """Set every entry of ``input`` to zero, in place."""
    return fill_(input, 0)


class Copy(Function):
    @staticmethod
    def forward(ctx, x, src):
        be = backend_of(x)
        ctx.meta = (src.shape, src.dtype, backend_of(src))
        out = be.empty(x.shape, x.dtype)
        out[...] = _on(out, src)  # copy_ may cross devices, as in PyTorch
        return out

    @staticmethod
    def backward(ctx, g):
        shape, dtype, src_be = ctx.meta
        nx, ns = ctx.needs_input_grad
        be = backend_of(g)
        gs = None
        if ns:
            gs = _as_grad(be.sum_to_shape(g, shape), dtype)
            if src_be is not be:
                gs = src_be.from_numpy(be.to_numpy(gs))
        return (be.zeros(g.shape, g.dtype) if nx else None), gs


def copy_(input, src, non_blocking=False):
    """Copy ``src`` (broadcast to ``input``'s shape, cast to its dtype) into ``input``."""
    if not isinstance(src, Tensor):
        src = Tensor(np.asarray(src))
    if _broadcast_shape("copy_", input.shape, src.shape, "src") != tuple(input.shape):
        raise RuntimeError(f"copy_: src of shape {tuple(src.shape)} does not broadcast to the tensor's "
                           f"shape {tuple(input.shape)}")

    def direct(out):
        out[...] = _on(out, src.array)
    return _inplace(input, "copy_", (src,), direct, lambda: Copy.apply(input, src))
