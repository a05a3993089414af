"""``Exponential(rate)``: the exponential distribution."""
from . import _ng as ng

from . import constraints
from .distribution import Distribution
from .utils import broadcast_all

__all__ = ["Exponential"]


class Exponential(Distribution):
    """The exponential distribution with density ``rate * exp(-rate * x)`` on x ≥ 0,
    reparameterised as ``-log(1 - u) / rate``.

    Parameters
    ----------
    rate : float or Tensor
        λ > 0.
    validate_args : bool, optional
    """
    arg_constraints = {"rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True

    def __init__(self, rate, validate_args=None):
        (self.rate,) = broadcast_all(rate)
        super().__init__(self.rate.shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        """This distribution with ``rate`` expanded to ``batch_shape``."""
        new = self._get_checked_instance(Exponential, _instance)
        new.rate = self.rate.expand(tuple(batch_shape))
        Distribution.__init__(new, tuple(batch_shape), validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self):
        """1 / λ."""
        return self.rate.reciprocal()

    @property
    def mode(self):
        """0."""
        return ng.zeros_like(self.rate)

    @property
    def stddev(self):
        """1 / λ."""
        return self.rate.reciprocal()

    @property
    def variance(self):
        """1 / λ²."""
        return self.rate.pow(-2)

    def rsample(self, sample_shape=()):
        """``-log(1 - u) / rate`` with u ~ U[0, 1) from numbagrad's generator."""
        shape = self._extended_shape(sample_shape)
        u = ng.rand(shape, dtype=self.rate.dtype, device=self.rate.device)
        return -ng.log1p(-u) / self.rate

    def log_prob(self, value):
        """log λ - λ x."""
        if self._validate_args:
            self._validate_sample(value)
        return self.rate.log() - self.rate * value

    def cdf(self, value):
        """1 - exp(-λ x)."""
        if self._validate_args:
            self._validate_sample(value)
        return 1 - ng.exp(-self.rate * value)

    def icdf(self, value):
        """-log(1 - p) / λ."""
        return -ng.log1p(-value) / self.rate

    def entropy(self):
        """1 - log λ."""
        return 1.0 - self.rate.log()
