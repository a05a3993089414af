"""The layering rule of ARCHITECTURE.md ("Layers, bottom up"), checked on the source.

Every ``import`` and ``from ... import`` in ``numbagrad/`` is read from the syntax tree,
the deferred ones inside functions included (relative imports resolved; ``from pkg import
name`` is the module ``pkg.name`` when that is a module, else ``pkg``). Three rules:

1. **Layers.** Each module belongs to the first row of the "Layers" table whose "where"
   column names it (a path, a ``{a,b}`` choice, or a prefix ending at ``<family>``; a
   path without ``.py`` is a package or a module). A module may import its own layer and
   the rows above it (listed earlier), never a row below it. ``numbagrad/__init__.py``,
   the package root that assembles everything, is the one module outside the table;
   importing the root (``from .. import name`` of a name that is no module) counts as
   importing the last row; importing a dunder name from it (``__version__``) is reading
   metadata and not counted. One narrow rule: ``tensor.py``'s methods are the method
   forms of ops (``Tensor.backward`` is ``autograd.backward``, ``Tensor.zero_`` a creation
   op, ``Tensor.uniform_`` is ``nn.init.uniform_``), so an import *inside a function* of
   ``tensor.py`` may reach down to ``nn, optim, data``; its module-level imports may not.
2. **Kernels behind the backend.** Only ``numbagrad/kernels/`` and ``numbagrad/backend/``
   import ``numbagrad.kernels.cpu`` (or anything under it). Whatever else a CPU kernel
   offers (an address table, a host pointer, the float16 conversions) is a backend
   capability (``backend/base.py``).
3. **No device tests above the backend.** Outside ``numbagrad/backend/`` a device test is:
   * a comparison of a ``.name`` attribute with the string ``"cpu"`` or ``"cuda"`` (a
     backend's name is for messages; its capabilities answer the questions);
   * ``isinstance(<x>.array, np.ndarray)`` or ``type(<x>.array) is [not] np.ndarray`` (or
     ``==``/``!=``): the type of a Tensor's backend array, which says its device.
   Allowed, because they are the user's vocabulary rather than a choice of code: a type
   check of anything else (``isinstance(data, np.ndarray)``: "did the user pass a NumPy
   array?"), and a torch-style ``device.type`` (``x.device.type == "cuda"``, a Trainer's
   configured device), which says where data should *go*; what runs there is the
   backend's business.

The allowlist is empty: every rule holds for every module.
"""
import ast
import functools
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PKG = ROOT / "numbagrad"
ARCH = ROOT / "ARCHITECTURE.md"
ALLOWED = {}   # path -> reason; must stay empty

# The layer names in order, as ARCHITECTURE.md's table lists them (checked against it
# below, so that neither can drift from the other).
LAYERS = ["config", "dtypes, devices, autocast state", "kernels", "backend", "tensor", "distributed", "autograd",
          "creation, random", "ops", "nn, optim, data", "amp", "io", "metrics", "train", "torch-named namespaces",
          "special, linalg, distributions", "utilities", "examples"]


def _table():
    """[(layer name, [path patterns])] from the "Layers" table, in its order."""
    text = ARCH.read_text()
    sec = text[text.index("## Layers"):]
    sec = sec[:sec.index("\n## ", 1)]
    rows = []
    for line in sec.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 3 or cells[0] in ("layer", "") or set(cells[0]) <= set("-"):
            continue
        pats = []
        for tick in re.findall(r"`(numbagrad/[^`]+)`", cells[1]):
            m = re.match(r"(.*?)\{([^}]*)\}(.*)", tick)
            pats += [m.group(1) + c + m.group(3) for c in m.group(2).split(",")] if m else [tick]
        rows.append((cells[0], pats))
    return rows


TABLE = _table()


def _matches(rel, pat):
    """Whether the file ``rel`` (relative to the repository) is named by ``pat``."""
    if "<" in pat:
        return rel.startswith(pat[:pat.index("<")])
    if pat.endswith("/"):
        return rel.startswith(pat)
    if pat.endswith(".py"):
        return rel == pat
    return rel == pat + ".py" or rel.startswith(pat + "/")


@functools.lru_cache(maxsize=None)
def layer_of(rel):
    for i, (_, pats) in enumerate(TABLE):
        if any(_matches(rel, p) for p in pats):
            return i
    return None


@functools.lru_cache(maxsize=None)
def _module_file(mod):
    """The file of the dotted ``numbagrad`` module ``mod``, or None if it is no module."""
    p = ROOT.joinpath(*mod.split("."))
    if p.is_dir() and (p / "__init__.py").exists():
        return p / "__init__.py"
    if p.with_suffix(".py").exists():
        return p.with_suffix(".py")
    return None


def _sources():
    return sorted(PKG.rglob("*.py"))


_TREES = {}


def _parse(path):
    if path not in _TREES:
        _TREES[path] = ast.parse(path.read_text(), str(path))
    return _TREES[path]


def _with_depth(tree):
    """(node, inside a function) for every node of ``tree``."""
    stack = [(tree, False)]
    while stack:
        node, deferred = stack.pop()
        yield node, deferred
        inner = deferred or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        stack.extend((c, inner) for c in ast.iter_child_nodes(node))


