"""The op-test base: one call checks an op's forward against a NumPy reference, its
gradients against float64 central differences, and (when PyTorch is installed) both
against PyTorch.

Usage::

    from optest import check_op
    check_op(ng.exp, np.exp, [randn(3, 4)], torch_fn=torch_or_none("exp"))

* ``fn(*tensors, **kwargs)`` is the numbagrad op; ``ref(*arrays, **kwargs)`` is a plain
  NumPy reference evaluated in float64 on the same values.
* ``inputs`` are NumPy arrays (float64 masters); floating ones are cast to each dtype of
  ``dtypes``; integer/bool ones are passed unchanged and never differentiated.
* The gradient check runs in float64 with one random output direction ``v``: the
  analytic ``v^T J`` from ``backward`` is compared with the central difference of
  ``<v, fn(x)>`` either element by element (small inputs) or along ``n_dirs`` random
  directions (Chainer's trick for large inputs).
* ``noncontig=True`` repeats the forward and gradient checks with every floating
  input made non-contiguous (a transposed copy's transpose).
"""
import numpy as np

import numbagrad as ng
from numbagrad.backend import config

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None

TOL = {np.float32: dict(rtol=1e-4, atol=1e-5), np.float64: dict(rtol=1e-7, atol=1e-9)}


def randn(*shape, seed=None, low=None):
    rng = np.random.default_rng(seed if seed is not None else abs(hash(shape)) % (2 ** 32))
    a = rng.standard_normal(shape)
    if low is not None:  # keep away from a kink/singularity at 0: |a| >= low
        a = np.where(np.abs(a) < low, np.sign(a + 1e-12) * low, a)
    return np.asarray(a, dtype=np.float64)


def _is_float(a):
    return isinstance(a, np.ndarray) and a.dtype.kind == "f"


def _noncontig(a):
    if not _is_float(a) or a.ndim < 1:
        return a
    b = np.asfortranarray(a) if a.ndim >= 2 else np.repeat(a, 2)[::2]
    assert np.array_equal(b, a)
    return b


def _to_tensors(inputs, dtype, requires_grad=False, noncontig=False):
    out = []
    for a in inputs:
        if _is_float(a):
            arr = a.astype(dtype)
            if noncontig:
                arr = _noncontig(arr)
            t = ng.Tensor._from_array(arr)
            if requires_grad:
                t.requires_grad_(True)
            out.append(t)
        else:
            out.append(a)
    return out


def _outputs(r):
    if isinstance(r, (tuple, list)):
        return [o for o in r]
    return [r]


def _np(x):
    if isinstance(x, ng.Tensor):
        return np.asarray(x.detach().numpy())
    return np.asarray(x)


def _arrays(inputs):
    return [np.asarray(a) if isinstance(a, np.generic) else a for a in inputs]


def check_forward(fn, ref, inputs, dtypes=(np.float32, np.float64), kwargs=None, tol=None, noncontig=False):
    kwargs = kwargs or {}
    inputs = _arrays(inputs)
    expected = [np.asarray(e) for e in _outputs(ref(*inputs, **kwargs))]
    for dtype in dtypes:
        for nc in ((False, True) if noncontig else (False,)):
            got = _outputs(fn(*_to_tensors(inputs, dtype, noncontig=nc), **kwargs))
            assert len(got) == len(expected), f"{len(got)} outputs, reference has {len(expected)}"
            for g, e in zip(got, expected):
                g = _np(g)
                assert g.shape == e.shape, f"shape {g.shape} != reference {e.shape} (dtype {dtype})"
                t = (tol or {}).get(dtype, TOL[dtype])
                if e.dtype.kind == "f":
                    assert g.dtype == dtype, f"output dtype {g.dtype}, expected {np.dtype(dtype)}"
                np.testing.assert_allclose(g.astype(np.float64), e.astype(np.float64), err_msg=f"dtype={dtype}", **t)


def _scalar_objective(fn, tensors, kwargs, vs):
    outs = _outputs(fn(*tensors, **kwargs))
    total = 0.0
    for o, v in zip(outs, vs):
        if v is not None:
            total += float(np.sum(_np(o).astype(np.float64) * v))
    return total


