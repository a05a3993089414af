"""``Optimizer``: parameter groups, lazy per-parameter state, ``state_dict`` in PyTorch's
layout, and the flat *arena* that lets one fused kernel update a whole group.

The fused path
--------------
On the first ``step()`` of a parameter group the optimizer lays the group out in
flat, contiguous 1-D arrays, one set per dtype (a *bucket*):

* ``param``: every parameter's values back to back. Each ``Parameter.array`` is
  rebound to a view into it, so the model keeps computing with the same memory the
  optimizer updates.
* ``grad``: same layout, a slot per parameter, and ``gsrc``, a small int64 table saying
  where the kernels read each parameter's gradient from this step (two entries per
  parameter: ``gsrc[2i]`` a data address, 0 for "the arena slot"; ``gsrc[2i+1]`` the
  parameter's first element in the arena). Each step :meth:`Optimizer._sync` looks at
  ``p.grad``:

  - it *is* the slot (after a copy, see below, and ``zero_grad(set_to_none=False)``):
    address 0, nothing moves. The autograd engine accumulates into an existing ``.grad``
    in place, so the gradient stays there step after step.
  - a CPU array of the bucket's dtype and the parameter's shape, C-contiguous and aligned
    (what backward leaves after the default ``zero_grad(set_to_none=True)``, as torch's
    ``.grad``): no copy. Its address goes into ``gsrc`` and the kernels read it where it
    is (``grad_block`` in ``numbagrad/kernels/cpu/optim.py``). ``p.grad`` stays that array
    and keeps it alive for the kernel call; the slot is not touched (it holds whatever was
    last copied there). ``zero_grad(set_to_none=False)`` zeroes that array in place and
    backward accumulates into it, so the next step reads it again without a copy.
  - anything else (non-contiguous, another dtype, any CUDA bucket): copied into the slot
    (cast as needed), address 0, and ``p.grad`` is rebound to the slot (same values), so
    from then on, with ``set_to_none=False``, backward accumulates into the arena and
    steps copy nothing. CUDA launchers take ``gsrc`` and ignore it: there it is all zeros.

  So in the common cases a step moves no gradient data; per parameter it costs Python
  bookkeeping only (checks, the address; measured in ``perf/README.md``, "Optimizer
  kernels").
* one flat array per state buffer (Adam's ``exp_avg``/``exp_avg_sq``, SGD's
  ``momentum_buffer``), starting at 0 or at :meth:`Optimizer._initial_value` (Adagrad's
  ``initial_accumulator_value``); ``optimizer.state[p][name]`` are Tensor views into them;
* one float32 array per per-parameter scalar state (``step``, NAdam's ``mu_product``);
  ``state[p][name]`` are 0-d views into them, first in the state dict, as torch orders them;
* ``scal``: ``_scal_width`` scalars per parameter for the kernels' per-parameter pre-pass
  (bias corrections), and :meth:`_Bucket.scratch` work arrays (LAMB's update); neither
  is state.

Then the update is a single kernel call over the whole bucket
(``numbagrad/kernels/cpu/optim.py``), whatever the number of parameters: per-parameter
Python work is limited to bookkeeping (is ``p.array`` still the arena view, is there a
gradient and where is it, bump the version counter). Parameters without a gradient are
skipped by the kernel, exactly as PyTorch skips them (their step count does not advance).

bfloat16 parameters (numba has no bfloat16) get a bucket whose arena (``param``, the
gradient slots, every state buffer) is bfloat16, as torch keeps the state of a bfloat16
parameter in bfloat16; gradients are always copied into the slots. Each step widens the
bucket to float32 work arrays (exactly), runs the float32 kernel on them, and rounds the
parameters and the state back to bfloat16 to nearest even (``kernels/cpu/convert.py``):
one rounding per stored value per step, where torch's single-tensor CPU ops on bfloat16
round after every op, so the two agree to bfloat16 rounding, not bit for bit. Scalar
state (``step``) stays float32.

If anything rebinds ``p.array`` (``module.to(float64)``, ``p.array = ...``), changes the
group's parameter list, or changes which state buffers the group needs (``amsgrad``),
the next ``step()`` notices and rebuilds the arena, carrying the state over.

So does rebinding a state entry (``optimizer.state[p]['exp_avg'] = t``, a new ``step``,
a deleted entry, or a replaced ``state[p]``): ``_sync`` checks that each populated state
still holds the bucket's own views (an identity test per entry, see ``perf/README.md``,
"Optimizer kernels"), and the rebuild copies the new values into the arena and
rebinds ``t.array`` to its arena view, so ``t`` stays the state and is updated in place by
later steps, as in torch (a deleted buffer starts again from its initial value).
"""
from collections import defaultdict, namedtuple
from itertools import chain
import copy
import warnings

