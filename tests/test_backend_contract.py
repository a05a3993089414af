"""The backend contract (``numbagrad/backend/base.py``): both backends implement every
name of ``CONTRACT``, and the layers above the backend call nothing else on a backend.

The CUDA class is checked without a GPU: ``backend/cuda.py`` imports without numba's CUDA
target (it only fails when a backend object is made), so the class itself is inspected.
"""
import abc
import ast
import inspect
import pathlib

import numpy as np
import pytest

from numbagrad.backend import base
from numbagrad.backend.cpu import CPU_BACKEND, CPUBackend
from numbagrad.backend.cuda import CUDABackend

ROOT = pathlib.Path(__file__).resolve().parents[1]
ABOVE = ("ops", "nn", "optim", "train", "amp", "metrics", "io", "data")
BACKENDS = [CPUBackend, CUDABackend]


def _owner(cls, name):
    """The class of ``cls``'s MRO that defines ``name``."""
    for k in cls.__mro__:
        if name in vars(k):
            return k
    return None


@pytest.mark.parametrize("cls", BACKENDS, ids=lambda c: c.__name__)
def test_every_contract_name_is_implemented(cls):
    assert issubclass(cls, base.Backend)
    assert not inspect.isabstract(cls), f"{cls.__name__} lacks {sorted(cls.__abstractmethods__)}"
    missing = [n for n in base.CONTRACT if _owner(cls, n) is None]
    assert not missing, f"{cls.__name__} lacks {missing}"
    # what the base leaves abstract, the backend defines itself (never another backend's)
    for n in base.CONTRACT:
        owner = _owner(cls, n)
        assert owner in (cls, base.Backend), f"{cls.__name__}.{n} comes from {owner.__name__}"
        if owner is base.Backend:
            assert not getattr(vars(base.Backend)[n], "__isabstractmethod__", False), n
    for n in ("name", "device", "array_type"):
        assert getattr(cls, n) is not None, f"{cls.__name__}.{n} is not set"


def test_cuda_does_not_inherit_the_cpu_backend():
    assert not issubclass(CUDABackend, CPUBackend)


def test_a_backend_missing_a_primitive_cannot_be_made():
    class Partial(base.Backend):
        name = "partial"

        def kernel(self, family, name):
            return None
    with pytest.raises(TypeError, match="abstract"):
        Partial()


def test_every_abstract_name_is_in_the_contract():
    assert set(base.Backend.__abstractmethods__) <= set(base.CONTRACT)


def test_numpy_primitives_are_numpy_functions():
    """The shared NumPy-named primitives are NumPy's own functions (dispatched by array type)."""
    for n, f in base.NUMPY_PRIMITIVES.items():
        assert getattr(CPU_BACKEND, n) is f
        assert n in base.CONTRACT


def test_cpu_helpers_against_numpy():
    """The helpers written in primitives, checked on the CPU against NumPy directly."""
    rng = np.random.default_rng(0)
    g = rng.standard_normal((4, 3, 5))
    np.testing.assert_allclose(CPU_BACKEND.sum_to_shape(g, (3, 1)), g.sum(axis=(0, 2)).reshape(3, 1))
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((5, 4))
    np.testing.assert_allclose(CPU_BACKEND.dot_t(a, b, trans_b=True), a @ b.T, rtol=1e-12)
    out = np.empty((3, 5))
    CPU_BACKEND.mm_into(a, np.ascontiguousarray(b.T), out)
    np.testing.assert_allclose(out, a @ b.T, rtol=1e-12)
    h = np.array([1.5, -0.0, 3.0, -2.25], np.float16)
    w = CPU_BACKEND.widen(h)
    assert w.dtype == np.float32 and np.array_equal(w, h.astype(np.float32))
    back = np.zeros(4, np.float16)
    CPU_BACKEND.narrow_into(w, back)
    assert np.array_equal(back.view(np.uint16), h.view(np.uint16))
    assert np.array_equal(CPU_BACKEND.signbit(np.array([-0.0, 0.0, -1.0, np.inf])), [True, False, True, False])


def _is_backend_expr(node):
    """``be``, ``be0``, ``self.be``, ``bucket.be``, ``self._be``, ``backend_of(...)``,
    ``backend_for_device(...)``: an expression that names a backend."""
    if isinstance(node, ast.Name):
        return node.id in ("be", "be0", "_be")
    if isinstance(node, ast.Attribute):
        return node.attr in ("be", "_be")
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        return node.func.id in ("backend_of", "backend_for_device")
    return False


def backend_uses(tree):
    """[(line, name)] of every ``<backend>.name`` in ``tree``."""
    return [(n.lineno, n.attr) for n in ast.walk(tree)
            if isinstance(n, ast.Attribute) and _is_backend_expr(n.value)]


def test_backend_use_detector():
    src = "be.add(a, b); self.be.zeros(3); backend_of(x).exp(x); b.be.widen(x); y.add(z); be0.name"
    assert sorted(n for _, n in backend_uses(ast.parse(src))) == ["add", "exp", "name", "widen", "zeros"]


def test_layers_above_call_only_the_contract():
    bad = []
    for d in ABOVE:
        for p in sorted((ROOT / "numbagrad" / d).rglob("*.py")):
            for line, n in backend_uses(ast.parse(p.read_text())):
                if n not in base.CONTRACT:
                    bad.append(f"{p.relative_to(ROOT).as_posix()}:{line}: be.{n}")
    assert not bad, "backend names outside backend/base.py's CONTRACT:\n" + "\n".join(bad)


def test_contract_lines_are_documented():
    assert all(isinstance(v, str) and v for v in base.CONTRACT.values())
    assert isinstance(base.Backend, abc.ABCMeta)