def check_grad(fn, inputs, kwargs=None, eps=1e-6, rtol=1e-5, atol=1e-7, n_dirs=6, max_elementwise=64,
               noncontig=False, seed=0):
    """Analytic gradients vs float64 central differences (see the module docstring)."""
    kwargs = kwargs or {}
    inputs = _arrays(inputs)
    rng = np.random.default_rng(seed)
    for nc in ((False, True) if noncontig else (False,)):
        ts = _to_tensors(inputs, np.float64, requires_grad=True, noncontig=nc)
        outs = _outputs(fn(*ts, **kwargs))
        vs = [rng.standard_normal(o.shape) if isinstance(o, ng.Tensor) and o.requires_grad else None for o in outs]
        diff = [i for i, t in enumerate(ts) if isinstance(t, ng.Tensor)]
        used = [o for o, v in zip(outs, vs) if v is not None]
        assert used, "op produced no differentiable output"
        ng.autograd.backward(used, [ng.tensor(v) for v in vs if v is not None])
        for i in diff:
            ana = np.zeros(ts[i].shape) if ts[i].grad is None else _np(ts[i].grad)
            assert ana.shape == ts[i].shape, f"grad shape {ana.shape} != input shape {ts[i].shape}"
            base = [t.detach().numpy().copy() if isinstance(t, ng.Tensor) else t for t in ts]

            def f_at(x):
                args = [ng.Tensor._from_array(x) if k == i else
                        (ng.Tensor._from_array(b) if isinstance(ts[k], ng.Tensor) else b)
                        for k, b in enumerate(base)]
                with ng.no_grad():
                    return _scalar_objective(fn, args, kwargs, vs)

            x0 = base[i]
            if x0.size <= max_elementwise:
                num = np.zeros(x0.size)
                for k in range(x0.size):
                    xp = x0.copy().reshape(-1)
                    xm = x0.copy().reshape(-1)
                    xp[k] += eps
                    xm[k] -= eps
                    num[k] = (f_at(xp.reshape(x0.shape)) - f_at(xm.reshape(x0.shape))) / (2 * eps)
                np.testing.assert_allclose(ana.reshape(-1), num, rtol=rtol, atol=atol,
                                           err_msg=f"gradient of input {i} (noncontig={nc})")
            else:
                for _ in range(n_dirs):
                    d = rng.standard_normal(x0.shape)
                    num = (f_at(x0 + eps * d) - f_at(x0 - eps * d)) / (2 * eps)
                    np.testing.assert_allclose(np.sum(ana * d), num, rtol=rtol, atol=atol * max(1, x0.size),
                                               err_msg=f"directional gradient of input {i} (noncontig={nc})")


def check_torch(fn, torch_fn, inputs, kwargs=None, torch_kwargs=None, dtype=np.float64, rtol=1e-6, atol=1e-8,
                grad=True):
    """Forward and gradients equal to PyTorch's (skips silently when torch is missing)."""
    if torch is None or torch_fn is None:
        return
    kwargs = kwargs or {}
    inputs = _arrays(inputs)
    torch_kwargs = kwargs if torch_kwargs is None else torch_kwargs
    ts = _to_tensors(inputs, dtype, requires_grad=grad)
    tt = [torch.tensor(a.astype(dtype), requires_grad=grad) if _is_float(a) else
          (torch.from_numpy(a) if isinstance(a, np.ndarray) else a) for a in inputs]
    outs = _outputs(fn(*ts, **kwargs))
    touts = _outputs(torch_fn(*tt, **torch_kwargs))
    rng = np.random.default_rng(1)
    for o, to in zip(outs, touts):
        np.testing.assert_allclose(_np(o), to.detach().numpy(), rtol=rtol, atol=atol, err_msg="vs torch forward")
    if not grad:
        return
    pairs = [(o, to) for o, to in zip(outs, touts) if isinstance(o, ng.Tensor) and o.requires_grad]
    vs = [rng.standard_normal(o.shape) for o, _ in pairs]
    ng.autograd.backward([o for o, _ in pairs], [ng.tensor(v.astype(dtype)) for v in vs])
    torch.autograd.backward([to for _, to in pairs], [torch.tensor(v.astype(dtype)) for v in vs])
    for t, tt_ in zip(ts, tt):
        if isinstance(t, ng.Tensor) and tt_.grad is not None:
            np.testing.assert_allclose(_np(t.grad), tt_.grad.numpy(), rtol=rtol, atol=atol, err_msg="vs torch grad")


def check_op(fn, ref, inputs, kwargs=None, dtypes=(np.float32, np.float64), grad=True, torch_fn=None,
             torch_kwargs=None, noncontig=True, tol=None, grad_tol=None):
    """Forward (every dtype, contiguous and not), float64 gradients, and torch parity."""
    check_forward(fn, ref, inputs, dtypes=dtypes, kwargs=kwargs, tol=tol, noncontig=noncontig)
    if grad:
        check_grad(fn, inputs, kwargs=kwargs, noncontig=noncontig, **(grad_tol or {}))
    check_torch(fn, torch_fn, inputs, kwargs=kwargs, torch_kwargs=torch_kwargs, grad=grad)


