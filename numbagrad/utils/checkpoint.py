"""Gradient checkpointing (``torch.utils.checkpoint``): trade compute for memory.

``checkpoint(fn, *args)`` runs ``fn`` without recording its graph, so none of the
activations inside it are kept; one graph node stands for the whole call and holds only
its inputs. When backward reaches that node, ``fn`` runs again with the random state it
saw the first time (so dropout draws the same mask), its graph is built, and the
gradients are computed through it with the same kernels in the same order: they equal
those of the un-checkpointed run bit for bit.

The tensors ``fn`` uses besides its arguments (a module's parameters, a closure's
tensors) are found while it runs the first time: every op reports the inputs that
require grad, and those that are not produced inside ``fn`` become inputs of the node,
so their gradients flow as without checkpointing (to ``.grad`` through ``backward``, or
to ``autograd.grad``).

numbagrad has one implementation, the non-reentrant kind: ``use_reentrant`` is accepted
and ignored. A tensor that ``fn`` reads from outside which requires grad and is itself
the result of an op (not a leaf, not an argument) must be passed as an argument.
"""
from ..autograd.function import Function, _collecting
from ..autograd.grad_mode import _state, enable_grad, no_grad
from ..tensor import Tensor
from .. import _dtype, random as _random
from ..nn.container import fused_pair, run_sequence

__all__ = ["checkpoint", "checkpoint_sequential"]

def _flatten(obj, out):
    """The tensors in nested tuples/lists/dicts ``obj``, in order, appended to ``out``."""
    if isinstance(obj, Tensor):
        out.append(obj)
    elif isinstance(obj, (tuple, list)):
        for o in obj:
            _flatten(o, out)
    elif isinstance(obj, dict):
        for o in obj.values():
            _flatten(o, out)
    return out


def _rebuild(obj, it):
    """``obj`` with each tensor replaced by the next item of ``it``."""
    if isinstance(obj, Tensor):
        return next(it)
    if isinstance(obj, tuple):
        return type(obj)(*(_rebuild(o, it) for o in obj)) if hasattr(obj, "_fields") else \
            tuple(_rebuild(o, it) for o in obj)
    if isinstance(obj, list):
        return [_rebuild(o, it) for o in obj]
    if isinstance(obj, dict):
        return {k: _rebuild(v, it) for k, v in obj.items()}
    return obj


def _detached(t):
    d = Tensor._from_array(t.array)
    d.requires_grad = t.requires_grad
    return d


class _Segment:
    """What the checkpoint node keeps: the function, the structure of its arguments and
    outputs, and the random state before its first run."""
    __slots__ = ("fn", "args", "kwargs", "arg_tensors", "outer", "out_struct", "out_arrays", "rng", "name")


class _Checkpoint(Function):
    @staticmethod
    def forward(ctx, seg, *arrays):
        ctx.seg = seg
        ctx.save_for_backward(*[t.array for t in seg.arg_tensors])  # what the node holds, as memory_stats sees it
        out = seg.out_arrays
        seg.out_arrays = None
        return out if len(out) > 1 else out[0]

    @staticmethod
    def backward(ctx, *grads):
        from ..autograd.engine import _execute
        seg = ctx.seg
        ctx.saved_tensors  # noqa: B018 -- raises if an argument was modified in place since the first run
        args = [_detached(t) for t in seg.arg_tensors]
        call_args = _rebuild(seg.args, iter(args))
        keep = _random.default_generator.get_state() if seg.rng is not None else None
        try:
            if seg.rng is not None:
                _random.default_generator.set_state(seg.rng)
            with enable_grad():
                out = seg.fn(*call_args, **seg.kwargs)
        finally:
            if keep is not None:
                _random.default_generator.set_state(keep)
        outs = [t for t in _flatten(out, []) if _dtype.is_float(t.dtype)]
        if len(outs) != len(grads):
            raise RuntimeError(f"checkpoint: the recomputation of {seg.name} returned {len(outs)} floating-point "
                               f"tensors, the first run {len(grads)}: the function must return the same outputs "
                               "every time")
        targets = [a for a in args if a.requires_grad] + list(seg.outer)
        capture = {}
        for k, t in enumerate(targets):
            capture.setdefault(id(t), []).append(k)
        results = [None] * len(targets)
        pairs = [(o, g) for o, g in zip(outs, grads) if o.requires_grad]
        if pairs:
            _execute([o for o, _ in pairs], [Tensor._from_array(g) for _, g in pairs], retain_graph=False,
                     capture=(capture, results), only_leaves=set())
        return (None,) + tuple(results)


