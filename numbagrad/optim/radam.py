"""RAdam, each step one fused kernel over every parameter of a group
(``_radam_step_cpu`` in ``numbagrad/kernels/cpu/optim_adamx.py``; the arena is described
in :mod:`numbagrad.optim.optimizer`). Numerically PyTorch's single-tensor RAdam: Adam's
moments, and per parameter, from its own ``state['step']``, the variance rectification
term and the ``rho_t > 5`` switch between the adaptive and the plain (SGD with
momentum) update; L2 or decoupled weight decay, ``maximize``."""
import numpy as np

from ..backend import backend_of
from .adamax import _check_common
from .optimizer import Optimizer

__all__ = ["RAdam"]


def _scratch_dtype(dtype):
    """Per-parameter scalars are kept in float64 for float64 arenas, else float32."""
    return np.float64 if np.dtype(dtype) == np.float64 else np.float32


def bucket_extras(opt, arena, build):
    """Per-bucket arrays an optimizer keeps beside its arena: ``build(bucket)`` for each
    bucket of ``arena``, rebuilt whenever the arena is (a new arena object). Not part
    of the pickled state (``Optimizer.__getstate__``)."""
    cache = opt.__dict__.setdefault("_extras", {})
    key = id(arena.group)
    entry = cache.get(key)
    if entry is None or entry[0] is not arena:
        entry = cache[key] = (arena, [build(b) for b in arena.buckets])
    return entry[1]


class RAdam(Optimizer):
    """Rectified Adam (``torch.optim.RAdam``; Liu et al., 2019, "On the Variance of the
    Adaptive Learning Rate and Beyond").

    Parameters
    ----------
    lr : float, default 1e-3
    betas : (float, float), default (0.9, 0.999)
    eps : float, default 1e-8
    weight_decay : float, default 0
    decoupled_weight_decay : bool, default False (True: parameters are first scaled by
        ``1 - lr * weight_decay``, as AdamW; False: L2 penalty added to the gradient)
    foreach : accepted and ignored (every step is one fused kernel)
    maximize : bool, default False
    capturable : accepted; step counts already live beside the parameters, the
        arithmetic is the non-capturable one
    differentiable : must be False (``NotImplementedError`` otherwise)

    State per parameter (PyTorch's names): ``step`` (0-d float32), ``exp_avg``,
    ``exp_avg_sq``. A parameter's first steps (``rho_t <= 5``, the first 5 with the
    default betas) use the un-adapted update ``p -= lr * exp_avg / (1 - beta1**step)``.
    """

    _uses_step = True

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 decoupled_weight_decay=False, *, foreach=None, maximize=False, capturable=False,
                 differentiable=False):
        _check_common(lr, betas, eps, weight_decay, differentiable, "RAdam")
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay, maximize=maximize,
                        foreach=foreach, capturable=capturable, decoupled_weight_decay=decoupled_weight_decay,
                        differentiable=differentiable)
        super().__init__(params, defaults)

    def _state_keys(self, group):
        return ("exp_avg", "exp_avg_sq")

    @staticmethod
    def _scratch(b):
        # [bc1, sqrt(bc2), rect] per parameter (the arena's own ``scal`` holds two)
        return b.be.zeros(3 * len(b.params), _scratch_dtype(b.dtype))

    def step(self, closure=None):
        """One RAdam update of every parameter that has a gradient."""
        loss = self._closure(closure)
        for group in self.param_groups:
            arena = self._prepare(group)
            scratch = bucket_extras(self, arena, self._scratch)
            lr = float(group["lr"])
            beta1, beta2 = (float(b) for b in group["betas"])
            eps = float(group["eps"])
            wd = float(group["weight_decay"])
            decoupled = bool(group.get("decoupled_weight_decay", False))
            sign = -1.0 if group.get("maximize", False) else 1.0
            for b, seg in zip(arena.buckets, scratch):
                if not b.any_active:
                    continue
                t = b.dtype.type
                omb1 = t(1.0 - beta1)
                backend_of(b.param).kernel("optim_adamx", "radam_step")(
                    b.param, b.grad, b.bufs["exp_avg"], b.bufs["exp_avg_sq"],
                    b.blk_start, b.blk_end, b.blk_seg, b.active, b.steps, seg,
                    beta1, beta2, t(lr), omb1, t(1) - omb1, t(beta2), t(1.0 - beta2), t(eps),
                    t(0.0 if decoupled else wd), t(1.0 - lr * wd if decoupled else 1.0), t(sign),
                    abs(1.0 - beta1) < 0.5)
        return loss
