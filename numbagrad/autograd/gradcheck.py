"""``gradcheck``: compare analytic gradients with central finite differences."""
import numpy as np


def _numerical_jacobian_vp(fn, inputs, idx, v_out, eps):
    """Directional finite difference: d<v_out, fn(x)>/dx_idx, one element at a time."""
    x = inputs[idx]
    flat = x.array.reshape(-1)
    grad = np.zeros(flat.shape, dtype=np.float64)
    for k in range(flat.size):
        orig = flat[k]
        flat[k] = orig + eps
        fp = _dot(fn(*inputs), v_out)
        flat[k] = orig - eps
        fm = _dot(fn(*inputs), v_out)
        flat[k] = orig
        grad[k] = (fp - fm) / (2 * eps)
    return grad.reshape(x.shape)


def _dot(outs, vs):
    from ..tensor import Tensor
    if isinstance(outs, Tensor):
        outs = (outs,)
    total = 0.0
    for o, v in zip(outs, vs):
        if v is not None:
            total += float(np.sum(np.asarray(o.detach().numpy(), dtype=np.float64) * v))
    return total


def gradcheck(func, inputs, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True, seed=0):
    """Check the gradients of ``func`` at ``inputs`` against central finite differences.

    ``func`` maps Tensors to a Tensor (or tuple of Tensors). Every floating input that
    requires grad is checked; inputs should be float64 for the differences to be
    accurate. Instead of the full Jacobian, one random output direction ``v`` is used:
    the analytic ``v^T J`` (one backward) is compared with the finite differences of
    ``<v, func(x)>``, which is as sensitive to a wrong gradient and costs one backward.

    Returns True, or raises (or returns False with ``raise_exception=False``) naming the
    input and the largest mismatch.

    Example
    -------
    >>> import numbagrad as ng
    >>> x = ng.randn(3, dtype=ng.float64, requires_grad=True)
    >>> ng.autograd.gradcheck(lambda t: (t * t).sum(), (x,))
    True
    """
    from ..tensor import Tensor
    from .engine import grad as _grad
    from .grad_mode import no_grad
    if isinstance(inputs, Tensor):
        inputs = (inputs,)
    inputs = tuple(inputs)
    outs = func(*inputs)
    single = isinstance(outs, Tensor)
    outs_t = (outs,) if single else tuple(outs)
    rng = np.random.default_rng(seed)
    vs = [rng.standard_normal(o.shape) if o.requires_grad else None for o in outs_t]
    diff_inputs = [i for i, t in enumerate(inputs) if isinstance(t, Tensor) and t.requires_grad]
    if not diff_inputs:
        raise ValueError("gradcheck: no input requires grad")
    for t in (inputs[i] for i in diff_inputs):
        if t.dtype != np.float64:
            import warnings
            warnings.warn(f"gradcheck: input of dtype {t.dtype} is not float64; finite "
                          "differences will be inaccurate", stacklevel=2)
    used = [o for o, v in zip(outs_t, vs) if v is not None]
    grads_out = [Tensor(v.astype(o.dtype)) for o, v in zip(outs_t, vs) if v is not None]
    analytic = _grad(used, [inputs[i] for i in diff_inputs], grad_outputs=grads_out,
                     allow_unused=True)
    with no_grad():
        for k, i in enumerate(diff_inputs):
            num = _numerical_jacobian_vp(func, inputs, i, vs, eps)
            ana = np.zeros(inputs[i].shape) if analytic[k] is None else \
                np.asarray(analytic[k].numpy(), dtype=np.float64)
            if not np.allclose(ana, num, atol=atol, rtol=rtol):
                err = np.max(np.abs(ana - num))
                msg = (f"gradcheck: gradient mismatch for input {i} (shape {tuple(inputs[i].shape)}): "
                       f"max abs difference {err:.3e}\nanalytic:\n{ana}\nnumerical:\n{num}")
                if raise_exception:
                    raise RuntimeError(msg)
                return False
    return True
