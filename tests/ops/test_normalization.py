"""layer_norm, rms_norm, batch_norm, group_norm and instance_norm
(``numbagrad/ops/normalization.py``): forward against float64 NumPy references, gradients
against finite differences, PyTorch parity, the fused kernels against the same maths
composed from numbagrad ops, running-statistics updates, the parallel twins and errors."""
import numpy as np
import pytest

import numbagrad as ng
from numbagrad.backend import config
from numbagrad.ops.normalization import batch_norm, group_norm, instance_norm, layer_norm, rms_norm
from optest import check_forward, check_grad, check_op, check_torch, randn, torch

F = torch.nn.functional if torch else None


# ---- float64 NumPy references ---------------------------------------------------------------------
def ref_layer_norm(x, w=None, b=None, k=1, eps=1e-5):
    axes = tuple(range(x.ndim - k, x.ndim))
    m = x.mean(axes, keepdims=True)
    v = ((x - m) ** 2).mean(axes, keepdims=True)
    y = (x - m) / np.sqrt(v + eps)
    return y * (1 if w is None else w) + (0 if b is None else b)


def ref_rms_norm(x, w=None, k=1, eps=1e-6):
    axes = tuple(range(x.ndim - k, x.ndim))
    y = x / np.sqrt((x * x).mean(axes, keepdims=True) + eps)
    return y * (1 if w is None else w)


def _chan(a, ndim):
    return a.reshape((1, -1) + (1,) * (ndim - 2))


def ref_batch_norm(x, mean, var, w=None, b=None, eps=1e-5):
    y = (x - _chan(mean, x.ndim)) / np.sqrt(_chan(var, x.ndim) + eps)
    if w is not None:
        y = y * _chan(w, x.ndim)
    if b is not None:
        y = y + _chan(b, x.ndim)
    return y


def batch_stats(x):
    axes = (0,) + tuple(range(2, x.ndim))
    return x.mean(axes), x.var(axes), x.var(axes, ddof=1)


def ref_group_norm(x, groups, w=None, b=None, eps=1e-5):
    xg = x.reshape(x.shape[0], groups, -1)
    m = xg.mean(-1, keepdims=True)
    v = xg.var(-1, keepdims=True)
    y = ((xg - m) / np.sqrt(v + eps)).reshape(x.shape)
    if w is not None:
        y = y * _chan(w, x.ndim)
    return y if b is None else y + _chan(b, x.ndim)


def _t(a, dtype=np.float64, grad=False):
    return ng.tensor(np.asarray(a, dtype), requires_grad=grad)


# ---- layer norm -------------------------------------------------------------------------------------
@pytest.mark.parametrize("shape,k", [((3, 7), 1), ((2, 3, 4), 2), ((2, 3, 20), 1), ((5,), 1),
                                     ((2, 2, 3, 3), 3)])
def test_layer_norm_affine(shape, k):
    ns = shape[len(shape) - k:]
    x, w, b = randn(*shape, seed=1) * 2 + 0.5, randn(*ns, seed=2), randn(*ns, seed=3)
    check_op(lambda t, w_, b_: layer_norm(t, ns, w_, b_), lambda a, w_, b_: ref_layer_norm(a, w_, b_, k),
             [x, w, b], torch_fn=(lambda t, w_, b_: F.layer_norm(t, ns, w_, b_)) if torch else None)


@pytest.mark.parametrize("which", ["none", "weight", "bias"])
def test_layer_norm_partial_affine(which):
    x, p = randn(4, 9, seed=4), randn(9, seed=5)
    w = p if which == "weight" else None
    b = p if which == "bias" else None

    def fn(t, q):
        return layer_norm(t, 9, q if w is not None else None, q if b is not None else None, eps=1e-3)

    check_op(fn, lambda a, q: ref_layer_norm(a, w, b, eps=1e-3), [x, p],
             torch_fn=(lambda t, q: F.layer_norm(t, (9,), q if w is not None else None,
                                                 q if b is not None else None, eps=1e-3)) if torch else None)


