"""``Function``: one differentiable operation, and the graph node that records it.

A subclass defines two static methods:

``forward(ctx, *args)``
    receives the *backend arrays* of its Tensor arguments (NumPy arrays on the CPU)
    and every other argument unchanged; returns one array or a tuple of arrays.
``backward(ctx, *grad_outputs)``
    receives one gradient array per output and returns one gradient array (or
    ``None``) per forward argument, shaped like that argument.

Passing arrays rather than Tensors is numbagrad's deliberate difference from
``torch.autograd.Function``: a forward can hand its inputs straight to an @njit kernel,
and the graph costs no Tensor wrappers inside backward. The instance ``ctx`` *is* the
graph node (as in Chainer): ``Function.apply`` creates it, so per-op bookkeeping is one
object.

Example
-------
>>> import numbagrad as ng
>>> class Cube(ng.autograd.Function):
...     @staticmethod
...     def forward(ctx, x):
...         ctx.save_for_backward(x)
...         return x * x * x
...     @staticmethod
...     def backward(ctx, g):
...         (x,) = ctx.saved_tensors
...         return 3 * x * x * g
>>> x = ng.tensor([2.0], requires_grad=True)
>>> Cube.apply(x).backward()
>>> x.grad.tolist()
[12.0]
"""
import contextlib
import threading
import traceback
import weakref

import numpy as np

from ..backend import dispatch as _dispatch
from .grad_mode import _state
from .anomaly import _anomaly
from . import saved as _saved_stats


class Function:
    """Base class of every differentiable op (see the module docstring)."""

    __slots__ = ("next_edges", "needs_input_grad", "_saved", "_out_hooks", "_out_meta",
                 "_freed", "_trace", "_inputs", "_non_diff", "__dict__", "__weakref__")

    # Index of the input whose storage output 0 views (reshape, transpose, ...), or None.
    # A view output shares that input's version counter, so in-place writes through
    # either are seen by the graph.
    view_of = None

    # False: bfloat16 arrays reach ``forward`` as float32 and float32 results are rounded
    # back (see ``_bf16_forward`` below). True: ``forward`` takes bfloat16 arrays as they are
    # (casts, device moves, and every ``view_of`` op, whose output must view the input).
    takes_bfloat16 = False

    @staticmethod
    def forward(ctx, *args):
        raise NotImplementedError

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError

    # ---- ctx API (used inside forward/backward) ---------------------------------------
    def save_for_backward(self, *arrays):
        """Keep arrays (inputs or outputs of forward) for backward.

        Each saved array that belongs to an input or output Tensor is checked against
        that Tensor's version counter when backward reads it, so a later in-place write
        raises instead of silently giving a wrong gradient.
        """
        self._saved = arrays

    @property
    def saved_tensors(self):
        saved = self._saved
        if saved is None:
            if self._freed:
                raise RuntimeError(
                    f"{type(self).__name__}: trying to backward through the graph a second time "
                    "(or to read saved tensors after they were freed). Pass retain_graph=True to "
                    "the first backward() if you need to backward twice.")
            return ()
        versions = self.__dict__.get("_saved_versions")
        if versions:
            for i, counter, expected, maker, out_idx in versions:
                if counter.value != expected:
                    a = saved[i]
                    raise _modified_error(self, a.dtype, a.shape, counter.value, expected,
                                          self if maker is _OWN_OUTPUT else maker, out_idx)
        return saved

    def mark_non_differentiable(self, *arrays):
        """Declare outputs (e.g. argmax indices) that never receive a gradient."""
        self._non_diff = arrays

    def set_materialize_grads(self, value):  # PyTorch API compatibility
        self.__dict__["_materialize"] = bool(value)

    # ---- graph construction ---------------------------------------------------------
    @classmethod
    def apply(cls, *args):
        """Run ``forward`` on ``args`` and, if any input requires grad, record the node."""
        ctx = cls.__new__(cls)
        ctx._saved = None
        ctx._non_diff = ()
        arrays = []
        needs = []
        any_req = False
        collect = _tls.collect
        bf16 = _BF16
        any_bf = False
        for a in args:
            if isinstance(a, Tensor):
                arr = a.array
                if arr.dtype is bf16:  # the one dtype check per argument on the fast path
                    any_bf = True
                arrays.append(arr)
                r = a.requires_grad
                needs.append(r)
                if r:
                    any_req = True
                    if collect is not None:
                        collect.setdefault(id(a), a)
            else:
                arrays.append(a)
                needs.append(False)
        ctx.needs_input_grad = tuple(needs)
        if any_bf and not cls.takes_bfloat16 and cls.view_of is None:
            out = _bf16_forward(cls, ctx, args, arrays)
        else:
            out = cls.forward(ctx, *arrays)
        multi = type(out) is tuple
        if not (any_req and _state.enabled):
            result = tuple(_wrap_plain(o) for o in out) if multi else _wrap_plain(out)
        else:
            ctx.next_edges = tuple([  # a list display: no generator frame per op
                None if not r else ((a, -1) if a.grad_fn is None else (a.grad_fn, a._out_idx))
                for a, r in zip(args, needs)])
            ctx._out_hooks = None
            ctx._freed = False
            ctx._trace = traceback.format_stack()[:-1] if _anomaly.enabled else None
            if multi:
                ctx._out_meta = tuple((o.shape, o.dtype) for o in out)
                result = tuple(_wrap_out(ctx, o, i) for i, o in enumerate(out))
            else:
                ctx._out_meta = None
                result = _wrap_out(ctx, out, 0)
            if ctx._saved:
                _record_saved_versions(ctx, args, result if multi else (result,))
                _saved_stats.record(ctx, args)
        if cls.view_of is not None:
            base = args[cls.view_of]
            if isinstance(base, Tensor):
                v = result[0] if multi else result
                v._version = base._version
                root = v._base = base if base._base is None else base._base
                if v.grad_fn is ctx and not multi and root.grad_fn is not None:
                    _register_view(ctx, root, v, args)
        return result

    def name(self):
        return type(self).__name__

    def __repr__(self):
        return f"<{type(self).__name__}>"


