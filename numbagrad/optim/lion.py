"""Lion, each step one fused kernel over every parameter of a group (``_lion_step_cpu`` in
``numbagrad/kernels/cpu/optim_lamb.py``; the arena is described in
:mod:`numbagrad.optim.optimizer`).

Chen et al. 2023, "Symbolic Discovery of Optimization Algorithms" (Algorithm 2), per
parameter with gradient ``g``::

    c = beta1 * m + (1 - beta1) * g
    p = p * (1 - lr * weight_decay)          # decoupled weight decay
    p = p - lr * sign(c)
    m = beta2 * m + (1 - beta2) * g

``torch.optim`` has no Lion; the conventions are the PyTorch ecosystem's (lucidrains'
``lion-pytorch``, timm's ``Lion``): defaults ``lr=1e-4``, ``betas=(0.9, 0.99)``, the
decay applied before the signed step, ``sign(0) = 0``. One departure: a NaN in ``c``
gives a NaN update (``torch.sign(nan)`` is 0, which would silently freeze the element).
"""
from ..backend import backend_of
from .optimizer import Optimizer

__all__ = ["Lion"]


class Lion(Optimizer):
    """Lion: the sign of an interpolated momentum (Chen et al. 2023).

    Parameters
    ----------
    lr : float, default 1e-4 (usually 3-10x smaller than AdamW's)
    betas : (float, float), default (0.9, 0.99) (``beta1`` interpolates the update,
        ``beta2`` the momentum; each in [0, 1])
    weight_decay : float, default 0 (decoupled: ``p *= 1 - lr * weight_decay``)
    maximize : bool, default False

    State per parameter: ``exp_avg``, and ``step`` (float32 0-d tensor, bookkeeping
    only, as Adam's). ``foreach`` and ``fused`` are accepted and ignored (the update is
    always fused); ``capturable`` is accepted.
    """

    _uses_step = True

    def __init__(self, params, lr=1e-4, betas=(0.9, 0.99), weight_decay=0, *, maximize=False, foreach=None,
                 capturable=False, differentiable=False, fused=None):
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= betas[0] <= 1.0:
            raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
        if not 0.0 <= betas[1] <= 1.0:
            raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if differentiable:
            raise NotImplementedError("Lion: differentiable=True is not supported")
        defaults = dict(lr=lr, betas=tuple(betas), weight_decay=weight_decay, maximize=maximize)
        super().__init__(params, defaults)

    def _state_keys(self, group):
        return ("exp_avg",)

    def step(self, closure=None):
        """One Lion update of every parameter that has a gradient."""
        loss = self._closure(closure)
        for group in self.param_groups:
            arena = self._prepare(group)
            lr = float(group["lr"])
            beta1, beta2 = (float(b) for b in group["betas"])
            wd = float(group["weight_decay"])
            sign = -1.0 if group["maximize"] else 1.0
            for b in arena.buckets:
                if not b.any_active:
                    continue
                t = b.dtype.type
                backend_of(b.param).kernel("optim_lamb", "lion_step")(
                    b.param, b.grad, b.bufs["exp_avg"], b.blk_start, b.blk_end, b.blk_seg, b.active, b.steps,
                    t(-lr), t(beta1), t(1.0 - beta1), t(beta2), t(1.0 - beta2), t(1.0 - lr * wd), t(sign))
        return loss