def test_layer_norm_chunked_backward_and_parallel_twin(monkeypatch):
    # 300 * 256 elements: two partial-sum chunks for dweight/dbias and the parallel twins
    x64, g64 = randn(300, 256, seed=6), randn(300, 256, seed=9)
    w64, b64 = randn(256, seed=7), randn(256, seed=8)

    def run():
        x, w, b = _t(x64, np.float32, True), _t(w64, np.float32, True), _t(b64, np.float32, True)
        y = layer_norm(x, 256, w, b)
        y.backward(_t(g64, np.float32))
        return [a.numpy() for a in (y.detach(), x.grad, w.grad, b.grad)]

    monkeypatch.setattr(config, "PARALLEL_THRESHOLD", 1000)
    par = run()
    monkeypatch.setattr(config, "PARALLEL_THRESHOLD", 1 << 62)
    ser = run()
    for p, s in zip(par, ser):
        np.testing.assert_allclose(p, s, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(par[0], ref_layer_norm(x64, w64, b64), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(par[3], g64.sum(0), rtol=1e-4, atol=1e-4)
    if torch is not None:
        tx = torch.tensor(x64, requires_grad=True)
        tw = torch.tensor(w64, requires_grad=True)
        tb = torch.tensor(b64, requires_grad=True)
        F.layer_norm(tx, (256,), tw, tb).backward(torch.tensor(g64))
        np.testing.assert_allclose(par[1], tx.grad.numpy(), rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(par[2], tw.grad.numpy(), rtol=1e-4, atol=1e-3)


def _composed_layer_norm(x, w, b, k, eps, center=True):
    dims = tuple(range(x.ndim - k, x.ndim))
    d = x - x.mean(dims, keepdim=True) if center else x
    y = d * ng.rsqrt((d * d).mean(dims, keepdim=True) + eps)
    if w is not None:
        y = y * w
    return y + b if b is not None else y


def _check_fused_equals_composed(fused, composed, x_shape, w_shape, seed):
    """``fused(x, w, b)`` against ``composed(x, w, b)``, the same function from separate
    numbagrad ops, in float64: the output and the gradients (one upstream gradient) of the
    inputs it uses agree to 1e-10. ``x``, ``w``, ``b`` and the upstream gradient are
    :func:`randn` with seeds ``seed`` to ``seed + 3``."""
    x64, w64, b64 = randn(*x_shape, seed=seed), randn(*w_shape, seed=seed + 1), randn(*w_shape, seed=seed + 2)
    g64 = randn(*x_shape, seed=seed + 3)
    outs = []
    for fn in (fused, composed):
        x, w, b = _t(x64, grad=True), _t(w64, grad=True), _t(b64, grad=True)
        y = fn(x, w, b)
        y.backward(_t(g64))
        outs.append([y.detach().numpy()] + [None if t.grad is None else t.grad.numpy() for t in (x, w, b)])
    for a, c in zip(*outs):
        assert (a is None) == (c is None)
        if a is not None:
            np.testing.assert_allclose(a, c, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("center", [True, False])
def test_fused_layer_norm_equals_composed_ops(center):
    def fused(x, w, b):
        return layer_norm(x, (2, 10), w, b, 1e-5) if center else rms_norm(x, (2, 10), w, 1e-5)

    def composed(x, w, b):
        return _composed_layer_norm(x, w, b if center else None, 2, 1e-5, center)
    _check_fused_equals_composed(fused, composed, (6, 2, 10), (2, 10), seed=10)


# ---- rms norm ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("shape,k,eps", [((3, 8), 1, 1e-6), ((2, 3, 5), 2, None), ((4, 33), 1, 0.1)])
def test_rms_norm(shape, k, eps):
    ns = shape[len(shape) - k:]
    x, w = randn(*shape, seed=14), randn(*ns, seed=15)
    ref_eps = np.finfo(np.float64).eps if eps is None else eps
    check_op(lambda t, w_: rms_norm(t, ns, w_, eps), lambda a, w_: ref_rms_norm(a, w_, k, ref_eps), [x, w],
             dtypes=(np.float64,), torch_fn=(lambda t, w_: F.rms_norm(t, ns, w_, eps)) if torch else None)
    check_forward(lambda t: rms_norm(t, ns, None, 1e-6), lambda a: ref_rms_norm(a, None, k, 1e-6), [x],
                  dtypes=(np.float32,))


def test_rms_norm_default_eps_is_compute_dtype_eps():
    x = randn(2, 4, seed=16) * 1e-5
    got = rms_norm(_t(x, np.float32), 4).numpy()
    np.testing.assert_allclose(got, ref_rms_norm(x, None, 1, np.finfo(np.float32).eps), rtol=1e-5)
    if torch is not None:
        exp = F.rms_norm(torch.tensor(x.astype(np.float32)), (4,)).numpy()
        np.testing.assert_allclose(got, exp, rtol=1e-5)


# ---- batch norm -------------------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(5, 3), (4, 3, 6), (2, 3, 4, 5), (3, 2, 2, 3, 2), (3, 70)])
def test_batch_norm_training_forward_and_grads(shape):
    c = shape[1]
    x, w, b = randn(*shape, seed=20) * 2 + 1, randn(c, seed=21), randn(c, seed=22)

    def ref(a, w_, b_):
        m, v, _ = batch_stats(a)
        return ref_batch_norm(a, m, v, w_, b_)

    check_op(lambda t, w_, b_: batch_norm(t, None, None, w_, b_, training=True), ref, [x, w, b],
             torch_fn=(lambda t, w_, b_: F.batch_norm(t, None, None, w_, b_, training=True))
             if torch else None)


@pytest.mark.parametrize("shape", [(5, 3), (2, 3, 4, 5)])
def test_batch_norm_eval_uses_running_stats(shape):
    c = shape[1]
    x, w, b = randn(*shape, seed=23), randn(c, seed=24), randn(c, seed=25)
    rm, rv = randn(c, seed=26), np.abs(randn(c, seed=27)) + 0.5

    def fn(t, w_, b_):
        return batch_norm(t, _t(rm, t.dtype), _t(rv, t.dtype), w_, b_, training=False, eps=1e-3)

    check_op(fn, lambda a, w_, b_: ref_batch_norm(a, rm, rv, w_, b_, eps=1e-3), [x, w, b],
             torch_fn=(lambda t, w_, b_: F.batch_norm(t, torch.tensor(rm), torch.tensor(rv), w_, b_,
                                                      training=False, eps=1e-3)) if torch else None)


def test_batch_norm_without_affine():
    x = randn(4, 3, 5, seed=28)
    check_grad(lambda t: batch_norm(t, None, None, training=True), [x])
    check_torch(lambda t: batch_norm(t, None, None, training=True),
                (lambda t: F.batch_norm(t, None, None, training=True)) if torch else None, [x])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_batch_norm_running_stats_update(dtype):
    c, mom = 3, 0.25
    rm0, rv0 = randn(c, seed=30), np.abs(randn(c, seed=31)) + 0.5
    rm, rv = _t(rm0, dtype), _t(rv0, dtype)
    v0 = rm._version_value
    xs = [randn(4, c, 5, seed=32 + i) * (i + 1) + i for i in range(3)]
    exp_m, exp_v = rm0.copy(), rv0.copy()
    trm, trv = (torch.tensor(rm0.astype(dtype)), torch.tensor(rv0.astype(dtype))) if torch else (None, None)
    for x in xs:
        batch_norm(_t(x, dtype), rm, rv, training=True, momentum=mom)
        m, _, vu = batch_stats(x)
        exp_m = (1 - mom) * exp_m + mom * m
        exp_v = (1 - mom) * exp_v + mom * vu
        if torch is not None:
            F.batch_norm(torch.tensor(x.astype(dtype)), trm, trv, training=True, momentum=mom)
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(rm.numpy(), exp_m, **tol)
    np.testing.assert_allclose(rv.numpy(), exp_v, **tol)
    assert rm.dtype == dtype and rm._version_value > v0
    if torch is not None:
        np.testing.assert_allclose(rm.numpy(), trm.numpy(), **tol)
        np.testing.assert_allclose(rv.numpy(), trv.numpy(), **tol)
    # eval leaves them alone
    before = rm.numpy().copy()
    batch_norm(_t(xs[0], dtype), rm, rv, training=False)
    np.testing.assert_array_equal(rm.numpy(), before)


def test_fused_batch_norm_equals_composed_ops():
    def composed(x, w, b):
        d = x - x.mean((0, 2), keepdim=True)
        y = d * ng.rsqrt((d * d).mean((0, 2), keepdim=True) + 1e-5)
        return y * w.reshape(1, 3, 1) + b.reshape(1, 3, 1)
    _check_fused_equals_composed(lambda x, w, b: batch_norm(x, None, None, w, b, training=True), composed,
                                 (4, 3, 7), (3,), seed=40)


def test_batch_norm_parallel_twin_equals_serial(monkeypatch):
    x64, g64 = randn(6, 5, 40, seed=44), randn(6, 5, 40, seed=47)
    w64, b64 = randn(5, seed=45), randn(5, seed=46)

    def run():
        x, w, b = _t(x64, np.float32, True), _t(w64, np.float32, True), _t(b64, np.float32, True)
        y = batch_norm(x, None, None, w, b, training=True)
        y.backward(_t(g64, np.float32))
        return [a.numpy() for a in (y.detach(), x.grad, w.grad, b.grad)]

    monkeypatch.setattr(config, "PARALLEL_THRESHOLD", 100)
    par = run()
    monkeypatch.setattr(config, "PARALLEL_THRESHOLD", 1 << 62)
    for p, s in zip(par, run()):
        np.testing.assert_array_equal(p, s)


def test_batch_norm_errors():
    with pytest.raises(ValueError, match="Expected more than 1 value per channel when training"):
        batch_norm(_t(randn(1, 3, seed=50)), None, None, training=True)
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        batch_norm(_t(randn(1, 3, 1, 1, seed=50)), None, None, training=True)
    batch_norm(_t(randn(1, 3, 2, seed=50)), None, None, training=True)  # 2 values per channel: fine
    with pytest.raises(RuntimeError, match="running_mean should contain 3 elements not 4"):
        batch_norm(_t(randn(2, 3, seed=51)), _t(np.zeros(4)), _t(np.ones(3)), training=True)
    with pytest.raises(RuntimeError, match=r"batch_norm: expected weight of shape \(3,\)"):
        batch_norm(_t(randn(2, 3, seed=51)), None, None, _t(np.ones(2)), training=True)
    with pytest.raises(RuntimeError, match="evaluation mode"):
        batch_norm(_t(randn(2, 3, seed=51)), None, None, training=False)
    with pytest.raises(ValueError, match="eps must be positive"):
        batch_norm(_t(randn(2, 3, seed=51)), None, None, training=True, eps=0.0)


# ---- group norm / instance norm ---------------------------------------------------------------------
@pytest.mark.parametrize("shape,groups", [((2, 6, 5), 3), ((3, 4), 2), ((2, 4, 3, 3), 4), ((2, 4, 3), 1)])
def test_group_norm(shape, groups):
    c = shape[1]
    x, w, b = randn(*shape, seed=60) * 3 - 1, randn(c, seed=61), randn(c, seed=62)
    check_op(lambda t, w_, b_: group_norm(t, groups, w_, b_),
             lambda a, w_, b_: ref_group_norm(a, groups, w_, b_),
             [x, w, b], torch_fn=(lambda t, w_, b_: F.group_norm(t, groups, w_, b_)) if torch else None)
    check_op(lambda t: group_norm(t, groups, eps=1e-2), lambda a: ref_group_norm(a, groups, eps=1e-2), [x],
             noncontig=False, torch_fn=(lambda t: F.group_norm(t, groups, eps=1e-2)) if torch else None)


def test_fused_group_norm_equals_composed_ops():
    def composed(x, w, b):
        xg = x.reshape(3, 2, 12)
        d = xg - xg.mean(-1, keepdim=True)
        y = (d * ng.rsqrt((d * d).mean(-1, keepdim=True) + 1e-5)).reshape(3, 6, 4)
        return y * w.reshape(1, 6, 1) + b.reshape(1, 6, 1)
    _check_fused_equals_composed(lambda x, w, b: group_norm(x, 2, w, b), composed, (3, 6, 4), (6,), seed=63)


def test_group_norm_errors():
    with pytest.raises(RuntimeError, match="divisible by num_groups"):
        group_norm(_t(randn(2, 5, 3, seed=67)), 2)
    with pytest.raises(RuntimeError, match=r"expected weight of shape \(4,\)"):
        group_norm(_t(randn(2, 4, 3, seed=67)), 2, _t(np.ones(5)))


def test_instance_norm():
    x, w, b = randn(3, 4, 6, seed=70) * 2 + 1, randn(4, seed=71), randn(4, seed=72)

    def ref(a, w_, b_):
        m = a.mean(-1, keepdims=True)
        v = a.var(-1, keepdims=True)
        return ((a - m) / np.sqrt(v + 1e-5)) * w_[None, :, None] + b_[None, :, None]

    check_op(lambda t, w_, b_: instance_norm(t, weight=w_, bias=b_), ref, [x, w, b],
             torch_fn=(lambda t, w_, b_: F.instance_norm(t, weight=w_, bias=b_)) if torch else None)


def test_instance_norm_running_stats_like_torch():
    torch_ = pytest.importorskip("torch")
    x, rm0, rv0 = randn(3, 4, 2, 5, seed=73), randn(4, seed=74), np.abs(randn(4, seed=75)) + 0.5
    rm, rv = _t(rm0), _t(rv0)
    trm, trv = torch_.tensor(rm0), torch_.tensor(rv0)
    y = instance_norm(_t(x), rm, rv, momentum=0.3)
    ty = F.instance_norm(torch_.tensor(x), trm, trv, momentum=0.3)
    np.testing.assert_allclose(y.numpy(), ty.numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(rm.numpy(), trm.numpy(), rtol=1e-12)
    np.testing.assert_allclose(rv.numpy(), trv.numpy(), rtol=1e-12)
    ye = instance_norm(_t(x), rm, rv, use_input_stats=False)
    tye = F.instance_norm(torch_.tensor(x), trm, trv, use_input_stats=False)
    np.testing.assert_allclose(ye.numpy(), tye.numpy(), rtol=1e-10, atol=1e-12)
    with pytest.raises(ValueError, match="more than 1 spatial element"):
        instance_norm(_t(randn(2, 3, 1, seed=76)))


# ---- dtypes and layer-norm errors -------------------------------------------------------------------
@pytest.mark.parametrize("op", ["layer_norm", "rms_norm", "batch_norm", "group_norm"])
def test_float16_computed_in_float32(op):
    x64 = randn(4, 6, 3, seed=80)
    w64 = randn(3, seed=81) if op in ("layer_norm", "rms_norm") else randn(6, seed=81)
    fns = {"layer_norm": lambda t, w: layer_norm(t, 3, w),
           "rms_norm": lambda t, w: rms_norm(t, 3, w),
           "batch_norm": lambda t, w: batch_norm(t, None, None, w, training=True),
           "group_norm": lambda t, w: group_norm(t, 3, w)}
    fn = fns[op]
    x16, w16 = _t(x64, np.float16, True), _t(w64, np.float16, True)
    y = fn(x16, w16)
    assert y.dtype == np.float16
    y.sum().backward()
    assert x16.grad.dtype == np.float16 and w16.grad.dtype == np.float16
    ref = fn(_t(x64.astype(np.float16), np.float32), _t(w64.astype(np.float16), np.float32)).detach().numpy()
    np.testing.assert_allclose(y.detach().numpy().astype(np.float32), ref, rtol=2e-3, atol=2e-3)


def test_layer_norm_errors():
    x = _t(randn(2, 5, seed=82))
    with pytest.raises(RuntimeError, match=r"layer_norm: given normalized_shape=\[10\], expected input with "
                                           r"shape \[\*, 10\], but got input of size \(2, 5\)"):
        layer_norm(x, 10)
    with pytest.raises(RuntimeError, match=r"expected weight of shape \(5,\), got \(4,\)"):
        layer_norm(x, 5, _t(np.ones(4)))
    with pytest.raises(RuntimeError, match="floating-point input"):
        layer_norm(ng.tensor(np.ones((2, 5), np.int64)), 5)
    with pytest.raises(RuntimeError, match=r"rms_norm: given normalized_shape=\[2, 5, 1\]"):
        rms_norm(x, (2, 5, 1))


def test_weight_cast_to_input_dtype():
    x, w = randn(3, 4, seed=83), randn(4, seed=84)
    tw = _t(w, np.float32, True)
    y = layer_norm(_t(x), 4, tw)
    assert y.dtype == np.float64
    y.sum().backward()
    assert tw.grad.dtype == np.float32
    np.testing.assert_allclose(y.detach().numpy(), ref_layer_norm(x, w.astype(np.float32)), rtol=1e-12)


def test_empty_batch():
    y = layer_norm(_t(np.zeros((0, 4))), 4)
    assert tuple(y.shape) == (0, 4)
    assert tuple(group_norm(_t(np.zeros((0, 4, 2))), 2).shape) == (0, 4, 2)