# ---- device parity (the CUDA suite) ------------------------------------------------------------
DEVICE_TOL = {np.float32: dict(rtol=2e-5, atol=2e-6), np.float64: dict(rtol=1e-10, atol=1e-12)}


def _device_array(be, a, noncontig=False):
    """NumPy ``a`` on backend ``be``; ``noncontig`` makes a strided view with the same
    values (the transposed copy's transpose, or every other element along a doubled axis)."""
    if not noncontig or a.ndim < 1 or a.size < 2:
        return be.from_numpy(np.ascontiguousarray(a))
    d = be.from_numpy(np.ascontiguousarray(a.T)).T if a.ndim >= 2 else None
    if d is None or d.flags.c_contiguous:  # e.g. shape (1, n): every other element instead
        k = int(np.argmax(a.shape))
        idx = (slice(None),) * k + (slice(None, None, 2),)
        d = be.from_numpy(np.repeat(a, 2, axis=k))[idx]
    assert not d.flags.c_contiguous
    return d


def to_device_tensors(inputs, dtype, device, requires_grad=False, noncontig=False):
    """``inputs`` as Tensors on ``device``: floating arrays cast to ``dtype`` (and made
    strided with ``noncontig``), integer/bool arrays as index tensors; anything else
    (scalars, shapes) passes unchanged."""
    from numbagrad.backend.dispatch import backend_for_device
    be = backend_for_device(device)
    out = []
    for a in inputs:
        if _is_float(a):
            t = ng.Tensor._from_array(_device_array(be, a.astype(dtype), noncontig))
            if requires_grad:
                t.requires_grad_(True)
            out.append(t)
        elif isinstance(a, np.ndarray):
            out.append(ng.Tensor._from_array(_device_array(be, a)))
        else:
            out.append(a)
    return out


def parallel_and_serial(fn, x64, grad, monkeypatch):
    """``y = fn(x)`` and ``x``'s gradient for the upstream ``grad`` (an array, or a seed for
    :func:`randn` of ``y``'s shape), all float32, run twice: with the parallel kernel twins
    (the input above the tests' ``config.PARALLEL_THRESHOLD``), then with the serial ones
    (the threshold raised out of reach); returns ``((y, dx) parallel, (y, dx) serial)``."""
    def run():
        x = ng.tensor(x64.astype(np.float32), requires_grad=True)
        y = fn(x)
        g = randn(*y.shape, seed=grad) if isinstance(grad, int) else grad
        y.backward(ng.tensor(g.astype(np.float32)))
        return y.detach().numpy(), x.grad.numpy()

    par = run()
    monkeypatch.setattr(config, "PARALLEL_THRESHOLD", 1 << 62)
    return par, run()


def _host(x):
    """A Tensor's values as a host NumPy array (any device)."""
    return np.asarray(x.detach().cpu().numpy())


