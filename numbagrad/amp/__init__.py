"""``torch.amp``: automatic mixed precision.

* :class:`autocast` is PyTorch's: a context manager and decorator, per thread and nestable,
  for ``device_type`` ``"cpu"`` (default dtype bfloat16; float16 allowed) and ``"cuda"``
  (default float16; with no CUDA it warns and disables itself, as torch's does). Inside an
  enabled region the GEMM ops (``matmul``, ``mm``, ``bmm``, ``linear``, ``einsum``, the
  fused ``linear_act``, and the ``lstm`` / ``rnn_tanh`` / ``rnn_relu`` sequence ops behind
  ``nn.LSTM`` and ``nn.RNN``) cast their floating inputs to the autocast dtype, the losses and
  ``prod`` cast theirs to float32, and every other op runs in its widest input type
  (numbagrad's promotion), following torch 2.13's CPU op lists (``ops/_autocast.py``).
  Parameters are cast once per outermost region (``cache_enabled``), and their gradients
  come back in float32 through the cast. The state lives in ``numbagrad/_autocast_state.py``.
* :class:`GradScaler` (``grad_scaler.py``) is PyTorch's dynamic loss scaler, with torch's
  float32 scale arithmetic bit for bit; its unscale and inf/NaN check is one fused kernel
  per optimizer arena bucket. ``enabled=False`` passes everything through, as in PyTorch.
* :func:`custom_fwd` / :func:`custom_bwd` are torch's: ``custom_fwd(cast_inputs=dtype)``
  casts the forward's floating input arrays to ``dtype`` and runs it with autocast off when
  called inside an enabled region; ``custom_bwd`` runs the backward under the forward's
  autocast state (and returns each gradient in its input's dtype, since numbagrad's engine
  does not cast gradients between nodes).

``numbagrad.autocast`` is :class:`autocast`; ``numbagrad.cuda.amp`` and
``numbagrad.cpu.amp`` hold the ``torch.cuda.amp`` / ``torch.cpu.amp`` spellings.
"""
import functools
import warnings


from .. import _autocast_state as _state
from .. import _dtype
from .grad_scaler import GradScaler, OptState  # noqa: F401

_SUPPORTED = {"cpu": (_dtype.bfloat16, _dtype.float16), "cuda": (_dtype.float16, _dtype.bfloat16)}


def _cuda_available():
    from ..backend.dispatch import device_available
    return device_available("cuda")


def is_autocast_available(device_type):
    """Whether autocast can run on ``device_type``: ``"cpu"`` always, ``"cuda"`` when CUDA is."""
    if not isinstance(device_type, str):
        raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
    if device_type == "cpu":
        return True
    return device_type == "cuda" and _cuda_available()


def is_autocast_enabled(device_type="cuda"):
    """``torch.is_autocast_enabled(device_type)`` for this thread."""
    return _state.is_autocast_enabled(device_type)


def get_autocast_dtype(device_type):
    """``torch.get_autocast_dtype(device_type)`` for this thread."""
    return _state.get_autocast_dtype(device_type)


class autocast:
    """``torch.autocast(device_type, dtype=None, enabled=True, cache_enabled=None)``.

    A context manager and decorator. Inside an enabled region, ops on ``device_type``
    tensors run in mixed precision (see the module docstring); regions nest, an inner one
    may disable autocast or change its dtype, and each exit restores the state it found.
    The state is per thread: another thread sees autocast off.

    Example
    -------
    >>> import numbagrad as ng
    >>> lin = ng.nn.Linear(4, 3)
    >>> with ng.autocast("cpu"):
    ...     y = lin(ng.randn(2, 4))
    ...     loss = ng.nn.functional.mse_loss(y, ng.zeros(2, 3))
    >>> y.dtype, loss.dtype
    (dtype(bfloat16), dtype('float32'))
    >>> loss.backward(); lin.weight.grad.dtype
    dtype('float32')
    """

    def __init__(self, device_type, dtype=None, enabled=True, cache_enabled=None):
        if not isinstance(device_type, str):
            raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
        if device_type not in _SUPPORTED:
            raise RuntimeError(f"User specified an unsupported autocast device_type '{device_type}'; "
                               "numbagrad supports 'cpu' and 'cuda'")
        self.device = device_type
        self.fast_dtype = _state.get_autocast_dtype(device_type) if dtype is None else _dtype.as_dtype(dtype)
        self._cache_enabled = _state.is_autocast_cache_enabled() if cache_enabled is None else bool(cache_enabled)
        enabled = bool(enabled)
        if enabled and device_type == "cuda" and not _cuda_available():
            warnings.warn("User provided device_type of 'cuda', but CUDA is not available. Disabling")
            enabled = False
        if enabled and self.fast_dtype not in _SUPPORTED[device_type]:
            names = ", ".join(str(d) for d in _SUPPORTED[device_type])
            warnings.warn(f"In {device_type.upper()} autocast, but the target dtype {self.fast_dtype} is not "
                          f"supported. Disabling autocast.\n{device_type.upper()} Autocast only supports dtype "
                          f"of {names} currently.")
            enabled = False
        self._enabled = enabled
        self._prev = []  # a stack, so one instance may be re-entered (a recursive decorated function)

    def __enter__(self):
        dev = self.device
        self._prev.append((_state.is_autocast_enabled(dev), _state.get_autocast_dtype(dev),
                           _state.is_autocast_cache_enabled()))
        _state.set_autocast_enabled(dev, self._enabled)
        _state.set_autocast_dtype(dev, self.fast_dtype)
        _state.set_autocast_cache_enabled(self._cache_enabled)
        _state.increment_nesting()
        return self

    def __exit__(self, exc_type, exc_val, exc_tb):
        if _state.decrement_nesting() == 0:
            _state.clear_autocast_cache()
        enabled, dtype, cache = self._prev.pop()
        _state.set_autocast_enabled(self.device, enabled)
        _state.set_autocast_dtype(self.device, dtype)
        _state.set_autocast_cache_enabled(cache)
        return False

    def __call__(self, func):
        @functools.wraps(func)
        def run(*args, **kwargs):
            with self:
                return func(*args, **kwargs)
        return run


