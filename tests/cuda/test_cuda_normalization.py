"""CUDA normalisation kernels (``numbagrad/kernels/cuda/normalization.py``) against the CPU
kernels, and the normalisation ops and modules on ``device="cuda"`` against the CPU.

Shapes are tiny (the simulator costs ~0.3 ms per simulated thread) but cover rows shorter
than the block, rows longer than ``ROW_TPB`` (several elements per thread before the
shared-memory tree), several rows/channels per block (grid-stride), absent weight/bias,
RMS mode, eval-mode batch norm, and float16 against the float32 CPU kernels.
"""

import numpy as np
import pytest

cuda = pytest.importorskip("numba.cuda")

import numbagrad as ng  # noqa: E402
from numbagrad.kernels.cpu import normalization as C  # noqa: E402
from numbagrad.kernels.cuda import normalization as G  # noqa: E402
from numbagrad.kernels.cuda._launch import ROW_TPB  # noqa: E402
from numbagrad.ops.normalization import batch_norm, group_norm, layer_norm, rms_norm  # noqa: E402
from optest import _host, check_device, randn  # noqa: E402

TOL = {np.float32: dict(rtol=2e-5, atol=2e-6), np.float64: dict(rtol=1e-11, atol=1e-13)}
NAMES = ["layer_norm_fwd", "layer_norm_bwd", "batch_norm_stats", "batch_norm_fwd", "batch_norm_bwd",
         "group_norm_fwd", "group_norm_bwd"]


def _arr(shape, dtype, seed, scale=1.0, shift=0.0):
    return np.ascontiguousarray(randn(*shape, seed=seed) * scale + shift, dtype=dtype)


def _run(name, args, outs, dtype_out=None):
    """Run ``_<name>_cpu`` on host copies and ``_<name>_cuda`` on device copies of
    ``args`` + fresh ``outs`` (shapes, dtypes); return both lists of outputs."""
    cpu_outs = [np.full(s, np.nan, d) for s, d in outs]
    getattr(C, f"_{name}_cpu")(*args, *cpu_outs)
    dev_args = [cuda.to_device(a) if isinstance(a, np.ndarray) else a for a in args]
    dev_outs = [cuda.to_device(np.full(s, np.nan, d)) for s, d in outs]
    getattr(G, f"_{name}_cuda")(*dev_args, *dev_outs)
    return cpu_outs, [d.copy_to_host() for d in dev_outs]


def _close(got, exp, dtype):
    for k, (g, e) in enumerate(zip(got, exp)):
        np.testing.assert_allclose(g.astype(np.float64), e.astype(np.float64), err_msg=f"output {k}",
                                   **TOL[dtype])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("rows,n,affine,center", [(3, 5, "wb", True), (2, 2 * ROW_TPB + 3, "w", True),
                                                  (1, 1, "", True), (2, 6, "b", False), (3, 9, "w", False)])
def test_layer_norm_kernels(rows, n, affine, center, dtype):
    x = _arr((rows, n), dtype, 1, 2.0, 0.5)
    w = _arr((n,), dtype, 2) if "w" in affine else np.empty(0, dtype)
    b = _arr((n,), dtype, 3) if "b" in affine else np.empty(0, dtype)
    eps = dtype(1e-5)
    (out, mean, rstd), dev = _run("layer_norm_fwd", [x, w, b, center, eps],
                                  [((rows, n), dtype), ((rows,), dtype), ((rows,), dtype)])
    _close(dev, [out, mean, rstd], dtype)
    g = _arr((rows, n), dtype, 4)
    P = 2 if rows >= 2 else 1
    exp, got = _run("layer_norm_bwd", [g, x, mean, rstd, w, center],
                    [((rows, n), dtype), ((P, n), dtype), ((P, n), dtype)])
    _close(got, exp, dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(3, 2, 4), (4, 3, 1), (2, 2, ROW_TPB + 3)], ids=str)
def test_batch_norm_kernels(shape, dtype):
    x = _arr(shape, dtype, 5, 3.0, -1.0)
    c = shape[1]
    exp, got = _run("batch_norm_stats", [x], [((c,), dtype), ((c,), dtype)])
    _close(got, exp, dtype)
    mean, var = exp
    invstd = (1 / np.sqrt(var + 1e-5)).astype(dtype)
    for w, b in ((_arr((c,), dtype, 6), _arr((c,), dtype, 7)), (np.empty(0, dtype), np.empty(0, dtype))):
        exp, got = _run("batch_norm_fwd", [x, mean, invstd, w, b], [(shape, dtype)])
        _close(got, exp, dtype)
        g = _arr(shape, dtype, 8)
        for training in (True, False):
            exp, got = _run("batch_norm_bwd", [g, x, mean, invstd, w, training],
                            [(shape, dtype), ((c,), dtype), ((c,), dtype)])
            _close(got, exp, dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape,groups,affine", [((2, 4, 3), 2, True), ((3, 6, 1), 3, False),
                                                 ((1, 2, 5), 1, True)], ids=str)
