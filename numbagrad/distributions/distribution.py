"""``Distribution``: the base class of every distribution (``torch.distributions.Distribution``).

Shapes follow PyTorch: a sample has shape ``sample_shape + batch_shape + event_shape``;
``log_prob`` returns ``sample_shape + batch_shape``. ``sample`` draws under ``no_grad``;
``rsample`` (where ``has_rsample``) is a reparameterised draw, a differentiable function
of the parameters and of parameter-free noise from numbagrad's seeded generator.
"""
from . import _ng as ng

from . import constraints
from .utils import lazy_property

__all__ = ["Distribution"]


def _size(shape):
    return ng.Size(tuple(int(s) for s in shape))


def _fmt(value):
    return repr(value.item()) if value.ndim == 0 else str(value)


class Distribution:
    """The base class of probability distributions.

    Parameters
    ----------
    batch_shape : tuple of int
        The shape over which the parameters are batched (independent distributions).
    event_shape : tuple of int
        The shape of one sample of one distribution.
    validate_args : bool, optional
        Check the parameters (and ``log_prob``'s values) against their constraints, raising
        ``ValueError`` with PyTorch's messages. Defaults to ``Distribution``'s class-wide
        default (``True``; see ``set_default_validate_args``).
    """
    has_rsample = False
    has_enumerate_support = False
    _validate_args = __debug__

    @staticmethod
    def set_default_validate_args(value):
        """Turn argument validation on or off for distributions built afterwards."""
        if value not in (True, False):
            raise ValueError
        Distribution._validate_args = value

    def __init__(self, batch_shape=(), event_shape=(), validate_args=None):
        self._batch_shape = _size(batch_shape)
        self._event_shape = _size(event_shape)
        if validate_args is not None:
            self._validate_args = validate_args
        if self._validate_args:
            try:
                arg_constraints = self.arg_constraints
            except NotImplementedError:
                arg_constraints = {}
            for param, constraint in arg_constraints.items():
                if constraints.is_dependent(constraint):
                    continue
                if param not in self.__dict__ and isinstance(getattr(type(self), param, None),
                                                             lazy_property):
                    continue  # the parameter was not given; its derived form is not checked
                value = getattr(self, param)
                with ng.no_grad():
                    valid = bool(constraint.check(value).all())
                if not valid:
                    raise ValueError(
                        f"Expected parameter {param} "
                        f"({type(value).__name__} of shape {tuple(value.shape)}) "
                        f"of distribution {self!r} "
                        f"to satisfy the constraint {constraint!r}, "
                        f"but found invalid values:\n{_fmt(value)}")

    @property
    def batch_shape(self):
        """The shape over which the parameters are batched."""
        return self._batch_shape

    @property
    def event_shape(self):
        """The shape of a single sample (without batching)."""
        return self._event_shape

    def _abstract(self, what):
        """The error for a member ``what`` that this subclass does not define."""
        return NotImplementedError(f"{type(self).__name__} does not implement {what} (a subclass of "
                                   "Distribution defines it)")

    @property
    def arg_constraints(self):
        """A dict from parameter names to the constraints they must satisfy."""
        raise self._abstract("arg_constraints")

    @property
    def support(self):
        """The constraint that the samples lie in."""
        raise self._abstract("support")

    @property
    def mean(self):
        """The mean of the distribution."""
        raise self._abstract("mean")

    @property
    def mode(self):
        """The mode of the distribution."""
        raise self._abstract("mode")

    @property
    def variance(self):
        """The variance of the distribution."""
        raise self._abstract("variance")

    @property
    def stddev(self):
        """The standard deviation: the square root of the variance."""
        return self.variance.sqrt()

    def expand(self, batch_shape, _instance=None):
        """A new distribution of the same kind whose parameters are expanded to
        ``batch_shape`` (views: no copies, gradients flow back)."""
        raise self._abstract("expand")

    def _get_checked_instance(self, cls, _instance=None):
        if _instance is None and type(self).__init__ != cls.__init__:
            raise NotImplementedError(
                f"Subclass {self.__class__.__name__} of {cls.__name__} that defines a custom "
                "__init__ method must also define a custom .expand() method.")
        return self.__new__(type(self)) if _instance is None else _instance

    def sample(self, sample_shape=()):
        """A sample of shape ``sample_shape + batch_shape + event_shape``, drawn without
        tracking gradients."""
        with ng.no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape=()):
        """A reparameterised sample: differentiable with respect to the parameters."""
        raise self._abstract("rsample")

    def sample_n(self, n):
        """``n`` samples: ``sample((n,))``."""
        return self.sample((n,))

    def log_prob(self, value):
        """The log of the density (or mass) at ``value``."""
        raise self._abstract("log_prob")

    def cdf(self, value):
        """The cumulative distribution function at ``value``."""
        raise self._abstract("cdf")

    def icdf(self, value):
        """The inverse of the cumulative distribution function at ``value``."""
        raise self._abstract("icdf")

    def enumerate_support(self, expand=True):
        """All the values of a discrete support, along a new leading dimension."""
        raise self._abstract("enumerate_support")

    def entropy(self):
        """The entropy, of shape ``batch_shape``."""
        raise self._abstract("entropy")

    def perplexity(self):
        """``exp(entropy)``."""
        return ng.exp(self.entropy())

    def _extended_shape(self, sample_shape=()):
        if not isinstance(sample_shape, (tuple, list)):
            sample_shape = (sample_shape,)
        return _size(tuple(sample_shape) + tuple(self._batch_shape) + tuple(self._event_shape))

    def _validate_sample(self, value):
        if not isinstance(value, ng.Tensor):
            raise ValueError("The value argument to log_prob must be a Tensor")
        event_dim_start = value.ndim - len(self._event_shape)
        if tuple(value.shape[event_dim_start:]) != tuple(self._event_shape):
            raise ValueError(f"The right-most size of value must match event_shape: "
                             f"{_size(value.shape)} vs {self._event_shape}.")
        actual_shape = _size(value.shape)
        expected_shape = _size(self._batch_shape + self._event_shape)
        for i, j in zip(reversed(actual_shape), reversed(expected_shape)):
            if i != 1 and j != 1 and i != j:
                raise ValueError(f"Value is not broadcastable with batch_shape+event_shape: "
                                 f"{actual_shape} vs {expected_shape}.")
        try:
            support = self.support
        except NotImplementedError:
            return
        with ng.no_grad():
            valid = bool(support.check(value).all())
        if not valid:
            raise ValueError(
                "Expected value argument "
                f"({type(value).__name__} of shape {tuple(value.shape)}) "
                f"to be within the support ({support!r}) "
                f"of the distribution {self!r}, "
                f"but found invalid values:\n{_fmt(value)}")

    def __repr__(self):
        names = [k for k in self.arg_constraints if k in self.__dict__]
        args = ", ".join(
            f"{p}: {self.__dict__[p] if self.__dict__[p].numel() == 1 else _size(self.__dict__[p].shape)}"
            for p in names)
        return self.__class__.__name__ + "(" + args + ")"


class _LocScale(Distribution):
    """A distribution of real values with parameters ``loc`` and ``scale`` broadcast together
    (``Normal``, ``Laplace``): their constructor, ``expand``, ``mean`` and ``mode``."""

    def __init__(self, loc, scale, validate_args=None):
        from .utils import broadcast_all
        self.loc, self.scale = broadcast_all(loc, scale)
        super().__init__(self.loc.shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        """This distribution with ``loc`` and ``scale`` expanded to ``batch_shape``."""
        new = self._get_checked_instance(type(self), _instance)
        batch_shape = tuple(batch_shape)
        new.loc, new.scale = self.loc.expand(batch_shape), self.scale.expand(batch_shape)
        Distribution.__init__(new, batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self):
        """``loc``."""
        return self.loc

    @property
    def mode(self):
        """``loc``."""
        return self.loc
