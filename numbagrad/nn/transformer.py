"""Transformer layers (``torch.nn.TransformerEncoderLayer``, ``TransformerDecoderLayer``,
``TransformerEncoder``, ``TransformerDecoder``, ``Transformer``).

Submodule names, constructor arguments and defaults are PyTorch's (``self_attn``,
``multihead_attn``, ``linear1``, ``dropout``, ``linear2``, ``norm1..3``, ``dropout1..3``;
the stacks hold ``layers`` (a :class:`ModuleList` of ``copy.deepcopy`` clones) and
``norm``), so ``state_dict()`` keys and shapes equal PyTorch's and its state dicts load
directly. ``norm_first`` picks the pre-norm residual form ``x + f(norm(x))`` instead of
``norm(x + f(x))``. The attention is :class:`~numbagrad.nn.MultiheadAttention` (one fused
attention node per call), the feed-forward block ``linear2(dropout(act(linear1(x))))``.

Masks follow PyTorch: boolean ``True`` = not allowed to attend, float masks are added;
``is_causal`` is a hint that the given mask is the causal mask, which then lets the
attention use its causal kernel instead of reading the mask. ``TransformerEncoder`` /
``TransformerDecoder`` detect a causal float mask when ``is_causal`` is None, as PyTorch.
PyTorch's "fast path" (nested tensors in eval mode) is an implementation detail not
reproduced: ``enable_nested_tensor`` and ``mask_check`` are accepted and ignored, so
padded positions get ordinary (not zeroed) outputs.
"""
import copy

import numpy as np

from .. import _dtype
from ..ops import activation as _act
from .activation import Dropout
from .attention import MultiheadAttention
from .container import ModuleList
from .linear import Linear
from .module import Module
from .normalization import LayerNorm

__all__ = ["TransformerEncoderLayer", "TransformerDecoderLayer", "TransformerEncoder", "TransformerDecoder",
           "Transformer", "generate_square_subsequent_mask"]


def generate_square_subsequent_mask(sz, device=None, dtype=None):
    """The ``(sz, sz)`` float causal mask: ``-inf`` above the diagonal, 0 elsewhere."""
    from ..tensor import Tensor
    dt = _dtype.as_dtype(dtype) or _dtype.get_default_dtype()
    m = np.triu(np.full((sz, sz), -np.inf, dt), 1)
    t = Tensor(m)
    return t if device is None else t.to(device)


def _get_activation_fn(activation):
    if activation == "relu":
        return _act.relu
    if activation == "gelu":
        return _act.gelu
    raise RuntimeError(f"activation should be relu/gelu, not {activation}")


_FUSED_ACT = {_act.relu: "relu", _act.gelu: "gelu"}
"""Activation functions whose FFN path takes the fused linear + bias + activation op."""


def _get_clones(module, n):
    return ModuleList([copy.deepcopy(module) for _ in range(n)])


def _seq_len(src, batch_first):
    if src.ndim == 2:  # unbatched (S, E)
        return src.shape[0]
    return src.shape[1 if batch_first else 0]


def _detect_is_causal_mask(mask, is_causal=None, size=None):
    """PyTorch's rule: an explicit ``is_causal`` wins; with None, a mask equal to
    :func:`generate_square_subsequent_mask` counts as causal."""
    make_causal = is_causal is True
    if is_causal is None and mask is not None:
        sz = size if size is not None else mask.shape[-2]
        if tuple(mask.shape) == (sz, sz) and mask.dtype.kind == "f":
            ref = np.triu(np.full((sz, sz), -np.inf), 1)
            make_causal = bool(np.array_equal(mask.detach().cpu().numpy().astype(np.float64), ref))
    return make_causal


