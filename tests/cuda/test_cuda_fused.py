"""CUDA fused bias + activation kernels (``numbagrad/kernels/cuda/fused.py``) against their
CPU twins, and ``linear_act`` on device tensors against the CPU op.

Shapes are tiny (the simulator costs ~0.3 ms per simulated thread): a (3, 5) block with
P = 2 row chunks (chunk sizes 2 and 1) and a (4, 3) one with P = 1. float16 kernels are
checked against the float32 CPU kernels on the same (half-representable) values.
"""
import numpy as np
import pytest

cuda = pytest.importorskip("numba.cuda")

import numbagrad as ng  # noqa: E402
from numbagrad.kernels.cpu import fused as C  # noqa: E402
from numbagrad.kernels.cuda import fused as G  # noqa: E402
from numbagrad.ops.fused import linear_act, ACTIVATIONS  # noqa: E402
from optest import check_device, randn  # noqa: E402

IN_PLACE = ("relu", "tanh", "sigmoid")
TWO_BUF = ("gelu", "gelu_tanh", "silu")
TOL = {np.float32: dict(rtol=2e-5, atol=2e-6), np.float64: dict(rtol=1e-11, atol=1e-13)}
CASES = [((3, 5), 2), ((4, 3), 1)]


def _dev(*arrays):
    return [cuda.to_device(np.ascontiguousarray(a)) for a in arrays]


def _fwd(mod_suffix, act, y, b):
    """Run the forward kernel on copies; returns (y_after, out or None) (for silu y_after
    is sigmoid(z))."""
    name = "_bias_fwd" if act is None else f"_bias_{act}_fwd"
    y = y.copy()
    out = np.zeros_like(y) if act in TWO_BUF else None
    args = (y, b) + ((out,) if out is not None else ())
    if mod_suffix == "cpu":
        getattr(C, name + "_cpu")(*args)
        return y, out
    d = _dev(*args)
    getattr(G, name + "_cuda")(*d)
    return d[0].copy_to_host(), (d[2].copy_to_host() if out is not None else None)


def _bwd(mod_suffix, act, g, s, p):
    """``s``: the tuple of saved arrays."""
    part = np.zeros((p, g.shape[1]), g.dtype)
    if act is None:
        args = (g, part)
        name = "_bias_bwd"
    else:
        args = (g, *s, np.zeros_like(g), part)
        name = f"_bias_{act}_bwd"
    if mod_suffix == "cpu":
        getattr(C, name + "_cpu")(*args)
        return (None if act is None else args[-2]), part
    d = _dev(*args)
    getattr(G, name + "_cuda")(*d)
    return (None if act is None else d[-2].copy_to_host()), d[-1].copy_to_host()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", CASES, ids=str)
@pytest.mark.parametrize("act", ACTIVATIONS, ids=str)
def test_kernels_match_cpu(act, case, dtype):
    shape, p = case
    y = (randn(*shape, seed=1) * 2).astype(dtype)
    b = randn(shape[1], seed=2).astype(dtype)
    yc, oc = _fwd("cpu", act, y, b)
    yd, od = _fwd("cuda", act, y, b)
    np.testing.assert_allclose(yd, yc, **TOL[dtype])
    if oc is not None:
        np.testing.assert_allclose(od, oc, **TOL[dtype])
    g = randn(*shape, seed=3).astype(dtype)
    # the saved arrays: the output (in-place activations), z (gelu), (sigmoid(z), output) (silu)
    s = (yc, oc) if act == "silu" else (yc,)
    gzc, pc = _bwd("cpu", act, g, s, p)
    gzd, pd = _bwd("cuda", act, g, s, p)
    if gzc is not None:
        np.testing.assert_allclose(gzd, gzc, **TOL[dtype])
    np.testing.assert_allclose(pd, pc, **TOL[dtype])
    np.testing.assert_allclose(pd.sum(0), (g if gzc is None else gzc).sum(0), **TOL[dtype])


@pytest.mark.parametrize("act", ["relu", "gelu", "silu", "sigmoid"])
def test_float16_matches_float32_cpu(act):
    shape, p = (3, 5), 2
    y16 = (randn(*shape, seed=1) * 2).astype(np.float16)
    b16 = randn(shape[1], seed=2).astype(np.float16)
    yc, oc = _fwd("cpu", act, y16.astype(np.float32), b16.astype(np.float32))
    yd, od = _fwd("cuda", act, y16, b16)
    assert yd.dtype == np.float16
    res_c, res_d = (oc, od) if act in TWO_BUF else (yc, yd)
    np.testing.assert_allclose(res_d.astype(np.float32), res_c, rtol=2e-3, atol=2e-3)
    g16 = randn(*shape, seed=3).astype(np.float16)
    s16 = (yd, od) if act == "silu" else (yd,)
    gzc, pc = _bwd("cpu", act, g16.astype(np.float32), tuple(a.astype(np.float32) for a in s16), p)
    gzd, pd = _bwd("cuda", act, g16, s16, p)
    np.testing.assert_allclose(gzd.astype(np.float32), gzc, rtol=2e-3, atol=2e-3)
    np.testing.assert_allclose(pd.astype(np.float32), pc, rtol=4e-3, atol=4e-3)


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("act", [None, "relu", "gelu_tanh", "silu"], ids=str)
def test_linear_act_on_device(act, bias):
    x = randn(2, 2, 3, seed=4)
    w = randn(4, 3, seed=5)
    inputs = [x, w] + ([randn(4, seed=6)] if bias else [])

    def fn(x, w, *b):
        return linear_act(x, w, b[0] if b else None, act)

    check_device(fn, None, inputs, dtypes=(np.float32,), grad_dtypes=(np.float32,))


def test_linear_act_device_float64_every_activation():
    x = randn(3, 3, seed=7)
    w = randn(2, 3, seed=8)
    b = randn(2, seed=9)
    for act in ACTIVATIONS:
        check_device(lambda x, w, b: linear_act(x, w, b, act), None, [x, w, b], dtypes=(np.float64,))
    xd, wd, bd = (ng.tensor(a, device="cuda") for a in (x, w, b))
    out = linear_act(xd, wd, bd, "relu")
    assert out.device == ng.device("cuda")
