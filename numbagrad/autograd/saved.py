"""Accounting of the arrays graph nodes keep for backward ("saved activations").

Every recorded node that saves arrays adds them here, counted once per underlying
buffer however many nodes (or views) hold it, and removes them when the engine frees the
node after its backward or when the node is garbage-collected (a graph dropped without
backward). Arrays of leaf tensors that require grad (parameters) are not activations and
are left out. ``numbagrad.memory_stats()`` reports the current and peak totals.

This runs for every recorded op, so it is kept to a few dict operations; it relies on
the GIL (no lock), as the graph itself does.
"""
_live = {}        # id(root buffer) -> [holders, nbytes, buffer]
_totals = [0, 0]  # current bytes, peak bytes


def record(ctx, args):
    """Count ``ctx``'s saved arrays (called by ``Function.apply`` for a recorded node)."""
    keys = []
    live = _live
    for s in ctx._saved:
        nb = getattr(s, "nbytes", None)
        if nb is None:
            continue
        for t in args:  # a parameter's array is not an activation
            if getattr(t, "array", None) is s:
                if t.requires_grad and t.grad_fn is None:
                    nb = None
                break
        if nb is None:
            continue
        r = s
        b = getattr(r, "base", None)
        while b is not None:
            r = b
            b = getattr(r, "base", None)
        k = id(r)
        if k in keys:
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
        ctx.__dict__["_saved_keys"] = keys


def release(ctx):
    """Uncount ``ctx``'s saved arrays (idempotent)."""
    keys = ctx.__dict__.pop("_saved_keys", None)
    if not keys:
        return
    live = _live
    for k in keys:
        e = live.get(k)
        if e is not None:
            e[0] -= 1
            if e[0] == 0:
                _totals[0] -= e[1]
                del live[k]


def current():
    return _totals[0]


def peak():
    return _totals[1]


def reset_peak():
    _totals[1] = _totals[0]