# ---- views follow an in-place rebase ------------------------------------------------------------
# An in-place op on a non-leaf that requires grad runs out of place and rebases the tensor onto
# the new node and buffer (``Tensor._inplace_result``). A view taken of it before would keep the
# old buffer and node; PyTorch's views stay aliased (their ``grad_fn`` is regenerated from the
# base's new one). So a recorded view of a non-leaf keeps its recipe (the view op's arguments,
# ``_view_args``) on its node and a weak reference in the root's node (``_views``, with the
# root's output index), and :func:`follow_rebase` replays the recipe on the rebased root: the
# view then shares the new buffer, version counter and graph. Leaves requiring grad cannot be
# written in place under grad mode, so their views (``w.t()`` every step) register nothing.
def _register_view(ctx, root, v, args):
    i = type(ctx).view_of  # the base's slot stays empty: the recipe does not keep it alive
    ctx.__dict__["_view_args"] = args[:i] + (None,) + args[i + 1:]
    d = root.grad_fn.__dict__
    views = d.get("_views")
    if views is None:
        views = d["_views"] = []
    elif len(views) >= 64 and not len(views) & (len(views) - 1):  # a long-lived root: drop dead refs
        views[:] = [e for e in views if e[1]() is not None]
    views.append((root._out_idx, weakref.ref(v)))


def _view_chain(v, root_fn, root_idx):
    """The view nodes from ``v`` back to output ``root_idx`` of ``root_fn``, or None."""
    chain = []
    node = v.grad_fn
    while isinstance(node, Function) and "_view_args" in node.__dict__:
        chain.append(node)
        e = node.next_edges[type(node).view_of]
        if e is None:
            return None
        if e[0] is root_fn and e[1] == root_idx:
            return chain
        node = e[0]
    return None


def follow_rebase(t, old_fn, old_idx):
    """After an in-place op rebased the non-leaf ``t`` from output ``old_idx`` of ``old_fn``
    onto a new node and buffer, make the live views taken of ``t`` before view the new buffer
    through the new node (see the comment above)."""
    views = old_fn.__dict__.get("_views") if old_fn is not None else None
    if not views:
        return
    rest = []
    for out_idx, ref in views:
        v = ref()
        if v is None:
            continue
        if out_idx != old_idx or v._base is not t:
            rest.append((out_idx, ref))
            continue
        chain = _view_chain(v, old_fn, old_idx)
        if chain is None:
            continue
        cur = t
        for node in reversed(chain):
            args = list(node._view_args)
            args[type(node).view_of] = cur
            cur = type(node).apply(*args)
        v.array, v.grad_fn, v._out_idx = cur.array, cur.grad_fn, cur._out_idx
        v.requires_grad, v._version = cur.requires_grad, cur._version
        if t.grad_fn is not None and v.grad_fn is not None:  # so that a second rebase finds it
            t.grad_fn.__dict__.setdefault("_views", []).append((t._out_idx, weakref.ref(v)))
    old_fn.__dict__["_views"] = rest


class _TLS(threading.local):
    collect = None  # a dict id -> Tensor while gradient checkpointing runs a segment


_tls = _TLS()


