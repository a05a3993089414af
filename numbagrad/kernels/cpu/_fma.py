"""``fma(a, b, c)``: ``a * b + c`` rounded once (LLVM's ``llvm.fma``), for CPU kernels.

numbagrad compiles without ``fastmath``, so LLVM never contracts ``a * b + c`` into a
fused multiply-add by itself. PyTorch's vectorised CPU kernels do fuse in some ops
(``add(x, y, alpha=a)`` is ``fmadd(y, a, x)``, ``lerp`` is an ``fmadd``), and an
optimizer that must follow ``torch.optim`` to the last bit over hundreds of steps has
to round where PyTorch rounds. Kernels call ``fma`` at exactly those places; LLVM
vectorises the intrinsic like any other arithmetic (one ``vfmadd`` per vector).

The three arguments are converted to the type of ``c`` (float32 or float64).
"""
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.core.extending import intrinsic

from .._jit import scalar_helper


@intrinsic
def _llvm_fma(typingctx, a, b, c):
    if not (isinstance(a, types.Float) and a == b == c):
        return None

    def codegen(context, builder, signature, args):
        ty = args[0].type
        name = "llvm.fma.f64" if ty == ir.DoubleType() else "llvm.fma.f32"
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ty, [ty, ty, ty]), name)
        return builder.call(fn, args)

    return a(a, b, c), codegen


@scalar_helper
def fma(a, b, c):
    """``a * b + c`` with a single rounding, in the type of ``c``."""
    t = type(c)
    return _llvm_fma(t(a), t(b), c)
