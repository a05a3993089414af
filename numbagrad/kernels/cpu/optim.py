"""Fused optimizer updates: one kernel call updates every parameter of a group.

The optimizer keeps each parameter group in flat arenas (see
``numbagrad/optim/optimizer.py``): ``param``, ``grad`` and each state buffer are one
1-D array holding all parameters back to back. The arena is cut into *blocks*
(``blk_start[b]:blk_end[b]``, each inside one parameter ``blk_seg[b]``, at most a
few thousand elements), and the parallel twin runs ``prange`` over blocks. Per
parameter (*segment*) ``s`` the kernels read ``active[s]`` (it had a gradient this
step; inactive parameters are skipped, as PyTorch skips parameters whose ``.grad``
is None) and keep their own per-parameter counters (Adam's ``steps``, SGD's
``has_buf``), so the result is exactly PyTorch's per-tensor loop.

Every kernel takes these tables as one argument, ``layout`` (``blk_start, blk_end,
blk_seg, active, gsrc``: the optimizer's ``ArenaLayout`` namedtuple, which numba types
as a tuple of arrays), and its scalars as one tuple, ``hyper``, unpacked on entry in the
order the kernel's docstring names them; so no kernel takes more than 10 arguments, and a
step passes the same types each time (nothing recompiles).

Gradients are read through ``gsrc`` (int64, two entries per segment): ``gsrc[2*s]`` is 0 when segment ``s``'s gradient is in its
slot of the arena ``grad``, else the data address of the C-contiguous array (the
parameter's dtype and size) that holds it, which the optimizer leaves where backward put
it instead of copying it into the arena; ``gsrc[2*s+1]`` is the segment's first arena
element. ``grad_block`` turns a block into a view of either. The caller keeps those
arrays alive for the call.

Arithmetic follows PyTorch's single-tensor implementations operation by operation,
with scalars rounded to the parameter dtype where PyTorch rounds them (scalar
arguments of float32 tensor ops are applied in float32); only the bias corrections are
computed in float64, as PyTorch does on the host. Where PyTorch's vectorised CPU ops
round once for a multiply-add, the kernels call ``fma``: ``add(x, y, alpha=a)`` is
``fma(y, a, x)``, ``lerp`` is ``fma(w, e - s, s)`` (``fma(w - 1, e - s, e)`` for
``w >= 0.5``), ``addcmul(x, y, z, value=c)`` is ``fma(c*y, z, x)``, ``addcdiv`` rounds
``x + (c*y)/z`` three times. The only residue against torch is its ``sqrt`` (MKL's, 1 ulp
off for a CPU-dependent share of inputs; the measurements are in ``perf/README.md``,
"Optimizer kernels"), so the tests hold torch to a tolerance and the kernels' rounding,
bit for bit, to NumPy emulations of torch's ops (``tests/reference/optim_rounding.py``).

The inlined helpers at the top (``step_count``, ``bias_corrections``, ``block_of``,
``grad_block``, ``arena_block`` (the block prologue of every kernel), ``l2_grad``,
``decayed_grad``, ``lerp``, ``sq_avg``, ``moments``, ``adam_elem``, ``axpy``, ``maximum``...) are
shared by every optimizer kernel (``optim_adamx.py``, ``optim_adaptive.py``,
``optim_lamb.py``; ``optim_lbfgs.py`` uses ``grad_block`` and ``axpy``).
"""
import numpy as np
from numba import carray, prange

from .._jit import flat_kernel, scalar_helper
from ._fma import fma
from ._ptr import _ptr_of

# the names be.kernel(family, name) resolves (see numbagrad/kernels/__init__.py)
ENTRY_POINTS = ("adam_step", "sgd_step")


# ---- shared by the optimizer kernels (kernels/cpu/optim_*.py) -----------------------------------
@scalar_helper
def step_count(steps, s):
    """One more step of parameter ``s``: its float32 count (torch's ``state['step']``) is
    bumped, and returned in float64 for the per-parameter scalars."""
    steps[s] += 1.0
    return np.float64(steps[s])


@scalar_helper
def count_steps(active, steps):
    """One more step for every active parameter (kernels that only count steps)."""
    for s in range(active.size):
        if active[s]:
            steps[s] += 1.0


@scalar_helper
def bias_corrections(beta1, beta2, st):
    """``(1 - beta1**st, 1 - beta2**st)`` in float64."""
    return 1.0 - beta1 ** st, 1.0 - beta2 ** st


@scalar_helper
def block_of(blk_start, blk_end, blk_seg, active, b):
    """Block ``b`` of the arena as ``(s, lo, hi)``: its parameter and element range, or
    ``s = -1`` when that parameter has no gradient this step (the block is skipped)."""
    s = blk_seg[b]
    if not active[s]:
        return -1, 0, 0
    return s, blk_start[b], blk_end[b]


