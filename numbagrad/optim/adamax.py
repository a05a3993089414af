"""Adamax, each step one fused kernel over every parameter of a group
(``_adamax_step_cpu`` in ``numbagrad/kernels/cpu/optim_adamx.py``; the arena is
described in :mod:`numbagrad.optim.optimizer`). Numerically PyTorch's single-tensor
Adamax: ``exp_avg.lerp_(g, 1-beta1)``, ``exp_inf = max(beta2*exp_inf, |g| + eps)``,
``p -= lr / (1 - beta1**step) * exp_avg / exp_inf`` with the bias correction per
parameter from its own ``state['step']``, L2 weight decay, ``maximize``."""
from .optimizer import Optimizer, _check_hyper

__all__ = ["Adamax"]


class Adamax(Optimizer):
    """Adamax, Adam with the infinity norm (``torch.optim.Adamax``; Kingma & Ba, 2014,
    "Adam: A Method for Stochastic Optimization", sec. 7).

    Per parameter ``p`` with gradient ``g`` (``-g`` when maximizing), at its step ``t``::

        g = g + weight_decay * p
        m = beta1 * m + (1 - beta1) * g                      # state['exp_avg']
        u = max(beta2 * u, |g| + eps)                        # state['exp_inf']
        p = p - lr / (1 - beta1**t) * m / u

    Parameters
    ----------
    lr : float, default 2e-3
    betas : (float, float), default (0.9, 0.999)
    eps : float, default 1e-8 (added to ``|g|`` before the running max)
    weight_decay : float, default 0 (L2 penalty added to the gradient)
    foreach : accepted and ignored (every step is one fused kernel)
    maximize : bool, default False
    differentiable : must be False (``NotImplementedError`` otherwise)
    capturable : accepted; step counts already live beside the parameters, the
        arithmetic is the non-capturable one

    State per parameter (PyTorch's names): ``step`` (0-d float32), ``exp_avg``,
    ``exp_inf``.
    """

    _uses_step = True
    _state_names = ("exp_avg", "exp_inf")

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, foreach=None, *,
                 maximize=False, differentiable=False, capturable=False):
        _check_hyper("Adamax", lr=lr, eps=eps, betas=betas, weight_decay=weight_decay, differentiable=differentiable)
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay, foreach=foreach,
                        maximize=maximize, differentiable=differentiable, capturable=capturable)
        super().__init__(params, defaults)

    def _update_bucket(self, h, b, t):
        """One Adamax update of bucket ``b`` (``h``: the group's hyperparameters)."""
        omb1, omw, b2, _ = h.moments(t)
        b.be.kernel("optim_adamx", "adamax_step")(
            b.param, b.grad, b.bufs["exp_avg"], b.bufs["exp_inf"], b.tables, b.steps, b.scal,
            (h.lr, h.beta1, omb1, omw, b2, t(h.eps), t(h.wd), t(h.sign), h.lerp_small))