def checkpoint(function, *args, use_reentrant=None, context_fn=None, determinism_check="default",
               debug=False, preserve_rng_state=True, **kwargs):
    """Run ``function(*args, **kwargs)`` keeping none of its activations; backward runs it
    again (see the module docstring). ``function`` may be any callable or Module;
    arguments may be tensors (requiring grad or not) or anything else, outputs nested
    tuples/lists/dicts of tensors and other values."""
    if not callable(function):
        raise TypeError(f"checkpoint: function must be a callable or Module, got {type(function).__name__}")
    if context_fn is not None:
        raise NotImplementedError("checkpoint: context_fn is not supported")
    name = getattr(function, "__qualname__", None) or type(function).__name__
    if not _state.enabled:
        return function(*args, **kwargs)
    arg_tensors = _flatten(args, [])
    seg = _Segment()
    seg.fn, seg.args, seg.kwargs, seg.arg_tensors, seg.name = function, args, kwargs, arg_tensors, name
    seg.rng = _random.default_generator.get_state() if preserve_rng_state else None
    inner_args = _rebuild(args, iter([_detached(t) for t in arg_tensors]))
    seen = {}
    with _collecting(seen) as prev, no_grad():
        out = function(*inner_args, **kwargs)
    arg_ids = {id(t) for t in _flatten(inner_args, [])}
    outer = []
    for t in seen.values():
        if id(t) in arg_ids:
            continue
        if t.grad_fn is not None:
            raise RuntimeError(f"checkpoint({name}): the function reads a tensor of shape {tuple(t.shape)} that "
                               "requires grad and is the result of an op outside it (not an argument); pass it as "
                               "an argument so its gradient can flow")
        outer.append(t)
    if prev is not None:  # a checkpoint inside a checkpoint's first run: report outward
        for t in outer:
            prev.setdefault(id(t), t)
    seg.outer = outer
    out_tensors = _flatten(out, [])
    wants = any(t.requires_grad for t in arg_tensors) or bool(outer)
    diff = [t for t in out_tensors if _dtype.is_float(t.dtype)]
    if not wants:
        return out
    if not diff:
        raise RuntimeError(f"checkpoint({name}): the function returned no floating-point tensor, so no gradient "
                           "can flow through it; checkpoint only functions whose output is differentiable")
    seg.out_arrays = tuple(t.array for t in diff)
    inputs = [t for t in arg_tensors if t.requires_grad] + outer
    res = _Checkpoint.apply(seg, *inputs)
    res = res if isinstance(res, tuple) else (res,)
    it = iter(res)
    mapping = {id(t): next(it) for t in diff}
    return _rebuild(out, iter([mapping.get(id(t), t) for t in out_tensors]))


def checkpoint_sequential(functions, segments, input, use_reentrant=None, **kwargs):
    """Run ``functions`` (a Sequential or a list of callables) in ``segments`` chunks, each
    but the last under :func:`checkpoint` (``torch.utils.checkpoint.checkpoint_sequential``).
    Each chunk runs as :class:`~numbagrad.nn.Sequential` runs its modules (the same fused
    Linear + activation nodes), so the gradients are those of the plain Sequential."""
    if hasattr(functions, "children") and not isinstance(functions, (list, tuple)):
        functions = list(functions.children())
    functions = list(functions)
    if not isinstance(segments, int) or segments < 1:
        raise ValueError(f"checkpoint_sequential: segments must be a positive int, got {segments!r}")
    if segments > len(functions):
        raise ValueError(f"checkpoint_sequential: {segments} segments for {len(functions)} functions")
    # segment sizes differ by at most one, the larger ones first: the last segment runs
    # un-checkpointed (its graph is the one alive when backward starts, beside the other
    # segments' inputs), so it is the smallest
    n = len(functions)
    sizes = [n // segments + (1 if k < n % segments else 0) for k in range(segments)]
    # a cut between a Linear and the activation fused with it moves one later, so that
    # every segment computes what the plain Sequential does, bit for bit
    cuts, at = [], 0
    for size in sizes[:-1]:
        at += size
        c = at + 1 if fused_pair(functions[at - 1], functions[at]) else at
        if (cuts[-1] if cuts else 0) < c < n:
            cuts.append(c)
    bounds = [0] + cuts + [n]

    def run(start, end):
        def forward(x):
            return run_sequence(functions[start:end], x)
        forward.__qualname__ = f"segment[{start}:{end}]"
        return forward

    for start, end in zip(bounds[:-2], bounds[1:-1]):
        input = checkpoint(run(start, end), input, **kwargs)
    return run(bounds[-2], n)(input)
