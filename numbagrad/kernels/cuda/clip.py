"""CUDA twins of ``kernels/cpu/clip.py``: gradient norm, clip scaling and value clamping
over a list of gradients.

Same contract as the CPU module (arguments name for name): ``grads`` is a list of
C-contiguous device arrays of one float dtype; ``_grad_norm_cuda(grads, norm_type, out)``
writes the float64 norm into the 1-element device array ``out`` (no host copy: the
scaling kernel reads it there), ``_grad_scale_cuda(grads, total, max_norm)`` reads the
total from the device array ``total`` (the norm's dtype) and computes PyTorch's
coefficient ``min(max_norm * (1 / (total + 1e-6)), 1)`` in every thread,
``_grad_clamp_cuda(grads, lo, hi)`` clamps in place.

Design: one launch per gradient (a multi-tensor launch would need a device table of
pointers, which numba's CUDA target does not type; per-tensor launches are what PyTorch's
non-foreach path does too), and one final launch for the norm:

* norm: each gradient ``k`` gets ``nb_k`` rows of a float64 ``part`` array; ``ROW_TPB``
  threads per block accumulate their elements in float64 over "virtual blocks" (any grid
  is correct), a shared-memory tree combines a block into ``part[off_k + vb]`` (sum, or
  max / min with NaN winning). One single-block kernel then reduces ``part`` and applies
  the root into ``out[0]``; for ``norm_type = 0`` it counts the gradients whose part sum
  is non-zero (PyTorch's norm of the per-tensor norms). Deterministic for a given grid.
* scale / clamp: flat grid-stride kernels, one thread per element. A coefficient of
  exactly 1 writes nothing (the CPU skips that pass).
* float16 is read and computed in float32 and narrowed at the store.
"""
import math

import numpy as np
from numba import cuda, float64
from numba import types as nbtypes

from .._clip_common import _empty_norm, _norm_mode
from ._launch import MAX_BLOCKS, ROW_TPB, cuda_kernel, dev, device_fn, launch, scratch, widen

# the names be.kernel(family, name) resolves (see numbagrad/kernels/__init__.py)
ENTRY_POINTS = ("grad_norm", "grad_scale", "grad_clamp")

__all__ = ["_grad_norm_cuda", "_grad_scale_cuda", "_grad_clamp_cuda"]

_I64 = nbtypes.int64
_F64 = nbtypes.float64

# modes as on the CPU (see kernels/_clip_common.py): 0 sum x^2, 1 sum |x|, 2 sum |x|^p,
# 3 count non-zero, 4 max |x|, 5 min |x|


@device_fn
def _combine(a, b, mode):
    if mode == 4 or mode == 5:
        if a != a:
            return a
        if b != b:
            return b
        if mode == 4:
            return a if a >= b else b
        return a if a <= b else b
    return a + b


@device_fn
def _block_reduce(sh, tid, v, mode):
    """Every thread's ``v`` combined over the block (all threads call it)."""
    sh[tid] = v
    cuda.syncthreads()
    s = ROW_TPB // 2
    while s > 0:
        if tid < s:
            sh[tid] = _combine(sh[tid], sh[tid + s], mode)
        cuda.syncthreads()
        s //= 2
    r = sh[0]
    cuda.syncthreads()
    return r


@cuda_kernel(lambda T: (T[::1], _I64, _F64, _F64[::1], _I64, _I64))
def _norm_part_kernel(x, mode, p, part, off, nb):
    sh = cuda.shared.array(ROW_TPB, float64)
    tid = cuda.threadIdx.x
    n = x.size
    stride = nb * ROW_TPB
    vb = cuda.blockIdx.x
    while vb < nb:
        acc = 0.0
        if mode == 5:
            acc = math.inf
        i = vb * ROW_TPB + tid
        while i < n:
            v = abs(float64(widen(x[i])))
            if mode == 0:
                acc += v * v
            elif mode == 1:
                acc += v
            elif mode == 2:
                acc += v ** p
            elif mode == 3:
                if v != 0.0:
                    acc += 1.0
            else:
                acc = _combine(acc, v, mode)
            i += stride
        tot = _block_reduce(sh, tid, acc, mode)
        if tid == 0:
            part[off + vb] = tot
        vb += cuda.gridDim.x


