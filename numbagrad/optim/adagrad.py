"""Adagrad, each step one fused kernel over every parameter of a group
(``_adagrad_step_cpu`` in ``numbagrad/kernels/cpu/optim_adaptive.py``; the arena is
described in :mod:`numbagrad.optim.optimizer`). Numerically PyTorch's single-tensor
Adagrad: L2 weight decay added to the gradient, ``sum += g*g``, the per-parameter
decayed rate ``lr / (1 + (step-1)*lr_decay)``, ``eps`` added after the square root,
``maximize``. As in PyTorch, the state (``step = 0``, ``sum =
initial_accumulator_value``) is created in the constructor for every parameter."""
import numpy as np

from ..backend import backend_of
from ..tensor import Tensor
from .optimizer import Optimizer, _check_hyper

__all__ = ["Adagrad"]


class Adagrad(Optimizer):
    """Adagrad (``torch.optim.Adagrad``; Duchi, Hazan and Singer, 2011, "Adaptive
    Subgradient Methods for Online Learning and Stochastic Optimization").

    Per parameter with gradient ``g`` (``-g`` when maximizing), at step ``t``::

        g = g + weight_decay * p
        clr = lr / (1 + (t - 1) * lr_decay)
        s = s + g * g                                       # state['sum']
        p = p - clr * g / (sqrt(s) + eps)

    Parameters
    ----------
    lr : float, default 1e-2
    lr_decay : float, default 0
    weight_decay : float, default 0 (L2 penalty added to the gradient)
    initial_accumulator_value : float, default 0 (the starting value of ``sum``)
    eps : float, default 1e-10
    foreach : bool or None (accepted and ignored: every step is one fused kernel)
    maximize : bool, default False
    differentiable : bool, default False (True is not supported)
    fused : bool or None (accepted and ignored; ``fused=True`` with ``foreach=True`` or
        ``differentiable=True`` raises, as PyTorch)

    State per parameter: ``step`` (float32 0-d) and ``sum``, created by the constructor
    for every parameter (so ``state_dict()`` has them before the first step), as
    PyTorch. Parameters added later, or missing from a loaded state dict, get their state
    on their first step with a gradient, ``sum`` starting at the constructor's
    ``initial_accumulator_value`` (PyTorch reads it from ``defaults`` too).
    """

    _uses_step = True
    _state_names = ("sum",)

    def __init__(self, params, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0, eps=1e-10,
                 foreach=None, *, maximize=False, differentiable=False, fused=None):
        if fused:
            if differentiable:
                raise RuntimeError("`fused` does not support `differentiable`")
            if foreach:
                raise RuntimeError("`fused` and `foreach` cannot be `True` together.")
        _check_hyper("Adagrad", lr=lr, lr_decay=lr_decay, weight_decay=weight_decay,
                     initial_accumulator_value=initial_accumulator_value, eps=eps, differentiable=differentiable)
        defaults = dict(lr=lr, lr_decay=lr_decay, eps=eps, weight_decay=weight_decay,
                        initial_accumulator_value=initial_accumulator_value, foreach=foreach, maximize=maximize,
                        differentiable=differentiable, fused=fused)
        super().__init__(params, defaults)
        for group in self.param_groups:
            for p in group["params"]:
                st = self.state[p]
                st["step"] = Tensor._from_array(np.zeros((), np.float32))
                st["sum"] = Tensor._from_array(
                    backend_of(p.array).full(p.array.shape, initial_accumulator_value, p.array.dtype))

    def _initial_value(self, key):
        # parameters without state (added later, or missing from a loaded state dict)
        # start from the constructor's value, as torch (it reads ``defaults`` too)
        return self.defaults["initial_accumulator_value"]

    def _update_bucket(self, h, b, t):
        """One Adagrad update of bucket ``b`` (``h``: the group's hyperparameters)."""
        b.be.kernel("optim_adaptive", "adagrad_step")(
            b.param, b.grad, b.bufs["sum"], b.tables, b.steps, b.scal,
            (h.lr, float(h.group["lr_decay"]), t(h.eps), t(h.wd), t(h.sign)))
