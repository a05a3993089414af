"""Adam and AdamW, each step one fused kernel over every parameter of a group
(``_adam_step_cpu`` in ``numbagrad/kernels/cpu/optim.py``; the arena is described in
:mod:`numbagrad.optim.optimizer`). Numerically PyTorch's single-tensor Adam: bias
corrections per parameter from ``state['step']``, ``exp_avg.lerp_(g, 1-beta1)``,
``exp_avg_sq = beta2*exp_avg_sq + (1-beta2)*g*g``, AMSGrad's running max, L2 weight decay
(Adam) or decoupled decay (AdamW), ``maximize``."""
from ..backend import backend_of
from .optimizer import Optimizer

__all__ = ["Adam", "AdamW"]


class Adam(Optimizer):
    """Adam (``torch.optim.Adam``).

    Parameters
    ----------
    lr : float, default 1e-3
    betas : (float, float), default (0.9, 0.999)
    eps : float, default 1e-8
    weight_decay : float, default 0 (L2 penalty added to the gradient)
    amsgrad : bool, default False
    maximize : bool, default False
    decoupled_weight_decay : bool, default False (True is AdamW)
    capturable : bool, default False. Accepted on every device (PyTorch refuses it on the
        CPU); results are the same either way.
    foreach, fused : accepted and ignored: every step is one fused kernel per group.
    """

    _uses_step = True

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, amsgrad=False, *,
                 maximize=False, decoupled_weight_decay=False, foreach=None, capturable=False,
                 differentiable=False, fused=None):
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
        # capturable=True is accepted: step counts and bias corrections already stay with
        # the parameters (on the device, for CUDA), nothing syncs to the host.
        if differentiable:
            raise NotImplementedError(f"{type(self).__name__}: differentiable=True (autograd through the update) "
                                      "is not supported; the update is a fused in-place kernel")
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
                        maximize=maximize, decoupled_weight_decay=decoupled_weight_decay)
        super().__init__(params, defaults)

    def _state_keys(self, group):
        return ("exp_avg", "exp_avg_sq", "max_exp_avg_sq") if group["amsgrad"] else ("exp_avg", "exp_avg_sq")

    def step(self, closure=None):
        """One Adam update of every parameter that has a gradient."""
        loss = self._closure(closure)
        for group in self.param_groups:
            arena = self._prepare(group)
            lr = float(group["lr"])
            beta1, beta2 = (float(b) for b in group["betas"])
            eps = float(group["eps"])
            wd = float(group["weight_decay"])
            decoupled = bool(group["decoupled_weight_decay"])
            amsgrad = bool(group["amsgrad"])
            sign = -1.0 if group["maximize"] else 1.0
            for b in arena.buckets:
                if not b.any_active:
                    continue
                t = b.dtype.type
                omb1 = t(1.0 - beta1)
                bufs = b.bufs
                v = bufs["exp_avg_sq"]
                backend_of(b.param).kernel("optim", "adam_step")(
                    b.param, b.grad, bufs["exp_avg"], v, bufs["max_exp_avg_sq"] if amsgrad else v,
                    b.blk_start, b.blk_end, b.blk_seg, b.active, b.steps, b.scal,
                    lr, beta1, beta2, omb1, t(1) - omb1, t(beta2), t(1.0 - beta2), t(eps),
                    t(0.0 if decoupled else wd), t(1.0 - lr * wd if decoupled else 1.0), t(sign),
                    amsgrad, abs(1.0 - beta1) < 0.5)
        return loss


class AdamW(Adam):
    """Adam with decoupled weight decay (``torch.optim.AdamW``): each step first scales
    parameters by ``1 - lr * weight_decay``. Default ``weight_decay=1e-2``."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False, *,
                 maximize=False, foreach=None, capturable=False, differentiable=False, fused=None):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, maximize=maximize,
                         decoupled_weight_decay=True, foreach=foreach, capturable=capturable,
                         differentiable=differentiable, fused=fused)
