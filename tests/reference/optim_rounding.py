"""Float32 NumPy emulations of ``torch.optim``'s single-tensor updates, rounded op by op
where torch's CPU ops round: the CPU-independent guard of the optimizer kernels' rounding.

numbagrad's CPU optimizer kernels (``numbagrad/kernels/cpu/optim*.py``) follow torch's
``_single_tensor_<algo>`` functions operation by operation and round once where torch's
vectorised CPU ops fuse a multiply-add. Comparing them with torch itself bit for bit
depends on the CPU torch runs on (which ops its vector paths fuse, MKL's ``sqrt``);
comparing them with these emulations does not: each function below is torch's
single-tensor update rewritten with the documented rounding of every torch op
(measured against torch 2.13 on AVX-512, see the kernels' docstrings), in plain NumPy
float32, where ``+ - * /`` and ``np.sqrt`` are correctly rounded on every CPU:

* ``torch.add(x, y, alpha=a)`` is ``fma(y, a, x)``                         (:func:`add32`)
* ``torch.lerp(s, e, w)`` is ``fma(w, e - s, s)`` for ``|w| < 0.5``, else
  ``fma(w - 1, e - s, e)``                                                  (:func:`lerp32`)
* ``torch.addcmul(x, y, z, value=c)`` is ``fma(c*y, z, x)``                 (:func:`addcmul32`)
* ``torch.addcdiv(x, y, z, value=c)`` is ``x + (c*y)/z``, three roundings   (:func:`addcdiv32`)
* ``tensor * s``, ``tensor / s``: by the Python scalar ``s`` rounded to float32 (a true
  division); ``s / tensor`` is ``reciprocal(tensor) * s``, two roundings;
* ``sqrt`` correctly rounded (torch's MKL ``sqrt`` is not always: that, and which ops a
  given CPU fuses, is what the tolerance of the torch parity tests absorbs).

Per-step scalars (bias corrections, RAdam's ``rho_t`` and rectification, NAdam's ``mu``)
are computed with Python floats exactly as torch computes them on the host, from the
float32 step count (``state['step']``), and rounded to float32 where they meet a float32
tensor op. Hyperparameters take torch's names and defaults. Each function takes the
initial parameter (float32 array) and the gradients of the steps it gets one (a list of
float32 arrays) and returns ``(param, state)``, ``state`` a dict with torch's keys in
torch's order (``step`` and ``mu_product`` as 0-d float32 arrays).

Nothing here imports torch or numbagrad.
"""
import numpy as np

F32 = np.float32


# ---- torch's float32 ops -----------------------------------------------------------------
def fma32(a, b, c):
    """``a * b + c`` rounded once to float32 (``a``, ``b``, ``c`` float32).

    The float32 product is exact in float64, so this is
    ``np.float32(np.float64(a) * np.float64(b) + np.float64(c))``, except that the float64
    sum is rounded to odd (the TwoSum error says which way the exact sum lies): rounding
    to nearest there would round twice and miss the correctly rounded float32 result in
    about one case in 2**29."""
    p = np.asarray(a, np.float64) * np.asarray(b, np.float64)  # exact
    c = np.asarray(c, np.float64)
    s = np.asarray(p + c)
    bp = s - p
    err = (p - (s - bp)) + (c - bp)                            # exact: p + c == s + err
    odd = (err != 0) & np.isfinite(err) & ((s.view(np.int64) & 1) == 0)
    s = np.where(odd, np.nextafter(s, np.copysign(np.inf, err)), s)
    return s.astype(F32)


def add32(x, y, alpha):
    """``torch.add(x, y, alpha=alpha)``: ``fma(y, alpha, x)``."""
    return fma32(y, F32(alpha), x)


def lerp32(s, e, w):
    """``torch.lerp(s, e, w)`` with a Python scalar weight (applied in float32)."""
    w = F32(w)
    return fma32(w, e - s, s) if abs(w) < 0.5 else fma32(w - F32(1), e - s, e)


def addcmul32(x, y, z, value=1.0):
    """``torch.addcmul(x, y, z, value=value)``: ``fma(value*y, z, x)``."""
    return fma32(F32(value) * y, z, x)


def addcdiv32(x, y, z, value=1.0):
    """``torch.addcdiv(x, y, z, value=value)``: ``x + (value*y)/z``, three roundings."""
    return x + (F32(value) * y) / z


