"""RAdam, each step one fused kernel over every parameter of a group
(``_radam_step_cpu`` in ``numbagrad/kernels/cpu/optim_adamx.py``; the arena is described
in :mod:`numbagrad.optim.optimizer`). Numerically PyTorch's single-tensor RAdam: Adam's
moments, and per parameter, from its own ``state['step']``, the variance rectification
term and the ``rho_t > 5`` switch between the adaptive and the plain (SGD with
momentum) update; L2 or decoupled weight decay, ``maximize``."""
from .optimizer import Optimizer, _check_hyper

__all__ = ["RAdam"]


class RAdam(Optimizer):
    """Rectified Adam (``torch.optim.RAdam``; Liu et al., 2019, "On the Variance of the
    Adaptive Learning Rate and Beyond").

    Per parameter ``p`` with gradient ``g`` (``-g`` when maximizing), at its step ``t``::

        if decoupled_weight_decay:  p = p * (1 - lr * weight_decay)
        else:                       g = g + weight_decay * p
        m = beta1 * m + (1 - beta1) * g                      # state['exp_avg']
        v = beta2 * v + (1 - beta2) * g * g                  # state['exp_avg_sq']
        m_hat = m / (1 - beta1**t)
        rho_inf = 2 / (1 - beta2) - 1
        rho_t = rho_inf - 2 t beta2**t / (1 - beta2**t)
        if rho_t > 5:
            r = sqrt((rho_t - 4)(rho_t - 2) rho_inf / ((rho_inf - 4)(rho_inf - 2) rho_t))
            p = p - lr * m_hat * r * sqrt(1 - beta2**t) / (sqrt(v) + eps)
        else:
            p = p - lr * m_hat

    Parameters
    ----------
    lr : float, default 1e-3
    betas : (float, float), default (0.9, 0.999)
    eps : float, default 1e-8
    weight_decay : float, default 0
    decoupled_weight_decay : bool, default False (True: parameters are first scaled by
        ``1 - lr * weight_decay``, as AdamW; False: L2 penalty added to the gradient)
    foreach : accepted and ignored (every step is one fused kernel)
    maximize : bool, default False
    capturable : accepted; step counts already live beside the parameters, the
        arithmetic is the non-capturable one
    differentiable : must be False (``NotImplementedError`` otherwise)

    State per parameter (PyTorch's names): ``step`` (0-d float32), ``exp_avg``,
    ``exp_avg_sq``. A parameter's first steps (``rho_t <= 5``, the first 5 with the
    default betas) use the un-adapted update ``p -= lr * exp_avg / (1 - beta1**step)``.
    """

    _uses_step = True
    _state_names = ("exp_avg", "exp_avg_sq")
    _scal_width = 3      # [bc1, sqrt(bc2), rect] per parameter,
    _scal_wide = True    # in float32 for float16 arenas

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 decoupled_weight_decay=False, *, foreach=None, maximize=False, capturable=False,
                 differentiable=False):
        _check_hyper("RAdam", lr=lr, eps=eps, betas=betas, weight_decay=weight_decay, differentiable=differentiable)
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay, maximize=maximize,
                        foreach=foreach, capturable=capturable, decoupled_weight_decay=decoupled_weight_decay,
                        differentiable=differentiable)
        super().__init__(params, defaults)

    def _update_bucket(self, h, b, t):
        """One RAdam update of bucket ``b`` (``h``: the group's hyperparameters)."""
        b.be.kernel("optim_adamx", "radam_step")(
            b.param, b.grad, b.bufs["exp_avg"], b.bufs["exp_avg_sq"], b.tables, b.steps, b.scal,
            (h.beta1, h.beta2, t(h.lr), *h.adam(t), h.lerp_small))
