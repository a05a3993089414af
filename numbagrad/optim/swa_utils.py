"""Weight averaging (``torch.optim.swa_utils``): :class:`AveragedModel` (stochastic weight
averaging and exponential moving averages of a model's parameters), :func:`update_bn`
(recompute BatchNorm statistics for averaged weights) and :class:`SWALR` (the SWA
learning-rate schedule).

Averaging runs on the parameters' arrays in place, without autograd: the multi-tensor
forms (:func:`get_swa_multi_avg_fn`, :func:`get_ema_multi_avg_fn`) receive lists of
detached tensors and update them with NumPy ufuncs (which also run on CUDA arrays);
``torch.lerp``'s two branches are reproduced, so float32 results equal PyTorch's.
"""
import copy
import itertools
import math

import numpy as np

from ..autograd.grad_mode import no_grad
from ..backend import backend_of
from ..nn.module import Module
from ..tensor import Tensor
from .lr_scheduler import LRScheduler, _per_group, _warn_get_lr_outside_step

__all__ = ["AveragedModel", "update_bn", "SWALR", "get_ema_multi_avg_fn", "get_swa_multi_avg_fn",
           "get_ema_avg_fn", "get_swa_avg_fn"]


def _arr(t):
    return t.array if isinstance(t, Tensor) else t


def _n_value(num_averaged):
    return int(np.asarray(backend_of(_arr(num_averaged)).to_numpy(_arr(num_averaged)))) \
        if isinstance(num_averaged, Tensor) else num_averaged


def _lerp_(dst, end, weight):
    """``dst = torch.lerp(dst, end, weight)`` in place for a scalar weight (in ``dst``'s dtype):
    ``dst + w (end - dst)`` for ``|w| < 0.5``, else ``end - (end - dst) (1 - w)``."""
    a = _arr(dst)
    b = _arr(end)
    w = a.dtype.type(weight)
    d = b - a
    if abs(w) < 0.5:
        np.multiply(d, w, out=d)
        np.add(a, d, out=a)
    else:
        np.multiply(d, a.dtype.type(1) - w, out=d)
        np.subtract(b, d, out=a)
    if isinstance(dst, Tensor):
        dst._bump_version()


def get_ema_multi_avg_fn(decay=0.999):
    """Multi-tensor exponential moving average: ``ema = lerp(ema, current, 1 - decay)``."""
    def ema_update(ema_param_list, current_param_list, _):
        if not ema_param_list:
            return
        if _arr(ema_param_list[0]).dtype.kind in "fc":
            for p_ema, p_model in zip(ema_param_list, current_param_list):
                _lerp_(p_ema, p_model, 1 - decay)
        else:
            for p_ema, p_model in zip(ema_param_list, current_param_list):
                a = _arr(p_ema)
                v = a * decay + _arr(p_model) * (1 - decay)
                np.copyto(a, v, casting="unsafe")
    return ema_update


def get_swa_multi_avg_fn():
    """Multi-tensor running mean: ``avg = lerp(avg, current, 1 / (n + 1))``."""
    def swa_update(averaged_param_list, current_param_list, num_averaged):
        if not averaged_param_list:
            return
        n = _n_value(num_averaged)
        if _arr(averaged_param_list[0]).dtype.kind in "fc":
            for p_avg, p_model in zip(averaged_param_list, current_param_list):
                _lerp_(p_avg, p_model, 1 / (n + 1))
        else:
            for p_avg, p_model in zip(averaged_param_list, current_param_list):
                a = _arr(p_avg)
                v = a + (_arr(p_model) - a) / (n + 1)
                np.copyto(a, v, casting="unsafe")
    return swa_update


def get_ema_avg_fn(decay=0.999):
    """Per-tensor exponential moving average: ``decay * ema + (1 - decay) * current``."""
    def ema_update(ema_param, current_param, num_averaged):
        return decay * ema_param + (1 - decay) * current_param
    return ema_update


def get_swa_avg_fn():
    """Per-tensor running mean: ``avg + (current - avg) / (n + 1)``."""
    def swa_update(averaged_param, current_param, num_averaged):
        return averaged_param + (current_param - averaged_param) / (num_averaged + 1)
    return swa_update


