"""``_ptr_of(addr, like)``: an int64 data address as a typed pointer, for CPU kernels that
take arrays as a table of addresses (``array.ctypes.data``) and view them again with
``numba.carray(_ptr_of(addr, like), shape)``; ``_addr_of(array)``, that address, for the
per-step Python side.

Used by the multi-tensor gradient kernels (``kernels/cpu/clip.py``: a list of gradients
as one table) and by the optimizer kernels (``kernels/cpu/optim.py``'s ``grad_block``:
a parameter's gradient read where its array is, not copied into the flat arena). The
caller keeps the arrays alive for the kernel call; nothing checks the address.
"""
from numba import types
from numba.extending import intrinsic

from .._jit import cpu_jit


@intrinsic
def _ptr_of(typingctx, addr, like):
    """A typed pointer (``like``'s element type) to the address ``addr`` (int64)."""
    sig = types.CPointer(like.dtype)(addr, like)

    def codegen(context, builder, signature, args):
        return builder.inttoptr(args[0], context.get_value_type(signature.return_type))
    return sig, codegen


@cpu_jit
def _addr_of(a):
    """``a.ctypes.data`` (int), called from Python: ~0.2 us against ~0.85 us for
    ``ndarray.ctypes`` (~1.2 us against ~3.5 us an array right after a backward pass, with
    cold caches). Compiles once per array type (dtype, number of dimensions, layout)."""
    return a.ctypes.data
