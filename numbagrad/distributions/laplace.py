"""``Laplace(loc, scale)``: the double-exponential distribution."""
import math

from . import _ng as ng

from . import constraints
from .distribution import _LocScale

__all__ = ["Laplace"]


class Laplace(_LocScale):
    """The Laplace distribution with density ``exp(-|x - loc| / scale) / (2 scale)``,
    reparameterised through the inverse CDF of a uniform draw.

    Parameters
    ----------
    loc : float or Tensor
    scale : float or Tensor
        Positive.
    validate_args : bool, optional
    """
    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    @property
    def variance(self):
        """2 scale²."""
        return 2 * self.scale.pow(2)

    @property
    def stddev(self):
        """√2 scale."""
        return math.sqrt(2) * self.scale

    def rsample(self, sample_shape=()):
        """``loc - scale * sign(u) * log(1 - |u|)`` with u ~ U(-1, 1)."""
        shape = self._extended_shape(sample_shape)
        eps = ng.finfo(self.loc.dtype).eps
        u = ng.rand(shape, dtype=self.loc.dtype, device=self.loc.device) * (2 - eps) - (1 - eps)
        return self.loc - self.scale * ng.sign(u) * ng.log1p(-u.abs())

    def log_prob(self, value):
        """-log(2 scale) - |x - loc| / scale."""
        if self._validate_args:
            self._validate_sample(value)
        return -ng.log(2 * self.scale) - (value - self.loc).abs() / self.scale

    def cdf(self, value):
        """½ - ½ sign(x - loc) (exp(-|x - loc| / scale) - 1)."""
        if self._validate_args:
            self._validate_sample(value)
        z = value - self.loc
        return 0.5 - 0.5 * ng.sign(z) * ng.expm1(-z.abs() / self.scale)

    def icdf(self, value):
        """loc - scale sign(p - ½) log(1 - 2|p - ½|)."""
        t = value - 0.5
        return self.loc - self.scale * ng.sign(t) * ng.log1p(-2 * t.abs())

    def entropy(self):
        """1 + log(2 scale)."""
        return 1 + ng.log(2 * self.scale)
