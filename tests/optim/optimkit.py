"""Shared harness of the optimizer tests: the same parameters and gradients fed to a
numbagrad optimizer and to its ``torch.optim`` (or NumPy) counterpart, step for step.

``run_parity`` is the contract of issue 6: 100 steps, float32 equal to 1e-6 relative
(float64 to 1e-10). ``converge`` runs an optimizer on a least-squares quadratic or on
the 2-D Rosenbrock function from a fixed start. ``signature_counts`` snapshots how
many compiled signatures the given kernels have, for "the second step compiles
nothing new" tests (``check_no_recompile``). The ``check_*`` helpers are the checks
every optimizer's tests share: state dict round trips, torch's state dict layout,
loading a torch state dict, constructor validation.
"""
import collections
import copy

import numpy as np
import pytest

import numbagrad as ng
from numbagrad import nn
from numbagrad.backend import config

SHAPES = [(5, 3), (3,), (4, 2, 2), (), (7, 1)]
STEPS = 100
# More than config.PARALLEL_THRESHOLD elements (the parallel twins run); the first
# parameter spans several arena blocks.
LARGE_SHAPES = [(300, 300), (300,), (50, 40)]
# Parameters start standard-normal (scale ~1), so atol 1e-6 is 1e-6 relative to the
# tensor's scale; it only matters for elements that wander near zero. The kernels round
# where torch rounds (``kernels/cpu/_fma.py``); what is left against torch is torch's
# float32 sqrt (MKL, not correctly rounded) and which multiply-adds torch's vector code
# fuses on the CPU at hand, a few ulp in some of the elements. Torch parity is checked to
# this tolerance only; the rounding itself is checked bit for bit, independently of the
# CPU, against NumPy emulations of torch's ops (``tests/reference/optim_rounding.py``,
# ``test_optim_rounding.py``).
TOL = {np.float32: dict(rtol=1e-6, atol=1e-6), np.float64: dict(rtol=1e-10, atol=1e-12)}

# Option sets that reach every rounding branch of the kernels (lerp weights on both sides
# of 0.5, L2 and decoupled decay, maximize, RAdam before and after rectification...):
# checked against torch to TOL (test_optim_adamx.py, test_optim_adaptive.py) and bit for
# bit against the NumPy emulations (test_optim_rounding.py).
ADAMX_CASES = {
    "adamax": [dict(), dict(lr=1e-2), dict(lr=1e-2, weight_decay=0.1), dict(lr=1e-2, maximize=True),
               dict(lr=0.05, betas=(0.5, 0.9), eps=1e-3), dict(lr=0.1, betas=(0.3, 0.5)),
               dict(lr=1e-2, weight_decay=0.05, maximize=True, betas=(0.8, 0.99))],
    # betas (0.3, 0.5): rho_inf = 3, never rectified; the others: rectified from step 6 (rho_t <= t)
    "radam": [dict(), dict(lr=1e-2), dict(lr=1e-2, weight_decay=0.1),
              dict(lr=1e-2, weight_decay=0.1, decoupled_weight_decay=True), dict(lr=1e-2, maximize=True),
              dict(lr=0.05, betas=(0.5, 0.9), eps=1e-6), dict(lr=0.1, betas=(0.3, 0.5)),
              dict(lr=1e-2, weight_decay=0.05, decoupled_weight_decay=True, maximize=True, betas=(0.9, 0.99))],
    "nadam": [dict(), dict(lr=1e-2), dict(lr=1e-2, weight_decay=0.1),
              dict(lr=1e-2, weight_decay=0.1, decoupled_weight_decay=True), dict(lr=1e-2, maximize=True),
              dict(lr=1e-2, momentum_decay=0.04), dict(lr=0.05, betas=(0.5, 0.9), eps=1e-6),
              dict(lr=0.1, betas=(0.3, 0.5), momentum_decay=0.0),
              dict(lr=1e-2, weight_decay=0.05, decoupled_weight_decay=True, maximize=True, betas=(0.9, 0.99))],
}
ADAPTIVE_ROUNDING_CASES = [
    ("RMSprop", dict(lr=1e-2, weight_decay=0.1, maximize=True)),
    ("RMSprop", dict(lr=1e-2, alpha=0.9, momentum=0.9, centered=True, weight_decay=0.1)),
    ("RMSprop", dict(lr=1e-2, alpha=0.3, centered=True)),
    ("Adagrad", dict(lr=0.1, lr_decay=0.1, weight_decay=0.1, initial_accumulator_value=0.1, maximize=True)),
    ("Adadelta", dict(lr=0.5, rho=0.8, weight_decay=0.1, maximize=True))]


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