@contextlib.contextmanager
def _collecting(into):
    """While active, every op reports its inputs that require grad into the dict ``into``
    (``id -> Tensor``): how :func:`numbagrad.utils.checkpoint.checkpoint` finds the
    parameters a segment reads. Yields the collector it replaces."""
    prev = _tls.collect
    _tls.collect = into
    try:
        yield prev
    finally:
        _tls.collect = prev


def _record_saved_versions(ctx, args, outputs):
    # (slot, counter, its value now, the node that made the tensor (None for a leaf,
    # _OWN_OUTPUT for ctx itself, so no reference cycle), which of its outputs); the last
    # two only name the tensor in the error
    versions = []
    for i, s in enumerate(ctx._saved):
        for t in args:
            if isinstance(t, Tensor) and t.array is s:
                versions.append((i, t._version, t._version.value, t.grad_fn, t._out_idx))
                break
        else:
            for k, t in enumerate(outputs):
                if t.array is s:
                    versions.append((i, t._version, t._version.value, _OWN_OUTPUT, k))
                    break
    if versions:
        ctx.__dict__["_saved_versions"] = versions


_OWN_OUTPUT = object()  # marks an output of the node itself in its version records


def _modified_error(node, dtype, shape, now, expected, maker, out_idx):
    """PyTorch's error for a tensor that ``node``'s backward needs and that was written in
    place after the forward (``maker``: the node that made the tensor, None for a leaf)."""
    which = "" if maker is None else f", which is output {out_idx} of {type(maker).__name__},"
    return RuntimeError(
        f"one of the variables needed for gradient computation has been modified by an inplace "
        f"operation: [{dtype} {list(shape)}]{which} is at version {now}; expected version {expected} "
        f"instead. The backward of {type(node).__name__} needs it. Hint: the tensor was modified by an "
        "in-place operation after the forward; use the out-of-place form of the op, or .clone() the "
        "tensor before modifying it.")


def keep_versions(result, *tensors):
    """Make the backward of the node that produced ``result`` (a Tensor or a tuple of them)
    raise if any of ``tensors`` is written in place from now on; returns ``result``.

    For Tensor arguments that a forward does not receive as they are, so that
    ``save_for_backward`` cannot match them: index, mask and class-target tensors that the
    op layer converts (to int64, flattened, padded) before ``apply`` and whose arrays (or
    copies) backward reads again. PyTorch saves them and raises in this case; so does the
    engine, before it runs the node. Arguments that are not Tensors (arrays, lists, None)
    are skipped, and so is a result that no node recorded.
    """
    first = result[0] if type(result) is tuple else result
    node = first.grad_fn
    if node is None:
        return result
    d = node.__dict__
    kept = d.get("_kept_versions")
    for t in tensors:
        if isinstance(t, Tensor):
            if kept is None:
                kept = d["_kept_versions"] = []
            maker = t.grad_fn  # named in the error only (``node`` itself would be a cycle)
            kept.append((t._version, t._version.value, t.array.dtype, t.array.shape,
                         _OWN_OUTPUT if maker is node else maker, t._out_idx))
    return result


def check_kept_versions(node, kept):
    """Raise :func:`_modified_error` if a tensor recorded by :func:`keep_versions` changed
    (the engine calls it before ``node``'s backward)."""
    for counter, expected, dtype, shape, maker, out_idx in kept:
        if counter.value != expected:
            raise _modified_error(node, dtype, shape, counter.value, expected,
                                  node if maker is _OWN_OUTPUT else maker, out_idx)