import numpy as np

from .. import _dtype
from ..autograd.grad_mode import enable_grad
from ..backend import backend_of
from ..tensor import Tensor, _zero_grad

__all__ = ["Optimizer", "required"]

# Blocks of the arena handed to the kernel's prange (one block never spans two
# parameters); small enough to balance threads, large enough to amortise the loop.
_BLOCK = 16384


class _RequiredParameter:
    """Singleton marking a hyperparameter that has no default."""

    def __repr__(self):
        return "<required parameter>"


required = _RequiredParameter()

ArenaLayout = namedtuple("ArenaLayout", "blk_start blk_end blk_seg active gsrc")
ArenaLayout.__doc__ = """A bucket's arena tables, the one ``layout`` argument every optimizer kernel takes
(``kernels/{cpu,cuda}/optim*.py``): blocks ``blk_start[b]:blk_end[b]`` of parameter
``blk_seg[b]`` (int64), ``active`` (uint8, a gradient this step) and ``gsrc`` (int64, where
each gradient is read from); see the module docstring."""


class _Bucket:
    """The parameters of one group that share a dtype, laid out in flat arrays (see the
    module docstring); built by :meth:`Optimizer._build` from the optimizer's arena
    configuration (``_scalar_keys()``, ``_initial_value``, ``_flag_key``, ``_scal_width``,
    ``_scal_wide``), carrying over the state the parameters already have."""

    __slots__ = ("dtype", "params", "pviews", "gviews", "gtensors", "param", "grad", "bufs", "buf_views",
                 "scalars", "scalar_views", "steps", "step_views", "flags", "blk_start", "blk_end", "blk_seg",
                 "active", "gsrc", "zero_copy", "tables", "scal", "work", "populated", "any_active", "be",
                 "active_host", "watch")

    def __init__(self, opt, dtype, params, keys):
        self.dtype = dtype
        self.params = params
        # Arrays live on the parameters' device (the backend of their arrays); the small
        # per-parameter tables are built on the host and handed over once (``be.host_table``),
        # except the ``active`` flags, which _sync sets on the host each step and uploads.
        self.be = backend_of(params[0].array)
        offsets = np.zeros(len(params) + 1, np.int64)
        np.cumsum([p.array.size for p in params], out=offsets[1:])
        sts = [opt.state.get(p) for p in params]
        fk = opt._flag_key   # read before _pack_buffers starts missing buffers of populated states
        flagged = [1 if fk is not None and st and st.get(fk) is not None else 0 for st in sts]
        self.flags = self.be.host_table(np.array(flagged, np.uint8))
        self.populated = [bool(st) for st in sts]
        self._pack_params(offsets)
        self._pack_buffers(opt, keys, sts, offsets)
        self._pack_scalars(opt, sts)
        self._lay_out_blocks(offsets)
        wide = opt._scal_wide and np.dtype(dtype) != np.float64 or dtype == _BF16
        self.scal = self.be.zeros(opt._scal_width * len(params), np.float32 if wide else dtype)
        self.work = {}
        self.any_active = False

    def _pack_params(self, offsets):
        """The ``param`` arena (each ``p.array`` rebound to its view) and the ``grad`` slots."""
        be = self.be
        self.param = be.empty(int(offsets[-1]), self.dtype)
        self.grad = be.zeros(int(offsets[-1]), self.dtype)
        self.pviews, self.gviews, self.gtensors = [], [], []
        for i, p in enumerate(self.params):
            lo, hi, shape = offsets[i], offsets[i + 1], p.array.shape
            v = self.param[lo:hi].reshape(shape)
            v[...] = p.array
            p.array = v
            self.pviews.append(v)
            gv = self.grad[lo:hi].reshape(shape)
            self.gviews.append(gv)
            self.gtensors.append(Tensor._from_array(gv))

    def _pack_buffers(self, opt, keys, sts, offsets):
        """One flat array per state buffer, starting at :meth:`Optimizer._initial_value` or at
        the value a parameter's state already holds (see :meth:`_carry_over`)."""
        be = self.be
        self.bufs = {}
        self.buf_views = {}
        for key in keys:
            init = opt._initial_value(key)
            total = int(offsets[-1])
            flat = be.full(total, init, self.dtype) if init else be.zeros(total, self.dtype)
            views = []
            for i, st in enumerate(sts):
                t = Tensor._from_array(flat[offsets[i]:offsets[i + 1]].reshape(self.pviews[i].shape))
                if st and key in st and st[key] is not None:
                    t = st[key] = self._carry_over(key, st[key], t)
                elif st:  # a populated state without this buffer (deleted, or a new option): start it
                    st[key] = t
                views.append(t)
            self.bufs[key] = flat
            self.buf_views[key] = views

    def _carry_over(self, key, old, t):
        """The state value ``old`` of buffer ``key`` copied into its arena view ``t``; returns
        the Tensor the state holds from now on: ``old`` itself rebound to the arena when it is
        a plain Tensor of the arena's device and dtype (as in torch), else ``t``."""
        arr = old.array if isinstance(old, Tensor) else np.asarray(old)
        if type(arr) is not type(t.array):
            arr = self.be.asarray(backend_of(arr).to_numpy(arr))
        if arr.shape != t.array.shape:
            raise ValueError(f"optimizer state {key!r} of a parameter has shape {tuple(arr.shape)}, "
                             f"but the parameter has shape {tuple(t.array.shape)}")
        t.array[...] = arr
        if (isinstance(old, Tensor) and old is not t and type(old.array) is type(t.array)
                and old.array.dtype == t.array.dtype and old.grad_fn is None and old._base is None):
            old.array = t.array  # the caller's own tensor now aliases the arena, as in torch
            return old
        return t

    def _pack_scalars(self, opt, sts):
        """The per-parameter scalar states: float32 arrays, ``state[p][key]`` 0-d views into
        them, in torch's place in the state (before the buffers)."""
        n = len(sts)
        self.scalars = {}
        self.scalar_views = {}
        order = [key for key, _ in opt._scalar_keys()]
        for key, init in opt._scalar_keys():
            host = np.full(n, init, np.float32)
            for i, st in enumerate(sts):
                if st and st.get(key) is not None:
                    host[i] = _scalar_value(st[key])
            arr = self.scalars[key] = self.be.host_table(host)
            views = self.scalar_views[key] = [Tensor._from_array(arr[i:i + 1].reshape(())) for i in range(n)]
            for i, st in enumerate(sts):
                if st:
                    fresh = key not in st
                    st[key] = views[i]
                    if fresh:  # a state without it: put it in torch's place, with the other scalars first
                        lead = {k: st[k] for k in order if k in st}
                        rest = [(k, v) for k, v in st.items() if k not in lead]
                        st.clear()
                        st.update(lead)
                        st.update(rest)
        # what _sync checks each step: a populated state's entries are still these views
        self.watch = tuple(self.buf_views.items()) + tuple(self.scalar_views.items())
        self.steps = self.scalars.get("step")
        if self.steps is None:
            self.steps = self.be.zeros(n, np.float32)
        self.step_views = self.scalar_views.get("step")

    def _lay_out_blocks(self, offsets):
        """The kernels' :class:`ArenaLayout`: blocks of at most ``_BLOCK`` elements inside one
        parameter, the ``active`` flags and ``gsrc`` (where each gradient is read from:
        address, 0 for the arena slot, then the parameter's first element)."""
        be = self.be
        n = len(self.params)
        starts, ends, segs = [], [], []
        for i in range(n):
            lo, hi = int(offsets[i]), int(offsets[i + 1])
            for s in range(lo, hi, _BLOCK):
                starts.append(s)
                ends.append(min(s + _BLOCK, hi))
                segs.append(i)
        self.blk_start = be.host_table(np.array(starts, np.int64))
        self.blk_end = be.host_table(np.array(ends, np.int64))
        self.blk_seg = be.host_table(np.array(segs, np.int64))
        self.active_host = np.zeros(n, np.uint8)
        self.active = be.host_table(self.active_host)
        # gsrc stays on the host: a device that cannot read gradients in place (no
        # ``zero_copy_grads``) keeps it all zeros and its launchers ignore it
        self.gsrc = np.zeros(2 * n, np.int64)
        self.gsrc[1::2] = offsets[:-1]
        self.zero_copy = be.zero_copy_grads and self.dtype in be.kernel_dtypes  # bfloat16's kernels read float32
        self.tables = ArenaLayout(self.blk_start, self.blk_end, self.blk_seg, self.active, self.gsrc)

    def scratch(self, name, size, dtype):
        """A work array of the kernels (zeros when first asked for), kept with the bucket and
        rebuilt with the arena; not optimizer state (neither in ``state`` nor pickled)."""
        a = self.work.get(name)
        if a is None:
            a = self.work[name] = self.be.zeros(size, dtype)
        return a


