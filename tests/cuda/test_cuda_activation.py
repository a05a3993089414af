"""CUDA activation kernels (``numbagrad/kernels/cuda/activation.py``) against their CPU twins.

Every kernel the ops launch is run on the same inputs on both targets: float32/float64
against the CPU kernel of the same dtype, float16 against the float32 CPU kernel (the
CUDA half kernels compute in float32 and round once at the store). Inputs include the
kinks themselves (the kink conventions are the shared scalar helpers', so both targets
must agree exactly there), +-30 and +-1e4 (the exp(-|x|) formulations must stay finite)
and a NaN.
"""
import inspect

import numpy as np
import pytest

cuda = pytest.importorskip("numba.cuda")

from numbagrad.kernels.cpu import activation as C  # noqa: E402
from numbagrad.kernels.cuda import activation as G  # noqa: E402
from numbagrad.ops import activation as ops_activation  # noqa: E402
from optest import randn  # noqa: E402

_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946

# (id, kernel stem, params, saves (as the op's Function), kinks, input scale)
OPS = [
    ("relu", "relu", (), "y", [0.0], 2.0),
    ("leaky_relu", "leaky_relu", (0.2,), "x", [0.0], 2.0),
    ("hardtanh", "hardtanh", (-0.5, 2.0), "x", [-0.5, 2.0], 2.0),
    ("relu6", "hardtanh", (0.0, 6.0), "x", [0.0, 6.0], 4.0),
    ("hardsigmoid", "hardsigmoid", (), "x", [-3.0, 3.0], 4.0),
    ("hardswish", "hardswish", (), "x", [-3.0, 3.0], 4.0),
    ("softsign", "softsign", (), "x", [0.0], 2.0),
    ("sigmoid", "sigmoid", (), "y", [], 3.0),
    ("tanh", "tanh", (), "y", [], 2.0),
    ("silu", "silu", (), "x", [], 3.0),
    ("softplus", "softplus", (1.0, 20.0), "x", [], 3.0),
    ("softplus-beta2-thr1", "softplus", (2.0, 1.0), "x", [0.5], 2.0),
    ("mish", "mish", (), "x", [], 3.0),
    ("elu", "elu", (1.0, 1.0, 1.0), "xy", [0.0], 2.0),
    ("selu", "elu", (_SELU_ALPHA, _SELU_SCALE, 1.0), "xy", [0.0], 2.0),
    ("celu-2", "elu", (2.0, 1.0, 0.5), "xy", [0.0], 2.0),
    ("gelu", "gelu", (), "x", [], 2.0),
    ("gelu_tanh", "gelu_tanh", (), "x", [], 2.0),
]
IDS = [o[0] for o in OPS]

TOL = {np.float32: dict(rtol=1e-5, atol=1e-6), np.float64: dict(rtol=1e-12, atol=1e-14)}
# A half result is the float32 result rounded once: within half an ulp (2**-11 relative).
TOL16 = dict(rtol=1e-3, atol=1e-5)
SPECIAL = [-1e4, -30.0, 30.0, 1e4, np.nan]


def _x(kinks, scale, dtype, n=45, seed=0):
    x = np.concatenate([randn(n, seed=seed) * scale, kinks, SPECIAL])
    return np.ascontiguousarray(x, dtype=dtype)


def _g(n, dtype, seed=1):
    return np.ascontiguousarray(randn(n, seed=seed), dtype=dtype)


def _cuda_call(kernel, *args):
    """Run a CUDA launcher on host arrays (copied to the device); return the array
    arguments back on the host, in order (scalars are passed through)."""
    d = [cuda.to_device(a) if isinstance(a, np.ndarray) else a for a in args]
    kernel(*d)
    return [a.copy_to_host() for a in d if not np.isscalar(a)]


def _fwd(mod, stem, suffix, x, p):
    k = getattr(mod, f"_{stem}_fwd_{suffix}")
    if suffix == "cpu":
        out = np.empty_like(x)
        k(x, *p, out)
        return out
    return _cuda_call(k, x, *p, np.empty_like(x))[-1]


def _bwd(mod, stem, suffix, g, saved, p):
    k = getattr(mod, f"_{stem}_bwd_{suffix}")
    if suffix == "cpu":
        out = np.empty_like(g)
        k(g, *saved, *p, out)
        return out
    return _cuda_call(k, g, *saved, *p, np.empty_like(g))[-1]


def _saved(saves, x, y):
    return [x if c == "x" else y for c in saves]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name,stem,params,saves,kinks,scale", OPS, ids=IDS)