def run_parity(ng_cls, t_cls, kw, dtype, torch, steps=STEPS, skips=None, tol=None, ng_kw=None, shapes=SHAPES):
    """Step a numbagrad and a torch optimizer with the same gradients (parameter ``i``
    has none at step ``k`` for ``i in skips[k]``); assert equal."""
    if shapes is LARGE_SHAPES:
        assert sum(int(np.prod(s)) for s in shapes) >= config.PARALLEL_THRESHOLD
    P, T, grads = setup(dtype, shapes=shapes, steps=steps, torch=torch)
    o1, o2 = ng_cls(P, **(ng_kw or kw)), t_cls(T, **kw)
    for k in range(steps):
        set_grads(P, T, grads[k], (skips or {}).get(k, ()), torch=torch)
        o1.step()
        o2.step()
    assert_close(P, T, dtype, tol)
    return P, T, o1, o2


def ref_steps(params, grads_seq, skips=None):
    """The loop of the per-tensor NumPy references: yields ``(i, p, g, t)`` for each step's
    parameters that have a gradient (``g`` not None, ``i`` not in ``skips[step]``), ``t``
    counting parameter ``i``'s own updates from 1; the caller updates ``p`` in place."""
    t = [0] * len(params)
    for k, grads in enumerate(grads_seq):
        for i, (p, g) in enumerate(zip(params, grads)):
            if g is None or i in (skips or {}).get(k, ()):
                continue
            t[i] += 1
            yield i, p, g, t[i]


def ref_moments(p, g, m, v, lr, b1, b2, wd, decoupled):
    """The first lines of the Adam family's NumPy references: weight decay (``decoupled``:
    ``p`` scaled in place by ``1 - lr*wd``; else ``wd*p`` added to ``g``), then the two
    moments; returns ``(g, m, v)``."""
    if decoupled:
        p *= 1 - lr * wd
    else:
        g = g + wd * p
    return g, b1 * m + (1 - b1) * g, b2 * v + (1 - b2) * g * g


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


# ---- checks shared by the optimizer test files ------------------------------------------
def train(o, P, grads, ks, skip=()):
    """Steps ``ks`` of ``grads`` on optimizer ``o`` (parameters in ``skip`` without a gradient)."""
    for k in ks:
        for i, (p, g) in enumerate(zip(P, grads[k])):
            p.grad = None if i in skip else ng.tensor(g)
        o.step()


def assert_state_close(o1, o2, P, T, tol):
    """Per parameter, ``o1``'s state has ``o2``'s keys in the same order and close values."""
    for p, t in zip(P, T):
        assert list(o1.state[p]) == list(o2.state[t])
        for key, val in o2.state[t].items():
            np.testing.assert_allclose(o1.state[p][key].numpy(), val.numpy(), err_msg=key, **tol)


def check_param_groups_like_torch(ng_cls, t_cls, kw, torch, second=None, steps=10):
    """Two parameter groups (the second with the options ``second``, default lr 0.1 and
    weight decay 0.01) and every lr halved after 5 steps, as a scheduler would: numbagrad
    and torch step alike (float64). Returns the numbagrad optimizer."""
    second = dict(lr=0.1, weight_decay=0.01) if second is None else second
    P, T, grads = setup(np.float64, steps=steps, torch=torch)
    o1 = ng_cls([{"params": P[:2]}, {"params": P[2:], **second}], **kw)
    o2 = t_cls([{"params": T[:2]}, {"params": T[2:], **second}], **kw)
    for k in range(steps):
        set_grads(P, T, grads[k], torch=torch)
        if k == 5:
            for g1, g2 in zip(o1.param_groups, o2.param_groups):
                g1["lr"] *= 0.5  # schedulers change lr between steps
                g2["lr"] *= 0.5
        o1.step()
        o2.step()
    assert_close(P, T, np.float64)
    return o1


