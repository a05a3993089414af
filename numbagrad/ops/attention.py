"""Attention: ``scaled_dot_product_attention`` and ``multi_head_attention_forward``
(``torch.nn.functional`` semantics).

Both are one fused Function each. The forward is three steps:

1. ``scores = Q K^T`` -- one batched GEMM (``be.matmul``, BLAS on the CPU);
2. one row-wise kernel ``attention/attn_softmax_fwd`` (``numbagrad/kernels/cpu/attention.py``)
   that scales the scores, adds the mask or removes the causal upper triangle, takes the
   max-shifted softmax and, when ``dropout_p > 0``, draws the dropout mask with the
   counter-based hash of ``F.dropout`` -- writing the probabilities over the scores;
3. ``out = P V`` -- one batched GEMM.

The backward is ``dP = dO V^T``, one kernel ``attn_softmax_bwd`` giving
``dS = scale * P * (dP - rowsum(dP * P))`` (through the dropout mask), then
``dQ = dS K``, ``dK = dS^T Q``, ``dV = P^T dO``. Nothing of size ``L x S`` is kept but
``P`` (and, with dropout, the dropped ``P`` and its uint8 mask).

Masks are never broadcast to the full ``(batch, L, S)``: the kernel reads a float mask
viewed as ``(Nm, L, S)`` (stride 0 over broadcast query/key dims) at row ``(n // mdiv) % Nm``
of the flattened batch ``n``, which covers every mask whose batch dims are one contiguous
run of the output's (e.g. ``(B, 1, L, S)``, ``(H, L, S)``, ``(L, S)``); other shapes are
materialised once. A boolean mask (True = take part) becomes ``0 / -inf``.

``multi_head_attention_forward`` (and ``numbagrad.nn.MultiheadAttention``) runs the same
core on the projected inputs *without splitting them into Tensors*: the projections
(``x W_in^T + b``, one GEMM for packed self-attention) are handed to the Function, which
takes per-head strided views of them (no copy), writes the attention output straight in
token order ``(L, B, E)`` (so the output projection needs no transpose copy), and writes
``dQ, dK, dV`` straight into one gradient buffer of the packed projection. Composing it
from chunk/reshape/transpose nodes costs an extra gradient node per view and transpose
copies of the output and its gradient: the fused core ran the whole layer (batch 16, T 64,
E 128, 4 heads, causal, one thread, forward + backward) in 6.0 ms against 7.2 ms composed.
NumPy's ``matmul`` takes the strided per-head views straight to BLAS, since copying them
contiguous first was slower (the figures, torch's included: ``perf/README.md``,
"Measurement notes", ``ops/attention.py``).

Fully masked rows (no key may be attended) follow PyTorch 2.13: ``scaled_dot_product_attention``
gives output 0 (and zero gradients); ``multi_head_attention_forward`` with
``need_weights=True`` (PyTorch's explicit softmax) gives NaN weights and output. float16
and bfloat16 inputs are computed in float32 and cast back (CPU @njit has neither);
``scaled_dot_product_attention`` is on autocast's lower-precision list, as in torch. Under
bfloat16 the multi-head core keeps its sources in bfloat16 and, without dropout or returned
weights, no probabilities: backward recomputes ``P`` from Q and K with the same kernel (the
tiny GPT's autocast step holds 41% less saved memory than its float32 step this way, 31%
keeping ``P``; ``perf/test_bench_gpt.py``).
"""
import math

import numpy as np

from .. import _dtype
from ..autograd.function import Function
from ..backend import backend_of
from ..tensor import Tensor
from ._autocast import lower_precision
from ._util import as_tensor_arg

__all__ = ["scaled_dot_product_attention", "multi_head_attention_forward"]


_LOW = (np.dtype(np.float16), _dtype.bfloat16)


def _thr53(p):
    return np.uint64(min(int(round(p * 2.0 ** 53)), 1 << 53))


def _seed():
    from ..random import default_generator
    return np.uint64(default_generator.next_seed())


