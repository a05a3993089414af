"""The graph walk: reverse-mode accumulation without recursion.

``backward`` (1) walks the graph from the roots with an explicit stack and counts, for
every node, how many edges from other reachable nodes point at it; (2) runs nodes
from a ready queue, each once all of its consumers have delivered their gradients.
No Python recursion is involved, so a 10,000-op chain is fine. Unless
``retain_graph``, each node drops its saved arrays right after its backward ran, so
the memory of a training step is released while backward is still walking.
"""
import sys

import numpy as np

from .._dtype import is_float as _is_float
from ..backend import backend_of
from ..backend import dispatch as _dispatch
from .anomaly import _anomaly
from .function import Function, check_kept_versions
from . import saved as _saved_stats


class _HookHandle:
    __slots__ = ("_hooks", "_hook")

    def __init__(self, hooks, hook):
        self._hooks, self._hook = hooks, hook

    def remove(self):
        try:
            self._hooks.remove(self._hook)
        except ValueError:
            pass


class _RetainGrad:
    """The hook ``Tensor.retain_grad`` installs: stores the gradient on the tensor."""
    __slots__ = ("ref",)

    def __init__(self, ref):
        self.ref = ref

    def __call__(self, grad):
        t = self.ref()
        if t is not None:
            if t.grad is None:
                t.grad = _tensor(backend_of(grad.array).copy(grad.array))
            else:
                backend_of(t.grad.array).accumulate(t.grad.array, grad.array)
        return None


# Post-accumulate-grad hooks (``Tensor.register_post_accumulate_grad_hook``):
# id(leaf) -> (weakref to the leaf, [hook(leaf)]), the entry dropped when the leaf dies.
# backward counts the reachable edges into these leaves and calls the hooks once the last
# one has delivered (the leaf's ``.grad`` is then final for this pass).
_POST_HOOKS = {}
# Callbacks queued during the backward pass now running (``queue_callback``), one list per
# nested backward call.
_CALLBACKS = []


def register_post_accumulate_grad_hook(leaf, hook):
    """See ``Tensor.register_post_accumulate_grad_hook``; returns a handle with ``remove()``."""
    import weakref
    key = id(leaf)
    entry = _POST_HOOKS.get(key)
    if entry is None or entry[0]() is not leaf:
        def forget(_, k=key, table=_POST_HOOKS):   # no module globals: it may run at interpreter exit
            e = table.get(k)
            if e is not None and e[0]() is None:
                del table[k]
        entry = _POST_HOOKS[key] = (weakref.ref(leaf, forget), [])
    entry[1].append(hook)
    return _HookHandle(entry[1], hook)


def queue_callback(callback):
    """Run ``callback()`` once the backward pass now running has finished
    (``Variable._execution_engine.queue_callback``)."""
    if not _CALLBACKS:
        raise RuntimeError("queue_callback: final callbacks can only be installed during the backward pass")
    _CALLBACKS[-1].append(callback)


def _tensor(arr):
    from .function import _wrap_plain
    return _wrap_plain(arr)


def _run_hooks(hooks, g):
    # retain_grad's hook runs after every other hook, whatever the order of
    # registration, so .grad shows the gradient that flows on (PyTorch >= 2.0).
    retain = None
    for h in list(hooks):
        if isinstance(h, _RetainGrad):
            retain = h
            continue
        r = h(_tensor(g))
        if r is not None:
            g = _hook_result(h, r, g)
    if retain is not None:
        retain(_tensor(g))
    return g


def _hook_result(hook, r, g):
    """The gradient array a hook returned in place of ``g``; PyTorch's errors when it is no
    tensor or has another shape, dtype or device (it would be broadcast into ``.grad``)."""
    name = getattr(hook, "__name__", type(hook).__name__)
    a = r.array if isinstance(r, Tensor) else r
    if not isinstance(a, _dispatch.ARRAY_TYPES):
        raise TypeError(f"expected Tensor, but hook '{name}' returned {type(r).__name__!r}")
    if a.shape != g.shape:
        raise RuntimeError(f"hook '{name}' has changed the size of value (was {list(g.shape)} got "
                           f"{list(a.shape)})")
    if a.dtype != g.dtype:
        raise RuntimeError(f"hook '{name}' has changed the type of value (was {g.dtype} got {a.dtype})")
    if type(a) is not type(g):
        raise RuntimeError(f"hook '{name}' has changed the device of value (was {backend_of(g).device} "
                           f"got {backend_of(a).device})")
    return a


