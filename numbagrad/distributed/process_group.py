"""The default process group: MPI's ``COMM_WORLD`` (a duplicate of it), created by
:func:`init_process_group` and dropped by :func:`destroy_process_group`.

mpi4py is imported here on first use only (:func:`mpi`), never when numbagrad is
imported. Creating the group also installs the abort hook (:func:`_install_abort_hook`):
an exception that reaches the top of any rank prints that rank's traceback, each line
prefixed with ``[rank N]``, and calls ``MPI.COMM_WORLD.Abort(1)``, so the other ranks
never wait forever in a collective the failed rank will not join. A rank that dies
without raising (SIGKILL, a segfault) is seen by the launcher: MPICH's Hydra
``mpiexec`` then kills the other ranks of the job ("BAD TERMINATION").
"""
import importlib.util
import os
import sys
import traceback

_INSTALL = "pip install numbagrad[mpi]"
_NO_GROUP = ("Default process group has not been initialized, please make sure to call init_process_group.")


class _State:
    comm = None           # the group's communicator (a Dup of COMM_WORLD)
    rank = -1
    world_size = -1
    prev_excepthook = None


_state = _State()


def mpi():
    """mpi4py's ``MPI`` module (initialising MPI on first call), or one clear error."""
    try:
        from mpi4py import MPI
    except ImportError as e:
        raise ImportError("numbagrad.distributed needs mpi4py and an MPI library, which are an optional extra: "
                          f"{_INSTALL} (mpi4py>=4.1 and the mpich wheel). Importing mpi4py failed: {e}") from e
    return MPI


def is_available():
    """True when mpi4py can be imported (checked without importing it, which would start MPI)."""
    try:
        return importlib.util.find_spec("mpi4py") is not None
    except (ImportError, ValueError):   # sys.modules["mpi4py"] is None (blocked) or has no spec
        return False


def is_mpi_available():
    """Same as :func:`is_available`: MPI is numbagrad's only backend."""
    return is_available()


def is_nccl_available():
    """False: numbagrad's only backend is MPI."""
    return False


def is_gloo_available():
    """False: numbagrad's only backend is MPI."""
    return False


def is_initialized():
    """Whether :func:`init_process_group` has created the default group (and it is not destroyed)."""
    return _state.comm is not None


def init_process_group(backend=None, init_method=None, timeout=None, world_size=-1, rank=-1, store=None,
                       group_name="", pg_options=None, device_id=None):
    """Create the default process group over MPI (``torch.distributed.init_process_group``).

    Every process started by ``mpiexec -n N`` (or Slurm's ``srun``) joins; rank and world
    size come from MPI, so ``world_size``/``rank``, when given, must agree with it.

    Parameters
    ----------
    backend : None or ``"mpi"``. ``"nccl"`` and ``"gloo"`` are refused: numbagrad runs on MPI.
    init_method, timeout, store, group_name, pg_options, device_id : accepted for torch's
        signature; MPI's launcher already wires the processes together.
    world_size, rank : int, optional; checked against ``MPI.COMM_WORLD``.

    After this call an uncaught exception on any rank aborts the whole job (see the
    module docstring).
    """
    if backend is not None:
        b = str(backend).lower()
        if b != "mpi":
            raise ValueError(f"init_process_group: backend {backend!r} is not available in numbagrad: its only "
                             "backend is 'mpi' (launch with mpiexec or srun); pass backend='mpi' or None")
    if _state.comm is not None:
        raise ValueError("init_process_group: trying to initialize the default process group twice!")
    MPI = mpi()
    world = MPI.COMM_WORLD
    r, n = world.Get_rank(), world.Get_size()
    if world_size not in (-1, None) and int(world_size) != n:
        raise ValueError(f"init_process_group: world_size={world_size}, but MPI started {n} processes "
                         f"(mpiexec -n {n})")
    if rank not in (-1, None) and int(rank) != r:
        raise ValueError(f"init_process_group: rank={rank}, but MPI gave this process rank {r}")
    _state.comm = world.Dup()
    _state.rank, _state.world_size = r, n
    _install_abort_hook()


def destroy_process_group(group=None):
    """Free the default group (``torch.distributed.destroy_process_group``); the abort hook
    is removed. MPI itself stays initialised (mpi4py finalises it at exit)."""
    comm = _comm("destroy_process_group", group)
    _state.comm = None
    _state.rank = _state.world_size = -1
    _remove_abort_hook()
    comm.Free()


def _comm(who, group=None):
    """The default group's communicator; torch's ``ValueError`` when there is none."""
    comm = _state.comm
    if comm is None:
        raise ValueError(_NO_GROUP + f" ({who} needs one; numbagrad creates it over MPI: launch with "
                         "mpiexec -n N and call init_process_group())")
    if group is not None and group is not WORLD:
        raise ValueError(f"{who}: group={group!r}: numbagrad has only the default group (group=None)")
    return comm


def get_rank(group=None):
    """This process's rank in the default group."""
    _comm("get_rank", group)
    return _state.rank


def get_world_size(group=None):
    """The number of processes in the default group."""
    _comm("get_world_size", group)
    return _state.world_size


def get_backend(group=None):
    """``"mpi"``."""
    _comm("get_backend", group)
    return "mpi"


def barrier(group=None, async_op=False, device_ids=None):
    """Block until every rank of the group has called it (``MPI_Barrier``)."""
    comm = _comm("barrier", group)
    if async_op:
        from .collectives import Work
        return Work(comm.Ibarrier())
    comm.Barrier()
    return None


class _World:
    """``torch.distributed.group.WORLD``: the default group, as a token (``group=WORLD``)."""

    def __repr__(self):
        return "<numbagrad.distributed default group (MPI COMM_WORLD)>"


WORLD = _World()


class group:
    """``torch.distributed.group``: holds ``WORLD``."""
    WORLD = WORLD


# ---- abort on an uncaught exception ------------------------------------------------------------
def _abort_hook(exc_type, exc, tb):
    rank = _state.rank
    prev = _state.prev_excepthook
    if exc_type is KeyboardInterrupt or rank < 0:
        (prev or sys.__excepthook__)(exc_type, exc, tb)
        return
    lines = "".join(traceback.format_exception(exc_type, exc, tb)).splitlines()
    text = "".join(f"[rank {rank}] {line}\n" for line in lines)
    text += f"[rank {rank}] numbagrad.distributed: uncaught exception, aborting the job (MPI Abort)\n"
    try:
        sys.stderr.write(text)
        sys.stderr.flush()
    except Exception:
        os.write(2, text.encode())
    if prev is not None and prev is not sys.__excepthook__:
        try:
            prev(exc_type, exc, tb)  # a hook installed before ours (IPython, a logger) still runs
        except Exception:
            pass
    mpi().COMM_WORLD.Abort(1)


def _install_abort_hook():
    if sys.excepthook is not _abort_hook:
        _state.prev_excepthook = sys.excepthook
        sys.excepthook = _abort_hook


def _remove_abort_hook():
    if sys.excepthook is _abort_hook:
        sys.excepthook = _state.prev_excepthook or sys.__excepthook__
    _state.prev_excepthook = None