def check_state_dict_round_trip(make, dtype=np.float64, steps=20, split=10, skips=None):
    """``make(params)`` trained ``split`` steps, its state dict (deep-copied) loaded into a
    fresh optimizer on copied parameters: both continue identically, parameters and
    state bit for bit."""
    P, _, grads = setup(dtype, steps=steps)
    Q = [nn.Parameter(ng.tensor(p.detach().numpy().copy())) for p in P]
    a = make(P)
    for k in range(split):
        train(a, P, grads, [k], skip=(skips or {}).get(k, ()))
    sd = copy.deepcopy(a.state_dict())
    b = make(Q)
    for p, q in zip(P, Q):
        q.array[...] = p.array
    b.load_state_dict(sd)
    train(a, P, grads, range(split, steps))
    train(b, Q, grads, range(split, steps))
    for p, q in zip(P, Q):
        np.testing.assert_array_equal(p.detach().numpy(), q.detach().numpy())
        assert list(a.state[p]) == list(b.state[q])
        for key, val in a.state[p].items():
            np.testing.assert_array_equal(b.state[q][key].numpy(), val.numpy(), err_msg=key)


def check_state_dict_like_torch(o1, o2, P, T, grads, torch, tol=None, group_keys=None):
    """Three steps (parameter 2 without a gradient on the first), then ``o1.state_dict()``
    has the layout of ``o2``'s: the same parameter indices and state keys in the same
    order, values of the same shape and dtype and close, step counts 3 and 2, and the
    same param_groups (only ``group_keys`` of them when given). Returns both dicts."""
    for k in range(3):
        set_grads(P, T, grads[k], skip=(2,) if k == 0 else (), torch=torch)
        o1.step()
        o2.step()
    s1, s2 = o1.state_dict(), o2.state_dict()
    assert list(s1["state"]) == list(s2["state"])
    for i, st in s2["state"].items():
        assert list(s1["state"][i]) == list(st)
        for key, val in st.items():
            mine = s1["state"][i][key]
            assert mine.shape == tuple(val.shape), key
            assert mine.dtype == np.dtype(str(val.dtype).replace("torch.", "")), key
            np.testing.assert_allclose(mine.numpy(), val.numpy(), err_msg=key, **(tol or dict(rtol=1e-5, atol=1e-7)))
    assert s1["state"][2]["step"].item() == 2.0 and s1["state"][0]["step"].item() == 3.0
    g1, g2 = s1["param_groups"][0], s2["param_groups"][0]
    if group_keys is None:
        assert sorted(g1) == sorted(g2)
    for key in group_keys or g2:
        assert g1[key] == (list(g2[key]) if key == "params" else g2[key]), key
    return s1, s2


def check_load_torch_state(ng_cls, t_cls, kw, dtype, torch, steps=12, split=6, skips=None):
    """A torch optimizer runs ``split`` steps; a numbagrad one loads its state dict and
    both continue to ``steps`` in step. Returns (P, T, numbagrad optimizer, torch one)."""
    P, T, grads = setup(dtype, steps=steps, torch=torch)
    o2 = t_cls(T, **kw)
    for k in range(split):
        set_grads(P, T, grads[k], (skips or {}).get(k, ()), torch=torch)
        o2.step()
    for p, t in zip(P, T):
        p.array[...] = t.detach().numpy()
    o1 = ng_cls(P, **kw)
    o1.load_state_dict(o2.state_dict())
    for k in range(split, steps):
        set_grads(P, T, grads[k], torch=torch)
        o1.step()
        o2.step()
    assert_close(P, T, dtype)
    return P, T, o1, o2