def imports(path, deferred_too=False):
    """[(line, dotted module)] of every numbagrad module that ``path`` imports (with
    ``deferred_too``: [(line, module, inside a function)])."""
    rel = path.relative_to(ROOT)
    pkg = list(rel.parent.parts)          # the package a relative import starts from
    out = []
    for node, deferred in _with_depth(_parse(path)):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name, deferred) for a in node.names if a.name.split(".")[0] == "numbagrad"]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg[:len(pkg) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            if mod.split(".")[0] != "numbagrad":
                continue
            for a in node.names:
                if mod == "numbagrad" and a.name.startswith("__"):
                    continue   # the package's metadata (``__version__``), not a layer
                sub = f"{mod}.{a.name}"
                out.append((node.lineno, sub if _module_file(sub) else mod, deferred))
    return sorted(out) if deferred_too else sorted((line, m) for line, m, _ in out)


def _rel(path):
    return path.relative_to(ROOT).as_posix()


def test_table_is_the_listed_order():
    assert [name for name, _ in TABLE] == LAYERS, (
        "ARCHITECTURE.md's Layers table and tests/test_layers.py's LAYERS disagree: update both together")


def test_allowlist_is_empty():
    assert ALLOWED == {}


def test_every_module_has_a_layer():
    missing = [_rel(p) for p in _sources() if _rel(p) != "numbagrad/__init__.py" and layer_of(_rel(p)) is None]
    assert not missing, f"modules that no row of ARCHITECTURE.md's Layers table names: {missing}"


def _target_layer(mod):
    f = _module_file(mod)
    rel = _rel(f) if f is not None else None
    if rel is None or rel == "numbagrad/__init__.py":
        return len(TABLE) - 1, "numbagrad/__init__.py"
    return layer_of(rel), rel


def test_no_module_imports_a_lower_layer():
    bad = []
    for p in _sources():
        rel = _rel(p)
        if rel == "numbagrad/__init__.py" or rel in ALLOWED:
            continue
        mine = layer_of(rel)
        for line, mod, deferred in imports(p, deferred_too=True):
            theirs, trel = _target_layer(mod)
            if rel == "numbagrad/tensor.py" and deferred and theirs <= LAYERS.index("nn, optim, data"):
                continue   # a method form of an op (see the module docstring)
            if theirs is not None and mine is not None and theirs > mine:
                bad.append(f"{rel}:{line} ({TABLE[mine][0]}) imports {mod} ({trel}: {TABLE[theirs][0]})")
    assert not bad, "imports of a layer listed below the importer in ARCHITECTURE.md:\n" + "\n".join(bad)


def test_only_kernels_and_backend_import_cpu_kernels():
    bad = []
    for p in _sources():
        rel = _rel(p)
        if rel.startswith(("numbagrad/kernels/", "numbagrad/backend/")) or rel in ALLOWED:
            continue
        bad += [f"{rel}:{line} imports {mod}" for line, mod in imports(p)
                if mod == "numbagrad.kernels.cpu" or mod.startswith("numbagrad.kernels.cpu.")]
    assert not bad, "CPU kernels reached past the backend (use a backend capability):\n" + "\n".join(bad)


_DEVICES = ("cpu", "cuda")


def _is_ndarray(node):
    return isinstance(node, ast.Attribute) and node.attr == "ndarray" and isinstance(node.value, ast.Name) \
        and node.value.id in ("np", "numpy")


def _is_backend_array(node):
    return isinstance(node, ast.Attribute) and node.attr == "array"


def _device_type(node):
    """``<x>.name`` (a backend's name)."""
    return isinstance(node, ast.Attribute) and node.attr == "name"


def device_tests(tree):
    """[(line, what)] of the device tests (module docstring, rule 3) in ``tree``."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and len(node.comparators) == 1:
            a, b = node.left, node.comparators[0]
            for x, y in ((a, b), (b, a)):
                if _device_type(x) and isinstance(y, ast.Constant) and y.value in _DEVICES:
                    found.append((node.lineno, f"{ast.unparse(node)}"))
                if (isinstance(x, ast.Call) and isinstance(x.func, ast.Name) and x.func.id == "type"
                        and len(x.args) == 1 and _is_backend_array(x.args[0]) and _is_ndarray(y)):
                    found.append((node.lineno, f"{ast.unparse(node)}"))
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "isinstance"
              and len(node.args) == 2 and _is_backend_array(node.args[0])
              and any(_is_ndarray(t) for t in (node.args[1].elts if isinstance(node.args[1], ast.Tuple)
                                                else [node.args[1]]))):
            found.append((node.lineno, ast.unparse(node)))
    return found


def test_no_device_tests_above_the_backend():
    bad = []
    for p in _sources():
        rel = _rel(p)
        if rel.startswith("numbagrad/backend/") or rel in ALLOWED:
            continue
        bad += [f"{rel}:{line}: {what}" for line, what in device_tests(_parse(p))]
    assert not bad, "device tests outside numbagrad/backend/ (use a backend capability):\n" + "\n".join(bad)


@pytest.mark.parametrize("src, n", [
    ("be.name == 'cpu'", 1), ("x.device.type != 'cuda'", 0), ("type(p.array) is np.ndarray", 1),
    ("isinstance(t.grad.array, (np.ndarray, int))", 1), ("isinstance(data, np.ndarray)", 0),
    ("dev.type == 'cpu'", 0), ("be.name == 'x'", 0), ("'cpu' != be.name", 1),
])
def test_device_test_detector(src, n):
    """The detector itself: what it counts and what it leaves to user-facing checks."""
    assert len(device_tests(ast.parse(src))) == n


def test_import_resolution():
    """Relative, deferred and ``from pkg import module`` imports are all seen."""
    tree = ("def f():\n    from ..kernels.cpu import _blas\n    from . import dispatch\n"
            "from ..backend import config\nimport numbagrad.ops\n")
    fake = PKG / "backend" / "_probe_not_a_file.py"
    _TREES[fake] = ast.parse(tree)
    try:
        got = sorted(m for _, m in imports(fake))
    finally:
        del _TREES[fake]
    assert got == ["numbagrad.backend.config", "numbagrad.backend.dispatch", "numbagrad.kernels.cpu._blas",
                   "numbagrad.ops"]
