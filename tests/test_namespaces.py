"""torch namespaces that programs import or touch at the top (``torch.accelerator``,
``torch.backends.*``, ``torch.onnx``, ``torch.amp``, ``torch.utils.tensorboard``,
``torch.distributed``, ``torch.nn.parallel``, ``torch.nn.modules.*``, ``torch.save``,
``torch.bfloat16``, now ``ml_dtypes.bfloat16``): every path imports; what reports on the machine reports what this
machine has; features numbagrad lacks raise with the documented message; the
``nn.modules`` paths hold numbagrad.nn's own classes, grouped as torch groups them."""
import importlib
import importlib.util
import os
import subprocess
import sys

import pytest

import numbagrad as ng
import numbagrad.nn as nn
from numbagrad.backend import cuda as _cb

try:
    import torch
except ImportError:
    torch = None

NOT_YET = "is not available in numbagrad yet; it will be"

PATHS = ["numbagrad.accelerator", "numbagrad.backends", "numbagrad.backends.cudnn", "numbagrad.backends.cuda",
         "numbagrad.backends.mps", "numbagrad.backends.cpu", "numbagrad.backends.mkl", "numbagrad.backends.openmp",
         "numbagrad.onnx", "numbagrad.serialization", "numbagrad.amp", "numbagrad.cuda", "numbagrad.cuda.amp",
         "numbagrad.utils", "numbagrad.utils.tensorboard", "numbagrad.utils.data", "numbagrad.nn.parallel",
         "numbagrad.distributed", "numbagrad.nn.modules"]

# what each numbagrad.nn.modules submodule must hold (torch's grouping), and the classes the
# issue names
MODULES = {"linear": ["Linear"], "conv": ["Conv2d"], "rnn": ["LSTM"], "activation": ["MultiheadAttention", "ReLU"],
           "loss": ["CrossEntropyLoss"], "module": ["Module"], "container": ["Sequential"],
           "normalization": ["LayerNorm"], "batchnorm": ["BatchNorm2d"], "dropout": ["Dropout"],
           "pooling": ["MaxPool2d"], "sparse": ["Embedding"], "transformer": ["TransformerEncoderLayer"],
           "flatten": ["Flatten"], "instancenorm": ["InstanceNorm2d"], "distance": ["PairwiseDistance"],
           "pixelshuffle": [], "upsampling": ["Upsample"], "padding": ["ZeroPad2d", "ReflectionPad2d"],
           "fold": ["Fold", "Unfold"], "channelshuffle": ["ChannelShuffle"]}


@pytest.mark.parametrize("path", PATHS + [f"numbagrad.nn.modules.{m}" for m in MODULES])
def test_every_path_imports(path):
    importlib.import_module(path)


@pytest.mark.parametrize("stmt", ["from numbagrad.cuda.amp import GradScaler, autocast",
                                  "import numbagrad.nn.modules.batchnorm as m; assert m.BatchNorm2d",
                                  "from numbagrad.utils.data.dataloader import DataLoader",
                                  "import numbagrad.backends.cudnn as c; c.benchmark = True"])
