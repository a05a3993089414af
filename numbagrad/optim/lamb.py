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

from .optimizer import Optimizer, _check_hyper

__all__ = ["Lamb"]


class Lamb(Optimizer):
    """LAMB: Adam moments with a per-tensor trust ratio (You et al., 2019, "Large Batch
    Optimization for Deep Learning: Training BERT in 76 minutes").

    Per parameter ``p`` with gradient ``g`` (``-g`` when maximizing), at its step ``t``
    (``bc1 = 1 - beta1**t``, ``bc2 = 1 - beta2**t``, both 1 without ``bias_correction``)::

        m = beta1 * m + (1 - beta1) * g                      # state['exp_avg']
        v = beta2 * v + (1 - beta2) * g * g                  # state['exp_avg_sq']
        r = (m / bc1) / (sqrt(v) / sqrt(bc2) + eps) + weight_decay * p
        if weight_decay != 0 or always_adapt:
            w = min(||p||, clamp_value)                      # ||.||: the tensor's 2-norm
            trust = w / ||r||  if w > 0 and ||r|| > 0  else 1
        else:
            trust = 1
        p = p - lr * trust * r

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
    _state_names = ("exp_avg", "exp_avg_sq")

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-6, weight_decay=0, *, bias_correction=True,
                 clamp_value=10.0, always_adapt=False, maximize=False, foreach=None, capturable=False,
                 differentiable=False, fused=None):
        _check_hyper("Lamb", lr=lr, eps=eps, betas=betas, weight_decay=weight_decay)
        if clamp_value is not None and not clamp_value > 0.0:
            raise ValueError(f"Invalid clamp value: {clamp_value}")
        _check_hyper("Lamb", differentiable=differentiable)
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                        bias_correction=bias_correction, clamp_value=clamp_value, always_adapt=always_adapt,
                        maximize=maximize)
        super().__init__(params, defaults)

    def _update_bucket(self, h, b, t):
        """One LAMB update of bucket ``b`` (``h``: the group's hyperparameters)."""
        group = h.group
        clamp = group["clamp_value"]
        adapt = bool(group["always_adapt"]) or h.wd != 0.0
        # work arrays, not state: the float64 per-block partial sums, and the update r
        # (only when the group adapts)
        part = b.scratch("blk_part", 2 * b.blk_start.size, np.float64)
        b.be.kernel("optim_lamb", "lamb_step")(
            b.param, b.grad, b.bufs["exp_avg"], b.bufs["exp_avg_sq"],
            b.scratch("update", b.param.size, b.dtype) if adapt else b.grad, b.tables, b.steps, b.scal, part,
            (h.lr, h.beta1, h.beta2, *h.moments(t), t(h.eps), t(h.wd), t(h.sign),
             math.inf if clamp is None else float(clamp), bool(group["bias_correction"]), adapt, h.lerp_small))
