"""Normalisation modules (``numbagrad/nn/normalization.py``): parameters, buffers, state
dicts and reprs equal to PyTorch's; outputs, gradients and running statistics equal to
PyTorch's over several training steps and in eval mode (NumPy float64 references for the
running statistics independently of PyTorch); input checks."""
import numpy as np
import pytest

import numbagrad as ng
from numbagrad.nn.normalization import (BatchNorm1d, BatchNorm2d, BatchNorm3d,  # noqa: F401
                                        GroupNorm, InstanceNorm1d, InstanceNorm2d, InstanceNorm3d,
                                        LayerNorm, RMSNorm)
from optest import randn

torch = pytest.importorskip("torch")
tnn = torch.nn


def _np(t):
    return t.detach().numpy() if isinstance(t, ng.Tensor) else t.detach().cpu().numpy()


def _pair(name, *args, dtype=np.float64, **kw):
    """A numbagrad module and the PyTorch one, same arguments, torch's random-looking
    parameters loaded into numbagrad through a converted state dict."""
    m = globals()[name](*args, dtype=dtype, **kw)
    tm = getattr(tnn, name)(*args, dtype=getattr(torch, np.dtype(dtype).name), **kw)
    with torch.no_grad():
        for i, p in enumerate(tm.parameters()):
            p.copy_(torch.tensor(randn(*p.shape, seed=100 + i)))
    sd = {k: v.detach().numpy() for k, v in tm.state_dict().items()}
    m.load_state_dict(sd)
    return m, tm


def _same_structure(m, tm):
    sd, tsd = m.state_dict(), tm.state_dict()
    assert list(sd) == list(tsd)
    for k in sd:
        assert tuple(sd[k].shape) == tuple(tsd[k].shape), k
        assert np.dtype(sd[k].dtype).name == str(tsd[k].dtype).replace("torch.", ""), k
    assert repr(m) == repr(tm)
    assert [n for n, _ in m.named_parameters()] == [n for n, _ in tm.named_parameters()]


def _step(m, tm, x64, g64, tol=1e-10):
    """One forward/backward through both; compares outputs and every gradient."""
    x = ng.tensor(x64, requires_grad=True)
    tx = torch.tensor(x64, requires_grad=True)
    y, ty = m(x), tm(tx)
    np.testing.assert_allclose(_np(y), _np(ty), rtol=tol, atol=tol)
    y.backward(ng.tensor(g64))
    ty.backward(torch.tensor(g64))
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=tol, atol=tol)
    for (n, p), (tn, tp) in zip(m.named_parameters(), tm.named_parameters()):
        np.testing.assert_allclose(p.grad.numpy(), tp.grad.numpy(), rtol=tol, atol=tol, err_msg=n)
    m.zero_grad()
    tm.zero_grad()


def _same_buffers(m, tm, tol=1e-12):
    for (n, b), (tn, tb) in zip(m.named_buffers(), tm.named_buffers()):
        assert n == tn
        np.testing.assert_allclose(_np(b), _np(tb), rtol=tol, atol=tol, err_msg=n)


# ---- LayerNorm / RMSNorm ----------------------------------------------------------------------------
@pytest.mark.parametrize("args,kw", [((6,), {}), ((6,), dict(bias=False)),
                                     ((6,), dict(elementwise_affine=False)),
                                     (((3, 6),), dict(eps=1e-3)), ([6], {})])
def test_layer_norm_like_torch(args, kw):
    m, tm = _pair("LayerNorm", *args, **kw)
    _same_structure(m, tm)
    _step(m, tm, randn(4, 3, 6, seed=1) * 2 + 1, randn(4, 3, 6, seed=2))


def test_layer_norm_defaults_and_reset():
    m = LayerNorm(5)
    assert m.normalized_shape == (5,) and m.eps == 1e-5 and m.elementwise_affine
    assert m.weight.dtype == ng.get_default_dtype()
    np.testing.assert_array_equal(m.weight.detach().numpy(), np.ones(5))
    np.testing.assert_array_equal(m.bias.detach().numpy(), np.zeros(5))
    with ng.no_grad():
        m.weight.array[...] = 3
    m.reset_parameters()
    np.testing.assert_array_equal(m.weight.detach().numpy(), np.ones(5))
    y = m(ng.tensor(randn(2, 5, seed=3).astype(np.float32)))
    assert y.dtype == np.float32


def test_layer_norm_wrong_shape_raises():
    with pytest.raises(RuntimeError, match=r"normalized_shape=\[4\]"):
        LayerNorm(4)(ng.tensor(np.ones((2, 5), np.float32)))


