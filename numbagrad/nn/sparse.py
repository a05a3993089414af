"""``Embedding`` and ``EmbeddingBag`` (``torch.nn.Embedding`` / ``torch.nn.EmbeddingBag``).

Both are lookup tables over :func:`numbagrad.ops.indexing.embedding` (a gather kernel
forward, a scatter-add kernel backward that skips ``padding_idx``). The table
``weight`` is ``(num_embeddings, embedding_dim)`` and starts as N(0, 1) with the padding
row zeroed, drawn from numbagrad's default generator, as in PyTorch.

``sparse=True`` is accepted for compatibility and recorded (and shown in the repr), but
the gradient is always a dense ``(num_embeddings, embedding_dim)`` array: numbagrad has
no sparse tensors.
"""
import numpy as np

from ..ops.indexing import embedding as _embedding
from ..tensor import Tensor
from . import init
from .module import Module, _changed_options
from .parameter import Parameter, empty_parameter, factory_dtype

__all__ = ["Embedding", "EmbeddingBag"]


def _norm_padding_idx(padding_idx, num_embeddings, name):
    if padding_idx is None:
        return None
    padding_idx = int(padding_idx)
    if padding_idx > 0:
        if padding_idx >= num_embeddings:
            raise ValueError(f"{name}: padding_idx ({padding_idx}) must be within num_embeddings "
                             f"({num_embeddings})")
    elif padding_idx < 0:
        if padding_idx < -num_embeddings:
            raise ValueError(f"{name}: padding_idx ({padding_idx}) must be within num_embeddings "
                             f"({num_embeddings})")
        padding_idx = num_embeddings + padding_idx
    return padding_idx


def _table(weight, num_embeddings, embedding_dim, dt, name):
    """A Parameter from ``_weight`` (checked shape), or None."""
    if weight is None:
        return None
    arr = weight.detach().numpy() if isinstance(weight, Tensor) else np.asarray(weight)
    if tuple(arr.shape) != (num_embeddings, embedding_dim):
        raise AssertionError(f"{name}: shape of weight {tuple(arr.shape)} does not match num_embeddings and "
                             f"embedding_dim ({num_embeddings}, {embedding_dim})")
    if isinstance(weight, Tensor):  # share the caller's storage (as PyTorch's Parameter(_weight))
        return Parameter(weight.array)
    return Parameter(np.array(arr, dtype=dt if arr.dtype.kind != "f" else arr.dtype))


class _Table(Module):
    """What Embedding and EmbeddingBag share: the N(0, 1) table with a zero padding row, the
    table's repr options and ``from_pretrained``'s shape check."""

    def reset_parameters(self):
        init.normal_(self.weight)
        self._fill_padding_idx_with_zero()

    def _fill_padding_idx_with_zero(self):
        if self.padding_idx is not None:
            self.weight.array[self.padding_idx] = 0
            self.weight._version.value += 1

    def _norm_repr(self):
        """``extra_repr``'s ``max_norm``, ``norm_type`` and ``scale_grad_by_freq`` (those set)."""
        return _changed_options(self, (("max_norm", None), ("norm_type", 2), ("scale_grad_by_freq", False)))

    @staticmethod
    def _pretrained_shape(embeddings):
        if embeddings.ndim != 2:
            raise AssertionError(f"Embeddings parameter is expected to be 2-dimensional, got shape "
                                 f"{tuple(embeddings.shape)}")
        return embeddings.shape


