"""``Gamma``, ``Beta``: distributions with log-gamma normalisers (``log_prob``, ``entropy``
and moments; ``sample`` draws with Marsaglia and Tsang's method from numbagrad's
generator, but has no reparameterised gradient)."""
import numpy as np

from . import _ng as ng

from . import constraints
from .distribution import Distribution
from .utils import broadcast_all

__all__ = ["Gamma", "Beta"]


def _standard_gamma(alpha, shape):
    """Gamma(α, 1) draws of ``shape`` (α broadcast to it), without gradients.

    Marsaglia & Tsang (2000), "A simple method for generating gamma variables": for α ≥ 1,
    d = α - 1/3, c = 1/√(9d), accept d v with v = (1 + c z)³ when
    log u < z²/2 + d - d v + d log v; for α < 1 draw Gamma(α + 1) and scale by u^(1/α).
    The rejection loop redraws only the rejected entries, with numbagrad.randn/rand.
    """
    a = alpha.detach().expand(shape).cpu().numpy().astype(np.float64)
    boost = a < 1
    d = a + boost - 1.0 / 3.0
    c = 1.0 / np.sqrt(9.0 * d)
    out = np.empty(a.shape)
    todo = np.ones(a.shape, dtype=bool)
    while todo.any():
        idx = np.flatnonzero(todo)
        z = ng.randn(idx.size, dtype=ng.float64).numpy()
        u = ng.rand(idx.size, dtype=ng.float64).numpy()
        dk, ck = d.reshape(-1)[idx], c.reshape(-1)[idx]
        v = (1 + ck * z) ** 3
        logv = np.log(np.where(v > 0, v, 1.0))
        ok = (v > 0) & (np.log1p(-u) < 0.5 * z * z + dk - dk * v + dk * logv)  # 1 - u is in (0, 1]
        out.reshape(-1)[idx[ok]] = (dk * v)[ok]
        todo.reshape(-1)[idx[ok]] = False
    if boost.any():
        u = 1.0 - ng.rand(a.shape, dtype=ng.float64).numpy()  # in (0, 1]
        out = np.where(boost, out * u ** (1.0 / np.where(boost, a, 1.0)), out)
    return ng.tensor(out, dtype=alpha.dtype, device=alpha.device)


class Gamma(Distribution):
    """The gamma distribution with shape ``concentration`` (α) and ``rate`` (β):
    density β^α x^(α-1) e^(-βx) / Γ(α) on x > 0.

    Parameters
    ----------
    concentration, rate : float or Tensor
        Positive.
    validate_args : bool, optional
    """
    arg_constraints = {"concentration": constraints.positive, "rate": constraints.positive}
    support = constraints.nonnegative

    def __init__(self, concentration, rate, validate_args=None):
        self.concentration, self.rate = broadcast_all(concentration, rate)
        super().__init__(self.concentration.shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        """This distribution with its parameters expanded to ``batch_shape``."""
        new = self._get_checked_instance(Gamma, _instance)
        batch_shape = tuple(batch_shape)
        new.concentration = self.concentration.expand(batch_shape)
        new.rate = self.rate.expand(batch_shape)
        Distribution.__init__(new, batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self):
        """α / β."""
        return self.concentration / self.rate

    @property
    def mode(self):
        """(α - 1) / β, clamped at 0."""
        return ((self.concentration - 1) / self.rate).clamp(min=0)

    @property
    def variance(self):
        """α / β²."""
        return self.concentration / self.rate.pow(2)

    def sample(self, sample_shape=()):
        """Gamma draws of shape ``sample_shape + batch_shape`` (no gradient)."""
        shape = self._extended_shape(sample_shape)
        return _standard_gamma(self.concentration, shape) / self.rate.detach()

    def log_prob(self, value):
        """α log β + (α - 1) log x - β x - log Γ(α)."""
        if self._validate_args:
            self._validate_sample(value)
        a, b = self.concentration, self.rate
        return ng.xlogy(a, b) + ng.xlogy(a - 1, value) - b * value - ng.lgamma(a)

    def entropy(self):
        """α - log β + log Γ(α) + (1 - α) ψ(α)."""
        a = self.concentration
        return a - self.rate.log() + ng.lgamma(a) + (1.0 - a) * ng.digamma(a)


class Beta(Distribution):
    """The beta distribution on [0, 1] with ``concentration1`` (α) and ``concentration0``
    (β): density x^(α-1) (1-x)^(β-1) / B(α, β).

    Parameters
    ----------
    concentration1, concentration0 : float or Tensor
        Positive.
    validate_args : bool, optional
    """
    arg_constraints = {"concentration1": constraints.positive, "concentration0": constraints.positive}
    support = constraints.unit_interval

    def __init__(self, concentration1, concentration0, validate_args=None):
        self.concentration1, self.concentration0 = broadcast_all(concentration1, concentration0)
        super().__init__(self.concentration1.shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        """This distribution with its parameters expanded to ``batch_shape``."""
        new = self._get_checked_instance(Beta, _instance)
        batch_shape = tuple(batch_shape)
        new.concentration1 = self.concentration1.expand(batch_shape)
        new.concentration0 = self.concentration0.expand(batch_shape)
        Distribution.__init__(new, batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def _lbeta(self):
        a, b = self.concentration1, self.concentration0
        return ng.lgamma(a) + ng.lgamma(b) - ng.lgamma(a + b)

    @property
    def mean(self):
        """α / (α + β)."""
        return self.concentration1 / (self.concentration1 + self.concentration0)

    @property
    def variance(self):
        """α β / ((α + β)² (α + β + 1))."""
        total = self.concentration1 + self.concentration0
        return self.concentration1 * self.concentration0 / (total.pow(2) * (total + 1))

    def sample(self, sample_shape=()):
        """X / (X + Y) with X ~ Gamma(α), Y ~ Gamma(β) (no gradient)."""
        shape = self._extended_shape(sample_shape)
        x = _standard_gamma(self.concentration1, shape)
        y = _standard_gamma(self.concentration0, shape)
        return x / (x + y)

    def log_prob(self, value):
        """(α - 1) log x + (β - 1) log(1 - x) - log B(α, β)."""
        if self._validate_args:
            self._validate_sample(value)
        a, b = self.concentration1, self.concentration0
        return ng.xlogy(a - 1, value) + ng.xlogy(b - 1, 1 - value) - self._lbeta()

    def entropy(self):
        """log B(α, β) - (α - 1) ψ(α) - (β - 1) ψ(β) + (α + β - 2) ψ(α + β)."""
        a, b = self.concentration1, self.concentration0
        return (self._lbeta() - (a - 1) * ng.digamma(a) - (b - 1) * ng.digamma(b)
                + (a + b - 2) * ng.digamma(a + b))
