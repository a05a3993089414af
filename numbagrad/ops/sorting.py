"""Sorting, selection and sampling: ``sort``/``argsort``, ``topk``, ``kthvalue``,
``searchsorted``/``bucketize``, ``unique``, and the random draws ``multinomial``,
``bernoulli``, ``normal`` and ``poisson``.

How it works, and why
---------------------
* Every index is computed on the host with NumPy (``_host``): the arrays come over with
  ``backend_of(a).to_numpy`` (no copy on the CPU), a NumPy function runs, and the int64
  result goes back with ``backend.asarray``. A sort is a data-dependent permutation with
  no loop worth fusing into a kernel, NumPy's stable sort already puts NaN last, and one
  host path serves every device, CUDA included.
* Values (``sort``, ``topk``, ``kthvalue``) are ``gather(input, dim, indices)``: the
  existing differentiable gather, whose backward is a scatter-add on the tensor's own
  device, so this module needs no backward of its own for them.
* Descending order is a stable ascending argsort of the input flipped along ``dim``,
  flipped back: NaN (the largest value, as in PyTorch) comes first, equal values keep
  their original order, and it works for every dtype (nothing is negated).
* ``dim`` and ``k`` are checked before any data moves, so a bad argument raises a clear
  error naming the op and never reaches a kernel.
* The samplers draw from numbagrad's seeded generator (``generator.numpy_rng``), so
  ``numbagrad.manual_seed`` makes them reproducible. As in PyTorch, a sample is
  differentiable with a zero gradient for its tensor parameters (``_Sample``).
"""
import collections

import numpy as np

from .. import _dtype
from .. import random as _random
from ..autograd.function import Function
from ..backend import backend_of, backend_for_device
from ..tensor import Tensor
from ._util import as_tensor_arg, wrap_dim
from .indexing import gather
from .shape import squeeze

__all__ = ["sort", "argsort", "topk", "kthvalue", "searchsorted", "bucketize", "unique",
           "multinomial", "bernoulli", "normal", "poisson"]

_Sort = collections.namedtuple("sort", ["values", "indices"])
_TopK = collections.namedtuple("topk", ["values", "indices"])
_KthValue = collections.namedtuple("kthvalue", ["values", "indices"])


# ---- helpers -----------------------------------------------------------------------------------
def _host(opname, fn, *args):
    """Run ``fn`` with NumPy on host copies of ``args`` (Tensors, or scalars passed as
    arrays) and return its result (an array or a tuple of arrays) as Tensors outside the
    graph, on the device of the first Tensor argument."""
    tensors = [a for a in args if isinstance(a, Tensor)]
    kind = type(tensors[0].array)
    for t in tensors[1:]:
        if type(t.array) is not kind:
            raise RuntimeError(f"{opname}: expected all tensors to be on the same device, got "
                               f"{tensors[0].device} and {t.device}")
    out = fn(*(backend_of(a.array).to_numpy(a.array) if isinstance(a, Tensor) else np.asarray(a)
               for a in args))
    be = backend_of(tensors[0].array)
    wrap = lambda a: Tensor._from_array(be.asarray(a))  # noqa: E731
    return tuple(map(wrap, out)) if isinstance(out, tuple) else wrap(out)


def _int(opname, name, v):
    if not isinstance(v, (int, np.integer)) or isinstance(v, (bool, np.bool_)):
        raise TypeError(f"{opname}: {name} must be an int, got {type(v).__name__} {v!r}")
    return int(v)


def _check_k(opname, k, lo, shape, dim):
    """Raise unless ``lo <= k <= size of dim``."""
    k, hi = _int(opname, "k", k), (shape[dim] if shape else 1)
    if not lo <= k <= hi:
        raise RuntimeError(f"{opname}: k={k} is out of range for dimension {dim} of size {hi} "
                           f"(tensor shape {tuple(shape)}; expected {lo} <= k <= {hi})")
    return k


def _argsort(a, dim, descending, start=0, stop=None):
    """Stable int64 argsort of host array ``a`` along ``dim`` (NaN counts as the largest
    value), positions ``start:stop`` of it along ``dim``; a 0-d ``a`` gives 0-d zero."""
    if a.ndim == 0:
        return np.zeros((), np.int64)
    if descending:
        idx = a.shape[dim] - 1 - np.flip(np.argsort(np.flip(a, dim), axis=dim, kind="stable"), dim)
    else:
        idx = np.argsort(a, axis=dim, kind="stable")
    return idx[(slice(None),) * dim + (slice(start, stop),)].astype(np.int64, order="C")


