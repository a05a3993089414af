"""Parallel kernels that step aside while the cores are busy.

A ``parallel=True`` launch ends at a barrier: the calling thread waits for every worker.
On a quiet machine that costs ~2 us. When another process holds the cores (a second
experiment, a test suite, a browser), a worker that the scheduler has descheduled
keeps the barrier waiting for its time slice, a few ms, and the spinning workers take CPU
from the calling thread. Measured here (2 cores, the digits MLP, batch 32, 5 epochs):
17-21 ms an epoch alone; beside two busy-loop processes 1038 ms with two threads and 29 ms
with one (torch: 154 ms).

So every parallel dispatcher numbagrad builds is an :class:`AdaptiveKernel`. It times its
launches (``perf_counter``, ~0.1 us, only on launches big enough to be parallel) and
keeps, per input-size bucket (the bit lengths of ``args[0].size``, or of the first three
arguments' sizes for kernels whose work is not one array's size: a GEMM's operands, a
convolution's input and weight), the fastest launch seen: a
lower bound of the quiet-machine time that a busy spell cannot raise, so a process started
on a busy machine finds out too. A launch that takes far longer (``SLOW_FACTOR`` x the
fastest plus ``SLOW_SLACK``) is a *strike*; ``STRIKES`` strikes within
``STRIKE_WINDOW`` seconds mean the cores are contended, and from then on every adaptive
kernel runs on one thread. A *probe* (one parallel launch, by whichever kernel comes
first once it is due) ends that when it is within twice the fastest launch of its size;
while it is not, the time to the next probe doubles, from ``PROBE_MIN`` to ``PROBE_MAX``
seconds. A probe of a size with no fastest launch yet (first seen while contended) only
records one, and the next probe comes after ``PROBE_MIN``: otherwise a program whose
kernels all started during a busy spell (or after a false alarm) would stay on one thread
for good, which the perf suite once did (matmul 512 at 2.0x torch). The factor and slack
are wide because a quiet machine varies too (page faults on fresh outputs, cache misses
within a size bucket), while a descheduled worker costs a time slice, milliseconds.

While contended, a kernel runs the same compiled code on one thread: numba's thread count
is set to 1 around the call (``_set_num_threads``, thread-local, ~0.4 us), so OpenMP forms
a team of one and no barrier waits for a descheduled worker. Nothing compiles, and every
argument, the task count included, is the caller's, so the bits are those of a parallel
launch; only the time differs. That holds because no kernel keeps a float ``prange``
*reduction* (a scalar accumulated across iterations): numba splits one into a partial per
thread, so its result would change in the last bit with the team's size. Kernels write
per-row or per-chunk results to arrays and sum them after the loop in a fixed order
(``kernels/cpu/loss.py``'s ``_ordered_sum``; tests/test_threads.py holds the loss totals to
it); integer counts and max/min need no such care. (A serial twin compiled on first contention took 6 s on the
busy machine.) ``state()`` says what the
detector sees; ``reset()`` forgets it (tests).

In a child forked after numba's pool started under GNU OpenMP (``config.fork_runs_serial``),
any parallel launch, a team of one included, is terminated by numba. There an
``os.register_at_fork`` handler marks the cores contended for good (``serial_only()``), and
each adaptive kernel runs a serial twin: the one it was given (``FlatKernel``'s), or one
compiled from the same function without ``parallel`` on first use (on-disk cached, so once
per machine). ``prange`` becomes ``range`` over the same iterations: the same bits.
"""
import os
import time

from ..backend import config

SLOW_FACTOR = 6.0
SLOW_SLACK = 250e-6
STRIKES = 3
STRIKE_WINDOW = 0.5
PROBE_MIN = 0.1
PROBE_MAX = 2.0
_UNSEEN = object()

_clock = time.perf_counter


class _Detector:
    __slots__ = ("contended", "next_probe", "backoff", "strikes", "first_strike", "episodes")

    def __init__(self):
        self.contended = _SERIAL_ONLY
        self.next_probe = float("inf") if _SERIAL_ONLY else 0.0
        self.backoff = PROBE_MIN
        self.strikes = 0
        self.first_strike = 0.0
        self.episodes = 0      # how many times the cores were found contended (for tests, reports)

    def strike(self, now):
        if now - self.first_strike > STRIKE_WINDOW:
            self.strikes, self.first_strike = 0, now
        self.strikes += 1
        if self.strikes >= STRIKES:
            self.contended = True
            self.episodes += 1
            self.strikes = 0
            self.backoff = PROBE_MIN
            self.next_probe = now + PROBE_MIN


