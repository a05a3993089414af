"""NAdam, each step one fused kernel over every parameter of a group
(``_nadam_step_cpu`` in ``numbagrad/kernels/cpu/optim_adamx.py``; the arena is described
in :mod:`numbagrad.optim.optimizer`). Numerically PyTorch's single-tensor NAdam: Adam's
moments with Nesterov momentum and the momentum schedule
``mu_t = beta1 * (1 - 0.5 * 0.96**(t * momentum_decay))``, the running product of the
``mu_t`` kept per parameter (``state['mu_product']``, 0-d float32 as in torch), L2 or
decoupled weight decay, ``maximize``.

``mu_product`` lives in a per-bucket float32 array owned by this optimizer (like the
arena's step counts); ``state[p]['mu_product']`` is a 0-d view into it, so
``state_dict()`` has torch's layout and ``load_state_dict`` of a torch NAdam state
carries the products over."""
import numpy as np

from ..backend import backend_of
from ..tensor import Tensor
from .adamax import _check_common
from .optimizer import Optimizer
from .radam import _scratch_dtype, bucket_extras

__all__ = ["NAdam"]


def _scalar_value(v):
    if isinstance(v, Tensor):
        return float(v.item())
    if hasattr(v, "item"):
        return float(v.item())
    return float(np.asarray(v))


class _NAdamExtras:
    """A bucket's ``mu_product`` (float32 per parameter) and scalar scratch, and the
    parameters whose state does not show ``mu_product`` yet."""

    __slots__ = ("mu", "views", "scratch", "pending")

    def __init__(self, b, state):
        n = len(b.params)
        host = np.ones(n, np.float32)
        for i, p in enumerate(b.params):
            st = state.get(p)
            if st and st.get("mu_product") is not None:
                host[i] = _scalar_value(st["mu_product"])
        self.mu = host if b.be.name == "cpu" else b.be.asarray(host)
        self.views = [Tensor._from_array(self.mu[i:i + 1].reshape(())) for i in range(n)]
        self.scratch = b.be.zeros(3 * n, _scratch_dtype(b.dtype))
        self.pending = []
        for i, p in enumerate(b.params):
            st = state.get(p)
            if st and "mu_product" in st:
                st["mu_product"] = self.views[i]  # same key position, now a view
            else:
                self.pending.append(i)

    def publish(self, b, state):
        """Give parameters whose state was just created their ``mu_product`` view, in
        torch's key order (step, mu_product, exp_avg, exp_avg_sq)."""
        still = []
        for i in self.pending:
            if not b.populated[i]:
                still.append(i)
                continue
            st = state[b.params[i]]
            if "mu_product" not in st:
                items = [(k, v) for k, v in st.items() if k != "step"]
                step = st.get("step")
                st.clear()
                if step is not None:
                    st["step"] = step
                st["mu_product"] = self.views[i]
                st.update(items)
        self.pending = still


class NAdam(Optimizer):
    """NAdam, Adam with Nesterov momentum (``torch.optim.NAdam``; Dozat, 2016,
    "Incorporating Nesterov Momentum into Adam").

    Parameters
    ----------
    lr : float, default 2e-3
    betas : (float, float), default (0.9, 0.999)
    eps : float, default 1e-8
    weight_decay : float, default 0
    momentum_decay : float, default 4e-3 (``psi`` of the momentum schedule)
    decoupled_weight_decay : bool, default False (True: parameters are first scaled by
        ``1 - lr * weight_decay``, NAdamW; False: L2 penalty added to the gradient)
    foreach : accepted and ignored (every step is one fused kernel)
    maximize : bool, default False
    capturable : accepted; step counts and ``mu_product`` already live beside the
        parameters, the arithmetic is the non-capturable one
    differentiable : must be False (``NotImplementedError`` otherwise)

    State per parameter (PyTorch's names and order): ``step`` (0-d float32),
    ``mu_product`` (0-d float32), ``exp_avg``, ``exp_avg_sq``.
    """

    _uses_step = True

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, momentum_decay=4e-3,
                 decoupled_weight_decay=False, *, foreach=None, maximize=False, capturable=False,
                 differentiable=False):
        _check_common(lr, betas, eps, weight_decay, differentiable, "NAdam")
        if not 0.0 <= momentum_decay:
            raise ValueError(f"Invalid momentum_decay value: {momentum_decay}")
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                        momentum_decay=momentum_decay, decoupled_weight_decay=decoupled_weight_decay,
                        maximize=maximize, foreach=foreach, capturable=capturable, differentiable=differentiable)
        super().__init__(params, defaults)

    def _state_keys(self, group):
        return ("exp_avg", "exp_avg_sq")

    def step(self, closure=None):
        """One NAdam update of every parameter that has a gradient."""
        loss = self._closure(closure)
        state = self.state
        for group in self.param_groups:
            arena = self._prepare(group)
            extras = bucket_extras(self, arena, lambda b: _NAdamExtras(b, state))
            lr = float(group["lr"])
            beta1, beta2 = (float(b) for b in group["betas"])
            eps = float(group["eps"])
            wd = float(group["weight_decay"])
            md = float(group["momentum_decay"])
            decoupled = bool(group.get("decoupled_weight_decay", False))
            sign = -1.0 if group.get("maximize", False) else 1.0
            for b, ex in zip(arena.buckets, extras):
                if ex.pending:
                    ex.publish(b, state)
                if not b.any_active:
                    continue
                t = b.dtype.type
                omb1 = t(1.0 - beta1)
                backend_of(b.param).kernel("optim_adamx", "nadam_step")(
                    b.param, b.grad, b.bufs["exp_avg"], b.bufs["exp_avg_sq"],
                    b.blk_start, b.blk_end, b.blk_seg, b.active, b.steps, ex.mu, ex.scratch,
                    lr, beta1, beta2, md, omb1, t(1) - omb1, t(beta2), t(1.0 - beta2), t(eps),
                    t(0.0 if decoupled else wd), t(1.0 - lr * wd if decoupled else 1.0), t(sign),
                    abs(1.0 - beta1) < 0.5)
        return loss
