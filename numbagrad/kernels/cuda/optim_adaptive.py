"""CUDA twins of ``kernels/cpu/optim_adaptive.py``: fused RMSprop, Adagrad and Adadelta
over a flat arena.

Same contract and design as ``kernels/cuda/optim.py`` (read its docstring): one
thread per arena element (grid-stride), each finding its block by binary search
(``_find_block``), inactive segments and elements outside every block untouched;
per-segment work (bumping the float32 ``steps``: ``optim.py``'s ``_count_steps_kernel``;
Adagrad's decayed learning rate ``-lr / (1 + (step-1)*lr_decay)`` computed in float64
into ``seg_scal``) is a separate one-thread-per-segment kernel launched first on the
same stream. float16 arenas compute in float32 and store back to half; float32 and
float64 compute in their own type. The update arithmetic is the CPU's, operation by operation, written as plain expressions
(the simulator has no ``cuda.fma``; on a GPU, NVVM may contract a multiply-add where the
CPU rounds twice, which stays within the tests' tolerance). Nothing is returned.
"""
import math

from numba import cuda
from numba import types as nbtypes

from ._launch import cuda_kernel, launch
from .optim import (_BOOL, _F32, _F64, _TABLES_T, _U8, _bump, _count_steps_kernel, _ct, _ctype, _l2_grad, _lerp,
                    _segment_of, _sq_avg, _tables)

# the names be.kernel(family, name) resolves (see numbagrad/kernels/__init__.py)
ENTRY_POINTS = ("rmsprop_step", "adagrad_step", "adadelta_step")

__all__ = ["_rmsprop_step_cuda", "_adagrad_step_cuda", "_adadelta_step_cuda"]


# ---- RMSprop ------------------------------------------------------------------------------------
@cuda_kernel(lambda T: (T[::1],) * 5 + (_TABLES_T,) + (nbtypes.Tuple((_ct(T),) * 8 + (_BOOL, _BOOL, _BOOL)),))
def _rmsprop_elements_kernel(param, grad, square_avg, grad_avg, momentum_buffer, tables, hyper):
    neg_lr, alpha, oma, omw, eps, wd, sign, momentum, centered, use_momentum, lerp_small = hyper
    ct = type(neg_lr)
    n = param.size
    e = cuda.grid(1)
    while e < n:
        s = _segment_of(tables, e)
        if s >= 0:
            p = ct(param[e])
            g = _l2_grad(p, wd, ct(grad[e]) * sign)
            v = _sq_avg(ct(square_avg[e]), g, alpha, oma)
            square_avg[e] = v
            if centered:
                a = _lerp(ct(grad_avg[e]), g, oma, omw, lerp_small)
                grad_avg[e] = a
                avg = math.sqrt(v - a * a) + eps
            else:
                avg = math.sqrt(v) + eps
            if use_momentum:
                m = ct(momentum_buffer[e]) * momentum + g / avg
                momentum_buffer[e] = m
                param[e] = p + m * neg_lr
            else:
                param[e] = p + (neg_lr * g) / avg
        e += cuda.gridsize(1)


def _rmsprop_step_cuda(param, grad, square_avg, grad_avg, momentum_buffer, layout, steps, hyper):
    """RMSprop over a flat arena (``torch.optim.rmsprop._single_tensor_rmsprop``); see the
    CPU twin ``_rmsprop_step_cpu`` for the meaning of every argument."""
    active = layout.active
    tables = _tables(layout)
    neg_lr, alpha, oma, omw, eps, wd, sign, momentum, centered, use_momentum, lerp_small = hyper
    if active.size == 0:
        return
    t = _ctype(param.dtype)
    launch(_count_steps_kernel, active.size, active, steps)
    launch(_rmsprop_elements_kernel, param.size, param, grad, square_avg, grad_avg, momentum_buffer,
           tables, (t(neg_lr), t(alpha), t(oma), t(omw), t(eps), t(wd), t(sign), t(momentum),
           bool(centered), bool(use_momentum), bool(lerp_small)))