def test_paths_import_first_in_a_fresh_process(stmt):
    """The first import of the process (no ``import numbagrad`` before): no import cycle."""
    r = subprocess.run([sys.executable, "-c", stmt], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr


# ---- torch.accelerator -----------------------------------------------------------------------
def _cuda_built():
    try:
        import numba.cuda  # noqa: F401
        return True
    except Exception:
        return False


def test_accelerator_reports_this_machine():
    acc = ng.accelerator
    assert acc.is_available() is ng.cuda.is_available()
    assert acc.device_count() == ng.cuda.device_count() == (1 if ng.cuda.is_available() else 0)
    assert ng.backends.cuda.is_built() is _cuda_built()
    # only a usable GPU counts (numba-cuda alone, as on CI's machines, does not)
    want = ng.device("cuda") if ng.cuda.is_available() else None
    assert acc.current_accelerator() == want and acc.current_accelerator(check_available=True) == want
    assert acc.set_device_idx is acc.set_device_index and acc.current_device_idx is acc.current_device_index


def test_accelerator_without_a_gpu_raises_as_torch(monkeypatch):
    monkeypatch.setattr(_cb, "available", lambda: False)
    acc = ng.accelerator
    assert not acc.is_available() and acc.device_count() == 0 and acc.current_accelerator(True) is None
    for call in (acc.current_device_index, lambda: acc.set_device_index(0), acc.synchronize):
        with pytest.raises(RuntimeError, match="Cannot access accelerator device when none is available"):
            call()
    with pytest.raises(RuntimeError):
        ng.cuda.set_device(0)
    ng.cuda.set_device(-1)      # a negative index does nothing, as in torch


def test_accelerator_with_a_gpu_has_only_device_0(monkeypatch):
    monkeypatch.setattr(_cb, "available", lambda: True)   # synchronize: no kernels queued
    acc = ng.accelerator
    assert acc.is_available() and acc.device_count() == 1 and acc.current_device_index() == 0
    acc.synchronize()
    acc.synchronize(0)
    for d in (0, "cuda:0", ng.device("cuda")):
        acc.set_device_index(d)
        with acc.device_index(d):
            assert acc.current_device_index() == 0
    for bad in (1, "cuda:3"):
        with pytest.raises(ValueError, match="numbagrad drives one GPU, cuda:0, so 0 is the only valid index"):
            acc.set_device_idx(bad)
    with pytest.raises(ValueError, match="expected a CUDA device"):
        acc.set_device_index("cpu")


# ---- torch.backends --------------------------------------------------------------------------
def test_backends_report_this_machine():
    b = ng.backends
    assert b.cudnn.is_available() is False and b.cudnn.version() is None
    assert b.mps.is_available() is False and b.mps.is_built() is False
    from numbagrad.kernels.cpu import _blas
    assert b.mkl.is_available() is (_blas.PROVIDER == "mkl")
    try:
        import numba.np.ufunc.omppool  # noqa: F401
        has_omp = True
    except ImportError:
        has_omp = False
    assert b.openmp.is_available() is has_omp
    assert b.cpu.get_cpu_capability() in ("AVX512", "AVX2", "DEFAULT")


@pytest.mark.skipif(torch is None, reason="torch not installed")
@pytest.mark.skipif("ATEN_CPU_CAPABILITY" in os.environ, reason="torch reports ATEN_CPU_CAPABILITY, not the CPU")
def test_cpu_capability_matches_torch():
    assert ng.backends.cpu.get_cpu_capability() == torch.backends.cpu.get_cpu_capability()


@pytest.mark.parametrize("obj, name, default, value", [
    ("cudnn", "enabled", True, False), ("cudnn", "benchmark", False, True),
    ("cudnn", "deterministic", False, True), ("cudnn", "allow_tf32", True, False),
    ("cuda.matmul", "allow_tf32", False, True),
    ("cuda.matmul", "allow_fp16_reduced_precision_reduction", True, False)])
def test_backend_flags_have_torch_defaults_and_keep_what_is_set(monkeypatch, obj, name, default, value):
    target = ng.backends
    for part in obj.split("."):
        target = getattr(target, part)
    assert getattr(target, name) is default
    if torch is not None:
        t = torch.backends
        for part in obj.split("."):
            t = getattr(t, part)
        assert getattr(t, name) is default
    monkeypatch.setattr(target, name, value)
    assert getattr(target, name) is value


# ---- torch.onnx, torch.save / torch.load, torch.serialization ------------------------------------
def test_onnx_export_refuses_and_points_to_state_dict():
    import numbagrad.onnx as onnx
    with pytest.raises(NotImplementedError, match=r"numbagrad does not export ONNX models\. Save the model's "
                                                  r"state_dict\(\) instead"):
        onnx.export(nn.Linear(2, 2), ng.zeros(1, 2), "m.onnx")
    assert onnx.is_in_onnx_export() is False


def test_torch_style_save_and_load_through_the_namespace(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    ng.serialization.save({"w": ng.ones(2)}, "ck.pt")
    ck = ng.serialization.load("ck.pt", map_location="cpu", weights_only=True)
    assert list(ck) == ["w"] and ck["w"].tolist() == [1.0, 1.0]
    assert os.listdir(tmp_path) == ["ck.pt"]       # no temporary file left behind


def test_serialization_aliases_and_safe_globals_bookkeeping():
    s = ng.serialization
    assert s.save is ng.save and s.load is ng.load
    before = s.get_safe_globals()
    try:
        s.clear_safe_globals()
        assert s.get_safe_globals() == []
        s.add_safe_globals([nn.Linear, (nn.Module, "torch.nn.Module")])
        s.add_safe_globals([nn.Linear])                   # once only
        assert s.get_safe_globals() == [nn.Linear, (nn.Module, "torch.nn.Module")]
        s.get_safe_globals().append(nn.ReLU)               # a copy
        assert nn.ReLU not in s.get_safe_globals()
        with s.safe_globals([nn.ReLU]):
            assert nn.ReLU in s.get_safe_globals()
        assert nn.ReLU not in s.get_safe_globals()
        with pytest.raises(TypeError, match="expected a list of globals"):
            s.add_safe_globals(nn.Linear)
        s.clear_safe_globals()
        assert s.get_safe_globals() == []
    finally:
        s.clear_safe_globals()
        s.add_safe_globals(before)


# ---- mixed precision ---------------------------------------------------------------------------
def test_enabled_mixed_precision_opens_a_region():
    # enabled autocast works on the CPU (tests/amp/test_autocast.py); CUDA without a GPU
    # warns and disables itself, as torch's
    assert ng.cpu.amp.autocast is not ng.amp.autocast and issubclass(ng.cpu.amp.autocast, ng.amp.autocast)
    for make in (lambda: ng.amp.autocast("cpu"), lambda: ng.cpu.amp.autocast()):
        with make():
            assert ng.amp.is_autocast_enabled("cpu")
        assert not ng.amp.is_autocast_enabled("cpu")
    if not ng.cuda.is_available():
        for make in (lambda: ng.autocast("cuda", dtype=ng.float16), lambda: ng.cuda.amp.autocast()):
            with pytest.warns(UserWarning, match="CUDA is not available"):
                ctx = make()
            with ctx:
                assert not ng.amp.is_autocast_enabled("cuda")


def test_disabled_mixed_precision_is_torchs_passthrough():
    assert ng.autocast is ng.amp.autocast
    assert issubclass(ng.cuda.amp.autocast, ng.amp.autocast) and issubclass(ng.cuda.amp.GradScaler, ng.amp.GradScaler)
    model = nn.Linear(3, 1)
    opt = ng.optim.SGD(model.parameters(), lr=0.1)
    w0 = model.weight.detach().numpy().copy()
    for scaler, ctx in [(ng.amp.GradScaler("cuda", enabled=False), ng.autocast("cuda", enabled=False)),
                        (ng.cuda.amp.GradScaler(enabled=False), ng.cuda.amp.autocast(enabled=False))]:
        with ctx:
            loss = model(ng.ones(2, 3)).sum()
        assert scaler.scale(loss) is loss
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        scaler.step(opt)
        scaler.update()
        opt.zero_grad()
        assert not scaler.is_enabled() and scaler.get_scale() == 1.0 and scaler.state_dict() == {}
        scaler.load_state_dict({})
    assert (model.weight.detach().numpy() != w0).all()             # the optimizer really stepped

    @ng.autocast("cpu", enabled=False)
    def f(x):
        return x + 1
    assert f(1) == 2
    assert ng.amp.is_autocast_available("cuda") is ng.cuda.is_available()
    assert ng.amp.is_autocast_available("cpu") is True
    if torch is not None:
        t = torch.amp.GradScaler("cuda", enabled=False)
        assert (t.is_enabled(), t.get_scale(), t.state_dict()) == (False, 1.0, {})


# ---- TensorBoard, parallel wrappers, distributed -------------------------------------------------
def test_tensorboard_writer_is_tensorboardx_and_utils_data_is_data(tmp_path):
    tbx = pytest.importorskip("tensorboardX")
    from numbagrad.utils.tensorboard import SummaryWriter
    w = SummaryWriter(str(tmp_path / "runs"))
    assert isinstance(w, tbx.SummaryWriter)
    w.close()
    import numbagrad.utils.data
    import numbagrad.utils.data.dataloader
    assert numbagrad.utils.data is ng.data and ng.utils.data.DataLoader is ng.data.DataLoader
    assert numbagrad.utils.data.dataloader is sys.modules["numbagrad.data.dataloader"]


def test_data_parallel_raises_on_construction():
    c = nn.parallel.DataParallel
    assert issubclass(c, nn.Module) and not isinstance(nn.Linear(2, 2), c)
    with pytest.raises(NotImplementedError, match=r"numbagrad\.nn\.parallel\.DataParallel " + NOT_YET):
        c(nn.Linear(2, 2))

    class Sub(c):
        def __init__(self, module):      # a subclass that skips super().__init__ still raises
            self.m = module
    with pytest.raises(NotImplementedError, match=NOT_YET):
        Sub(nn.Linear(2, 2))
    assert nn.DataParallel is nn.parallel.DataParallel


def test_distributed_without_a_process_group():
    """No group: the single-process guards hold, as in torch (tests/distributed has the rest)."""
    import numbagrad.distributed as dist
    assert dist.is_initialized() is False
    for f in (dist.get_rank, dist.get_world_size, dist.barrier):
        with pytest.raises(ValueError, match="Default process group has not been initialized"):
            f()
    with pytest.raises(ValueError, match="Default process group has not been initialized"):
        nn.parallel.DistributedDataParallel(nn.Linear(2, 2))
    if torch is not None and torch.distributed.is_available() and not torch.distributed.is_initialized():
        with pytest.raises(ValueError):         # the same exception type as torch's
            torch.distributed.get_rank()


# ---- dtypes ----------------------------------------------------------------------------------
def test_bfloat16_is_ml_dtypes_bfloat16():
    import ml_dtypes
    assert ng.bfloat16 is ng.dtype(ml_dtypes.bfloat16)  # tests/test_bfloat16.py tests its use
    with pytest.raises(AttributeError, match="module 'numbagrad' has no attribute 'no_such_name'"):
        ng.no_such_name
    assert ng.float16 is not None and getattr(ng, "nope", 7) == 7
    ns = {}
    exec("from numbagrad import *", ns)
    assert ns["tensor"] is ng.tensor and ns["bfloat16"] is ng.bfloat16


# ---- nn.modules ------------------------------------------------------------------------------
@pytest.mark.parametrize("sub", sorted(MODULES))
def test_nn_modules_hold_numbagrads_own_classes(sub):
    m = importlib.import_module(f"numbagrad.nn.modules.{sub}")
    for name in MODULES[sub]:
        assert getattr(m, name) is getattr(nn, name)
    for name in m.__all__:
        assert getattr(m, name) is getattr(nn, name)
        assert getattr(nn.modules, name) is getattr(nn, name)


def test_nn_modules_private_bases_are_numbagrads():
    import numbagrad.nn.modules as M
    assert M.loss._Loss is nn.loss._Loss and M.loss._WeightedLoss is nn.loss._WeightedLoss
    assert M.batchnorm._BatchNorm is nn.normalization._BatchNorm and M.conv._ConvNd is nn.conv._ConvNd
    assert issubclass(nn.CrossEntropyLoss, M.loss._Loss) and issubclass(nn.BatchNorm2d, M.batchnorm._BatchNorm)
    assert M.module._addindent is nn.module._addindent


@pytest.mark.skipif(torch is None, reason="torch not installed")
@pytest.mark.parametrize("sub", sorted(MODULES))
def test_nn_modules_export_every_torch_name_numbagrad_has(sub):
    theirs = importlib.import_module(f"torch.nn.modules.{sub}").__all__
    ours = importlib.import_module(f"numbagrad.nn.modules.{sub}").__all__
    assert sorted(ours) == sorted(n for n in theirs if hasattr(nn, n))


@pytest.mark.skipif(torch is None, reason="torch not installed")
def test_nn_modules_mirror_every_torch_submodule_numbagrad_has_classes_of():
    import pkgutil
    import torch.nn.modules as T
    for info in pkgutil.iter_modules(T.__path__):
        names = getattr(importlib.import_module(f"torch.nn.modules.{info.name}"), "__all__", [])
        if any(hasattr(nn, n) and n[0].isupper() for n in names):
            assert info.name in MODULES, f"torch.nn.modules.{info.name} has classes numbagrad.nn has"


# ---- numbagrad.cuda keeps its names as a package -------------------------------------------------
def test_cuda_package_keeps_its_names():
    c = ng.cuda
    for name in c.__all__:
        assert callable(getattr(c, name)), name
    assert c.amp is sys.modules["numbagrad.cuda.amp"]
    if not c.is_available():
        assert (c.device_count(), c.memory_allocated(), c.memory_reserved()) == (0, 0, 0)
        c.synchronize()
        c.empty_cache()