def _check_shape(node, i, g, shape, dtype, what):
    if g.shape != shape:
        raise RuntimeError(f"{type(node).__name__}.backward returned a gradient of shape "
                           f"{tuple(g.shape)} for {what} {i}, whose shape is {tuple(shape)}")


def _check_finite(node, i, g):
    if _is_float(g.dtype) and not backend_of(g).all_finite(g):
        where = "".join(node._trace[-6:]) if node._trace else "(forward trace not recorded)\n"
        raise RuntimeError(
            f"Function '{type(node).__name__}' returned nan or inf values in its {i}th output "
            f"(gradient of input {i}, shape {tuple(g.shape)}, dtype {g.dtype}).\n"
            f"The forward call that created this node:\n{where}")


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, inputs=None):
    """Compute gradients of ``tensors`` and accumulate them into leaves' ``.grad``
    (``numbagrad.autograd.backward``)."""
    if create_graph:
        raise NotImplementedError("backward(create_graph=True): higher-order gradients are not "
                                  "supported yet; numbagrad backward functions work on raw arrays")
    if isinstance(tensors, Tensor):
        tensors = (tensors,)
    if grad_tensors is not None and isinstance(grad_tensors, Tensor):
        grad_tensors = (grad_tensors,)
    only = None
    if inputs is not None:
        if isinstance(inputs, Tensor):
            inputs = (inputs,)
        only = {id(t) for t in inputs}
    callbacks = []
    _CALLBACKS.append(callbacks)
    try:
        _execute(tensors, grad_tensors, bool(retain_graph), capture=None, only_leaves=only)
    finally:
        _CALLBACKS.pop()
    for cb in callbacks:  # a callback may queue another: the list grows while we walk it
        cb()


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False,
         allow_unused=False):
    """Return the gradients of ``outputs`` with respect to ``inputs`` without touching
    any ``.grad`` (``numbagrad.autograd.grad``).

    Example
    -------
    >>> import numbagrad as ng
    >>> x = ng.tensor([3.0], requires_grad=True)
    >>> (g,) = ng.autograd.grad(x * x, [x])
    >>> g.tolist()
    [6.0]
    """
    if create_graph:
        raise NotImplementedError("autograd.grad(create_graph=True) is not supported yet")
    if isinstance(outputs, Tensor):
        outputs = (outputs,)
    single = isinstance(inputs, Tensor)
    if single:
        inputs = (inputs,)
    if isinstance(grad_outputs, Tensor):
        grad_outputs = (grad_outputs,)
    for t in inputs:
        if not t.requires_grad:
            raise RuntimeError("autograd.grad: one of the inputs does not require grad")
    capture = {}
    for k, t in enumerate(inputs):
        key = id(t) if t.grad_fn is None else (id(t.grad_fn), t._out_idx)
        capture.setdefault(key, []).append(k)
    results = [None] * len(inputs)
    _execute(outputs, grad_outputs, bool(retain_graph), capture=(capture, results), only_leaves=set())
    out = []
    for k, r in enumerate(results):
        if r is None and not allow_unused:
            raise RuntimeError(f"autograd.grad: input {k} was not used in the graph; pass "
                               "allow_unused=True if this is intended")
        out.append(None if r is None else _tensor(r))
    return tuple(out)


def _seed(tensors, grad_tensors):
    seeds = []
    for k, t in enumerate(tensors):
        if not t.requires_grad:
            raise RuntimeError(f"backward: element {k} of tensors does not require grad and does "
                               "not have a grad_fn")
        g = None if grad_tensors is None else grad_tensors[k]
        if g is None:
            if t.array.size != 1:
                raise RuntimeError(f"backward: grad can be implicitly created only for scalar "
                                   f"outputs; got shape {tuple(t.shape)}. Pass gradient=")
            be = backend_of(t.array)
            g = be.ones(t.array.shape, t.array.dtype)
        else:
            g = g.array if isinstance(g, Tensor) else backend_of(t.array).asarray(g, t.array.dtype)
            if g.shape != t.array.shape:
                raise RuntimeError(f"backward: gradient of shape {tuple(g.shape)} does not match the "
                                   f"tensor's shape {tuple(t.array.shape)}")
        seeds.append((t, g))
    return seeds


