"""Matrix products through BLAS: ``matmul``, ``mm``, ``bmm``, ``linear``."""
import numpy as np

from ..autograd.function import Function
from ..backend import backend_of
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


def matmul(input, other):
    """Matrix product with NumPy/PyTorch broadcasting rules."""
    input = as_tensor_arg(input, "matmul")
    other = as_tensor_arg(other, "matmul")
    _check(input, other, "matmul")
    return MatMul.apply(input, other)


def mm(input, mat2):
    if input.ndim != 2 or mat2.ndim != 2:
        raise RuntimeError(f"mm: expected 2-D tensors, got shapes {tuple(input.shape)} and {tuple(mat2.shape)}")
    return matmul(input, mat2)


def bmm(input, mat2):
    if input.ndim != 3 or mat2.ndim != 3 or input.shape[0] != mat2.shape[0]:
        raise RuntimeError(f"bmm: expected 3-D tensors with equal batch size, got shapes "
                           f"{tuple(input.shape)} and {tuple(mat2.shape)}")
    return matmul(input, mat2)


def dot(input, other):
    if input.ndim != 1 or other.ndim != 1:
        raise RuntimeError(f"dot: expected 1-D tensors, got shapes {tuple(input.shape)} and {tuple(other.shape)}")
    return matmul(input, other)


def outer(input, vec2):
    from .shape import unsqueeze
    return matmul(unsqueeze(input, 1), unsqueeze(vec2, 0))


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
    return Linear.apply(input, weight, bias)