def sq_avg32(v, g, beta):
    """``v.mul_(beta).addcmul_(g, g, value=1 - beta)``."""
    return addcmul32(v * F32(beta), g, g, 1 - beta)


def _grad(p, grad, maximize, weight_decay, decoupled=False, lr=0.0):
    """torch's prologue: ``grad = -grad`` when maximizing, then (when ``weight_decay``)
    ``param.mul_(1 - lr*weight_decay)`` (decoupled) or ``grad.add(param,
    alpha=weight_decay)``. Returns ``(param, grad)``."""
    g = -grad if maximize else grad
    if weight_decay != 0:
        if decoupled:
            p = p * F32(1 - lr * weight_decay)
        else:
            g = add32(g, p, weight_decay)
    return p, g


def _start(param, *zeros):
    """The float32 parameter, a zero float32 step count and zero state buffers."""
    p = np.array(param, F32)
    return (p, F32(0)) + tuple(np.zeros_like(p) for _ in zeros)


# ---- the algorithms ----------------------------------------------------------------------
def sgd(param, grads, lr=1e-3, momentum=0, dampening=0, weight_decay=0, nesterov=False, maximize=False):
    """``torch.optim.sgd._single_tensor_sgd``."""
    p, buf = np.array(param, F32), None
    for grad in grads:
        p, g = _grad(p, grad, maximize, weight_decay)
        if momentum != 0:
            buf = g.copy() if buf is None else add32(buf * F32(momentum), g, 1 - dampening)
            g = add32(g, buf, momentum) if nesterov else buf
        p = add32(p, g, -lr)
    return p, ({"momentum_buffer": buf} if momentum != 0 else {})


def adam(param, grads, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, amsgrad=False, maximize=False,
         decoupled_weight_decay=False):
    """``torch.optim.adam._single_tensor_adam`` (not capturable)."""
    beta1, beta2 = betas
    p, step, m, v, vmax = _start(param, "exp_avg", "exp_avg_sq", "max_exp_avg_sq")
    for grad in grads:
        step += F32(1)
        p, g = _grad(p, grad, maximize, weight_decay, decoupled_weight_decay, lr)
        m = lerp32(m, g, 1 - beta1)
        v = sq_avg32(v, g, beta2)
        t = float(step)
        step_size = lr / (1 - beta1 ** t)
        bc2_sqrt = (1 - beta2 ** t) ** 0.5
        if amsgrad:
            vmax = np.maximum(vmax, v)
        denom = np.sqrt(vmax if amsgrad else v) / F32(bc2_sqrt) + F32(eps)
        p = addcdiv32(p, m, denom, -step_size)
    state = {"step": np.array(step), "exp_avg": m, "exp_avg_sq": v}
    return p, (dict(state, max_exp_avg_sq=vmax) if amsgrad else state)


def adamw(param, grads, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False, maximize=False):
    """``torch.optim.AdamW``: Adam with decoupled weight decay."""
    return adam(param, grads, lr, betas, eps, weight_decay, amsgrad, maximize, decoupled_weight_decay=True)


def adamax(param, grads, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, maximize=False):
    """``torch.optim.adamax._single_tensor_adamax`` (not capturable)."""
    beta1, beta2 = betas
    p, step, m, u = _start(param, "exp_avg", "exp_inf")
    for grad in grads:
        step += F32(1)
        p, g = _grad(p, grad, maximize, weight_decay)
        m = lerp32(m, g, 1 - beta1)
        u = np.maximum(u * F32(beta2), np.abs(g) + F32(eps))
        clr = lr / (1 - beta1 ** float(step))
        p = addcdiv32(p, m, u, -clr)
    return p, {"step": np.array(step), "exp_avg": m, "exp_inf": u}


