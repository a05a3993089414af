"""Every kernel entry point has its CUDA twin, ``be.kernel`` resolves only entry points,
and every jit flavour comes from ``numbagrad/kernels/_jit.py``.

The convention is in ``numbagrad/kernels/__init__.py``: each family module declares
``ENTRY_POINTS``; ``kernels/cpu/<family>.py`` defines ``_<name>_cpu`` for each, and
``kernels/cuda/<family>.py`` the launcher ``_<name>_cuda`` with the same parameter names
(or the entry point is in ``CPU_ONLY`` with the reason). ``tests/test_cuda_ptx.py``
compiles each CUDA entry point's kernels to PTX; ``tools/op_map.py`` writes the op map of
ARCHITECTURE.md from the same tables (checked fresh here).
"""
import ast
import inspect
import os
import sys

import pytest

from _kernel_families import (CPU_ONLY, cpu_entry_points, cpu_module, cuda_module, families,
                              py_function)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KERNELS = os.path.join(ROOT, "numbagrad", "kernels")
ENTRIES = cpu_entry_points()


def _cuda_ok():
    try:
        from numba import cuda  # noqa: F401
        import numbagrad.kernels.cuda  # noqa: F401
        return True
    except Exception:
        return False


needs_cuda = pytest.mark.skipif(not _cuda_ok(), reason="needs numba's CUDA target (numba-cuda)")


def _params(fn):
    return list(inspect.signature(py_function(fn)).parameters)


def _suffixed(path, suffix):
    """Module-level names ``_<name><suffix>`` a kernel module defines (def or assignment)."""
    tree = ast.parse(open(path).read())
    names = set()
    for node in tree.body:
        targets = [node.name] if isinstance(node, ast.FunctionDef) else \
            [t.id for t in getattr(node, "targets", ()) if isinstance(t, ast.Name)]
        names.update(n[1:-len(suffix)] for n in targets if n.startswith("_") and n.endswith(suffix))
    return names


@pytest.mark.parametrize("family", families())
def test_cpu_entry_points_are_the_suffixed_kernels(family):
    """ENTRY_POINTS lists exactly the ``_<name>_cpu`` kernels: internal passes carry no suffix."""
    mod = cpu_module(family)
    assert len(set(mod.ENTRY_POINTS)) == len(mod.ENTRY_POINTS), f"{family}: duplicate entry points"
    assert set(mod.ENTRY_POINTS) == _suffixed(mod.__file__, "_cpu"), family
    for name in mod.ENTRY_POINTS:
        assert callable(getattr(mod, f"_{name}_cpu")), (family, name)


@needs_cuda
@pytest.mark.parametrize("family", families())
def test_cuda_entry_points_are_twins(family):
    """The CUDA family lists its ``_<name>_cuda`` launchers, each the twin of a CPU entry point."""
    mod, cpu = cuda_module(family), cpu_module(family)
    assert set(mod.ENTRY_POINTS) == _suffixed(mod.__file__, "_cuda"), family
    assert set(mod.ENTRY_POINTS) <= set(cpu.ENTRY_POINTS), f"{family}: a CUDA entry point without a CPU one"


@needs_cuda
@pytest.mark.parametrize("family,name", ENTRIES, ids=[f"{f}.{n}" for f, n in ENTRIES])
def test_cuda_twin(family, name):
    gpu = cuda_module(family)
    if (family, name) in CPU_ONLY:
        assert name not in gpu.ENTRY_POINTS, f"{family}.{name} has a CUDA twin: drop it from CPU_ONLY"
        return
    assert name in gpu.ENTRY_POINTS, f"{family}.{name}: no CUDA twin (add _{name}_cuda or a CPU_ONLY reason)"
    cpu = getattr(cpu_module(family), f"_{name}_cpu")
    assert _params(getattr(gpu, f"_{name}_cuda")) == _params(cpu), f"{family}.{name}: parameters differ"


def test_cpu_only_lists_real_entry_points():
    assert set(CPU_ONLY) <= set(ENTRIES)
    assert all(reason.strip() for reason in CPU_ONLY.values())


def test_kernel_refuses_a_name_that_is_not_an_entry_point():
    from numbagrad.backend.cpu import CPUBackend
    be = CPUBackend()
    assert be.kernel("softmax", "softmax_bwd") is cpu_module("softmax")._softmax_bwd_cpu
    for bad in ("normalize_rows", "softmax_bwd_rows", "softmax"):
        with pytest.raises(ValueError, match=rf"'{bad}' is not an entry point of .*'softmax'.*ENTRY_POINTS"):
            be.kernel("softmax", bad)


_JIT_NAMES = {"njit", "jit", "vectorize", "guvectorize", "generated_jit", "cfunc"}
_JIT_HOMES = {os.path.join("numbagrad", "kernels", "_jit.py"),
              os.path.join("numbagrad", "kernels", "cuda", "_launch.py")}


def _jit_uses(tree):
    """Lines where a numba jit decorator is used (``njit(``, ``cuda.jit(``, ``@jit``,
    ``numba.njit``): the names a module imports from numba, followed to their uses."""
    local, mods = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "numba":
            local |= {a.asname or a.name for a in node.names if a.name in _JIT_NAMES}
            mods |= {a.asname or a.name for a in node.names if a.name == "cuda"}
        elif isinstance(node, ast.Import):
            mods |= {a.asname or a.name for a in node.names if a.name.split(".")[0] == "numba"}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in local:
            yield node.lineno, node.id
        elif (isinstance(node, ast.Attribute) and node.attr in _JIT_NAMES
              and isinstance(node.value, ast.Name) and node.value.id in mods | {"numba"}):
            yield node.lineno, f"{node.value.id}.{node.attr}"


def test_every_jit_flavour_comes_from_kernels_jit():
    """``njit(`` / ``cuda.jit(`` / ``@jit`` appear only in ``kernels/_jit.py`` and
    ``kernels/cuda/_launch.py``: flags come from one place."""
    stray = []
    for dirpath, _, files in os.walk(os.path.join(ROOT, "numbagrad")):
        for f in sorted(files):
            rel = os.path.relpath(os.path.join(dirpath, f), ROOT)
            if f.endswith(".py") and rel not in _JIT_HOMES:
                tree = ast.parse(open(os.path.join(ROOT, rel)).read())
                stray += [f"{rel}:{line}: {name}" for line, name in _jit_uses(tree)]
    assert stray == [], "jit decorators outside kernels/_jit.py and kernels/cuda/_launch.py:\n" + \
        "\n".join(stray)


def test_the_jit_check_sees_every_spelling():
    src = ("from numba import njit, cuda\n@njit\ndef f(): pass\ng = njit(cache=True)(f)\n"
           "@cuda.jit\ndef k(x): pass\nimport numba\nh = numba.njit(f)\nfrom numba import jit as J\n"
           "@J(nopython=True)\ndef m(jit): return jit\n")
    assert sorted(line for line, _ in _jit_uses(ast.parse(src))) == [2, 4, 5, 8, 10]


def test_op_map_is_fresh():
    """ARCHITECTURE.md's op map is what ``python tools/op_map.py --write`` writes."""
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    try:
        import op_map
    finally:
        sys.path.pop(0)
    current = open(os.path.join(ROOT, "ARCHITECTURE.md")).read()
    assert op_map.section(current) == op_map.render(), "stale op map: run python tools/op_map.py --write"
