"""``Bernoulli``: a 0/1 outcome with success probability ``probs`` (or ``logits``)."""
from . import _ng as ng

from . import constraints
from .distribution import Distribution
from .utils import broadcast_all, lazy_property, logits_to_probs, probs_to_logits

__all__ = ["Bernoulli"]


def _bce_with_logits(logits, target):
    # max(x, 0) - x t + log(1 + exp(-|x|)): softplus(x) - x t without overflow,
    # differentiable in both arguments
    return logits.clamp(min=0) - logits * target + ng.log1p(ng.exp(-logits.abs()))


class Bernoulli(Distribution):
    """The Bernoulli distribution: 1 with probability ``probs``, else 0.

    Parameters
    ----------
    probs : float or Tensor, optional
        In ``[0, 1]``.
    logits : float or Tensor, optional
        Log-odds. Give exactly one of ``probs`` and ``logits``.
    validate_args : bool, optional
    """
    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.boolean
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            (self.probs,) = broadcast_all(probs)
            self._param = self.probs
        else:
            (self.logits,) = broadcast_all(logits)
            self._param = self.logits
        super().__init__(self._param.shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        """This distribution with its parameter expanded to ``batch_shape``."""
        new = self._get_checked_instance(Bernoulli, _instance)
        batch_shape = tuple(batch_shape)
        if "probs" in self.__dict__:
            new.probs = self.probs.expand(batch_shape)
            new._param = new.probs
        if "logits" in self.__dict__:
            new.logits = self.logits.expand(batch_shape)
            new._param = new.logits
        Distribution.__init__(new, batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @lazy_property
    def logits(self):
        """The log-odds log p - log(1 - p)."""
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self):
        """The success probability (the sigmoid of the logits)."""
        return logits_to_probs(self.logits, is_binary=True)

    @property
    def param_shape(self):
        """The shape of the parameter."""
        return ng.Size(self._param.shape)

    @property
    def mean(self):
        """p."""
        return self.probs

    @property
    def mode(self):
        """1 where p > ½, 0 where p < ½, NaN at ½."""
        mode = (self.probs >= 0.5).to(self.probs.dtype)
        return ng.where(self.probs == 0.5, ng.full_like(mode, float("nan")), mode)

    @property
    def variance(self):
        """p (1 - p)."""
        return self.probs * (1 - self.probs)

    def sample(self, sample_shape=()):
        """0/1 samples (in the parameter's dtype): ``u < p`` with u ~ U[0, 1)."""
        shape = self._extended_shape(sample_shape)
        with ng.no_grad():
            u = ng.rand(shape, dtype=self.probs.dtype, device=self.probs.device)
            return (u < self.probs).to(self.probs.dtype)

    def log_prob(self, value):
        """x log p + (1 - x) log(1 - p), computed from the logits."""
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        return -_bce_with_logits(logits, value)

    def entropy(self):
        """-p log p - (1 - p) log(1 - p)."""
        logits, probs = broadcast_all(self.logits, self.probs)
        return _bce_with_logits(logits, probs)

    def enumerate_support(self, expand=True):
        """``[0, 1]`` along a new leading dimension, expanded over the batch."""
        values = ng.arange(2, dtype=self._param.dtype, device=self._param.device)
        values = values.reshape((-1,) + (1,) * len(self._batch_shape))
        if expand:
            values = values.expand((-1,) + tuple(self._batch_shape))
        return values
