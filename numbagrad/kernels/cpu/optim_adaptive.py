"""Fused RMSprop, Adagrad and Adadelta: one kernel call updates every parameter of a group.

Same contract as ``kernels/cpu/optim.py`` (read its docstring first): ``param``, ``grad``
and the state buffers are flat arenas cut into blocks ``blk_start[b]:blk_end[b]``, each
inside parameter (*segment*) ``blk_seg[b]``; ``active[s]`` says whether segment ``s`` has
a gradient this step (inactive segments, their step counts included, are untouched);
``steps`` are float32 per-segment step counts, incremented here for active segments
(the inlined helpers, ``torch.lerp`` included, are ``optim.py``'s).
Per-element scalars come typed like ``param``; per-parameter scalars (Adagrad's decayed
learning rate) are computed in float64 in a first serial loop into ``seg_scal`` and
rounded to the parameter dtype, as PyTorch rounds a Python scalar argument.

Arithmetic follows PyTorch's single-tensor implementations operation by operation,
rounding where they round (all exact except ``sqrt``; the probe is in
``perf/README.md``, "Optimizer kernels"):

* ``grad.add(param, alpha=wd)`` is ``fma(param, wd, grad)``;
  ``param.add_(buf, alpha=-lr)`` is ``fma(buf, -lr, param)``;
* ``x.mul_(a).addcmul_(g, g, value=c)`` is ``fma(c*g, g, x*a)``; with ``value=1``
  (Adagrad) ``fma(g, g, x)``; ``x.addcmul(y, y, value=-1)`` is ``fma(-y, y, x)``;
* ``x.addcdiv_(y, z, value=c)`` is ``x + (c*y)/z`` (three roundings; ``c*y`` exact when
  ``c == 1``);
* ``x.lerp_(e, w)`` is ``fma(w, e - x, x)`` for ``w < 0.5``, else ``fma(w - 1, e - x, e)``;
* ``sqrt`` is correctly rounded here, MKL's in torch (1 ulp off for a CPU-dependent
  share of inputs): the only residue against torch there.
"""
import numpy as np
from numba import prange

from .._jit import flat_kernel
from ._fma import fma
from .optim import arena_block, count_steps, decayed_grad, lerp, sq_avg, step_count

# the names be.kernel(family, name) resolves (see numbagrad/kernels/__init__.py)
ENTRY_POINTS = ("rmsprop_step", "adagrad_step", "adadelta_step")


@flat_kernel
def _rmsprop_step_cpu(param, grad, square_avg, grad_avg, momentum_buffer, layout, steps, hyper):
    """RMSprop (``torch.optim.rmsprop._single_tensor_rmsprop``) over a flat arena.

    Scalars typed like ``param``: ``neg_lr = -lr``, ``alpha``, ``oma = 1 - alpha`` (the
    ``addcmul`` value and the centered ``lerp`` weight), ``omw = 1 - oma`` (the other
    ``lerp`` branch), ``eps``, ``wd`` (L2 weight decay added to the gradient), ``sign``
    (-1 when maximizing), ``momentum``. ``grad_avg`` is only touched when ``centered``,
    ``momentum_buffer`` only when ``use_momentum`` (momentum > 0; pass any arena
    otherwise). ``lerp_small``: ``oma < 0.5`` (which branch of ``torch.lerp``).
    ``steps`` only counts (RMSprop does not use it).
    """
    blk_start, _, _, active, _ = layout
    neg_lr, alpha, oma, omw, eps, wd, sign, momentum, centered, use_momentum, lerp_small = hyper
    count_steps(active, steps)
    for b in prange(blk_start.size):
        s, lo, hi, pp, gg = arena_block(param, grad, layout, b)
        if s < 0:
            continue
        vv = square_avg[lo:hi]
        aa = grad_avg[lo:hi]
        mm = momentum_buffer[lo:hi]
        for i in range(hi - lo):
            p, g = decayed_grad(pp, gg, i, wd, sign)
            v = sq_avg(vv[i], g, alpha, oma)
            vv[i] = v
            if centered:
                a = lerp(aa[i], g, oma, omw, lerp_small)
                aa[i] = a
                avg = np.sqrt(fma(-a, a, v)) + eps
            else:
                avg = np.sqrt(v) + eps
            if use_momentum:
                m = mm[i] * momentum + g / avg
                mm[i] = m
                pp[i] = fma(m, neg_lr, p)
            else:
                pp[i] = p + (neg_lr * g) / avg


@flat_kernel
def _adagrad_step_cpu(param, grad, state_sum, layout, steps, seg_scal, hyper):
    """Adagrad (``torch.optim.adagrad._single_tensor_adagrad``) over a flat arena.

    ``lr`` and ``lr_decay`` are float64: per active segment the step count is bumped and
    ``-clr = -lr / (1 + (step - 1) * lr_decay)`` stored in ``seg_scal[2*s]`` (rounded to
    the parameter dtype). ``eps``, ``wd`` (L2 weight decay), ``sign`` (-1 when
    maximizing) are typed like ``param``. ``state_sum`` starts at the caller's
    ``initial_accumulator_value``.
    """
    blk_start, _, _, active, _ = layout
    lr, lr_decay, eps, wd, sign = hyper
    for s in range(active.size):
        if active[s]:
            seg_scal[2 * s] = -(lr / (1.0 + (step_count(steps, s) - 1.0) * lr_decay))
    for b in prange(blk_start.size):
        s, lo, hi, pp, gg = arena_block(param, grad, layout, b)
        if s < 0:
            continue
        nclr = seg_scal[2 * s]
        ss = state_sum[lo:hi]
        for i in range(hi - lo):
            p, g = decayed_grad(pp, gg, i, wd, sign)
            v = fma(g, g, ss[i])
            ss[i] = v
            pp[i] = p + (nclr * g) / (np.sqrt(v) + eps)


@flat_kernel
def _adadelta_step_cpu(param, grad, square_avg, acc_delta, layout, steps, hyper):
    """Adadelta (``torch.optim.adadelta._single_tensor_adadelta``) over a flat arena.

    Scalars typed like ``param``: ``neg_lr = -lr``, ``rho``, ``omr = 1 - rho``, ``eps``,
    ``wd`` (L2 weight decay), ``sign`` (-1 when maximizing). ``steps`` only counts.
    """
    blk_start, _, _, active, _ = layout
    neg_lr, rho, omr, eps, wd, sign = hyper
    count_steps(active, steps)
    for b in prange(blk_start.size):
        s, lo, hi, pp, gg = arena_block(param, grad, layout, b)
        if s < 0:
            continue
        vv = square_avg[lo:hi]
        dd = acc_delta[lo:hi]
        for i in range(hi - lo):
            p, g = decayed_grad(pp, gg, i, wd, sign)
            v = sq_avg(vv[i], g, rho, omr)
            vv[i] = v
            delta = (np.sqrt(dd[i] + eps) / np.sqrt(v + eps)) * g
            dd[i] = sq_avg(dd[i], delta, rho, omr)
            pp[i] = fma(delta, neg_lr, p)
