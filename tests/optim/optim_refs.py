"""Float64 NumPy references of LAMB and Lion, written from the papers' formulas (not from
the kernels), and the ``torch.optim.Optimizer`` adapters (``_RefLamb``, ``_RefLion``) that
let ``optimkit.run_parity`` drive them: they keep float64 master copies and write them back
to the torch parameters, so the harness and its torch-side state dicts are the usual ones.
Neither optimizer is in ``torch.optim``; ``optimkit.OPTIMIZERS`` names these as their oracle."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")


def _ref_lamb(p, g, m, v, t, lr, betas, eps, weight_decay, bias_correction, clamp_value, always_adapt,
              maximize):
    """One LAMB step (You et al. 2019, Algorithm 2) of one tensor; returns (p, m, v)."""
    beta1, beta2 = betas
    if maximize:
        g = -g
    m = beta1 * m + (1 - beta1) * g
    v = beta2 * v + (1 - beta2) * g * g
    if bias_correction:
        m_hat, v_hat = m / (1 - beta1 ** t), v / (1 - beta2 ** t)
    else:
        m_hat, v_hat = m, v
    r = m_hat / (np.sqrt(v_hat) + eps) + weight_decay * p
    trust = 1.0
    if weight_decay != 0 or always_adapt:
        w_norm = np.sqrt(np.sum(p * p))
        if clamp_value is not None:
            w_norm = min(w_norm, clamp_value)
        r_norm = np.sqrt(np.sum(r * r))
        if w_norm > 0 and r_norm > 0:
            trust = w_norm / r_norm
    return p - lr * trust * r, m, v


def _ref_lion(p, g, m, lr, betas, weight_decay, maximize):
    """One Lion step (Chen et al. 2023, Algorithm 2) of one tensor; returns (p, m)."""
    beta1, beta2 = betas
    if maximize:
        g = -g
    c = beta1 * m + (1 - beta1) * g
    p = p * (1 - lr * weight_decay) - lr * np.sign(c)
    return p, beta2 * m + (1 - beta2) * g


class _Ref(torch.optim.Optimizer):
    """A torch-side optimizer running the NumPy reference in float64 (master copies of the
    parameters and moments), so ``optimkit.run_parity`` can drive it. Its state has the
    layout of a PyTorch implementation: ``step`` (float32 0-d), then the moments in the
    parameter dtype."""

    KEYS = ()

    def __init__(self, params, **kw):
        super().__init__(params, dict(self.DEFAULTS, **kw))
        self.master = {}

    def step(self, closure=None):
        for group in self.param_groups:
            hp = {k: v for k, v in group.items() if k != "params"}
            for p in group["params"]:
                if p.grad is None:
                    continue
                st = self.state[p]
                if not st:
                    st["step"] = torch.tensor(0.0)
                    for k in self.KEYS:
                        st[k] = torch.zeros_like(p)
                if p not in self.master:
                    self.master[p] = [p.detach().double().numpy().copy()] + [st[k].double().numpy().copy()
                                                                            for k in self.KEYS]
                st["step"] += 1
                out = self.update(self.master[p], p.grad.double().numpy(), st["step"].item(), hp)
                self.master[p] = list(out)
                with torch.no_grad():
                    p.copy_(torch.as_tensor(np.asarray(out[0])))
                    for k, a in zip(self.KEYS, out[1:]):
                        st[k].copy_(torch.as_tensor(np.asarray(a)))


class _RefLamb(_Ref):
    KEYS = ("exp_avg", "exp_avg_sq")
    DEFAULTS = dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-6, weight_decay=0, bias_correction=True, clamp_value=10.0,
                    always_adapt=False, maximize=False)

    @staticmethod
    def update(state, g, t, hp):
        p, m, v = state
        return _ref_lamb(p, g, m, v, t, **hp)


class _RefLion(_Ref):
    KEYS = ("exp_avg",)
    DEFAULTS = dict(lr=1e-4, betas=(0.9, 0.99), weight_decay=0, maximize=False)

    @staticmethod
    def update(state, g, t, hp):
        p, m = state
        return _ref_lion(p, g, m, **hp)
