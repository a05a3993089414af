"""``Normal(loc, scale)``: the Gaussian, reparameterised as ``loc + scale * ε``."""
import math

from . import _ng as ng

from . import constraints
from .distribution import _LocScale
from .utils import LOG_SQRT_2PI

__all__ = ["Normal"]


class Normal(_LocScale):
    """The normal distribution N(μ, σ²), batched over the broadcast shape of ``loc`` and
    ``scale``.

    .. math:: \\log p(x) = -\\frac{(x-\\mu)^2}{2\\sigma^2} - \\log\\sigma - \\tfrac12\\log 2\\pi

    Parameters
    ----------
    loc : float or Tensor
        The mean μ.
    scale : float or Tensor
        The standard deviation σ (positive).
    validate_args : bool, optional

    Example
    -------
    >>> import numbagrad as torch
    >>> d = torch.distributions.Normal(torch.tensor(0.0), torch.tensor(2.0))
    >>> round(d.log_prob(torch.tensor(0.0)).item(), 4)
    -1.6121
    """
    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    @property
    def stddev(self):
        """σ."""
        return self.scale

    @property
    def variance(self):
        """σ²."""
        return self.scale.pow(2)

    def rsample(self, sample_shape=()):
        """``loc + scale * ε`` with ε ~ N(0, 1) from numbagrad's generator."""
        shape = self._extended_shape(sample_shape)
        eps = ng.randn(shape, dtype=self.loc.dtype, device=self.loc.device)
        return self.loc + eps * self.scale

    def log_prob(self, value):
        """The log density at ``value``."""
        if self._validate_args:
            self._validate_sample(value)
        return -((value - self.loc) ** 2) / (2 * self.scale ** 2) - self.scale.log() - LOG_SQRT_2PI

    def cdf(self, value):
        """Φ((x - μ) / σ)."""
        if self._validate_args:
            self._validate_sample(value)
        return 0.5 * (1 + ng.erf((value - self.loc) / (self.scale * math.sqrt(2))))

    def icdf(self, value):
        """μ + σ √2 erf⁻¹(2p - 1)."""
        return self.loc + self.scale * ng.erfinv(2 * value - 1) * math.sqrt(2)

    def entropy(self):
        """½ + ½ log 2π + log σ."""
        return 0.5 + LOG_SQRT_2PI + self.scale.log()
