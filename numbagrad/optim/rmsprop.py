"""RMSprop, each step one fused kernel over every parameter of a group
(``_rmsprop_step_cpu`` in ``numbagrad/kernels/cpu/optim_adaptive.py``; the arena is
described in :mod:`numbagrad.optim.optimizer`). Numerically PyTorch's single-tensor
RMSprop: L2 weight decay added to the gradient, ``square_avg = alpha*square_avg +
(1-alpha)*g*g``, the centered variant's ``grad_avg.lerp_(g, 1-alpha)`` and
``sqrt(square_avg - grad_avg**2)``, ``eps`` added after the square root, optional
momentum buffer ``momentum*buf + g/avg``, ``maximize``."""
from .optimizer import Optimizer, _check_hyper

__all__ = ["RMSprop"]


class RMSprop(Optimizer):
    """RMSprop (``torch.optim.RMSprop``; Tieleman & Hinton, 2012, "Neural Networks for
    Machine Learning", lecture 6e; the centered form: Graves, 2013, "Generating Sequences
    With Recurrent Neural Networks").

    Per parameter with gradient ``g`` (``-g`` when maximizing)::

        g = g + weight_decay * p
        v = alpha * v + (1 - alpha) * g * g                 # state['square_avg']
        if centered:
            a = alpha * a + (1 - alpha) * g                 # state['grad_avg']
            avg = sqrt(v - a * a) + eps
        else:
            avg = sqrt(v) + eps
        if momentum > 0:
            b = momentum * b + g / avg                      # state['momentum_buffer']
            p = p - lr * b
        else:
            p = p - lr * g / avg

    Parameters
    ----------
    lr : float, default 1e-2
    alpha : float, default 0.99 (smoothing constant)
    eps : float, default 1e-8
    weight_decay : float, default 0 (L2 penalty added to the gradient)
    momentum : float, default 0
    centered : bool, default False (normalise by the estimated gradient variance)
    capturable : bool, default False (accepted; step counts already live with the
        parameters)
    foreach : bool or None (accepted and ignored: every step is one fused kernel)
    maximize : bool, default False
    differentiable : bool, default False (True is not supported)

    State per parameter: ``step`` (float32 0-d), ``square_avg``, ``momentum_buffer``
    (when ``momentum > 0``), ``grad_avg`` (when ``centered``), as PyTorch.
    """

    _uses_step = True

    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0, centered=False,
                 capturable=False, foreach=None, maximize=False, differentiable=False):
        _check_hyper("RMSprop", lr=lr, eps=eps, momentum=momentum, weight_decay=weight_decay, alpha=alpha,
                     differentiable=differentiable)
        defaults = dict(lr=lr, momentum=momentum, alpha=alpha, eps=eps, centered=centered,
                        weight_decay=weight_decay, capturable=capturable, foreach=foreach, maximize=maximize,
                        differentiable=differentiable)
        super().__init__(params, defaults)

    def _state_keys(self, group):
        keys = ("square_avg",)
        if group["momentum"] > 0:
            keys += ("momentum_buffer",)
        if group["centered"]:
            keys += ("grad_avg",)
        return keys

    def _update_bucket(self, h, b, t):
        """One RMSprop update of bucket ``b`` (``h``: the group's hyperparameters)."""
        group = h.group
        alpha = float(group["alpha"])
        momentum = float(group["momentum"])
        centered = bool(group["centered"])
        use_m = momentum > 0.0
        oma = t(1.0 - alpha)
        v = b.bufs["square_avg"]
        b.be.kernel("optim_adaptive", "rmsprop_step")(
            b.param, b.grad, v, b.bufs["grad_avg"] if centered else v, b.bufs["momentum_buffer"] if use_m else v,
            b.tables, b.steps, (t(-h.lr), t(alpha), oma, t(1) - oma, t(h.eps), t(h.wd), t(h.sign), t(momentum),
                                centered, use_m, abs(1.0 - alpha) < 0.5))
