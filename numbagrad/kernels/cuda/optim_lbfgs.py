"""CUDA twins of ``kernels/cpu/optim_lbfgs.py``: the L-BFGS vector work over one flat
parameter vector (two-loop recursion, reductions, axpy, gradient gather).

Same contract as the CPU module, argument for argument (see its docstring): the history
rings ``dirs``/``stps`` are ``(cap, n)`` device arrays, ``ro``/``al`` ``(cap,)`` device
arrays typed like the vector, ``partial`` a float64 device scratch of ``2 * nchunks``
entries; ``_lbfgs_dot_cuda``, ``_lbfgs_pair_cuda`` and ``_lbfgs_absstats_cuda`` return
host floats (one small device-to-host copy each, the optimizer needs them on the host
for its scalar logic), the others return nothing.

Design
------
* Reductions: ``nb = min(nchunks, ceil(n / ROW_TPB))`` *virtual blocks* of ``ROW_TPB``
  threads (any grid is correct; the grid is capped at ``MAX_BLOCKS``) accumulate in
  float64 with a grid stride of ``nb * ROW_TPB`` elements; a shared-memory tree combines
  a block into ``partial[2 vb]`` (and ``partial[2 vb + 1]`` for a second accumulator).
  A single-block kernel then reduces the ``nb`` block values into ``partial[0:2]``
  (every thread reads its values before the tree, so overwriting is safe), which the
  host copies back. Deterministic for a given ``nb``. The three partial-sum kernels are
  made by one factory (:func:`_partials_kernel`) from the work on one element.
* Two-loop recursion: the coefficients stay on the device. Per history pair, one
  reduction kernel for the dot product, one single-block kernel that finishes it,
  rounds it to the vector's dtype, multiplies by ``ro`` and stores ``al[k]`` (first loop)
  or ``al[k] - be`` (second loop) into ``partial[0]``, and one grid-stride axpy kernel
  that reads that coefficient. Kernels on the default stream run in order.
* Elementwise kernels (gather, axpy, negation, scaling) are flat grid-stride loops; the
  gather finds an element's parameter by binary search over the blocks
  (``_find_block``).
* float16 vectors are read and computed in float32 (dot products in float64) and
  narrowed at the store; float32 and float64 compute in their own type, except that the
  dot products accumulate in float64, as on the CPU.
"""
import inspect

from numba import cuda, float64
from numba import types as nbtypes

from ._blockreduce import _array_sum_device
from ._launch import MAX_BLOCKS, ROW_TPB, cuda_kernel, dev, device_fn, from_template, launch, widen
from .clip import _block_reduce, _combine
from .optim import _ct, _ctype, _find_block

# the names be.kernel(family, name) resolves (see numbagrad/kernels/__init__.py)
ENTRY_POINTS = ("lbfgs_gather", "lbfgs_axpy", "lbfgs_dot", "lbfgs_pair", "lbfgs_absstats", "lbfgs_direction")

__all__ = ["_lbfgs_gather_cuda", "_lbfgs_axpy_cuda", "_lbfgs_dot_cuda", "_lbfgs_pair_cuda",
           "_lbfgs_absstats_cuda", "_lbfgs_direction_cuda"]

_I64 = nbtypes.int64
_U8 = nbtypes.uint8
_F64 = nbtypes.float64


# the block reductions of the clipping kernels: mode _SUM adds, _MAX is torch.max (NaN wins)
_SUM, _MAX = 0, 4