def check_no_recompile(make, kernels, bump=("lr",), skip=()):
    """After a first float32 step, more steps (``skip``: parameters without a gradient) and
    ints in the hyperparameters ``bump`` compile no new signature of ``kernels``."""
    P, _, grads = setup(np.float32, steps=3)
    o = make(P)
    train(o, P, grads, [0])
    before = signature_counts(*kernels)
    train(o, P, grads, [1, 2], skip=skip)
    for key in bump:
        o.param_groups[0][key] = 1  # an int must not compile a new signature
    train(o, P, grads, [0])
    assert signature_counts(*kernels) == before


BETAS_BAD = [(dict(betas=(1.0, 0.9)), "Invalid beta parameter at index 0: 1.0"),
             (dict(betas=(0.9, -0.5)), "Invalid beta parameter at index 1: -0.5")]


def check_constructor_rejects(cls, bad, torch_cls=None, torch=None):
    """``cls([p], **kw)`` raises ValueError matching ``msg`` for each ``(kw, msg)`` of ``bad``
    (and so does ``torch_cls`` when given); ``differentiable=True`` and an empty
    parameter list are refused."""
    p = nn.Parameter(ng.ones(2))
    for kw, msg in bad:
        with pytest.raises(ValueError, match=msg):
            cls([p], **kw)
        if torch_cls is not None:
            with pytest.raises(ValueError, match=msg):  # the same check in torch
                torch_cls([torch.nn.Parameter(torch.ones(2))], **kw)
    with pytest.raises(NotImplementedError, match="differentiable"):
        cls([p], differentiable=True)
    with pytest.raises(ValueError, match="empty parameter list"):
        cls([])


# ---- one list of optimizers ---------------------------------------------------------------
# Every fused optimizer once, as the shared checks of ``test_optimizers.py`` see it:
#   oracle     torch.optim's class name, or the name of a float64 NumPy reference adapter in
#              ``optim_refs.py`` (LAMB, Lion: not in torch)
#   kernel     (family, entry point) of its fused CPU kernel (``be.kernel``)
#   cases      option sets checked step for step against the oracle (``run_parity``); they
#              reach every rounding branch of the kernels (lerp weights on both sides of
#              0.5, L2 and decoupled decay, maximize, RAdam before and after rectification)
#   tol        the parity tolerance per dtype (None: ``TOL``)
#   converge   (id, options or a maker, problem, steps, atol, closure styles)
#   state_dict (id, options, check_state_dict_round_trip's keyword arguments)
#   recompile  (id, options, check_no_recompile's keyword arguments)
# A new optimizer is one row here (its own behaviour tests stay in its test file).
Optim = collections.namedtuple("Optim", "name oracle kernel cases tol converge state_dict recompile",
                               defaults=(None, (), (), ()))


def maker(name, kw):
    """``params -> numbagrad.optim.<name>(params, **kw)``; ``kw`` may already be a maker."""
    if callable(kw):
        return kw
    cls = getattr(ng.optim, name)
    return lambda params: cls(params, **kw)


def decaying_lr(name, gamma, after=0, **kw):
    """A maker of optimizer ``name`` whose lr decays by ``gamma`` a step after the first
    ``after`` steps. LAMB's trust ratio makes every step ``lr * ||p||`` long whatever the
    gradient, so LAMB settles only as lr decays; decaying early strands it at the origin of
    Rosenbrock (the valley passes there, and steps shrink with ``||p||``)."""
    def make(params):
        opt = getattr(ng.optim, name)(params, **kw)
        count = [0]
        step = opt.step

        def decaying_step(closure=None):
            loss = step(closure)
            count[0] += 1
            if count[0] > after:
                for g in opt.param_groups:
                    g["lr"] *= gamma
            return loss
        opt.step = decaying_step
        return opt
    return make


