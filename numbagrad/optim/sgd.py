"""Stochastic gradient descent, each step one fused kernel over every parameter of a
group (``_sgd_step_cpu`` in ``numbagrad/kernels/cpu/optim.py``). Numerically PyTorch's
single-tensor SGD: weight decay added to the gradient, momentum buffer initialised to
the first gradient then ``momentum*buf + (1-dampening)*g``, Nesterov's look-ahead,
``maximize``."""
from ..backend import backend_of
from .optimizer import Optimizer, required  # noqa: F401

__all__ = ["SGD"]


class SGD(Optimizer):
    """SGD with optional momentum (``torch.optim.SGD``).

    Parameters
    ----------
    lr : float, default 1e-3
    momentum : float, default 0
    dampening : float, default 0
    weight_decay : float, default 0
    nesterov : bool, default False (needs momentum > 0 and dampening 0)
    maximize : bool, default False
    """

    _flag_key = "momentum_buffer"

    def __init__(self, params, lr=1e-3, momentum=0, dampening=0, weight_decay=0, nesterov=False, *,
                 maximize=False, foreach=None, differentiable=False, fused=None):
        if lr is not required and lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        if differentiable:
            raise NotImplementedError("SGD: differentiable=True (autograd through the update) is not supported; "
                                      "the update is a fused in-place kernel")
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                        nesterov=nesterov, maximize=maximize)
        super().__init__(params, defaults)

    def _state_keys(self, group):
        return ("momentum_buffer",) if group["momentum"] != 0 else ()

    def step(self, closure=None):
        """One SGD update of every parameter that has a gradient."""
        loss = self._closure(closure)
        for group in self.param_groups:
            arena = self._prepare(group)
            lr = float(group["lr"])
            momentum = float(group["momentum"])
            dampening = float(group["dampening"])
            wd = float(group["weight_decay"])
            nesterov = bool(group["nesterov"])
            sign = -1.0 if group["maximize"] else 1.0
            use_m = momentum != 0.0
            for b in arena.buckets:
                if not b.any_active:
                    continue
                t = b.dtype.type
                buf = b.bufs["momentum_buffer"] if use_m else b.grad
                backend_of(b.param).kernel("optim", "sgd_step")(
                    b.param, b.grad, buf, b.blk_start, b.blk_end, b.blk_seg, b.active, b.flags,
                    t(-lr), t(momentum), t(1.0 - dampening), t(wd), t(sign), use_m, nesterov)
        return loss
