"""Gradient clipping (``torch.nn.utils.clip_grad``): :func:`clip_grad_norm_`,
:func:`get_total_norm`, :func:`clip_grads_with_norm_`, :func:`clip_grad_value_`.

Each is one fused kernel call per (device, dtype) group of gradients, whatever their
number (``kernels/{cpu,cuda}/clip.py``): the norm of every gradient together in one
reduction, then every gradient scaled (or clamped) in one pass. Gradients that the kernels
cannot take (non-contiguous ones, float16 on the CPU) go through NumPy, one array at a
time. ``foreach`` is accepted for PyTorch's signature and ignored: the fused path is
always taken.

Semantics are PyTorch's: parameters without a gradient are skipped; the total norm is the
norm of the per-tensor norms (so for ``norm_type=0`` it counts the gradients with a
non-zero element), returned as a 0-d tensor of the gradients' dtype; the clip coefficient
is ``min(max_norm / (total_norm + 1e-6), 1)`` computed in that dtype. A coefficient of
exactly 1 leaves every gradient unchanged, so the scaling pass is skipped then (PyTorch
multiplies by 1).
"""
import math

import numpy as np

from ...backend import backend_of
from ...tensor import Tensor

__all__ = ["clip_grad_norm_", "clip_grad_norm", "clip_grad_value_", "get_total_norm", "clip_grads_with_norm_"]


def _as_list(tensors):
    if isinstance(tensors, Tensor):
        return [tensors]
    return list(tensors)


def _fusable(a, be):
    """The kernels take C-contiguous float arrays of the backend's ``kernel_dtypes`` (no
    float16 on the CPU)."""
    if not a.flags.c_contiguous or a.dtype.kind != "f":
        return False
    return a.dtype in be.kernel_dtypes


def _group(arrays):
    """``{(array type, dtype, fusable): [arrays]}`` in first-seen order, with the backends."""
    groups = {}
    bes = {}
    for a in arrays:
        t = type(a)
        be = bes.get(t)
        if be is None:
            be = bes[t] = backend_of(a)
        key = (t, a.dtype, _fusable(a, be))
        groups.setdefault(key, []).append(a)
    return groups, bes


def _combine(values, p):
    """The ``p``-norm of the non-negative float64 ``values`` (norms of groups)."""
    v = np.asarray(values, np.float64)
    if np.isnan(v).any():
        return math.nan
    if p == math.inf:
        return float(v.max())
    if p == -math.inf:
        return float(v.min())
    if p == 0:
        return float(np.count_nonzero(v))
    if p == 1:
        return float(v.sum())
    if p == 2:
        return math.sqrt(math.fsum(v * v))
    with np.errstate(all="ignore"):
        return float(np.sum(v ** p) ** (1.0 / p))


def _numpy_norm(arrays, be, p):
    """Norm of arrays the kernels do not take (float64 on the host)."""
    norms = []
    with np.errstate(all="ignore"):
        for a in arrays:
            h = np.asarray(be.to_numpy(a), np.float64).reshape(-1)
            if p == 0:
                norms.append(float(np.count_nonzero(h)))
            elif h.size == 0:
                norms.append(math.inf if p == -math.inf else 0.0)
            else:
                norms.append(_combine(np.abs(h), p))
    return norms


