"""CUDA im2col / col2im (``numbagrad/kernels/cuda/conv.py``) against the CPU kernels, and the
convolution ops on ``device="cuda"`` against the CPU ops (forward and gradients).

Shapes are tiny (the simulator costs ~0.3 ms per simulated thread): a few dozen to a few
hundred ``cols`` elements. The geometries still cover stride > 1, dilation, asymmetric
padding, a tap that never lands inside the image and a ``col2im`` gather where several
taps (and none) map to one input pixel.
"""
import numpy as np
import pytest

cuda = pytest.importorskip("numba.cuda")

import numbagrad as ng  # noqa: E402
from numbagrad.kernels.cpu import conv as C  # noqa: E402
from numbagrad.kernels.cuda import conv as G  # noqa: E402
from numbagrad.ops.conv import conv1d, conv2d, conv_transpose2d  # noqa: E402
from optest import check_device, randn  # noqa: E402

TOL = {np.float32: dict(rtol=1e-5, atol=1e-6), np.float64: dict(rtol=1e-12, atol=1e-14)}

# (x shape, (kh, kw, sh, sw, ph, pw, dh, dw), (OH, OW))
GEOS = [
    ((1, 2, 4, 4), (3, 3, 1, 1, 1, 1, 1, 1), (4, 4)),
    ((2, 1, 5, 4), (2, 2, 2, 1, 0, 1, 1, 2), (2, 3)),
    ((1, 1, 3, 5), (1, 3, 1, 2, 0, 2, 1, 1), (3, 4)),   # right padding 1 < left padding 2
    ((1, 1, 4, 3), (2, 2, 3, 3, 2, 2, 1, 1), (2, 2)),   # stride > kernel: pixels no tap reads
]


def _cols_shape(xs, geo, out):
    return (xs[1] * geo[0] * geo[1], xs[0]) + out


def _run_cuda(kernel, src, dst_shape, geo):
    d_src = cuda.to_device(np.ascontiguousarray(src))
    d_dst = cuda.to_device(np.full(dst_shape, np.nan, src.dtype))
    kernel(d_src, d_dst, *geo)
    return d_dst.copy_to_host()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("xs,geo,out", GEOS, ids=[str(i) for i in range(len(GEOS))])
def test_kernels_match_cpu(xs, geo, out, dtype):
    x = randn(*xs, seed=1).astype(dtype)
    cs = _cols_shape(xs, geo, out)
    cols = np.full(cs, np.nan, dtype)
    C._im2col_cpu(x, cols, *geo)
    np.testing.assert_array_equal(_run_cuda(G._im2col_cuda, x, cs, geo), cols)
    c = randn(*cs, seed=2).astype(dtype)
    back = np.full(xs, np.nan, dtype)
    C._col2im_cpu(c, back, *geo)
    np.testing.assert_allclose(_run_cuda(G._col2im_cuda, c, xs, geo), back, **TOL[dtype])


def test_float16_kernels():
    xs, geo, out = GEOS[1]
    x16 = randn(*xs, seed=1).astype(np.float16)
    cs = _cols_shape(xs, geo, out)
    cols = np.empty(cs, np.float32)
    C._im2col_cpu(x16.astype(np.float32), cols, *geo)
    got = _run_cuda(G._im2col_cuda, x16, cs, geo)
    assert got.dtype == np.float16
    np.testing.assert_array_equal(got.astype(np.float32), cols)   # a pure copy: exact
    c16 = randn(*cs, seed=2).astype(np.float16)
    back = np.empty(xs, np.float32)
    C._col2im_cpu(c16.astype(np.float32), back, *geo)
    np.testing.assert_allclose(_run_cuda(G._col2im_cuda, c16, xs, geo).astype(np.float32), back,
                               rtol=1e-3, atol=1e-3)


# ---- the ops on the device ----------------------------------------------------------------------
def _ref_cpu(fn, **kw):
    """The CPU op in float64 as the forward reference (tests/ops checks it against loops)."""
    def ref(*arrays):
        return fn(*[ng.tensor(a) for a in arrays], **kw).numpy()
    return ref


@pytest.mark.parametrize("xs,ws,kw", [
    ((1, 2, 5, 5), (3, 2, 3, 3), dict(padding=1)),
    ((2, 2, 5, 4), (2, 1, 2, 3), dict(stride=2, dilation=(2, 1), groups=2)),
], ids=["pad1", "strided_grouped"])
def test_conv2d_on_device(xs, ws, kw):
    inputs = [randn(*xs, seed=1), randn(*ws, seed=2), randn(ws[0], seed=3)]
    check_device(lambda x, w, b: conv2d(x, w, b, **kw), _ref_cpu(conv2d, **kw), inputs,
                 dtypes=(np.float32, np.float64), grad_dtypes=(np.float64,), noncontig=True)


@pytest.mark.parametrize("xs,ws,kw", [
    ((1, 2, 3, 3), (2, 2, 3, 3), dict(stride=2, padding=1, output_padding=1)),
    ((2, 2, 2, 3), (2, 1, 2, 2), dict(groups=2, dilation=2)),
], ids=["strided", "grouped_dilated"])
def test_conv_transpose2d_on_device(xs, ws, kw):
    inputs = [randn(*xs, seed=1), randn(*ws, seed=2), randn(ws[1] * kw.get("groups", 1), seed=3)]
    check_device(lambda x, w, b: conv_transpose2d(x, w, b, **kw), _ref_cpu(conv_transpose2d, **kw), inputs,
                 dtypes=(np.float32, np.float64), grad_dtypes=(np.float64,), noncontig=True)


def test_conv1d_unbatched_no_bias_on_device():
    inputs = [randn(2, 6, seed=1), randn(2, 2, 3, seed=2)]
    check_device(lambda x, w: conv1d(x, w, padding="same"), _ref_cpu(conv1d, padding="same"), inputs,
                 dtypes=(np.float64,))