# ---- bfloat16 storage ------------------------------------------------------------------------
# On the CPU bfloat16 is a storage type (numba has no bfloat16): an op whose Tensor arguments
# include bfloat16 arrays runs its forward on float32 copies of them; when every floating
# Tensor argument was bfloat16 its float32 results are rounded back to bfloat16 (round to
# nearest even), otherwise (bfloat16 meeting float32) they stay float32, as torch promotes.
# Backward mirrors it: gradients of rounded outputs are widened to float32 for the op's
# backward, and each returned input gradient is rounded to its input's dtype, so a bfloat16
# tensor's gradient is bfloat16 (as in torch). The wrapper is an instance attribute of the
# node (the engine calls ``node.backward(node, *grads)``), so float32 graphs never see it.
#
# What a node saves stays in bfloat16: a saved float32 copy of a bfloat16 input is replaced by
# the input itself (exact), and a saved float32 output by its rounded bfloat16 result (what
# torch saves), so saved activations take half the memory and the version checks see the
# input and output tensors; backward gets float32 copies of them again (``_Bf16Backward``).
def _bf16_forward(cls, ctx, args, arrays):
    all_bf = True
    widened = []  # (float32 copy, bfloat16 original)
    for i, a in enumerate(args):
        if isinstance(a, Tensor):
            arr = a.array
            if arr.dtype is _BF16:
                arrays[i] = backend_of(arr).astype(arr, _F32)
                widened.append((arrays[i], arr))
            elif _is_float(arr.dtype):
                all_bf = False
    out = cls.forward(ctx, *arrays)
    multi = type(out) is tuple
    outs = out if multi else (out,)
    if all_bf:
        wide = outs
        outs = tuple(_bf16_round(o) for o in outs)
        if ctx._non_diff:  # marked outputs are known by identity: follow them to the rounded ones
            ctx._non_diff = tuple(next((n for w, n in zip(wide, outs) if w is nd), nd) for nd in ctx._non_diff)
        widened.extend((w, n) for w, n in zip(wide, outs) if w is not n)
    narrow = None
    saved = ctx._saved
    if saved:
        saved = list(saved)
        for j, s in enumerate(saved):
            for w, n in widened:
                if s is w:
                    saved[j] = n
                    narrow = (narrow or ()) + (j,)
                    break
        if narrow:
            ctx._saved = tuple(saved)
    in_bf = tuple(isinstance(a, Tensor) and a.array.dtype is _BF16 for a in args)
    ctx.__dict__["backward"] = _Bf16Backward(cls.backward, in_bf, narrow)
    return outs if multi else outs[0]


def _bf16_round(o):
    """A float32 forward result as bfloat16 (other results unchanged)."""
    if not isinstance(o, _dispatch.ARRAY_TYPES):
        o = np.asarray(o)
    return backend_of(o).astype(o, _BF16) if o.dtype == _F32 else o


class _Bf16Backward:
    """A node's ``backward`` seen through the bfloat16 storage rule (see above)."""

    __slots__ = ("fn", "in_bf", "narrow")

    def __init__(self, fn, in_bf, narrow=None):
        # the op's backward; which inputs were bfloat16; which saved slots hold bfloat16
        self.fn, self.in_bf, self.narrow = fn, in_bf, narrow

    def __call__(self, ctx, *grads):
        grads = tuple(_bf16_widen_grad(g) for g in grads)
        saved = ctx._saved
        if self.narrow and saved is not None:  # float32 copies for the op's backward (the
            wide = list(saved)                  # version checks compare counters, not arrays)
            for j in self.narrow:
                wide[j] = backend_of(wide[j]).astype(wide[j], _F32)
            ctx._saved = tuple(wide)
            try:
                res = self.fn(ctx, *grads)
            finally:
                ctx._saved = saved
        else:
            res = self.fn(ctx, *grads)
        single = type(res) is not tuple
        res = (res,) if single else res
        res = tuple(_bf16_round_grad(g) if bf and g is not None else g
                    for g, bf in zip(res, self.in_bf + (False,) * (len(res) - len(self.in_bf))))
        return res[0] if single else res


def _bf16_widen_grad(g):
    return g if g is None or g.dtype is not _BF16 else backend_of(g).astype(g, _F32)


def _bf16_round_grad(g):
    if isinstance(g, Tensor):  # a backward may return Tensors (the engine unwraps them)
        g = g.array
    if not isinstance(g, _dispatch.ARRAY_TYPES):
        g = np.asarray(g)
    return g if g.dtype is _BF16 else backend_of(g).astype(g, _BF16)


def _wrap_out(ctx, o, i):
    """Wrap output ``i`` of a recorded node: differentiable unless integer/bool or marked."""
    if not isinstance(o, _dispatch.ARRAY_TYPES):
        o = np.asarray(o)  # NumPy ufuncs return scalars for 0-d inputs
    non_diff = ctx._non_diff
    if (o.dtype.kind not in "fc" and o.dtype is not _BF16) or (non_diff and any(o is nd for nd in non_diff)):
        return _wrap_plain(o)
    t = Tensor.__new__(Tensor)
    t.array = o
    t.requires_grad = True
    t.grad = None
    t.grad_fn = ctx
    t._out_idx = i
    t._version = _Version()
    t._hooks = None
    t._base = None
    return t


def _wrap_plain(o):
    t = Tensor.__new__(Tensor)
    t.array = o if isinstance(o, _dispatch.ARRAY_TYPES) else np.asarray(o)
    t.requires_grad = False
    t.grad = None
    t.grad_fn = None
    t._out_idx = 0
    t._version = _Version()
    t._hooks = None
    t._base = None
    return t


from ..tensor import Tensor, _Version  # noqa: E402
from ..backend import backend_of  # noqa: E402
from .._dtype import bfloat16 as _BF16, float32 as _F32, is_float as _is_float  # noqa: E402