def _nvirtual(n, partial):
    """Virtual blocks of a reduction over ``n`` elements with this ``partial`` scratch."""
    return max(1, min(dev(partial).size // 2, -(-int(n) // ROW_TPB)))


def _grid(nb):
    return max(1, min(nb, MAX_BLOCKS))


# ---- reductions -------------------------------------------------------------------------------
def _partials_kernel(signatures, first_is_max=False, second=True):
    """Decorator: the reduction kernel ``name(<params>, part, nb)`` from
    ``fn(<params>, i, acc0, acc1) -> (acc0, acc1)``, the work on element ``i`` of the first
    of ``params``: each of the ``nb`` virtual blocks of ``ROW_TPB`` threads accumulates its
    elements (grid stride ``nb * ROW_TPB``) in two float64 accumulators from 0, then a
    shared-memory tree combines the block's threads into ``part[2 vb]`` (a max, NaN
    winning, when ``first_is_max``, else a sum) and, when ``second``, ``part[2 vb + 1]``
    (a sum). ``signatures``: the kernel's, for the PTX check."""
    def deco(fn):
        names = list(inspect.signature(fn).parameters)[:-3]
        params = ", ".join(names)
        src = (f"def {fn.__name__}({params}, part, nb):\n"
               "    _sh = cuda.shared.array(ROW_TPB, float64)\n"
               "    _tid = cuda.threadIdx.x\n"
               "    _vb = cuda.blockIdx.x\n"
               "    while _vb < nb:\n"
               "        _acc0 = 0.0\n"
               "        _acc1 = 0.0\n"
               f"        for _i in range(_vb * ROW_TPB + _tid, {names[0]}.size, nb * ROW_TPB):\n"
               f"            _acc0, _acc1 = work({params}, _i, _acc0, _acc1)\n"
               "        _tot0 = block_reduce(_sh, _tid, _acc0, MODE0)\n"
               + ("        _tot1 = block_reduce(_sh, _tid, _acc1, SUM)\n" if second else "")
               + "        if _tid == 0:\n"
               "            part[2 * _vb] = _tot0\n"
               + ("            part[2 * _vb + 1] = _tot1\n" if second else "")
               + "        _vb += cuda.gridDim.x\n")
        env = {"cuda": cuda, "float64": float64, "ROW_TPB": ROW_TPB, "block_reduce": _block_reduce,
               "work": device_fn(fn), "MODE0": _MAX if first_is_max else _SUM, "SUM": _SUM}
        kernel = from_template(fn.__module__, fn.__name__, src, env)
        kernel.__doc__ = fn.__doc__
        return cuda_kernel(signatures)(kernel)
    return deco


@_partials_kernel(lambda T: (T[::1], T[::1], _F64[::1], _I64), second=False)
def _dot_part_kernel(a, b, i, acc, _):
    """``a . b``, in float64."""
    return acc + float64(widen(a[i])) * float64(widen(b[i])), 0.0


@_partials_kernel(lambda T: (T[::1], T[::1], T[::1], _ct(T), T[::1], T[::1], _F64[::1], _I64))
def _pair_part_kernel(grad, prev_grad, d, t, y, s, i, ys, y2):
    """``y = grad - prev_grad``, ``s = d * t``; ``(y . s, y . y)`` in float64."""
    yv = widen(grad[i]) - widen(prev_grad[i])
    sv = widen(d[i]) * t
    y[i] = yv
    s[i] = sv
    y64 = float64(widen(y[i]))  # the stored (narrowed) values, as the CPU sees them
    return ys + y64 * float64(widen(s[i])), y2 + y64 * y64


@_partials_kernel(lambda T: (T[::1], _F64[::1], _I64), first_is_max=True)
def _abs_part_kernel(x, i, mx, sm):
    """``(max |x|, sum |x|)`` in float64 (NaN wins the max)."""
    v = abs(float64(widen(x[i])))
    return _combine(mx, v, _MAX), sm + v


@cuda_kernel([(_F64[::1], _I64, nbtypes.boolean)])
def _final_kernel(part, nb, first_is_max):
    """``part[0] = combine(part[0::2][:nb])`` (max or sum), ``part[1] = sum(part[1::2][:nb])``."""
    sh = cuda.shared.array(ROW_TPB, float64)
    tid = cuda.threadIdx.x
    if cuda.blockIdx.x != 0:
        return
    a = 0.0
    c = 0.0
    j = tid
    while j < nb:
        if first_is_max:
            a = _combine(a, part[2 * j], _MAX)
        else:
            a += part[2 * j]
        c += part[2 * j + 1]
        j += ROW_TPB
    ta = _block_reduce(sh, tid, a, _MAX if first_is_max else _SUM)
    tc = _block_reduce(sh, tid, c, _SUM)
    if tid == 0:
        part[0] = ta
        part[1] = tc


def _finish(partial, nb, first_is_max):
    p = dev(partial)
    _final_kernel[1, ROW_TPB](p, nb, first_is_max)
    host = p[:2].copy_to_host()
    return float(host[0]), float(host[1])


def _lbfgs_dot_cuda(a, b, partial):
    """``a . b`` accumulated in float64 (a host float)."""
    nb = _nvirtual(a.size, partial)
    _dot_part_kernel[_grid(nb), ROW_TPB](dev(a), dev(b), dev(partial), nb)
    return _finish(partial, nb, False)[0]


def _lbfgs_pair_cuda(grad, prev_grad, d, t, y, s, partial):
    """``y = grad - prev_grad``, ``s = d * t``; returns ``(y . s, y . y)`` (host floats)."""
    nb = _nvirtual(grad.size, partial)
    ct = _ctype(grad.dtype)
    _pair_part_kernel[_grid(nb), ROW_TPB](dev(grad), dev(prev_grad), dev(d), ct(t), dev(y), dev(s),
                                          dev(partial), nb)
    return _finish(partial, nb, False)


def _lbfgs_absstats_cuda(x, partial):
    """``(max |x|, sum |x|)`` (host floats; NaN propagates to the max)."""
    nb = _nvirtual(x.size, partial)
    _abs_part_kernel[_grid(nb), ROW_TPB](dev(x), dev(partial), nb)
    return _finish(partial, nb, True)


# ---- elementwise --------------------------------------------------------------------------------
@cuda_kernel(lambda T: (T[::1], _I64[::1], _I64[::1], _I64[::1], _U8[::1], T[::1]))
def _gather_kernel(grad, blk_start, blk_end, blk_seg, active, out):
    e = cuda.grid(1)
    while e < out.size:
        b = _find_block(blk_start, blk_end, e)
        if b >= 0:
            if active[blk_seg[b]]:
                out[e] = grad[e]
            else:
                out[e] = 0
        e += cuda.gridsize(1)


def _lbfgs_gather_cuda(grad, layout, out):
    """``out = grad`` on the blocks of active parameters, 0 on the others (``layout``'s
    ``gsrc`` ignored: CUDA buckets always hold their gradients in ``grad``)."""
    blk_start, blk_end, blk_seg, active, _ = layout
    launch(_gather_kernel, out.size, grad, blk_start, blk_end, blk_seg, active, out)


@cuda_kernel(lambda T: (T[::1], T[::1], _ct(T)))
def _axpy_kernel(x, d, t):
    for i in range(cuda.grid(1), x.size, cuda.gridsize(1)):
        x[i] = widen(x[i]) + t * widen(d[i])


def _lbfgs_axpy_cuda(x, d, t):
    """``x += t * d``."""
    launch(_axpy_kernel, x.size, x, d, _ctype(x.dtype)(t))


@cuda_kernel(lambda T: (T[::1], T[::1], _F64[::1]))
def _axpy_coef_kernel(x, d, part):
    """``x += part[0] * d`` (the coefficient a previous kernel left in ``part[0]``)."""
    c = part[0]
    for i in range(cuda.grid(1), x.size, cuda.gridsize(1)):
        xv = widen(x[i])
        x[i] = xv + type(xv)(c) * widen(d[i])


@cuda_kernel(lambda T: (T[::1], T[::1], _ct(T)))
def _neg_scale_kernel(g, d, h):
    """``d = (-g) * h``."""
    for i in range(cuda.grid(1), d.size, cuda.gridsize(1)):
        d[i] = (-widen(g[i])) * h


@cuda_kernel(lambda T: (_F64[::1], _I64, T[::1], T[::1], _I64, _I64, _I64))
def _coef_kernel(part, nb, ro, al, j, k, second):
    """Finish the dot ``part[0::2][:nb]``, then ``v = dtype(dot) * ro[j]``; first loop:
    ``al[k] = v`` and ``part[0] = -al[k]``; second loop: ``part[0] = al[k] - v``."""
    sh = cuda.shared.array(ROW_TPB, float64)
    tid = cuda.threadIdx.x
    if cuda.blockIdx.x != 0:
        return
    tot = _array_sum_device(sh, tid, part[0:2 * nb:2])
    if tid == 0:
        r = widen(ro[j])
        v = type(r)(tot) * r
        if second == 0:
            al[k] = v
            part[0] = -float64(widen(al[k]))
        else:
            part[0] = float64(widen(al[k]) - v)


def _lbfgs_direction_cuda(grad, dirs, stps, ro, al, start, count, h_diag, d, partial):
    """L-BFGS two-loop recursion ``d = -H grad``; see ``_lbfgs_direction_cpu``."""
    g, D, S, Y = dev(grad), dev(d), dev(stps), dev(dirs)
    R, A, P = dev(ro), dev(al), dev(partial)
    n = g.size
    if n == 0:
        return
    cap = Y.shape[0]
    start, count = int(start), int(count)
    nb = _nvirtual(n, partial)
    grid = _grid(nb)
    launch(_neg_scale_kernel, n, g, D, _ctype(g.dtype)(1))
    for k in range(count - 1, -1, -1):
        j = (start + k) % cap
        _dot_part_kernel[grid, ROW_TPB](S[j], D, P, nb)
        _coef_kernel[1, ROW_TPB](P, nb, R, A, j, k, 0)
        launch(_axpy_coef_kernel, n, D, Y[j], P)
    h = _ctype(g.dtype)(h_diag)
    if h != 1:
        launch(_neg_scale_kernel, n, D, D, -h)  # d = (-d) * (-h) = d * h, exactly
    for k in range(count):
        j = (start + k) % cap
        _dot_part_kernel[grid, ROW_TPB](Y[j], D, P, nb)
        _coef_kernel[1, ROW_TPB](P, nb, R, A, j, k, 1)
        launch(_axpy_coef_kernel, n, D, S[j], P)
