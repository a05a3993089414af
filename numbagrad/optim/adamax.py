"""Adamax, each step one fused kernel over every parameter of a group
(``_adamax_step_cpu`` in ``numbagrad/kernels/cpu/optim_adamx.py``; the arena is
described in :mod:`numbagrad.optim.optimizer`). Numerically PyTorch's single-tensor
Adamax: ``exp_avg.lerp_(g, 1-beta1)``, ``exp_inf = max(beta2*exp_inf, |g| + eps)``,
``p -= lr / (1 - beta1**step) * exp_avg / exp_inf`` with the bias correction per
parameter from its own ``state['step']``, L2 weight decay, ``maximize``."""
from ..backend import backend_of
from .optimizer import Optimizer

__all__ = ["Adamax"]


def _check_common(lr, betas, eps, weight_decay, differentiable, name):
    if not 0.0 <= lr:
        raise ValueError(f"Invalid learning rate: {lr}")
    if not 0.0 <= eps:
        raise ValueError(f"Invalid epsilon value: {eps}")
    if not 0.0 <= betas[0] < 1.0:
        raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
    if not 0.0 <= betas[1] < 1.0:
        raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
    if not 0.0 <= weight_decay:
        raise ValueError(f"Invalid weight_decay value: {weight_decay}")
    if differentiable:
        raise NotImplementedError(f"{name}: differentiable=True is not supported (numbagrad optimizers "
                                  "update parameters in place, outside autograd)")


class Adamax(Optimizer):
    """Adamax, Adam with the infinity norm (``torch.optim.Adamax``; Kingma & Ba, 2014, sec. 7).

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

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, foreach=None, *,
                 maximize=False, differentiable=False, capturable=False):
        _check_common(lr, betas, eps, weight_decay, differentiable, "Adamax")
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay, foreach=foreach,
                        maximize=maximize, differentiable=differentiable, capturable=capturable)
        super().__init__(params, defaults)

    def _state_keys(self, group):
        return ("exp_avg", "exp_inf")

    def step(self, closure=None):
        """One Adamax update of every parameter that has a gradient."""
        loss = self._closure(closure)
        for group in self.param_groups:
            arena = self._prepare(group)
            lr = float(group["lr"])
            beta1, beta2 = (float(b) for b in group["betas"])
            eps = float(group["eps"])
            wd = float(group["weight_decay"])
            sign = -1.0 if group.get("maximize", False) else 1.0
            for b in arena.buckets:
                if not b.any_active:
                    continue
                t = b.dtype.type
                omb1 = t(1.0 - beta1)
                backend_of(b.param).kernel("optim_adamx", "adamax_step")(
                    b.param, b.grad, b.bufs["exp_avg"], b.bufs["exp_inf"],
                    b.blk_start, b.blk_end, b.blk_seg, b.active, b.steps, b.scal,
                    lr, beta1, omb1, t(1) - omb1, t(beta2), t(eps), t(wd), t(sign), abs(1.0 - beta1) < 0.5)
        return loss
