"""How each ``numbagrad.nn.modules.<name>`` submodule is built: PyTorch's import path, the
classes numbagrad already defines (in ``numbagrad/nn/<family>.py``), never copies."""
import importlib


def mirror(namespace, torch_all, private=""):
    """Fill a submodule's ``namespace`` (its ``globals()``) and return its ``__all__``.

    ``torch_all`` is the ``__all__`` of PyTorch's submodule of the same name (torch 2.13),
    space-separated; every one of those names that ``numbagrad.nn`` has is bound to that
    very object, so names numbagrad adds later appear here by themselves. ``private`` names
    PyTorch's private bases that programs import from these paths (``loss._Loss``), as
    ``"family: name name"``: taken from ``numbagrad.nn.<family>``, left out of ``__all__``.
    """
    nn = importlib.import_module("numbagrad.nn")
    names = [n for n in torch_all.split() if hasattr(nn, n)]
    namespace.update((n, getattr(nn, n)) for n in names)
    if private:
        family, _, privates = private.partition(":")
        home = importlib.import_module(f"numbagrad.nn.{family.strip()}")
        namespace.update((n, getattr(home, n)) for n in privates.split())
    return names