# ---- sort / argsort / topk / kthvalue ------------------------------------------------------------
def sort(input, dim=-1, descending=False, *, stable=False):
    """Sort ``input`` along ``dim``.

    Parameters
    ----------
    input : Tensor
    dim : int, default -1
    descending : bool, default False
    stable : bool, default False
        Accepted for PyTorch compatibility; the sort is always stable (equal values keep
        their order), which is one valid result of an unstable sort too.

    Returns
    -------
    (values, indices) : namedtuple
        ``values`` is ``input.gather(dim, indices)`` (differentiable); ``indices`` is int64.
        NaN sorts as the largest value.
    """
    input = as_tensor_arg(input, "sort")
    dim = wrap_dim(dim, input.ndim, "sort")
    idx = _host("sort", lambda a: _argsort(a, dim, descending), input)
    return _Sort(gather(input, dim, idx), idx)


def argsort(input, dim=-1, descending=False, *, stable=False):
    """The ``indices`` of :func:`sort` (int64, not differentiable)."""
    input = as_tensor_arg(input, "argsort")
    dim = wrap_dim(dim, input.ndim, "argsort")
    return _host("argsort", lambda a: _argsort(a, dim, descending), input)


def _selected(opname, input, k, dim, descending, kth):
    """``(input, dim, idx)`` of ``topk`` and ``kthvalue``: ``input`` as a Tensor, ``dim``
    wrapped, and the int64 positions along it, found on the host, of the first ``k``
    elements in sorted order (``kth``: of the ``k``-th alone, ``k`` counted from 1)."""
    input = as_tensor_arg(input, opname)
    dim = wrap_dim(dim, input.ndim, opname)
    k = _check_k(opname, k, 1 if kth else 0, input.shape, dim)
    return input, dim, _host(opname, lambda a: _argsort(a, dim, descending, k - 1 if kth else 0, k), input)


def topk(input, k, dim=-1, largest=True, sorted=True):
    """The ``k`` largest (or, with ``largest=False``, smallest) elements along ``dim``.

    Parameters
    ----------
    input : Tensor
    k : int
        ``0 <= k <= input.size(dim)``; otherwise a RuntimeError.
    dim : int, default -1
    largest : bool, default True
    sorted : bool, default True
        Accepted for PyTorch compatibility; the result is always sorted (ties in input order).

    Returns
    -------
    (values, indices) : namedtuple
        ``dim`` has size ``k``; ``values`` is a differentiable gather. NaN counts as the
        largest value.
    """
    input, dim, idx = _selected("topk", input, k, dim, largest, False)
    return _TopK(gather(input, dim, idx), idx)


def kthvalue(input, k, dim=-1, keepdim=False):
    """The ``k``-th smallest element (1-based) along ``dim``, NaN counting as the largest.

    Parameters
    ----------
    input : Tensor
    k : int
        ``1 <= k <= input.size(dim)``; otherwise a RuntimeError.
    dim : int, default -1
    keepdim : bool, default False
        Keep ``dim`` with size 1 in the results.

    Returns
    -------
    (values, indices) : namedtuple
        ``values`` is a differentiable gather; ``indices`` is int64.
    """
    input, dim, idx = _selected("kthvalue", input, k, dim, False, True)
    values = gather(input, dim, idx)
    if not keepdim and input.ndim:
        values, idx = squeeze(values, dim), squeeze(idx, dim)
    return _KthValue(values, idx)


