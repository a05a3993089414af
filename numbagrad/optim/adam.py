"""Adam and AdamW, each step one fused kernel over every parameter of a group
(``_adam_step_cpu`` in ``numbagrad/kernels/cpu/optim.py``; the arena is described in
:mod:`numbagrad.optim.optimizer`). Numerically PyTorch's single-tensor Adam: bias
corrections per parameter from ``state['step']``, ``exp_avg.lerp_(g, 1-beta1)``,
``exp_avg_sq = beta2*exp_avg_sq + (1-beta2)*g*g``, AMSGrad's running max, L2 weight decay
(Adam) or decoupled decay (AdamW), ``maximize``."""
from .optimizer import Optimizer, _check_hyper

__all__ = ["Adam", "AdamW"]


class Adam(Optimizer):
    """Adam (``torch.optim.Adam``; Kingma & Ba, 2014, "Adam: A Method for Stochastic
    Optimization"; AMSGrad: Reddi et al., 2018, "On the Convergence of Adam and Beyond";
    decoupled weight decay: Loshchilov & Hutter, 2019, "Decoupled Weight Decay
    Regularization").

    Per parameter ``p`` with gradient ``g`` (``-g`` when maximizing), at its step ``t``::

        if decoupled_weight_decay:  p = p * (1 - lr * weight_decay)
        else:                       g = g + weight_decay * p
        m = beta1 * m + (1 - beta1) * g                      # state['exp_avg']
        v = beta2 * v + (1 - beta2) * g * g                  # state['exp_avg_sq']
        if amsgrad:  v_max = max(v_max, v)                   # state['max_exp_avg_sq']
        else:        v_max = v
        p = p - lr / (1 - beta1**t) * m / (sqrt(v_max) / sqrt(1 - beta2**t) + eps)

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
        # capturable=True is accepted: step counts and bias corrections already stay with
        # the parameters (on the device, for CUDA), nothing syncs to the host.
        _check_hyper(type(self).__name__, lr=lr, eps=eps, betas=betas, weight_decay=weight_decay,
                     differentiable=differentiable)
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
                        maximize=maximize, decoupled_weight_decay=decoupled_weight_decay)
        super().__init__(params, defaults)

    def _state_keys(self, group):
        return ("exp_avg", "exp_avg_sq", "max_exp_avg_sq") if group["amsgrad"] else ("exp_avg", "exp_avg_sq")

    def _update_bucket(self, h, b, t):
        """One Adam update of bucket ``b`` (``h``: the group's hyperparameters)."""
        amsgrad = bool(h.group["amsgrad"])
        v = b.bufs["exp_avg_sq"]
        b.be.kernel("optim", "adam_step")(
            b.param, b.grad, b.bufs["exp_avg"], v, b.bufs["max_exp_avg_sq"] if amsgrad else v, b.tables,
            b.steps, b.scal, (h.lr, h.beta1, h.beta2, *h.adam(t), amsgrad, h.lerp_small))


class AdamW(Adam):
    """Adam with decoupled weight decay (``torch.optim.AdamW``; Loshchilov & Hutter, 2019,
    "Decoupled Weight Decay Regularization"): :class:`Adam`'s update with
    ``decoupled_weight_decay=True``, each step first scaling the parameter::

        p = p * (1 - lr * weight_decay)
        (then Adam's moments and step, with no weight decay in g)

    Default ``weight_decay=1e-2``."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False, *,
                 maximize=False, foreach=None, capturable=False, differentiable=False, fused=None):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, maximize=maximize,
                         decoupled_weight_decay=True, foreach=foreach, capturable=capturable,
                         differentiable=differentiable, fused=fused)
