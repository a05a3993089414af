"""``GradScaler``: dynamic loss scaling (``torch.amp.GradScaler``), with torch's numerics.

The scale
---------
As in torch, the scale is a float32 value, created by the first :meth:`GradScaler.scale`
call from ``init_scale``, and a growth tracker counts consecutive finite steps. They are
kept on the host (a NumPy float32 and a Python int), so every figure below is exactly
torch's:

* ``scale(outputs)`` multiplies by the float32 scale, with torch's result dtypes (a 0-d
  float16 loss comes back float32; a float16 tensor with dimensions stays float16,
  multiplied in float32 and rounded once, as torch's ``opmath``).
* ``unscale_`` multiplies gradients by ``inv_scale = float32(1 / float64(scale))``
  (torch's ``scale.double().reciprocal().float()``).
* ``update()`` is ``_amp_update_scale_``: on a found inf/NaN ``scale = float32(float64(scale)
  * backoff_factor)`` and the tracker restarts; otherwise the tracker counts up, and at
  ``growth_interval`` ``scale = float32(float64(scale) * growth_factor)`` unless that is
  inf (ATen multiplies the float32 scale by the double factor, then rounds).

Unscaling over the optimizer's arena
------------------------------------
For a numbagrad optimizer (any :class:`numbagrad.optim.Optimizer`), ``unscale_`` asks it
for each group's flat arena with this step's gradients gathered, ``_prepare(group,
step=False)``: the same gather ``step()`` does (see ``numbagrad/optim/optimizer.py``), minus
the state it would create and the parameter versions it would bump, since the step may be
skipped. On the CPU the gather moves no data: the bucket's ``gsrc`` table points at each
``p.grad`` where backward left it (or at its arena slot). On CUDA gradients are copied into
the arena slot and ``p.grad`` rebound to it, as a step does. Then one fused kernel per bucket
(``be.kernel("amp", "unscale_check")``, ``kernels/{cpu,cuda}/amp.py``) multiplies every
active gradient by ``inv_scale`` in place, through the same tables the optimizer kernels
use, and flags any inf/NaN (before the multiply, as torch) into one float32 per device.
The gradients are unscaled where they live, so a following ``clip_grad_norm_`` sees
unscaled values, and ``optimizer.step()`` re-syncs (bookkeeping only: the addresses are
unchanged) and reads them with no second gather or copy. One difference from torch, in
what stays visible: a gradient the arena had to copy (non-contiguous, or on CUDA) is
unscaled in the arena slot that ``p.grad`` is rebound to, not in the old array.

Other optimizers (any object with ``param_groups``, as torch accepts) take the kernel once
per gradient, each gradient a one-parameter arena of its own.

bfloat16 gradients (and float16 ones on the CPU, which only the private ``allow_fp16`` path
reaches: ``unscale_`` refuses them as torch does) are unscaled through an exact float32
copy: the float32 kernel multiplies and checks it, and the products are rounded back once,
to nearest even (``kernels/cpu/convert.py``): torch's ``opmath`` arithmetic, bit for bit.

Data parallel: when a ``numbagrad.distributed`` process group is initialised, ``unscale_``
all-reduces its found-inf flag with MAX over the ranks (one 1-element all-reduce, on every
rank, also on one without gradients), so every rank skips the same steps and backs off
the same scale, even where the ranks' gradients differ (parameters outside the DDP wrapper,
gradients a rank changed after backward, a step without DDP). torch leaves that to DDP's
identical averaged gradients (and all-reduces it in its sharded scaler).

Differences from torch, all deliberate: ``update(new_scale)`` also takes an int; an
optimizer's ``_step_supports_amp_scaling`` is not consulted (no numbagrad optimizer sets
it); the found-inf flags are read on the host at ``step`` (torch reads them there too).
"""
from collections import defaultdict
import enum
import math
import numbers
import warnings

import numpy as np

from .._dtype import bfloat16 as _BF16
from ..backend import backend_of
from ..optim.optimizer import _BLOCK, Optimizer
from ..tensor import Tensor

