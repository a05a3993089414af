"""Adadelta, each step one fused kernel over every parameter of a group
(``_adadelta_step_cpu`` in ``numbagrad/kernels/cpu/optim_adaptive.py``; the arena is
described in :mod:`numbagrad.optim.optimizer`). Numerically PyTorch's single-tensor
Adadelta: L2 weight decay added to the gradient, running averages of squared gradients
and squared updates, ``delta = sqrt(acc_delta + eps) / sqrt(square_avg + eps) * g``,
``p -= lr * delta``, ``maximize``."""
from .optimizer import Optimizer, _check_hyper

__all__ = ["Adadelta"]


class Adadelta(Optimizer):
    """Adadelta (``torch.optim.Adadelta``; Zeiler, 2012, "ADADELTA: An Adaptive Learning
    Rate Method").

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
    _state_names = ("square_avg", "acc_delta")

    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, foreach=None, *, capturable=False,
                 maximize=False, differentiable=False):
        _check_hyper("Adadelta", lr=lr, rho=rho, eps=eps, weight_decay=weight_decay, unit=("rho",),
                     differentiable=differentiable)
        defaults = dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay, maximize=maximize,
                        capturable=capturable, foreach=foreach, differentiable=differentiable)
        super().__init__(params, defaults)

    def _update_bucket(self, h, b, t):
        """One Adadelta update of bucket ``b`` (``h``: the group's hyperparameters)."""
        rho = float(h.group["rho"])
        b.be.kernel("optim_adaptive", "adadelta_step")(
            b.param, b.grad, b.bufs["square_avg"], b.bufs["acc_delta"], b.tables, b.steps,
            (t(-h.lr), t(rho), t(1.0 - rho), t(h.eps), t(h.wd), t(h.sign)))