# ---- searchsorted / bucketize / unique ---------------------------------------------------------
def searchsorted(sorted_sequence, values, *, out_int32=False, right=False, side=None, sorter=None):
    """Insertion points of ``values`` into ``sorted_sequence`` along its last dimension.

    Parameters
    ----------
    sorted_sequence : Tensor
        1-D, or N-D whose first N-1 dimensions equal those of ``values`` (one row each).
    values : Tensor or scalar
        A scalar gives a 0-d result (``sorted_sequence`` must then be 1-D).
    out_int32 : bool, default False
        int32 instead of int64 indices.
    right, side : bool, {'left', 'right'} or None
        ``'left'``: the first index ``i`` with ``values <= seq[i]``; ``'right'``: the first
        with ``values < seq[i]``. ``side`` wins over ``right``; opposite settings raise.
    sorter : Tensor, optional
        Indices that sort ``sorted_sequence`` along its last dimension.

    Returns
    -------
    Tensor of int64 (int32), shaped like ``values``; not differentiable.
    """
    op = "searchsorted"
    seq = as_tensor_arg(sorted_sequence, op)
    if side not in (None, "left", "right"):
        raise RuntimeError(f"{op}: side can only be 'left' or 'right' but got {side!r}")
    if side == "left" and right:
        raise RuntimeError(f"{op}: side and right can't be set to opposites, got side of left while right was True")
    side = side or ("right" if right else "left")
    if seq.ndim == 0:
        raise RuntimeError(f"{op}: boundaries tensor should have positive dimension, but got 0 dimension")
    vshape = tuple(values.shape) if isinstance(values, Tensor) else None
    if seq.ndim > 1 and (vshape is None or vshape[:-1] != tuple(seq.shape[:-1])):
        raise RuntimeError(f"{op}: boundaries tensor should be 1 dimension or the first N-1 dimensions of "
                           f"boundaries tensor and input value tensor must match, but got boundaries shape "
                           f"{tuple(seq.shape)} and values shape {vshape if vshape is not None else 'scalar'}")
    if sorter is not None and (not isinstance(sorter, Tensor) or tuple(sorter.shape) != tuple(seq.shape)
                               or sorter.dtype.kind not in "iu"):
        raise RuntimeError(f"{op}: sorter must be an integer tensor of the boundaries' shape {tuple(seq.shape)}")
    out_dtype = np.int32 if out_int32 else np.int64

    def find(s, v, *srt):
        if srt:
            s = np.take_along_axis(s, srt[0].astype(np.int64), -1)
        if s.ndim == 1:
            return np.asarray(np.searchsorted(s, v, side), out_dtype)
        rows, vals = s.reshape(-1, s.shape[-1]), v.reshape(-1, v.shape[-1])
        out = np.empty(vals.shape, out_dtype)
        for r in range(len(rows)):
            out[r] = np.searchsorted(rows[r], vals[r], side)
        return out.reshape(v.shape)

    return _host(op, find, seq, values, *(() if sorter is None else (sorter,)))


def bucketize(input, boundaries, *, out_int32=False, right=False):
    """The bucket of each element of ``input`` among the 1-D ascending ``boundaries``:
    ``i`` with ``boundaries[i-1] < x <= boundaries[i]`` (``<= x <`` with ``right=True``).
    This is ``searchsorted(boundaries, input, right=right)``; int64 (int32), not differentiable."""
    if not isinstance(boundaries, Tensor) or boundaries.ndim != 1:
        nd = boundaries.ndim if isinstance(boundaries, Tensor) else type(boundaries).__name__
        raise RuntimeError(f"bucketize: boundaries tensor must be 1 dimension, but got dim({nd})")
    return searchsorted(boundaries, input, out_int32=out_int32, right=right)


def unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None):
    """The distinct elements of ``input`` (flattened), in ascending order.

    Parameters
    ----------
    input : Tensor
    sorted : bool, default True
        Accepted for PyTorch compatibility; the output is always sorted.
    return_inverse : bool, default False
        Also return, for each element of ``input``, its index in the output (``input``'s shape).
    return_counts : bool, default False
        Also return how often each distinct element occurs.
    dim : None
        Only ``None`` is supported; any other value raises NotImplementedError.

    Returns
    -------
    Tensor, or a tuple ``(output[, inverse_indices][, counts])``; not differentiable.
    Each NaN is its own distinct element, as in PyTorch.
    """
    if dim is not None:
        raise NotImplementedError(f"unique: dim={dim!r} is not supported, only dim=None "
                                  "(the unique elements of the flattened input)")
    input = as_tensor_arg(input, "unique")

    def find(a):
        out, inv, cnt = np.unique(a.reshape(-1), return_inverse=True, return_counts=True, equal_nan=False)
        return out, inv.reshape(a.shape).astype(np.int64), cnt.astype(np.int64)

    out, inv, cnt = _host("unique", find, input)
    extra = (inv,) * return_inverse + (cnt,) * return_counts
    return (out,) + extra if extra else out


# ---- sampling ----------------------------------------------------------------------------------
class _Sample(Function):
    """A random draw made on the host: the output is ``sample``; its gradient with respect
    to every tensor parameter is zero, as for PyTorch's samplers."""

    @staticmethod
    def forward(ctx, sample, *params):
        ctx.meta = tuple((getattr(p, "shape", None), getattr(p, "dtype", None)) for p in params)
        return sample

    @staticmethod
    def backward(ctx, g):
        be = backend_of(g)
        return (None,) + tuple(be.zeros(s, d) if need else None
                               for (s, d), need in zip(ctx.meta, ctx.needs_input_grad[1:]))