_BF16 = _dtype.bfloat16


class _Wide:
    """A bfloat16 bucket as the float32 kernels see it (see the module docstring): float32
    copies of ``param``, ``grad`` and the state buffers; every other attribute (tables, step
    counts, flags, ``scal``, scratch arrays) is the bucket's own. :meth:`store` rounds the
    parameters and the state back into the bucket."""

    def __init__(self, bucket):
        widen = bucket.be.widen
        self._b = bucket
        self.dtype = np.dtype(np.float32)
        self.param = widen(bucket.param)
        self.grad = widen(bucket.grad)
        self.bufs = {k: widen(v) for k, v in bucket.bufs.items()}

    def __getattr__(self, name):
        return getattr(self._b, name)

    def store(self):
        b = self._b
        for wide, narrow in ((self.param, b.param), *((self.bufs[k], b.bufs[k]) for k in b.bufs)):
            b.be.narrow_into(wide, narrow)


_Arena = namedtuple("_Arena", "group params keys buckets")
_Arena.__doc__ = "The buckets of one parameter group, and what they were built from."


class Optimizer:
    """Base class of optimizers (``torch.optim.Optimizer``).

    ``params`` is an iterable of Tensors, or of dicts each defining a parameter group
    (``{"params": [...], "lr": ...}``); options missing from a group take the
    optimizer's ``defaults``. Subclasses implement :meth:`_update_bucket`, the fused
    kernel call for one bucket of the arena (see the module docstring), or :meth:`step`.

    bfloat16 parameters are accepted by every fused optimizer (not ``LBFGS``): their state
    buffers are bfloat16 (``step`` float32), as torch's; each step computes the update in
    float32 from the widened parameter, gradient and state and rounds the new parameter
    and state once to bfloat16 (round to nearest even). float16 parameters are refused on
    the CPU.
    """

    # Subclass configuration of the fused arena.
    _uses_step = False   # keep a per-parameter step count (state['step'])
    _scalar_state = ()   # more per-parameter 0-d float32 state after 'step': ((key, initial value), ...)
    _flag_key = None     # a state key whose presence means "initialised" (SGD's momentum buffer)
    _scal_width = 2      # per-parameter scalars in ``bucket.scal`` (the kernels' ``seg_scal``)
    _scal_wide = False   # ``scal`` in float32 for float16 arenas (else in the parameter dtype)

    def __init__(self, params, defaults):
        self.defaults = defaults
        self.state = defaultdict(dict)
        self.param_groups = []
        self._arenas = {}
        if isinstance(params, Tensor):
            raise TypeError("params argument given to the optimizer should be an iterable of Tensors or dicts, "
                            f"but got {type(params).__name__}")
        if isinstance(params, set):
            raise TypeError("optimizer parameters need to be organized in ordered collections, but the "
                            "ordering of tensors in sets will change between runs. Please use a list instead.")
        groups = list(params)
        if len(groups) == 0:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for g in groups:
            self.add_param_group(g)

    # ---- groups ---------------------------------------------------------------------
    def add_param_group(self, param_group):
        """Add a group of parameters (a dict with ``"params"`` and optional options)."""
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, but got {type(param_group).__name__}")
        params = param_group["params"]
        if isinstance(params, Tensor):
            params = [params]
        elif isinstance(params, set):
            raise TypeError("optimizer parameters need to be organized in ordered collections, but the "
                            "ordering of tensors in sets will change between runs. Please use a list instead.")
        else:
            params = list(params)
        for p in params:
            if not isinstance(p, Tensor):
                raise TypeError(f"optimizer can only optimize Tensors, but one of the params is {type(p).__name__}")
            if p.grad_fn is not None:
                raise ValueError("can't optimize a non-leaf Tensor")
            if not _dtype.is_float(p.array.dtype):
                raise TypeError(f"optimizer can only optimize floating point Tensors, got dtype {p.dtype}")
        seen = set()
        unique = []
        for p in params:
            if id(p) not in seen:
                seen.add(id(p))
                unique.append(p)
        if len(unique) != len(params):
            warnings.warn("optimizer contains a parameter group with duplicate parameters; they are used once",
                          stacklevel=3)
        group = dict(param_group)
        group["params"] = unique
        for name, default in self.defaults.items():
            if default is required and name not in group:
                raise ValueError(f"parameter group didn't specify a value of required optimization parameter {name}")
            group.setdefault(name, default)
        existing = {id(p) for g in self.param_groups for p in g["params"]}
        if existing & seen:
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(group)

    # ---- gradients ------------------------------------------------------------------
    def zero_grad(self, set_to_none=True):
        """Reset every parameter's gradient: to None (default), or to zero in place
        (which keeps gradients in the flat arena, see the module docstring)."""
        for group in self.param_groups:
            for p in group["params"]:
                _zero_grad(p, set_to_none)

    def step(self, closure=None):
        """Update the parameters once; ``closure`` re-evaluates the model and returns the loss.

        The fused optimizers define :meth:`_update_bucket` and inherit this step: one kernel
        call per bucket of parameters with a gradient (see :meth:`_active_buckets`)."""
        if self._update_bucket is None:
            raise NotImplementedError
        loss = self._closure(closure)
        for hyper, bucket, t in self._active_buckets():
            if bucket.dtype == _BF16:  # computed in float32, rounded back (module docstring)
                wide = _Wide(bucket)
                self._update_bucket(hyper, wide, np.float32)
                wide.store()
            else:
                self._update_bucket(hyper, bucket, t)
        return loss

    # ``_update_bucket(hyper, bucket, t)``: the fused update of one bucket (a subclass's method)
    _update_bucket = None

    def _closure(self, closure):
        if closure is None:
            return None
        with enable_grad():
            return closure()

    # ---- fused arena ----------------------------------------------------------------
    _state_names = ()  # the flat state buffers of every group (or override _state_keys)

    def _state_keys(self, group):
        """Names of the flat state buffers this group needs (``_state_names`` unless overridden)."""
        return self._state_names

    def _initial_value(self, key):
        """The value state buffer ``key`` starts at for a parameter without state (override)."""
        return 0.0

    def _scalar_keys(self):
        """``(key, initial value)`` of the per-parameter float32 scalar states, in state order."""
        return ((("step", 0.0),) if self._uses_step else ()) + tuple(self._scalar_state)

    def _active_buckets(self):
        """What a fused ``step()`` iterates: for each parameter group its arena (see
        :meth:`_prepare`), then ``(hyper, bucket, t)`` for each bucket with a gradient this
        step, ``hyper`` the group's :class:`_Hyper` and ``t`` the bucket's scalar type."""
        for group in self.param_groups:
            if group.get("differentiable"):
                _refuse_differentiable(type(self).__name__)   # a group added with the flag
            arena = self._prepare(group)
            hyper = _Hyper(group)
            for b in arena.buckets:
                if b.any_active:
                    yield hyper, b, b.dtype.type

    def _prepare(self, group, step=True):
        """The group's arena, (re)built if needed, with this step's gradients gathered
        and ``active`` flags set. See the module docstring.

        ``step=False`` gathers only, for a caller that works on the gradients before the
        step (``amp.GradScaler.unscale_``): no state is created for the parameters and no
        parameter's version moves, since the step that would write them may be skipped."""
        keys = self._state_keys(group)
        arena = self._arenas.get(id(group))
        params = group["params"]
        if (arena is None or arena.group is not group or arena.keys != keys or len(arena.params) != len(params)
                or any(a is not b for a, b in zip(arena.params, params))):
            arena = self._build(group, keys)
        while not self._sync(arena, step):
            arena = self._build(group, keys)
        return arena

    def _build(self, group, keys):
        params = list(group["params"])
        by_dtype = {}
        for p in params:
            dt = p.array.dtype
            be = backend_of(p.array)
            # a dtype the device's kernels compute in, or bfloat16 widened to float32 (the CPU)
            if dt == _BF16 and dt not in be.wide_dtypes:
                raise TypeError(f"{type(self).__name__}: bfloat16 parameters are supported on the CPU only, "
                                f"got one on {p.device}")
            if dt == np.float16 and dt not in be.kernel_dtypes:
                raise TypeError(f"{type(self).__name__}: float16 parameters are not supported on the CPU (Numba "
                                "has no float16); keep float32 master weights")
            by_dtype.setdefault((be, dt), []).append(p)
        if len({k[0] for k in by_dtype}) > 1:
            raise RuntimeError(f"{type(self).__name__}: the parameters of one group are on different devices "
                               f"({sorted({str(p.device) for p in params})}); use one device per group")
        buckets = [_Bucket(self, dt, ps, keys) for (_, dt), ps in by_dtype.items()]
        arena = _Arena(group, params, keys, buckets)
        self._arenas[id(group)] = arena
        return arena

    def _sync(self, arena, step=True):
        """Point the kernels at this step's gradients (``gsrc``: read in place, or copied into
        the arena slot, see the module docstring) and mark active parameters; False when
        some ``p.array`` is no longer its arena view (the caller rebuilds). ``step``: also
        create the active parameters' state and bump their versions (see :meth:`_prepare`)."""
        state = self.state
        for b in arena.buckets:
            scalar_views = b.scalar_views
            act = b.active_host
            gsrc = b.gsrc
            dt = b.dtype
            in_place = b.zero_copy
            addr_of = b.be.addr_of
            pv, gv, gt, pop, watch = b.pviews, b.gviews, b.gtensors, b.populated, b.watch
            any_active = False
            for i, p in enumerate(b.params):
                if p.array is not pv[i]:
                    return False
                if pop[i] and watch:  # a state entry rebound (``state[p]['exp_avg'] = t``): re-pack
                    st = state.get(p)
                    if st is None:
                        return False
                    for k, views in watch:
                        if st.get(k) is not views[i]:
                            return False
                g = p.grad
                if g is None:
                    act[i] = 0
                    continue
                gd = g.array
                addr = 0
                if gd is not gv[i]:
                    if gd.shape != pv[i].shape:
                        raise RuntimeError(f"{type(self).__name__}.step: a parameter of shape {tuple(pv[i].shape)} "
                                           f"has a gradient of shape {tuple(gd.shape)}")
                    if type(gd) is not type(gv[i]):
                        raise RuntimeError(f"{type(self).__name__}.step: a parameter on {p.device} has a gradient "
                                           f"on {g.device}")
                    fl = gd.flags
                    if in_place and gd.dtype == dt and fl.c_contiguous and fl.aligned:
                        addr = addr_of(gd)  # read where it is; p.grad keeps it alive
                    else:
                        np.copyto(gv[i], gd, casting="unsafe")
                        t = gt[i]
                        t.array = gv[i]
                        p.grad = t
                gsrc[2 * i] = addr
                act[i] = 1
                any_active = True
                if not step:
                    continue
                if not pop[i]:
                    pop[i] = True
                    if scalar_views or arena.keys:
                        st = state[p]
                        for k, views in scalar_views.items():
                            st[k] = views[i]
                        for k in arena.keys:
                            st[k] = b.buf_views[k][i]
                p._version.value += 1
            b.any_active = any_active
            if act is not b.active and any_active:
                b.active[...] = act
        return True

    # ---- state dict -----------------------------------------------------------------
    def state_dict(self):
        """``{'state': {index: {...}}, 'param_groups': [{..., 'params': [indices]}]}``,
        PyTorch's layout: parameters are numbered in group order. State tensors are
        references (views of the optimizer's buffers), as in PyTorch."""
        index = {}
        groups = []
        for g in self.param_groups:
            packed = {k: v for k, v in g.items() if k != "params"}
            ids = []
            for p in g["params"]:
                if id(p) not in index:
                    index[id(p)] = len(index)
                ids.append(index[id(p)])
            packed["params"] = ids
            groups.append(packed)
        by_id = {id(p): p for g in self.param_groups for p in g["params"]}
        state = {}
        for p, st in self.state.items():
            if isinstance(p, Tensor) and id(p) in index and by_id.get(id(p)) is p:
                state[index[id(p)]] = dict(st)
            elif not isinstance(p, Tensor):
                state[p] = st
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict):
        """Load a state dict from :meth:`state_dict` (copies its tensors)."""
        groups = self.param_groups
        saved_groups = copy.deepcopy(list(state_dict["param_groups"]))
        if len(groups) != len(saved_groups):
            raise ValueError("loaded state dict has a different number of parameter groups "
                             f"({len(saved_groups)} vs the optimizer's {len(groups)})")
        for k, (g, sg) in enumerate(zip(groups, saved_groups)):
            if len(g["params"]) != len(sg["params"]):
                raise ValueError(f"loaded state dict contains a parameter group that doesn't match the size of "
                                 f"optimizer's group (group {k}: {len(sg['params'])} vs {len(g['params'])} params)")
        id_map = dict(zip(chain.from_iterable(sg["params"] for sg in saved_groups),
                          chain.from_iterable(g["params"] for g in groups)))
        new_state = defaultdict(dict)
        scalars = {"step"} | {key for key, _ in self._scalar_keys()}
        for k, v in state_dict["state"].items():
            if k in id_map:
                p = id_map[k]
                new_state[p] = {name: _copy_state_value(p, val, name in scalars) for name, val in v.items()}
            else:
                new_state[k] = copy.deepcopy(v)
        new_groups = []
        for k, (g, sg) in enumerate(zip(groups, saved_groups)):
            # A flag added after the state was saved takes its default (PyTorch's __setstate__
            # does the same); a missing hyperparameter means another optimizer's state.
            missing = [key for key, v in self.defaults.items() if key not in sg and v is not None
                       and not isinstance(v, bool)]
            if missing:
                raise ValueError(f"{type(self).__name__}.load_state_dict: parameter group {k} of the loaded "
                                 f"state lacks {missing} (its keys are {sorted(set(sg) - {'params'})}); "
                                 f"was it saved by another optimizer class?")
            for key, v in self.defaults.items():
                sg.setdefault(key, v)
            sg["params"] = g["params"]
            if "betas" in sg and isinstance(sg["betas"], list):
                sg["betas"] = tuple(sg["betas"])
            new_groups.append(sg)
        self.state = new_state
        self.param_groups = new_groups
        self._arenas = {}

    def __getstate__(self):
        return {"defaults": self.defaults, "state": self.state, "param_groups": self.param_groups}

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._arenas = {}

    def __repr__(self):
        s = type(self).__name__ + " ("
        for i, group in enumerate(self.param_groups):
            s += f"\nParameter Group {i}"
            for key in sorted(group):
                if key != "params":
                    s += f"\n    {key}: {group[key]}"
        return s + "\n)"


