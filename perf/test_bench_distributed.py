"""Data-parallel training over MPI (issue 19's bars), each figure measured in subprocesses
(``perf/_dist_ranks.py``: ``mpiexec -n 2`` for the ranks, a plain process for the
single-process baseline), one numba thread per process, read back as JSON.

* ``ddp_mlp_step`` / ``ddp_gpt_step``: a DDP training step on 2 ranks against the same step
  in one process, at the same per-rank batch (MLP 784-512-256-10 b256 Adam; the tiny GPT of
  ``test_bench_gpt``, AdamW). Bar: <= 1.15x (communication overlapped with backward).
* ``ddp_mlp_per_sample``: the same runs as time per sample (2 ranks process 2 batches per
  step). Bar: <= 0.59x, i.e. 2 ranks x 1 thread reach >= 1.7x the samples/s of 1 x 1.
* ``ddp_allreduce_10m``: averaging 10M float32 gradient values through DDP (hooks, buckets,
  wait) against one raw ``MPI.Allreduce`` of a 10M buffer, interleaved in the same ranks.
  Bar: <= 1.1x. torch.distributed's gloo ``all_reduce`` of 10M is recorded beside it
  (``ddp_allreduce_10m_gloo``: gloo / raw MPI) when torch is installed.
* ``ddp_allreduce_10m_copy_floor`` / ``_scale_floor``: what no averaging of gradients in
  memory can skip, against the same raw ``MPI.Allreduce``: copying the fresh gradients
  into one 10M buffer, and scaling a 10M buffer in place by ``1/world_size``, both ranks at
  once. On a machine where the all-reduce is itself a pass over shared memory, these
  passes cost a large part of it, so the 1.1x bar above is out of reach there (issue 19's
  note).

The machine has 2 cores: the 2-rank figures take both, so load from anything else on the
machine weighs on them more than on the 1-process baseline (the table's header has the
load average).
"""
import json
import os
import subprocess
import sys

import pytest

import _perfkit as kit

HERE = os.path.dirname(os.path.abspath(__file__))
ROUNDS = 1 if kit.SMOKE else 5
_B = 4 if kit.SMOKE else 256
_MLP = "-".join(map(str, kit.MLP_SIZES))
kit._workload("ddp_mlp_step", f"DDP step, MLP {_MLP} b{_B}/rank Adam: 2 ranks vs 1 process",
              bar=("ratio", "<=", 1.15), note="torch column: the same step in one process (no MPI), 1 thread each")
kit._workload("ddp_mlp_per_sample", f"DDP time per sample, MLP {_MLP} b{_B}/rank: 2 ranks x 1 thread vs 1 x 1",
              bar=("ratio", "<=", 0.59), note="<= 0.59 is >= 1.7x the samples/s; torch column: one process")
kit._workload("ddp_gpt_step", "DDP step, tiny GPT (test_bench_gpt) AdamW: 2 ranks vs 1 process",
              bar=("ratio", "<=", 1.15), note="torch column: the same step in one process (no MPI)")
kit._workload("ddp_allreduce_10m", "gradient average of 10M f32 through DDP vs raw MPI.Allreduce, 2 ranks",
              bar=("ratio", "<=", 1.1), note="torch column: one MPI.Allreduce of a 10M buffer (mpich), interleaved")
kit._workload("ddp_allreduce_10m_copy_floor", "floor: copy of the 10M f32 fresh gradients into a bucket vs raw MPI.Allreduce",
              note="both ranks at once, no communication; numbagrad column: np.copyto; torch column: MPI.Allreduce")
kit._workload("ddp_allreduce_10m_scale_floor", "floor: 10M f32 scaled in place by 1/world vs raw MPI.Allreduce",
              note="both ranks at once, no communication; numbagrad column: np.multiply; torch column: MPI.Allreduce")
kit._workload("ddp_allreduce_10m_gloo", "torch.distributed gloo all_reduce 10M f32 vs raw MPI.Allreduce, 2 ranks",
              note="numbagrad column: torch's gloo all_reduce (a reference, not numbagrad); torch column: MPI")


def _run(args, ranks):
    pytest.importorskip("mpi4py")
    from numbagrad.distributed.launch import mpiexec_argv
    cmd = [sys.executable, os.path.join(HERE, "_dist_ranks.py"), *map(str, args)]
    if ranks > 1:
        try:
            cmd = mpiexec_argv(ranks, *cmd)
        except FileNotFoundError as e:
            pytest.skip(str(e))
    env = dict(os.environ, NUMBA_NUM_THREADS="1", OMP_NUM_THREADS="1")
    env["PYTHONPATH"] = os.pathsep.join([kit.REPO_ROOT] + [p for p in [env.get("PYTHONPATH")] if p])
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240, cwd=kit.REPO_ROOT)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("PERF_RESULT ")][-1]
    return json.loads(line[len("PERF_RESULT "):])


def _record(key, ours, ref):
    kit.record(key, "numbagrad", ours["median"], ours["min"], ours["rounds"])
    kit.record(key, "torch", ref["median"], ref["min"], ref["rounds"])


@pytest.mark.benchmark(**kit.bench_mark())
@pytest.mark.parametrize("model", ["mlp"] if kit.SMOKE else ["mlp", "gpt"])   # smoke: 3 launches in all
def test_ddp_step_against_one_process(benchmark, model):
    results = {}

    def measure():
        results["one"] = _run(["step", model, ROUNDS], 1)
        results["ddp"] = _run(["step", model, ROUNDS], 2)
    benchmark.group = f"ddp_{model}_step"
    benchmark.pedantic(measure, rounds=1, iterations=1)
    one, ddp = results["one"], results["ddp"]
    assert one["world_size"] == 1 and ddp["world_size"] == 2
    _record(f"ddp_{model}_step", ddp, one)
    if model == "mlp":
        half = {k: (v / 2 if k in ("median", "min") else v) for k, v in ddp.items()}   # 2 batches per step
        _record("ddp_mlp_per_sample", half, one)
    benchmark.extra_info.update(one_s=one["median"], ddp_s=ddp["median"], ratio=ddp["median"] / one["median"])


@pytest.mark.benchmark(**kit.bench_mark())
def test_ddp_allreduce_against_raw_mpi(benchmark):
    extra = [] if kit.SMOKE else ["gloo"]
    if extra:
        try:
            import torch.distributed as tdist
            if not tdist.is_available() or not tdist.is_gloo_available():
                extra = []
        except ImportError:
            extra = []
    results = {}

    def measure():
        results.update(_run(["allreduce", 3 if kit.SMOKE else 10, *extra], 2))
    benchmark.group = "ddp_allreduce_10m"
    benchmark.pedantic(measure, rounds=1, iterations=1)
    _record("ddp_allreduce_10m", results["ddp"], results["raw"])
    _record("ddp_allreduce_10m_copy_floor", results["copy"], results["raw"])
    _record("ddp_allreduce_10m_scale_floor", results["scale"], results["raw"])
    if "gloo" in results:
        _record("ddp_allreduce_10m_gloo", results["gloo"], results["raw"])
    benchmark.extra_info.update({k: v["median"] for k, v in results.items() if isinstance(v, dict)})