__all__ = ["GradScaler", "OptState"]


class OptState(enum.Enum):
    """Where an optimizer is in the iteration (torch's ``OptState``)."""
    READY = 0
    UNSCALED = 1
    STEPPED = 2


def _refresh_per_optimizer_state():
    return {"stage": OptState.READY, "found_inf_per_device": {}}


_FIX = "This may indicate your script did not use scaler.scale(loss or outputs) earlier in the iteration."


class GradScaler:
    """``torch.amp.GradScaler(device="cuda", init_scale=2.**16, growth_factor=2.0,
    backoff_factor=0.5, growth_interval=2000, enabled=True)``: dynamic loss scaling.

    ``scaler.scale(loss)`` multiplies the loss by the scale :math:`S`, so backward produces
    :math:`S g`; ``scaler.step(optimizer)`` unscales (:math:`g = (S g) \\cdot S^{-1}`, one fused
    kernel per arena bucket, see the module docstring) and runs ``optimizer.step()`` unless
    a gradient held an inf or NaN; ``scaler.update()`` then sets

    .. math::

        S \\leftarrow \\begin{cases} S \\cdot \\text{backoff\\_factor} & \\text{inf/NaN found} \\\\
        S \\cdot \\text{growth\\_factor} & \\text{after growth\\_interval finite steps in a row} \\\\
        S & \\text{otherwise} \\end{cases}

    in float32, bit for bit as torch.

    Parameters
    ----------
    device : str, default "cuda"
        The device type of the scaled outputs (torch's default). ``"cuda"`` on a machine
        without a CUDA backend warns and disables the scaler, as torch does; use ``"cpu"``
        for CPU training.
    init_scale : float, default 2**16
    growth_factor : float, default 2.0 (must be > 1)
    backoff_factor : float, default 0.5 (must be < 1)
    growth_interval : int, default 2000
    enabled : bool, default True
        ``False`` makes every method a pass-through (``scale(x)`` is ``x``, ``step(opt)`` is
        ``opt.step()``), for the usual ``enabled=args.amp`` switch.

    Example
    -------
    >>> scaler = ng.amp.GradScaler("cpu")  # doctest: +SKIP
    >>> for x, y in loader:  # doctest: +SKIP
    ...     opt.zero_grad()
    ...     loss = F.cross_entropy(model(x), y)
    ...     scaler.scale(loss).backward()
    ...     scaler.unscale_(opt)                      # optional: clip unscaled gradients
    ...     ng.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    ...     scaler.step(opt)                          # skipped on inf/NaN gradients
    ...     scaler.update()
    """

    def __init__(self, device="cuda", init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5,
                 growth_interval=2000, enabled=True):
        self._device = device
        self._enabled = bool(enabled)
        if self._enabled and device == "cuda":
            from ..backend.dispatch import device_available
            if not device_available("cuda"):
                warnings.warn(f"{_qualname(self)} is enabled, but CUDA is not available.  Disabling.",
                              stacklevel=2)
                self._enabled = False
        if self._enabled:
            if not growth_factor > 1.0:
                raise AssertionError(f"The growth factor must be > 1.0 (growth_factor={growth_factor!r}).")
            if not backoff_factor < 1.0:
                raise AssertionError(f"The backoff factor must be < 1.0 (backoff_factor={backoff_factor!r}).")
        self._init_scale = init_scale
        self._scale = None              # np.float32, from the first scale()
        self._growth_factor = growth_factor
        self._backoff_factor = backoff_factor
        self._growth_interval = growth_interval
        self._init_growth_tracker = 0
        self._growth_tracker = None     # int, from the first scale()
        self._per_optimizer_states = defaultdict(_refresh_per_optimizer_state)
        self._multipliers = {}          # backend name -> (scale, 0-d float32 Tensor of it)

    # ---- scale ----------------------------------------------------------------------------
    def _check_scale_growth_tracker(self, funcname):
        if self._scale is None:
            raise AssertionError(f"Attempted {funcname} but _scale is None.  " + _FIX)
        if self._growth_tracker is None:
            raise AssertionError(f"Attempted {funcname} but _growth_tracker is None.  " + _FIX)

    def _lazy_init_scale_growth_tracker(self):
        if self._growth_tracker is not None:
            raise AssertionError("_growth_tracker initialized before _scale")
        self._scale = np.float32(self._init_scale)
        self._growth_tracker = int(self._init_growth_tracker)

    def _multiplier(self, t):
        """The scale as a 0-d float32 tensor on ``t``'s device (cached until it changes)."""
        be = backend_of(t.array)
        hit = self._multipliers.get(be.name)
        if hit is not None and hit[0] == self._scale:
            return hit[1]
        m = Tensor._from_array(be.asarray(np.array(self._scale, np.float32)))
        self._multipliers[be.name] = (self._scale, m)
        return m

    def _scale_tensor(self, t):
        if self._scale is None:
            self._lazy_init_scale_growth_tracker()
        m = self._multiplier(t)
        if t.array.dtype == np.float16 and t.ndim > 0:
            # torch keeps the dimensioned half tensor's dtype and multiplies in float32
            # by the float32 scale, rounding once: the same as this cast, multiply, cast
            return (t.float() * m).half()
        return t * m    # 0-d tensors promote as torch's (a 0-d float16 loss becomes float32)

    def scale(self, outputs):
        """``outputs`` (a tensor, or nested lists/tuples/iterables of tensors) multiplied by
        the scale, in the same structure (other iterables come back as ``map`` objects, as in
        torch); ``outputs`` itself when disabled."""
        if not self._enabled:
            return outputs
        if isinstance(outputs, Tensor):
            return self._scale_tensor(outputs)

        def apply(val):
            if isinstance(val, Tensor):
                return self._scale_tensor(val)
            if isinstance(val, (list, tuple)):
                return type(val)(map(apply, val))
            if hasattr(val, "__iter__"):
                return map(apply, val)
            raise ValueError(f"outputs must be a Tensor or an iterable of Tensors, got {type(val).__name__}")
        return apply(outputs)

    # ---- unscale --------------------------------------------------------------------------
    def _unscale_grads_(self, optimizer, inv_scale, allow_fp16=False):
        """Unscale every gradient of ``optimizer`` by ``inv_scale`` (float32) in place; returns
        ``{device type: 1-element float32 array, 1.0 where an inf/NaN was found}`` for the
        devices holding gradients (empty when none has one). float16 gradients are refused
        unless ``allow_fp16`` (torch's private flag; ``unscale_`` passes False)."""
        groups = optimizer.param_groups
        for group in groups:
            for p in group["params"]:
                g = p.grad
                if g is not None and g.array.dtype == np.float16 and not allow_fp16:
                    raise ValueError("Attempting to unscale FP16 gradients.")
        found = {}

        def flag(be):
            f = found.get(be.name)
            if f is None:
                f = found[be.name] = be.zeros(1, np.float32)
            return f

        if isinstance(optimizer, Optimizer):
            for group in groups:
                arena = optimizer._prepare(group, step=False)
                for b in arena.buckets:
                    if b.any_active:
                        _unscale_check(b.be, b.grad, b.tables, inv_scale, flag(b.be))
        else:
            for group in groups:
                for p in group["params"]:
                    if p.grad is not None:
                        _unscale_one(p.grad.array, inv_scale, flag)
        for group in groups:
            for p in group["params"]:
                g = p.grad
                if g is not None:
                    g._bump_version()
        return found

    def unscale_(self, optimizer):
        """Divide ("unscale") ``optimizer``'s gradients by the scale, in place, and record
        whether any was inf or NaN; at most once per optimizer between :meth:`update` calls,
        after every gradient has been accumulated (for example before gradient clipping).
        :meth:`step` calls it when it was not called. Nothing when disabled."""
        if not self._enabled:
            return
        self._check_scale_growth_tracker("unscale_")
        state = self._per_optimizer_states[id(optimizer)]
        if state["stage"] is OptState.UNSCALED:
            raise RuntimeError("unscale_() has already been called on this optimizer since the last update().")
        if state["stage"] is OptState.STEPPED:
            raise RuntimeError("unscale_() is being called after step().")
        # torch computes the reciprocal in float64 and rounds it to float32
        with np.errstate(divide="ignore", over="ignore"):
            inv_scale = np.float32(np.float64(1.0) / np.float64(self._scale))
        state["found_inf_per_device"] = _agree_found_inf(self._unscale_grads_(optimizer, inv_scale))
        state["stage"] = OptState.UNSCALED

    # ---- step / update --------------------------------------------------------------------
    @staticmethod
    def _found_inf(state):
        """The sum of ``state``'s found-inf flags (a host read of each device's flag)."""
        return sum(float(backend_of(f).to_numpy(f)[0]) for f in state["found_inf_per_device"].values())

    def step(self, optimizer, *args, **kwargs):
        """Unscale ``optimizer``'s gradients (unless :meth:`unscale_` already did), then run
        ``optimizer.step(*args, **kwargs)`` unless some gradient was inf or NaN; returns what
        that step returned, or None when it was skipped. Closures are not supported (as in
        torch); when disabled, just ``optimizer.step(*args, **kwargs)``."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("Closure use is not currently supported if GradScaler is enabled.")
        self._check_scale_growth_tracker("step")
        state = self._per_optimizer_states[id(optimizer)]
        if state["stage"] is OptState.STEPPED:
            raise RuntimeError("step() has already been called since the last update().")
        if state["stage"] is OptState.READY:
            self.unscale_(optimizer)
        if len(state["found_inf_per_device"]) == 0:
            raise AssertionError("No inf checks were recorded for this optimizer.")
        retval = None
        if not self._found_inf(state):
            retval = optimizer.step(*args, **kwargs)
        state["stage"] = OptState.STEPPED
        return retval

    def update(self, new_scale=None):
        """Update the scale: ``new_scale`` (a float, or a 1-element tensor on the scaler's
        device type that does not require grad) when given, else back off (an inf/NaN was
        found by some optimizer's unscale this iteration) or grow (``growth_interval``
        finite iterations in a row); see the class docstring. Call it once per iteration,
        after every ``step``. Nothing when disabled."""
        if not self._enabled:
            return
        self._check_scale_growth_tracker("update")
        if new_scale is not None:
            if isinstance(new_scale, numbers.Real) and not isinstance(new_scale, bool):
                with np.errstate(over="ignore"):
                    self._scale = np.float32(new_scale)
            else:
                reason = ("new_scale should be a float or a 1-element numbagrad Tensor with requires_grad=False "
                          f"on the scaler's device type {self._device!r}")
                if not isinstance(new_scale, Tensor):
                    raise AssertionError(f"{reason}; got {type(new_scale).__name__}")
                if new_scale.device.type != self._device:
                    raise AssertionError(f"{reason}; got a tensor on {new_scale.device}")
                if new_scale.numel() != 1:
                    raise AssertionError(f"{reason}; got a tensor of shape {tuple(new_scale.shape)}")
                if new_scale.requires_grad:
                    raise AssertionError(f"{reason}; got a tensor that requires grad")
                self._scale = np.float32(backend_of(new_scale.array).to_numpy(new_scale.array).reshape(-1)[0])
        else:
            found_infs = [f for state in self._per_optimizer_states.values()
                          for f in state["found_inf_per_device"].values()]
            if len(found_infs) == 0:
                raise AssertionError("No inf checks were recorded prior to update.")
            found = sum(float(backend_of(f).to_numpy(f)[0]) for f in found_infs)
            self._update_scale(found)
        self._per_optimizer_states = defaultdict(_refresh_per_optimizer_state)

    def _update_scale(self, found_inf):
        """ATen's ``_amp_update_scale_`` (float32 scale times a float64 factor, rounded)."""
        if found_inf:
            with np.errstate(over="ignore", under="ignore"):
                self._scale = np.float32(float(self._scale) * float(self._backoff_factor))
            self._growth_tracker = 0
        else:
            successful = self._growth_tracker + 1
            if successful == self._growth_interval:
                with np.errstate(over="ignore"):
                    grown = np.float32(float(self._scale) * float(self._growth_factor))
                if math.isfinite(grown):       # never grow past float32's range to inf
                    self._scale = grown
                self._growth_tracker = 0
            else:
                self._growth_tracker = successful

    # ---- getters / setters ----------------------------------------------------------------
    def get_scale(self):
        """The current scale as a Python float (``init_scale`` before the first
        :meth:`scale`); 1.0 when disabled."""
        if self._enabled:
            return self._init_scale if self._scale is None else float(self._scale)
        return 1.0

    def get_growth_factor(self):
        return self._growth_factor

    def set_growth_factor(self, new_factor):
        self._growth_factor = new_factor

    def get_backoff_factor(self):
        return self._backoff_factor

    def set_backoff_factor(self, new_factor):
        self._backoff_factor = new_factor

    def get_growth_interval(self):
        return self._growth_interval

    def set_growth_interval(self, new_interval):
        self._growth_interval = new_interval

    def _get_growth_tracker(self):
        if self._enabled:
            return self._init_growth_tracker if self._growth_tracker is None else self._growth_tracker
        return 0

    def is_enabled(self):
        return self._enabled

    # ---- state ----------------------------------------------------------------------------
    def state_dict(self):
        """``{"scale", "growth_factor", "backoff_factor", "growth_interval",
        "_growth_tracker"}`` as Python floats and ints (torch's keys; ``numbagrad.save``
        writes them); ``{}`` when disabled. Take it after :meth:`update`."""
        if self._enabled:
            return {"scale": self.get_scale(), "growth_factor": self._growth_factor,
                    "backoff_factor": self._backoff_factor, "growth_interval": self._growth_interval,
                    "_growth_tracker": self._get_growth_tracker()}
        return {}

    def load_state_dict(self, state_dict):
        """Load :meth:`state_dict`'s output (nothing when disabled)."""
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise RuntimeError("The source state dict is empty, possibly because it was saved "
                               "from a disabled instance of GradScaler.")
        keys = ("scale", "growth_factor", "backoff_factor", "growth_interval", "_growth_tracker")
        missing = [k for k in keys if k not in state_dict]
        if missing:
            raise KeyError(f"{_qualname(self)}.load_state_dict: the state dict lacks {missing} "
                           f"(it has {sorted(state_dict)})")
        self._init_scale = state_dict["scale"]
        if self._scale is not None:
            self._scale = np.float32(state_dict["scale"])
        self._growth_factor = state_dict["growth_factor"]
        self._backoff_factor = state_dict["backoff_factor"]
        self._growth_interval = state_dict["growth_interval"]
        self._init_growth_tracker = int(state_dict["_growth_tracker"])
        if self._growth_tracker is not None:
            self._growth_tracker = int(state_dict["_growth_tracker"])

    def __getstate__(self):
        state = self.__dict__.copy()
        if self._enabled:
            if len(self._per_optimizer_states) != 0:
                raise AssertionError("A GradScaler instance may only be pickled at the beginning "
                                     "of an iteration, or at the end after scaler.update().")
            state["_init_scale"] = self.get_scale()
            state["_init_growth_tracker"] = self._get_growth_tracker()
            state["_scale"] = None
            state["_growth_tracker"] = None
        state["_per_optimizer_states"] = None
        state["_multipliers"] = {}
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._per_optimizer_states = defaultdict(_refresh_per_optimizer_state)