def test_fwd_bwd_match_cpu(name, stem, params, saves, kinks, scale, dtype):
    x = _x(kinks, scale, dtype)
    p = tuple(dtype(v) for v in params)
    y = _fwd(C, stem, "cpu", x, p)
    np.testing.assert_allclose(_fwd(G, stem, "cuda", x, p), y, **TOL[dtype], err_msg=f"{name} fwd")
    g = _g(x.size, dtype)
    saved = _saved(saves, x, y)  # both backwards read the CPU forward's y
    np.testing.assert_allclose(_bwd(G, stem, "cuda", g, saved, p), _bwd(C, stem, "cpu", g, saved, p),
                               **TOL[dtype], err_msg=f"{name} bwd")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_logsigmoid_matches_cpu(dtype):
    x = _x([], 3.0, dtype)
    out, buf = np.empty_like(x), np.empty_like(x)
    C._logsigmoid_fwd_cpu(x, out, buf)
    _, out_d, buf_d = _cuda_call(G._logsigmoid_fwd_cuda, x, np.empty_like(x), np.empty_like(x))
    np.testing.assert_allclose(out_d, out, **TOL[dtype])
    np.testing.assert_allclose(buf_d, buf, **TOL[dtype])
    assert np.isfinite(out[:-1]).all() and np.isfinite(out_d[:-1]).all()
    g = _g(x.size, dtype)
    gx = np.empty_like(x)
    C._logsigmoid_bwd_cpu(g, x, buf, gx)
    gx_d = _cuda_call(G._logsigmoid_bwd_cuda, g, x, buf, np.empty_like(x))[-1]
    np.testing.assert_allclose(gx_d, gx, **TOL[dtype])


HALF_OPS = [o for o in OPS if o[0] in ("relu", "leaky_relu", "elu", "gelu", "silu", "sigmoid", "tanh")]


@pytest.mark.parametrize("name,stem,params,saves,kinks,scale", HALF_OPS, ids=[o[0] for o in HALF_OPS])
def test_float16_matches_float32_cpu(name, stem, params, saves, kinks, scale):
    x16 = _x(kinks, scale, np.float16)
    x32 = x16.astype(np.float32)
    p16 = tuple(np.float16(v) for v in params)
    p32 = tuple(np.float32(v) for v in p16)
    y32 = _fwd(C, stem, "cpu", x32, p32)
    y16 = _fwd(G, stem, "cuda", x16, p16)
    assert y16.dtype == np.float16
    np.testing.assert_allclose(y16.astype(np.float32), y32, **TOL16, err_msg=f"{name} fwd")
    g16 = _g(x16.size, np.float16)
    ys16 = y32.astype(np.float16)  # what a half forward saved
    saved16 = _saved(saves, x16, ys16)
    ref = _bwd(C, stem, "cpu", g16.astype(np.float32), [s.astype(np.float32) for s in saved16], p32)
    np.testing.assert_allclose(_bwd(G, stem, "cuda", g16, saved16, p16).astype(np.float32), ref,
                               **TOL16, err_msg=f"{name} bwd")


def test_logsigmoid_float16():
    x16 = _x([], 3.0, np.float16)
    out32, buf32 = np.empty(x16.size, np.float32), np.empty(x16.size, np.float32)
    C._logsigmoid_fwd_cpu(x16.astype(np.float32), out32, buf32)
    _, out16, buf16 = _cuda_call(G._logsigmoid_fwd_cuda, x16, np.empty_like(x16), np.empty_like(x16))
    np.testing.assert_allclose(out16.astype(np.float32), out32, **TOL16)
    np.testing.assert_allclose(buf16.astype(np.float32), buf32, **TOL16)


def test_grid_stride_covers_any_launch():
    """A kernel launched with far fewer threads than elements still writes every one."""
    x = _x([], 3.0, np.float32, n=60)
    ref = _fwd(C, "silu", "cpu", x, ())
    for grid, block in ((1, 1), (2, 4), (3, 32)):
        xd, od = cuda.to_device(x), cuda.to_device(np.full_like(x, 7.0))
        G._silu_fwd_kernel[grid, block](xd, od)
        np.testing.assert_allclose(od.copy_to_host(), ref, **TOL[np.float32])


def test_empty_input_is_a_no_op():
    x = np.empty(0, np.float32)
    assert _fwd(G, "relu", "cuda", x, ()).size == 0


def _params(fn):
    fn = getattr(fn, "serial", fn)  # a CPU FlatKernel: its serial dispatcher
    fn = getattr(fn, "py_func", fn)
    return list(inspect.signature(fn).parameters)


def _op_stems():
    """The kernel stems the ops launch (``_Activation`` subclasses, plus logsigmoid)."""
    stems = {cls.kernel for cls in vars(ops_activation).values()
             if isinstance(cls, type) and issubclass(cls, ops_activation._Activation) and cls.kernel}
    return stems | {"logsigmoid"}


def test_every_op_kernel_has_a_cuda_twin_with_the_cpu_signature():
    stems = _op_stems()
    assert stems - {"logsigmoid"} <= {o[1] for o in OPS}, "an op kernel is missing from OPS"
    for stem in sorted(stems):
        for kind in ("fwd", "bwd"):
            cpu = getattr(C, f"_{stem}_{kind}_cpu")
            gpu = getattr(G, f"_{stem}_{kind}_cuda", None)
            assert gpu is not None, f"_{stem}_{kind}_cuda missing"
            assert _params(gpu) == _params(cpu), stem
