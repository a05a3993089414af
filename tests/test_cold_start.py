"""The first run: where the kernel cache lives, the compile notice, and ``numbagrad.warmup``
(numbagrad/backend/cache.py, numbagrad/warmup.py). Each check runs a fresh interpreter,
because numba reads its cache directory once."""
import json
import os
import subprocess
import sys

import pytest

from numbagrad.backend import cache

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _python(code, env_extra, timeout=600):
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR", "NUMBAGRAD_CACHE_DIR")}
    env.update(env_extra)
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def test_the_cache_directory_precedence(monkeypatch, tmp_path):
    monkeypatch.delenv("NUMBAGRAD_CACHE_DIR", raising=False)
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    import numba
    import numbagrad
    d = cache.chosen_dir()
    assert d == str(tmp_path / "xdg" / "numbagrad" / f"{numbagrad.__version__}-numba{numba.__version__}-"
                                                     f"py{sys.version_info[0]}{sys.version_info[1]}")
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "numba"))
    assert cache.chosen_dir() == str(tmp_path / "numba")
    monkeypatch.setenv("NUMBAGRAD_CACHE_DIR", str(tmp_path / "ng"))
    assert cache.chosen_dir() == str(tmp_path / "ng")


def test_kernels_are_cached_in_the_chosen_directory_with_a_notice_while_they_compile(tmp_path):
    code = ("import json, numbagrad\n"
            "import numba\n"
            "from numbagrad.backend import cache\n"
            "cache.NOTICE_AFTER = 0.0\n"
            "numba.njit(lambda x: x + 1)(1.0)\n"   # a user's own function: not counted, no notice
            "assert cache.compiled() == 0\n"
            "x = numbagrad.randn(300, requires_grad=True)\n"
            "numbagrad.nn.functional.softplus(x).sum().backward()\n"
            "print(json.dumps({'dir': numba.config.CACHE_DIR, 'compiled': cache.compiled()}))\n")
    env = {"NUMBAGRAD_CACHE_DIR": str(tmp_path / "c")}
    cold = _python(code, env)
    first = json.loads(cold.stdout.strip().splitlines()[-1])
    assert first["dir"] == str(tmp_path / "c") and first["compiled"] > 0
    assert any(f.endswith(".nbi") for _, _, fs in os.walk(tmp_path / "c") for f in fs)
    lines = [ln for ln in cold.stderr.splitlines() if "compiling kernels" in ln]
    assert len(lines) == 1 and "first run only" in lines[0] and str(tmp_path / "c") in lines[0], cold.stderr
    warm = _python(code, env)
    assert json.loads(warm.stdout.strip().splitlines()[-1])["compiled"] == 0   # every kernel loaded
    assert "compiling kernels" not in warm.stderr
    rm = _python(code, {"NUMBAGRAD_CACHE_DIR": str(tmp_path / "d"), "NUMBAGRAD_COMPILE_NOTICE": "0"})
    assert "compiling kernels" not in rm.stderr    # silenced


def test_warmup_fills_the_cache_that_later_processes_load(tmp_path):
    env = {"NUMBAGRAD_CACHE_DIR": str(tmp_path / "c"), "NUMBAGRAD_COMPILE_NOTICE": "0"}
    code = ("import numbagrad, json\n"
            "r = numbagrad.warmup(workers=1, progress=False, tasks=['digits MLP: loss'])\n"
            "print(json.dumps(r))\n")
    r = json.loads(_python(code, env).stdout.strip().splitlines()[-1])
    assert r["compiled"] > 0 and r["cache_dir"] == str(tmp_path / "c")
    again = ("import json, numbagrad\n"
             "from numbagrad import warmup\n"
             "from numbagrad.backend import cache\n"
             "warmup._run_task('digits MLP: loss')\n"
             "print(json.dumps(cache.compiled()))\n")
    assert json.loads(_python(again, env).stdout.strip().splitlines()[-1]) == 0


def test_warmup_refuses_unknown_tasks():
    import numbagrad
    with pytest.raises(ValueError, match="unknown task"):
        numbagrad.warmup(tasks=["nope"])
    with pytest.raises(TypeError, match="did you mean"):
        numbagrad.warmup(tasks="losses")
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="workers must be"):
            numbagrad.warmup(workers=bad, tasks=["losses"])


def _compile_seeing_gc(fn_source):
    """Compile a fresh ``@njit`` function (no cache) while a ``numba:compile`` listener
    records ``gc.isenabled()``; what it saw (one entry per compile start)."""
    import gc
    import numba
    from numba.core import event

    seen = []

    class Spy(event.Listener):
        def on_start(self, ev):
            seen.append(gc.isenabled())

        def on_end(self, ev):
            pass

    ns = {}
    exec(fn_source, ns)  # a new function object: numba compiles it here, whatever ran before
    f = numba.njit(ns["f"])
    spy = Spy()
    event.register("numba:compile", spy)
    try:
        assert f(3) == 7
    finally:
        event.unregister("numba:compile", spy)
    return seen


def test_no_garbage_collection_while_numba_compiles_and_back_on_after():
    import gc
    import numbagrad  # noqa: F401  (installs the listener)
    assert cache._GC_PAUSE and gc.isenabled()
    seen = _compile_seeing_gc("def f(x):\n    return 2 * x + 1\n")
    assert seen == [False]           # off inside the compiler lock
    assert gc.isenabled()            # on again once numba let the lock go
    assert cache._GC_PAUSE[0].depth == 0


def test_a_programs_own_gc_disable_is_left_alone():
    import gc
    import numbagrad  # noqa: F401
    gc.disable()
    try:
        seen = _compile_seeing_gc("def f(x):\n    return x + 4\n")
        assert seen == [False] and not gc.isenabled()   # not switched on by the pause's end
    finally:
        gc.enable()


def test_a_failed_compile_still_turns_the_collector_back_on():
    import gc
    import numba
    import numbagrad  # noqa: F401

    @numba.njit
    def bad(x):
        return x.no_such_attribute

    with pytest.raises(numba.core.errors.TypingError):
        bad(1)
    assert gc.isenabled() and cache._GC_PAUSE[0].depth == 0