def _copy_state_value(param, value, scalar):
    """A loaded state value as a Tensor of its own (``scalar``: a per-parameter float32
    scalar state such as ``step``)."""
    if isinstance(value, Tensor):
        arr = value.array
    elif hasattr(value, "shape") and hasattr(value, "dtype"):
        arr = np.asarray(value)  # NumPy array or CPU torch tensor
    else:
        return copy.deepcopy(value)
    if scalar:
        return Tensor._from_array(np.array(arr, dtype=np.float32, copy=True))
    dt = param.array.dtype if arr.dtype.kind == "f" else arr.dtype
    return Tensor._from_array(np.array(arr, dtype=dt, copy=True))


def _scalar_value(v):
    """A scalar state value (Tensor, NumPy or torch scalar, Python number) as a float."""
    if hasattr(v, "item"):
        return float(v.item())
    return float(np.asarray(v))


_LABELS = {"lr": "learning rate", "eps": "epsilon value"}


def _check_hyper(owner, *, differentiable=False, nan_ok=False, unit=(), closed_betas=False, **values):
    """torch's constructor checks: each of ``values`` (in the order given; None or
    ``required`` skips one) must be >= 0 (``nan_ok``: only not < 0, as torch's SGD, except
    ``lr``: a NaN learning rate is always refused), and
    <= 1 when named in ``unit``; ``betas`` in [0, 1) (``closed_betas``: [0, 1]). Then
    ``differentiable=True`` is refused: every update is a fused in-place kernel."""
    for key, v in values.items():
        if v is None or v is required:
            continue
        if key == "betas":
            for i, beta in enumerate(v[:2]):
                if not (0.0 <= beta <= 1.0 if closed_betas else 0.0 <= beta < 1.0):
                    raise ValueError(f"Invalid beta parameter at index {i}: {beta}")
            continue
        ok = not v < 0.0 if nan_ok and key != "lr" else 0.0 <= v  # a NaN lr never (torch's SGD lets it by)
        if ok and key in unit:
            ok = v <= 1.0
        if not ok:
            raise ValueError(f"Invalid {_LABELS.get(key, key + ' value')}: {v}")
    if differentiable:
        _refuse_differentiable(owner)