SGD_CASES = [dict(lr=0.1), dict(lr=0.1, momentum=0.9), dict(lr=0.05, momentum=0.9, dampening=0.3),
             dict(lr=0.1, momentum=0.8, nesterov=True), dict(lr=0.1, weight_decay=0.05),
             dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01, maximize=True),
             dict(lr=0.1, momentum=0.5, dampening=0.5, weight_decay=0.1, maximize=True)]
ADAM_CASES = [dict(lr=1e-2), dict(lr=1e-2, amsgrad=True), dict(lr=1e-2, weight_decay=0.1),
              dict(lr=1e-2, maximize=True), dict(lr=0.05, betas=(0.5, 0.9), eps=1e-6),
              dict(lr=0.1, betas=(0.3, 0.5)), dict(lr=1e-2, amsgrad=True, weight_decay=0.05, maximize=True)]
RMSPROP_CASES = [dict(), dict(lr=1e-3, alpha=0.9), dict(lr=1e-2, eps=1e-4), dict(lr=1e-2, weight_decay=0.1),
                 dict(lr=1e-2, momentum=0.9), dict(lr=1e-2, centered=True), dict(lr=1e-2, alpha=0.3, centered=True),
                 dict(lr=1e-2, maximize=True), dict(lr=1e-2, centered=True, momentum=0.5),
                 dict(lr=5e-3, alpha=0.95, eps=1e-6, weight_decay=0.05, momentum=0.8, centered=True, maximize=True),
                 dict(lr=1e-2, momentum=0.9, foreach=True)]
ADAGRAD_CASES = [dict(), dict(lr=0.1), dict(lr=0.1, lr_decay=0.05), dict(lr=0.1, weight_decay=0.1),
                 dict(lr=0.1, initial_accumulator_value=0.5), dict(lr=0.1, eps=1e-3), dict(lr=0.1, maximize=True),
                 dict(lr=0.2, lr_decay=0.01, weight_decay=0.05, initial_accumulator_value=0.1, eps=1e-8,
                      maximize=True),
                 dict(lr=0.1, lr_decay=0.01, foreach=True), dict(lr=0.1, weight_decay=0.1, fused=True)]
ADADELTA_CASES = [dict(), dict(lr=0.5, rho=0.5), dict(rho=0.99, eps=1e-4), dict(weight_decay=0.1),
                  dict(maximize=True), dict(lr=2.0, rho=0.8, eps=1e-5, weight_decay=0.05, maximize=True),
                  dict(weight_decay=0.1, foreach=True)]
LAMB_CASES = [dict(lr=1e-2), dict(lr=1e-2, always_adapt=True), dict(lr=1e-2, weight_decay=0.1),
              dict(lr=1e-2, weight_decay=0.01, maximize=True), dict(lr=1e-2, weight_decay=0.1, clamp_value=0.5),
              dict(lr=1e-2, weight_decay=0.1, clamp_value=None),
              dict(lr=1e-2, always_adapt=True, bias_correction=False),
              dict(lr=0.05, betas=(0.3, 0.9), eps=1e-3, weight_decay=0.05),
              dict(lr=1e-2, betas=(0.5, 0.99), always_adapt=True, maximize=True, clamp_value=2.0)]
LION_CASES = [dict(lr=1e-2), dict(lr=1e-2, weight_decay=0.1), dict(lr=1e-2, maximize=True),
              dict(lr=3e-3, betas=(0.95, 0.98), weight_decay=1.0), dict(lr=1e-2, betas=(0.0, 0.5)),
              dict(lr=1e-2, betas=(1.0, 0.9), weight_decay=0.01, maximize=True)]
# float64 references of the papers' exact trajectories: float32 arenas drift from them
REF_TOL = {np.float32: dict(rtol=2e-5, atol=2e-5), np.float64: dict(rtol=1e-12, atol=1e-12)}
_BOTH = (False, True)
_ADAPTIVE_RECOMPILE = dict(bump=("lr", "weight_decay"))
_ADAMX_RECOMPILE = dict(bump=("lr", "weight_decay"), skip=(1,))
_ADAMX_SD = dict(skips={k: (2,) for k in range(3)})