class Embedding(_Table):
    """A lookup table: ``input`` (integers, any shape) -> ``weight[input]`` of shape
    ``input.shape + (embedding_dim,)``.

    ``padding_idx`` rows get no gradient (and start at zero); ``max_norm`` renormalises the
    looked-up rows of ``weight`` in place to at most that ``norm_type``-norm before each
    lookup; ``scale_grad_by_freq`` divides each row's gradient by its count in the batch.
    """

    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, max_norm=None, norm_type=2.0,
                 scale_grad_by_freq=False, sparse=False, _weight=None, _freeze=False, device=None,
                 dtype=None):
        super().__init__()
        dt = factory_dtype(device, dtype)
        self.num_embeddings = int(num_embeddings)
        self.embedding_dim = int(embedding_dim)
        self.padding_idx = _norm_padding_idx(padding_idx, self.num_embeddings, "Embedding")
        self.max_norm = max_norm
        self.norm_type = norm_type
        self.scale_grad_by_freq = scale_grad_by_freq
        self.sparse = sparse
        w = _table(_weight, self.num_embeddings, self.embedding_dim, dt, "Embedding")
        if w is None:
            self.weight = empty_parameter(self, (self.num_embeddings, self.embedding_dim), dt)
            self.weight.requires_grad_(not _freeze)
            self.reset_parameters()
        else:
            w.requires_grad_(not _freeze)
            self.weight = w
        if device is not None:
            self.to(device)

    def forward(self, input):
        return _embedding(input, self._parameters["weight"], self.padding_idx, self.max_norm, self.norm_type,
                          self.scale_grad_by_freq, self.sparse)

    def extra_repr(self):
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.padding_idx is not None:
            s += f", padding_idx={self.padding_idx}"
        s += self._norm_repr()
        if self.sparse is not False:
            s += ", sparse=True"
        return s

    @classmethod
    def from_pretrained(cls, embeddings, freeze=True, padding_idx=None, max_norm=None, norm_type=2.0,
                        scale_grad_by_freq=False, sparse=False):
        """An Embedding whose table is ``embeddings`` (2-D; its storage is shared, as in
        PyTorch); ``freeze=True`` makes the table not require grad."""
        rows, cols = cls._pretrained_shape(embeddings)
        return cls(num_embeddings=rows, embedding_dim=cols, _weight=embeddings, _freeze=freeze,
                   padding_idx=padding_idx, max_norm=max_norm, norm_type=norm_type,
                   scale_grad_by_freq=scale_grad_by_freq, sparse=sparse)


class EmbeddingBag(_Table):
    """Sums, means or maxima of bags of embeddings (``torch.nn.EmbeddingBag``).

    ``input`` is 2-D ``(B, N)`` (B bags of N indices; ``offsets`` must be None) or 1-D
    with ``offsets`` (bag ``b`` is ``input[offsets[b]:offsets[b+1]]``; with
    ``include_last_offset`` the last offset closes the last bag). ``per_sample_weights``
    (mode ``'sum'`` only) scales each looked-up row. Entries equal to ``padding_idx`` are
    left out of their bag (a bag left empty gives zeros, and counts of the mean exclude
    them). Built from the differentiable ops (one embedding lookup, then a segment
    reduction per bag layout): the backward is the ops' own.
    """

    def __init__(self, num_embeddings, embedding_dim, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
                 mode="mean", sparse=False, _weight=None, include_last_offset=False, padding_idx=None,
                 device=None, dtype=None):
        super().__init__()
        dt = factory_dtype(device, dtype)
        if mode not in ("sum", "mean", "max"):
            raise ValueError(f"EmbeddingBag: mode has to be one of sum, mean or max, got {mode!r}")
        self.num_embeddings = int(num_embeddings)
        self.embedding_dim = int(embedding_dim)
        self.max_norm = max_norm
        self.norm_type = norm_type
        self.scale_grad_by_freq = scale_grad_by_freq
        self.padding_idx = _norm_padding_idx(padding_idx, self.num_embeddings, "EmbeddingBag")
        w = _table(_weight, self.num_embeddings, self.embedding_dim, dt, "EmbeddingBag")
        if w is None:
            self.weight = empty_parameter(self, (self.num_embeddings, self.embedding_dim), dt)
            self.reset_parameters()
        else:
            self.weight = w
        self.mode = mode
        self.sparse = sparse
        self.include_last_offset = include_last_offset
        if device is not None:
            self.to(device)

    def forward(self, input, offsets=None, per_sample_weights=None):
        from ..ops.sparse import embedding_bag
        return embedding_bag(input, self._parameters["weight"], offsets, self.max_norm, self.norm_type,
                             self.scale_grad_by_freq, self.mode, self.sparse, per_sample_weights,
                             self.include_last_offset, self.padding_idx)

    def extra_repr(self):
        s = f"{self.num_embeddings}, {self.embedding_dim}" + self._norm_repr()
        s += f", mode={self.mode!r}"
        if self.padding_idx is not None:
            s += f", padding_idx={self.padding_idx}"
        return s

    @classmethod
    def from_pretrained(cls, embeddings, freeze=True, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
                        mode="mean", sparse=False, include_last_offset=False, padding_idx=None):
        rows, cols = cls._pretrained_shape(embeddings)
        bag = cls(num_embeddings=rows, embedding_dim=cols, _weight=embeddings, max_norm=max_norm,
                  norm_type=norm_type, scale_grad_by_freq=scale_grad_by_freq, mode=mode, sparse=sparse,
                  include_last_offset=include_last_offset, padding_idx=padding_idx)
        bag.weight.requires_grad_(not freeze)
        return bag
