"""``torch.distributed`` over MPI: a process group, collectives on Tensors, and abort on failure.

Launch N processes with MPI (``mpiexec -n 4 python -m mpi4py train.py`` on one machine,
Slurm's ``srun`` or ``mpiexec`` over hosts on a cluster) and call
:func:`init_process_group` in each; then :func:`get_rank`, :func:`get_world_size` and the
collectives (:func:`all_reduce`, :func:`broadcast`, :func:`all_gather`,
:func:`all_gather_into_tensor`, :func:`reduce_scatter`, :func:`reduce_scatter_tensor`,
:func:`reduce`, :func:`gather`, :func:`scatter`, :func:`barrier`) work as in torch:
in place on the tensors, ``async_op=True`` returning a :class:`Work` with ``wait()``.

mpi4py and the ``mpich`` wheel are an optional extra, ``pip install numbagrad[mpi]``.
Importing numbagrad never imports mpi4py (that would start MPI): :func:`is_available`
looks for it without importing it, and the first call that needs MPI imports it or
raises one ``ImportError`` naming the extra. Without a process group,
:func:`is_initialized` is False and :func:`get_rank` and the collectives raise torch's
``ValueError``, so the usual guards (``if dist.is_available() and
dist.is_initialized():``) take the single-process path.

Modules: ``process_group.py`` (the group, the abort hook), ``collectives.py`` (the
collectives, :class:`Work`, :class:`ReduceOp`). ``numbagrad.nn.parallel`` builds
``DistributedDataParallel`` and ``nn.SyncBatchNorm`` on them.
"""
from .process_group import (WORLD, barrier, destroy_process_group, get_backend, get_rank, get_world_size, group,
                            init_process_group, is_available, is_gloo_available, is_initialized,
                            is_mpi_available, is_nccl_available)
from .collectives import (ReduceOp, Work, all_gather, all_gather_into_tensor, all_reduce, broadcast, gather,
                          reduce, reduce_scatter, reduce_scatter_tensor, scatter)

__all__ = ["is_available", "is_initialized", "init_process_group", "destroy_process_group", "get_rank",
           "get_world_size", "get_backend", "barrier", "is_mpi_available", "is_nccl_available",
           "is_gloo_available", "group", "WORLD", "ReduceOp", "Work", "all_reduce", "reduce", "broadcast",
           "all_gather", "all_gather_into_tensor", "reduce_scatter", "reduce_scatter_tensor", "gather",
           "scatter"]