def radam(param, grads, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, decoupled_weight_decay=False,
          maximize=False):
    """``torch.optim.radam._single_tensor_radam`` (not capturable)."""
    beta1, beta2 = betas
    rho_inf = 2 / (1 - beta2) - 1
    p, step, m, v = _start(param, "exp_avg", "exp_avg_sq")
    for grad in grads:
        step += F32(1)
        t = float(step)
        p, g = _grad(p, grad, maximize, weight_decay, decoupled_weight_decay, lr)
        m = lerp32(m, g, 1 - beta1)
        v = sq_avg32(v, g, beta2)
        bc1, bc2 = 1 - beta1 ** t, 1 - beta2 ** t
        upd = m / F32(bc1) * F32(lr)
        rho_t = rho_inf - 2 * t * (beta2 ** t) / bc2
        if rho_t > 5.0:
            rect = ((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t)) ** 0.5
            ada = F32(1) / (np.sqrt(v) + F32(eps)) * F32(bc2 ** 0.5)  # scalar / tensor
            upd = upd * ada * F32(rect)
        p = add32(p, upd, -1.0)
    return p, {"step": np.array(step), "exp_avg": m, "exp_avg_sq": v}


def nadam(param, grads, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, momentum_decay=4e-3,
          decoupled_weight_decay=False, maximize=False):
    """``torch.optim.nadam._single_tensor_nadam`` (not capturable); ``mu_product`` is a
    float32 0-d tensor in torch, ``*=`` a Python float in float32."""
    beta1, beta2 = betas
    p, step, m, v = _start(param, "exp_avg", "exp_avg_sq")
    mu_product = F32(1)
    for grad in grads:
        step += F32(1)
        t = float(step)
        bc2 = 1 - beta2 ** t
        p, g = _grad(p, grad, maximize, weight_decay, decoupled_weight_decay, lr)
        mu = beta1 * (1.0 - 0.5 * (0.96 ** (t * momentum_decay)))
        mu_next = beta1 * (1.0 - 0.5 * (0.96 ** ((t + 1) * momentum_decay)))
        mu_product = mu_product * F32(mu)
        m = lerp32(m, g, 1 - beta1)
        v = sq_avg32(v, g, beta2)
        denom = np.sqrt(v / F32(bc2)) + F32(eps)
        mp = float(mu_product)
        p = addcdiv32(p, g, denom, -lr * (1.0 - mu) / (1.0 - mp))
        p = addcdiv32(p, m, denom, (-lr * mu_next) / (1.0 - mp * mu_next))
    return p, {"step": np.array(step), "mu_product": np.array(mu_product), "exp_avg": m, "exp_avg_sq": v}


def rmsprop(param, grads, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0, centered=False,
            maximize=False):
    """``torch.optim.rmsprop._single_tensor_rmsprop``."""
    p, step, v, buf, a = _start(param, "square_avg", "momentum_buffer", "grad_avg")
    for grad in grads:
        step += F32(1)
        p, g = _grad(p, grad, maximize, weight_decay)
        v = sq_avg32(v, g, alpha)
        if centered:
            a = lerp32(a, g, 1 - alpha)
            avg = np.sqrt(addcmul32(v, a, a, -1))
        else:
            avg = np.sqrt(v)
        avg = avg + F32(eps)
        if momentum > 0:
            buf = addcdiv32(buf * F32(momentum), g, avg)
            p = add32(p, buf, -lr)
        else:
            p = addcdiv32(p, g, avg, -lr)
    state = {"step": np.array(step), "square_avg": v}
    if momentum > 0:
        state["momentum_buffer"] = buf
    if centered:
        state["grad_avg"] = a
    return p, state


def adagrad(param, grads, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0, eps=1e-10,
            maximize=False):
    """``torch.optim.adagrad._single_tensor_adagrad`` (dense gradients)."""
    p, step = _start(param)
    s = np.full_like(p, initial_accumulator_value)
    for grad in grads:
        step += F32(1)
        p, g = _grad(p, grad, maximize, weight_decay)
        clr = lr / (1 + (float(step) - 1) * lr_decay)
        s = addcmul32(s, g, g, 1)
        p = addcdiv32(p, g, np.sqrt(s) + F32(eps), -clr)
    return p, {"step": np.array(step), "sum": s}


def adadelta(param, grads, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, maximize=False):
    """``torch.optim.adadelta._single_tensor_adadelta``."""
    p, step, v, u = _start(param, "square_avg", "acc_delta")
    for grad in grads:
        step += F32(1)
        p, g = _grad(p, grad, maximize, weight_decay)
        v = sq_avg32(v, g, rho)
        delta = np.sqrt(u + F32(eps)) / np.sqrt(v + F32(eps)) * g
        u = sq_avg32(u, delta, rho)
        p = add32(p, delta, -lr)
    return p, {"step": np.array(step), "square_avg": v, "acc_delta": u}