def _agree_found_inf(found):
    """``found`` (``{device type: 1-element float32 flag}``) with every flag set to the
    MAX of all flags over the ranks of the default process group (unchanged without
    one). Every rank makes this one all-reduce, so a rank without gradients joins too."""
    from .. import distributed
    if not distributed.is_initialized():
        return found
    local = max((float(backend_of(f).to_numpy(f)[0]) for f in found.values()), default=0.0)
    t = Tensor._from_array(np.array([local], np.float32))
    distributed.all_reduce(t, op=distributed.ReduceOp.MAX)
    v = t.array[0]
    return {k: backend_of(f).asarray(np.full(1, v, np.float32)) for k, f in found.items()}


def _qualname(obj):
    return f"{type(obj).__module__.replace('.grad_scaler', '')}.{type(obj).__qualname__}"


# ---- gradients outside a numbagrad optimizer's arena ------------------------------------------------
_ONE_TABLES = {}


def _one_tables(be, n):
    """Arena tables for one gradient of ``n`` elements as a one-parameter arena (cached)."""
    key = (be.name, n)
    t = _ONE_TABLES.get(key)
    if t is None:
        start = np.arange(0, n, _BLOCK, dtype=np.int64)
        end = np.minimum(start + _BLOCK, n)
        t = (be.asarray(start), be.asarray(end), be.asarray(np.zeros(start.size, np.int64)),
             be.asarray(np.ones(1, np.uint8)), np.zeros(2, np.int64))
        if len(_ONE_TABLES) >= 64:
            _ONE_TABLES.clear()
        _ONE_TABLES[key] = t
    return t


