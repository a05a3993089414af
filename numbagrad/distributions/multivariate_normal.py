"""``MultivariateNormal``: the Gaussian on ``R^n`` with a full covariance, held through its
lower Cholesky factor ``L`` (``Σ = L Lᵀ``)."""
import math

from . import _ng as ng

from . import constraints
from .distribution import Distribution
from .utils import lazy_property

__all__ = ["MultivariateNormal"]


def _batch_mahalanobis(L, x):
    """``xᵀ (L Lᵀ)⁻¹ x`` over the batch: ``‖L⁻¹ x‖²`` by a triangular solve."""
    batch = ng.broadcast_shapes(tuple(L.shape[:-2]), tuple(x.shape[:-1]))
    n = x.shape[-1]
    Lb = L.expand(tuple(batch) + (n, n))
    xb = x.expand(tuple(batch) + (n,))
    z = ng.linalg.solve_triangular(Lb, xb.unsqueeze(-1), upper=False).squeeze(-1)
    return z.pow(2).sum(-1)


class MultivariateNormal(Distribution):
    """The multivariate normal N(μ, Σ) with ``event_shape (n,)``; give exactly one of
    ``covariance_matrix`` (Σ), ``precision_matrix`` (Σ⁻¹) and ``scale_tril`` (lower
    triangular ``L`` with positive diagonal, Σ = L Lᵀ). ``rsample`` is ``μ + L ε``.

    .. math:: \\log p(x) = -\\tfrac12 (x-\\mu)^\\top \\Sigma^{-1} (x-\\mu)
              - \\tfrac{n}{2}\\log 2\\pi - \\sum_i \\log L_{ii}

    Parameters
    ----------
    loc : Tensor
        ``(*, n)``.
    covariance_matrix, precision_matrix, scale_tril : Tensor, optional
        ``(*, n, n)``; the batches of ``loc`` and the matrix broadcast.
    validate_args : bool, optional
    """
    arg_constraints = {"loc": constraints.real_vector,
                       "covariance_matrix": constraints.positive_definite,
                       "precision_matrix": constraints.positive_definite,
                       "scale_tril": constraints.lower_cholesky}
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, loc, covariance_matrix=None, precision_matrix=None, scale_tril=None,
                 validate_args=None):
        if loc.ndim < 1:
            raise ValueError("loc must be at least one-dimensional.")
        if (covariance_matrix is not None) + (scale_tril is not None) + (precision_matrix is not None) != 1:
            raise ValueError("Exactly one of covariance_matrix or precision_matrix or scale_tril may be specified.")
        if scale_tril is not None:
            if scale_tril.ndim < 2:
                raise ValueError("scale_tril matrix must be at least two-dimensional, "
                                 "with optional leading batch dimensions")
            matrix = scale_tril
        elif covariance_matrix is not None:
            if covariance_matrix.ndim < 2:
                raise ValueError("covariance_matrix must be at least two-dimensional, "
                                 "with optional leading batch dimensions")
            matrix = covariance_matrix
        else:
            if precision_matrix.ndim < 2:
                raise ValueError("precision_matrix must be at least two-dimensional, "
                                 "with optional leading batch dimensions")
            matrix = precision_matrix
        batch_shape = tuple(ng.broadcast_shapes(tuple(matrix.shape[:-2]), tuple(loc.shape[:-1])))
        n = loc.shape[-1]
        mshape = batch_shape + (n, n)
        if scale_tril is not None:
            self.scale_tril = scale_tril.expand(mshape)
        elif covariance_matrix is not None:
            self.covariance_matrix = covariance_matrix.expand(mshape)
        else:
            self.precision_matrix = precision_matrix.expand(mshape)
        self.loc = loc.expand(batch_shape + (n,))
        super().__init__(batch_shape, (n,), validate_args=validate_args)
        if scale_tril is not None:
            self._unbroadcasted_scale_tril = scale_tril
        elif covariance_matrix is not None:
            self._unbroadcasted_scale_tril = ng.linalg.cholesky(covariance_matrix)
        else:
            self._unbroadcasted_scale_tril = ng.linalg.cholesky(ng.linalg.inv(precision_matrix))

    def expand(self, batch_shape, _instance=None):
        """This distribution with ``loc`` and the matrices expanded to ``batch_shape``."""
        new = self._get_checked_instance(MultivariateNormal, _instance)
        batch_shape = tuple(batch_shape)
        n = self.event_shape[0]
        new.loc = self.loc.expand(batch_shape + (n,))
        new._unbroadcasted_scale_tril = self._unbroadcasted_scale_tril
        for name in ("covariance_matrix", "scale_tril", "precision_matrix"):
            if name in self.__dict__:
                setattr(new, name, self.__dict__[name].expand(batch_shape + (n, n)))
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @lazy_property
    def scale_tril(self):
        """The lower Cholesky factor L of Σ, over the batch."""
        n = self.event_shape[0]
        return self._unbroadcasted_scale_tril.expand(tuple(self._batch_shape) + (n, n))

    @lazy_property
    def covariance_matrix(self):
        """Σ = L Lᵀ."""
        L = self._unbroadcasted_scale_tril
        n = self.event_shape[0]
        return (L @ L.mT).expand(tuple(self._batch_shape) + (n, n))

    @lazy_property
    def precision_matrix(self):
        """Σ⁻¹."""
        n = self.event_shape[0]
        return ng.linalg.inv(self.covariance_matrix).expand(tuple(self._batch_shape) + (n, n))

    @property
    def mean(self):
        """μ."""
        return self.loc

    @property
    def mode(self):
        """μ."""
        return self.loc

    @property
    def variance(self):
        """The diagonal of Σ: the row sums of L²."""
        return self._unbroadcasted_scale_tril.pow(2).sum(-1).expand(tuple(self._batch_shape) + tuple(self._event_shape))

    def rsample(self, sample_shape=()):
        """``μ + L ε`` with ε ~ N(0, I) from numbagrad's generator."""
        shape = self._extended_shape(sample_shape)
        eps = ng.randn(shape, dtype=self.loc.dtype, device=self.loc.device)
        return self.loc + (self._unbroadcasted_scale_tril @ eps.unsqueeze(-1)).squeeze(-1)

    def _half_log_det(self):
        return self._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)

    def log_prob(self, value):
        """The log density at ``value`` (shape ``(*, n)``)."""
        if self._validate_args:
            self._validate_sample(value)
        diff = value - self.loc
        M = _batch_mahalanobis(self._unbroadcasted_scale_tril, diff)
        n = self._event_shape[0]
        return -0.5 * (n * math.log(2 * math.pi) + M) - self._half_log_det()

    def entropy(self):
        """½ n (1 + log 2π) + ½ log det Σ."""
        n = self._event_shape[0]
        H = 0.5 * n * (1.0 + math.log(2 * math.pi)) + self._half_log_det()
        return H.expand(tuple(self._batch_shape)) if len(self._batch_shape) else H