def get_total_norm(tensors, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """The ``norm_type`` norm of the norms of ``tensors`` (usually gradients), as if they were
    concatenated into one vector; a 0-d tensor (``torch.nn.utils.get_total_norm``)."""
    arrays = [t.array if isinstance(t, Tensor) else t for t in _as_list(tensors)]
    norm_type = float(norm_type)
    if not arrays:
        return Tensor._from_array(np.zeros((), np.float32))
    groups, bes = _group(arrays)
    results = []      # (backend, dtype, float64 value on host or None, device float64 array or None)
    for (t, dt, fused), arrs in groups.items():
        be = bes[t]
        if fused:
            out = be.zeros(1, np.float64)
            be.kernel("clip", "grad_norm")(arrs, norm_type, out)
            results.append((be, dt, None, out))
        else:
            results.append((be, dt, _combine(_numpy_norm(arrs, be, norm_type), norm_type), None))
    be0 = bes[type(arrays[0])]
    if len(results) == 1:
        be, dt, host, dev = results[0]
        dt = np.float32 if dt == np.float16 and dt not in be.kernel_dtypes else dt
        if dev is not None:
            total = be.astype(dev, dt).reshape(())
        else:
            total = be.asarray(np.array(host, dt).reshape(()))
    else:
        vals, dts = [], []
        for be, dt, host, dev in results:
            v = host if dev is None else float(be.to_numpy(dev)[0])
            vals.append(float(np.asarray(v, dt)))     # each group's norm in its dtype, as PyTorch
            dts.append(dt)
        dt = np.result_type(*dts)
        total = be0.asarray(np.array(_combine(vals, norm_type), dt).reshape(()))
    if error_if_nonfinite:
        v = float(np.asarray(be0.to_numpy(total)))
        if not math.isfinite(v):
            raise RuntimeError(f"The total norm of order {norm_type} for gradients from `parameters` is non-finite, "
                               "so it cannot be clipped. To disable this error and scale the gradients by the "
                               "non-finite norm anyway, set `error_if_nonfinite=False`")
    return Tensor._from_array(total)


def clip_grads_with_norm_(parameters, max_norm, total_norm, foreach=None):
    """Scale the gradients of ``parameters`` by ``min(max_norm / (total_norm + 1e-6), 1)``
    (``torch.nn.utils.clip_grads_with_norm_``); ``total_norm`` from :func:`get_total_norm`."""
    grads = [p.grad for p in _as_list(parameters) if p.grad is not None]
    if not grads:
        return
    max_norm = float(max_norm)
    tn = total_norm.array if isinstance(total_norm, Tensor) else np.asarray(total_norm)
    groups, bes = _group([g.array for g in grads])
    for (t, dt, fused), arrs in groups.items():
        be = bes[t]
        tot = tn.reshape(1)
        if type(tot) is not t:
            tot = be.asarray(backend_of(tot).to_numpy(tot))
        if tot.dtype == np.float16 and tot.dtype not in be.kernel_dtypes:
            tot = tot.astype(np.float32)
        if fused:
            be.kernel("clip", "grad_scale")(arrs, tot, max_norm)
        else:
            from ...kernels._clip_common import clip_coef
            c = clip_coef(np.asarray(be.to_numpy(tot)), max_norm)
            if c != 1:
                for a in arrs:
                    np.multiply(a, a.dtype.type(c), out=a)
    for g in grads:
        g._bump_version()


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """Clip the gradients of ``parameters`` (a tensor or an iterable of tensors) in place so
    that their total ``norm_type`` norm is at most ``max_norm``; returns the total norm before
    clipping, a 0-d tensor (``torch.nn.utils.clip_grad_norm_``). ``norm_type`` may be any
    float or ``inf``; ``error_if_nonfinite`` raises ``RuntimeError`` on a NaN or infinite
    total norm."""
    parameters = _as_list(parameters)
    grads = [p.grad for p in parameters if p.grad is not None]
    if not grads:
        return Tensor._from_array(np.zeros((), np.float32))
    total = get_total_norm(grads, norm_type, error_if_nonfinite, foreach)
    clip_grads_with_norm_(parameters, max_norm, total, foreach)
    return total


def clip_grad_norm(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """Deprecated alias of :func:`clip_grad_norm_` (as in PyTorch)."""
    import warnings
    warnings.warn("`numbagrad.nn.utils.clip_grad_norm` is now deprecated in favor of "
                  "`numbagrad.nn.utils.clip_grad_norm_`.", FutureWarning, stacklevel=2)
    return clip_grad_norm_(parameters, max_norm, norm_type, error_if_nonfinite, foreach)


def clip_grad_value_(parameters, clip_value, foreach=None):
    """Clamp every gradient of ``parameters`` into ``[-clip_value, clip_value]`` in place
    (``torch.nn.utils.clip_grad_value_``)."""
    clip_value = float(clip_value)
    grads = [p.grad for p in _as_list(parameters) if p.grad is not None]
    if not grads:
        return
    groups, bes = _group([g.array for g in grads])
    for (t, dt, fused), arrs in groups.items():
        be = bes[t]
        if fused:
            be.kernel("clip", "grad_clamp")(arrs, -clip_value, clip_value)
        else:
            for a in arrs:
                # clamp(min=-v, max=v): max first, then min, so -v > v gives v everywhere, as torch
                np.minimum(np.maximum(a, a.dtype.type(-clip_value), out=a), a.dtype.type(clip_value), out=a)
    for g in grads:
        g._bump_version()
