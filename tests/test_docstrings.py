"""Every public object has a docstring of its own, and the ``>>>`` examples in the package's
docstrings run.

Public objects: the functions and classes named by ``__all__`` (or, where a module has none, by its
names without a leading underscore) of ``numbagrad`` and of every public module below it, defined
by numbagrad itself (NumPy's or the standard library's objects that a module re-exports are not
numbagrad's to document). ``numbagrad.kernels``, ``numbagrad.ops`` and ``numbagrad.backend``'s
submodules are internals: their public ops are checked where ``numbagrad`` re-exports them. A class
must carry its own ``__doc__``: one inherited from its base (``nn.Module``'s, say) does not count.

The doctests run in this process, on the CPU: modules that need a GPU or MPI to import are never
imported here (each is skipped when its import fails), and the examples print rounded values only.
"""
import doctest
import importlib
import importlib.util
import inspect
import pkgutil

import pytest

import numbagrad

INTERNAL = ("numbagrad.kernels", "numbagrad.ops", "numbagrad.backend.", "numbagrad.examples")


def _public_module_names():
    names = ["numbagrad"]
    for info in pkgutil.walk_packages(numbagrad.__path__, "numbagrad."):
        parts = info.name.split(".")[1:]
        if any(p.startswith("_") for p in parts) or info.name.startswith(INTERNAL):
            continue
        names.append(info.name)
    return names


MODULES = _public_module_names()


def _import(name):
    try:
        return importlib.import_module(name)
    except ImportError as e:  # an optional dependency (mpi4py, tensorboardX) missing here
        pytest.skip(f"{name} does not import here: {e}")


def _own_doc(obj):
    doc = vars(obj).get("__doc__") if isinstance(obj, type) else getattr(obj, "__doc__", None)
    return bool(doc and doc.strip())


def undocumented(mod):
    """The public functions and classes of ``mod`` (numbagrad's own) without a docstring of their own."""
    names = getattr(mod, "__all__", None) or [n for n in vars(mod) if not n.startswith("_")]
    out = []
    for name in names:
        obj = getattr(mod, name, None)
        if not (inspect.isclass(obj) or inspect.isfunction(obj)):
            continue
        if not (getattr(obj, "__module__", None) or "").startswith("numbagrad"):
            continue
        if not _own_doc(obj):
            out.append(f"{mod.__name__}.{name} ({obj.__module__}.{obj.__qualname__})")
    return out


def test_the_walk_finds_the_public_packages():
    for name in ["numbagrad.nn", "numbagrad.nn.functional", "numbagrad.optim", "numbagrad.optim.lr_scheduler",
                 "numbagrad.data", "numbagrad.metrics", "numbagrad.train", "numbagrad.io", "numbagrad.amp",
                 "numbagrad.distributed", "numbagrad.utils", "numbagrad.autograd", "numbagrad.cuda"]:
        assert name in MODULES
    assert not [m for m in MODULES if m.startswith(INTERNAL)]


def test_the_check_sees_a_missing_docstring():
    """The check itself: an undocumented function, and a class whose only docstring is its base's."""
    import types

    mod = types.ModuleType("numbagrad._probe")

    def documented():
        """Has one."""

    def bare():
        pass

    class Base:
        """Base's."""

    class Child(Base):
        pass

    for obj in (documented, bare, Base, Child):
        obj.__module__ = mod.__name__
        setattr(mod, obj.__name__, obj)
    assert undocumented(mod) == [f"numbagrad._probe.bare (numbagrad._probe.{bare.__qualname__})",
                                 f"numbagrad._probe.Child (numbagrad._probe.{Child.__qualname__})"]


@pytest.mark.parametrize("name", MODULES)
def test_every_public_object_has_a_docstring(name):
    missing = undocumented(_import(name))
    assert not missing, "public objects without a docstring of their own:\n  " + "\n  ".join(missing)


def _doctest_modules():
    """The public modules whose docstrings hold ``>>>`` examples (read from the source, no import)."""
    out = []
    for name in MODULES:
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.origin and spec.origin.endswith(".py"):
            with open(spec.origin, encoding="utf-8") as f:
                if ">>>" in f.read():
                    out.append(name)
    return out


DOCTEST_MODULES = _doctest_modules()


def test_the_central_objects_have_examples():
    """The objects a newcomer meets first show a runnable example."""
    import numbagrad.nn as nn
    import numbagrad.optim as optim
    for obj in [numbagrad.tensor, numbagrad.zeros, nn.Linear, optim.SGD, numbagrad.save, numbagrad.load,
                numbagrad.no_grad]:
        assert ">>>" in (obj.__doc__ or ""), obj
        assert inspect.getmodule(obj).__name__ in DOCTEST_MODULES, obj


@pytest.mark.parametrize("name", DOCTEST_MODULES)
def test_doctests(name):
    mod = _import(name)
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    tests = [t for t in finder.find(mod, name) if t.examples]
    assert tests, f"{name}: '>>>' in the source but no doctest found"
    for t in tests:
        runner.run(t)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{name}: {result.failed} of {result.attempted} doctest examples failed (output above)"
