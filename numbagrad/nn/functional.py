"""Functional forms of the layers and losses (``torch.nn.functional``).

The losses live in :mod:`numbagrad.nn.loss`. Activations, softmax, dropout and the
indexing ops live in ``numbagrad.ops`` with PyTorch's functional signatures; the names
below forward to them, looked up at call time, and any other ``numbagrad.ops`` function
(``F.hardswish``, ``F.glu``, ``F.dropout2d``, ...) is reachable through this module too.
"""
from .. import ops as _ops
from ..ops.matmul import linear  # noqa: F401
from ..ops.attention import scaled_dot_product_attention, multi_head_attention_forward  # noqa: F401
from .loss import cross_entropy, nll_loss, mse_loss, l1_loss  # noqa: F401
from .loss_pointwise import (smooth_l1_loss, huber_loss, poisson_nll_loss, gaussian_nll_loss,  # noqa: F401
                             binary_cross_entropy, binary_cross_entropy_with_logits, kl_div,
                             sigmoid_focal_loss, focal_loss, multi_margin_loss, multilabel_soft_margin_loss)
from .loss_ctc import ctc_loss  # noqa: F401
from .loss_metric import (pairwise_distance, cosine_similarity, triplet_margin_loss,  # noqa: F401
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


def relu(input, inplace=False):
    return _ops.relu(input, inplace=inplace)


def relu_(input):
    return _ops.relu(input, inplace=True)


def relu6(input, inplace=False):
    return _ops.relu6(input, inplace=inplace)


def leaky_relu(input, negative_slope=0.01, inplace=False):
    return _ops.leaky_relu(input, negative_slope, inplace=inplace)


def elu(input, alpha=1.0, inplace=False):
    return _ops.elu(input, alpha, inplace=inplace)


def selu(input, inplace=False):
    return _ops.selu(input, inplace=inplace)


def gelu(input, approximate="none"):
    return _ops.gelu(input, approximate=approximate)


def silu(input, inplace=False):
    return _ops.silu(input, inplace=inplace)


def mish(input, inplace=False):
    return _ops.mish(input, inplace=inplace)


def sigmoid(input):
    return _ops.sigmoid(input)


def tanh(input):
    return _ops.tanh(input)


def softplus(input, beta=1.0, threshold=20.0):
    return _ops.softplus(input, beta, threshold)


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    return _ops.hardtanh(input, min_val, max_val, inplace=inplace)


def softmax(input, dim=None, _stacklevel=3, dtype=None):
    return _ops.softmax(input, dim, _stacklevel + 1, dtype=dtype)


def log_softmax(input, dim=None, _stacklevel=3, dtype=None):
    return _ops.log_softmax(input, dim, _stacklevel + 1, dtype=dtype)


def dropout(input, p=0.5, training=True, inplace=False):
    return _ops.dropout(input, p=p, training=training, inplace=inplace)


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
              sparse=False):
    return _ops.embedding(input, weight, padding_idx=padding_idx, max_norm=max_norm, norm_type=norm_type,
                          scale_grad_by_freq=scale_grad_by_freq, sparse=sparse)


def one_hot(tensor, num_classes=-1):
    return _ops.one_hot(tensor, num_classes)


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
