"""``torch.utils.tensorboard``: :class:`SummaryWriter` is ``tensorboardX.SummaryWriter``
(an optional extra: ``pip install 'numbagrad[tensorboard]'``), imported when first asked
for. Without tensorboardX the name still imports, so programs that import it at the top
run; constructing it raises ``ImportError`` naming the extra.

Its ``add_scalar`` takes Python numbers, NumPy arrays and numbagrad tensors alike (a
one-element tensor converts with ``float()``). :class:`numbagrad.train.TensorBoardLogger`
writes a :class:`~numbagrad.train.Trainer`'s history through it.
"""

__all__ = ["SummaryWriter"]

_MISSING = ("numbagrad.utils.tensorboard.SummaryWriter needs tensorboardX, an optional extra: "
            "pip install 'numbagrad[tensorboard]' (or pip install tensorboardX)")


def _missing_writer(error):
    def __new__(cls, *args, **kwargs):
        raise ImportError(_MISSING) from error

    return type("SummaryWriter", (object,), {
        "__new__": __new__, "__module__": __name__,
        "__doc__": "tensorboardX is not installed: constructing this raises ImportError naming the extra."})


def __getattr__(name):
    if name != "SummaryWriter":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    try:
        from tensorboardX import SummaryWriter
    except ImportError as e:
        SummaryWriter = _missing_writer(e)
    globals()["SummaryWriter"] = SummaryWriter
    return SummaryWriter
