"""Autocast state: per thread, per device type ("cpu", "cuda").

This is the low layer that both ``ops`` (which read it on every autocast-listed call,
``ops/_autocast.py``) and ``amp`` (whose :class:`~numbagrad.amp.autocast` regions write it)
import. It holds no op logic.

* ``_tls.on`` is True while any device's autocast is enabled in this thread: the one check
  an autocast-listed op makes on the fast path.
* The weight-cast cache maps ``(id(tensor), dtype)`` to ``(tensor, cast)`` for leaf tensors
  that require grad (parameters), as torch's: cast once per outermost region, cleared when
  the outermost region in the thread exits (``_tls.nesting`` counts regions).
"""
import threading

from ._dtype import bfloat16, float16

DEVICE_TYPES = ("cpu", "cuda")
_DEFAULT_DTYPE = {"cpu": bfloat16, "cuda": float16}


class _State(threading.local):
    def __init__(self):
        self.on = False                        # any device enabled (the fast-path flag)
        self.enabled = {"cpu": False, "cuda": False}
        self.dtype = dict(_DEFAULT_DTYPE)
        self.cache_enabled = True
        self.nesting = 0
        self.cache = {}


_tls = _State()


def _check(device_type):
    if device_type not in DEVICE_TYPES:
        raise RuntimeError(f"autocast: unsupported device_type {device_type!r}; numbagrad has "
                           f"{', '.join(map(repr, DEVICE_TYPES))}")


def is_autocast_enabled(device_type="cuda"):
    """Whether autocast is enabled for ``device_type`` in this thread
    (``torch.is_autocast_enabled``; its no-argument form asks about CUDA, as torch's)."""
    _check(device_type)
    return _tls.enabled[device_type]


def set_autocast_enabled(device_type, enabled):
    _check(device_type)
    _tls.enabled[device_type] = bool(enabled)
    _tls.on = _tls.enabled["cpu"] or _tls.enabled["cuda"]


def get_autocast_dtype(device_type):
    """The lower-precision dtype autocast uses for ``device_type`` in this thread."""
    _check(device_type)
    return _tls.dtype[device_type]


def set_autocast_dtype(device_type, dtype):
    _check(device_type)
    _tls.dtype[device_type] = dtype


def is_autocast_cache_enabled():
    return _tls.cache_enabled


def set_autocast_cache_enabled(enabled):
    _tls.cache_enabled = bool(enabled)


def clear_autocast_cache():
    _tls.cache.clear()


def increment_nesting():
    _tls.nesting += 1
    return _tls.nesting


def decrement_nesting():
    _tls.nesting -= 1
    return _tls.nesting