def test_layer_norm_half():
    m = LayerNorm(8).half()
    x = ng.tensor(randn(3, 8, seed=4).astype(np.float16), requires_grad=True)
    y = m(x)
    assert y.dtype == np.float16
    y.sum().backward()
    assert m.weight.grad.dtype == np.float16 and x.grad.dtype == np.float16


@pytest.mark.parametrize("kw", [{}, dict(eps=1e-4), dict(elementwise_affine=False)])
def test_rms_norm_like_torch(kw):
    m, tm = _pair("RMSNorm", (2, 5), **kw)
    _same_structure(m, tm)
    _step(m, tm, randn(3, 2, 5, seed=5), randn(3, 2, 5, seed=6))


# ---- GroupNorm --------------------------------------------------------------------------------------
@pytest.mark.parametrize("kw", [{}, dict(affine=False), dict(bias=False), dict(eps=1e-3)])
def test_group_norm_like_torch(kw):
    m, tm = _pair("GroupNorm", 2, 6, **kw)
    _same_structure(m, tm)
    _step(m, tm, randn(3, 6, 4, seed=7) * 3, randn(3, 6, 4, seed=8))
    _step(m, tm, randn(2, 6, 2, 3, seed=9), randn(2, 6, 2, 3, seed=10))


def test_group_norm_errors():
    with pytest.raises(ValueError, match="must be divisible by num_groups"):
        GroupNorm(4, 6)
    with pytest.raises(RuntimeError, match=r"GroupNorm: expected input of shape \(N, 6, \*\)"):
        GroupNorm(2, 6)(ng.tensor(np.ones((2, 4, 3), np.float32)))


# ---- BatchNorm --------------------------------------------------------------------------------------
BN_SHAPES = {"BatchNorm1d": [(6, 3), (4, 3, 5)], "BatchNorm2d": [(3, 3, 4, 2)],
             "BatchNorm3d": [(2, 3, 2, 3, 2)]}


@pytest.mark.parametrize("name", list(BN_SHAPES))
@pytest.mark.parametrize("kw", [{}, dict(momentum=None), dict(momentum=0.5, affine=False),
                                dict(track_running_stats=False), dict(bias=False, eps=1e-3)])
def test_batch_norm_training_then_eval_like_torch(name, kw):
    m, tm = _pair(name, 3, **kw)
    _same_structure(m, tm)
    for shape in BN_SHAPES[name]:
        for step in range(3):
            _step(m, tm, randn(*shape, seed=20 + step) * (step + 1) + step, randn(*shape, seed=30 + step))
            _same_buffers(m, tm)
        m.eval()
        tm.eval()
        _step(m, tm, randn(*shape, seed=40), randn(*shape, seed=41))
        _same_buffers(m, tm)
        m.train()
        tm.train()
    if m.track_running_stats:
        assert m.num_batches_tracked.dtype == np.int64
        assert int(m.num_batches_tracked.item()) == 3 * len(BN_SHAPES[name])


def test_batch_norm_running_stats_reference():
    """Running statistics against a float64 NumPy recursion (momentum and cumulative)."""
    for momentum in (0.1, None):
        m = BatchNorm2d(2, momentum=momentum, dtype=np.float64)
        rm, rv = np.zeros(2), np.ones(2)
        for k in range(1, 4):
            x = randn(3, 2, 2, 3, seed=50 + k) * k + k
            m(ng.tensor(x))
            f = 1.0 / k if momentum is None else momentum
            rm = (1 - f) * rm + f * x.mean((0, 2, 3))
            rv = (1 - f) * rv + f * x.var((0, 2, 3), ddof=1)
        np.testing.assert_allclose(m.running_mean.numpy(), rm, rtol=1e-12)
        np.testing.assert_allclose(m.running_var.numpy(), rv, rtol=1e-12)
        assert int(m.num_batches_tracked.item()) == 3
        m.eval()
        x = randn(2, 2, 1, 1, seed=60)
        y = _np(m(ng.tensor(x)))
        np.testing.assert_allclose(y, (x - rm.reshape(1, 2, 1, 1)) / np.sqrt(rv.reshape(1, 2, 1, 1) + 1e-5),
                                   rtol=1e-12)