def _cast_arrays(value, dtype):
    """Floating, non-float64 backend arrays in ``value`` (or a tuple/list/dict of them) cast
    to ``dtype``; everything else unchanged."""
    from ..backend import backend_of
    from ..backend.dispatch import is_array
    if is_array(value):
        d = value.dtype
        if _dtype.is_float(d) and d != _dtype.float64 and d != dtype:
            return backend_of(value).astype(value, dtype)
        return value
    if isinstance(value, (tuple, list)):
        return type(value)(_cast_arrays(v, dtype) for v in value)
    if isinstance(value, dict):
        return {k: _cast_arrays(v, dtype) for k, v in value.items()}
    return value


def custom_fwd(fwd=None, *, device_type="cuda", cast_inputs=None):
    """``torch.amp.custom_fwd``: decorate a :class:`~numbagrad.autograd.Function`'s ``forward``.

    It records the autocast state on ``ctx`` for :func:`custom_bwd`. With ``cast_inputs``,
    inside an enabled autocast region of ``device_type`` the forward's floating input
    arrays are cast to ``cast_inputs`` and the forward runs with autocast disabled."""
    if fwd is None:
        return functools.partial(custom_fwd, device_type=device_type, cast_inputs=cast_inputs)
    cast_to = None if cast_inputs is None else _dtype.as_dtype(cast_inputs)

    @functools.wraps(fwd)
    def decorate_fwd(ctx, *args, **kwargs):
        ctx._dtype = _state.get_autocast_dtype(device_type)
        if cast_to is None:
            ctx._fwd_used_autocast = _state.is_autocast_enabled(device_type)
            return fwd(ctx, *args, **kwargs)
        ctx._fwd_used_autocast = False
        if not _state.is_autocast_enabled(device_type):
            return fwd(ctx, *args, **kwargs)
        ctx._in_dtypes = tuple(getattr(a, "dtype", None) for a in args)
        with autocast(device_type, enabled=False):
            return fwd(ctx, *_cast_arrays(args, cast_to), **_cast_arrays(kwargs, cast_to))
    return decorate_fwd


def custom_bwd(bwd=None, *, device_type="cuda"):
    """``torch.amp.custom_bwd``: run a ``backward`` under the autocast state its
    :func:`custom_fwd` forward saw."""
    if bwd is None:
        return functools.partial(custom_bwd, device_type=device_type)

    @functools.wraps(bwd)
    def decorate_bwd(ctx, *args, **kwargs):
        with autocast(device_type, enabled=ctx._fwd_used_autocast, dtype=ctx._dtype):
            grads = bwd(ctx, *args, **kwargs)
        in_dtypes = getattr(ctx, "_in_dtypes", None)
        if in_dtypes is None:
            return grads
        single = not isinstance(grads, tuple)
        grads = (grads,) if single else grads
        grads = tuple(g if g is None or d is None or not hasattr(g, "dtype") or g.dtype == d
                      else _cast_arrays(g, d) if _dtype.is_float(d) else g
                      for g, d in zip(grads, in_dtypes + (None,) * (len(grads) - len(in_dtypes))))
        return grads[0] if single else grads
    return decorate_bwd


__all__ = ["autocast", "GradScaler", "custom_fwd", "custom_bwd", "is_autocast_available",
           "is_autocast_enabled", "get_autocast_dtype"]
