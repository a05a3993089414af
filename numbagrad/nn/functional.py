"""Functional forms of the layers and losses (``torch.nn.functional``).

Every function lives in ``numbagrad.ops`` with PyTorch's functional signature: the losses
in :mod:`numbagrad.ops.loss`, :mod:`~numbagrad.ops.loss_pointwise`, :mod:`~numbagrad.ops.ctc`
and :mod:`~numbagrad.ops.loss_metric`; activations, softmax, dropout and the indexing ops in
their families. The names below are re-exported (the same function objects), and any other
``numbagrad.ops`` function (``F.hardswish``, ``F.glu``, ``F.dropout2d``, ...) is reachable
through this module's ``__getattr__``.
"""
from .. import ops as _ops
from ..ops.matmul import linear  # noqa: F401
from ..ops.attention import scaled_dot_product_attention, multi_head_attention_forward  # noqa: F401
from ..ops import (relu, relu_, relu6, leaky_relu, elu, selu, gelu, silu, mish, sigmoid, tanh,  # noqa: F401
                   softplus, hardtanh, softmax, log_softmax, dropout, embedding, one_hot)
from ..ops.loss import cross_entropy, nll_loss, mse_loss, l1_loss  # noqa: F401
from ..ops.loss_pointwise import (smooth_l1_loss, huber_loss, poisson_nll_loss, gaussian_nll_loss,  # noqa: F401
                                  binary_cross_entropy, binary_cross_entropy_with_logits, kl_div,
                                  sigmoid_focal_loss, focal_loss, multi_margin_loss, multilabel_soft_margin_loss)
from ..ops.ctc import ctc_loss  # noqa: F401
from ..ops import nn_extra as _nn_extra  # noqa: E402
from ..ops.nn_extra import *  # noqa: F401,F403
from ..ops.loss_metric import (pairwise_distance, cosine_similarity, triplet_margin_loss,  # noqa: F401
                               triplet_margin_with_distance_loss, cosine_embedding_loss, hinge_embedding_loss,
                               margin_ranking_loss, contrastive_loss)

__all__ = ["linear", "cross_entropy", "nll_loss", "mse_loss", "l1_loss", "relu", "relu_", "relu6",
           "leaky_relu", "gelu", "silu", "sigmoid", "tanh", "elu", "selu", "softplus", "hardtanh",
           "mish", "softmax", "log_softmax", "dropout", "embedding", "one_hot", "scaled_dot_product_attention",
           "multi_head_attention_forward",
           "smooth_l1_loss", "huber_loss", "poisson_nll_loss", "gaussian_nll_loss", "binary_cross_entropy",
           "binary_cross_entropy_with_logits", "kl_div", "sigmoid_focal_loss", "focal_loss", "multi_margin_loss",
           "multilabel_soft_margin_loss", "ctc_loss", "pairwise_distance", "cosine_similarity",
           "triplet_margin_loss", "triplet_margin_with_distance_loss", "cosine_embedding_loss",
           "hinge_embedding_loss", "margin_ranking_loss", "contrastive_loss",
           # torch.nn.functional's names that forward to numbagrad.ops (see __getattr__)
           "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_max_pool1d", "adaptive_max_pool2d",
           "alpha_dropout", "avg_pool1d", "avg_pool2d", "batch_norm", "bilinear", "celu", "celu_", "conv1d",
           "conv2d", "conv_transpose1d", "conv_transpose2d", "dropout1d", "dropout2d", "dropout3d", "elu_",
           "embedding_bag", "feature_alpha_dropout", "glu", "group_norm", "hardshrink", "hardsigmoid",
           "hardswish", "hardtanh_", "instance_norm", "interpolate", "layer_norm", "leaky_relu_", "logsigmoid",
           "lp_pool1d", "lp_pool2d", "max_pool1d", "max_pool2d", "normalize", "pad", "pixel_shuffle",
           "pixel_unshuffle", "prelu", "rms_norm", "rrelu", "rrelu_", "selu_", "softmin", "softshrink",
           "softsign", "tanhshrink", "threshold", "threshold_"]
__all__ += list(_nn_extra.__all__)   # ops/nn_extra.py: fold, unfold and the less common layers' forms


def __dir__():
    """This module's names and the forwarded ones in ``__all__``."""
    return sorted(set(globals()) | set(__all__))


def __getattr__(name):
    """Any other functional op: ``numbagrad.ops.<name>``."""
    if not name.startswith("__"):
        fn = getattr(_ops, name, None)
        if fn is not None:
            return fn
    raise AttributeError(f"module 'numbagrad.nn.functional' has no attribute '{name}'")
