"""numbagrad.optim.schedules: each schedule against a NumPy closed form, composition
with join, validation, and the LambdaLR / ScheduleLR adapters."""
import numpy as np
import pytest

import numbagrad as ng
from numbagrad import nn, optim
from numbagrad.optim import lr_scheduler as L
from numbagrad.optim import schedules as S

T = np.arange(0, 400, dtype=np.float64)


def _eval(fn, steps=T):
    return np.array([fn(int(t)) for t in steps], dtype=np.float64)


def _close(a, b, rtol=1e-12):
    np.testing.assert_allclose(np.asarray(a, np.float64), np.asarray(b, np.float64), rtol=rtol, atol=1e-15)


def test_constant():
    _close(_eval(S.constant(0.3)), np.full(T.shape, 0.3))


@pytest.mark.parametrize("start,end,steps", [(0.0, 1.0, 100), (0.5, 0.01, 250), (2.0, 2.0, 7), (1e-3, 0.1, 1)])
def test_linear(start, end, steps):
    want = start + (end - start) * np.minimum(T, steps) / steps
    _close(_eval(S.linear(start, end, steps)), want)
    assert S.linear(start, end, 0)(0) == end


@pytest.mark.parametrize("init,decay_steps,alpha", [(0.1, 100, 0.0), (1.0, 333, 0.05), (3e-4, 1, 0.5)])
def test_cosine_decay(init, decay_steps, alpha):
    c = 0.5 * (1 + np.cos(np.pi * np.minimum(T, decay_steps) / decay_steps))
    _close(_eval(S.cosine_decay(init, decay_steps, alpha)), init * ((1 - alpha) * c + alpha))
    assert S.cosine_decay(init, decay_steps, alpha)(decay_steps) == pytest.approx(alpha * init, abs=1e-15)


@pytest.mark.parametrize("staircase", [False, True])
@pytest.mark.parametrize("init,decay_steps,rate", [(0.1, 10, 0.5), (1.0, 37, 0.96), (2.0, 1, 0.99)])
def test_exponential_decay(init, decay_steps, rate, staircase):
    p = T / decay_steps
    if staircase:
        p = np.floor(p)
    _close(_eval(S.exponential_decay(init, decay_steps, rate, staircase)), init * rate ** p)


def test_piecewise():
    bounds, vals = [10, 50, 50, 200], [1.0, 0.5, 7.0, 0.25, 0.125]
    idx = np.searchsorted(np.array(bounds), T, side="right")
    _close(_eval(S.piecewise(bounds, vals)), np.array(vals)[idx])
    f = S.piecewise([5], [1.0, 2.0])
    assert (f(4), f(5), f(6)) == (1.0, 2.0, 2.0)  # switches at the boundary
    assert S.piecewise([], [3.0])(123) == 3.0


def test_warmup_linear():
    init, peak, W, N, end = 1e-4, 0.1, 30, 300, 1e-3
    want = np.where(T < W, init + (peak - init) * T / W,
                    peak + (end - peak) * np.minimum(T - W, N - W) / (N - W))
    _close(_eval(S.warmup_linear(init, peak, W, N, end)), want)
    _close(_eval(S.warmup_linear(0.0, 1.0, 0, 10)), 1.0 - np.minimum(T, 10) / 10)


def test_warmup_cosine():
    init, peak, W, N, end = 0.0, 0.1, 25, 275, 1e-4
    d = np.minimum(np.maximum(T - W, 0), N - W)
    cos = end + (peak - end) * 0.5 * (1 + np.cos(np.pi * d / (N - W)))
    want = np.where(T < W, init + (peak - init) * T / W, cos)
    _close(_eval(S.warmup_cosine(init, peak, W, N, end)), want)
    f = S.warmup_cosine(init, peak, W, N, end)
    assert f(0) == init and f(W) == peak and f(N) == pytest.approx(end) and f(N + 50) == pytest.approx(end)


def test_join_composes_and_restarts_the_step_count():
    a = S.linear(0.0, 1.0, 10)
    b = S.exponential_decay(1.0, 20, 0.5)
    c = S.cosine_decay(0.25, 100, alpha=0.2)
    d = S.piecewise([30], [0.01, 0.001])
    f = S.join([a, b, c, d], [10, 60, 60 + 150])
    t = T
    want = np.select(
        [t < 10, t < 60, t < 210],
        [t / 10, 0.5 ** ((t - 10) / 20),
         0.25 * (0.8 * 0.5 * (1 + np.cos(np.pi * np.minimum(t - 60, 100) / 100)) + 0.2)],
        np.where(t - 210 < 30, 0.01, 0.001))
    _close(_eval(f), want)
    # nested joins: the inner join also counts from its own boundary
    g = S.join([S.constant(5.0), S.join([S.linear(1.0, 0.0, 4), S.constant(-1.0)], [4])], [3])
    assert [g(k) for k in range(9)] == [5.0, 5.0, 5.0, 1.0, 0.75, 0.5, 0.25, -1.0, -1.0]


def test_float_steps_and_negative_steps():
    f = S.linear(0.0, 1.0, 10)
    assert f(2.5) == 0.25 and f(-3) == 0.0
    assert S.exponential_decay(1.0, 2, 0.25)(1.0) == 0.5


def test_validation():
    with pytest.raises(ValueError, match="steps"):
        S.linear(0, 1, -1)
    with pytest.raises(ValueError, match="decay_steps"):
        S.cosine_decay(0.1, 0)
    with pytest.raises(ValueError, match="decay_steps"):
        S.exponential_decay(0.1, 2.5, 0.5)
    with pytest.raises(ValueError, match="decay_rate"):
        S.exponential_decay(0.1, 2, -0.5)
    with pytest.raises(ValueError, match="len\\(values\\)"):
        S.piecewise([1, 2], [1.0, 2.0])
    with pytest.raises(ValueError, match="non-decreasing"):
        S.piecewise([5, 2], [1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="len\\(schedules\\)"):
        S.join([S.constant(1.0)], [3])
    with pytest.raises(TypeError, match="callable"):
        S.join([S.constant(1.0), 2.0], [3])
    with pytest.raises(ValueError, match="total_steps"):
        S.warmup_cosine(0.0, 1.0, 10, 10)
    with pytest.raises(ValueError, match="finite"):
        S.constant(float("nan"))
    with pytest.raises(ValueError, match="base_lr"):
        S.as_lambda(S.constant(1.0), 0.0)


def test_as_lambda_and_schedule_lr_drive_sgd():
    """A numbagrad SGD step under either adapter moves the parameter by exactly
    schedule(step) * grad."""
    fn = S.join([S.linear(0.0, 0.2, 5), S.exponential_decay(0.2, 3, 0.5, staircase=True)], [5])
    g = np.array([0.5, -1.5, 2.0])
    for adapter in (lambda o: L.ScheduleLR(o, fn), lambda o: L.LambdaLR(o, S.as_lambda(fn, 0.2))):
        p = nn.Parameter(ng.tensor(np.array([1.0, 2.0, 3.0])))
        o = optim.SGD([p], lr=0.2)
        sched = adapter(o)
        for k in range(20):
            lr = o.param_groups[0]["lr"]
            assert lr == pytest.approx(fn(k), rel=1e-14, abs=1e-16)
            before = p.detach().numpy().copy()
            p.grad = ng.tensor(g)
            o.step()
            np.testing.assert_array_equal(p.detach().numpy(), before - lr * g)
            sched.step()
