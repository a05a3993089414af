"""Normalisation layers (``torch.nn``): ``LayerNorm``, ``RMSNorm``, ``GroupNorm``,
``BatchNorm1d/2d/3d`` and ``InstanceNorm1d/2d/3d``.

Constructor arguments, attribute names, parameter and buffer names (``weight``, ``bias``,
``running_mean``, ``running_var``, ``num_batches_tracked`` as int64), default
initialisation (weight 1, bias 0, running mean 0, running variance 1) and ``extra_repr``
are PyTorch's, so ``state_dict()`` keys and shapes equal PyTorch's and a converted PyTorch
state dict loads. The maths is in :mod:`numbagrad.ops.normalization` (fused kernels).

Batch norm in training mode increments ``num_batches_tracked`` and normalises with the
batch statistics, moving the running statistics by ``momentum`` (``momentum=None``: by
``1 / num_batches_tracked``, a cumulative average); in eval mode it normalises with the
running statistics, unless ``track_running_stats=False`` (then always batch statistics).
"""
import numbers

import numpy as np

from ..ops import normalization as _N
from ..tensor import Tensor
from . import init
from .module import Module
from .parameter import empty_parameter, factory_dtype, reset_and_place

__all__ = ["LayerNorm", "RMSNorm", "GroupNorm", "BatchNorm1d", "BatchNorm2d", "BatchNorm3d",
           "InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d", "SyncBatchNorm"]


def _affine(module, on, shape, dt, bias=True):
    """Register the ``weight`` (and ``bias``) Parameters of ``shape`` when ``on``, else None
    placeholders, as PyTorch's norm layers do (``bias=False`` drops the bias only)."""
    module.register_parameter("weight", empty_parameter(module, shape, dt) if on else None)
    module.register_parameter("bias", empty_parameter(module, shape, dt) if on and bias else None)


def _reset_affine(module):
    """weight <- 1, bias <- 0 (those present)."""
    p = module._parameters
    if p.get("weight") is not None:
        init.ones_(p["weight"])
    if p.get("bias") is not None:
        init.zeros_(p["bias"])


def _shape_tuple(normalized_shape):
    if isinstance(normalized_shape, numbers.Integral):
        return (int(normalized_shape),)
    return tuple(int(s) for s in normalized_shape)


class LayerNorm(Module):
    """Layer normalisation over the trailing ``normalized_shape`` dimensions
    (``torch.nn.LayerNorm``).

    ``weight`` (ones) and ``bias`` (zeros) have shape ``normalized_shape`` when
    ``elementwise_affine``; ``bias=False`` drops the bias only.
    """

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True, device=None,
                 dtype=None):
        super().__init__()
        dt = factory_dtype(device, dtype)
        self.normalized_shape = _shape_tuple(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        _affine(self, elementwise_affine, self.normalized_shape, dt, bias)
        reset_and_place(self, device)

    def reset_parameters(self):
        _reset_affine(self)

    def forward(self, input):
        p = self._parameters
        return _N.layer_norm(input, self.normalized_shape, p["weight"], p["bias"], self.eps)

    def extra_repr(self):
        return (f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}, "
                f"bias={self.bias is not None}")


class RMSNorm(Module):
    """Root-mean-square normalisation over the trailing ``normalized_shape`` dimensions
    (``torch.nn.RMSNorm``); ``eps=None`` is the machine epsilon of the input's compute
    dtype."""

    def __init__(self, normalized_shape, eps=None, elementwise_affine=True, device=None, dtype=None):
        super().__init__()
        dt = factory_dtype(device, dtype)
        self.normalized_shape = _shape_tuple(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        self.register_parameter("weight", empty_parameter(self, self.normalized_shape, dt)
                                if elementwise_affine else None)
        reset_and_place(self, device)

    def reset_parameters(self):
        _reset_affine(self)

    def forward(self, x):
        return _N.rms_norm(x, self.normalized_shape, self._parameters["weight"], self.eps)

    def extra_repr(self):
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"


class GroupNorm(Module):
    """Group normalisation (``torch.nn.GroupNorm``): ``num_channels`` split into
    ``num_groups`` groups; per-channel ``weight`` (ones) and ``bias`` (zeros) when
    ``affine`` (``bias=False``: no bias)."""

    def __init__(self, num_groups, num_channels, eps=1e-5, affine=True, device=None, dtype=None, *,
                 bias=True):
        super().__init__()
        if isinstance(num_groups, bool) or not isinstance(num_groups, int) or num_groups <= 0:
            raise ValueError(f"GroupNorm: num_groups must be a positive integer, got {num_groups!r}")
        if num_channels % num_groups != 0:
            raise ValueError(f"num_channels ({num_channels}) must be divisible by num_groups ({num_groups})")
        dt = factory_dtype(device, dtype)
        self.num_groups = num_groups
        self.num_channels = num_channels
        self.eps = eps
        self.affine = affine
        _affine(self, affine, (num_channels,), dt, bias)
        reset_and_place(self, device)

    def reset_parameters(self):
        _reset_affine(self)

    def forward(self, input):
        if input.ndim >= 2 and input.shape[1] != self.num_channels:
            raise RuntimeError(f"GroupNorm: expected input of shape (N, {self.num_channels}, *), got "
                               f"{tuple(input.shape)} {input.dtype}")
        p = self._parameters
        return _N.group_norm(input, self.num_groups, p["weight"], p["bias"], self.eps)

    def extra_repr(self):
        return (f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}, "
                f"bias={self.bias is not None}")


