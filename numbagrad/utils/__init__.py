"""``torch.utils``: :mod:`numbagrad.utils.data` is :mod:`numbagrad.data` (the same module
objects, also as ``numbagrad.utils.data.dataloader`` and the other submodules), and
:mod:`numbagrad.utils.tensorboard`'s ``SummaryWriter`` is tensorboardX's (an optional extra)."""
import sys

from .. import data  # noqa: F401
from . import checkpoint  # noqa: F401  (torch.utils.checkpoint: gradient checkpointing)

# ``import numbagrad.utils.data[.dataloader]`` finds these instead of loading numbagrad/data/
# a second time under another name
for _name, _mod in list(sys.modules.items()):
    if _name == "numbagrad.data" or _name.startswith("numbagrad.data."):
        sys.modules.setdefault("numbagrad.utils" + _name[len("numbagrad"):], _mod)
del _name, _mod