class _LayerBase(Module):
    """What the encoder and decoder layers share: the constructor (PyTorch's signature; the
    attention blocks named in ``_attention``, then the feed-forward block and one LayerNorm and
    Dropout per block), the self-attention block and the feed-forward block."""

    _attention = ("self_attn",)

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation=_act.relu,
                 layer_norm_eps=1e-5, batch_first=False, norm_first=False, bias=True, device=None,
                 dtype=None):
        super().__init__()
        dt = _dtype.as_dtype(dtype) or _dtype.get_default_dtype()
        for name in self._attention:
            setattr(self, name, MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                                   batch_first=batch_first, dtype=dt))
        self.norm_first = norm_first
        self._setup_ffn(d_model, dim_feedforward, dropout, activation, layer_norm_eps, bias, dt,
                        len(self._attention) + 1)
        if device is not None:
            self.to(device)

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal=False):
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                           need_weights=False, is_causal=is_causal)[0]
        return self.dropout1(x)

    def _setup_ffn(self, d_model, dim_feedforward, dropout, activation, layer_norm_eps, bias, dt, n_norms):
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, dtype=dt)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, dtype=dt)
        for i in range(1, n_norms + 1):
            setattr(self, f"norm{i}", LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dt))
        for i in range(1, n_norms + 1):
            setattr(self, f"dropout{i}", Dropout(dropout))
        if isinstance(activation, str):
            activation = _get_activation_fn(activation)
        self.activation = activation

    def _ff_block(self, x, drop):
        l1 = self.linear1
        act = _FUSED_ACT.get(self.activation) if type(l1) is Linear else None
        if act is not None and not (l1._forward_hooks or l1._forward_pre_hooks):
            # linear1 + bias + activation as one fused node (numbagrad.ops.fused.linear_act):
            # one pass over the hidden activations instead of three, forward and backward.
            h = l1.forward_act(x, act)
        else:
            h = self.activation(l1(x))
        return drop(self.linear2(self.dropout(h)))


class TransformerEncoderLayer(_LayerBase):
    """Self-attention and feed-forward blocks with residuals and LayerNorm
    (``torch.nn.TransformerEncoderLayer``).

    ``forward(src, src_mask=None, src_key_padding_mask=None, is_causal=False)``; inputs
    ``(S, N, E)`` (``(N, S, E)`` with ``batch_first``) or unbatched ``(S, E)``.
    """

    __constants__ = ["norm_first"]

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal=False):
        x = src
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask, src_key_padding_mask, is_causal)
            x = x + self._ff_block(self.norm2(x), self.dropout2)
        else:
            x = self.norm1(x + self._sa_block(x, src_mask, src_key_padding_mask, is_causal))
            x = self.norm2(x + self._ff_block(x, self.dropout2))
        return x


class TransformerDecoderLayer(_LayerBase):
    """Self-attention, cross-attention over ``memory`` and feed-forward blocks
    (``torch.nn.TransformerDecoderLayer``).

    ``forward(tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
    memory_key_padding_mask=None, tgt_is_causal=False, memory_is_causal=False)``.
    """

    __constants__ = ["norm_first"]
    _attention = ("self_attn", "multihead_attn")

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=False, memory_is_causal=False):
        x = tgt
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), tgt_mask, tgt_key_padding_mask, tgt_is_causal)
            x = x + self._mha_block(self.norm2(x), memory, memory_mask, memory_key_padding_mask,
                                    memory_is_causal)
            x = x + self._ff_block(self.norm3(x), self.dropout3)
        else:
            x = self.norm1(x + self._sa_block(x, tgt_mask, tgt_key_padding_mask, tgt_is_causal))
            x = self.norm2(x + self._mha_block(x, memory, memory_mask, memory_key_padding_mask,
                                               memory_is_causal))
            x = self.norm3(x + self._ff_block(x, self.dropout3))
        return x

    def _mha_block(self, x, mem, attn_mask, key_padding_mask, is_causal=False):
        x = self.multihead_attn(x, mem, mem, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                                is_causal=is_causal, need_weights=False)[0]
        return self.dropout2(x)


class TransformerEncoder(Module):
    """A stack of ``num_layers`` deep copies of ``encoder_layer``, then ``norm`` if given
    (``torch.nn.TransformerEncoder``). ``forward(src, mask=None, src_key_padding_mask=None,
    is_causal=None)``."""

    __constants__ = ["norm"]

    def __init__(self, encoder_layer, num_layers, norm=None, enable_nested_tensor=True, mask_check=True):
        super().__init__()
        self.layers = _get_clones(encoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm
        self.enable_nested_tensor = enable_nested_tensor
        self.use_nested_tensor = False  # PyTorch's fast path is not reproduced (see the module docstring)
        self.mask_check = mask_check

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal=None):
        output = src
        first = self.layers[0] if len(self.layers) else None
        bf = first.self_attn.batch_first if first is not None else False
        is_causal = _detect_is_causal_mask(mask, is_causal, _seq_len(src, bf))
        for mod in self.layers:
            output = mod(output, src_mask=mask, is_causal=is_causal,
                         src_key_padding_mask=src_key_padding_mask)
        if self.norm is not None:
            output = self.norm(output)
        return output