class _NormBase(Module):
    """Parameters and running-statistics buffers shared by batch and instance norm."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True,
                 device=None, dtype=None, *, bias=True):
        super().__init__()
        dt = factory_dtype(device, dtype)
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.track_running_stats = track_running_stats
        _affine(self, affine, (num_features,), dt, bias)
        if track_running_stats:
            self.register_buffer("running_mean", Tensor._from_array(np.zeros((num_features,), dt)))
            self.register_buffer("running_var", Tensor._from_array(np.ones((num_features,), dt)))
            self.register_buffer("num_batches_tracked", Tensor._from_array(np.zeros((), np.int64)))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)
        reset_and_place(self, device)

    def reset_running_stats(self):
        if self.track_running_stats:
            for name, value in (("running_mean", 0), ("running_var", 1), ("num_batches_tracked", 0)):
                b = self._buffers[name]
                b.array.fill(value)
                b._bump_version()

    def _load_from_state_dict(self, state_dict, prefix, missing, unexpected, errors, assign):
        key = prefix + "num_batches_tracked"
        if self.track_running_stats and key not in state_dict:
            # As PyTorch: a state dict from before the counter existed (or one that dropped
            # it) is not missing a key; the module keeps its own count.
            state_dict = dict(state_dict)
            state_dict[key] = self._buffers["num_batches_tracked"]
        super()._load_from_state_dict(state_dict, prefix, missing, unexpected, errors, assign)

    def reset_parameters(self):
        self.reset_running_stats()
        _reset_affine(self)

    def _check_input_dim(self, input):
        raise NotImplementedError

    def extra_repr(self):
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
                f"bias={self.bias is not None}, track_running_stats={self.track_running_stats}")


class _BatchNorm(_NormBase):
    def _momentum_factor(self):
        """The running statistics' factor for this forward (counting the batch in training)."""
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats:
            nbt = self._buffers["num_batches_tracked"]
            if nbt is not None:
                np.copyto(nbt.array, nbt.array + 1)
                nbt._bump_version()
                if self.momentum is None:  # cumulative moving average
                    factor = 1.0 / float(nbt.item())
        return factor

    def forward(self, input):
        self._check_input_dim(input)
        factor = self._momentum_factor()
        use_batch = self.training or (self.running_mean is None and self.running_var is None)
        keep = not self.training or self.track_running_stats
        p = self._parameters
        return _N.batch_norm(input, self.running_mean if keep else None, self.running_var if keep else None,
                             p["weight"], p["bias"], use_batch, factor, self.eps)


class BatchNorm1d(_BatchNorm):
    """Batch norm over ``(N, C)`` or ``(N, C, L)`` inputs (``torch.nn.BatchNorm1d``)."""

    def _check_input_dim(self, input):
        if input.ndim not in (2, 3):
            raise ValueError(f"BatchNorm1d: expected 2D or 3D input (got {input.ndim}D input of shape "
                             f"{tuple(input.shape)})")


class BatchNorm2d(_BatchNorm):
    """Batch norm over ``(N, C, H, W)`` inputs (``torch.nn.BatchNorm2d``)."""

    def _check_input_dim(self, input):
        if input.ndim != 4:
            raise ValueError(f"BatchNorm2d: expected 4D input (got {input.ndim}D input of shape "
                             f"{tuple(input.shape)})")


class BatchNorm3d(_BatchNorm):
    """Batch norm over ``(N, C, D, H, W)`` inputs (``torch.nn.BatchNorm3d``)."""

    def _check_input_dim(self, input):
        if input.ndim != 5:
            raise ValueError(f"BatchNorm3d: expected 5D input (got {input.ndim}D input of shape "
                             f"{tuple(input.shape)})")