# ---- array-level helpers shared by both Functions ----------------------------------------------
def _mask_rows(be, mask, bs, L, S):
    """``mask`` (an array broadcastable to ``bs + (L, S)``) as the kernel's
    ``(Nm, L, S)`` view and the divisor ``mdiv``: batch row n reads mask row
    ``(n // mdiv) % Nm``."""
    nb = len(bs)
    mshape = (1,) * (nb + 2 - mask.ndim) + tuple(mask.shape)
    if len(mshape) > nb + 2:
        raise RuntimeError(f"scaled_dot_product_attention: attn_mask of shape {tuple(mask.shape)} has more "
                           f"dimensions than the attention scores {tuple(bs) + (L, S)}")
    mb = mshape[:nb]
    big = [d for d in range(nb) if mb[d] != 1]
    if not big:
        nm, mdiv = 1, 1
    elif all(mb[d] == bs[d] for d in range(big[0], big[-1] + 1)):
        nm = math.prod(bs[big[0]:big[-1] + 1])
        mdiv = math.prod(bs[big[-1] + 1:])
    else:  # not one run of the batch dims: materialise the broadcast once
        mask = be.contiguous(be.broadcast_to(mask.reshape(mshape), tuple(bs) + mshape[nb:]))
        mshape = mask.shape
        nm, mdiv = math.prod(bs), 1
    m3 = be.contiguous(mask).reshape(nm, mshape[-2], mshape[-1])
    return be.broadcast_to(m3, (nm, L, S)), mdiv


def _float_mask(be, mask, dtype):
    """A boolean mask (True = take part) as an additive 0 / -inf mask of ``dtype``."""
    if mask.dtype == np.bool_:
        return be.where(mask, dtype.type(0), dtype.type(-np.inf))
    return mask if mask.dtype == dtype else be.astype(mask, dtype)


def _softmax_fwd(ctx, be, scores, mask, scale, causal, dropout_p, empty_nan):
    """Probabilities in place of ``scores`` (shape ``bs + (L, S)``, C-contiguous); returns
    ``(P, Pd)`` -- Pd is P after dropout -- and stores the dropout state on ctx."""
    scores = be.contiguous(scores)  # NumPy may give a matmul of strided inputs their order
    bs, (L, S) = scores.shape[:-2], scores.shape[-2:]
    N = math.prod(bs)
    dt = scores.dtype
    s3 = scores.reshape(N, L, S)
    if mask is not None:
        m3, mdiv = _mask_rows(be, mask, bs, L, S)
        has_mask = True
    else:
        m3, mdiv, has_mask = be.broadcast_to(be.zeros((1, 1, 1), dt), (1, L, S)), 1, False
    dropout = dropout_p > 0.0
    if dropout:
        pd = be.empty(s3.shape, dt)
        dmask = be.empty(s3.shape, np.uint8)
        seed, thr, dscale = _seed(), _thr53(dropout_p), dt.type(1.0 / (1.0 - dropout_p))
    else:
        pd, dmask = s3, be.empty((1, 1, 1), np.uint8)
        seed, thr, dscale = np.uint64(0), np.uint64(0), dt.type(1)
    be.kernel("attention", "attn_softmax_fwd")(s3, m3, int(mdiv), has_mask, bool(causal), dt.type(scale),
                                               bool(empty_nan), dropout, seed, thr, dscale, s3, pd, dmask)
    ctx.dropout = dropout
    ctx.dscale = dscale
    ctx.dmask = dmask
    return scores, pd.reshape(scores.shape)


def _softmax_bwd(ctx, be, dp, p, scale):
    """dS (the gradient of the raw scores) in place of ``dp``."""
    dp = be.contiguous(dp)
    shp = dp.shape
    N = math.prod(shp[:-2])
    d3 = dp.reshape(N, shp[-2], shp[-1])
    be.kernel("attention", "attn_softmax_bwd")(d3, p.reshape(d3.shape), ctx.dmask, ctx.dropout, ctx.dscale,
                                               dp.dtype.type(scale), d3)
    return dp


def _mask_grad(be, ds, scale, mask_shape):
    g = ds * ds.dtype.type(1.0 / scale) if scale != 0 else ds * ds.dtype.type(0)
    return be.sum_to_shape(g, tuple(mask_shape))


