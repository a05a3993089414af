"""Gradient unscaling for ``amp.GradScaler``: one kernel call multiplies every gradient of an
optimizer arena bucket by ``inv_scale`` in place and reports whether any was inf or NaN.

Contract (the CUDA twin in ``kernels/cuda/amp.py`` takes the same arguments)
---------------------------------------------------------------------------
``_unscale_check_cpu(grad, blk_start, blk_end, blk_seg, active, gsrc, inv_scale, found)``
runs over an optimizer arena bucket exactly as the optimizer kernels do
(``kernels/cpu/optim.py``, whose ``block_of`` and ``grad_block`` it uses): blocks
``blk_start[b]:blk_end[b]`` of parameter ``blk_seg[b]``, skipped when ``active`` says that
parameter has no gradient, each gradient read through ``gsrc`` (its arena slot of ``grad``,
or the array backward left, where it is). Every element ``x`` of an active gradient becomes
``x * inv_scale`` (``inv_scale`` a float32; float64 gradients multiply in float64, as torch
widens the float32 factor), and ``found[0]`` (a 1-element float32 array, written only to
set it) becomes 1.0 when some ``x`` was inf or NaN. Nothing is returned.

This is ``torch._amp_foreach_non_finite_check_and_unscale_`` (ATen's
``AmpGradScalerKernels.cpp``): it checks the values *before* the multiply (an unscale that
overflows a finite value to inf is not reported; torch 2.13 checked), and with
``inv_scale == 1`` it stores nothing (torch stores the same value).

Design
------
* The parallel twin is a ``prange`` over the arena's blocks (at most 16384 elements, inside
  one parameter) whose tasks add their count of non-finite elements into one integer:
  numba's parallel sum reduction, race-free, with nothing allocated.
* Inside a block one loop loads, counts ``(x - x) != 0`` (0 for a finite ``x``, NaN for inf
  and NaN) and stores. An integer sum vectorises without any fastmath flag: the loop runs at
  memory speed (see ``perf/test_bench_grad_scaler.py``).
* NOTE: this module's functions are compiled with ``fastmath`` off whatever
  ``config.FASTMATH`` says (the one departure from ``cpu_jit``): under ``nnan``/``ninf``
  LLVM may fold the finiteness test to "finite".
* Below ``config.PARALLEL_THRESHOLD`` arena elements the serial twin runs (``FlatKernel``'s
  rule, on ``grad.size``).
* float16 and bfloat16 never reach this kernel (numba has no CPU type for either):
  ``GradScaler`` widens such gradients to a float32 copy, runs this kernel on it and rounds
  the products back once (``amp/grad_scaler.py``'s ``_unscale_check``), as torch's
  ``opmath`` does. ``GradScaler.unscale_`` refuses float16 gradients, as torch does.
"""
from numba import prange

from .._jit import FlatKernel, exact_jit
from .optim import block_of, grad_block

# the names be.kernel(family, name) resolves (see numbagrad/kernels/__init__.py)
ENTRY_POINTS = ("unscale_check",)

__all__ = ["_unscale_check_cpu"]


@exact_jit
def _unscale_span(g, inv_scale):
    """``g *= inv_scale`` in place (nothing stored when ``inv_scale == 1``); returns how many
    elements were inf or NaN before the multiply."""
    bad = 0
    if inv_scale == 1:
        for i in range(g.size):
            x = g[i]
            bad += (x - x) != 0
    else:
        for i in range(g.size):
            x = g[i]
            bad += (x - x) != 0
            g[i] = x * inv_scale
    return bad


def _unscale_check(grad, blk_start, blk_end, blk_seg, active, gsrc, inv_scale, found):
    """Unscale one arena bucket's gradients and flag non-finite ones (module docstring)."""
    bad = 0
    for b in prange(blk_start.size):
        s, lo, hi = block_of(blk_start, blk_end, blk_seg, active, b)
        if s < 0:
            continue
        bad += _unscale_span(grad_block(grad, gsrc, s, lo, hi), inv_scale)
    if bad != 0:
        found[0] = 1.0


_unscale_check_cpu = FlatKernel(_unscale_check, fastmath=False)  # rounding as torch's: no fastmath
