"""RMSprop, each step one fused kernel over every parameter of a group
(``_rmsprop_step_cpu`` in ``numbagrad/kernels/cpu/optim_adaptive.py``; the arena is
described in :mod:`numbagrad.optim.optimizer`). Numerically PyTorch's single-tensor
RMSprop: L2 weight decay added to the gradient, ``square_avg = alpha*square_avg +
(1-alpha)*g*g``, the centered variant's ``grad_avg.lerp_(g, 1-alpha)`` and
``sqrt(square_avg - grad_avg**2)``, ``eps`` added after the square root, optional
momentum buffer ``momentum*buf + g/avg``, ``maximize``."""
from ..backend import backend_of
from .optimizer import Optimizer

__all__ = ["RMSprop"]


class RMSprop(Optimizer):
    """RMSprop (``torch.optim.RMSprop``; Hinton's lecture 6e, centered form of Graves 2013).

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
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= momentum:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if not 0.0 <= alpha:
            raise ValueError(f"Invalid alpha value: {alpha}")
        if differentiable:
            raise NotImplementedError("RMSprop: differentiable=True is not supported")
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

    def step(self, closure=None):
        """One RMSprop update of every parameter that has a gradient."""
        loss = self._closure(closure)
        for group in self.param_groups:
            if group.get("differentiable"):
                raise NotImplementedError("RMSprop: differentiable=True is not supported")
            arena = self._prepare(group)
            lr = float(group["lr"])
            alpha = float(group["alpha"])
            eps = float(group["eps"])
            wd = float(group["weight_decay"])
            momentum = float(group["momentum"])
            centered = bool(group["centered"])
            use_m = momentum > 0.0
            sign = -1.0 if group["maximize"] else 1.0
            for b in arena.buckets:
                if not b.any_active:
                    continue
                t = b.dtype.type
                oma = t(1.0 - alpha)
                bufs = b.bufs
                v = bufs["square_avg"]
                backend_of(b.param).kernel("optim_adaptive", "rmsprop_step")(
                    b.param, b.grad, v, bufs["grad_avg"] if centered else v,
                    bufs["momentum_buffer"] if use_m else v,
                    b.blk_start, b.blk_end, b.blk_seg, b.active, b.steps,
                    t(-lr), t(alpha), oma, t(1) - oma, t(eps), t(wd), t(sign), t(momentum),
                    centered, use_m, abs(1.0 - alpha) < 0.5)
        return loss
