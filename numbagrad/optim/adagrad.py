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
from .optimizer import Optimizer

__all__ = ["Adagrad"]


class Adagrad(Optimizer):
    """Adagrad (``torch.optim.Adagrad``; Duchi, Hazan and Singer, 2011).

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

    def __init__(self, params, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0, eps=1e-10,
                 foreach=None, *, maximize=False, differentiable=False, fused=None):
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= lr_decay:
            raise ValueError(f"Invalid lr_decay value: {lr_decay}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if not 0.0 <= initial_accumulator_value:
            raise ValueError(f"Invalid initial_accumulator_value value: {initial_accumulator_value}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if fused:
            if differentiable:
                raise RuntimeError("`fused` does not support `differentiable`")
            if foreach:
                raise RuntimeError("`fused` and `foreach` cannot be `True` together.")
        if differentiable:
            raise NotImplementedError("Adagrad: differentiable=True is not supported")
        defaults = dict(lr=lr, lr_decay=lr_decay, eps=eps, weight_decay=weight_decay,
                        initial_accumulator_value=initial_accumulator_value, foreach=foreach, maximize=maximize,
                        differentiable=differentiable, fused=fused)
        self._pending = {}
        super().__init__(params, defaults)
        for group in self.param_groups:
            for p in group["params"]:
                st = self.state[p]
                st["step"] = Tensor._from_array(np.zeros((), np.float32))
                st["sum"] = Tensor._from_array(
                    backend_of(p.data).full(p.data.shape, initial_accumulator_value, p.data.dtype))

    def _state_keys(self, group):
        return ("sum",)

    def load_state_dict(self, state_dict):
        super().load_state_dict(state_dict)
        self._pending = {}

    def __setstate__(self, state):
        super().__setstate__(state)
        self._pending = {}

    def _prepare_filled(self, group):
        """``_prepare``, then give ``sum`` its initial value in the arena slots of
        parameters whose state it has just created (their slots start at zero).

        The parameters without state are listed once per arena; while every parameter of
        the group has state (the usual case) this costs nothing per step."""
        key = id(group)
        before = self._arenas.get(key)
        cached = self._pending.get(key)
        if cached is not None and before is not None and cached[0] is before:
            pending = cached[1]
        else:
            pending = [p for p in group["params"] if not self.state.get(p)]
        arena = self._prepare(group)
        if pending:
            init = self.defaults["initial_accumulator_value"]
            left = []
            for p in pending:
                st = self.state.get(p)
                if st and "sum" in st:
                    st["sum"].data.fill(init)
                else:
                    left.append(p)
            pending = left
        self._pending[key] = (arena, pending)
        return arena

    def step(self, closure=None):
        """One Adagrad update of every parameter that has a gradient."""
        loss = self._closure(closure)
        for group in self.param_groups:
            if group.get("differentiable"):
                raise NotImplementedError("Adagrad: differentiable=True is not supported")
            arena = self._prepare_filled(group)
            lr = float(group["lr"])
            lr_decay = float(group["lr_decay"])
            eps = float(group["eps"])
            wd = float(group["weight_decay"])
            sign = -1.0 if group["maximize"] else 1.0
            for b in arena.buckets:
                if not b.any_active:
                    continue
                t = b.dtype.type
                backend_of(b.param).kernel("optim_adaptive", "adagrad_step")(
                    b.param, b.grad, b.bufs["sum"], b.blk_start, b.blk_end, b.blk_seg, b.active, b.steps, b.scal,
                    lr, lr_decay, t(eps), t(wd), t(sign))
        return loss
