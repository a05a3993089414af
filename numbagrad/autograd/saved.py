"""Accounting of the arrays graph nodes keep for backward ("saved activations").

Every recorded node that saves arrays adds them here, counted once per underlying
buffer (the root of the array's ``base`` chain) however many nodes (or views) hold it, and
removes them when the engine frees the node after its backward or when the node is
garbage-collected (a graph dropped without backward). Arrays of leaf tensors that require
grad (parameters), views of them and of the buffer they live in (an optimizer's arena) are
not activations and are left out. ``numbagrad.memory_stats()`` reports the current and peak totals.

This runs for every recorded op, so it is kept to a few dict operations; it relies on
the GIL (no lock), as the graph itself does.
"""
from numpy import ndarray as _ndarray

_live = {}        # id(root buffer) -> [holders, nbytes, buffer]
_totals = [0, 0]  # current bytes, peak bytes


def _root(a):
    """The array owning ``a``'s memory: the end of its ``base`` chain (``a`` itself if none)."""
    b = getattr(a, "base", None)
    while b is not None:
        a = b
        b = getattr(a, "base", None)
    return a


def _param_roots(args):
    """``id`` of the root buffers of the parameters among ``args``: Tensors that are leaves
    requiring grad, or views made by ops of such a leaf (``w.t()``: ``_base``)."""
    out = []
    for t in args:
        if not getattr(t, "requires_grad", False):
            continue
        if t.grad_fn is not None:
            t = t._base
            if t is None or t.grad_fn is not None or not t.requires_grad:
                continue
        out.append(id(_root(t.array)))
    return out


def record(ctx, args):
    """Count ``ctx``'s saved arrays (called by ``Function.apply`` for a recorded node).

    A saved array is counted by its root buffer (:func:`_root`), once per node. Arrays whose
    root is the root of a parameter's array (an argument that is a leaf requiring grad, or
    a view an op made of one) are not activations and are left out: the parameter itself,
    a view of it (LayerNorm's flattened weight), or any view of the buffer it lives in (an
    optimizer's flat arena, which holds every parameter of a group). That memory exists
    whether or not a graph is recorded."""
    keys = []
    live = _live
    params = None  # id(root) of the parameters' arrays among args, computed on first need
    for s in ctx._saved:
        if type(s) is _ndarray:  # the common case, without getattr
            r = s.base
            r = s if r is None else _root(r)
        elif getattr(s, "nbytes", None) is None:
            continue
        else:
            r = _root(s)
        k = id(r)
        if k in keys:
            continue
        if params is None:
            params = _param_roots(args)
        if k in params:
            continue
        keys.append(k)
        e = live.get(k)
        if e is None:
            live[k] = [1, r.nbytes, r]
            _totals[0] += r.nbytes
            if _totals[0] > _totals[1]:
                _totals[1] = _totals[0]
        else:
            e[0] += 1
    if keys:
        ctx.__dict__["_saved_keys"] = _Counted(keys)


class _Counted:
    """The root-buffer ids a node's saved arrays are counted under; uncounted by
    :func:`release` (the engine, after the node's backward) or, for a graph dropped without
    backward, when the node and so this object are garbage (``__del__``). Only nodes that
    saved an activation hold one: ``Function`` itself has no ``__del__``, which every op
    would pay for (~0.2 us)."""
    __slots__ = ("keys",)

    def __init__(self, keys):
        self.keys = keys

    def release(self):
        keys, self.keys = self.keys, None
        live = _live
        if not keys or live is None:  # (None: the module torn down at interpreter exit)
            return
        for k in keys:
            e = live.get(k)
            if e is not None:
                e[0] -= 1
                if e[0] == 0:
                    _totals[0] -= e[1]
                    del live[k]

    __del__ = release


def release(ctx):
    """Uncount ``ctx``'s saved arrays (idempotent)."""
    counted = ctx.__dict__.pop("_saved_keys", None)
    if counted is not None:
        counted.release()


def current():
    """Bytes held now by tensors saved for backward (``numbagrad.memory_stats()['current']``)."""
    return _totals[0]


def peak():
    """The most bytes held by tensors saved for backward since the last :func:`reset_peak`."""
    return _totals[1]


def reset_peak():
    """Restart the peak that :func:`peak` reports from the current total."""
    _totals[1] = _totals[0]