def test_group_norm_kernels(shape, groups, affine, dtype):
    n, c = shape[:2]
    x = _arr(shape, dtype, 9, 2.0, 1.0)
    w = _arr((c,), dtype, 10) if affine else np.empty(0, dtype)
    b = _arr((c,), dtype, 11) if affine else np.empty(0, dtype)
    (out, mean, rstd), dev = _run("group_norm_fwd", [x, w, b, dtype(1e-5)],
                                  [(shape, dtype), ((n, groups), dtype), ((n, groups), dtype)])
    _close(dev, [out, mean, rstd], dtype)
    g = _arr(shape, dtype, 12)
    exp, got = _run("group_norm_bwd", [g, x, mean, rstd, w],
                    [(shape, dtype), ((n, c), dtype), ((n, c), dtype)])
    _close(got, exp, dtype)


def test_float16_layer_norm_matches_float32_cpu():
    rows, n = 3, 11
    x16, w16, b16 = (_arr(s, np.float16, k) for s, k in (((rows, n), 20), ((n,), 21), ((n,), 22)))
    out = np.empty((rows, n), np.float32)
    mean, rstd = np.empty(rows, np.float32), np.empty(rows, np.float32)
    C._layer_norm_fwd_cpu(x16.astype(np.float32), w16.astype(np.float32), b16.astype(np.float32), True,
                          np.float32(1e-5), out, mean, rstd)
    d = [cuda.to_device(a) for a in (x16, w16, b16)]
    do = cuda.to_device(np.empty((rows, n), np.float16))
    dm, dr = cuda.to_device(np.empty(rows, np.float32)), cuda.to_device(np.empty(rows, np.float32))
    G._layer_norm_fwd_cuda(d[0], d[1], d[2], True, np.float32(1e-5), do, dm, dr)
    assert do.copy_to_host().dtype == np.float16
    np.testing.assert_allclose(do.copy_to_host().astype(np.float32), out, rtol=2e-3, atol=2e-3)
    np.testing.assert_allclose(dr.copy_to_host(), rstd, rtol=1e-5)


def test_many_rows_per_block():
    """More rows than blocks: each block takes rows grid-stride."""
    x = _arr((5, 7), np.float64, 30)
    out, mean, rstd = np.empty((5, 7)), np.empty(5), np.empty(5)
    e = np.empty(0)
    C._layer_norm_fwd_cpu(x, e, e, True, 1e-5, out, mean, rstd)
    d = [cuda.to_device(a) for a in (x, e, e, np.zeros((5, 7)), np.zeros(5), np.zeros(5))]
    G._K64["layer_norm_fwd"][2, ROW_TPB](d[0], d[1], d[2], True, 1e-5, d[3], d[4], d[5])
    np.testing.assert_allclose(d[3].copy_to_host(), out, **TOL[np.float64])


# ---- ops and modules on the device ----------------------------------------------------------------
def test_layer_norm_and_rms_norm_ops_on_device():
    x, w, b = randn(3, 2, 4, seed=40), randn(4, seed=41), randn(4, seed=42)
    check_device(lambda t, w_, b_: layer_norm(t, 4, w_, b_), None, [x, w, b])
    check_device(lambda t, w_: rms_norm(t, (2, 4), w_.reshape(1, 4).expand(2, 4), 1e-6), None,
                 [x, w], dtypes=(np.float32,))


def test_batch_norm_op_on_device():
    x, w, b = randn(3, 2, 4, seed=43), randn(2, seed=44), randn(2, seed=45)
    check_device(lambda t, w_, b_: batch_norm(t, None, None, w_, b_, training=True), None, [x, w, b])
    rm, rv = randn(2, seed=46), np.abs(randn(2, seed=47)) + 0.5
    check_device(lambda t, w_, b_, m, v: batch_norm(t, m, v, w_, b_, training=False), None, [x, w, b, rm, rv],
                 dtypes=(np.float32,))


def test_group_norm_op_on_device():
    x, w, b = randn(2, 4, 3, seed=48), randn(4, seed=49), randn(4, seed=50)
    check_device(lambda t, w_, b_: group_norm(t, 2, w_, b_), None, [x, w, b], dtypes=(np.float32,))


def test_batch_norm_module_running_stats_on_device():
    from numbagrad.nn.normalization import BatchNorm1d
    xs = [randn(3, 2, 3, seed=60 + k) + k for k in range(2)]
    mods = [BatchNorm1d(2, momentum=None), BatchNorm1d(2, momentum=None).to("cuda")]
    for m in mods:
        for x in xs:
            m(ng.tensor(x.astype(np.float32), device=m.running_mean.device))
    for name in ("running_mean", "running_var", "num_batches_tracked"):
        np.testing.assert_allclose(_host(getattr(mods[1], name)), _host(getattr(mods[0], name)), rtol=1e-5)
    assert mods[1].running_mean.device == ng.device("cuda")
    mods[0].eval()
    mods[1].eval()
    x = randn(2, 2, 3, seed=70).astype(np.float32)
    np.testing.assert_allclose(_host(mods[1](ng.tensor(x, device="cuda"))), _host(mods[0](ng.tensor(x))),
                               rtol=1e-5, atol=1e-6)
