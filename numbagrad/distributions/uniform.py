"""``Uniform(low, high)``: the uniform distribution on ``[low, high)``."""
from . import _ng as ng

from . import constraints
from .distribution import Distribution
from .utils import broadcast_all

__all__ = ["Uniform"]


class Uniform(Distribution):
    """The continuous uniform distribution on ``[low, high)``, reparameterised as
    ``low + (high - low) * u`` with u ~ U[0, 1).

    Parameters
    ----------
    low, high : float or Tensor
        The bounds (``low < high`` elementwise).
    validate_args : bool, optional
    """
    has_rsample = True

    def __init__(self, low, high, validate_args=None):
        self.low, self.high = broadcast_all(low, high)
        super().__init__(self.low.shape, validate_args=validate_args)

    @property
    def arg_constraints(self):
        """``low < high`` and ``high > low``."""
        return {"low": constraints.less_than(self.high), "high": constraints.greater_than(self.low)}

    def expand(self, batch_shape, _instance=None):
        """This distribution with ``low`` and ``high`` expanded to ``batch_shape``."""
        new = self._get_checked_instance(Uniform, _instance)
        batch_shape = tuple(batch_shape)
        new.low, new.high = self.low.expand(batch_shape), self.high.expand(batch_shape)
        Distribution.__init__(new, batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @constraints.dependent_property(is_discrete=False, event_dim=0)
    def support(self):
        """The interval ``[low, high]``."""
        return constraints.interval(self.low, self.high)

    @property
    def mean(self):
        """(low + high) / 2."""
        return (self.high + self.low) / 2

    @property
    def mode(self):
        """NaN: every point of the support is a mode."""
        return ng.full_like(self.high, float("nan"))

    @property
    def stddev(self):
        """(high - low) / √12."""
        return (self.high - self.low) / 12 ** 0.5

    @property
    def variance(self):
        """(high - low)² / 12."""
        return (self.high - self.low).pow(2) / 12

    def rsample(self, sample_shape=()):
        """``low + (high - low) * u``, u ~ U[0, 1) from numbagrad's generator."""
        shape = self._extended_shape(sample_shape)
        u = ng.rand(shape, dtype=self.low.dtype, device=self.low.device)
        return self.low + u * (self.high - self.low)

    def log_prob(self, value):
        """-log(high - low) inside ``[low, high)``, -inf outside."""
        if self._validate_args:
            self._validate_sample(value)
        lb = (self.low <= value).type_as(self.low)
        ub = (self.high > value).type_as(self.low)
        return ng.log(lb * ub) - ng.log(self.high - self.low)

    def cdf(self, value):
        """(x - low) / (high - low), clamped to [0, 1]."""
        if self._validate_args:
            self._validate_sample(value)
        return ((value - self.low) / (self.high - self.low)).clamp(min=0, max=1)

    def icdf(self, value):
        """low + p (high - low)."""
        return value * (self.high - self.low) + self.low

    def entropy(self):
        """log(high - low)."""
        return ng.log(self.high - self.low)
