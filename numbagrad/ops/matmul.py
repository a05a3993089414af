"""Matrix products through BLAS: ``matmul``, ``mm``, ``bmm``, ``linear``."""
import numpy as np

from ..autograd.function import Function
from ..backend import backend_of
from ._autocast import lower_precision
from ._util import as_tensor_arg


class MatMul(Function):
    """NumPy ``matmul`` semantics: 1-D operands are promoted and the added dimension
    removed; leading (batch) dimensions broadcast."""

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return backend_of(a).matmul(a, b)

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        be = backend_of(g)
        na, nb = ctx.needs_input_grad
        a2 = a.reshape(1, -1) if a.ndim == 1 else a
        b2 = b.reshape(-1, 1) if b.ndim == 1 else b
        # Restore the dimensions matmul removed for 1-D operands.
        g2 = g
        if a.ndim == 1:
            g2 = g2.reshape(g2.shape[:-1] + (1,) + g2.shape[-1:]) if b.ndim > 1 else g2.reshape(1)
        if b.ndim == 1:
            g2 = g2.reshape(g2.shape + (1,))
        ga = gb = None
        if na:
            ga = be.matmul(g2, np.swapaxes(b2, -1, -2))
            ga = be.sum_to_shape(ga, a2.shape if a.ndim > 1 else (1,) * (ga.ndim - 2) + a2.shape)
            ga = ga.reshape(a.shape)
        if nb:
            if a2.ndim == 2 and g2.ndim == 2:
                gb = be.matmul(a2.T, g2)
            elif a2.ndim > 2 and b2.ndim == 2:
                # (..., m, k) x (k, n): fold the batch into the rows, one GEMM.
                gb = be.matmul(a2.reshape(-1, a2.shape[-1]).T, g2.reshape(-1, g2.shape[-1]))
            else:
                gb = be.matmul(np.swapaxes(a2, -1, -2), g2)
                gb = be.sum_to_shape(gb, b2.shape if b.ndim > 1 else (1,) * (gb.ndim - 2) + b2.shape)
            gb = gb.reshape(b.shape)
        return ga, gb


def _check(a, b, opname):
    if type(a.array) is not type(b.array):
        raise RuntimeError(f"{opname}: expected both tensors on the same device, got {a.device} and {b.device}")
    if a.ndim == 0 or b.ndim == 0:
        raise RuntimeError(f"{opname}: both arguments need at least 1 dimension, got shapes "
                           f"{tuple(a.shape)} and {tuple(b.shape)}")
    ka = a.shape[-1]
    kb = b.shape[0] if b.ndim == 1 else b.shape[-2]
    if ka != kb:
        raise RuntimeError(f"{opname}: shapes {tuple(a.shape)} and {tuple(b.shape)} cannot be "
                           f"multiplied ({ka} != {kb})")
    if a.dtype != b.dtype:
        raise RuntimeError(f"{opname}: expected both operands to have the same dtype, got "
                           f"{a.dtype} and {b.dtype}")


@lower_precision
def matmul(input, other):
    """Matrix product with NumPy/PyTorch broadcasting rules."""
    input = as_tensor_arg(input, "matmul")
    other = as_tensor_arg(other, "matmul")
    _check(input, other, "matmul")
    return MatMul.apply(input, other)


@lower_precision
def mm(input, mat2):
    """Matrix product of two 2-D tensors (``torch.mm``; no broadcasting); autocast runs it in the lower precision."""
    if input.ndim != 2 or mat2.ndim != 2:
        raise RuntimeError(f"mm: expected 2-D tensors, got shapes {tuple(input.shape)} and {tuple(mat2.shape)}")
    return matmul(input, mat2)


@lower_precision
def bmm(input, mat2):
    """Batched matrix product of two 3-D tensors with equal batch size (``torch.bmm``); autocast runs
    it in the lower precision.
    """
    if input.ndim != 3 or mat2.ndim != 3 or input.shape[0] != mat2.shape[0]:
        raise RuntimeError(f"bmm: expected 3-D tensors with equal batch size, got shapes "
                           f"{tuple(input.shape)} and {tuple(mat2.shape)}")
    return matmul(input, mat2)