def _unscale_one(a, inv_scale, flag):
    """The unscale kernel over one gradient array ``a`` (copied to a contiguous buffer and
    back when strided)."""
    be = backend_of(a)
    contiguous = a.flags.c_contiguous
    work = be.flat(a) if contiguous else be.contiguous(a).reshape(-1)
    _unscale_check(be, work, _one_tables(be, work.size), inv_scale, flag(be))
    if not contiguous:
        a[...] = work.reshape(a.shape)


_F32 = np.dtype(np.float32)


def _unscale_check(be, grad, tables, inv_scale, found):
    """The ``amp.unscale_check`` kernel over the 1-D contiguous ``grad`` with arena ``tables``.

    A 2-byte float gradient on the CPU (bfloat16, float16: numba has neither type) is
    widened exactly to a float32 copy (``kernels/cpu/convert.py``), unscaled and checked
    there by the float32 kernel, and rounded back into ``grad`` once, to nearest even. That
    is torch's arithmetic: ATen's CPU unscale loads each bfloat16/float16 element as its
    float32 ``opmath`` type, multiplies by the float32 ``inv_scale`` and rounds the product
    once, so the results match it bit for bit. Elements of inactive parameters go through
    the round trip unchanged (a widening is exact and its rounding returns the same bits;
    only a NaN's payload may become the quiet NaN)."""
    kernel = be.kernel("amp", "unscale_check")
    dt = grad.dtype
    if not be.wide_dtypes or dt in be.kernel_dtypes:   # the kernel takes it (CUDA widens float16 itself)
        if dt == _BF16:
            raise TypeError(f"GradScaler.unscale_: bfloat16 gradients are supported on the CPU only, got one "
                            f"on {be.name} (shape {tuple(grad.shape)})")
        kernel(grad, *tables, inv_scale, found)   # CUDA widens float16 itself
        return
    if tables[4][0::2].any():   # gsrc: the float32 copy holds every gradient in its slot
        raise AssertionError("GradScaler.unscale_: a 2-byte float gradient bucket read in place")
    if dt in be.wide_dtypes:
        wide = be.widen(grad)
        kernel(wide, *tables, inv_scale, found)
        if inv_scale != 1:                        # as the kernel: nothing stored for 1
            be.narrow_into(wide, grad)
    else:
        raise TypeError(f"GradScaler.unscale_: gradients must be floating point, got dtype {dt} "
                        f"(shape {tuple(grad.shape)})")