# ---- Adagrad ------------------------------------------------------------------------------------
@cuda_kernel(lambda T: (_U8[::1], _F32[::1], T[::1], _F64, _F64))
def _adagrad_segments_kernel(active, steps, seg_scal, lr, lr_decay):
    s = cuda.grid(1)
    while s < active.size:
        if active[s]:
            seg_scal[2 * s] = -(lr / (1.0 + (_bump(steps, s) - 1.0) * lr_decay))
        s += cuda.gridsize(1)


@cuda_kernel(lambda T: (T[::1],) * 3 + (_TABLES_T,) + (T[::1],) + (nbtypes.Tuple((_ct(T),) * 3),))
def _adagrad_elements_kernel(param, grad, state_sum, tables, seg_scal, hyper):
    eps, wd, sign = hyper
    ct = type(eps)
    n = param.size
    e = cuda.grid(1)
    while e < n:
        s = _segment_of(tables, e)
        if s >= 0:
            nclr = ct(seg_scal[2 * s])
            p = ct(param[e])
            g = _l2_grad(p, wd, ct(grad[e]) * sign)
            v = ct(state_sum[e]) + g * g
            state_sum[e] = v
            param[e] = p + (nclr * g) / (math.sqrt(v) + eps)
        e += cuda.gridsize(1)


def _adagrad_step_cuda(param, grad, state_sum, layout, steps, seg_scal, hyper):
    """Adagrad over a flat arena (``torch.optim.adagrad._single_tensor_adagrad``); see the
    CPU twin ``_adagrad_step_cpu`` for the meaning of every argument."""
    active = layout.active
    tables = _tables(layout)
    lr, lr_decay, eps, wd, sign = hyper
    if active.size == 0:
        return
    t = _ctype(param.dtype)
    launch(_adagrad_segments_kernel, active.size, active, steps, seg_scal, float(lr), float(lr_decay))
    launch(_adagrad_elements_kernel, param.size, param, grad, state_sum, tables, seg_scal, (t(eps), t(wd), t(sign)))


# ---- Adadelta -----------------------------------------------------------------------------------
@cuda_kernel(lambda T: (T[::1],) * 4 + (_TABLES_T,) + (nbtypes.Tuple((_ct(T),) * 6),))
def _adadelta_elements_kernel(param, grad, square_avg, acc_delta, tables, hyper):
    neg_lr, rho, omr, eps, wd, sign = hyper
    ct = type(neg_lr)
    n = param.size
    e = cuda.grid(1)
    while e < n:
        s = _segment_of(tables, e)
        if s >= 0:
            p = ct(param[e])
            g = _l2_grad(p, wd, ct(grad[e]) * sign)
            v = _sq_avg(ct(square_avg[e]), g, rho, omr)
            square_avg[e] = v
            u = ct(acc_delta[e])
            delta = (math.sqrt(u + eps) / math.sqrt(v + eps)) * g
            acc_delta[e] = _sq_avg(u, delta, rho, omr)
            param[e] = p + delta * neg_lr
        e += cuda.gridsize(1)


def _adadelta_step_cuda(param, grad, square_avg, acc_delta, layout, steps, hyper):
    """Adadelta over a flat arena (``torch.optim.adadelta._single_tensor_adadelta``); see
    the CPU twin ``_adadelta_step_cpu`` for the meaning of every argument."""
    active = layout.active
    tables = _tables(layout)
    neg_lr, rho, omr, eps, wd, sign = hyper
    if active.size == 0:
        return
    t = _ctype(param.dtype)
    launch(_count_steps_kernel, active.size, active, steps)
    launch(_adadelta_elements_kernel, param.size, param, grad, square_avg, acc_delta,
           tables, (t(neg_lr), t(rho), t(omr), t(eps), t(wd), t(sign)))