@scalar_helper
def grad_block(grad, gsrc, s, lo, hi):
    """Elements ``[lo, hi)`` of the arena (inside parameter ``s``) of this step's gradient,
    as a 1-D contiguous array: ``grad[lo:hi]`` when ``gsrc[2*s] == 0`` (the gradient is in
    its arena slot), else a view of the parameter's own gradient array, read where it is:
    ``gsrc[2*s]`` its data address, ``gsrc[2*s+1]`` the parameter's first arena element
    (see ``Optimizer._sync``). A select on the address, outside the element loop: loops
    over the result vectorise either way."""
    addr = gsrc[2 * s]
    if addr == 0:
        return grad[lo:hi]
    return carray(_ptr_of(addr + (lo - gsrc[2 * s + 1]) * grad.itemsize, grad), hi - lo)


@scalar_helper
def arena_block(param, grad, layout, b):
    """Block ``b`` of the arena as ``(s, lo, hi, pp, gg)``: its parameter ``s``, its element
    range, and the views of ``param`` and of this step's gradient (:func:`grad_block`) over
    it; ``s = -1`` (empty views) when that parameter has no gradient this step (the block
    is skipped). ``layout``: the arena tables, as every optimizer kernel takes them."""
    blk_start, blk_end, blk_seg, active, gsrc = layout
    s, lo, hi = block_of(blk_start, blk_end, blk_seg, active, b)
    pp = param[lo:hi]  # empty when skipped: block_of gives lo = hi = 0
    if s < 0:
        return s, lo, hi, pp, grad[lo:hi]
    return s, lo, hi, pp, grad_block(grad, gsrc, s, lo, hi)


@scalar_helper
def lerp(s, e, w, omw, small):
    """``torch.lerp(s, e, w)`` rounded as torch: ``fma(w, e - s, s)`` when ``small``
    (``w < 0.5``), else ``fma(-omw, e - s, e)`` with ``omw = 1 - w``. Written as selects
    on the loop-invariant ``small``, so loops calling it vectorise."""
    return fma(w if small else -omw, e - s, s if small else e)


@scalar_helper
def sq_avg(v, x, beta, omb):
    """A running average of squares as torch rounds ``v.mul_(beta).addcmul_(x, x,
    value=omb)``: ``fma(omb*x, x, v*beta)``."""
    return fma(omb * x, x, v * beta)


@scalar_helper
def moments(g, m, v, omb1, omw, b2, omb2, small):
    """Adam's moments as torch rounds them: ``exp_avg.lerp_(g, 1-beta1)`` and
    ``exp_avg_sq.mul_(beta2).addcmul_(g, g, value=1-beta2)``."""
    return lerp(m, g, omb1, omw, small), sq_avg(v, g, b2, omb2)


@scalar_helper
def l2_grad(p, wd, g):
    """``g.add(p, alpha=wd)`` (L2 weight decay added to the gradient) as torch rounds it,
    ``fma(p, wd, g)``; ``g`` itself when ``wd == 0``, as torch adds nothing then: a NaN or
    inf parameter times a zero decay would otherwise turn the gradient (and every state
    buffer after it) into NaN. A select on the loop-invariant ``wd``: loops vectorise."""
    return fma(p, wd, g) if wd != 0 else g


@scalar_helper
def decayed_grad(pp, gg, i, wd, sign):
    """Element ``i`` of a block: ``(p, g)``, the parameter and its gradient with
    ``maximize``'s sign and L2 weight decay (:func:`l2_grad`)."""
    p = pp[i]
    return p, l2_grad(p, wd, gg[i] * sign)


@scalar_helper
def adam_elem(pp, gg, mm, vv, i, wd, sign, mom):
    """Element ``i`` of an Adam-family block (parameter ``pp``, gradient ``gg``, moments
    ``mm``, ``vv``): the gradient with ``maximize``'s sign and L2 decay
    (``grad.add(param, alpha=wd)``), the new moments, stored; returns ``(p, g, m, v)``.
    ``mom``: :func:`moments`' scalars ``(omb1, omw, b2, omb2, small)``."""
    omb1, omw, b2, omb2, small = mom
    p, g = decayed_grad(pp, gg, i, wd, sign)
    m, v = moments(g, mm[i], vv[i], omb1, omw, b2, omb2, small)
    mm[i] = m
    vv[i] = v
    return p, g, m, v


@scalar_helper
def axpy(x, d, t):
    """``x = fma(d, t, x)`` over a block: ``x.add_(d, alpha=t)`` rounded once, as torch does
    (LAMB's last pass, L-BFGS's steps)."""
    for i in range(x.size):
        x[i] = fma(d[i], t, x[i])


@scalar_helper
def maximum(x, y):
    """``torch.maximum(x, y)``: the larger, NaN when either is NaN."""
    return y if y > x or y != y else x


