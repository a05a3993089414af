"""``embedding_bag`` (``torch.nn.functional.embedding_bag``): sums, means or maxima of
bags of embedding rows.

Composed from differentiable ops, so its backward is theirs: the bags are first laid
out as a dense ``(B, L)`` index matrix (``L`` the longest bag) with a validity mask --
a 2-D ``input`` already is one; a 1-D ``input`` with ``offsets`` is scattered into it on
the host (only the integer indices travel) -- then one :func:`embedding` lookup gives
``(B, L, D)``, and a masked sum / mean / max over ``L`` gives ``(B, D)``. Entries equal
to ``padding_idx`` and the filler slots of short bags are masked out; an empty bag gives
zeros (``mean`` divides by the number of valid entries, at least 1), as in PyTorch.

This is O(B * L * D) work and memory, against PyTorch's O(nnz * D) segment kernels: fine
for bags of similar length, wasteful for very uneven ones.
"""
import numpy as np

from ..autograd.function import keep_versions
from ..backend import backend_of
from ..tensor import Tensor
from ._util import as_tensor_arg

__all__ = ["embedding_bag"]


def _host_int(t, name):
    a = t.array if isinstance(t, Tensor) else t
    a = backend_of(a).to_numpy(a) if not isinstance(a, np.ndarray) else a
    a = np.asarray(a)
    if a.dtype.kind not in "iu":
        raise TypeError(f"embedding_bag: {name} must be an integer tensor, got dtype {a.dtype}")
    return a.astype(np.int64)


def embedding_bag(input, weight, offsets=None, max_norm=None, norm_type=2, scale_grad_by_freq=False,
                  mode="mean", sparse=False, per_sample_weights=None, include_last_offset=False,
                  padding_idx=None):
    """Reduce bags of rows of ``weight`` (see the module docstring); returns ``(B, D)``."""
    from .indexing import embedding
    from .elementwise import where
    from .reduce import amax
    from .shape import cast
    if mode not in ("sum", "mean", "max"):
        raise ValueError(f"embedding_bag: mode has to be one of sum, mean or max, got {mode!r}")
    if per_sample_weights is not None and mode != "sum":
        raise NotImplementedError(f"embedding_bag: per_sample_weights was not None. per_sample_weights is "
                                  f"only supported for mode='sum' (got mode={mode!r})")
    idx = _host_int(input, "input")
    if not isinstance(weight, Tensor) or weight.ndim != 2:
        raise ValueError(f"embedding_bag: weight has to be a 2D Tensor, but got "
                         + (f"shape {tuple(weight.shape)}" if isinstance(weight, Tensor) else type(weight).__name__))
    n = weight.shape[0]
    if idx.size and (idx.min() < 0 or idx.max() >= n):  # named here: embedding's own check says embedding
        bad = int(idx.min()) if idx.min() < 0 else int(idx.max())
        raise IndexError(f"embedding_bag: index {bad} of input is out of range for an embedding table of "
                         f"{n} rows (weight shape {tuple(weight.shape)})")
    if padding_idx is not None:
        if not -n <= padding_idx < n:
            raise ValueError(f"embedding_bag: padding_idx {padding_idx} must be within num_embeddings ({n})")
        padding_idx = int(padding_idx) % n
    psw = None
    if idx.ndim == 2:
        if offsets is not None:
            raise ValueError("embedding_bag: if input is 2D, then offsets has to be None, as input is "
                             "treated is a mini-batch of fixed length sequences. However, found offsets of "
                             f"type {type(offsets).__name__}")
        table = idx
        valid = np.ones(idx.shape, bool)
        if per_sample_weights is not None:
            psw = as_tensor_arg(per_sample_weights, "embedding_bag")
            if tuple(psw.shape) != idx.shape:
                raise ValueError(f"embedding_bag: per_sample_weights of shape {tuple(psw.shape)} must have "
                                 f"the shape of input {idx.shape}")
    elif idx.ndim == 1:
        if offsets is None:
            raise ValueError("embedding_bag: offsets has to be a 1D Tensor but got None")
        off = _host_int(offsets, "offsets").reshape(-1)
        if off.size and off[0] != 0:
            raise ValueError(f"embedding_bag: offsets[0] has to be 0, i.e., the first sequence in the "
                             f"mini-batch has to start from position 0. However, got {off[0]}")
        if off.size and (np.any(np.diff(off) < 0) or off[-1] > idx.size):
            raise ValueError(f"embedding_bag: offsets must be non-decreasing and at most input.size(0) "
                             f"({idx.size}), got {off.tolist()}")
        ends = np.append(off[1:], idx.size) if not include_last_offset else off[1:]
        starts = off if not include_last_offset else off[:-1]
        lens = ends - starts
        nb, width = starts.size, int(lens.max()) if lens.size else 0
        col = np.arange(width)
        valid = col[None, :] < lens[:, None]
        pos = np.where(valid, starts[:, None] + col[None, :], 0)
        table = np.where(valid, idx[pos] if idx.size else 0, 0)
        if per_sample_weights is not None:
            psw_t = as_tensor_arg(per_sample_weights, "embedding_bag")
            if tuple(psw_t.shape) != idx.shape:
                raise ValueError(f"embedding_bag: per_sample_weights of shape {tuple(psw_t.shape)} must "
                                 f"have the shape of input {idx.shape}")
            psw = psw_t[Tensor._from_array(backend_of(psw_t.array).asarray(pos.astype(np.int64)))]
    else:
        raise ValueError(f"embedding_bag: input has to be 1D or 2D Tensor, but got Tensor of dimension "
                         f"{idx.ndim}")
    if padding_idx is not None:
        valid &= table != padding_idx
    if table.size and valid.any():  # a filler slot repeats a looked-up index (keeps max_norm's rows the same)
        table = np.where(valid, table, table[valid][0])
    be = backend_of(weight.array)
    B = table.shape[0]
    D = weight.shape[1]
    if table.shape[1] == 0:
        return keep_versions(Tensor._from_array(be.zeros((B, D), weight.dtype)) + weight.sum() * 0, input, offsets)
    emb = embedding(Tensor._from_array(be.asarray(table)), weight, padding_idx, max_norm, norm_type,
                    scale_grad_by_freq)
    m = Tensor._from_array(be.asarray(valid[:, :, None]))
    if mode == "max":
        neg = where(m, emb, float("-inf"))
        out = amax(neg, 1)
        any_valid = Tensor._from_array(be.asarray(valid.any(1)[:, None]))
        return keep_versions(where(any_valid, out, 0.0), input, offsets)
    if psw is not None:
        emb = emb * cast(psw, weight.dtype).reshape(B, -1, 1)
    s = where(m, emb, 0.0).sum(1)
    if mode == "sum":
        return keep_versions(s, input, offsets)
    counts = np.maximum(valid.sum(1), 1).astype(weight.dtype)[:, None]
    # the bags are host copies (so the lookup's backward reads no caller's array); writing
    # input or offsets still makes backward raise, as PyTorch, which keeps them
    return keep_versions(s / Tensor._from_array(be.asarray(counts)), input, offsets)