class SyncBatchNorm(_BatchNorm):
    """Batch norm whose training statistics are those of the global batch, over every rank of
    the ``numbagrad.distributed`` group (``torch.nn.SyncBatchNorm``): one all-reduce of the
    per-channel sums in forward and one of the two gradient sums in backward
    (:mod:`numbagrad.ops.sync_batchnorm`). Without a process group (or with one rank), and in
    eval mode, it is :class:`BatchNorm1d`/``2d``/``3d`` on this rank's input. Inputs
    ``(N, C, *)``."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True,
                 process_group=None, device=None, dtype=None):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype)
        self.process_group = process_group

    def _check_input_dim(self, input):
        if input.ndim < 2:
            raise ValueError(f"SyncBatchNorm: expected at least 2D input (got {input.ndim}D input of shape "
                             f"{tuple(input.shape)})")

    def forward(self, input):
        from .. import distributed as dist
        if not (self.training and dist.is_initialized() and dist.get_world_size(self.process_group) > 1):
            return super().forward(input)
        from ..distributed.process_group import _comm
        from ..ops.sync_batchnorm import sync_batch_norm
        self._check_input_dim(input)
        factor = self._momentum_factor()
        keep = self.track_running_stats
        p = self._parameters
        return sync_batch_norm(input, self.running_mean if keep else None, self.running_var if keep else None,
                               p["weight"], p["bias"], factor, self.eps, _comm("SyncBatchNorm", self.process_group))

    @classmethod
    def convert_sync_batchnorm(cls, module, process_group=None):
        """``module`` with every ``BatchNorm1d/2d/3d`` replaced by a :class:`SyncBatchNorm` that
        shares its parameters and buffers (the module itself when it is one); the others unchanged."""
        out = module
        if isinstance(module, _BatchNorm) and not isinstance(module, SyncBatchNorm):
            out = cls(module.num_features, module.eps, module.momentum, module.affine,
                      module.track_running_stats, process_group)
            for name in ("weight", "bias"):
                if name in module._parameters:
                    out._parameters[name] = module._parameters[name]
            for name in ("running_mean", "running_var", "num_batches_tracked"):
                out._buffers[name] = module._buffers.get(name)
            out.training = module.training
        for name, child in module.named_children():
            new = cls.convert_sync_batchnorm(child, process_group)
            if new is not child:
                out._modules[name] = new
        return out


class _InstanceNorm(_NormBase):
    """Instance norm: defaults ``affine=False, track_running_stats=False`` as in PyTorch;
    an unbatched input ``(C, *)`` is treated as a batch of one."""

    _spatial = 1

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=False, track_running_stats=False,
                 device=None, dtype=None, *, bias=True):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype, bias=bias)

    def _check_input_dim(self, input):
        k = self._spatial
        if input.ndim not in (k + 1, k + 2):
            raise ValueError(f"{type(self).__name__}: expected {k + 1}D or {k + 2}D input (got "
                             f"{input.ndim}D input of shape {tuple(input.shape)})")

    def forward(self, input):
        self._check_input_dim(input)
        fdim = input.ndim - self._spatial - 1
        if input.shape[fdim] != self.num_features:
            if self.affine:
                raise ValueError(f"{type(self).__name__}: expected input's size at dim={fdim} to match "
                                 f"num_features ({self.num_features}), but got: {input.shape[fdim]}.")
            import warnings
            warnings.warn(f"input's size at dim={fdim} does not match num_features. You can silence this "
                          "warning by not passing in num_features, which is not used because affine=False")
        unbatched = input.ndim == self._spatial + 1
        x = input.unsqueeze(0) if unbatched else input
        p = self._parameters
        y = _N.instance_norm(x, self.running_mean, self.running_var, p["weight"], p["bias"],
                             self.training or not self.track_running_stats,
                             self.momentum if self.momentum is not None else 0.0, self.eps)
        return y.squeeze(0) if unbatched else y


class InstanceNorm1d(_InstanceNorm):
    """Instance norm over ``(N, C, L)`` or ``(C, L)`` (``torch.nn.InstanceNorm1d``)."""
    _spatial = 1


class InstanceNorm2d(_InstanceNorm):
    """Instance norm over ``(N, C, H, W)`` or ``(C, H, W)`` (``torch.nn.InstanceNorm2d``)."""
    _spatial = 2


class InstanceNorm3d(_InstanceNorm):
    """Instance norm over ``(N, C, D, H, W)`` or ``(C, D, H, W)`` (``torch.nn.InstanceNorm3d``)."""
    _spatial = 3