class TransformerDecoder(Module):
    """A stack of ``num_layers`` deep copies of ``decoder_layer``, then ``norm`` if given
    (``torch.nn.TransformerDecoder``)."""

    __constants__ = ["norm"]

    def __init__(self, decoder_layer, num_layers, norm=None):
        super().__init__()
        self.layers = _get_clones(decoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=None, memory_is_causal=False):
        output = tgt
        first = self.layers[0] if len(self.layers) else None
        bf = first.self_attn.batch_first if first is not None else False
        tgt_is_causal = _detect_is_causal_mask(tgt_mask, tgt_is_causal, _seq_len(tgt, bf))
        for mod in self.layers:
            output = mod(output, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                         tgt_key_padding_mask=tgt_key_padding_mask,
                         memory_key_padding_mask=memory_key_padding_mask,
                         tgt_is_causal=tgt_is_causal, memory_is_causal=memory_is_causal)
        if self.norm is not None:
            output = self.norm(output)
        return output


def _default_stack(stack_cls, layer_cls, num_layers, layer_args, dt):
    """``Transformer``'s encoder or decoder where no custom one is given: ``num_layers``
    copies of ``layer_cls(*layer_args)`` and a final LayerNorm."""
    d_model, layer_norm_eps, bias = layer_args[0], layer_args[5], layer_args[8]
    return stack_cls(layer_cls(*layer_args, dtype=dt), num_layers, LayerNorm(d_model, eps=layer_norm_eps, bias=bias,
                                                                             dtype=dt))


class Transformer(Module):
    """Encoder-decoder Transformer (``torch.nn.Transformer``): ``encoder`` (a
    :class:`TransformerEncoder` with a final LayerNorm) and ``decoder``; every parameter
    of dimension > 1 is re-initialised with ``xavier_uniform_`` as in PyTorch."""

    def __init__(self, d_model=512, nhead=8, num_encoder_layers=6, num_decoder_layers=6, dim_feedforward=2048,
                 dropout=0.1, activation=_act.relu, custom_encoder=None, custom_decoder=None,
                 layer_norm_eps=1e-5, batch_first=False, norm_first=False, bias=True, device=None,
                 dtype=None):
        super().__init__()
        dt = _dtype.as_dtype(dtype) or _dtype.get_default_dtype()
        layer_args = (d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps, batch_first,
                      norm_first, bias)
        self.encoder = custom_encoder if custom_encoder is not None else _default_stack(
            TransformerEncoder, TransformerEncoderLayer, num_encoder_layers, layer_args, dt)
        self.decoder = custom_decoder if custom_decoder is not None else _default_stack(
            TransformerDecoder, TransformerDecoderLayer, num_decoder_layers, layer_args, dt)
        self._reset_parameters()
        self.d_model = d_model
        self.nhead = nhead
        self.batch_first = batch_first
        if device is not None:
            self.to(device)

    def forward(self, src, tgt, src_mask=None, tgt_mask=None, memory_mask=None, src_key_padding_mask=None,
                tgt_key_padding_mask=None, memory_key_padding_mask=None, src_is_causal=None,
                tgt_is_causal=None, memory_is_causal=False):
        is_batched = src.ndim == 3
        if not self.batch_first and src.shape[1] != tgt.shape[1] and is_batched:
            raise RuntimeError("the batch number of src and tgt must be equal")
        if self.batch_first and src.shape[0] != tgt.shape[0] and is_batched:
            raise RuntimeError("the batch number of src and tgt must be equal")
        if src.shape[-1] != self.d_model or tgt.shape[-1] != self.d_model:
            raise RuntimeError("the feature number of src and tgt must be equal to d_model")
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask,
                              is_causal=src_is_causal)
        return self.decoder(tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                            tgt_key_padding_mask=tgt_key_padding_mask,
                            memory_key_padding_mask=memory_key_padding_mask, tgt_is_causal=tgt_is_causal,
                            memory_is_causal=memory_is_causal)

    generate_square_subsequent_mask = staticmethod(generate_square_subsequent_mask)

    def _reset_parameters(self):
        from . import init
        for p in self.parameters():
            if p.ndim > 1:
                init.xavier_uniform_(p)