# ---- scaled_dot_product_attention -----------------------------------------------------------------
class ScaledDotProductAttention(Function):
    """softmax(Q K^T * scale + mask) V with dropout on the probabilities; batch dims broadcast."""

    @staticmethod
    def forward(ctx, q, k, v, mask, scale, causal, dropout_p):
        be = backend_of(q)
        scores = be.matmul(q, k.swapaxes(-1, -2))
        fm = None if mask is None else _float_mask(be, mask, q.dtype)
        p, pd = _softmax_fwd(ctx, be, scores, fm, scale, causal, dropout_p, False)
        out = be.matmul(pd, v)
        ctx.scale = scale
        ctx.mask_shape = None if mask is None or mask.dtype == np.bool_ else mask.shape
        ctx.save_for_backward(q, k, v, p, pd)
        return out

    @staticmethod
    def backward(ctx, g):
        q, k, v, p, pd = ctx.saved_tensors
        be = backend_of(g)
        nq, nk, nv, nm = ctx.needs_input_grad[:4]
        gq = gk = gv = gm = None
        if nv:
            gv = be.sum_to_shape(be.matmul(pd.swapaxes(-1, -2), g), v.shape)
        if nq or nk or nm:
            ds = _softmax_bwd(ctx, be, be.matmul(g, v.swapaxes(-1, -2)), p, ctx.scale)
            if nq:
                gq = be.sum_to_shape(be.matmul(ds, k), q.shape)
            if nk:
                gk = be.sum_to_shape(be.matmul(ds.swapaxes(-1, -2), q), k.shape)
            if nm and ctx.mask_shape is not None:
                gm = _mask_grad(be, ds, ctx.scale, ctx.mask_shape)
        return gq, gk, gv, gm, None, None, None


def _check_float(t, opname, what):
    if not _dtype.is_float(t.dtype):
        raise RuntimeError(f"{opname}: expected {what} to be a floating tensor, got {t.dtype}")