def test_batch_norm_load_torch_trained_state():
    tm = tnn.BatchNorm1d(4, dtype=torch.float64)
    for k in range(3):
        tm(torch.tensor(randn(5, 4, seed=70 + k) + k))
    tm.eval()
    m = BatchNorm1d(4, dtype=np.float64)
    m.load_state_dict({k: v.numpy() for k, v in tm.state_dict().items()})
    m.eval()
    x = randn(3, 4, seed=75)
    np.testing.assert_allclose(_np(m(ng.tensor(x))), _np(tm(torch.tensor(x))), rtol=1e-12)
    assert int(m.num_batches_tracked.item()) == 3


def test_batch_norm_errors():
    with pytest.raises(ValueError, match="Expected more than 1 value per channel when training"):
        BatchNorm1d(3)(ng.tensor(np.ones((1, 3), np.float32)))
    m = BatchNorm1d(3).eval()
    assert tuple(m(ng.tensor(np.ones((1, 3), np.float32))).shape) == (1, 3)  # eval: fine, as in torch
    with pytest.raises(ValueError, match=r"expected 4D input \(got 3D input"):
        BatchNorm2d(3)(ng.tensor(np.ones((2, 3, 4), np.float32)))
    with pytest.raises(ValueError, match=r"expected 2D or 3D input \(got 4D input"):
        BatchNorm1d(3)(ng.tensor(np.ones((2, 3, 4, 4), np.float32)))
    with pytest.raises(RuntimeError, match="running_mean should contain 4 elements not 3"):
        BatchNorm1d(3)(ng.tensor(np.ones((2, 4), np.float32)))


def test_batch_norm_reset_running_stats():
    m = BatchNorm1d(2)
    m(ng.tensor(randn(4, 2, seed=80).astype(np.float32)))
    assert int(m.num_batches_tracked.item()) == 1
    m.reset_running_stats()
    np.testing.assert_array_equal(m.running_mean.numpy(), np.zeros(2))
    np.testing.assert_array_equal(m.running_var.numpy(), np.ones(2))
    assert int(m.num_batches_tracked.item()) == 0


# ---- InstanceNorm -----------------------------------------------------------------------------------
@pytest.mark.parametrize("name,shape", [("InstanceNorm1d", (3, 3, 5)), ("InstanceNorm2d", (2, 3, 2, 3)),
                                        ("InstanceNorm1d", (3, 5)), ("InstanceNorm3d", (2, 3, 2, 1, 2))])
@pytest.mark.parametrize("kw", [{}, dict(affine=True, track_running_stats=True, momentum=0.3)])
def test_instance_norm_like_torch(name, shape, kw):
    m, tm = _pair(name, 3, **kw)
    _same_structure(m, tm)
    for step in range(2):
        _step(m, tm, randn(*shape, seed=90 + step) + step, randn(*shape, seed=95 + step))
        _same_buffers(m, tm)
    m.eval()
    tm.eval()
    _step(m, tm, randn(*shape, seed=99), randn(*shape, seed=98))


def test_instance_norm_errors():
    with pytest.raises(ValueError, match="to match num_features"):
        InstanceNorm1d(4, affine=True)(ng.tensor(np.ones((2, 3, 5), np.float32)))
    with pytest.raises(ValueError, match=r"expected 3D or 4D input \(got 2D"):
        InstanceNorm2d(3)(ng.tensor(np.ones((3, 5), np.float32)))


def test_state_dict_without_num_batches_tracked_loads_as_torch():
    torch = pytest.importorskip("torch")
    from numbagrad.nn.normalization import BatchNorm1d
    t = torch.nn.BatchNorm1d(3)
    t(torch.randn(5, 3))
    sd = {k: v.detach().numpy() for k, v in t.state_dict().items() if k != "num_batches_tracked"}
    m = BatchNorm1d(3)
    m.num_batches_tracked.array.fill(7)
    res = m.load_state_dict(sd)  # strict: no missing key, as torch
    assert list(res.missing_keys) == [] and list(res.unexpected_keys) == []
    assert int(m.num_batches_tracked.item()) == 7
    np.testing.assert_allclose(m.running_mean.numpy(), t.running_mean.numpy())
    t2 = torch.nn.BatchNorm1d(3)
    t2.num_batches_tracked.fill_(7)
    t2.load_state_dict({k: torch.from_numpy(v) for k, v in sd.items()})
    assert int(t2.num_batches_tracked) == 7


def test_functional_batch_norm_rejects_momentum_none_as_torch():
    from numbagrad.ops.normalization import batch_norm
    x = ng.randn(4, 3)
    with pytest.raises(TypeError, match="momentum"):
        batch_norm(x, ng.zeros(3), ng.ones(3), training=True, momentum=None)
