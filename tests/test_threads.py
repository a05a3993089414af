"""Parallel kernels on a busy machine (numbagrad/kernels/_threads.py): the detector of
contended cores, and the one-thread fallback, which must give the parallel launch's bits."""
import time

import numba
import numpy as np
import pytest
from numba import prange

from numbagrad.kernels import _threads
from numbagrad.kernels._jit import FlatKernel, cpu_jit


@pytest.fixture(autouse=True)
def _fresh_detector():
    _threads.reset()
    yield
    _threads.reset()


@cpu_jit(parallel=True)
def _thread_ids(out):
    for i in prange(out.size):
        out[i] = numba.get_thread_id()


def _scaled_sum(x, out):
    # a chunked reduction in the style of the library's kernels: per-chunk partials
    n = out.size
    for c in prange(n):
        lo = c * x.size // n
        hi = (c + 1) * x.size // n
        s = 0.0
        for i in range(lo, hi):
            s += x[i] * 0.5
        out[c] = s


_SCALED_SUM = FlatKernel(_scaled_sum)


def test_contended_kernels_run_on_one_thread_and_give_the_same_bits():
    if numba.get_num_threads() < 2:
        pytest.skip("one thread: nothing to fall back from")
    ids = np.full(4096, -1, np.int64)
    _thread_ids(ids)
    assert set(np.unique(ids)) <= set(range(numba.get_num_threads()))
    x = np.random.default_rng(0).standard_normal(1 << 20).astype(np.float32)
    free = np.empty(64, np.float32)
    _SCALED_SUM.parallel(x, free)
    _threads.set_contended(True)
    _thread_ids(ids)
    assert np.all(ids == 0), np.unique(ids)           # one thread: the caller's
    busy = np.empty(64, np.float32)
    _SCALED_SUM.parallel(x, busy)
    np.testing.assert_array_equal(busy, free)
    assert numba.get_num_threads() >= 2                # the caller's count is given back
    np.testing.assert_allclose(free, [x[c * x.size // 64:(c + 1) * x.size // 64].astype(np.float64).sum() * 0.5
                                      for c in range(64)], rtol=1e-4)


class _Fake:
    """A stand-in dispatcher whose launch takes ``self.delay`` seconds."""

    def __init__(self):
        self.delay = 0.0
        self.calls = 0

    def __call__(self, a):
        self.calls += 1
        t = time.perf_counter()
        while time.perf_counter() - t < self.delay:
            pass
        return a.size


def _warmed(n=3, size=10):
    """An adaptive kernel over a fake dispatcher whose fastest launch took 0.1 ms."""
    fake = _Fake()
    k = _threads.AdaptiveKernel(fake)
    a = np.zeros(size)
    fake.delay = 1e-4
    for _ in range(n):      # the first launch (a compile, maybe) is not counted; then the fastest
        k(a)
    return fake, k, a


def test_slow_launches_mark_the_cores_contended_and_a_fast_probe_frees_them(monkeypatch):
    monkeypatch.setattr(_threads, "PROBE_MIN", 0.02)
    fake, k, a = _warmed(5, 1000)
    assert not _threads.state()["contended"]
    fake.delay = 1e-4 * _threads.SLOW_FACTOR + 2 * _threads.SLOW_SLACK   # slow: a worker waited
    for _ in range(_threads.STRIKES):
        k(a)
    st = _threads.state()
    assert st["contended"] and st["episodes"] == 1
    fake.delay = 1e-4
    time.sleep(0.03)        # past the probe time: the next launch is a parallel probe, and fast
    k(a)
    assert not _threads.state()["contended"]


def test_a_slow_probe_doubles_the_wait(monkeypatch):
    monkeypatch.setattr(_threads, "PROBE_MIN", 0.01)
    fake, k, a = _warmed()
    fake.delay = 2e-3
    for _ in range(_threads.STRIKES):
        k(a)
    assert _threads.state()["contended"]
    time.sleep(0.02)
    k(a)                    # the probe: still slow
    st = _threads.state()
    assert st["contended"] and st["next_probe_in"] > 0.015
    n = fake.calls
    k(a)                    # before the next probe: the same dispatcher, on one thread
    assert fake.calls == n + 1 and _threads.state()["contended"]


def test_a_single_slow_launch_is_not_contention():
    fake, k, a = _warmed()
    fake.delay = 3e-3
    k(a)
    fake.delay = 1e-4
    for _ in range(5):
        k(a)
    assert not _threads.state()["contended"]


def test_a_size_first_seen_while_contended_is_probed_and_frees_the_cores(monkeypatch):
    # the perf suite once stayed on one thread for good: every kernel it ran after a (false)
    # alarm was a size with no fastest launch to compare a probe with
    # a clock of its own, which each launch advances by exactly 0.1 ms: the real one let a
    # preempted launch (a time slice on this shared machine) fail the test now and then
    monkeypatch.setattr(_threads, "PROBE_MIN", 0.01)
    now = [100.0]
    monkeypatch.setattr(_threads, "_clock", lambda: now[0])

    def launch(a):
        now[0] += 1e-4
        return a.size

    k = _threads.AdaptiveKernel(launch)
    a = np.zeros(10)
    _threads.set_contended(True)
    _threads._DET.next_probe = 0.0   # a probe is due
    k(a)                             # never seen: may compile, runs on one thread
    k(a)                             # the probe: its time is the reference now
    assert _threads.state()["contended"]
    now[0] += 0.02
    k(a)                             # the next probe is as fast: the cores are free
    assert not _threads.state()["contended"]


def test_loss_totals_do_not_depend_on_the_thread_count():
    """A loss kernel's sums (the loss value; cross-entropy's weight total, which scales the
    gradient of a weighted mean) are summed in row order after the rows, not as a ``prange``
    reduction, whose per-thread partials made them change in the last bit when a busy
    machine put the parallel twin on one thread. Each total is also the serial twin's (with
    one thread only that part tells anything: there the team is always one)."""
    from numbagrad.kernels.cpu import bce, loss
    rng = np.random.default_rng(0)
    n, C = 512, 257
    x = rng.standard_normal(n * C).astype(np.float32)
    t = rng.integers(0, C, n)
    w = (rng.random(C) + 0.1).astype(np.float32)
    soft = rng.random(n * C).astype(np.float32)

    def ce(twin):
        out = [np.empty(n * C, np.float32), np.empty(n, np.float32), np.empty(n, np.float32)]
        return getattr(loss._cross_entropy_fwd_cpu, twin)(x, t, w, True, -100, 0.1, C, *out)[:2]

    def ce_soft(twin):
        out = [np.empty(n * C, np.float32), np.empty(n, np.float32), np.empty(n, np.float32)]
        return getattr(loss._cross_entropy_soft_fwd_cpu, twin)(x, soft, w, True, 0.0, C, *out)

    def bce_fwd(twin):
        y = (soft > 0.5).astype(np.float32)
        return getattr(bce._bce_logits_fwd_cpu, twin)(x, y, x, 0, x, 0, False, False, 4096, np.empty_like(x), True)

    for f in (ce, ce_soft, bce_fwd):
        free = f("parallel")
        _threads.set_contended(True)     # the same parallel twin on a team of one
        busy = f("parallel")
        _threads.reset()
        assert busy == free, (f.__name__, busy, free)
        assert f("serial") == free, f.__name__
    # and the values are the sums they stand for
    out = [np.empty(n * C, np.float32), np.empty(n, np.float32), np.empty(n, np.float32)]
    total, wtot, nbad = loss._cross_entropy_fwd_cpu.parallel(x, t, w, True, -100, 0.0, C, *out)
    assert nbad == 0 and wtot == pytest.approx(float(w[t].astype(np.float64).sum()), rel=1e-12)
    assert total == pytest.approx(float(out[1].astype(np.float64).sum()), rel=1e-12)