def _rng(generator):
    return (generator or _random.default_generator).numpy_rng


def _sample(arr, like, *params):
    """Host sample ``arr`` as a Tensor on ``like``'s device, with zero gradients for ``params``."""
    return _Sample.apply(backend_of(like.array).asarray(arr), *params)


def _host_array(t):
    return backend_of(t.array).to_numpy(t.array)


def _float_input(opname, input):
    input = as_tensor_arg(input, opname)
    if input.dtype.kind != "f":
        raise NotImplementedError(f"{opname}: not implemented for dtype {input.dtype} (expected a floating "
                                  "point tensor)")
    return input


def multinomial(input, num_samples, replacement=False, *, generator=None):
    """Draw category indices from the rows of ``input``, weighted by its (unnormalised) values.

    Parameters
    ----------
    input : Tensor
        1-D ``(n,)`` or 2-D ``(rows, n)`` non-negative, finite floating weights; each row
        must have a positive sum.
    num_samples : int
        Positive; without replacement at most the number of nonzero weights in every row.
    replacement : bool, default False
        Without replacement the draws of a row are distinct (an exponential race:
        the ``num_samples`` smallest ``Exp(1) / weight``, which is sequential sampling).
    generator : numbagrad.Generator, optional
        Defaults to numbagrad's default generator (``manual_seed``).

    Returns
    -------
    Tensor of int64, shape ``(num_samples,)`` or ``(rows, num_samples)``. Zero-weight
    categories are never drawn.
    """
    op = "multinomial"
    input = as_tensor_arg(input, op)
    if input.ndim not in (1, 2):
        raise RuntimeError(f"{op}: prob_dist must be 1 or 2 dim, got shape {tuple(input.shape)}")
    if input.dtype.kind != "f":
        raise RuntimeError(f"{op}: only supports floating-point dtypes for input, got {input.dtype}")
    num_samples, n = _int(op, "num_samples", num_samples), input.shape[-1]
    if num_samples <= 0:
        raise RuntimeError(f"{op}: cannot sample n_sample <= 0 samples (num_samples={num_samples})")
    if not replacement and num_samples > n:
        raise RuntimeError(f"{op}: cannot sample n_sample > prob_dist.size(-1) samples without replacement "
                           f"(num_samples={num_samples}, shape {tuple(input.shape)})")
    rng = _rng(generator)

    def draw(p):
        p = p.reshape(-1, n).astype(np.float64)
        if not (np.isfinite(p) & (p >= 0)).all():
            raise RuntimeError(f"{op}: probability tensor contains either `inf`, `nan` or element < 0")
        if (p.sum(axis=1) <= 0).any():
            raise RuntimeError(f"{op}: invalid multinomial distribution (sum of probabilities <= 0)")
        nonzero = (p > 0).sum(axis=1)
        if not replacement and (nonzero < num_samples).any():
            raise RuntimeError(f"{op}: invalid multinomial distribution (with replacement=False, not enough "
                               f"categories with nonzero probability: {int(nonzero.min())} for "
                               f"num_samples={num_samples})")
        if replacement:  # inverse CDF: zero weights have empty intervals [cdf[i-1], cdf[i])
            cdf = np.cumsum(p, axis=1)
            u = rng.random((len(p), num_samples)) * cdf[:, -1:]
            idx = np.empty(u.shape, np.int64)
            for r in range(len(p)):
                idx[r] = np.searchsorted(cdf[r], u[r], side="right")
            last = n - 1 - np.argmax(p[:, ::-1] > 0, axis=1)  # u * total can round up to total
            idx = np.minimum(idx, last[:, None])
        else:  # log keys: a zero weight gives +inf (never among the first num_samples)
            with np.errstate(divide="ignore", invalid="ignore"):
                keys = np.log(rng.standard_exponential(p.shape)) - np.log(p)
            idx = np.argsort(keys, axis=1, kind="stable")[:, :num_samples].astype(np.int64)
        return idx.reshape(tuple(input.shape[:-1]) + (num_samples,))

    return _host(op, draw, input)