def _refuse_differentiable(owner):
    raise NotImplementedError(f"{owner}: differentiable=True (autograd through the update) is not supported; "
                              "the update is a fused in-place kernel")


class _Hyper:
    """A group's hyperparameters as Python floats, read once per step: ``lr``, ``beta1``
    and ``beta2`` (``betas``), ``eps``, ``wd`` (``weight_decay``), ``decoupled``
    (``decoupled_weight_decay``), ``sign`` (-1 when maximizing), ``lerp_small`` (which
    branch ``torch.lerp`` takes for the weight ``1 - beta1``); options a group does not
    have read as 0 / False. ``group`` is the group itself."""

    __slots__ = ("group", "lr", "beta1", "beta2", "eps", "wd", "decoupled", "sign", "lerp_small")

    def __init__(self, group):
        self.group = group
        self.lr = float(group["lr"])
        betas = group.get("betas", (0.0, 0.0))
        self.beta1, self.beta2 = float(betas[0]), float(betas[1])
        self.eps = float(group.get("eps", 0.0))
        self.wd = float(group.get("weight_decay", 0.0))
        self.decoupled = bool(group.get("decoupled_weight_decay", False))
        self.sign = -1.0 if group.get("maximize", False) else 1.0
        self.lerp_small = abs(1.0 - self.beta1) < 0.5

    def moments(self, t):
        """``(omb1, omw, b2, omb2)`` in type ``t``: the lerp weight ``1 - beta1``, ``1 -
        omb1`` (the other ``torch.lerp`` branch), ``beta2`` and ``1 - beta2``."""
        omb1 = t(1.0 - self.beta1)
        return omb1, t(1) - omb1, t(self.beta2), t(1.0 - self.beta2)

    def adam(self, t):
        """The per-element scalars of the Adam family's kernels, in type ``t``: the
        :meth:`moments`, ``eps``, ``wd`` (L2 decay added to the gradient; 0 when
        decoupled), ``decay`` (``1 - lr * weight_decay`` when decoupled, else 1), ``sign``."""
        d = self.decoupled
        return self.moments(t) + (t(self.eps), t(0.0 if d else self.wd), t(1.0 - self.lr * self.wd if d else 1.0),
                                  t(self.sign))
