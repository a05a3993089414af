"""``Independent``: reinterpret some batch dimensions of a distribution as event dimensions."""
from . import constraints
from .distribution import Distribution
from .utils import sum_rightmost

__all__ = ["Independent"]


class Independent(Distribution):
    """Treat the rightmost ``reinterpreted_batch_ndims`` batch dimensions of
    ``base_distribution`` as event dimensions: ``log_prob`` and ``entropy`` sum over them.
    ``Independent(Normal(loc, scale), 1)`` with ``loc`` of shape ``(B, D)`` is a diagonal
    Gaussian with ``batch_shape (B,)`` and ``event_shape (D,)``.

    Parameters
    ----------
    base_distribution : Distribution
    reinterpreted_batch_ndims : int
        At most ``len(base_distribution.batch_shape)``.
    validate_args : bool, optional
    """
    arg_constraints = {}

    def __init__(self, base_distribution, reinterpreted_batch_ndims, validate_args=None):
        if reinterpreted_batch_ndims > len(base_distribution.batch_shape):
            raise ValueError(
                "Expected reinterpreted_batch_ndims <= len(base_distribution.batch_shape), "
                f"actual {reinterpreted_batch_ndims} vs {len(base_distribution.batch_shape)}")
        shape = tuple(base_distribution.batch_shape) + tuple(base_distribution.event_shape)
        event_dim = reinterpreted_batch_ndims + len(base_distribution.event_shape)
        batch_shape = shape[:len(shape) - event_dim]
        event_shape = shape[len(shape) - event_dim:]
        self.base_dist = base_distribution
        self.reinterpreted_batch_ndims = reinterpreted_batch_ndims
        super().__init__(batch_shape, event_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        """This distribution with its base expanded so the batch is ``batch_shape``."""
        new = self._get_checked_instance(Independent, _instance)
        batch_shape = tuple(batch_shape)
        n = self.reinterpreted_batch_ndims
        new.base_dist = self.base_dist.expand(batch_shape + tuple(self.event_shape[:n]))
        new.reinterpreted_batch_ndims = n
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def has_rsample(self):
        """Whether the base distribution has ``rsample``."""
        return self.base_dist.has_rsample

    @property
    def has_enumerate_support(self):
        """False when dimensions are reinterpreted (the support is then a product)."""
        if self.reinterpreted_batch_ndims > 0:
            return False
        return self.base_dist.has_enumerate_support

    @property
    def support(self):
        """The base support, with the reinterpreted dimensions in the event."""
        result = self.base_dist.support
        if self.reinterpreted_batch_ndims:
            result = constraints.independent(result, self.reinterpreted_batch_ndims)
        return result

    @property
    def mean(self):
        """The base distribution's mean."""
        return self.base_dist.mean

    @property
    def mode(self):
        """The base distribution's mode."""
        return self.base_dist.mode

    @property
    def variance(self):
        """The base distribution's variance."""
        return self.base_dist.variance

    def sample(self, sample_shape=()):
        """The base distribution's sample."""
        return self.base_dist.sample(sample_shape)

    def rsample(self, sample_shape=()):
        """The base distribution's reparameterised sample."""
        return self.base_dist.rsample(sample_shape)

    def log_prob(self, value):
        """The base ``log_prob`` summed over the reinterpreted dimensions."""
        return sum_rightmost(self.base_dist.log_prob(value), self.reinterpreted_batch_ndims)

    def entropy(self):
        """The base entropy summed over the reinterpreted dimensions."""
        return sum_rightmost(self.base_dist.entropy(), self.reinterpreted_batch_ndims)

    def __repr__(self):
        return f"{self.__class__.__name__}({self.base_dist}, {self.reinterpreted_batch_ndims})"