def _copy_into(dst, src):
    """``dst.copy_(src)`` on the arrays (dtype cast as ``copy_``: float to int truncates)."""
    a = _arr(dst)
    s = _arr(src)
    if type(s) is not type(a):
        s = backend_of(a).asarray(backend_of(s).to_numpy(s))
    np.copyto(a, s, casting="unsafe")
    if isinstance(dst, Tensor):
        dst._bump_version()


class AveragedModel(Module):
    """A deep copy of ``model`` whose parameters (and, with ``use_buffers``, buffers) are an
    average of the ``model``'s over the calls to :meth:`update_parameters`
    (``torch.optim.swa_utils.AveragedModel``).

    The default average is the running mean (SWA); ``avg_fn(averaged, current, n_averaged)``
    returns a new value per tensor, ``multi_avg_fn(averaged_list, current_list, n_averaged)``
    updates lists in place (:func:`get_ema_multi_avg_fn` for an EMA). The first update copies
    the model. ``n_averaged`` (an int64 buffer) counts the updates. Without ``use_buffers``
    the buffers are copied from ``model`` at each update, not averaged. ``forward`` calls the
    averaged module.
    """

    def __init__(self, model, device=None, avg_fn=None, multi_avg_fn=None, use_buffers=False):
        super().__init__()
        if avg_fn is not None and multi_avg_fn is not None:
            raise ValueError("AveragedModel: only one of avg_fn and multi_avg_fn should be provided")
        self.module = copy.deepcopy(model)
        if device is not None:
            self.module = self.module.to(device)
        n = Tensor._from_array(np.zeros((), np.int64))
        if device is not None:
            n = n.to(device)
        self.register_buffer("n_averaged", n)
        self.avg_fn = avg_fn
        self.multi_avg_fn = multi_avg_fn
        self.use_buffers = use_buffers

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    def _n(self):
        return int(np.asarray(backend_of(self.n_averaged.array).to_numpy(self.n_averaged.array)))

    def update_parameters(self, model):
        """Fold ``model``'s current parameters (and buffers, with ``use_buffers``) into the
        average."""
        if self.use_buffers:
            mine = list(itertools.chain(self.module.parameters(), self.module.buffers()))
            theirs = list(itertools.chain(model.parameters(), model.buffers()))
        else:
            mine = list(self.parameters())
            theirs = list(model.parameters())
        if len(mine) != len(theirs):
            raise ValueError(f"AveragedModel.update_parameters: the model has {len(theirs)} tensors to average, "
                             f"the averaged copy {len(mine)}")
        n = self._n()
        with no_grad():
            avg_d = [p.detach() for p in mine]
            cur_d = []
            for a, p in zip(avg_d, theirs):
                if tuple(a.shape) != tuple(p.shape):
                    raise ValueError(f"AveragedModel.update_parameters: shape {tuple(p.shape)} of the model does "
                                     f"not match shape {tuple(a.shape)} of the average")
                c = p.detach()
                if type(c.array) is not type(a.array):
                    c = Tensor._from_array(backend_of(a.array).asarray(backend_of(c.array).to_numpy(c.array)))
                cur_d.append(c)
            if n == 0:
                for a, c in zip(avg_d, cur_d):
                    _copy_into(a, c)
            else:
                n_t = self.n_averaged
                if self.avg_fn is None:
                    # by device and dtype, as PyTorch groups them
                    groups = {}
                    for a, c in zip(avg_d, cur_d):
                        groups.setdefault((type(a.array), a.array.dtype), ([], []))
                        groups[(type(a.array), a.array.dtype)][0].append(a)
                        groups[(type(a.array), a.array.dtype)][1].append(c)
                    for (kind, _), (al, cl) in groups.items():
                        if self.multi_avg_fn is not None:
                            self.multi_avg_fn(al, cl, n_t)
                        elif kind is np.ndarray:
                            # PyTorch has no foreach kernels on the CPU: it applies the
                            # per-tensor running mean there
                            f = get_swa_avg_fn()
                            for a, c in zip(al, cl):
                                _copy_into(a, f(a, c, n_t))
                        else:
                            get_swa_multi_avg_fn()(al, cl, n_t)
                else:
                    for a, c in zip(avg_d, cur_d):
                        _copy_into(a, self.avg_fn(a, c, n_t))
            if not self.use_buffers:
                # buffers are not averaged: keep them equal to the model's
                for b_avg, b_model in zip(self.module.buffers(), model.buffers()):
                    _copy_into(b_avg, b_model.detach())
        nd = self.n_averaged.array
        np.copyto(nd, nd + 1)
        self.n_averaged._bump_version()