OPTIMIZERS = [
    Optim("SGD", "SGD", ("optim", "sgd_step"), SGD_CASES,
          converge=[("quadratic", dict(lr=0.05, momentum=0.9), "quadratic", 400, 2e-2, (False,)),
                    ("rosenbrock", dict(lr=1e-3, momentum=0.9), "rosenbrock", 5000, 2e-2, (False,)),
                    ("nesterov-quadratic", dict(lr=0.02, momentum=0.9, nesterov=True), "quadratic", 400, 2e-2,
                     (False,)),
                    ("nesterov-rosenbrock", dict(lr=1e-3, momentum=0.9, nesterov=True), "rosenbrock", 5000, 2e-2,
                     (False,))],
          state_dict=[("nesterov", dict(lr=0.1, momentum=0.9, nesterov=True), {})],
          recompile=[("momentum", dict(lr=0.1, momentum=0.9), {})]),
    Optim("Adam", "Adam", ("optim", "adam_step"), ADAM_CASES,
          converge=[("quadratic", dict(lr=0.05), "quadratic", 400, 2e-2, (False,)),
                    ("rosenbrock", dict(lr=0.02), "rosenbrock", 5000, 2e-2, (False,))],
          state_dict=[("amsgrad", dict(lr=1e-2, amsgrad=True), {})],
          recompile=[("plain", dict(lr=1e-3), {})]),
    Optim("AdamW", "AdamW", ("optim", "adam_step"), ADAM_CASES,
          converge=[("quadratic", dict(lr=0.05, weight_decay=1e-4), "quadratic", 400, 2e-2, (False,)),
                    ("rosenbrock", dict(lr=0.02, weight_decay=0), "rosenbrock", 5000, 2e-2, (False,))],
          state_dict=[("plain", dict(lr=1e-2), {})]),
    Optim("Adamax", "Adamax", ("optim_adamx", "adamax_step"), ADAMX_CASES["adamax"],
          converge=[("quadratic", dict(lr=0.05), "quadratic", 400, 1e-4, (False,)),
                    ("rosenbrock", dict(lr=5e-3, betas=(0.9, 0.99)), "rosenbrock", 2000, 5e-3, (True,))],
          state_dict=[("skips", dict(lr=1e-2, weight_decay=0.01), _ADAMX_SD)],
          recompile=[("plain", dict(lr=1e-3), _ADAMX_RECOMPILE)]),
    Optim("RAdam", "RAdam", ("optim_adamx", "radam_step"), ADAMX_CASES["radam"],
          converge=[("quadratic", dict(lr=0.05), "quadratic", 400, 1e-4, (False,)),
                    ("decoupled-quadratic", dict(lr=0.05, weight_decay=1e-4, decoupled_weight_decay=True),
                     "quadratic", 400, 1e-3, (False,)),
                    ("rosenbrock", dict(lr=1e-2, betas=(0.9, 0.99)), "rosenbrock", 2000, 5e-3, (True,))],
          state_dict=[("skips", dict(lr=1e-2, weight_decay=0.01, decoupled_weight_decay=True), _ADAMX_SD)],
          recompile=[("plain", dict(lr=1e-3), _ADAMX_RECOMPILE)]),
    Optim("NAdam", "NAdam", ("optim_adamx", "nadam_step"), ADAMX_CASES["nadam"],
          converge=[("quadratic", dict(lr=0.05), "quadratic", 400, 1e-4, (False,)),
                    ("rosenbrock", dict(lr=5e-3, betas=(0.9, 0.99)), "rosenbrock", 4000, 1e-2, (True,))],
          state_dict=[("skips", dict(lr=1e-2, weight_decay=0.01), _ADAMX_SD)],
          recompile=[("plain", dict(lr=1e-3), _ADAMX_RECOMPILE)]),
    Optim("RMSprop", "RMSprop", ("optim_adaptive", "rmsprop_step"), RMSPROP_CASES,
          converge=[("quadratic", dict(lr=1e-2), "quadratic", 500, 1e-3, (False,)),
                    ("centered-momentum-quadratic", dict(lr=1e-3, momentum=0.9, centered=True), "quadratic", 500,
                     1e-3, (True,)),
                    ("momentum-rosenbrock", dict(lr=1e-3, momentum=0.9), "rosenbrock", 3000, 1e-2, (False,)),
                    ("centered-rosenbrock", dict(lr=3e-3, centered=True), "rosenbrock", 4000, 5e-2, (True,))],
          state_dict=[("centered-momentum", dict(lr=1e-2, momentum=0.9, centered=True, weight_decay=0.01), {}),
                      ("plain", dict(lr=1e-2), {})],
          recompile=[("centered-momentum", dict(lr=1e-2, momentum=0.9, centered=True), _ADAPTIVE_RECOMPILE),
                     ("plain", dict(lr=1e-2), _ADAPTIVE_RECOMPILE)]),
    Optim("Adagrad", "Adagrad", ("optim_adaptive", "adagrad_step"), ADAGRAD_CASES,
          converge=[("quadratic", dict(lr=0.5), "quadratic", 500, 1e-3, (False,)),
                    ("rosenbrock", dict(lr=1.0), "rosenbrock", 8000, 2e-2, (True,))],
          state_dict=[("decay", dict(lr=0.1, lr_decay=0.05, initial_accumulator_value=0.1), {})],
          recompile=[("decay", dict(lr=0.1, lr_decay=0.01), _ADAPTIVE_RECOMPILE)]),
    # Adadelta's step does not shrink with lr=1: it settles within ~eps-sized noise
    Optim("Adadelta", "Adadelta", ("optim_adaptive", "adadelta_step"), ADADELTA_CASES,
          converge=[("quadratic", dict(lr=1.0), "quadratic", 2000, 5e-2, (False,)),
                    ("rosenbrock", dict(lr=1.0, rho=0.999), "rosenbrock", 6000, 1e-1, (True,))],
          state_dict=[("decay", dict(lr=0.5, weight_decay=0.01), {})],
          recompile=[("plain", dict(), _ADAPTIVE_RECOMPILE)]),
    Optim("Lamb", "_RefLamb", ("optim_lamb", "lamb_step"), LAMB_CASES, tol=REF_TOL,
          converge=[("quadratic", decaying_lr("Lamb", 0.995, lr=0.05, weight_decay=1e-4), "quadratic", 600, 1e-2,
                     _BOTH),
                    ("always-adapt-quadratic", decaying_lr("Lamb", 0.995, lr=0.05, always_adapt=True), "quadratic",
                     600, 1e-2, _BOTH),
                    # no weight decay: no trust ratio
                    ("plain-quadratic", dict(lr=0.05), "quadratic", 400, 1e-3, _BOTH),
                    ("rosenbrock", decaying_lr("Lamb", 0.998, 1000, lr=0.02, betas=(0.9, 0.99), always_adapt=True),
                     "rosenbrock", 3000, 1e-2, _BOTH)],
          state_dict=[("adapt", dict(lr=1e-2, weight_decay=0.05), dict(dtype=np.float32)),
                      ("plain", dict(lr=1e-2), dict(dtype=np.float32))],
          recompile=[("adapt", dict(lr=1e-3, weight_decay=0.01), {}), ("plain", dict(lr=1e-3), {})]),
    Optim("Lion", "_RefLion", ("optim_lamb", "lion_step"), LION_CASES, tol=REF_TOL,
          converge=[("quadratic", dict(lr=2e-3), "quadratic", 1500, 1e-2, _BOTH),
                    ("rosenbrock", dict(lr=2e-3, betas=(0.95, 0.98)), "rosenbrock", 3000, 3e-2, _BOTH)],
          state_dict=[("decay", dict(lr=1e-2, weight_decay=0.1), dict(dtype=np.float32))],
          recompile=[("plain", dict(lr=1e-3), {})]),
]
