"""``torch.distributions``: probability distributions with PyTorch's API.

Parameters broadcast to a ``batch_shape``; samples have shape
``sample_shape + batch_shape + event_shape``. ``log_prob``, ``entropy`` and
``kl_divergence`` are built from numbagrad's differentiable ops, so their gradients
(and device support) come from those ops; ``rsample`` is reparameterised so gradients
reach the parameters. Randomness comes from numbagrad's generator, so
``numbagrad.manual_seed`` makes samples reproducible.

Example
-------
>>> import numbagrad as torch
>>> from numbagrad.distributions import Normal, kl_divergence
>>> round(kl_divergence(Normal(0.0, 1.0), Normal(1.0, 1.0)).item(), 4)
0.5
"""
from . import constraints
from .bernoulli import Bernoulli
from .categorical import Categorical, OneHotCategorical
from .distribution import Distribution
from .exponential import Exponential
from .gamma import Beta, Gamma
from .independent import Independent
from .kl import kl_divergence, register_kl
from .laplace import Laplace
from .multivariate_normal import MultivariateNormal
from .normal import Normal
from .uniform import Uniform

__all__ = ["Distribution", "Normal", "Categorical", "OneHotCategorical", "Bernoulli",
           "Uniform", "Exponential", "Laplace", "Independent", "MultivariateNormal", "Gamma", "Beta",
           "kl_divergence", "register_kl", "constraints"]