def _batchnorm_modules(model):
    from ..nn.normalization import _BatchNorm
    return [m for m in model.modules() if isinstance(m, _BatchNorm)]


def update_bn(loader, model, device=None):
    """Recompute the running statistics of ``model``'s BatchNorm layers with one pass over
    ``loader`` (``torch.optim.swa_utils.update_bn``): the statistics are reset, each layer
    takes a cumulative average over the batches (``momentum=None``), then the momenta and
    the training mode are restored. A batch that is a list or tuple contributes its first
    element; ``device`` moves each batch there first."""
    momenta = {}
    for m in _batchnorm_modules(model):
        m.reset_running_stats()
        momenta[m] = m.momentum
    if not momenta:
        return
    was_training = model.training
    model.train()
    for m in momenta:
        m.momentum = None
    try:
        with no_grad():
            for input in loader:
                if isinstance(input, (list, tuple)):
                    input = input[0]
                if not isinstance(input, Tensor):
                    input = Tensor(input)
                if device is not None:
                    input = input.to(device)
                model(input)
    finally:
        for m, mom in momenta.items():
            m.momentum = mom
        model.train(was_training)


class SWALR(LRScheduler):
    """Anneal each group's learning rate to ``swa_lr`` over ``anneal_epochs`` steps, cosine or
    linear, then hold it (``torch.optim.swa_utils.SWALR``).

    An :class:`~numbagrad.optim.lr_scheduler.LRScheduler`: ``step()``, ``get_last_lr()``,
    ``state_dict()``/``load_state_dict()``, ``last_epoch``, ``base_lrs`` come from there.
    Constructing it takes the first step (``last_epoch`` becomes 0), as PyTorch's schedulers
    do.
    """

    def __init__(self, optimizer, swa_lr, anneal_epochs=10, anneal_strategy="cos", last_epoch=-1):
        swa_lrs = _per_group("swa_lr", optimizer, swa_lr)
        for lr, group in zip(swa_lrs, optimizer.param_groups):
            group["swa_lr"] = lr
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"anneal_strategy must be one of 'cos' or 'linear', instead got {anneal_strategy}")
        self._anneal_strategy = anneal_strategy
        if not isinstance(anneal_epochs, int) or isinstance(anneal_epochs, bool) or anneal_epochs < 0:
            raise ValueError(f"anneal_epochs must be equal or greater than 0, got {anneal_epochs}")
        self.anneal_epochs = anneal_epochs
        super().__init__(optimizer, last_epoch)

    # -- annealing ------------------------------------------------------------------------------
    @staticmethod
    def _linear_anneal(t):
        return t

    @staticmethod
    def _cosine_anneal(t):
        return (1 - math.cos(math.pi * t)) / 2

    @property
    def anneal_func(self):
        return self._cosine_anneal if self._anneal_strategy == "cos" else self._linear_anneal

    @staticmethod
    def _get_initial_lr(lr, swa_lr, alpha):
        if alpha == 1:
            return swa_lr
        return (lr - alpha * swa_lr) / (1 - alpha)

    def get_lr(self):
        """The learning rates of the current step, from the groups' current ones."""
        _warn_get_lr_outside_step(self)
        step = self._step_count - 1
        if self.anneal_epochs == 0:
            step = max(1, step)
        prev_t = max(0, min(1, (step - 1) / max(1, self.anneal_epochs)))
        prev_alpha = self.anneal_func(prev_t)
        prev_lrs = [self._get_initial_lr(group["lr"], group["swa_lr"], prev_alpha)
                    for group in self.optimizer.param_groups]
        t = max(0, min(1, step / max(1, self.anneal_epochs)))
        alpha = self.anneal_func(t)
        return [group["swa_lr"] * alpha + lr * (1 - alpha) for group, lr in zip(self.optimizer.param_groups, prev_lrs)]
