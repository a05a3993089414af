"""numbagrad.distributed in one process, without a process group: what must hold before
(and without) MPI. The multi-process behaviour is in test_mpi.py."""
import subprocess
import sys

import numpy as np
import pytest

import numbagrad as ng
import numbagrad.distributed as dist
from numbagrad import nn


def test_importing_numbagrad_never_imports_mpi4py():
    code = ("import sys, numbagrad as ng, numbagrad.distributed as d, numbagrad.nn.parallel, numbagrad.data\n"
            "from numbagrad.data import DistributedSampler\n"
            "d.is_available(); d.is_initialized(); ng.nn.SyncBatchNorm(3)(ng.randn(4, 3))\n"
            "assert 'mpi4py' not in sys.modules, 'mpi4py imported'\n"
            "assert not any(m.startswith('mpi4py') for m in sys.modules)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


def test_missing_mpi4py_raises_one_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "mpi4py", None)      # what a machine without the extra sees
    assert dist.is_available() is False
    with pytest.raises(ImportError, match=r"pip install numbagrad\[mpi\]"):
        dist.init_process_group()
    assert not dist.is_initialized()


@pytest.mark.parametrize("backend", ["nccl", "gloo", "ucc"])
def test_other_backends_are_refused_by_name(backend):
    with pytest.raises(ValueError, match=rf"backend '{backend}' is not available in numbagrad: its only backend "
                                         r"is 'mpi'"):
        dist.init_process_group(backend)
    assert not dist.is_initialized()


def test_no_group_raises_torchs_value_error_everywhere():
    x = ng.ones(3)
    for f in (dist.get_rank, dist.get_world_size, dist.barrier, dist.get_backend, dist.destroy_process_group,
              lambda: dist.all_reduce(x), lambda: dist.broadcast(x, 0), lambda: dist.all_gather([x], x),
              lambda: dist.reduce_scatter(x, [x]), lambda: dist.gather(x), lambda: dist.scatter(x),
              lambda: nn.parallel.DistributedDataParallel(nn.Linear(2, 2))):
        with pytest.raises(ValueError, match="Default process group has not been initialized"):
            f()
    assert dist.ReduceOp.SUM != dist.ReduceOp.AVG


def test_sync_batchnorm_without_a_group_is_batchnorm():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((6, 4, 5)).astype(np.float32)
    g = rng.standard_normal(x.shape).astype(np.float32)
    ref, sync = nn.BatchNorm1d(4, momentum=0.2), nn.SyncBatchNorm(4, momentum=0.2)
    outs = []
    for m in (ref, sync):
        xt = ng.tensor(x, requires_grad=True)
        y = m(xt)
        (y * ng.tensor(g)).sum().backward()
        outs.append((y.detach().numpy(), xt.grad.numpy(), m.weight.grad.numpy(), m.running_var.numpy()))
    for a, b in zip(*outs):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(ValueError, match=r"SyncBatchNorm: expected at least 2D input \(got 1D"):
        sync(ng.ones(4))


def test_convert_sync_batchnorm_shares_parameters_and_buffers():
    model = nn.Sequential(nn.Conv2d(1, 3, 3), nn.BatchNorm2d(3, eps=1e-3, momentum=0.05),
                          nn.Sequential(nn.Linear(3, 3), nn.BatchNorm1d(3, affine=False)), nn.ReLU())
    old = model[1]
    model.eval()
    conv = nn.SyncBatchNorm.convert_sync_batchnorm(model)
    assert conv is model
    new = model[1]
    assert type(new) is nn.SyncBatchNorm and (new.eps, new.momentum, new.num_features) == (1e-3, 0.05, 3)
    assert new.weight is old.weight and new.bias is old.bias and new.running_mean is old.running_mean
    assert new.num_batches_tracked is old.num_batches_tracked and not new.training
    inner = model[2][1]
    assert type(inner) is nn.SyncBatchNorm and inner.weight is None and not inner.affine
    assert type(model[0]) is nn.Conv2d and type(model[3]) is nn.ReLU
    assert list(model.state_dict()) == list(nn.Sequential(
        nn.Conv2d(1, 3, 3), nn.BatchNorm2d(3), nn.Sequential(nn.Linear(3, 3), nn.BatchNorm1d(3, affine=False)),
        nn.ReLU()).state_dict())
    bn = nn.BatchNorm1d(2)
    top = nn.SyncBatchNorm.convert_sync_batchnorm(bn)
    assert type(top) is nn.SyncBatchNorm and top.weight is bn.weight
    assert nn.SyncBatchNorm.convert_sync_batchnorm(top) is top
