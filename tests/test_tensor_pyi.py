"""``numbagrad/tensor.pyi`` (written by ``tools/gen_tensor_pyi.py``) is up to date, names every
public attribute of a live Tensor, ships with the package, and its ``-> Tensor`` return types hold."""
import ast
import configparser
import difflib
import importlib.util
import inspect
import os
import warnings

import numpy as np
import pytest

import numbagrad as ng

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PYI = os.path.join(ROOT, "numbagrad", "tensor.pyi")


def _gen():
    spec = importlib.util.spec_from_file_location("gen_tensor_pyi", os.path.join(ROOT, "tools", "gen_tensor_pyi.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _stub_class(name):
    tree = ast.parse(open(PYI, encoding="utf-8").read())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name)
    out = {}
    for n in cls.body:
        if isinstance(n, ast.FunctionDef):
            out.setdefault(n.name, n)
        elif isinstance(n, ast.AnnAssign):
            out[n.target.id] = n
    return out


def test_the_stub_is_up_to_date():
    text = _gen().render()
    with open(PYI, encoding="utf-8") as f:
        old = f.read()
    diff = "".join(difflib.unified_diff(old.splitlines(True), text.splitlines(True), "tensor.pyi", "generated", n=0))
    assert not diff, "numbagrad/tensor.pyi is out of date: run python tools/gen_tensor_pyi.py\n" + diff[:3000]


def test_every_public_attribute_of_a_live_tensor_is_in_the_stub():
    t = ng.ones(2, 3, requires_grad=True)
    stub = _stub_class("Tensor")
    missing = sorted(n for n in dir(t) if not n.startswith("_") and n not in stub)
    assert not missing, f"Tensor attributes missing from tensor.pyi: {missing}"
    # and the operators _install_operators binds
    for n in ["__add__", "__rsub__", "__matmul__", "__getitem__", "__iadd__", "__eq__"]:
        assert n in stub, n


def test_the_stub_signatures_are_the_bound_functions():
    """Parameter names and order in the stub are those of the function Tensor holds."""
    stub = _stub_class("Tensor")
    for name in ["add", "sum", "reshape", "softmax", "clamp_", "to", "backward", "masked_fill", "new_zeros"]:
        fn = getattr(ng.Tensor, name)
        names = [p.name for p in inspect.signature(fn).parameters.values()][1:]
        a = stub[name].args
        got = [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs][1:]
        got += [x.arg for x in (a.vararg, a.kwarg) if x is not None]
        assert sorted(got) == sorted(names), name
        assert [x.arg for x in (a.posonlyargs + a.args)][0] == "self", name


def test_the_tensor_return_types_hold():
    """Every method the stub says returns a Tensor does, where it can be called with no
    argument or with one tensor (a method that refuses these arguments is not judged)."""
    stub = _stub_class("Tensor")
    x = ng.tensor(np.linspace(0.1, 0.9, 6).reshape(2, 3).astype(np.float32))
    checked = 0
    for name, node in stub.items():
        if not isinstance(node, ast.FunctionDef) or not (isinstance(node.returns, ast.Name)
                                                         and node.returns.id == "Tensor"):
            continue
        if any(isinstance(d, ast.Name) and d.id in ("property", "staticmethod") for d in node.decorator_list):
            continue
        required = [a for a in node.args.args[1:]][:len(node.args.args) - 1 - len(node.args.defaults)]
        if len(required) > 1 or name.startswith("_") and not name.startswith("__"):
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                r = getattr(x.clone(), name)(*([x.clone()] if required else []))
            except (TypeError, ValueError, RuntimeError, IndexError, NotImplementedError):
                continue
        assert isinstance(r, ng.Tensor), f"Tensor.{name} returned {type(r).__name__}, the stub says Tensor"
        checked += 1
    assert checked > 100, checked


def test_the_stub_ships_and_imports_are_unchanged():
    cfg = configparser.ConfigParser()
    cfg.read(os.path.join(ROOT, "setup.cfg"))
    data = cfg.get("options.package_data", "numbagrad", fallback="")
    assert "tensor.pyi" in data.split()
    # PEP 561: without the marker, type checkers ignore an installed package's stubs
    assert "py.typed" in data.split() and os.path.isfile(os.path.join(ROOT, "numbagrad", "py.typed"))
    import numbagrad.tensor  # noqa: F401  (a .pyi is never imported: the module is tensor.py)
    assert importlib.util.find_spec("numbagrad.tensor").origin.endswith("tensor.py")


def test_the_checker_sees_a_stale_stub(tmp_path, monkeypatch):
    gen = _gen()
    stale = tmp_path / "tensor.pyi"
    stale.write_text(gen.render().replace("def add(", "def add_renamed("))
    monkeypatch.setattr(gen, "PYI", str(stale))
    assert gen.main(["--check"]) == 1
    stale.write_text(gen.render())
    assert gen.main(["--check"]) == 0


def test_mypy_accepts_the_stub():
    api = pytest.importorskip("mypy.api")
    out, err, rc = api.run(["--ignore-missing-imports", "--no-error-summary", PYI])
    assert rc == 0, out + err
