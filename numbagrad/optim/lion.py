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
from .optimizer import Optimizer, _check_hyper

__all__ = ["Lion"]


class Lion(Optimizer):
    """Lion: the sign of an interpolated momentum (Chen et al., 2023, "Symbolic Discovery
    of Optimization Algorithms").

    Per parameter ``p`` with gradient ``g`` (``-g`` when maximizing)::

        c = beta1 * m + (1 - beta1) * g
        p = p * (1 - lr * weight_decay) - lr * sign(c)       # sign(0) = 0
        m = beta2 * m + (1 - beta2) * g                      # state['exp_avg']

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
    _state_names = ("exp_avg",)

    def __init__(self, params, lr=1e-4, betas=(0.9, 0.99), weight_decay=0, *, maximize=False, foreach=None,
                 capturable=False, differentiable=False, fused=None):
        _check_hyper("Lion", lr=lr, betas=betas, weight_decay=weight_decay, closed_betas=True,
                     differentiable=differentiable)
        defaults = dict(lr=lr, betas=tuple(betas), weight_decay=weight_decay, maximize=maximize)
        super().__init__(params, defaults)

    def _update_bucket(self, h, b, t):
        """One Lion update of bucket ``b`` (``h``: the group's hyperparameters)."""
        b.be.kernel("optim_lamb", "lion_step")(
            b.param, b.grad, b.bufs["exp_avg"], b.tables, b.steps,
            (t(-h.lr), t(h.beta1), t(1.0 - h.beta1), t(h.beta2), t(1.0 - h.beta2), t(1.0 - h.lr * h.wd), t(h.sign)))
