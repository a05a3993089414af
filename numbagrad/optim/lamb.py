"""LAMB, each step one fused kernel over every parameter of a group (``_lamb_step_cpu`` in
``numbagrad/kernels/cpu/optim_lamb.py``; the arena is described in
:mod:`numbagrad.optim.optimizer`).

You et al. 2019, "Large Batch Optimization for Deep Learning: Training BERT in 76
minutes" (Algorithm 2), per parameter tensor ``p`` with gradient ``g`` at step ``t``::

    m = beta1 * m + (1 - beta1) * g
    v = beta2 * v + (1 - beta2) * g * g
    m_hat = m / (1 - beta1**t),  v_hat = v / (1 - beta2**t)
    r = m_hat / (sqrt(v_hat) + eps) + weight_decay * p
    p = p - lr * phi(||p||) / ||r|| * r

``torch.optim`` has no LAMB; the conventions are the PyTorch ecosystem's (timm's
``Lamb``, ``torch_optimizer.Lamb``, NVIDIA apex's ``FusedLAMB``): ``phi(x) = min(x,
clamp_value)`` (``torch_optimizer``'s ``clamp_value``, default 10), the trust ratio is 1
when ``||p||`` or ``||r||`` is 0, the bias corrections are ``m / bc1`` and ``sqrt(v) /
sqrt(bc2) + eps`` (timm), and the trust ratio is applied only to groups with a non-zero
weight decay unless ``always_adapt`` (timm's ``always_adapt``, apex's ``use_nvlamb``):
the usual recipe puts biases and normalisation weights in a group with
``weight_decay=0``, which then gets a plain Adam-style update. Note that with the
defaults (``weight_decay=0``, ``always_adapt=False``) the update is therefore Adam's
(with ``eps`` added to ``sqrt(v_hat)``); pass ``always_adapt=True`` for the paper's
layer-wise adaptation on every parameter.
"""
import math

import numpy as np

from ..backend import backend_of
from .optimizer import Optimizer

__all__ = ["Lamb"]


class Lamb(Optimizer):
    """LAMB: Adam moments with a per-tensor trust ratio (You et al. 2019).

    Parameters
    ----------
    lr : float, default 1e-3
    betas : (float, float), default (0.9, 0.999)
    eps : float, default 1e-6 (added to ``sqrt(v_hat)``)
    weight_decay : float, default 0 (added to the update: ``r += weight_decay * p``)
    bias_correction : bool, default True (divide the moments by ``1 - beta**step``)
    clamp_value : float or None, default 10 (upper clamp of ``||p||`` in the trust ratio;
        None: no clamp)
    always_adapt : bool, default False (apply the trust ratio even when
        ``weight_decay == 0``; when False such a group takes the unscaled update
        ``p -= lr * r``, as timm's ``Lamb`` and apex's ``FusedLAMB``)
    maximize : bool, default False

    State per parameter: ``step`` (float32 0-d tensor), ``exp_avg``, ``exp_avg_sq``.
    ``foreach`` and ``fused`` are accepted and ignored (the update is always fused);
    ``capturable`` is accepted (step counts already live with the parameters).
    """

    _uses_step = True

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-6, weight_decay=0, *, bias_correction=True,
                 clamp_value=10.0, always_adapt=False, maximize=False, foreach=None, capturable=False,
                 differentiable=False, fused=None):
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= betas[0] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
        if not 0.0 <= betas[1] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if clamp_value is not None and not clamp_value > 0.0:
            raise ValueError(f"Invalid clamp value: {clamp_value}")
        if differentiable:
            raise NotImplementedError("Lamb: differentiable=True is not supported")
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                        bias_correction=bias_correction, clamp_value=clamp_value, always_adapt=always_adapt,
                        maximize=maximize)
        super().__init__(params, defaults)

    def _state_keys(self, group):
        return ("exp_avg", "exp_avg_sq")

    def _scratch(self, arena, adapt):
        """Per bucket ``[update, blk_part]``: the scratch arena of the update ``r`` (only
        when the group adapts) and the float64 per-block partial sums. Not state: kept
        next to the arena and rebuilt with it."""
        cache = self.__dict__.setdefault("_lamb_scratch", {})
        key = id(arena.group)
        entry = cache.get(key)
        if entry is None or entry[0] is not arena:
            entry = cache[key] = (arena, [[None, b.be.zeros(2 * b.blk_start.size, np.float64)]
                                          for b in arena.buckets])
        if adapt:
            for b, sc in zip(arena.buckets, entry[1]):
                if sc[0] is None:
                    sc[0] = b.be.empty(b.param.size, b.dtype)
        return entry[1]

    def step(self, closure=None):
        """One LAMB update of every parameter that has a gradient."""
        loss = self._closure(closure)
        for group in self.param_groups:
            arena = self._prepare(group)
            lr = float(group["lr"])
            beta1, beta2 = (float(b) for b in group["betas"])
            eps = float(group["eps"])
            wd = float(group["weight_decay"])
            clamp = group["clamp_value"]
            clamp = math.inf if clamp is None else float(clamp)
            adapt = bool(group["always_adapt"]) or wd != 0.0
            bias_correction = bool(group["bias_correction"])
            sign = -1.0 if group["maximize"] else 1.0
            scratch = self._scratch(arena, adapt)
            for b, (upd, part) in zip(arena.buckets, scratch):
                if not b.any_active:
                    continue
                t = b.dtype.type
                omb1 = t(1.0 - beta1)
                bufs = b.bufs
                backend_of(b.param).kernel("optim_lamb", "lamb_step")(
                    b.param, b.grad, bufs["exp_avg"], bufs["exp_avg_sq"], upd if adapt else b.grad,
                    b.blk_start, b.blk_end, b.blk_seg, b.active, b.steps, b.scal, part,
                    lr, beta1, beta2, omb1, t(1) - omb1, t(beta2), t(1.0 - beta2), t(eps), t(wd), t(sign), clamp,
                    bias_correction, adapt, abs(1.0 - beta1) < 0.5)
        return loss
