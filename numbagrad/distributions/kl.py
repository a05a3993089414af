"""``kl_divergence(p, q)`` and ``register_kl``: closed-form KL divergences, looked up by
the pair of distribution types (the most specific registered pair along both MROs)."""
import math

from . import _ng as ng

from .bernoulli import Bernoulli
from .categorical import Categorical, OneHotCategorical
from .exponential import Exponential
from .gamma import Beta, Gamma
from .independent import Independent
from .laplace import Laplace
from .multivariate_normal import MultivariateNormal, _batch_mahalanobis
from .normal import Normal
from .uniform import Uniform
from .utils import sum_rightmost

__all__ = ["kl_divergence", "register_kl"]

_KL_REGISTRY = {}
_KL_MEMOIZE = {}


def register_kl(type_p, type_q):
    """A decorator registering ``fn(p, q)`` as the KL divergence KL(p ‖ q) for instances
    of ``type_p`` and ``type_q`` (and their subclasses, unless a more specific pair is
    registered).

    Example
    -------
    >>> import numbagrad as torch
    >>> from numbagrad.distributions import Normal, register_kl
    >>> class MyNormal(Normal):
    ...     '''A Normal subclass.'''
    >>> @register_kl(MyNormal, MyNormal)
    ... def _kl_mine(p, q):
    ...     return torch.zeros(())
    >>> torch.distributions.kl_divergence(MyNormal(0.0, 1.0), MyNormal(1.0, 1.0)).item()
    0.0
    """
    if not isinstance(type_p, type) or not isinstance(type_q, type):
        raise TypeError("Expected type_p and type_q to be Distribution subclasses")

    def decorator(fn):
        _KL_REGISTRY[type_p, type_q] = fn
        _KL_MEMOIZE.clear()
        return fn
    return decorator


def _dispatch_kl(type_p, type_q):
    best, best_rank = None, None
    mro_p, mro_q = type_p.__mro__, type_q.__mro__
    for (sp, sq), fn in _KL_REGISTRY.items():
        if sp in mro_p and sq in mro_q:
            rank = (mro_p.index(sp), mro_q.index(sq))
            if best_rank is None or rank < best_rank:
                best, best_rank = fn, rank
    return best


def kl_divergence(p, q):
    """The Kullback-Leibler divergence KL(p ‖ q) = E_p[log p(x) - log q(x)], of shape
    ``batch_shape``, differentiable with respect to both distributions' parameters.

    Raises ``NotImplementedError`` when no closed form is registered for the pair.
    """
    key = (type(p), type(q))
    fn = _KL_MEMOIZE.get(key)
    if fn is None:
        fn = _dispatch_kl(*key)
        _KL_MEMOIZE[key] = fn
    if fn is None:
        raise NotImplementedError(f"No KL(p || q) is implemented for p type {p.__class__.__name__} "
                                  f"and q type {q.__class__.__name__}")
    return fn(p, q)


def _inf_like(x):
    return ng.full_like(x, math.inf)


@register_kl(Normal, Normal)
def _kl_normal_normal(p, q):
    var_ratio = (p.scale / q.scale).pow(2)
    t1 = ((p.loc - q.loc) / q.scale).pow(2)
    return 0.5 * (var_ratio + t1 - 1 - var_ratio.log())


@register_kl(Categorical, Categorical)
def _kl_categorical_categorical(p, q):
    t = p.probs * (p.logits - q.logits)
    t, q_probs, p_probs = ng.broadcast_tensors(t, q.probs, p.probs)
    t = ng.where(q_probs == 0, _inf_like(t), t)
    t = ng.where(p_probs == 0, ng.zeros_like(t), t)
    return t.sum(-1)


@register_kl(OneHotCategorical, OneHotCategorical)
def _kl_onehot_onehot(p, q):
    return _kl_categorical_categorical(p._categorical, q._categorical)


def _softplus(x):
    return x.clamp(min=0) + ng.log1p(ng.exp(-x.abs()))


