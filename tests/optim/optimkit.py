"""Shared harness of the optimizer tests: the same parameters and gradients fed to a
numbagrad optimizer and to its ``torch.optim`` (or NumPy) counterpart, step for step.

``run_parity`` is the contract of issue 6: 100 steps, float32 equal to 1e-6 relative
(float64 to 1e-10). ``converge`` runs an optimizer on a least-squares quadratic or on
the 2-D Rosenbrock function from a fixed start. ``signature_counts`` snapshots how
many compiled signatures the given kernels have, for "the second step compiles
nothing new" tests.
"""
import numpy as np

import numbagrad as ng
from numbagrad import nn

SHAPES = [(5, 3), (3,), (4, 2, 2), (), (7, 1)]
STEPS = 100
# Parameters start standard-normal (scale ~1), so atol 1e-6 is 1e-6 relative to the
# tensor's scale; it only matters for elements that wander near zero. The kernels round
# where torch rounds (``kernels/cpu/_fma.py``); what is left is torch's float32 sqrt (MKL,
# not correctly rounded) and the like, ~1 ulp in a fraction of the elements.
TOL = {np.float32: dict(rtol=1e-6, atol=1e-6), np.float64: dict(rtol=1e-10, atol=1e-12)}


def setup(dtype, seed=0, shapes=SHAPES, steps=STEPS, torch=None):
    """(numbagrad parameters, torch parameters or None, per-step gradient lists)."""
    rng = np.random.default_rng(seed)
    init = [rng.standard_normal(s).astype(dtype) for s in shapes]
    grads = [[rng.standard_normal(s).astype(dtype) for s in shapes] for _ in range(steps)]
    P = [nn.Parameter(ng.tensor(a.copy())) for a in init]
    T = None if torch is None else [torch.nn.Parameter(torch.tensor(a.copy())) for a in init]
    return P, T, grads


def set_grads(P, T, grads_k, skip=(), torch=None):
    """Give parameter i the gradient ``grads_k[i]`` (None for i in ``skip``)."""
    for i, p in enumerate(P):
        p.grad = None if i in skip else ng.tensor(grads_k[i])
        if T is not None:
            T[i].grad = None if i in skip else torch.tensor(grads_k[i])


def assert_close(P, T, dtype, tol=None):
    tol = tol or TOL[np.dtype(dtype).type]
    for i, (p, t) in enumerate(zip(P, T)):
        t = t if isinstance(t, np.ndarray) else t.detach().numpy()
        np.testing.assert_allclose(p.detach().numpy(), t, err_msg=f"parameter {i}", **tol)


def run_parity(ng_cls, t_cls, kw, dtype, torch, steps=STEPS, skips=None, tol=None, ng_kw=None):
    """Step a numbagrad and a torch optimizer with the same gradients; assert equal."""
    P, T, grads = setup(dtype, steps=steps, torch=torch)
    o1, o2 = ng_cls(P, **(ng_kw or kw)), t_cls(T, **kw)
    for k in range(steps):
        set_grads(P, T, grads[k], (skips or {}).get(k, ()), torch=torch)
        o1.step()
        o2.step()
    assert_close(P, T, dtype, tol)
    return P, T, o1, o2


def quadratic(x, A, b):
    return ((A @ x - b) ** 2).mean()


def rosenbrock(xy):
    x, y = xy[0], xy[1]
    return (1 - x) ** 2 + 100 * (y - x * x) ** 2


def converge(make, problem, steps, closure_style=False):
    """Minimise ``problem`` ('quadratic' or 'rosenbrock') with ``make([param])``; returns
    (final parameter as NumPy, the known minimiser)."""
    if problem == "quadratic":
        rng = np.random.default_rng(3)
        A = ng.tensor(rng.standard_normal((20, 5)))
        x_true = rng.standard_normal(5)
        b = ng.tensor(A.numpy() @ x_true)
        x = nn.Parameter(ng.zeros(5, dtype=ng.float64))

        def f():
            return quadratic(x, A, b)
    elif problem == "rosenbrock":
        x_true = np.ones(2)
        x = nn.Parameter(ng.tensor(np.array([-1.5, 2.0])))

        def f():
            return rosenbrock(x)
    else:
        raise ValueError(problem)
    opt = make([x])

    def closure():
        opt.zero_grad()
        loss = f()
        loss.backward()
        return loss

    for _ in range(steps):
        if closure_style:
            opt.step(closure)
        else:
            closure()
            opt.step()
    return x.detach().numpy(), x_true


def signature_counts(*kernels):
    """Number of compiled signatures of each FlatKernel's serial and parallel twin."""
    return tuple((len(k.serial.signatures), len(k.parallel.signatures)) for k in kernels)