@lower_precision
def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
                                 scale=None, enable_gqa=False):
    """Attention ``softmax(Q K^T * scale + mask) V`` (``torch.nn.functional`` semantics).

    Parameters
    ----------
    query : Tensor ``(..., L, E)``
    key : Tensor ``(..., S, E)``
    value : Tensor ``(..., S, Ev)``
        Leading (batch) dims broadcast against each other.
    attn_mask : Tensor, optional
        Broadcastable to ``(..., L, S)``: boolean (True = the query may attend to the
        key) or floating (added to the scaled scores; gradients flow to it).
    dropout_p : float
        Dropout probability on the attention weights (applied whenever ``> 0``, as in
        PyTorch: pass ``0.0`` in evaluation).
    is_causal : bool
        Query ``i`` attends to keys ``j <= i`` (top-left aligned); excludes ``attn_mask``.
    scale : float, optional
        Defaults to ``1 / sqrt(E)``.
    enable_gqa : bool
        Grouped-query attention: ``key``/``value`` may have fewer heads (dim -3) than
        ``query``, a divisor of them; query head ``h`` uses key head ``h // (Hq // Hk)``.

    Returns
    -------
    Tensor ``(..., L, Ev)``. A query row with every key masked gives zeros.
    """
    op = "scaled_dot_product_attention"
    q = as_tensor_arg(query, op)
    k = as_tensor_arg(key, op)
    v = as_tensor_arg(value, op)
    for t, what in ((q, "query"), (k, "key"), (v, "value")):
        _check_float(t, op, what)
        if t.ndim < 2:
            raise RuntimeError(f"{op}: expected {what} with at least 2 dimensions, got shape "
                               f"{tuple(t.shape)}")
    if not (q.dtype == k.dtype == v.dtype):
        raise RuntimeError(f"{op}: Expected query, key, and value to have the same dtype, but got "
                           f"query.dtype: {q.dtype}, key.dtype: {k.dtype} and value.dtype: {v.dtype} "
                           "instead.")
    if not (type(q.array) is type(k.array) is type(v.array)):
        raise RuntimeError(f"{op}: expected query, key and value on the same device, got {q.device}, "
                           f"{k.device} and {v.device}")
    if q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2]:
        raise RuntimeError(f"{op}: shapes query {tuple(q.shape)}, key {tuple(k.shape)}, value "
                           f"{tuple(v.shape)} "
                           "do not fit (need query[-1] == key[-1] and key[-2] == value[-2])")
    if not 0.0 <= dropout_p <= 1.0:
        raise ValueError(f"{op}: dropout probability has to be between 0 and 1, but got {dropout_p}")
    mask = attn_mask
    if mask is not None:
        mask = as_tensor_arg(mask, op)
        if is_causal:
            raise RuntimeError(f"{op}: Explicit attn_mask should not be set when is_causal=True")
        if mask.dtype != np.bool_ and not _dtype.is_float(mask.dtype):
            raise RuntimeError(f"{op}: Expected attn_mask dtype to be bool or float, got {mask.dtype}")
        if mask.dtype != np.bool_ and mask.dtype != q.dtype:
            raise RuntimeError(f"{op}: Expected attn_mask dtype to be bool or float or to match query dtype, "
                               f"got attn_mask {mask.dtype} and query {q.dtype}")
    L, E = q.shape[-2:]
    S = k.shape[-2]
    scale = 1.0 / math.sqrt(E) if scale is None else float(scale)
    from .shape import cast, reshape
    back = None
    if q.dtype == np.float16:  # CPU @njit has no float16: compute in float32
        back = q.dtype
        q, k, v = (cast(t, _dtype.float32) for t in (q, k, v))
        if mask is not None and mask.dtype == np.float16:
            mask = cast(mask, _dtype.float32)
    out_shape = None
    if enable_gqa and q.ndim >= 3 and k.ndim >= 3 and k.shape[-3] != q.shape[-3]:
        hq, hk = q.shape[-3], k.shape[-3]
        if hk == 0 or hq % hk or v.shape[-3] != hk:
            raise RuntimeError(f"{op}: enable_gqa needs the query heads ({hq}) to be a multiple of the "
                               f"key/value heads ({hk}, {v.shape[-3]}); shapes {tuple(q.shape)}, "
                               f"{tuple(k.shape)}, {tuple(v.shape)}")
        grp = hq // hk
        q = reshape(q, tuple(q.shape[:-3]) + (hk, grp, L, E))
        k = reshape(k, tuple(k.shape[:-3]) + (hk, 1, S, E))
        v = reshape(v, tuple(v.shape[:-3]) + (hk, 1, S, v.shape[-1]))
        if mask is not None and mask.ndim >= 3 and mask.shape[-3] != 1:
            mask = reshape(mask, tuple(mask.shape[:-3]) + (hk, grp) + tuple(mask.shape[-2:]))
        elif mask is not None and mask.ndim >= 3:
            mask = reshape(mask, tuple(mask.shape[:-3]) + (1, 1) + tuple(mask.shape[-2:]))
    try:
        bs = np.broadcast_shapes(tuple(q.shape[:-2]), tuple(k.shape[:-2]), tuple(v.shape[:-2]))
        if mask is not None:
            np.broadcast_shapes(tuple(mask.shape), tuple(bs) + (L, S))
    except ValueError:
        extra = "" if mask is None else f", attn_mask {tuple(mask.shape)}"
        raise RuntimeError(f"{op}: shapes do not broadcast: query {tuple(q.shape)}, key {tuple(k.shape)}, "
                           f"value {tuple(v.shape)}{extra}") from None
    out = ScaledDotProductAttention.apply(q, k, v, mask, scale, bool(is_causal), float(dropout_p))
    if enable_gqa and out.ndim >= 4 and q.ndim >= 4 and out.shape[-4] != query.shape[-3]:
        out_shape = tuple(out.shape[:-4]) + (query.shape[-3],) + tuple(out.shape[-2:])
        out = reshape(out, out_shape)
    if back is not None:
        out = cast(out, back)
    return out


# ---- the multi-head attention core on projected inputs ----------------------------------------------
def _heads(a, chunk, nchunks, H, batch_first):
    """Per-head strided view ``(B, H, T, hd)`` of chunk ``chunk`` of the projection ``a``
    (``(T, B, nchunks * E)``, or ``(B, T, nchunks * E)`` when ``batch_first``)."""
    d0, d1, w = a.shape
    hd = w // (nchunks * H)
    a5 = a.reshape(d0, d1, nchunks, H, hd)[:, :, chunk]
    return a5.transpose(0, 2, 1, 3) if batch_first else a5.transpose(1, 2, 0, 3)


