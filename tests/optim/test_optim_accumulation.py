"""Gradient accumulation works with every optimizer: gradients of two half-batches
accumulated by ``backward`` (``zero_grad`` only every second time) give the same step as
the full batch's gradient, whether the accumulation lands in fresh arrays or in the arrays
``zero_grad(set_to_none=False)`` zeroed in place (the ``.grad`` arrays of the previous step,
which the optimizer read where they are)."""
import numpy as np
import pytest

import numbagrad as ng
from numbagrad import nn, optim

MAKERS = {
    "SGD": lambda p: optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True),
    "Adam": lambda p: optim.Adam(p, lr=1e-2, amsgrad=True),
    "AdamW": lambda p: optim.AdamW(p, lr=1e-2),
    "Adamax": lambda p: optim.Adamax(p, lr=1e-2),
    "RAdam": lambda p: optim.RAdam(p, lr=1e-2),
    "NAdam": lambda p: optim.NAdam(p, lr=1e-2),
    "RMSprop": lambda p: optim.RMSprop(p, lr=1e-2, momentum=0.5, centered=True),
    "Adagrad": lambda p: optim.Adagrad(p, lr=1e-2),
    "Adadelta": lambda p: optim.Adadelta(p),
    "Lamb": lambda p: optim.Lamb(p, lr=1e-2, weight_decay=0.01),
    "Lion": lambda p: optim.Lion(p, lr=1e-3),
    "LBFGS": lambda p: optim.LBFGS(p, lr=0.5, max_iter=3),
}


def _model(seed):
    ng.manual_seed(seed)
    return nn.Sequential(nn.Linear(6, 5), nn.Tanh(), nn.Linear(5, 2)).to(ng.float64)


def _run(name, accumulate, set_to_none, steps=4):
    rng = np.random.default_rng(0)
    x = ng.tensor(rng.standard_normal((8, 6)))
    y = ng.tensor(rng.standard_normal((8, 2)))
    m = _model(1)
    opt = MAKERS[name](list(m.parameters()))

    def loss_of(xb, yb):
        # sum over the batch / 8: the two halves' losses add up to the full batch's
        return ((m(xb) - yb) ** 2).sum() / 8

    def closure():
        opt.zero_grad(set_to_none=set_to_none)
        if accumulate:
            total = None
            for half in (slice(0, 4), slice(4, 8)):
                part = loss_of(x[half], y[half])
                part.backward()
                total = part if total is None else total + part.detach()
            return total
        loss = loss_of(x, y)
        loss.backward()
        return loss

    for _ in range(steps):
        if name == "LBFGS":
            opt.step(closure)
        else:
            closure()
            opt.step()
    return [p.detach().numpy().copy() for p in m.parameters()]


@pytest.mark.parametrize("set_to_none", [True, False], ids=["fresh-grads", "kept-grads"])
@pytest.mark.parametrize("name", list(MAKERS))
def test_accumulated_half_batches_step_like_the_full_batch(name, set_to_none):
    full = _run(name, accumulate=False, set_to_none=set_to_none)
    acc = _run(name, accumulate=True, set_to_none=set_to_none)
    start = [p.detach().numpy() for p in _model(1).parameters()]
    assert any(np.abs(f - s).max() > 1e-6 for f, s in zip(full, start))  # it trained
    for a, f in zip(acc, full):
        np.testing.assert_allclose(a, f, rtol=1e-9, atol=1e-12)