def bernoulli(input, p=None, *, generator=None):
    """0/1 draws, 1 with probability ``input`` (elementwise) or, when given, the float ``p``.

    Parameters
    ----------
    input : Tensor
        Probabilities in ``[0, 1]`` (floating dtype); with ``p``, only its shape and dtype count.
    p : float, optional
        One probability in ``[0, 1]`` for every element.
    generator : numbagrad.Generator, optional

    Returns
    -------
    Tensor of ``input``'s shape, dtype and device; its gradient with respect to ``input``
    is zero, as in PyTorch.
    """
    rng = _rng(generator)
    if p is None:
        input = _float_input("bernoulli", input)
        probs = _host_array(input)
        if not ((probs >= 0) & (probs <= 1)).all():
            raise RuntimeError("bernoulli: expected all probabilities in input to be in [0, 1]")
    else:
        input = as_tensor_arg(input, "bernoulli")
        if not 0 <= p <= 1:
            raise RuntimeError(f"bernoulli: expects p to be in [0, 1], but got p={p}")
        probs = p
    sample = rng.random(tuple(input.shape)) < probs
    return _sample(sample.astype(input.dtype), input, input)


def normal(mean, std=1.0, size=None, *, generator=None, dtype=None, device=None, requires_grad=False):
    """Normal draws with the given ``mean`` and standard deviation ``std``.

    Parameters
    ----------
    mean, std : Tensor or float
        At least one a floating Tensor: the two broadcast, and the result takes the dtype
        of ``mean`` (of ``std`` if only it is a Tensor) and its device. With both floats,
        ``size`` is required. ``std`` must be ``>= 0``.
    size : tuple of int, optional
        Only with a float ``mean`` and ``std``; the result then has ``dtype`` (default:
        the default float dtype), ``device`` and ``requires_grad``.
    generator : numbagrad.Generator, optional

    Returns
    -------
    Tensor; its gradient with respect to a tensor ``mean`` or ``std`` is zero, as in PyTorch.
    """
    rng = _rng(generator)
    tm, ts = isinstance(mean, Tensor), isinstance(std, Tensor)
    if not (tm or ts):
        if size is None:
            raise TypeError("normal: with a float mean and std, size is required: normal(mean, std, size)")
        if std < 0:
            raise RuntimeError(f"normal: expects std >= 0.0, but found std {std}")
        d = _dtype.as_dtype(dtype) or _dtype.get_default_dtype()
        z = rng.standard_normal(tuple(int(s) for s in size))
        t = Tensor._from_array(backend_for_device(device or "cpu").asarray((mean + std * z).astype(d)))
        return t.requires_grad_(True) if requires_grad else t
    if size is not None:
        raise TypeError("normal: size is only accepted with a float mean and std; with a tensor mean or std "
                        "the result has their broadcast shape")
    like = mean if tm else std
    if like.dtype.kind != "f":
        raise NotImplementedError(f"normal: not implemented for dtype {like.dtype} (expected a floating point tensor)")
    if tm and ts and type(mean.array) is not type(std.array):
        raise RuntimeError(f"normal: expected all tensors to be on the same device, got {mean.device} and {std.device}")
    m = _host_array(mean) if tm else mean
    s = _host_array(std) if ts else std
    if ts and not (s >= 0).all():
        raise RuntimeError("normal: expects all elements of std >= 0.0")
    if not ts and s < 0:
        raise RuntimeError(f"normal: expects std >= 0.0, but found std {s}")
    try:
        shape = np.broadcast_shapes(np.shape(m), np.shape(s))
    except ValueError:
        raise RuntimeError(f"normal: the shapes of mean {tuple(np.shape(m))} and std {tuple(np.shape(s))} "
                           "are not broadcastable") from None
    return _sample((m + s * rng.standard_normal(shape)).astype(like.dtype), like, mean, std)


def poisson(input, generator=None):
    """Poisson draws with the rates ``input`` (non-negative, floating dtype).

    Returns
    -------
    Tensor of ``input``'s shape, dtype and device; its gradient with respect to ``input``
    is zero, as in PyTorch.
    """
    input = _float_input("poisson", input)
    lam = _host_array(input)
    if not (lam >= 0).all():
        raise RuntimeError("poisson: invalid Poisson rate, expected rate to be non-negative (got a negative "
                           "or NaN rate)")
    try:
        sample = _rng(generator).poisson(lam)
    except ValueError as e:  # a rate too large for NumPy's sampler (inf, > ~9e18)
        raise RuntimeError(f"poisson: invalid Poisson rate: {e}") from None
    return _sample(np.asarray(sample).astype(input.dtype), input, input)
