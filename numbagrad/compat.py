"""Run an existing PyTorch script on numbagrad: ``import torch`` resolves to numbagrad.

    import numbagrad.compat
    numbagrad.compat.install_torch_alias()
    import torch                      # numbagrad
    from torch.utils.data import DataLoader
    import torch.nn.functional as F   # numbagrad.nn.functional

:func:`install_torch_alias` puts an import hook first on ``sys.meta_path`` that answers
``torch`` and every ``torch.<sub>`` with the numbagrad module of the same path (a few
paths differ, see ``RENAMED``). The module objects are numbagrad's own: ``torch is
numbagrad`` after the import. Limits: it only helps where numbagrad has the feature (an
unknown ``torch.<sub>`` raises ``ModuleNotFoundError`` naming both paths), and it must
run before anything imports the real torch, because Python caches imported modules.
"""
import importlib
import importlib.abc
import importlib.util
import sys

# torch paths whose numbagrad module has another name
RENAMED = {"torch.utils.data": "numbagrad.data"}

_FINDER = None


def _target(fullname):
    for src, dst in RENAMED.items():
        if fullname == src or fullname.startswith(src + "."):
            return dst + fullname[len(src):]
    return "numbagrad" + fullname[len("torch"):]


class _TorchAliasFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds ``torch`` and ``torch.*`` and loads them as the matching numbagrad modules."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "torch" and not fullname.startswith("torch."):
            return None
        name = _target(fullname)
        if importlib.util.find_spec(name) is None:
            raise ModuleNotFoundError(f"install_torch_alias: '{fullname}' would be '{name}', which numbagrad "
                                      f"does not have", name=fullname)
        return importlib.util.spec_from_loader(fullname, self)

    def __init__(self):
        self._own_specs = {}  # module name -> its own spec, between create_ and exec_module

    def create_module(self, spec):
        module = importlib.import_module(_target(spec.name))
        self._own_specs[module.__name__] = module.__spec__
        return module

    def exec_module(self, module):
        # numbagrad's module is already executed; the import system has just set its
        # ``__spec__`` to the ``torch`` one: give it back its own (``__name__`` was kept)
        module.__spec__ = self._own_specs.pop(module.__name__)


def install_torch_alias():
    """Make ``import torch`` (and ``torch.<sub>``) give numbagrad for the rest of the
    process. Idempotent. Raises ``RuntimeError`` if the real torch is already imported."""
    global _FINDER
    if _FINDER is not None:
        return
    real = [m for m in sys.modules if m == "torch" or m.startswith("torch.")]
    if real:
        raise RuntimeError("install_torch_alias: the real torch is already imported in this process "
                           f"({real[0]!r}); call install_torch_alias() before anything imports torch")
    _FINDER = _TorchAliasFinder()
    sys.meta_path.insert(0, _FINDER)


def uninstall_torch_alias():
    """Remove the hook and forget the ``torch`` modules it answered."""
    global _FINDER
    if _FINDER is None:
        return
    sys.meta_path.remove(_FINDER)
    _FINDER = None
    for m in [m for m in sys.modules if m == "torch" or m.startswith("torch.")]:
        del sys.modules[m]