# In a forked child that must not launch parallel work (``config.fork_runs_serial``): every
# adaptive kernel runs its serial twin, for good (contended, with no probe ever due).
_SERIAL_ONLY = False
_DET = _Detector()


def _after_fork_in_child():
    global _SERIAL_ONLY, _DET
    if config.fork_runs_serial():
        _SERIAL_ONLY = True
        _DET = _Detector()


os.register_at_fork(after_in_child=_after_fork_in_child)


def serial_only():
    """True in a forked child where parallel kernels cannot run (every launch is serial)."""
    return _SERIAL_ONLY


def state():
    """``{"contended": bool, "episodes": int, "next_probe_in": seconds}``."""
    return {"contended": _DET.contended, "episodes": _DET.episodes,
            "next_probe_in": max(0.0, _DET.next_probe - _clock()) if _DET.contended else 0.0}


def reset():
    """Forget what the detector saw (the cores count as free again)."""
    global _DET
    _DET = _Detector()


def set_contended(flag):
    """Force the state (tests, and users who know their machine is shared):
    ``True`` runs every adaptive kernel serially until a probe finds the cores free."""
    if flag:
        _DET.contended, _DET.backoff = True, PROBE_MAX
        _DET.next_probe = _clock() + PROBE_MAX
    elif not _SERIAL_ONLY:
        _DET.contended = False


def _thread_count_setters():
    import numba
    from numba.np.ufunc import parallel
    numba.get_num_threads()  # starts the pool; the raw setters exist from then on
    return parallel._get_num_threads, parallel._set_num_threads


_SETTERS = []


class AdaptiveKernel:
    """A ``parallel=True`` numba dispatcher that runs on one thread while the cores are
    contended (module docstring). Other attributes (``signatures``, ``compile``,
    ``py_func``...) are the dispatcher's."""

    __slots__ = ("parallel", "_best", "_serial", "_nkey")

    def __init__(self, parallel, serial=None, key_args=1):
        self.parallel = parallel
        self._nkey = key_args  # how many leading arguments' sizes make the size bucket
        self._best = {}  # size bucket -> fastest launch seen, seconds (None: seen once)
        self._serial = serial  # the serial twin: used only in a serial-only forked child

    def _serial_twin(self):
        s = self._serial
        if s is None:
            from ._jit import serial_copy
            s = self._serial = serial_copy(self.parallel, "_ser")
        return s

    def __getattr__(self, name):
        return getattr(self.parallel, name)

    def _one_thread(self, args):
        if not _SETTERS:
            _SETTERS.extend(_thread_count_setters())
        get, put = _SETTERS
        n = get()
        put(1)
        try:
            return self.parallel(*args)
        finally:
            put(n)

    def __call__(self, *args):
        det = _DET
        if self._nkey == 1:
            a = args[0]
            key = a.size.bit_length() if hasattr(a, "size") else 0
        else:
            key = tuple(getattr(a, "size", 0).bit_length() for a in args[:self._nkey])
        if det.contended:
            if _SERIAL_ONLY:  # a forked child: no parallel launch at all (module docstring)
                return self._serial_twin()(*args)
            now = _clock()
            if now < det.next_probe:
                return self._one_thread(args)
            best = self._best.get(key, _UNSEEN)
            if best is _UNSEEN:      # a size never launched: its first launch may compile
                self._best[key] = None
                return self._one_thread(args)
            r = self.parallel(*args)  # the probe
            dt = _clock() - now
            if best is None or dt < best:
                # no quiet reference for this size yet (first seen while contended): keep
                # this one and probe again soon, where the next launch can be judged
                self._best[key] = dt
                det.next_probe = now + dt + PROBE_MIN
            elif dt <= 2.0 * best + SLOW_SLACK:
                det.contended = False
                det.backoff = PROBE_MIN
            else:
                det.backoff = min(PROBE_MAX, 2.0 * det.backoff)
                det.next_probe = now + dt + det.backoff
            return r
        t0 = _clock()
        r = self.parallel(*args)
        dt = _clock() - t0
        best = self._best.get(key, _UNSEEN)
        if best is _UNSEEN:
            self._best[key] = None      # the first launch of a size may have compiled: not counted
        elif best is None or dt < best:
            self._best[key] = dt
        elif dt > SLOW_FACTOR * best + SLOW_SLACK:
            det.strike(t0 + dt)
        return r
