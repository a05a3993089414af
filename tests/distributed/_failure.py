"""Run under ``mpiexec -n N`` by test_mpi.py: the last rank fails (``raise`` or ``kill``)
while the others wait in a collective; the job must end, not hang."""
import os
import signal
import sys

import numbagrad as ng
import numbagrad.distributed as dist

ng.set_num_threads(1)
dist.init_process_group()
R, W = dist.get_rank(), dist.get_world_size()
t = ng.ones(4)
dist.all_reduce(t)                      # everyone is up
if R == W - 1:
    if sys.argv[1] == "raise":
        raise ValueError(f"deliberate failure on rank {R}")
    os.kill(os.getpid(), signal.SIGKILL)
dist.all_reduce(t)                      # the failed rank never joins this one
print(f"UNREACHABLE rank {R}", flush=True)