def _tokens_view(a, batch_first):
    """``(B, H, T, hd)`` view of a token-ordered ``(T, B, H, hd)`` / ``(B, T, H, hd)`` array."""
    return a.transpose(0, 2, 1, 3) if batch_first else a.transpose(1, 2, 0, 3)


class MultiHeadAttentionCore(Function):
    """Attention over projected inputs given as up to three source arrays (see the module
    docstring): ``spec[i] = (source, chunk, nchunks)`` locates q, k, v. Output in token
    order ``(L, B, E)`` (``(B, L, E)`` when ``batch_first``), plus the weights
    ``(B, H, L, S)`` when ``need_weights``.

    float16 and bfloat16 sources (``takes_bfloat16``) are computed in float32; the node keeps
    the sources in their own dtype, and, without dropout or returned weights, keeps no
    ``L x S`` probabilities at all: backward recomputes them from Q and K with the same
    kernel (bit for bit the forward's), as torch's flash attention recomputes them. That
    halves the saved activations of an attention layer under bfloat16 autocast."""

    takes_bfloat16 = True

    @staticmethod
    def forward(ctx, s0, s1, s2, mask, spec, H, batch_first, scale, causal, dropout_p, empty_nan,
                need_weights):
        be = backend_of(s0)
        low = s0.dtype if s0.dtype in _LOW else None  # CPU @njit has no float16/bfloat16
        ctx.low = low
        ctx.dtypes = tuple(None if s is None else s.dtype for s in (s0, s1, s2, mask))
        srcs = tuple(None if s is None else be.contiguous(be.astype(s, np.float32) if s.dtype in _LOW else s)
                     for s in (s0, s1, s2))
        q, k, v = (_heads(srcs[si], c, nc, H, batch_first) for si, c, nc in spec)
        B, _, L, hd = q.shape
        scores = be.matmul(q, k.swapaxes(-1, -2))
        fm = None if mask is None else _float_mask(be, mask, q.dtype)
        p, pd = _softmax_fwd(ctx, be, scores, fm, scale, causal, dropout_p, empty_nan)
        tok = be.empty((B, L, H, v.shape[-1]) if batch_first else (L, B, H, v.shape[-1]), q.dtype)
        be.matmul(pd, v, out=_tokens_view(tok, batch_first))
        ctx.spec = spec
        ctx.H = H
        ctx.bf = batch_first
        ctx.scale = scale
        ctx.mask_shape = None if mask is None or mask.dtype == np.bool_ else mask.shape
        if low is not None and not ctx.dropout and not need_weights:
            ctx.recompute = (fm, causal, empty_nan)
            ctx.save_for_backward(s0, s1, s2)
        else:
            ctx.recompute = None
            ctx.save_for_backward(*(s if low else w for s, w in zip((s0, s1, s2), srcs)), p, pd)
        out = tok.reshape(tok.shape[0], tok.shape[1], -1)
        if low is not None:
            out = be.astype(out, low)
        if need_weights:
            return out, (be.astype(pd, low) if low is not None else pd)
        return out

    @staticmethod
    def backward(ctx, g, gw=None):
        saved = ctx.saved_tensors
        be = backend_of(g)
        H, bf, spec, low = ctx.H, ctx.bf, ctx.spec, ctx.low
        needs = ctx.needs_input_grad
        srcs = saved[:3]
        if low is not None:
            g = be.astype(g, np.float32)
            gw = None if gw is None else be.astype(gw, np.float32)
            srcs = tuple(None if s is None else be.contiguous(be.astype(s, np.float32) if s.dtype in _LOW else s)
                         for s in srcs)
        q, k, v = (_heads(srcs[si], c, nc, H, bf) for si, c, nc in spec)
        if ctx.recompute is not None:  # the forward's probabilities, recomputed (no dropout)
            fm, causal, empty_nan = ctx.recompute
            p, pd = _softmax_fwd(ctx, be, be.matmul(q, k.swapaxes(-1, -2)), fm, ctx.scale, causal, 0.0,
                                 empty_nan)
        else:
            p, pd = saved[3:]
        grads = [be.empty(s.shape, s.dtype) if s is not None and needs[i] else None
                 for i, s in enumerate(srcs)]
        gq, gk, gv = (None if grads[si] is None else _heads(grads[si], c, nc, H, bf) for si, c, nc in spec)
        g4 = _tokens_view(be.contiguous(g).reshape(g.shape[0], g.shape[1], H, -1), bf)
        if gv is not None:
            be.matmul(pd.swapaxes(-1, -2), g4, out=gv)
        gm = None
        if gq is not None or gk is not None or needs[3]:
            dp = be.matmul(g4, v.swapaxes(-1, -2))
            if gw is not None:
                dp = be.add(dp, gw)
            ds = _softmax_bwd(ctx, be, dp, p, ctx.scale)
            if gq is not None:
                be.matmul(ds, k, out=gq)
            if gk is not None:
                be.matmul(ds.swapaxes(-1, -2), q, out=gk)
            if needs[3] and ctx.mask_shape is not None:
                gm = _mask_grad(be, ds, ctx.scale, ctx.mask_shape)
        if low is not None:
            grads = [None if a is None else be.astype(a, d) for a, d in zip(grads, ctx.dtypes)]
            gm = None if gm is None else be.astype(gm, ctx.dtypes[3])
        return grads[0], grads[1], grads[2], gm, None, None, None, None, None, None, None, None


