"""``Categorical`` and ``OneHotCategorical``: distributions over ``K`` categories, given by
``probs`` (normalised along the last dimension) or ``logits`` (unnormalised log-probabilities)."""
from . import _ng as ng

from . import constraints
from .distribution import Distribution
from .utils import lazy_property, logits_to_probs, probs_to_logits

__all__ = ["Categorical", "OneHotCategorical"]


class Categorical(Distribution):
    """A categorical distribution over ``{0, ..., K-1}``; the last dimension of ``probs`` or
    ``logits`` indexes the categories, the others are batch dimensions.

    Parameters
    ----------
    probs : Tensor, optional
        Non-negative weights, normalised to sum to 1 along the last dimension.
    logits : Tensor, optional
        Unnormalised log-probabilities (normalised by ``logsumexp``). Give exactly one of
        ``probs`` and ``logits``.
    validate_args : bool, optional

    Example
    -------
    >>> import numbagrad as torch
    >>> d = torch.distributions.Categorical(probs=torch.tensor([0.25, 0.75]))
    >>> round(d.entropy().item(), 4)
    0.5623
    """
    arg_constraints = {"probs": constraints.simplex, "logits": constraints.independent(constraints.real, 1)}
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            if probs.ndim < 1:
                raise ValueError("`probs` parameter must be at least one-dimensional.")
            self.probs = probs / probs.sum(-1, keepdim=True)
        else:
            if logits.ndim < 1:
                raise ValueError("`logits` parameter must be at least one-dimensional.")
            self.logits = logits - logits.logsumexp(dim=-1, keepdim=True)
        self._param = self.probs if probs is not None else self.logits
        self._num_events = self._param.shape[-1]
        batch_shape = tuple(self._param.shape[:-1]) if self._param.ndim > 1 else ()
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        """This distribution with its parameter expanded to ``batch_shape``."""
        new = self._get_checked_instance(Categorical, _instance)
        batch_shape = tuple(batch_shape)
        shape = batch_shape + (self._num_events,)
        if "probs" in self.__dict__:
            new.probs = self.probs.expand(shape)
            new._param = new.probs
        if "logits" in self.__dict__:
            new.logits = self.logits.expand(shape)
            new._param = new.logits
        new._num_events = self._num_events
        Distribution.__init__(new, batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @constraints.dependent_property(is_discrete=True, event_dim=0)
    def support(self):
        """The integers ``0 .. K-1``."""
        return constraints.integer_interval(0, self._num_events - 1)

    @lazy_property
    def logits(self):
        """Normalised log-probabilities."""
        return probs_to_logits(self.probs)

    @lazy_property
    def probs(self):
        """Probabilities (the softmax of the logits)."""
        return logits_to_probs(self.logits)

    @property
    def param_shape(self):
        """The shape of the parameter: ``batch_shape + (K,)``."""
        return ng.Size(self._param.shape)

    @property
    def mean(self):
        """NaN (categories are not ordered quantities)."""
        return ng.full(self._extended_shape(), float("nan"), dtype=self.probs.dtype, device=self.probs.device)

    @property
    def mode(self):
        """The most probable category."""
        return self.probs.argmax(-1)

    @property
    def variance(self):
        """NaN."""
        return ng.full(self._extended_shape(), float("nan"), dtype=self.probs.dtype, device=self.probs.device)

    def sample(self, sample_shape=()):
        """Category indices (int64) of shape ``sample_shape + batch_shape``, drawn with
        ``numbagrad.multinomial``."""
        if not isinstance(sample_shape, (tuple, list)):
            sample_shape = (sample_shape,)
        n = 1
        for s in sample_shape:
            n *= int(s)
        with ng.no_grad():
            probs_2d = self.probs.reshape(-1, self._num_events)
            if n == 0:
                return ng.zeros(self._extended_shape(sample_shape), dtype=ng.int64, device=probs_2d.device)
            samples_2d = ng.multinomial(probs_2d, n, True).T
            return samples_2d.reshape(self._extended_shape(sample_shape))

    def log_prob(self, value):
        """``logits[value]``, broadcasting ``value`` against the batch."""
        if self._validate_args:
            self._validate_sample(value)
        value = value.long().unsqueeze(-1)
        value, log_pmf = ng.broadcast_tensors(value, self.logits)
        value = value[..., :1]
        return log_pmf.gather(-1, value).squeeze(-1)

    def entropy(self):
        """-Σ p log p (terms with p = 0 count 0)."""
        min_real = ng.finfo(self.logits.dtype).min
        logits = self.logits.clamp(min=min_real)
        return -(logits * self.probs).sum(-1)

    def enumerate_support(self, expand=True):
        """``0 .. K-1`` along a new leading dimension, expanded over the batch."""
        values = ng.arange(self._num_events, dtype=ng.int64, device=self._param.device)
        values = values.reshape((-1,) + (1,) * len(self._batch_shape))
        if expand:
            values = values.expand((-1,) + tuple(self._batch_shape))
        return values


class OneHotCategorical(Distribution):
    """A categorical distribution whose samples are one-hot vectors of length ``K`` (so
    ``event_shape == (K,)``).

    Parameters
    ----------
    probs : Tensor, optional
    logits : Tensor, optional
        As for ``Categorical``: give exactly one.
    validate_args : bool, optional
    """
    arg_constraints = {"probs": constraints.simplex, "logits": constraints.independent(constraints.real, 1)}
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
        self._categorical = Categorical(probs, logits)
        batch_shape = self._categorical.batch_shape
        event_shape = self._categorical.param_shape[-1:]
        super().__init__(batch_shape, event_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        """This distribution with its parameter expanded to ``batch_shape``."""
        new = self._get_checked_instance(OneHotCategorical, _instance)
        new._categorical = self._categorical.expand(batch_shape)
        Distribution.__init__(new, tuple(batch_shape), self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def _param(self):
        return self._categorical._param

    @property
    def probs(self):
        """The category probabilities."""
        return self._categorical.probs

    @property
    def logits(self):
        """The normalised log-probabilities."""
        return self._categorical.logits

    @property
    def param_shape(self):
        """``batch_shape + (K,)``."""
        return self._categorical.param_shape

    @property
    def support(self):
        """One-hot vectors."""
        return constraints.independent(constraints.boolean, 1)

    @property
    def mean(self):
        """The probabilities."""
        return self._categorical.probs

    @property
    def mode(self):
        """The one-hot vector of the most probable category."""
        probs = self._categorical.probs
        return ng.one_hot(probs.argmax(-1), probs.shape[-1]).to(probs.dtype)

    @property
    def variance(self):
        """p (1 - p)."""
        return self._categorical.probs * (1 - self._categorical.probs)

    def sample(self, sample_shape=()):
        """One-hot samples of shape ``sample_shape + batch_shape + (K,)``."""
        probs = self._categorical.probs
        indices = self._categorical.sample(sample_shape)
        return ng.one_hot(indices, self._categorical._num_events).to(probs.dtype)

    def log_prob(self, value):
        """The log-probability of the category that ``value`` marks."""
        if self._validate_args:
            self._validate_sample(value)
        indices = value.argmax(-1)
        return self._categorical.log_prob(indices)

    def entropy(self):
        """-Σ p log p."""
        return self._categorical.entropy()

    def enumerate_support(self, expand=True):
        """The ``K`` one-hot vectors along a new leading dimension."""
        n = self.event_shape[0]
        values = ng.eye(n, dtype=self._param.dtype, device=self._param.device)
        values = values.reshape((n,) + (1,) * len(self.batch_shape) + (n,))
        if expand:
            values = values.expand((n,) + tuple(self.batch_shape) + (n,))
        return values
