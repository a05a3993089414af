"""``torch.serialization``: checkpoints. ``save``/``load`` are not available yet (they will
write and read HDF5 checkpoints); the weights-only allow-list is.

:func:`add_safe_globals` only records names, so it works now: programs register classes at
import time for ``torch.load(weights_only=True)``, and the list will be honoured by
:func:`load` once it exists. It never raises for a list of globals.
"""
import contextlib

from ._unavailable import message

_UNTIL = ("HDF5 checkpoints are not implemented yet. Until then, keep model.state_dict() and "
          "optimizer.state_dict() in memory, or write the tensors' .numpy() arrays with numpy.savez")
_SAFE_GLOBALS = []


def save(obj, f, *args, **kwargs):
    """``torch.save``. Not available yet: raises ``NotImplementedError``."""
    raise NotImplementedError(message("numbagrad.save", "the writer of HDF5 checkpoints (tensors, state_dicts "
                                      "and nested dicts/lists of them)") + ". " + _UNTIL)


def load(f, *args, **kwargs):
    """``torch.load``. Not available yet: raises ``NotImplementedError``."""
    raise NotImplementedError(message("numbagrad.load", "the reader of the HDF5 checkpoints numbagrad.save "
                                      "writes, honouring map_location and weights_only") + ". " + _UNTIL)


def add_safe_globals(safe_globals):
    """Allow ``safe_globals`` (classes or functions, or ``(obj, "module.name")`` pairs) in
    weights-only loads. Bookkeeping only, so it works before :func:`load` does."""
    if isinstance(safe_globals, (str, bytes)) or not hasattr(safe_globals, "__iter__"):
        raise TypeError(f"add_safe_globals: expected a list of globals, got {type(safe_globals).__name__}")
    for g in safe_globals:
        if g not in _SAFE_GLOBALS:
            _SAFE_GLOBALS.append(g)


def get_safe_globals():
    """The globals :func:`add_safe_globals` has allowed, in the order added (a copy)."""
    return list(_SAFE_GLOBALS)


def clear_safe_globals():
    """Forget every global :func:`add_safe_globals` allowed."""
    _SAFE_GLOBALS.clear()


@contextlib.contextmanager
def safe_globals(safe_globals):
    """Allow ``safe_globals`` inside the ``with`` block only (``torch.serialization.safe_globals``)."""
    before = list(_SAFE_GLOBALS)
    add_safe_globals(safe_globals)
    try:
        yield
    finally:
        _SAFE_GLOBALS[:] = before


__all__ = ["save", "load", "add_safe_globals", "get_safe_globals", "clear_safe_globals", "safe_globals"]
