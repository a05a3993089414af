"""The CPU optimizer kernels round where torch rounds, bit for bit: every fused optimizer
with torch's per-element arithmetic (SGD, Adam, AdamW, Adamax, RAdam, NAdam, RMSprop,
Adagrad, Adadelta) against its float32 NumPy emulation (``tests/reference/optim_rounding.py``:
torch's single-tensor update op by op, each op rounded as torch's CPU kernels round it).
The emulation is correctly rounded NumPy, so unlike a bitwise comparison with torch
itself this does not depend on the CPU (which multiply-adds torch's vector code fuses,
MKL's ``sqrt``).

A kernel that rounds a multiply-add twice where torch fuses it, or the reverse, changes
the last bit of many elements, and ``assert_array_equal`` sees one. Checked by hand (not
part of the suite) by breaking the emulation one op at a time: each of these made every
case that uses the op non-trivially fail, for every algorithm that uses it:

* ``add32`` as ``x + y * F32(alpha)`` (two roundings): SGD, every case with L2 weight
  decay, RMSprop with momentum, Adadelta;
* ``lerp32`` unfused: Adam, AdamW, Adamax, RAdam, NAdam, centered RMSprop (not with the
  weight 0.5, where ``(w - 1) * (e - s)`` is exact); ``lerp32`` without its ``|w| < 0.5``
  branch: the cases with a lerp weight of 0.5 or more;
* ``addcmul32`` unfused: Adam, AdamW, RAdam, NAdam, RMSprop, Adagrad, Adadelta;
* ``addcdiv32`` as ``x + c * (y / z)``: Adam, AdamW, Adamax, NAdam, Adagrad, RMSprop
  without momentum (with it ``c == 1``);
* RAdam's ``scalar / tensor`` as one division: every rectified RAdam case; NAdam's
  ``mu_product`` in float64: every NAdam case; SGD's momentum ``add`` unfused: the cases
  with dampening; Adam's ``sqrt(v)/sqrt(bc2)`` as ``sqrt(v/bc2)``, Adamax's addcdiv as
  ``x + c*(m/u)``, Adadelta's ``(s/std)*g`` as ``s*(g/std)``, RMSprop's ``v - a*a`` unfused.
"""
import numpy as np
import pytest

from numbagrad.backend import config
from numbagrad.optim import SGD, Adadelta, Adagrad, Adam, Adamax, AdamW, NAdam, RAdam, RMSprop
from reference import optim_rounding as R

import optimkit

ALGOS = {"SGD": (SGD, R.sgd), "Adam": (Adam, R.adam), "AdamW": (AdamW, R.adamw), "Adamax": (Adamax, R.adamax),
         "RAdam": (RAdam, R.radam), "NAdam": (NAdam, R.nadam), "RMSprop": (RMSprop, R.rmsprop),
         "Adagrad": (Adagrad, R.adagrad), "Adadelta": (Adadelta, R.adadelta)}

ADAMX_NAMES = {"adamax": "Adamax", "radam": "RAdam", "nadam": "NAdam"}
SGD_CASES = [dict(lr=0.1), dict(lr=0.1, weight_decay=0.1, maximize=True), dict(lr=0.1, momentum=0.9),
             dict(lr=0.1, momentum=0.9, dampening=0.3, weight_decay=0.1),
             dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.1, maximize=True)]
# betas (0.3, 0.9): lerp weight 0.7, torch.lerp's other branch
ADAM_CASES = [dict(), dict(lr=1e-2, weight_decay=0.1, maximize=True), dict(lr=1e-2, betas=(0.3, 0.9), amsgrad=True)]
ADAMW_CASES = [dict(lr=1e-2), dict(lr=1e-2, weight_decay=0.1, amsgrad=True, maximize=True)]
CASES = ([("SGD", kw) for kw in SGD_CASES] + [("Adam", kw) for kw in ADAM_CASES]
         + [("AdamW", kw) for kw in ADAMW_CASES]
         + [(ADAMX_NAMES[name], kw) for name, cases in optimkit.ADAMX_CASES.items() for kw in cases]
         + optimkit.ADAPTIVE_ROUNDING_CASES)

# One option set per algorithm through the parallel kernel twins (a group of several
# parameters, more than config.PARALLEL_THRESHOLD elements); parameter 1 has no gradient
# on the second step, so its step count lags.
PARALLEL_CASES = [("SGD", dict(lr=0.1, momentum=0.9, dampening=0.3, weight_decay=0.1)),
                  ("Adam", dict(lr=1e-2, betas=(0.3, 0.9), amsgrad=True, weight_decay=0.1)),
                  ("AdamW", dict(lr=1e-2, maximize=True)),
                  ("Adamax", dict(lr=1e-2, weight_decay=0.05, maximize=True, betas=(0.8, 0.99))),
                  ("RAdam", dict(lr=0.05, betas=(0.5, 0.9), weight_decay=0.1, decoupled_weight_decay=True)),
                  ("NAdam", dict(lr=1e-2, weight_decay=0.1, momentum_decay=0.04)),
                  ("RMSprop", dict(lr=1e-2, alpha=0.3, momentum=0.9, centered=True, weight_decay=0.1)),
                  ("Adagrad", dict(lr=0.1, lr_decay=0.1, initial_accumulator_value=0.1, maximize=True)),
                  ("Adadelta", dict(lr=0.5, rho=0.8, weight_decay=0.1))]

# Steps per run: 3, but RAdam rectifies only from step 6 (rho_t <= t for every beta2).
STEPS = {"RAdam": 8}


def _ids(cases):
    return [f"{name}-{kw}" for name, kw in cases]


def _check(name, kw, shapes, skips=()):
    """Step numbagrad's optimizer on float32 ``shapes`` (parameter ``i`` without a gradient
    at step ``k`` for ``(k, i)`` in ``skips``); each parameter and every state tensor equal
    the emulation's, bit for bit."""
    cls, emulate = ALGOS[name]
    steps = STEPS.get(name, 3)
    P, _, grads = optimkit.setup(np.float32, shapes=shapes, steps=steps)
    start = [p.detach().numpy().copy() for p in P]
    o = cls(P, **kw)
    for k in range(steps):
        optimkit.set_grads(P, None, grads[k], skip=[i for kk, i in skips if kk == k])
        o.step()
    for i, p in enumerate(P):
        ref, state = emulate(start[i], [grads[k][i] for k in range(steps) if (k, i) not in skips], **kw)
        np.testing.assert_array_equal(p.detach().numpy(), ref, err_msg=f"parameter {i}")
        assert list(o.state[p]) == list(state)
        for key, val in state.items():
            np.testing.assert_array_equal(o.state[p][key].numpy(), val, err_msg=f"parameter {i}: {key}")


@pytest.mark.parametrize("name,kw", CASES, ids=_ids(CASES))
def test_kernel_rounds_like_the_emulation(name, kw):
    _check(name, kw, [(20000,)])


@pytest.mark.parametrize("name,kw", PARALLEL_CASES, ids=_ids(PARALLEL_CASES))
def test_parallel_kernel_rounds_like_the_emulation(name, kw):
    assert sum(int(np.prod(s)) for s in optimkit.LARGE_SHAPES) >= config.PARALLEL_THRESHOLD
    _check(name, kw, optimkit.LARGE_SHAPES, skips=[(1, 1)])