# ---- multi_head_attention_forward --------------------------------------------------------------------
def _canonical_mask(mask, name, dtype):
    """PyTorch's MHA mask convention -> an additive float mask (bool True = NOT allowed)."""
    if mask is None:
        return None
    mask = as_tensor_arg(mask, "multi_head_attention_forward")
    if mask.dtype == np.bool_:
        from .elementwise import where
        ninf = Tensor(np.array(-np.inf, dtype))
        zero = Tensor(np.array(0.0, dtype))
        ninf, zero = ninf.to(mask.device), zero.to(mask.device)   # no copy on the CPU
        return where(mask, ninf, zero)
    if not _dtype.is_float(mask.dtype):
        raise AssertionError(f"only bool and floating types of {name} are supported, got {mask.dtype}")
    if mask.dtype != dtype:
        from .shape import cast
        mask = cast(mask, dtype)
    return mask


def _mha(query, key, value, num_heads, in_proj_weight, in_proj_bias, bias_k, bias_v, add_zero_attn, dropout_p,
         out_proj_weight, out_proj_bias, training, key_padding_mask, need_weights, attn_mask,
         use_separate_proj_weight, q_proj_weight, k_proj_weight, v_proj_weight, average_attn_weights,
         is_causal, batch_first, embed_dim_to_check=None):
    """The body of :func:`multi_head_attention_forward`, for seq-first ``(T, B, E)`` or, with
    ``batch_first``, ``(B, T, E)`` inputs (unbatched ``(T, E)`` inputs too)."""
    from .matmul import linear
    from .shape import reshape, cat, unsqueeze, squeeze, pad
    from .reduce import mean
    op = "multi_head_attention_forward"
    query = as_tensor_arg(query, op)
    key = as_tensor_arg(key, op)
    value = as_tensor_arg(value, op)
    batched = query.ndim == 3
    if query.ndim not in (2, 3) or key.ndim != query.ndim or value.ndim != query.ndim:
        raise AssertionError(f"{op}: query, key and value should be all 2-D (unbatched) or all 3-D "
                             "(batched), "
                             f"got shapes {tuple(query.shape)}, {tuple(key.shape)}, {tuple(value.shape)}")
    same_qk, same_kv = key is query, value is key
    if not batched:  # unbatched: a batch of one
        query, key, value = unsqueeze(query, 1), unsqueeze(key, 1), unsqueeze(value, 1)
        if key_padding_mask is not None:
            key_padding_mask = unsqueeze(as_tensor_arg(key_padding_mask, op), 0)
        batch_first = False
    if batch_first:
        bsz, tgt_len, embed_dim = query.shape
        src_len = key.shape[1]
    else:
        tgt_len, bsz, embed_dim = query.shape
        src_len = key.shape[0]
    if embed_dim_to_check is not None and embed_dim != embed_dim_to_check:
        raise ValueError(f"multi_head_attention_forward: was expecting embedding dimension of "
                         f"{embed_dim_to_check}, but got {embed_dim}")
    if embed_dim % num_heads:
        raise ValueError(f"multi_head_attention_forward: embed_dim {embed_dim} must be divisible by num_heads, "
                         f"got num_heads={num_heads}")
    head_dim = embed_dim // num_heads
    if key.shape[:2] != value.shape[:2]:
        raise AssertionError(f"key shape {tuple(key.shape)} does not match value shape {tuple(value.shape)}")
    dtype = query.dtype
    if is_causal and attn_mask is None:
        raise RuntimeError("Need attn_mask if specifying the is_causal hint. You may use the Transformer "
                           "module method `generate_square_subsequent_mask` to create this mask.")

    # ---- masks -> one additive float mask broadcastable to (B, H, L, S) ----
    kpm = _canonical_mask(key_padding_mask, "key_padding_mask", dtype)
    am = _canonical_mask(attn_mask, "attn_mask", dtype)
    use_causal = bool(is_causal and key_padding_mask is None and not need_weights)
    if use_causal:
        am = None  # PyTorch: the hint replaces the mask by the causal kernel
    if am is not None:
        if am.ndim == 2:
            if tuple(am.shape) != (tgt_len, src_len):
                raise RuntimeError(f"The shape of the 2D attn_mask is {tuple(am.shape)}, but should be "
                                   f"{(tgt_len, src_len)}.")
        elif am.ndim == 3:
            if tuple(am.shape) != (bsz * num_heads, tgt_len, src_len):
                raise RuntimeError(f"The shape of the 3D attn_mask is {tuple(am.shape)}, but should be "
                                   f"{(bsz * num_heads, tgt_len, src_len)}.")
            am = reshape(am, (bsz, num_heads, tgt_len, src_len))
        else:
            raise RuntimeError(f"attn_mask's dimension {am.ndim} is not supported")
    if kpm is not None and tuple(kpm.shape) != (bsz, src_len):
        raise AssertionError(f"expecting key_padding_mask shape of {(bsz, src_len)}, but got "
                             f"{tuple(kpm.shape)}")

    # ---- input projections: up to three source arrays, never split into Tensors ----
    E = embed_dim
    if not use_separate_proj_weight:
        if in_proj_weight is None:
            raise AssertionError("use_separate_proj_weight is False but in_proj_weight is None")
        if same_qk and same_kv:
            srcs = [linear(query, in_proj_weight, in_proj_bias)]
            spec = ((0, 0, 3), (0, 1, 3), (0, 2, 3))
        else:
            w_q, w_kv = in_proj_weight[:E], in_proj_weight[E:]
            b_q = b_kv = None
            if in_proj_bias is not None:
                b_q, b_kv = in_proj_bias[:E], in_proj_bias[E:]
            if same_kv:
                srcs = [linear(query, w_q, b_q), linear(key, w_kv, b_kv)]
                spec = ((0, 0, 1), (1, 0, 2), (1, 1, 2))
            else:
                b_k = b_v = None
                if in_proj_bias is not None:
                    b_k, b_v = in_proj_bias[E:2 * E], in_proj_bias[2 * E:]
                srcs = [linear(query, w_q, b_q), linear(key, in_proj_weight[E:2 * E], b_k),
                        linear(value, in_proj_weight[2 * E:], b_v)]
                spec = ((0, 0, 1), (1, 0, 1), (2, 0, 1))
    else:
        if q_proj_weight is None or k_proj_weight is None or v_proj_weight is None:
            raise AssertionError("use_separate_proj_weight is True but q_proj_weight, k_proj_weight or "
                                 "v_proj_weight is None")
        b_q = b_k = b_v = None
        if in_proj_bias is not None:
            b_q, b_k, b_v = in_proj_bias[:E], in_proj_bias[E:2 * E], in_proj_bias[2 * E:]
        srcs = [linear(query, q_proj_weight, b_q), linear(key, k_proj_weight, b_k),
                linear(value, v_proj_weight, b_v)]
        spec = ((0, 0, 1), (1, 0, 1), (2, 0, 1))

    seq_dim = 1 if batch_first else 0
    if bias_k is not None or bias_v is not None or add_zero_attn:
        # rare paths: split k / v into their own sources and extend them along the sequence
        if len(srcs) == 1:
            from .shape import chunk
            srcs = list(chunk(srcs[0], 3, dim=-1))
        elif len(srcs) == 2:
            from .shape import chunk
            srcs = [srcs[0]] + list(chunk(srcs[1], 2, dim=-1))
        spec = ((0, 0, 1), (1, 0, 1), (2, 0, 1))
        if bias_k is not None or bias_v is not None:
            if bias_k is None or bias_v is None:
                raise AssertionError("bias_k and bias_v must both be given or both be None")
            from .shape import expand
            shp = (bsz, 1, E) if batch_first else (1, bsz, E)
            srcs[1] = cat([srcs[1], expand(reshape(bias_k, (1, 1, E)), shp)], dim=seq_dim)
            srcs[2] = cat([srcs[2], expand(reshape(bias_v, (1, 1, E)), shp)], dim=seq_dim)
            if am is not None:
                am = pad(am, (0, 1))
            if kpm is not None:
                kpm = pad(kpm, (0, 1))
            src_len += 1
        if add_zero_attn:
            from ..creation import zeros
            shp = (bsz, 1, E) if batch_first else (1, bsz, E)
            z = zeros(*shp, dtype=dtype, device=query.device)
            srcs[1] = cat([srcs[1], z], dim=seq_dim)
            srcs[2] = cat([srcs[2], z], dim=seq_dim)
            if am is not None:
                am = pad(am, (0, 1))
            if kpm is not None:
                kpm = pad(kpm, (0, 1))
            src_len += 1

    mask = None
    if kpm is not None:
        mask = reshape(kpm, (bsz, 1, 1, src_len))
    if am is not None:
        mask = am if mask is None else mask + am
    if not training:
        dropout_p = 0.0
    scale = 1.0 / math.sqrt(head_dim)
    while len(srcs) < 3:
        srcs.append(None)
    res = MultiHeadAttentionCore.apply(srcs[0], srcs[1], srcs[2], mask, spec, num_heads, bool(batch_first),
                                       scale, use_causal, float(dropout_p), bool(need_weights),
                                       bool(need_weights))
    if need_weights:
        out, w = res
    else:
        out, w = res, None
    out = linear(out, out_proj_weight, out_proj_bias)
    if w is not None and average_attn_weights:
        w = mean(w, 1)
    if not batched:
        out = squeeze(out, 1)
        if w is not None:
            w = squeeze(w, 0)
    return out, w