def dot(input, other):
    """The inner product of two 1-D tensors (a 0-d tensor)."""
    if input.ndim != 1 or other.ndim != 1:
        raise RuntimeError(f"dot: expected 1-D tensors, got shapes {tuple(input.shape)} and {tuple(other.shape)}")
    return matmul.__wrapped__(input, other)  # not autocast-listed in torch: no cast


def outer(input, vec2):
    """The outer product of two 1-D tensors: ``out[i, j] = input[i] * vec2[j]``."""
    from .shape import unsqueeze
    if input.ndim != 1 or vec2.ndim != 1:
        raise RuntimeError(f"outer: expected 1-D tensors, got shapes {tuple(input.shape)} and {tuple(vec2.shape)}")
    return matmul.__wrapped__(unsqueeze(input, 1), unsqueeze(vec2, 0))  # not autocast-listed


class Linear(Function):
    """``y = x @ W^T + b`` as one node: one GEMM forward, two GEMMs and a column sum
    backward, with the batch dimensions folded into the rows."""

    @staticmethod
    def forward(ctx, x, w, b):
        be = backend_of(x)
        x2 = x.reshape(-1, x.shape[-1])
        y = be.dot_t(x2, w, trans_b=True)
        if b is not None:
            y = be.add(y, b) if y.flags.c_contiguous else y + b
            # in-place would also do; add keeps the kernel path uniform
        ctx.save_for_backward(x, w)
        ctx.has_bias = b is not None
        return y.reshape(x.shape[:-1] + (w.shape[0],))

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        be = backend_of(g)
        nx, nw, nb = ctx.needs_input_grad
        g2 = g.reshape(-1, g.shape[-1])
        gx = be.dot_t(g2, w).reshape(x.shape) if nx else None
        gw = be.dot_t(g2, x.reshape(-1, x.shape[-1]), trans_a=True) if nw else None
        gb = be.sum(g2, axis=0) if (nb and ctx.has_bias) else None
        return gx, gw, gb


@lower_precision
def linear(input, weight, bias=None):
    """``input @ weight.T + bias`` (``torch.nn.functional.linear``)."""
    if type(input.array) is not type(weight.array) or bias is not None and type(bias.array) is not type(input.array):
        raise RuntimeError(f"linear: expected all tensors to be on the same device, got input on {input.device}, "
                           f"weight on {weight.device}" + ("" if bias is None else f" and bias on {bias.device}"))
    if input.shape[-1] != weight.shape[-1]:
        raise RuntimeError(f"linear: input of shape {tuple(input.shape)} does not match weight of shape "
                           f"{tuple(weight.shape)} ({input.shape[-1]} in-features expected {weight.shape[-1]})")
    if input.dtype != weight.dtype:
        raise RuntimeError(f"linear: input dtype {input.dtype} does not match weight dtype {weight.dtype}")
    if bias is not None and bias.ndim and bias.shape[-1] not in (1, weight.shape[0]):
        raise RuntimeError(f"linear: bias of shape {tuple(bias.shape)} does not match the {weight.shape[0]} "
                           f"out-features of weight of shape {tuple(weight.shape)}")
    return Linear.apply(input, weight, bias)