def _execute(tensors, grad_tensors, retain_graph, capture, only_leaves):
    seeds = _seed(tensors, grad_tensors)
    anomaly = _anomaly.enabled
    cap_map, cap_res = capture if capture is not None else (None, None)

    # pending[node] = list of gradient arrays per output; owned[node] = which of them
    # the engine allocated itself (and so may accumulate into in place).
    pending = {}
    owned = {}
    # post-accumulate-grad hooks: edges still to come into each hooked leaf (counted below)
    post = {} if _POST_HOOKS and cap_map is None else None

    got = set()          # hooked leaves that received a gradient in this pass

    def leaf_done(leaf, delivered):
        k = id(leaf)
        n = post.get(k)
        if n is None:
            return
        if delivered:
            got.add(k)
        if n > 1:
            post[k] = n - 1
            return
        del post[k]
        if k in got:
            for h in list(_POST_HOOKS[k][1]):
                h(leaf)

    def deliver_leaf(leaf, g, sole=False):
        if cap_map is not None:
            ks = cap_map.get(id(leaf))
            if ks is not None:
                for k in ks:
                    cap_res[k] = g if cap_res[k] is None else backend_of(g).add(cap_res[k], g)
            return
        if only_leaves is not None and id(leaf) not in only_leaves:
            return
        if leaf._hooks:
            g = _run_hooks(leaf._hooks, g)
        if leaf.grad is None:
            # Copy: g may be shared with another leaf's gradient (a + b hands the same
            # array to both), and .grad is accumulated into in place later. An array no
            # one else holds (``sole``, see _sole_owner) is taken as it is.
            if g.dtype != leaf.array.dtype:
                g = g.astype(leaf.array.dtype)
            elif not (sole and g.flags.c_contiguous and g.flags.writeable):
                g = backend_of(g).copy(g)
            leaf.grad = _tensor(g)
        else:
            backend_of(g).accumulate(leaf.grad.array, g)

    def deliver(node, idx, g):
        slots = pending.get(node)
        if slots is None:
            n = 1 if node._out_meta is None else len(node._out_meta)
            slots = pending[node] = [None] * n
            owned[node] = [False] * n
        cur = slots[idx]
        if cur is None:
            slots[idx] = g
        elif owned[node][idx]:
            backend_of(g).accumulate(cur, g)
        else:
            slots[idx] = backend_of(g).add(cur, g)
            owned[node][idx] = True

    # (1) dependency counts over the reachable graph, iteratively.
    deps = {}
    roots = []
    stack = []
    seed_leaves = []
    for t, g in seeds:
        node = t.grad_fn
        if node is None:
            deliver_leaf(t, g)
            if post is not None:
                seed_leaves.append(t)
            continue
        deliver(node, t._out_idx, g)
        if node not in deps:
            deps[node] = 0
            roots.append(node)
            stack.append(node)
    seen = set(roots)
    while stack:
        node = stack.pop()
        for e in node.next_edges:
            if e is None:
                continue
            child = e[0]
            if isinstance(child, Function):
                deps[child] = deps.get(child, 0) + 1
                if child not in seen:
                    seen.add(child)
                    stack.append(child)
            elif post is not None and id(child) in _POST_HOOKS:
                k = id(child)
                if only_leaves is None or k in only_leaves:
                    post[k] = post.get(k, 0) + 1
    if post is not None:
        for t in seed_leaves:
            k = id(t)
            if k in _POST_HOOKS and (only_leaves is None or k in only_leaves):
                post[k] = post.get(k, 0) + 1
                leaf_done(t, True)

    # (2) run nodes whose consumers are all done.
    ready = [n for n in roots if deps[n] == 0]
    while ready:
        node = ready.pop()
        grads = pending.pop(node)
        owned.pop(node, None)
        if node._freed:
            raise RuntimeError(
                f"{type(node).__name__}: trying to backward through the graph a second time (or to "
                "read saved tensors after they were freed). Pass retain_graph=True to the first "
                "backward() if you need to backward twice.")
        meta = node._out_meta
        if meta is not None:
            for i, g in enumerate(grads):
                if g is None:
                    shape, dtype = meta[i]
                    be = _first_backend(grads)
                    grads[i] = be.zeros(shape, dtype)
        hooks = node._out_hooks
        if hooks:
            for i, hs in hooks.items():
                if hs:
                    grads[i] = _run_hooks(hs, grads[i])
        if cap_map is not None:
            for i, g in enumerate(grads):
                ks = cap_map.get((id(node), i))
                if ks is not None:
                    for k in ks:
                        cap_res[k] = g
        kept = node.__dict__.get("_kept_versions")
        if kept:  # index, mask and target tensors backward reads (``function.keep_versions``)
            check_kept_versions(node, kept)
        in_grads = node.backward(node, *grads)
        if type(in_grads) is not tuple:
            in_grads = (in_grads,)
        edges = node.next_edges
        if len(in_grads) < len(edges):
            raise RuntimeError(f"{type(node).__name__}.backward returned {len(in_grads)} gradients, "
                               f"but forward had {len(edges)} inputs")
        if not retain_graph:
            _saved_stats.release(node)
            node._saved = None
            node._freed = True
        for i, e in enumerate(edges):
            if e is None:
                continue
            g = in_grads[i]
            child, idx = e
            if g is None:
                if isinstance(child, Function):
                    deps[child] -= 1
                    if deps[child] == 0 and child in pending:
                        ready.append(child)
                    elif deps[child] == 0:
                        _drop(child, deps, ready, pending, leaf_done if post else None)
                elif post:
                    leaf_done(child, False)
                continue
            wrapped = isinstance(g, Tensor)
            if wrapped:
                g = g.array
            elif not isinstance(g, _dispatch.ARRAY_TYPES):
                g = np.asarray(g)  # NumPy ufuncs return scalars for 0-d arrays
            if anomaly:
                _check_finite(node, i, g)
            if isinstance(child, Function):
                deliver(child, idx, g)
                deps[child] -= 1
                if deps[child] == 0:
                    ready.append(child)
            else:
                if g.shape != child.array.shape:
                    _check_shape(node, i, g, child.array.shape, child.array.dtype, "input")
                # references to a fresh array here: in_grads, g, and _sole_owner's own two
                sole = not wrapped and not child._hooks and _sole_owner(g, 4)
                deliver_leaf(child, g, sole)
                if post:
                    leaf_done(child, True)


