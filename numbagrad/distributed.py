"""``torch.distributed``: multi-process training. Not available in numbagrad yet.

:func:`is_available` and :func:`is_initialized` are False, so the usual guards
(``if dist.is_available() and dist.is_initialized():``) take the single-process path. As in
PyTorch, asking for a rank, world size or collective without a process group raises
``ValueError``; :func:`init_process_group` raises ``NotImplementedError``.
"""
from . import _unavailable

_PLAN = "multi-process data-parallel training: a process group with gradient all-reduce"
_NO_GROUP = ("Default process group has not been initialized, please make sure to call init_process_group. "
             "(numbagrad cannot create one yet: " + _unavailable.message("numbagrad.distributed", _PLAN) + ")")


def is_available():
    """False: numbagrad has no distributed backend yet."""
    return False


def is_initialized():
    """False: no process group exists (none can be created yet)."""
    return False


init_process_group = _unavailable.function("numbagrad.distributed.init_process_group", _PLAN)


def _no_group(name):
    def f(*args, **kwargs):
        raise ValueError(_NO_GROUP)
    f.__name__ = f.__qualname__ = name
    f.__doc__ = f"``torch.distributed.{name}``: raises ``ValueError``, there is no process group."
    return f


get_rank = _no_group("get_rank")
get_world_size = _no_group("get_world_size")
barrier = _no_group("barrier")
all_reduce = _no_group("all_reduce")
broadcast = _no_group("broadcast")
all_gather = _no_group("all_gather")
destroy_process_group = _no_group("destroy_process_group")

__all__ = ["is_available", "is_initialized", "init_process_group", "get_rank", "get_world_size", "barrier",
           "all_reduce", "broadcast", "all_gather", "destroy_process_group"]