# ---- einsum ------------------------------------------------------------------------------------
def _einsum_specs(equation, shapes):
    """``equation`` with every ``...`` spelled out as letters (aligned from the right, as
    broadcasting aligns), as ``(input specs, output spec)``; the implicit output is the
    letters used once, sorted, after the ellipsis letters."""
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    ins = lhs.split(",")
    if len(ins) != len(shapes):
        raise ValueError(f"einsum: the equation {equation!r} has {len(ins)} operands, got {len(shapes)} tensors")
    free = [c for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ" if c not in eq]
    n_ell = max((len(s) - (len(spec) - 3) for spec, s in zip(ins, shapes) if "..." in spec), default=0)
    ell = "".join(free[:n_ell])
    specs = []
    for spec, s in zip(ins, shapes):
        if "..." in spec:
            k = len(s) - (len(spec) - 3)
            spec = spec.replace("...", ell[n_ell - k:] if k else "")
        if len(spec) != len(s) or not spec.isalpha():
            raise ValueError(f"einsum: operand spec {spec!r} does not match an operand of shape {tuple(s)} "
                             f"in {equation!r}")
        specs.append(spec)
    if arrow:
        out = rhs.replace("...", ell)
    else:
        letters = "".join(specs)
        out = ell + "".join(sorted(c for c in set(letters) if letters.count(c) == 1 and c not in ell))
    sizes = {}
    for spec, s in zip(specs, shapes):
        for c, n in zip(spec, s):
            if sizes.setdefault(c, n) != n:
                raise ValueError(f"einsum: index {c!r} has sizes {sizes[c]} and {n} in {equation!r} "
                                 f"(shapes {[tuple(x) for x in shapes]}); numbagrad does not broadcast size-1 dims here")
    return specs, out, sizes


class Einsum(Function):
    """Forward and backward are NumPy's ``einsum`` (on the host for device arrays): the
    gradient of operand ``i`` is the contraction of the output gradient with the other
    operands onto operand ``i``'s indices, broadcast over indices only it has."""

    @staticmethod
    def forward(ctx, specs, out, sizes, *arrays):
        be = backend_of(arrays[0])
        host = [be.to_numpy(a) for a in arrays]
        ctx.be, ctx.specs, ctx.out, ctx.sizes, ctx.host = be, specs, out, sizes, host
        return be.asarray(np.asarray(np.einsum(",".join(specs) + "->" + out, *host, optimize=True)))

    @staticmethod
    def backward(ctx, g):
        gh = ctx.be.to_numpy(g)
        grads = []
        for i, spec in enumerate(ctx.specs):
            if not ctx.needs_input_grad[3 + i]:
                grads.append(None)
                continue
            if len(set(spec)) != len(spec):
                raise NotImplementedError(f"einsum: the gradient of an operand with a repeated index ({spec!r}, "
                                          f"a diagonal) is not implemented")
            others = [s for j, s in enumerate(ctx.specs) if j != i]
            seen = set(ctx.out).union(*others) if others else set(ctx.out)
            kept = "".join(c for c in spec if c in seen)
            gi = np.einsum(",".join([ctx.out] + others) + "->" + kept, gh,
                           *[a for j, a in enumerate(ctx.host) if j != i], optimize=True)
            gi = np.broadcast_to(np.expand_dims(gi, [k for k, c in enumerate(spec) if c not in seen]),
                                 [ctx.sizes[c] for c in spec])
            grads.append(ctx.be.asarray(np.ascontiguousarray(gi, dtype=ctx.host[i].dtype)))
        return (None, None, None, *grads)


@lower_precision
def einsum(equation, *operands):
    """Einstein summation (``torch.einsum``): ``einsum("bij,bjk->bik", a, b)``; operands may
    also come as one list. Implicit output, ``...`` and any number of operands; the gradient
    of an operand with a repeated index (a diagonal) is not implemented."""
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    if not operands:
        raise ValueError("einsum: no operands")
    ts = [as_tensor_arg(t, "einsum") for t in operands]
    kinds = {type(t.array) for t in ts}
    if len(kinds) > 1:
        raise RuntimeError(f"einsum: expected all operands on one device, got {[str(t.device) for t in ts]}")
    dt = np.result_type(*[t.dtype for t in ts])
    ts = [t if t.dtype == dt else t.to(dt) for t in ts]
    specs, out, sizes = _einsum_specs(equation, [t.shape for t in ts])
    return Einsum.apply(specs, out, sizes, *ts)