def check_device(fn, ref, inputs, device="cuda", kwargs=None, dtypes=(np.float32, np.float64),
                 grad=True, grad_dtypes=None, noncontig=False, tol=None, grad_tol=None, seed=0):
    """An op on ``device`` against NumPy (forward) and against itself on the CPU
    (gradients for one random upstream gradient).

    * forward: ``fn`` on device tensors vs ``ref(*float64 arrays)`` for each dtype (and
      with strided inputs when ``noncontig``); with ``ref=None`` against ``fn`` on the
      CPU in the same dtype (``numbagrad.manual_seed(seed)`` before each call, so random
      ops such as dropout draw the same numbers). Every output must live on ``device``.
    * gradients: the same upstream gradient through the CPU and the device graph, for
      each dtype of ``grad_dtypes`` (default ``dtypes``); the device grads must be on
      ``device`` and equal the CPU ones (which the CPU suite checks against finite
      differences and PyTorch).
    """
    kwargs = kwargs or {}
    inputs = _arrays(inputs)
    dev = ng.device(device)
    rng = np.random.default_rng(seed)

    def run(ts):
        ng.manual_seed(seed)
        return _outputs(fn(*ts, **kwargs))

    expected = None if ref is None else [np.asarray(e) for e in _outputs(ref(*inputs, **kwargs))]
    for dtype in dtypes:
        t = (tol or {}).get(dtype, TOL[dtype])
        exp = expected
        if exp is None:
            exp = [_host(o) for o in run(_to_tensors(inputs, dtype))]
        for nc in ((False, True) if noncontig else (False,)):
            got = run(to_device_tensors(inputs, dtype, device, noncontig=nc))
            assert len(got) == len(exp), f"{len(got)} outputs, reference has {len(exp)}"
            for k, (g, e) in enumerate(zip(got, exp)):
                assert isinstance(g, ng.Tensor), f"output {k} is a {type(g).__name__}, not a Tensor"
                assert g.device == dev, f"output {k} is on {g.device}, expected {dev}"
                h = _host(g)
                msg = f"output {k}, dtype={np.dtype(dtype).name}, noncontig={nc}"
                assert h.shape == e.shape, f"shape {h.shape} != reference {e.shape} ({msg})"
                if e.dtype.kind == "f":
                    assert h.dtype == dtype, f"output dtype {h.dtype}, expected {np.dtype(dtype)} ({msg})"
                    np.testing.assert_allclose(h.astype(np.float64), e.astype(np.float64), err_msg=msg, **t)
                else:
                    assert h.dtype == e.dtype, f"output dtype {h.dtype}, expected {e.dtype} ({msg})"
                    np.testing.assert_array_equal(h, e, err_msg=msg)
    if not grad:
        return
    for dtype in (grad_dtypes or dtypes):
        t = (grad_tol or {}).get(dtype, DEVICE_TOL[dtype])
        cpu_in = _to_tensors(inputs, dtype, requires_grad=True)
        cpu_out = run(cpu_in)
        vs = [rng.standard_normal(o.shape) if isinstance(o, ng.Tensor) and o.requires_grad else None
              for o in cpu_out]
        assert any(v is not None for v in vs), "op produced no differentiable output"
        ng.autograd.backward([o for o, v in zip(cpu_out, vs) if v is not None],
                             [ng.tensor(v.astype(o.dtype)) for o, v in zip(cpu_out, vs) if v is not None])
        for nc in ((False, True) if noncontig else (False,)):
            dev_in = to_device_tensors(inputs, dtype, device, requires_grad=True, noncontig=nc)
            dev_out = run(dev_in)
            used = [(o, v) for o, v in zip(dev_out, vs) if v is not None]
            for o, _ in used:
                assert o.requires_grad, "device output does not require grad"
            ng.autograd.backward([o for o, _ in used],
                                 [ng.tensor(np.asarray(v, dtype=o.dtype), device=device) for o, v in used])
            for i, (tc, td) in enumerate(zip(cpu_in, dev_in)):
                if not isinstance(tc, ng.Tensor):
                    continue
                msg = f"gradient of input {i}, dtype={np.dtype(dtype).name}, noncontig={nc}"
                if tc.grad is None:
                    assert td.grad is None, f"{msg}: the CPU has no gradient, the device has one"
                    continue
                assert td.grad is not None, f"{msg}: missing on the device"
                assert td.grad.device == dev, f"{msg}: on {td.grad.device}, expected {dev}"
                assert td.grad.dtype == tc.grad.dtype, f"{msg}: dtype {td.grad.dtype} != {tc.grad.dtype}"
                np.testing.assert_allclose(_host(td.grad), _host(tc.grad), err_msg=msg, **t)


# ---- CUDA kernel modules (tests/cuda): the launchers' contract and PTX --------------------------
def ng_torch_tensors(inputs, dtype):
    """``(numbagrad tensors, torch tensors)`` of the same values: floating inputs cast to
    ``dtype`` and requiring grad, the others (targets, labels) as they are."""
    ns, ts = [], []
    for a in inputs:
        a = np.asarray(a)
        if a.dtype.kind == "f":
            ns.append(ng.tensor(a.astype(dtype), requires_grad=True))
            ts.append(torch.tensor(a.astype(dtype), requires_grad=True))
        else:
            ns.append(ng.tensor(a))
            ts.append(torch.tensor(a))
    return ns, ts


def block_tables(sizes, block):
    """An optimizer arena's block tables ``(starts, ends, segments)`` for parameters of
    ``sizes`` elements laid end to end, cut into blocks of at most ``block`` elements that
    never straddle two parameters (``numbagrad.optim.optimizer``'s layout)."""
    starts, ends, segs, off = [], [], [], 0
    for s, n in enumerate(sizes):
        for lo in range(off, off + n, block):
            starts.append(lo)
            ends.append(min(lo + block, off + n))
            segs.append(s)
        off += n
    return tuple(np.array(v, np.int64) for v in (starts, ends, segs))
