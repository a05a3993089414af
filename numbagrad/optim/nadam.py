"""NAdam, each step one fused kernel over every parameter of a group
(``_nadam_step_cpu`` in ``numbagrad/kernels/cpu/optim_adamx.py``; the arena is described
in :mod:`numbagrad.optim.optimizer`). Numerically PyTorch's single-tensor NAdam: Adam's
moments with Nesterov momentum and the momentum schedule
``mu_t = beta1 * (1 - 0.5 * 0.96**(t * momentum_decay))``, the running product of the
``mu_t`` kept per parameter (``state['mu_product']``, 0-d float32 as in torch), L2 or
decoupled weight decay, ``maximize``.

``mu_product`` is a per-parameter scalar state of the arena (``_scalar_state``, a float32
array per bucket like the step counts); ``state[p]['mu_product']`` is a 0-d view into
it, so ``state_dict()`` has torch's layout and ``load_state_dict`` of a torch NAdam state
carries the products over."""
from .optimizer import Optimizer, _check_hyper

__all__ = ["NAdam"]


class NAdam(Optimizer):
    """NAdam, Adam with Nesterov momentum (``torch.optim.NAdam``; Dozat, 2016,
    "Incorporating Nesterov Momentum into Adam").

    Per parameter ``p`` with gradient ``g`` (``-g`` when maximizing), at its step ``t``::

        if decoupled_weight_decay:  p = p * (1 - lr * weight_decay)
        else:                       g = g + weight_decay * p
        mu_t = beta1 * (1 - 0.5 * 0.96**(t * momentum_decay))
        mu_next = beta1 * (1 - 0.5 * 0.96**((t + 1) * momentum_decay))
        P = P * mu_t                                         # state['mu_product']
        m = beta1 * m + (1 - beta1) * g                      # state['exp_avg']
        v = beta2 * v + (1 - beta2) * g * g                  # state['exp_avg_sq']
        d = sqrt(v / (1 - beta2**t)) + eps
        p = p - lr * (1 - mu_t) / (1 - P) * g / d - lr * mu_next / (1 - P * mu_next) * m / d

    Parameters
    ----------
    lr : float, default 2e-3
    betas : (float, float), default (0.9, 0.999)
    eps : float, default 1e-8
    weight_decay : float, default 0
    momentum_decay : float, default 4e-3 (``psi`` of the momentum schedule)
    decoupled_weight_decay : bool, default False (True: parameters are first scaled by
        ``1 - lr * weight_decay``, NAdamW; False: L2 penalty added to the gradient)
    foreach : accepted and ignored (every step is one fused kernel)
    maximize : bool, default False
    capturable : accepted; step counts and ``mu_product`` already live beside the
        parameters, the arithmetic is the non-capturable one
    differentiable : must be False (``NotImplementedError`` otherwise)

    State per parameter (PyTorch's names and order): ``step`` (0-d float32),
    ``mu_product`` (0-d float32), ``exp_avg``, ``exp_avg_sq``.
    """

    _uses_step = True
    _state_names = ("exp_avg", "exp_avg_sq")
    _scalar_state = (("mu_product", 1.0),)
    _scal_width = 3      # [1 - beta2**t, c1, c2] per parameter,
    _scal_wide = True    # in float32 for float16 arenas

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, momentum_decay=4e-3,
                 decoupled_weight_decay=False, *, foreach=None, maximize=False, capturable=False,
                 differentiable=False):
        _check_hyper("NAdam", lr=lr, eps=eps, betas=betas, weight_decay=weight_decay, momentum_decay=momentum_decay,
                     differentiable=differentiable)
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                        momentum_decay=momentum_decay, decoupled_weight_decay=decoupled_weight_decay,
                        maximize=maximize, foreach=foreach, capturable=capturable, differentiable=differentiable)
        super().__init__(params, defaults)

    def _update_bucket(self, h, b, t):
        """One NAdam update of bucket ``b`` (``h``: the group's hyperparameters)."""
        b.be.kernel("optim_adamx", "nadam_step")(
            b.param, b.grad, b.bufs["exp_avg"], b.bufs["exp_avg_sq"], b.tables, b.steps,
            b.scalars["mu_product"], b.scal, (h.lr, h.beta1, h.beta2, float(h.group["momentum_decay"]),
                                               *h.adam(t), h.lerp_small))
