"""``bilinear`` (``torch.nn.functional.bilinear``): ``y[n, o] = x1[n] @ W[o] @ x2[n] + b[o]``.

One Function, every contraction a BLAS GEMM (``be.matmul``; the CUDA backend's tiled
GEMM on the device). With ``P = outer(x1[n], x2[n])`` flattened to ``(N, I*J)`` and
``Wf = W.reshape(O, I*J)``:

* forward: ``y = P @ Wf.T`` (+ b): one GEMM;
* backward: ``gW = (g.T @ P).reshape(O, I, J)``; ``Q = (g @ Wf).reshape(N, I, J)``,
  ``gx1 = Q @ x2`` and ``gx2 = x1 @ Q`` (batched matrix-vector products); ``gb = sum g``.

``P`` costs ``N * I * J`` elements, and is recomputed in the backward rather than kept.
The alternative ``T = x1 @ W`` (``N * O * J``) is no cheaper for the usual
``O >= min(I, J)`` shapes, and ``P`` keeps forward and weight gradient one GEMM each.
Leading batch dimensions are folded into ``N``; 1-D (unbatched) inputs give a 1-D output.
"""
from ..autograd.function import Function
from ..backend import backend_of
from ._util import as_tensor_arg

__all__ = ["bilinear"]


def _outer_rows(be, x1, x2):
    n, i = x1.shape
    j = x2.shape[1]
    return be.mul(x1.reshape(n, i, 1), x2.reshape(n, 1, j)).reshape(n, i * j)


class Bilinear(Function):
    @staticmethod
    def forward(ctx, x1, x2, w, b):
        be = backend_of(x1)
        x1c = be.contiguous(x1)
        x2c = be.contiguous(x2)
        p = _outer_rows(be, x1c, x2c)
        o = w.shape[0]
        y = be.matmul(p, be.contiguous(w).reshape(o, -1).T)
        if b is not None:
            y = be.add(y, b)
        ctx.save_for_backward(x1c, x2c, w)
        ctx.has_bias = b is not None
        return y

    @staticmethod
    def backward(ctx, g):
        x1, x2, w = ctx.saved_tensors
        be = backend_of(g)
        n1, n2, nw, nb = ctx.needs_input_grad
        o, i, j = w.shape
        n = x1.shape[0]
        g = be.contiguous(g)
        wf = be.contiguous(w).reshape(o, i * j)
        gx1 = gx2 = gw = gb = None
        if nw:
            gw = be.matmul(g.T, _outer_rows(be, x1, x2)).reshape(o, i, j)
        if n1 or n2:
            q = be.matmul(g, wf).reshape(n, i, j)
            if n1:
                gx1 = be.matmul(q, x2.reshape(n, j, 1)).reshape(n, i)
            if n2:
                gx2 = be.matmul(x1.reshape(n, 1, i), q).reshape(n, j)
        if nb and ctx.has_bias:
            gb = be.sum(g, axis=0)
        return gx1, gx2, gw, gb


def bilinear(input1, input2, weight, bias=None):
    """``y = x1^T A x2 + b`` per sample: ``input1`` ``(*, in1)``, ``input2`` ``(*, in2)`` with
    the same leading dims, ``weight`` ``(out, in1, in2)``, ``bias`` ``(out,)`` -> ``(*, out)``."""
    x1 = as_tensor_arg(input1, "bilinear")
    x2 = as_tensor_arg(input2, "bilinear")
    w = as_tensor_arg(weight, "bilinear")
    if w.ndim != 3:
        raise RuntimeError(f"bilinear: weight must be 3-D (out, in1, in2), got shape {tuple(w.shape)}")
    o, i, j = w.shape
    if x1.ndim == 0 or x2.ndim == 0 or x1.shape[:-1] != x2.shape[:-1]:
        raise RuntimeError(f"bilinear: input1 {tuple(x1.shape)} and input2 {tuple(x2.shape)} must have "
                           "the same leading (batch) dimensions")
    if x1.shape[-1] != i or x2.shape[-1] != j:
        raise RuntimeError(f"bilinear: input1 {tuple(x1.shape)} and input2 {tuple(x2.shape)} do not match "
                           f"weight {tuple(w.shape)} (expected last dims {i} and {j})")
    if bias is not None and tuple(bias.shape) != (o,):
        raise RuntimeError(f"bilinear: bias of shape {tuple(bias.shape)} does not match weight "
                           f"{tuple(w.shape)} (expected ({o},))")
    dts = {x1.dtype, x2.dtype, w.dtype} | ({bias.dtype} if bias is not None else set())
    if len(dts) != 1:
        raise RuntimeError(f"bilinear: expected all tensors to have one dtype, got input1 {x1.dtype}, input2 "
                           f"{x2.dtype}, weight {w.dtype}" + ("" if bias is None else f", bias {bias.dtype}"))
    arrays = [x1.array, x2.array, w.array] + ([bias.array] if bias is not None else [])
    if len({type(a) for a in arrays}) != 1:
        raise RuntimeError(f"bilinear: expected all tensors to be on the same device, got input1 on "
                           f"{x1.device}, input2 on {x2.device}, weight on {w.device}")
    lead = x1.shape[:-1]
    y = Bilinear.apply(x1.reshape(-1, i), x2.reshape(-1, j), w, bias)
    return y.reshape(tuple(lead) + (o,))
