"""Accounting of the arrays graph nodes keep for backward ("saved activations").

Every recorded node that saves arrays adds them here, counted once per underlying
buffer however many nodes (or views) hold it, and removes them when the engine frees the
node after its backward or when the node is garbage-collected (a graph dropped without
backward). Arrays of leaf tensors that require grad (parameters) are not activations and
are left out. ``numbagrad.memory_stats()`` reports the current and peak totals.
"""
import threading

_lock = threading.Lock()
_live = {}       # id(root buffer) -> [holders, nbytes, buffer]
_totals = [0, 0]  # current bytes, peak bytes


def _root(a):
    b = getattr(a, "base", None)
    while b is not None:
        a = b
        b = getattr(a, "base", None)
    return a


def record(ctx, args):
    """Count ``ctx``'s saved arrays (called by ``Function.apply`` for a recorded node)."""
    params = {id(t.array) for t in args
              if getattr(t, "requires_grad", False) and getattr(t, "grad_fn", 1) is None}
    keys = []
    with _lock:
        for s in ctx._saved:
            if s is None or id(s) in params or not hasattr(s, "nbytes"):
                continue
            r = _root(s)
            k = id(r)
            if k in keys:
                continue
            keys.append(k)
            e = _live.get(k)
            if e is None:
                _live[k] = [1, int(r.nbytes), r]
                _totals[0] += int(r.nbytes)
                if _totals[0] > _totals[1]:
                    _totals[1] = _totals[0]
            else:
                e[0] += 1
    ctx.__dict__["_saved_keys"] = keys


def release(ctx):
    """Uncount ``ctx``'s saved arrays (idempotent)."""
    d = getattr(ctx, "__dict__", None)
    keys = d.pop("_saved_keys", None) if d else None
    if not keys:
        return
    with _lock:
        for k in keys:
            e = _live.get(k)
            if e is None:
                continue
            e[0] -= 1
            if e[0] == 0:
                _totals[0] -= e[1]
                del _live[k]


def current():
    return _totals[0]


def peak():
    return _totals[1]


def reset_peak():
    with _lock:
        _totals[1] = _totals[0]
