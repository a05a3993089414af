"""CUDA twins of ``kernels/cpu/optim_adaptive.py``: fused RMSprop, Adagrad and Adadelta
over a flat arena.

Same contract and design as ``kernels/cuda/optim.py`` (read its docstring; its factories
make the kernels from the work on one element or parameter): one
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

from numba import types as nbtypes

from .optim import (_BOOL, _F32, _F64, _TABLES_T, _U8, _bump, _count_steps_kernel, _ct, _decayed_grad, _elements_kernel,
                    _launch_elements, _launch_segments, _lerp, _segments_kernel, _sq_avg, _typed)

# the names be.kernel(family, name) resolves (see numbagrad/kernels/__init__.py)
ENTRY_POINTS = ("rmsprop_step", "adagrad_step", "adadelta_step")

__all__ = ["_rmsprop_step_cuda", "_adagrad_step_cuda", "_adadelta_step_cuda"]


# ---- RMSprop ------------------------------------------------------------------------------------
@_elements_kernel(lambda T: (_TABLES_T,) + (T[::1],) * 5 + (nbtypes.Tuple((_ct(T),) * 8 + (_BOOL, _BOOL, _BOOL)),))
def _rmsprop_elements_kernel(param, grad, square_avg, grad_avg, momentum_buffer, hyper, e, s):
    neg_lr, alpha, oma, omw, eps, wd, sign, momentum, centered, use_momentum, lerp_small = hyper
    ct = type(neg_lr)
    p, g = _decayed_grad(param, grad, e, wd, sign)
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


def _rmsprop_step_cuda(param, grad, square_avg, grad_avg, momentum_buffer, layout, steps, hyper):
    """RMSprop over a flat arena (``torch.optim.rmsprop._single_tensor_rmsprop``); see the
    CPU twin ``_rmsprop_step_cpu`` for the meaning of every argument."""
    neg_lr, alpha, oma, omw, eps, wd, sign, momentum, centered, use_momentum, lerp_small = hyper
    _launch_segments(_count_steps_kernel, layout, steps)
    _launch_elements(_rmsprop_elements_kernel, layout, param, grad, square_avg, grad_avg, momentum_buffer,
                     _typed(param, (neg_lr, alpha, oma, omw, eps, wd, sign, momentum),
                            (centered, use_momentum, lerp_small)))


# ---- Adagrad ------------------------------------------------------------------------------------
@_segments_kernel(lambda T: (_U8[::1], _F32[::1], T[::1], _F64, _F64))
def _adagrad_segments_kernel(steps, seg_scal, lr, lr_decay, s):
    seg_scal[2 * s] = -(lr / (1.0 + (_bump(steps, s) - 1.0) * lr_decay))


@_elements_kernel(lambda T: (_TABLES_T,) + (T[::1],) * 4 + (nbtypes.Tuple((_ct(T),) * 3),))
def _adagrad_elements_kernel(param, grad, state_sum, seg_scal, hyper, e, s):
    eps, wd, sign = hyper
    ct = type(eps)
    nclr = ct(seg_scal[2 * s])
    p, g = _decayed_grad(param, grad, e, wd, sign)
    v = ct(state_sum[e]) + g * g
    state_sum[e] = v
    param[e] = p + (nclr * g) / (math.sqrt(v) + eps)


def _adagrad_step_cuda(param, grad, state_sum, layout, steps, seg_scal, hyper):
    """Adagrad over a flat arena (``torch.optim.adagrad._single_tensor_adagrad``); see the
    CPU twin ``_adagrad_step_cpu`` for the meaning of every argument."""
    lr, lr_decay, eps, wd, sign = hyper
    _launch_segments(_adagrad_segments_kernel, layout, steps, seg_scal, float(lr), float(lr_decay))
    _launch_elements(_adagrad_elements_kernel, layout, param, grad, state_sum, seg_scal, _typed(param, (eps, wd, sign)))


# ---- Adadelta -----------------------------------------------------------------------------------
@_elements_kernel(lambda T: (_TABLES_T,) + (T[::1],) * 4 + (nbtypes.Tuple((_ct(T),) * 6),))
def _adadelta_elements_kernel(param, grad, square_avg, acc_delta, hyper, e, s):
    neg_lr, rho, omr, eps, wd, sign = hyper
    ct = type(neg_lr)
    p, g = _decayed_grad(param, grad, e, wd, sign)
    v = _sq_avg(ct(square_avg[e]), g, rho, omr)
    square_avg[e] = v
    u = ct(acc_delta[e])
    delta = (math.sqrt(u + eps) / math.sqrt(v + eps)) * g
    acc_delta[e] = _sq_avg(u, delta, rho, omr)
    param[e] = p + delta * neg_lr


def _adadelta_step_cuda(param, grad, square_avg, acc_delta, layout, steps, hyper):
    """Adadelta over a flat arena (``torch.optim.adadelta._single_tensor_adadelta``); see
    the CPU twin ``_adadelta_step_cpu`` for the meaning of every argument."""
    neg_lr, rho, omr, eps, wd, sign = hyper
    _launch_segments(_count_steps_kernel, layout, steps)
    _launch_elements(_adadelta_elements_kernel, layout, param, grad, square_avg, acc_delta,
                     _typed(param, (neg_lr, rho, omr, eps, wd, sign)))