# ---- Adam / AdamW -------------------------------------------------------------------------------
@flat_kernel
def _adam_step_cpu(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, layout, steps, seg_scal, hyper):
    """Adam / AdamW (``torch.optim.adam._single_tensor_adam``) over a flat arena.

    Per-element scalars come typed like ``param`` (float32 for float32 arenas):
    ``omb1 = 1-beta1`` (the lerp weight), ``omw = 1 - omb1``, ``b2 = beta2``,
    ``omb2 = 1-beta2``, ``eps``, ``wd`` (L2 weight decay added to the gradient; 0 for
    AdamW), ``decay`` (``1 - lr*weight_decay`` for AdamW, else 1) and ``sign`` (-1
    when maximizing).
    ``lr``, ``beta1``, ``beta2`` are float64 for the bias corrections, which are
    computed per parameter from ``steps`` (float32, incremented here for active
    parameters) into ``seg_scal`` (``[-lr/bc1, sqrt(bc2)]`` per parameter, rounded to
    the parameter dtype). ``max_exp_avg_sq`` is only touched when ``amsgrad``.
    ``lerp_small`` selects the branch of ``torch.lerp`` (weight < 0.5; the other one
    uses ``omw = 1 - omb1``).
    """
    blk_start, _, _, active, _ = layout
    lr, beta1, beta2, omb1, omw, b2, omb2, eps, wd, decay, sign, amsgrad, lerp_small = hyper
    mom = (omb1, omw, b2, omb2, lerp_small)
    for s in range(active.size):
        if active[s]:
            bc1, bc2 = bias_corrections(beta1, beta2, step_count(steps, s))
            seg_scal[2 * s] = -(lr / bc1)
            seg_scal[2 * s + 1] = bc2 ** 0.5
    for b in prange(blk_start.size):
        # Zero-based loops over slices: indexing with ``range(lo, hi)`` makes numba emit
        # a negative-index wraparound per access, which blocks SIMD (perf/README.md).
        s, lo, hi, pp, gg = arena_block(param, grad, layout, b)
        if s < 0:
            continue
        nss = seg_scal[2 * s]
        bc2s = seg_scal[2 * s + 1]
        mm = exp_avg[lo:hi]
        vv = exp_avg_sq[lo:hi]
        # Two loops, not a branch per element: a store to max_exp_avg_sq only in one of
        # them (it is ``exp_avg_sq`` itself without amsgrad).
        if amsgrad:
            xx = max_exp_avg_sq[lo:hi]
            for i in range(hi - lo):
                p, _, m, v = adam_elem(pp, gg, mm, vv, i, wd, sign, mom)
                vm = maximum(xx[i], v)
                xx[i] = vm
                pp[i] = p * decay + nss * m / (np.sqrt(vm) / bc2s + eps)
        else:
            for i in range(hi - lo):
                p, _, m, v = adam_elem(pp, gg, mm, vv, i, wd, sign, mom)
                pp[i] = p * decay + nss * m / (np.sqrt(v) / bc2s + eps)


# ---- SGD ---------------------------------------------------------------------------------------
@flat_kernel
def _sgd_step_cpu(param, grad, buf, layout, has_buf, hyper):
    """SGD with momentum / dampening / nesterov / weight decay / maximize
    (``torch.optim.sgd._single_tensor_sgd``) over a flat arena.

    Scalars are typed like ``param``: ``neg_lr = -lr``, ``omd = 1 - dampening``,
    ``sign`` is -1 when maximizing. The first step of a parameter copies its gradient
    into the momentum buffer (``has_buf[s] == 0``), later steps do
    ``buf = momentum*buf + (1-dampening)*g``. ``buf`` is only touched when
    ``use_momentum``.
    """
    blk_start, _, _, active, _ = layout
    neg_lr, momentum, omd, wd, sign, use_momentum, nesterov = hyper
    for b in prange(blk_start.size):
        s, lo, hi, pp, gg = arena_block(param, grad, layout, b)
        if s < 0:
            continue
        if use_momentum:
            bf = buf[lo:hi]
            first = has_buf[s] == 0
            for i in range(hi - lo):
                p, g = decayed_grad(pp, gg, i, wd, sign)
                if first:
                    bb = g
                else:
                    bb = fma(g, omd, bf[i] * momentum)
                bf[i] = bb
                if nesterov:
                    g = fma(bb, momentum, g)
                else:
                    g = bb
                pp[i] = fma(g, neg_lr, p)
        else:
            for i in range(hi - lo):
                p, g = decayed_grad(pp, gg, i, wd, sign)
                pp[i] = fma(g, neg_lr, p)
    if use_momentum:
        for s in range(active.size):
            if active[s]:
                has_buf[s] = 1
