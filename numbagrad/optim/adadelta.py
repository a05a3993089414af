"""Adadelta, each step one fused kernel over every parameter of a group
(``_adadelta_step_cpu`` in ``numbagrad/kernels/cpu/optim_adaptive.py``; the arena is
described in :mod:`numbagrad.optim.optimizer`). Numerically PyTorch's single-tensor
Adadelta: L2 weight decay added to the gradient, running averages of squared gradients
and squared updates, ``delta = sqrt(acc_delta + eps) / sqrt(square_avg + eps) * g``,
``p -= lr * delta``, ``maximize``."""
from ..backend import backend_of
from .optimizer import Optimizer

__all__ = ["Adadelta"]


class Adadelta(Optimizer):
    """Adadelta (``torch.optim.Adadelta``; Zeiler, 2012).

    Per parameter with gradient ``g`` (``-g`` when maximizing)::

        g = g + weight_decay * p
        v = rho * v + (1 - rho) * g * g                     # state['square_avg']
        delta = sqrt(u + eps) / sqrt(v + eps) * g
        u = rho * u + (1 - rho) * delta * delta             # state['acc_delta']
        p = p - lr * delta

    Parameters
    ----------
    lr : float, default 1.0 (scales ``delta``)
    rho : float, default 0.9 (in [0, 1])
    eps : float, default 1e-6
    weight_decay : float, default 0 (L2 penalty added to the gradient)
    foreach : bool or None (accepted and ignored: every step is one fused kernel)
    capturable : bool, default False (accepted; step counts already live with the
        parameters)
    maximize : bool, default False
    differentiable : bool, default False (True is not supported)

    State per parameter: ``step`` (float32 0-d), ``square_avg``, ``acc_delta``, as
    PyTorch.
    """

    _uses_step = True

    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, foreach=None, *, capturable=False,
                 maximize=False, differentiable=False):
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= rho <= 1.0:
            raise ValueError(f"Invalid rho value: {rho}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if differentiable:
            raise NotImplementedError("Adadelta: differentiable=True is not supported")
        defaults = dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay, maximize=maximize,
                        capturable=capturable, foreach=foreach, differentiable=differentiable)
        super().__init__(params, defaults)

    def _state_keys(self, group):
        return ("square_avg", "acc_delta")

    def step(self, closure=None):
        """One Adadelta update of every parameter that has a gradient."""
        loss = self._closure(closure)
        for group in self.param_groups:
            if group.get("differentiable"):
                raise NotImplementedError("Adadelta: differentiable=True is not supported")
            arena = self._prepare(group)
            lr = float(group["lr"])
            rho = float(group["rho"])
            eps = float(group["eps"])
            wd = float(group["weight_decay"])
            sign = -1.0 if group["maximize"] else 1.0
            for b in arena.buckets:
                if not b.any_active:
                    continue
                t = b.dtype.type
                bufs = b.bufs
                backend_of(b.param).kernel("optim_adaptive", "adadelta_step")(
                    b.param, b.grad, bufs["square_avg"], bufs["acc_delta"],
                    b.blk_start, b.blk_end, b.blk_seg, b.active, b.steps,
                    t(-lr), t(rho), t(1.0 - rho), t(eps), t(wd), t(sign))
        return loss
