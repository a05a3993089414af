"""``MultiheadAttention`` (``torch.nn.MultiheadAttention``).

Parameters, their names, shapes and registration order are PyTorch's, so ``state_dict()``
keys and shapes match and a PyTorch state dict loads as is:

* ``in_proj_weight`` ``(3E, E)`` when ``kdim == vdim == embed_dim``, else separate
  ``q_proj_weight`` ``(E, E)``, ``k_proj_weight`` ``(E, kdim)``, ``v_proj_weight``
  ``(E, vdim)``; the absent ones are registered as ``None``;
* ``in_proj_bias`` ``(3E,)`` and ``out_proj`` (a :class:`Linear` ``E -> E``) when ``bias``;
* ``bias_k`` / ``bias_v`` ``(1, 1, E)`` with ``add_bias_kv``.

Initialisation as PyTorch: ``xavier_uniform_`` on the input projections, zeros on
``in_proj_bias`` and ``out_proj.bias``, ``xavier_normal_`` on ``bias_k`` / ``bias_v``
(``out_proj.weight`` keeps Linear's default), drawn from numbagrad's generator.

The forward is :func:`numbagrad.ops.attention.multi_head_attention_forward`'s body: one
packed input projection GEMM for self-attention (``query is key is value``), one fused
attention Function over per-head views of the projections, the output projection.
``batch_first`` inputs are used in place (no transpose copies).
"""
from .. import _dtype
from ..ops.attention import _mha
from . import init
from .linear import Linear
from .module import Module
from .parameter import empty_parameter


__all__ = ["MultiheadAttention"]


class NonDynamicallyQuantizableLinear(Linear):
    """PyTorch's name for the output projection of :class:`MultiheadAttention` (a plain
    :class:`Linear`; the name only keeps ``repr`` identical)."""


class MultiheadAttention(Module):
    """Multi-head attention ``softmax(Q K^T / sqrt(head_dim) + mask) V`` over ``num_heads``
    heads, with input and output projections (``torch.nn.MultiheadAttention``).

    ``forward(query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
    average_attn_weights=True, is_causal=False)`` returns ``(attn_output, attn_weights)``;
    inputs are ``(L, N, E)`` (``(N, L, E)`` with ``batch_first``) or unbatched ``(L, E)``.
    Boolean masks mark positions NOT allowed to attend (True); float masks are added.
    ``attn_weights`` is ``(N, L, S)`` averaged over heads, ``(N, num_heads, L, S)`` with
    ``average_attn_weights=False``, or None when ``need_weights=False``.
    """

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False, add_zero_attn=False,
                 kdim=None, vdim=None, batch_first=False, device=None, dtype=None):
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(f"embed_dim and num_heads must be greater than 0, got embed_dim={embed_dim} and "
                             f"num_heads={num_heads} instead")
        super().__init__()
        dt = _dtype.as_dtype(dtype) or _dtype.get_default_dtype()
        self.embed_dim = int(embed_dim)
        self.kdim = int(kdim) if kdim is not None else self.embed_dim
        self.vdim = int(vdim) if vdim is not None else self.embed_dim
        self._qkv_same_embed_dim = self.kdim == self.embed_dim and self.vdim == self.embed_dim
        self.num_heads = int(num_heads)
        self.dropout = float(dropout)
        self.batch_first = bool(batch_first)
        self.head_dim = self.embed_dim // self.num_heads
        if self.head_dim * self.num_heads != self.embed_dim:
            raise ValueError(f"MultiheadAttention: embed_dim must be divisible by num_heads, got "
                             f"embed_dim={self.embed_dim} and num_heads={self.num_heads}")
        E = self.embed_dim
        if not self._qkv_same_embed_dim:
            self.q_proj_weight = empty_parameter(self, (E, E), dt)
            self.k_proj_weight = empty_parameter(self, (E, self.kdim), dt)
            self.v_proj_weight = empty_parameter(self, (E, self.vdim), dt)
            self.register_parameter("in_proj_weight", None)
        else:
            self.in_proj_weight = empty_parameter(self, (3 * E, E), dt)
            self.register_parameter("q_proj_weight", None)
            self.register_parameter("k_proj_weight", None)
            self.register_parameter("v_proj_weight", None)
        if bias:
            self.in_proj_bias = empty_parameter(self, (3 * E,), dt)
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = NonDynamicallyQuantizableLinear(E, E, bias=bias, dtype=dt)
        if add_bias_kv:
            self.bias_k = empty_parameter(self, (1, 1, E), dt)
            self.bias_v = empty_parameter(self, (1, 1, E), dt)
        else:
            self.bias_k = self.bias_v = None
        self.add_zero_attn = bool(add_zero_attn)
        self._reset_parameters()
        if device is not None:
            self.to(device)

    def _reset_parameters(self):
        if self._qkv_same_embed_dim:
            init.xavier_uniform_(self.in_proj_weight)
        else:
            init.xavier_uniform_(self.q_proj_weight)
            init.xavier_uniform_(self.k_proj_weight)
            init.xavier_uniform_(self.v_proj_weight)
        if self.in_proj_bias is not None:
            init.zeros_(self.in_proj_bias)
            init.zeros_(self.out_proj.bias)
        if self.bias_k is not None:
            init.xavier_normal_(self.bias_k)
        if self.bias_v is not None:
            init.xavier_normal_(self.bias_v)

    reset_parameters = _reset_parameters

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
                average_attn_weights=True, is_causal=False):
        same = self._qkv_same_embed_dim
        return _mha(query, key, value, self.num_heads, self.in_proj_weight if same else None,
                    self.in_proj_bias, self.bias_k, self.bias_v, self.add_zero_attn, self.dropout,
                    self.out_proj.weight, self.out_proj.bias, self.training, key_padding_mask, need_weights,
                    attn_mask, not same, self.q_proj_weight, self.k_proj_weight, self.v_proj_weight,
                    average_attn_weights, is_causal, self.batch_first and query.ndim == 3, self.embed_dim)

    def extra_repr(self):
        return ""

