"""``torch.serialization``: ``save``/``load`` write and read numbagrad's HDF5 checkpoints
(:mod:`numbagrad.io`).

:func:`add_safe_globals` and friends only record names: programs register classes at
import time for ``torch.load(weights_only=True)``. numbagrad's loader never unpickles or
imports anything, so the list is kept for compatibility and has nothing to allow.
"""
import contextlib


_SAFE_GLOBALS = []


def save(obj, f, *args, **kwargs):
    """``torch.save``: write ``obj`` as an HDF5 checkpoint (:func:`numbagrad.io.save`).

    >>> import os, tempfile
    >>> import numbagrad as ng
    >>> with tempfile.TemporaryDirectory() as d:
    ...     ng.save({"w": ng.arange(3), "epoch": 5}, os.path.join(d, "run.ckpt"))
    ...     ck = ng.load(os.path.join(d, "run.ckpt"))
    >>> ck["w"].tolist(), ck["epoch"]
    ([0, 1, 2], 5)
    """
    from .io import save as _save
    return _save(obj, f, *args, **kwargs)


def load(f, *args, **kwargs):
    """``torch.load``: read a checkpoint :func:`save` wrote (:func:`numbagrad.io.load`).
    No code runs on load, so every load is what torch calls ``weights_only``.

    >>> import os, tempfile
    >>> import numbagrad as ng
    >>> with tempfile.TemporaryDirectory() as d:
    ...     ng.save([ng.ones(2), "note"], os.path.join(d, "w.ckpt"))
    ...     ng.load(os.path.join(d, "w.ckpt"), map_location="cpu")
    [tensor([1., 1.]), 'note']
    """
    from .io import load as _load
    return _load(f, *args, **kwargs)


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