@cuda_kernel([(_F64[::1], _I64[::1], _I64, _F64, _F64[::1])])
def _norm_final_kernel(part, offs, mode, p, out):
    sh = cuda.shared.array(ROW_TPB, float64)
    tid = cuda.threadIdx.x
    if cuda.blockIdx.x != 0:
        return
    acc = 0.0
    if mode == 5:
        acc = math.inf
    if mode == 3:
        k = tid
        while k < offs.size - 1:
            s = 0.0
            for j in range(offs[k], offs[k + 1]):
                s += part[j]
            if s != 0.0:
                acc += 1.0
            k += ROW_TPB
        red = 3  # a sum of the counts
    else:
        j = tid
        while j < part.size:
            acc = _combine(acc, part[j], mode)
            j += ROW_TPB
        red = mode
    tot = _block_reduce(sh, tid, acc, red)
    if tid == 0:
        if mode == 0:
            tot = math.sqrt(tot)
        elif mode == 2:
            tot = tot ** (1.0 / p)
        out[0] = tot


def _flat(a):
    d = dev(a)
    return d if d.ndim == 1 else d.reshape(d.size)


def _grad_norm_cuda(grads, norm_type, out):
    """``out[0]`` = the ``norm_type`` norm of all elements of ``grads`` (float64, on the device)."""
    p = float(norm_type)
    mode = _norm_mode(p)
    if not grads:
        dev(out).copy_to_device(np.array([_empty_norm(mode)]))
        return
    flats = [_flat(g) for g in grads]
    offs = [0]
    for f in flats:
        offs.append(offs[-1] + max(1, min(MAX_BLOCKS, 64, -(-f.size // ROW_TPB))))
    part = scratch(offs[-1], np.float64)
    for k, f in enumerate(flats):
        nb = offs[k + 1] - offs[k]
        _norm_part_kernel[nb, ROW_TPB](f, mode, p, part, offs[k], nb)
    doffs = cuda.to_device(np.array(offs, np.int64))
    _norm_final_kernel[1, ROW_TPB](part, doffs, mode, p, dev(out))


@cuda_kernel(lambda T: (T[::1], T[::1], _F64))
def _scale_kernel(x, total, max_norm):
    t = widen(total[0])
    ct = type(t)
    c = ct(1) / (t + ct(1e-6)) * ct(max_norm)
    if c > ct(1):
        c = ct(1)
    if c == ct(1):
        return
    for i in range(cuda.grid(1), x.size, cuda.gridsize(1)):
        x[i] = widen(x[i]) * c


def _grad_scale_cuda(grads, total, max_norm):
    """Multiply every gradient by ``min(max_norm / (total[0] + 1e-6), 1)``."""
    tot = dev(total)
    if tot.ndim != 1:
        tot = tot.reshape(tot.size)
    for g in grads:
        f = _flat(g)
        launch(_scale_kernel, f.size, f, tot, float(max_norm))


@cuda_kernel(lambda T: (T[::1], _F64, _F64))
def _clamp_kernel(x, lo, hi):
    for i in range(cuda.grid(1), x.size, cuda.gridsize(1)):
        v = widen(x[i])
        ct = type(v)
        if v < ct(lo):   # max first, then min: lo > hi gives hi, as torch.clamp
            v = ct(lo)
        if v > ct(hi):
            v = ct(hi)
        x[i] = v


def _grad_clamp_cuda(grads, lo, hi):
    """Clamp every element of ``grads`` into ``[lo, hi]`` in place."""
    for g in grads:
        f = _flat(g)
        launch(_clamp_kernel, f.size, f, float(lo), float(hi))
