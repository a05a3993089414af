"""Grad modes: ``no_grad``, ``enable_grad``, ``set_grad_enabled``, ``inference_mode``.

The mode is thread-local, as in PyTorch: a data-loading thread never changes the
training thread's mode. Each context manager also works as a decorator.
"""
import functools
import threading


class _State(threading.local):
    def __init__(self):
        self.enabled = True
        self.inference = False


_state = _State()


def is_grad_enabled():
    """Whether operations record the graph in this thread."""
    return _state.enabled


def is_inference_mode_enabled():
    """Whether this thread is inside an ``inference_mode()`` region."""
    return _state.inference


class _Mode:
    _target = True

    def _fresh(self):
        """A new, unentered manager with this one's settings (for decorator use)."""
        return type(self)()

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self._fresh():
                return fn(*args, **kwargs)
        return wrapper

    def __enter__(self):
        self._prev = (_state.enabled, _state.inference)
        _state.enabled = self._target
        return self

    def __exit__(self, *exc):
        _state.enabled, _state.inference = self._prev
        return False


class no_grad(_Mode):
    """Context manager / decorator under which no graph is recorded.

    Example
    -------
    >>> import numbagrad as ng
    >>> w = ng.ones(3, requires_grad=True)
    >>> with ng.no_grad():
    ...     y = w * 2
    >>> y.requires_grad
    False
    """
    _target = False


class enable_grad(_Mode):
    """Context manager / decorator that turns graph recording back on inside ``no_grad``."""
    _target = True


class set_grad_enabled(_Mode):
    """Sets grad mode to ``mode``; usable as a function, context manager or decorator."""

    def __init__(self, mode):
        self._target = bool(mode)
        self._prev = (_state.enabled, _state.inference)
        _state.enabled = self._target

    def _fresh(self):
        m = _Mode()
        m._target = self._target
        return m

    def __enter__(self):
        return self


class inference_mode(_Mode):
    """Like ``no_grad``, for pure inference code (``inference_mode(False)`` is a no-op)."""

    def __init__(self, mode=True):
        self._on = bool(mode)

    def _fresh(self):
        return inference_mode(self._on)

    def __enter__(self):
        self._prev = (_state.enabled, _state.inference)
        if self._on:
            _state.enabled = False
            _state.inference = True
        return self


def _set_grad_enabled_call(self, fn):
    # Used as a decorator, set_grad_enabled(mode) must not leave the mode changed.
    _state.enabled, _state.inference = self._prev
    return _Mode.__call__(self, fn)


set_grad_enabled.__call__ = _set_grad_enabled_call
