"""Where numba's compiled kernels are cached, and a note on stderr while they compile.

**The cache directory.** numba caches compiled kernels beside their source by default
(``__pycache__`` in the package), which an installed, read-only package cannot write:
every run then compiles everything again. numbagrad points numba at a per-user,
per-version directory instead::

    $NUMBAGRAD_CACHE_DIR                       if set, else
    $NUMBA_CACHE_DIR                           if set (numba's own variable wins then), else
    $XDG_CACHE_HOME/numbagrad/<key>            (~/.cache/numbagrad/<key> without XDG_CACHE_HOME)

``<key>`` names numbagrad's, numba's and Python's versions (``0.1.0-numba0.68.1-py311``),
so an upgrade never loads code compiled for another version (numba's own index also
checks each source file's time stamp and size, which covers an editable install's
edits). A directory that cannot be created is not used (numba's default applies).

**The compile notice.** A cold cache costs seconds of compiling before the first training
step, with nothing on the screen. Once compiling numbagrad's kernels (a user's own
``@njit`` functions are not counted) has taken more than ``NOTICE_AFTER``
seconds in this process, one line goes to stderr: ``numbagrad: compiling kernels (first
run only; later runs load them from <dir>)... N so far``. On a terminal the count updates
in place and the line ends when the process exits; elsewhere (logs) the line is written
once. ``NUMBAGRAD_COMPILE_NOTICE=0`` switches it off.

**No garbage collection while numba holds its compiler lock.** Compiling a kernel, or
loading it from the cache, allocates tens of thousands of short-lived objects (types,
IR, LLVM wrappers), and each burst sets off full collections that walk every object of
the process, numba's own large state included. :func:`pause_gc_while_compiling`
(installed with the compile counter) disables the cyclic collector from the moment a
thread asks for numba's compiler lock until the last holder lets it go, then enables it
again (only if it was enabled: a program's own ``gc.disable()`` is left alone).
The garbage of those compiles is collected at the first collection after it. Measured on
the digits job (``python -m numbagrad --quiet``, 2 vCPUs, time in the collector): a cold
cache 0.91-0.97 s -> 0.48 s of a 7.4-7.9 s job (8 full collections -> 1); warm, 210 ->
140-160 ms. (Pausing it through ``import numbagrad`` too was tried: the deferred
objects then cost more in the first collections after the import than they saved.)
"""
import gc
import os
import sys
import threading
import time

NOTICE_AFTER = 1.0


def _key():
    from .. import __version__
    try:
        from importlib import metadata
        numba_version = metadata.version("numba")
    except Exception:  # noqa: BLE001 - metadata missing: the version numba reports
        import numba
        numba_version = numba.__version__
    return f"{__version__}-numba{numba_version}-py{sys.version_info[0]}{sys.version_info[1]}"


def default_dir():
    """The directory numbagrad would choose without ``NUMBAGRAD_CACHE_DIR``/``NUMBA_CACHE_DIR``."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "numbagrad", _key())


def chosen_dir():
    """The cache directory this process uses (see the module docstring); None: numba's default."""
    own = os.environ.get("NUMBAGRAD_CACHE_DIR")
    if own:
        return own
    if os.environ.get("NUMBA_CACHE_DIR"):
        return os.environ["NUMBA_CACHE_DIR"]
    return default_dir()


def configure():
    """Point numba at :func:`chosen_dir` (before numba is imported, through its
    environment variable; after, through ``numba.config``)."""
    d = chosen_dir()
    if d is None:
        return None
    try:
        os.makedirs(d, exist_ok=True)
        if not os.access(d, os.W_OK):
            return None
    except OSError:
        return None
    os.environ["NUMBA_CACHE_DIR"] = d
    numba = sys.modules.get("numba")
    if numba is not None and getattr(numba, "config", None) is not None:
        numba.config.CACHE_DIR = d
    return d


class _Notice:
    """numba ``numba:compile`` event listener (see the module docstring)."""

    def __init__(self, stream=None):
        self.stream = stream
        self.quiet = os.environ.get("NUMBAGRAD_COMPILE_NOTICE", "1").strip().lower() in ("0", "false", "no", "off")
        self.depth = 0
        self.t0 = 0.0
        self.seconds = 0.0
        self.count = 0
        self.shown = False
        self.tty = False

    def on_start(self, ev):
        if self.depth == 0:
            self.t0 = time.perf_counter()
        self.depth += 1

    def on_end(self, ev):
        self.depth -= 1
        if self.depth:
            return
        mod = getattr(getattr(ev.data.get("dispatcher"), "py_func", None), "__module__", None) or ""
        if not (mod == "numbagrad" or mod.startswith("numbagrad.")):
            return  # a user's own @njit function: not numbagrad's to count or announce
        self.seconds += time.perf_counter() - self.t0
        self.count += 1
        if self.quiet or self.seconds < NOTICE_AFTER:
            return
        out = self.stream or sys.stderr
        where = os.environ.get("NUMBA_CACHE_DIR") or "the cache"
        text = f"numbagrad: compiling kernels (first run only; later runs load them from {where})... "
        try:
            if not self.shown:
                self.shown = True
                self.tty = out.isatty()
                if self.tty:
                    import atexit
                    atexit.register(self.end_line)
                    out.write(f"{text}{self.count} so far")
                else:
                    out.write(f"{text}{self.count} so far, {self.seconds:.1f} s\n")
                out.flush()
            elif self.tty:
                out.write(f"\r{text}{self.count} so far, {self.seconds:.1f} s")
                out.flush()
        except (OSError, ValueError):  # a closed stream: say nothing
            pass

    def end_line(self):
        try:
            (self.stream or sys.stderr).write("\n")
        except (OSError, ValueError):
            pass


class _GcPause:
    """``numba:compiler_lock`` event listener: the cyclic garbage collector is off while
    any thread holds or waits for numba's compiler lock (module docstring). Nested and
    concurrent holders are counted under a lock of its own."""

    def __init__(self):
        self.lock = threading.Lock()
        self.depth = 0
        self.was_enabled = False

    def on_start(self, ev):
        with self.lock:
            if self.depth == 0:
                self.was_enabled = gc.isenabled()
                if self.was_enabled:
                    gc.disable()
            self.depth += 1

    def on_end(self, ev):
        with self.lock:
            self.depth -= 1
            if self.depth == 0 and self.was_enabled:
                gc.enable()


_LISTENER = []


def compiled():
    """How many of numbagrad's kernels (top-level numba compilations) this process has compiled."""
    return _LISTENER[0].count if _LISTENER else 0


def watch_compiles():
    """Register the compile counter and notice once (the notice stays silent with
    ``NUMBAGRAD_COMPILE_NOTICE=0``)."""
    if not _LISTENER:
        _LISTENER.append(_listen("numba:compile", _Notice))
    pause_gc_while_compiling()


_GC_PAUSE = []


def pause_gc_while_compiling():
    """Register the :class:`_GcPause` listener for ``numba:compiler_lock`` once (module
    docstring)."""
    if not _GC_PAUSE:
        _GC_PAUSE.append(_listen("numba:compiler_lock", _GcPause))


def _listen(kind, impl):
    """An instance of ``impl`` (a class with ``on_start``/``on_end``) registered with
    numba as a listener of the ``kind`` events."""
    from numba.core import event

    class _Listener(event.Listener, impl):
        __init__ = impl.__init__
        on_start = impl.on_start
        on_end = impl.on_end

    listener = _Listener()
    event.register(kind, listener)
    return listener
