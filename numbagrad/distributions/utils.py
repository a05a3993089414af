"""Helpers shared by the distributions: parameter broadcasting, probs/logits conversion,
cached properties."""
import math
import numbers

from . import _ng as ng

__all__ = ["broadcast_all", "logits_to_probs", "probs_to_logits", "clamp_probs", "lazy_property"]


def broadcast_all(*values):
    """Broadcast the parameters to one shape, turning Python numbers into tensors of the
    tensors' dtype and device (the default dtype when all are numbers)."""
    tensors = [v for v in values if isinstance(v, ng.Tensor)]
    for v in values:
        if not isinstance(v, (ng.Tensor, numbers.Number)):
            raise ValueError("Input arguments must all be instances of numbers.Number, "
                             "torch.Tensor or objects implementing __torch_function__.")
    if not tensors:
        dtype, device = ng.get_default_dtype(), "cpu"
    else:
        dtype, device = tensors[0].dtype, tensors[0].device
    out = [v if isinstance(v, ng.Tensor) else ng.tensor(v, dtype=dtype, device=device)
           for v in values]
    return tuple(ng.broadcast_tensors(*out))


def clamp_probs(probs):
    """``probs`` clamped into ``[eps, 1 - eps]`` so their logs stay finite."""
    eps = ng.finfo(probs.dtype).eps
    return probs.clamp(min=eps, max=1 - eps)


def logits_to_probs(logits, is_binary=False):
    """Probabilities from logits: the sigmoid (``is_binary``) or the softmax over the last
    dimension."""
    if is_binary:
        return ng.sigmoid(logits)
    return ng.softmax(logits, dim=-1)


def probs_to_logits(probs, is_binary=False):
    """Logits from probabilities (clamped first): ``log p - log(1 - p)`` when ``is_binary``,
    else ``log p``."""
    p = clamp_probs(probs)
    if is_binary:
        return ng.log(p) - ng.log1p(-p)
    return ng.log(p)


def sum_rightmost(value, dim):
    """``value`` summed over its last ``dim`` dimensions."""
    if dim == 0:
        return value
    return value.reshape(tuple(value.shape[:value.ndim - dim]) + (-1,)).sum(-1)


LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)


class lazy_property:
    """A property computed once on first access and then cached in the instance's
    ``__dict__`` (so ``Categorical.probs`` is derived from logits only when asked for)."""

    def __init__(self, wrapped):
        self.wrapped = wrapped
        self.__doc__ = wrapped.__doc__

    def __get__(self, instance, obj_type=None):
        if instance is None:
            return self
        value = self.wrapped(instance)
        instance.__dict__[self.wrapped.__name__] = value
        return value
