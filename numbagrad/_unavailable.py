"""Placeholders for PyTorch features numbagrad does not have yet.

Real programs import ``torch.amp``, ``torch.distributed``, ``torch.utils.tensorboard`` and
friends at the top even when a run never uses them, so those import paths exist. What they
name raises :class:`NotImplementedError` when called or constructed, with one message
format: ``"<name> is not available in numbagrad yet; it will be <what it will be>"``. They
never silently do nothing.
"""


def message(name, plan):
    """The one message every placeholder raises with."""
    return f"{name} is not available in numbagrad yet; it will be {plan}"


def function(name, plan, doc=None):
    """A function that raises ``NotImplementedError(message(name, plan))`` whatever its
    arguments; ``name`` is its public dotted name (``"numbagrad.onnx.export"``)."""
    text = message(name, plan)

    def stub(*args, **kwargs):
        raise NotImplementedError(text)

    stub.__name__ = stub.__qualname__ = name.rpartition(".")[2]
    stub.__module__ = name.rpartition(".")[0]
    stub.__doc__ = doc or f"Not available yet: raises ``NotImplementedError``. It will be {plan}."
    return stub


def cls(name, plan, bases=(object,), doc=None):
    """A class whose construction raises ``NotImplementedError(message(name, plan))``.

    It raises in ``__new__``, so subclasses raise too, whatever their ``__init__``. The
    class itself exists, so ``isinstance(x, DataParallel)`` and subclassing work."""
    text = message(name, plan)

    def __new__(cls, *args, **kwargs):
        raise NotImplementedError(text)

    module, _, short = name.rpartition(".")
    return type(short, bases, {
        "__new__": __new__,
        "__module__": module,
        "__doc__": doc or f"Not available yet: constructing it raises ``NotImplementedError``. It will be {plan}.",
    })