def multi_head_attention_forward(query, key, value, embed_dim_to_check, num_heads, in_proj_weight,
                                 in_proj_bias, bias_k, bias_v, add_zero_attn, dropout_p, out_proj_weight,
                                 out_proj_bias,
                                 training=True, key_padding_mask=None, need_weights=True, attn_mask=None,
                                 use_separate_proj_weight=False, q_proj_weight=None, k_proj_weight=None,
                                 v_proj_weight=None, static_k=None, static_v=None, average_attn_weights=True,
                                 is_causal=False):
    """Multi-head attention on sequence-first inputs (``torch.nn.functional`` semantics).

    Parameters
    ----------
    query : Tensor ``(L, N, E)`` or unbatched ``(L, E)``
    key, value : Tensor ``(S, N, E)`` or ``(S, E)``
    key_padding_mask : Tensor ``(N, S)``, optional
        True (bool) = the key is padding, ignored; a float mask is added.
    attn_mask : Tensor ``(L, S)`` or ``(N * num_heads, L, S)``, optional
        True (bool) = NOT allowed to attend; a float mask is added.
    need_weights, average_attn_weights : bool
        Return the attention weights ``(N, L, S)`` averaged over heads, or
        ``(N, num_heads, L, S)``; after dropout, as PyTorch returns them.
    is_causal : bool
        A hint that ``attn_mask`` is the causal mask (it must still be given); without
        ``key_padding_mask`` and ``need_weights`` the causal kernel replaces the mask.

    Returns
    -------
    ``(attn_output (L, N, E), attn_weights or None)``
    """
    if static_k is not None or static_v is not None:
        raise NotImplementedError("multi_head_attention_forward: static_k / static_v are not supported")
    return _mha(query, key, value, num_heads, in_proj_weight, in_proj_bias, bias_k, bias_v, add_zero_attn,
                dropout_p, out_proj_weight, out_proj_bias, training, key_padding_mask, need_weights,
                attn_mask, use_separate_proj_weight, q_proj_weight, k_proj_weight, v_proj_weight,
                average_attn_weights, is_causal, False, embed_dim_to_check)
