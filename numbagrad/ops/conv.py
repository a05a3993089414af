"""Convolutions: ``conv1d``, ``conv2d``, ``conv_transpose1d``, ``conv_transpose2d``
(``torch.nn.functional`` signatures and semantics).

Design
------
Every convolution is one graph node (:class:`ConvNd`, :class:`ConvTransposeNd`) over 4-D
arrays: a 1-D convolution is the 2-D one with ``H = 1`` and a ``1 x k`` kernel, an
unbatched input gets ``N = 1``; the reshapes are views taken inside the node.

On the CPU, a batch of at least numba's thread count takes the per-sample kernels of
``kernels/cpu/conv.py`` (:func:`_per_sample`): one ``prange`` over batch slices, each task
running im2col for one sample into its own buffer (it stays in L2) and then one
single-threaded BLAS call; forward, input gradient and weight gradient are one kernel
each. Measured on the benchmark layer below (2 cores, medians): 7.1-7.6 ms forward +
backward against 13.7 ms for the batched path, torch 4.2-4.4 ms. Every other call (one
sample, the CUDA backend, ``PER_SAMPLE = False``) takes the batched path:

A convolution ``x (N, C, H, W) -> y (N, O, OH, OW)`` with ``G`` groups is, per batch chunk
(the whole batch unless its columns exceed :data:`CHUNK_BYTES`):

1. ``cols = im2col(x)``: ``(C*kh*kw, n, OH, OW)``, one row per (channel, tap), one column
   per output pixel of the chunk (``kernels/cpu/conv.py``);
2. one batched GEMM over the groups, ``W.reshape(G, O/G, K) @ cols.reshape(G, K, n*OH*OW)``
   (``be.matmul``: OpenBLAS on the CPU, the tiled kernel on a GPU): the batch is folded
   into the GEMM's long dimension;
3. one strided pass from the channel-major ``(O, n, OH*OW)`` result to ``(n, O, OH, OW)``,
   fused with the bias add (a NumPy ufunc with ``out=``). A chunk of one sample needs no
   pass: the GEMM writes into ``y[i]`` directly.

Backward (per chunk): ``gy`` to channel-major once; ``gW^T = cols @ gy_cm^T`` (this
orientation ran 3.7 ms against 5.4 ms for ``gy_cm @ cols^T`` in OpenBLAS, one thread),
``gx = col2im(W^T @ gy_cm)``, ``gb`` a sum; each only when ``ctx.needs_input_grad`` asks.
The forward's columns are kept for ``gW`` (they ride in ``save_for_backward``, so the
engine frees them) when they total at most :data:`SAVE_COLS_MAX_BYTES`; else recomputed.

A transposed convolution is the adjoint of the convolution with the same weight and reuses
the same kernels the other way round: forward ``y = col2im(W^T @ x_cm)`` (+ bias),
backward ``cols = im2col(gy)``, ``gx = W @ cols``, ``gW^T = cols @ x_cm^T``.

The batched path folds the batch into one GEMM (the default chunk is large, 32 MiB of
columns) rather than issuing three BLAS calls per sample: one-sample chunks win
single-threaded, but beside torch's spinning OpenMP threads in the same process a step took
1.25 s against 44 ms folded. On ``Conv2d(16, 32, 3, padding=1)`` over 32x16x32x32 the GEMMs
alone take 6.5 ms, more than torch's whole step (4.2 ms); the per-step table and the direct
(no-im2col) kernel estimate are in ``perf/README.md`` ("Measurement notes", ``ops/conv.py``).

float16 inputs are computed in float32 and cast back (no float16 in CPU njit kernels);
bfloat16 ones likewise, through ``Function.apply``'s bfloat16 rule (the result and every
gradient rounded once to bfloat16). Under CPU autocast the four functions run in the
region's lower-precision dtype (``@lower_precision``), as torch's ``conv*`` are.
"""

import numpy as np

from .. import _dtype
from ..autograd.function import Function
from ..backend import backend_of
from ._autocast import lower_precision
from ._util import as_tensor_arg

__all__ = ["conv1d", "conv2d", "conv_transpose1d", "conv_transpose2d"]