def _sole_owner(g, refs):
    """Whether nothing but the engine holds the NumPy array ``g`` (``refs`` references at
    most, counting this call's) or, for a view, the arrays it views: then a leaf may keep
    it as its ``.grad`` without a copy (for a 4096x1024 float32 LayerNorm input gradient
    the copy was ~3 ms of a 10 ms step)."""
    if type(g) is not np.ndarray or sys.getrefcount(g) > refs:
        return False
    b = g.base
    while b is not None:
        # held by the view above it, by ``b``, and by getrefcount's argument
        if type(b) is not np.ndarray or sys.getrefcount(b) > 3:
            return False
        b = b.base
    return True


def _drop(node, deps, ready, pending, leaf_done=None):
    """A node all of whose consumers returned None: nothing flows through it. Its own
    inputs' counts still have to go down, iteratively (and the post-accumulate-grad
    counts of its leaves, through ``leaf_done``)."""
    stack = [node]
    while stack:
        n = stack.pop()
        for e in n.next_edges:
            if e is None:
                continue
            if not isinstance(e[0], Function):
                if leaf_done is not None:
                    leaf_done(e[0], False)
                continue
            c = e[0]
            deps[c] -= 1
            if deps[c] == 0:
                if c in pending:
                    ready.append(c)
                else:
                    stack.append(c)


def _first_backend(grads):
    for g in grads:
        if g is not None:
            return backend_of(g)
    from ..backend.cpu import CPU_BACKEND
    return CPU_BACKEND


from ..tensor import Tensor  # noqa: E402