@register_kl(Bernoulli, Bernoulli)
def _kl_bernoulli_bernoulli(p, q):
    t1 = p.probs * (_softplus(-q.logits) - _softplus(-p.logits))
    t1 = ng.where(q.probs == 0, _inf_like(t1), t1)
    t1 = ng.where(p.probs == 0, ng.zeros_like(t1), t1)
    t2 = (1 - p.probs) * (_softplus(q.logits) - _softplus(p.logits))
    t2 = ng.where(q.probs == 1, _inf_like(t2), t2)
    t2 = ng.where(p.probs == 1, ng.zeros_like(t2), t2)
    return t1 + t2


@register_kl(Uniform, Uniform)
def _kl_uniform_uniform(p, q):
    result = ((q.high - q.low) / (p.high - p.low)).log()
    return ng.where((q.low > p.low) | (q.high < p.high), _inf_like(result), result)


@register_kl(Exponential, Exponential)
def _kl_exponential_exponential(p, q):
    rate_ratio = q.rate / p.rate
    return rate_ratio - 1 - rate_ratio.log()


@register_kl(Laplace, Laplace)
def _kl_laplace_laplace(p, q):
    scale_ratio = p.scale / q.scale
    loc_abs_diff = (p.loc - q.loc).abs()
    t1 = -scale_ratio.log()
    t2 = loc_abs_diff / q.scale
    t3 = scale_ratio * ng.exp(-loc_abs_diff / p.scale)
    return t1 + t2 + t3 - 1


@register_kl(Independent, Independent)
def _kl_independent_independent(p, q):
    if p.reinterpreted_batch_ndims != q.reinterpreted_batch_ndims:
        raise NotImplementedError(f"kl_divergence(Independent, Independent): the two reinterpret different numbers "
                                  f"of batch dims ({p.reinterpreted_batch_ndims} and "
                                  f"{q.reinterpreted_batch_ndims}); PyTorch has no KL for that either")
    result = kl_divergence(p.base_dist, q.base_dist)
    return sum_rightmost(result, p.reinterpreted_batch_ndims)


@register_kl(MultivariateNormal, MultivariateNormal)
def _kl_mvn_mvn(p, q):
    if p.event_shape != q.event_shape:
        raise ValueError("KL-divergence between two Multivariate Normals with "
                         "different event shapes cannot be computed")
    n = p.event_shape[0]
    half_term1 = q._half_log_det() - p._half_log_det()
    batch = tuple(ng.broadcast_shapes(tuple(p.batch_shape), tuple(q.batch_shape)))
    Lq = q._unbroadcasted_scale_tril.expand(batch + (n, n))
    Lp = p._unbroadcasted_scale_tril.expand(batch + (n, n))
    term2 = ng.linalg.solve_triangular(Lq, Lp, upper=False).pow(2).sum((-2, -1))  # tr(Σq⁻¹ Σp)
    term3 = _batch_mahalanobis(q._unbroadcasted_scale_tril, q.loc - p.loc)
    return half_term1 + 0.5 * (term2 + term3 - n)


@register_kl(Gamma, Gamma)
def _kl_gamma_gamma(p, q):
    t1 = q.concentration * (p.rate / q.rate).log()
    t2 = ng.lgamma(q.concentration) - ng.lgamma(p.concentration)
    t3 = (p.concentration - q.concentration) * ng.digamma(p.concentration)
    t4 = (q.rate - p.rate) * (p.concentration / p.rate)
    return t1 + t2 + t3 + t4


@register_kl(Beta, Beta)
def _kl_beta_beta(p, q):
    a1, b1, a2, b2 = p.concentration1, p.concentration0, q.concentration1, q.concentration0
    s1 = a1 + b1
    t1 = q._lbeta() - p._lbeta()
    return (t1 + (a1 - a2) * ng.digamma(a1) + (b1 - b2) * ng.digamma(b1)
            + (a2 - a1 + b2 - b1) * ng.digamma(s1))