SAVE_COLS_MAX_BYTES = 64 << 20
"""Keep the forward's im2col matrix for the weight gradient up to this size (bytes)."""
CHUNK_BYTES = 32 << 20
"""Batch chunk size, in bytes of im2col columns (see the module docstring)."""
PER_SAMPLE = True
"""Take the CPU's per-sample kernels where they apply (False forces the batched path)."""


# ---- array-level building blocks (backend-generic) ---------------------------------------------
def _chunks(n, per_sample_bytes):
    """``[(start, stop), ...]`` over the batch, each chunk's columns about CHUNK_BYTES."""
    if n == 0:
        return [(0, 0)]
    nb = max(1, min(n, CHUNK_BYTES // max(1, per_sample_bytes)))
    return [(s, min(n, s + nb)) for s in range(0, n, nb)]


def _im2col(be, x4, k, out_hw):
    """(C*kh*kw, N, OH, OW) columns of the C-contiguous (N, C, H, W) array ``x4``."""
    n, c = x4.shape[:2]
    cols = be.empty((c * k[0] * k[1], n) + tuple(out_hw), x4.dtype)
    be.kernel("conv", "im2col")(x4, cols, *k)
    return cols


def _col2im(be, cols, out4, k):
    """The adjoint of :func:`_im2col`, written into the C-contiguous (N, C, H, W) ``out4``."""
    be.kernel("conv", "col2im")(cols, out4, *k)


def _to_cm(be, a4):
    """(N, C, H, W) -> channel-major (C, N*H*W), C-contiguous (a view when N == 1)."""
    n, c = a4.shape[:2]
    if n == 1:
        return a4.reshape(c, -1)
    return be.contiguous(a4.reshape(n, c, -1).transpose(1, 0, 2)).reshape(c, -1)


def _gemm_into(be, a3, b3, out4, bias):
    """``out4 (N, C, H, W) = a3 @ b3`` (+ ``bias`` per channel), where the batched GEMM over
    the groups gives channel-major ``(G, C/G, N*H*W)``. For N == 1 that already is out4's
    layout: the GEMM writes into it directly; otherwise one strided pass (fused with the
    bias add) transposes it."""
    n, c = out4.shape[:2]
    if n == 1:
        be.matmul(a3, b3, out=out4.reshape(a3.shape[0], -1, b3.shape[2]))
        if bias is not None:
            o3 = out4.reshape(1, c, -1)
            np.add(o3, bias.reshape(1, c, 1), out=o3)
        return
    src = be.matmul(a3, b3).reshape(c, n, -1).transpose(1, 0, 2)
    o3 = out4.reshape(n, c, -1)
    if bias is not None:
        np.add(src, bias.reshape(1, c, 1), out=o3)
    else:
        np.copyto(o3, src)


def _per_sample(be, n):
    """Whether this call takes the CPU's per-sample kernels (see the module docstring)."""
    return PER_SAMPLE and be.per_sample_conv(n)


def _arr1(b):
    return None if b is None else np.ascontiguousarray(b)


def _acc(be, total, part):
    if total is None:
        return part
    np.add(total, part, out=total)
    return total


def _bias_grad(g4):
    n, c = g4.shape[:2]
    return np.sum(np.sum(g4.reshape(n, c, -1), axis=2), axis=0)


# ---- Functions -------------------------------------------------------------------------------
class ConvNd(Function):
    """One convolution node. ``geo = (k, groups, out_hw, x4_shape, w4_shape, y_shape, x_shape,
    w_shape)``: ``k`` the kernel scalars ``(kh, kw, sh, sw, ph, pw, dh, dw)``, then the shapes of
    the 4-D views, of the returned output, and of the caller's input and weight."""

    @staticmethod
    def forward(ctx, x, w, b, geo):
        k, groups, out_hw, x4_shape, w4_shape, y_shape = geo[:6]
        be = backend_of(x)
        x4 = be.contiguous(x).reshape(x4_shape)
        w4 = be.contiguous(w).reshape(w4_shape)
        n = x4_shape[0]
        o, cg = w4_shape[:2]
        kg = cg * k[0] * k[1]
        w3 = w4.reshape(groups, o // groups, kg)
        per_sample = kg * groups * out_hw[0] * out_hw[1] * x4.itemsize
        nx, nw, nb = ctx.needs_input_grad[:3]
        y = be.empty((n, o) + tuple(out_hw), x4.dtype)
        ctx.samples = _per_sample(be, n)
        if ctx.samples:
            be.kernel("conv", "conv_fwd_samples")(x4, w3, _arr1(b), y, *k)
            if nx or nw or nb:
                ctx.geo = geo
                ctx.save_for_backward(x4 if nw else None, w4 if nx else None, None)
            return y.reshape(y_shape)
        keep = nw and per_sample * n <= SAVE_COLS_MAX_BYTES
        saved = [] if keep else None
        for s, e in _chunks(n, per_sample):
            cols = _im2col(be, x4[s:e], k, out_hw)
            _gemm_into(be, w3, cols.reshape(groups, kg, -1), y[s:e], b)
            if keep:
                saved.append(cols)
        if nx or nw or nb:
            ctx.geo = geo
            # the column chunks ride with the saved arrays, so the engine frees them after
            # backward (and keeps them under retain_graph)
            ctx.save_for_backward(x4 if nw and not keep else None, w4 if nx else None, saved)
        return y.reshape(y_shape)

    @staticmethod
    def backward(ctx, g):
        k, groups, out_hw, x4_shape, w4_shape, _, x_shape, w_shape = ctx.geo
        x4, w4, saved = ctx.saved_tensors
        nx, nw, nb = ctx.needs_input_grad[:3]
        be = backend_of(g)
        n = x4_shape[0]
        o, cg = w4_shape[:2]
        kg = cg * k[0] * k[1]
        og = o // groups
        g4 = be.contiguous(g).reshape((n, o) + tuple(out_hw))
        if ctx.samples:
            w3 = w4.reshape(groups, og, kg) if nx else None
            gx = gw = None
            if nx:
                gx = be.empty(x4_shape, g4.dtype)
                be.kernel("conv", "conv_dgrad_samples")(g4, w3, gx, *k)
                gx = gx.reshape(x_shape)
            if nw:
                gw = be.kernel("conv", "conv_wgrad_samples")(x4, g4, *k, (groups, og, kg)).reshape(w_shape)
            return gx, gw, _bias_grad(g4) if nb else None, None
        per_sample = kg * groups * out_hw[0] * out_hw[1] * g4.itemsize
        gx = be.empty(x4_shape, g4.dtype) if nx else None
        w3t = w4.reshape(groups, og, kg).transpose(0, 2, 1) if nx else None
        gw = None
        for i, (s, e) in enumerate(_chunks(n, per_sample)):
            g_cm3 = _to_cm(be, g4[s:e]).reshape(groups, og, -1)
            if nw:
                cols = saved[i] if saved is not None else _im2col(be, x4[s:e], k, out_hw)
                # gW^T = cols @ g^T: OpenBLAS ran this orientation ~30% faster than g @ cols^T
                gw = _acc(be, gw, be.matmul(cols.reshape(groups, kg, -1), g_cm3.transpose(0, 2, 1)))
            if nx:
                gcols = be.matmul(w3t, g_cm3).reshape((groups * kg, e - s) + tuple(out_hw))
                _col2im(be, gcols, gx[s:e], k)
        if gw is not None:
            gw = be.contiguous(gw.transpose(0, 2, 1)).reshape(w_shape)
        return (None if gx is None else gx.reshape(x_shape), gw, _bias_grad(g4) if nb else None, None)


class ConvTransposeNd(Function):
    """One transposed-convolution node (the adjoint of :class:`ConvNd` in ``x``).
    ``geo = (k, groups, in_hw, x4_shape, w4_shape, y4_shape, y_shape, x_shape, w_shape)``:
    ``in_hw`` the input's (H, W), which is the column grid of the adjoint convolution."""

    @staticmethod
    def forward(ctx, x, w, b, geo):
        k, groups, in_hw, x4_shape, w4_shape, y4_shape, y_shape = geo[:7]
        be = backend_of(x)
        x4 = be.contiguous(x).reshape(x4_shape)
        w4 = be.contiguous(w).reshape(w4_shape)
        n, cin = x4_shape[:2]
        cig = cin // groups
        kg = w4_shape[1] * k[0] * k[1]
        w3t = w4.reshape(groups, cig, kg).transpose(0, 2, 1)
        per_sample = kg * groups * in_hw[0] * in_hw[1] * x4.itemsize
        y = be.empty(y4_shape, x4.dtype)
        ctx.samples = _per_sample(be, n)
        if ctx.samples:
            be.kernel("conv", "conv_dgrad_samples")(x4, w4.reshape(groups, cig, kg), y, *k)
        else:
            for s, e in _chunks(n, per_sample):
                cols = be.matmul(w3t, _to_cm(be, x4[s:e]).reshape(groups, cig, -1))
                _col2im(be, cols.reshape((groups * kg, e - s) + tuple(in_hw)), y[s:e], k)
        if b is not None:
            np.add(y, b.reshape(1, -1, 1, 1), out=y)
        nx, nw, nb = ctx.needs_input_grad[:3]
        if nx or nw or nb:
            ctx.geo = geo
            ctx.save_for_backward(x4 if nw else None, w4 if nx else None)
        return y.reshape(y_shape)

    @staticmethod
    def backward(ctx, g):
        k, groups, in_hw, x4_shape, w4_shape, y4_shape, _, x_shape, w_shape = ctx.geo
        x4, w4 = ctx.saved_tensors
        nx, nw, nb = ctx.needs_input_grad[:3]
        be = backend_of(g)
        n, cin = x4_shape[:2]
        cig = cin // groups
        kg = w4_shape[1] * k[0] * k[1]
        g4 = be.contiguous(g).reshape(y4_shape)
        per_sample = kg * groups * in_hw[0] * in_hw[1] * g4.itemsize
        gx = be.empty(x4_shape, g4.dtype) if nx else None
        w3 = w4.reshape(groups, cig, kg) if nx else None
        gw = None
        if ctx.samples:
            if nx:
                be.kernel("conv", "conv_fwd_samples")(g4, w3, None, gx, *k)
            if nw:
                gw = be.kernel("conv", "conv_wgrad_samples")(g4, x4, *k, (groups, cig, kg)).reshape(w_shape)
            return (None if gx is None else gx.reshape(x_shape), gw, _bias_grad(g4) if nb else None, None)
        if nx or nw:
            for s, e in _chunks(n, per_sample):
                cols3 = _im2col(be, g4[s:e], k, in_hw).reshape(groups, kg, -1)
                if nx:
                    _gemm_into(be, w3, cols3, gx[s:e], None)
                if nw:
                    x_cm3 = _to_cm(be, x4[s:e]).reshape(groups, cig, -1)
                    gw = _acc(be, gw, be.matmul(cols3, x_cm3.transpose(0, 2, 1)))  # gW^T (see ConvNd)
        if gw is not None:
            gw = be.contiguous(gw.transpose(0, 2, 1)).reshape(w_shape)
        return (None if gx is None else gx.reshape(x_shape), gw, _bias_grad(g4) if nb else None, None)


# ---- argument handling -----------------------------------------------------------------------
def _tuple(v, nd, what, op):
    if isinstance(v, (int, np.integer)):
        return (int(v),) * nd
    t = tuple(int(e) for e in v)
    if len(t) == 1 and nd > 1:
        t = t * nd
    if len(t) != nd:
        raise RuntimeError(f"{op}: expected {what} to be a single integer or a list of {nd} integers, "
                           f"got {v!r}")
    return t


def _shape(t):
    return list(t.shape)


def _desc(t):
    return f"{tuple(t.shape)} {t.dtype}"


def _check_tensors(op, x, w, b, nd):
    x = as_tensor_arg(x, op)
    w = as_tensor_arg(w, op)
    if b is not None:
        b = as_tensor_arg(b, op)
    for name, t in (("weight", w), ("bias", b)):
        if t is not None and type(t.array) is not type(x.array):
            raise RuntimeError(f"{op}: expected all tensors to be on the same device, got input on "
                               f"{x.device} and {name} on {t.device}")
    if x.ndim not in (nd + 1, nd + 2):
        raise RuntimeError(f"{op}: expected {nd + 1}D (unbatched) or {nd + 2}D (batched) input, "
                           f"but got input of size: {_shape(x)}")
    if w.ndim != nd + 2:
        raise RuntimeError(f"{op}: expected a {nd + 2}D weight, got weight of size {_shape(w)}")
    if not _dtype.is_float(x.dtype):
        raise RuntimeError(f"{op}: expected a floating-point input, got {_desc(x)}")
    for name, t in (("weight", w), ("bias", b)):
        if t is not None and t.dtype != x.dtype:
            raise RuntimeError(f"{op}: input type ({x.dtype}) and {name} type ({t.dtype}) should be "
                               f"the same (input {_desc(x)}, {name} {_desc(t)})")
    return x, w, b


def _half_in(x, w, b):
    """float16 operands as float32 (the CPU kernels have no float16); the dtype to go back to."""
    if x.dtype != np.float16:
        return x, w, b, None
    from .shape import cast
    f32 = _dtype.float32
    return cast(x, f32), cast(w, f32), (None if b is None else cast(b, f32)), x.dtype


def _half_out(y, back):
    if back is None:
        return y
    from .shape import cast
    return cast(y, back)


def _same_padding(k, d):
    total = d * (k - 1)
    return total // 2, total - total // 2


def _checked_args(op, nd, input, weight, bias, stride, dilation, groups):
    """``(x, w, b, stride, dilation, groups)`` checked for both convolutions: the tensors'
    ranks, dtypes and devices, a positive ``groups``, stride and dilation."""
    x, w, b = _check_tensors(op, input, weight, bias, nd)
    groups = int(groups)
    stride = _tuple(stride, nd, "stride", op)
    dilation = _tuple(dilation, nd, "dilation", op)
    if groups <= 0:
        raise RuntimeError(f"{op}: non-positive groups is not supported, got groups={groups}")
    if any(s <= 0 for s in stride):
        raise RuntimeError(f"{op}: non-positive stride is not supported, got stride={stride}")
    if any(d <= 0 for d in dilation):
        raise RuntimeError(f"{op}: dilation should be greater than zero, got dilation={dilation}")
    return x, w, b, stride, dilation, groups


def _convnd(op, nd, input, weight, bias, stride, padding, dilation, groups):
    x, w, b, stride, dilation, groups = _checked_args(op, nd, input, weight, bias, stride, dilation, groups)
    ks = tuple(w.shape[2:])
    if isinstance(padding, str):
        if padding == "valid":
            pads = ((0, 0),) * nd
        elif padding == "same":
            if any(s != 1 for s in stride):
                raise ValueError(f"{op}: padding='same' is not supported for strided convolutions")
            pads = tuple(_same_padding(k_, d) for k_, d in zip(ks, dilation))
        else:
            raise ValueError(f"{op}: invalid padding string {padding!r}, "
                             "should be one of {'valid', 'same'}")
    else:
        pads = tuple((p, p) for p in _tuple(padding, nd, "padding", op))
        if any(p < 0 for p, _ in pads):
            raise RuntimeError(f"{op}: negative padding is not supported, got padding={padding}")
    batched = x.ndim == nd + 2
    xs = tuple(x.shape) if batched else (1,) + tuple(x.shape)
    n, c = xs[:2]
    o, cg = w.shape[:2]
    if o % groups:
        raise RuntimeError(f"{op}: given groups={groups}, expected weight to be divisible by {groups} at "
                           f"dimension 0, but got weight of size {_shape(w)} instead")
    if c != cg * groups:
        raise RuntimeError(f"{op}: given groups={groups}, weight of size {_shape(w)}, expected input"
                           f"{list(xs)} to have {cg * groups} channels, but got {c} channels instead "
                           f"(input {_desc(x)})")
    if b is not None and tuple(b.shape) != (o,):
        raise RuntimeError(f"{op}: given weight of size {_shape(w)}, expected bias to be 1-dimensional with "
                           f"{o} elements, but got bias of size {_shape(b)} instead")
    spatial = xs[2:]
    padded = tuple(s + lo + hi for s, (lo, hi) in zip(spatial, pads))
    eff = tuple(d * (k_ - 1) + 1 for k_, d in zip(ks, dilation))
    if any(p < e for p, e in zip(padded, eff)):
        raise RuntimeError(f"{op}: calculated padded input size per channel: "
                           f"({' x '.join(map(str, padded))}). "
                           f"Kernel size: ({' x '.join(map(str, eff))}). Kernel size can't be greater than "
                           f"actual input size (input {_desc(x)}, weight {_desc(w)})")
    out = tuple((p - e) // s + 1 for p, e, s in zip(padded, eff, stride))
    if nd == 1:
        k = (1, ks[0], 1, stride[0], 0, pads[0][0], 1, dilation[0])
        x4_shape, w4_shape, out_hw = (n, c, 1, spatial[0]), (o, cg, 1, ks[0]), (1, out[0])
    else:
        k = (ks[0], ks[1], stride[0], stride[1], pads[0][0], pads[1][0], dilation[0], dilation[1])
        x4_shape, w4_shape, out_hw = (n, c) + spatial, tuple(w.shape), out
    y_shape = ((n,) if batched else ()) + (o,) + out
    x, w, b, back = _half_in(x, w, b)
    geo = (k, groups, out_hw, x4_shape, w4_shape, y_shape, tuple(x.shape), tuple(w.shape))
    y = ConvNd.apply(x, w, b, geo)
    return _half_out(y, back)


def _conv_transposend(op, nd, input, weight, bias, stride, padding, output_padding, groups, dilation):
    x, w, b, stride, dilation, groups = _checked_args(op, nd, input, weight, bias, stride, dilation, groups)
    if isinstance(padding, str):
        raise ValueError(f"{op}: padding strings are not supported for transposed convolutions, "
                         f"got {padding!r}")
    padding = _tuple(padding, nd, "padding", op)
    output_padding = _tuple(output_padding, nd, "output_padding", op)
    ks = tuple(w.shape[2:])
    if any(p < 0 for p in padding) or any(p < 0 for p in output_padding):
        raise RuntimeError(f"{op}: negative padding is not supported, got padding={padding}, "
                           f"output_padding={output_padding}")
    if any(op_ >= s and op_ >= d for op_, s, d in zip(output_padding, stride, dilation)):
        raise RuntimeError(f"{op}: output padding must be smaller than either stride or dilation, got "
                           f"output_padding={output_padding}, stride={stride}, dilation={dilation}")
    batched = x.ndim == nd + 2
    xs = tuple(x.shape) if batched else (1,) + tuple(x.shape)
    n, cin = xs[:2]
    if w.shape[0] != cin:
        raise RuntimeError(f"{op}: given transposed=1, weight of size {_shape(w)}, expected input{list(xs)} "
                           f"to have {w.shape[0]} channels, but got {cin} channels instead "
                           f"(input {_desc(x)})")
    if cin % groups:
        raise RuntimeError(f"{op}: given groups={groups}, expected weight to be divisible by {groups} at "
                           f"dimension 0, but got weight of size {_shape(w)} instead")
    cout = w.shape[1] * groups
    if b is not None and tuple(b.shape) != (cout,):
        raise RuntimeError(f"{op}: given transposed=1, weight of size {_shape(w)}, expected bias to be "
                           f"1-dimensional with {cout} elements, but got bias of size {_shape(b)} instead")
    spatial = xs[2:]
    out = tuple((s - 1) * st - 2 * p + d * (k_ - 1) + op_ + 1
                for s, st, p, d, k_, op_ in zip(spatial, stride, padding, dilation, ks, output_padding))
    if any(v <= 0 for v in out):
        raise RuntimeError(f"{op}: given input size per channel {spatial}, calculated output size per "
                           f"channel {out} is too small (weight {_shape(w)}, stride={stride}, "
                           f"padding={padding}, dilation={dilation})")
    if nd == 1:
        k = (1, ks[0], 1, stride[0], 0, padding[0], 1, dilation[0])
        x4_shape, w4_shape = (n, cin, 1, spatial[0]), (cin, w.shape[1], 1, ks[0])
        in_hw, y4_shape = (1, spatial[0]), (n, cout, 1, out[0])
    else:
        k = (ks[0], ks[1], stride[0], stride[1], padding[0], padding[1], dilation[0], dilation[1])
        x4_shape, w4_shape = (n, cin) + spatial, tuple(w.shape)
        in_hw, y4_shape = spatial, (n, cout) + out
    y_shape = ((n,) if batched else ()) + (cout,) + out
    x, w, b, back = _half_in(x, w, b)
    geo = (k, groups, in_hw, x4_shape, w4_shape, y4_shape, y_shape, tuple(x.shape), tuple(w.shape))
    y = ConvTransposeNd.apply(x, w, b, geo)
    return _half_out(y, back)


# ---- public functions --------------------------------------------------------------------------
@lower_precision
def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """1-D convolution (cross-correlation) over ``(N, C, L)`` or unbatched ``(C, L)`` input.

    Parameters
    ----------
    input : Tensor, ``(N, C_in, L)`` or ``(C_in, L)``
    weight : Tensor, ``(C_out, C_in / groups, k)``
    bias : Tensor ``(C_out,)`` or None
    stride, dilation : int or 1-tuple
    padding : int, 1-tuple, ``'valid'`` or ``'same'`` (zero padding; ``'same'`` needs stride 1
        and pads the extra element on the right, as PyTorch)
    groups : int, dividing both ``C_in`` and ``C_out``

    Returns
    -------
    Tensor ``(N, C_out, L_out)`` with ``L_out = (L + 2p - dilation*(k-1) - 1) // stride + 1``.
    """
    return _convnd("conv1d", 1, input, weight, bias, stride, padding, dilation, groups)


@lower_precision
def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """2-D convolution (cross-correlation) over ``(N, C, H, W)`` or unbatched ``(C, H, W)`` input.

    Parameters
    ----------
    input : Tensor, ``(N, C_in, H, W)`` or ``(C_in, H, W)``
    weight : Tensor, ``(C_out, C_in / groups, kH, kW)``
    bias : Tensor ``(C_out,)`` or None
    stride, dilation : int or pair
    padding : int, pair, ``'valid'`` or ``'same'`` (zero padding)
    groups : int, dividing both ``C_in`` and ``C_out``

    Returns
    -------
    Tensor ``(N, C_out, H_out, W_out)``, ``H_out = (H + 2pH - dH*(kH-1) - 1) // sH + 1``.
    """
    return _convnd("conv2d", 2, input, weight, bias, stride, padding, dilation, groups)


@lower_precision
def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """1-D transposed convolution (the gradient of :func:`conv1d` w.r.t. its input).

    Parameters
    ----------
    input : Tensor, ``(N, C_in, L)`` or ``(C_in, L)``
    weight : Tensor, ``(C_in, C_out / groups, k)``
    bias : Tensor ``(C_out,)`` or None
    stride, padding, output_padding, dilation : int or 1-tuple
    groups : int

    Returns
    -------
    Tensor ``(N, C_out, L_out)``,
    ``L_out = (L - 1)*stride - 2*padding + dilation*(k-1) + output_padding + 1``.
    """
    return _conv_transposend("conv_transpose1d", 1, input, weight, bias, stride, padding, output_padding,
                             groups, dilation)


@lower_precision
def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """2-D transposed convolution (the gradient of :func:`conv2d` w.r.t. its input).

    Parameters
    ----------
    input : Tensor, ``(N, C_in, H, W)`` or ``(C_in, H, W)``
    weight : Tensor, ``(C_in, C_out / groups, kH, kW)``
    bias : Tensor ``(C_out,)`` or None
    stride, padding, output_padding, dilation : int or pair
    groups : int

    Returns
    -------
    Tensor ``(N, C_out, H_out, W_out)``,
    ``H_out = (H - 1)*sH - 2*pH + dH*(kH-1) + output_padding_H + 1``.
    """
    return _conv_transposend("conv_transpose2d", 2, input, weight, bias, stride, padding, output_padding,
                             groups, dilation)
