"""The op map of ARCHITECTURE.md: op -> Function -> CPU entry point -> CUDA entry point -> tests.

``python tools/op_map.py`` prints the table; ``--write`` replaces the section between the
``<!-- op-map:begin -->`` / ``<!-- op-map:end -->`` markers of ARCHITECTURE.md (appending
the section once if the markers are missing). ``tests/test_kernel_twins.py`` fails when the
section is stale.

How it reads the code (no imports of numbagrad's CUDA target): the entry points are each
family module's literal ``ENTRY_POINTS`` (``numbagrad/kernels/{cpu,cuda}/<family>.py``);
a top-level class or function of a module outside ``kernels/`` and ``backend/`` launches
an entry point when a string literal equal to its name appears in its body (or in a
module-level constant it reads) and the module names the family as a literal too (the
``be.kernel("softmax", ...)`` call). A Function class also launches what the module
functions it calls launch (a launch shared by several Functions lives in one helper). The op column lists the module's public functions that read
that class or function.
"""
import ast
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PKG = os.path.join(ROOT, "numbagrad")
BEGIN, END = "<!-- op-map:begin -->", "<!-- op-map:end -->"
HEADING = "## Op map"


def _entry_points(device):
    """``{family: (entry, ...)}`` read from the modules' ``ENTRY_POINTS`` literals."""
    folder = os.path.join(PKG, "kernels", device)
    out = {}
    for f in sorted(os.listdir(folder)):
        if f.endswith(".py") and not f.startswith("_"):
            tree = ast.parse(open(os.path.join(folder, f)).read())
            for node in tree.body:
                if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "ENTRY_POINTS"
                                                        for t in node.targets):
                    out[f[:-3]] = tuple(ast.literal_eval(node.value))
    return out


def _strings(node):
    return {n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)}


def _names(node):
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _top_level(tree):
    """``(name, node)`` of top-level defs and classes and of assignments that make one
    (``Relu = _fn("Relu", "relu_fwd", ...)``)."""
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            yield node.name, node
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    yield t.id, node


def _modules():
    for dirpath, dirs, files in os.walk(PKG):
        rel = os.path.relpath(dirpath, PKG)
        if rel.split(os.sep)[0] in ("kernels", "backend"):
            continue
        dirs.sort()
        for f in sorted(files):
            if f.endswith(".py"):
                yield os.path.relpath(os.path.join(dirpath, f), PKG)


def _tests(module, family):
    stem = os.path.splitext(os.path.basename(module))[0]
    cands = [f"tests/{os.path.dirname(module)}/test_{stem}.py", f"tests/test_{stem}.py",
             f"tests/cuda/test_cuda_{family}.py"]
    return [c for c in dict.fromkeys(cands) if os.path.exists(os.path.join(ROOT, c))]


def rows():
    """``(op, function, family, cpu entries, cuda entries, tests)`` per launching object."""
    cpu, cuda = _entry_points("cpu"), _entry_points("cuda")
    owner = {}
    for fam, names in cpu.items():
        for n in names:
            owner.setdefault(n, set()).add(fam)
    out = []
    for module in _modules():
        tree = ast.parse(open(os.path.join(PKG, module)).read())
        lits = _strings(tree)
        consts = {t.id: node for node in tree.body   # module-level tables (not Function factories)
                  if isinstance(node, ast.Assign) and not isinstance(node.value, ast.Call)
                  for t in node.targets if isinstance(t, ast.Name)}
        objs = list(_top_level(tree))
        funcs = {n: o for n, o in objs if isinstance(o, ast.FunctionDef)}
        # module functions a Function class calls (kernel launches shared by several
        # Functions): their entry points are the class's too
        helpers = {n for c, o in objs if isinstance(o, ast.ClassDef) for n in _names(o) & set(funcs)}

        def strings(node, seen):
            strs = set(_strings(node))
            for ref in _names(node) & set(consts):
                if consts[ref] is not node:
                    strs |= _strings(consts[ref])
            if isinstance(node, ast.ClassDef) or seen:
                for ref in sorted(_names(node) & helpers - seen):
                    strs |= strings(funcs[ref], seen | {ref})
            return strs

        for name, node in objs:
            strs = strings(node, set())
            found = {}
            for s in strs:
                for fam in owner.get(s, ()):
                    if fam in lits:
                        found.setdefault(fam, []).append(s)
            if not found:
                continue
            ops = sorted(n for n, o in objs if not n.startswith("_") and n != name
                         and isinstance(o, ast.FunctionDef) and name in _names(o))
            for fam, entries in sorted(found.items()):
                order = cpu[fam]
                entries = sorted(entries, key=order.index)
                twins = [e for e in entries if e in cuda.get(fam, ())]
                out.append((", ".join(f"`{o}`" for o in ops) or "-", f"`{module}:{name}`", fam,
                            ", ".join(entries), ", ".join(twins) or "- (CPU only)",
                            ", ".join(f"`{t}`" for t in _tests(module, fam)) or "-"))
    return out


def render():
    """The section body: an introduction and the table (between the markers)."""
    lines = ["Generated by `python tools/op_map.py --write` from the kernel families' `ENTRY_POINTS` "
             "and the string literals that name them (`tests/test_kernel_twins.py` checks it is fresh). "
             "Kernels: `kernels/cpu/<family>.py:_<entry>_cpu`, `kernels/cuda/<family>.py:_<entry>_cuda`.",
             "",
             "| op | Function / caller | family | CPU entry points | CUDA entry points | tests |",
             "|---|---|---|---|---|---|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows()]
    return "\n".join(lines) + "\n"


def section(text):
    """The text between the markers of ``text`` (None when they are missing)."""
    if BEGIN not in text or END not in text:
        return None
    return text[text.index(BEGIN) + len(BEGIN):text.index(END)].strip("\n") + "\n"


def write(path=os.path.join(ROOT, "ARCHITECTURE.md")):
    text = open(path).read()
    body = f"{BEGIN}\n{render()}{END}"
    if section(text) is None:
        text = text.rstrip("\n") + f"\n\n{HEADING}\n\n{body}\n"
    else:
        text = text[:text.index(BEGIN)] + body + text[text.index(END) + len(END):]
    with open(path, "w") as f:
        f.write(text)


if __name__ == "__main__":
    if "--write" in sys.argv[1:]:
        write()
    else:
        sys.stdout.write(render())
