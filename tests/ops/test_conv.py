"""conv1d / conv2d / conv_transpose1d / conv_transpose2d (``numbagrad/ops/conv.py``) and the
im2col / col2im kernels (``numbagrad/kernels/cpu/conv.py``).

Forward against float64 NumPy references written as direct loops over output pixels
(convolution) and input pixels (transposed convolution: a scatter), gradients against
float64 central differences, and both against PyTorch for every option (stride, padding
incl. 'same'/'valid' and asymmetric 'same', dilation, groups, output_padding, no bias,
unbatched input).
"""
import numpy as np
import pytest

import numbagrad as ng
import numbagrad.ops.conv as conv_ops
from numbagrad.backend import config
from numbagrad.kernels.cpu import conv as K
from numbagrad.ops.conv import conv1d, conv2d, conv_transpose1d, conv_transpose2d
from optest import check_op, randn, torch

F = torch.nn.functional if torch else None
# torch warns that it copies the input for 'same' with an even kernel; that is its business
pytestmark = pytest.mark.filterwarnings("ignore:Using padding='same'")


@pytest.fixture(params=["samples", "batched"], autouse=True)
def conv_path(request, monkeypatch):
    """Every test runs on both CPU paths: the per-sample kernels (batches of at least the
    thread count) and the batched im2col + GEMM path (the CUDA backend's, and N = 1)."""
    monkeypatch.setattr(conv_ops, "PER_SAMPLE", request.param == "samples")
    return request.param


# ---- float64 references (direct loops) ---------------------------------------------------------
def _pair(v, n):
    return (v,) * n if isinstance(v, int) else tuple(v)


def _pads(padding, ks, dilation, n):
    if padding == "valid":
        return ((0, 0),) * n
    if padding == "same":
        return tuple((d * (k - 1) // 2, d * (k - 1) - d * (k - 1) // 2) for k, d in zip(ks, dilation))
    return tuple((p, p) for p in _pair(padding, n))


def _unbatched_too(ref):
    """A reference for a batch ``(N, C, H, W)`` that also takes one image ``(C, H, W)``."""
    def either(x, *args, **kw):
        return ref(x[None], *args, **kw)[0] if x.ndim == 3 else ref(x, *args, **kw)
    return either


@_unbatched_too
def ref_conv2d(x, w, b=None, stride=1, padding=0, dilation=1, groups=1):
    """Cross-correlation, one output pixel at a time (x: (N, C, H, W) or (C, H, W))."""
    n_img, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    sh, sw = _pair(stride, 2)
    dh, dw = _pair(dilation, 2)
    (pt, pb), (pl, pr) = _pads(padding, (kh, kw), (dh, dw), 2)
    xp = np.zeros((n_img, c, h + pt + pb, wd + pl + pr))
    xp[:, :, pt:pt + h, pl:pl + wd] = x
    oh_n = (xp.shape[2] - dh * (kh - 1) - 1) // sh + 1
    ow_n = (xp.shape[3] - dw * (kw - 1) - 1) // sw + 1
    og = o // groups
    y = np.zeros((n_img, o, oh_n, ow_n))
    for n in range(n_img):
        for oc in range(o):
            g = oc // og
            for oh in range(oh_n):
                for ow in range(ow_n):
                    patch = xp[n, g * cg:(g + 1) * cg, oh * sh:oh * sh + dh * (kh - 1) + 1:dh,
                               ow * sw:ow * sw + dw * (kw - 1) + 1:dw]
                    y[n, oc, oh, ow] = np.sum(patch * w[oc]) + (0.0 if b is None else b[oc])
    return y


@_unbatched_too
def ref_conv_transpose2d(x, w, b=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """Transposed convolution as a scatter: every input pixel adds ``x * w[c_in]`` into the
    output window it maps to; then the padding is cropped."""
    n_img, cin, h, wd = x.shape
    _, cout_g, kh, kw = w.shape
    sh, sw = _pair(stride, 2)
    ph, pw = _pair(padding, 2)
    oph, opw = _pair(output_padding, 2)
    dh, dw = _pair(dilation, 2)
    cin_g = cin // groups
    full = np.zeros((n_img, cout_g * groups, (h - 1) * sh + dh * (kh - 1) + 1 + oph,
                     (wd - 1) * sw + dw * (kw - 1) + 1 + opw))
    for n in range(n_img):
        for ci in range(cin):
            g = ci // cin_g
            for ih in range(h):
                for iw in range(wd):
                    full[n, g * cout_g:(g + 1) * cout_g, ih * sh:ih * sh + dh * (kh - 1) + 1:dh,
                         iw * sw:iw * sw + dw * (kw - 1) + 1:dw] += x[n, ci, ih, iw] * w[ci]
    hout = (h - 1) * sh - 2 * ph + dh * (kh - 1) + oph + 1
    wout = (wd - 1) * sw - 2 * pw + dw * (kw - 1) + opw + 1
    y = full[:, :, ph:ph + hout, pw:pw + wout]
    if b is not None:
        y = y + b[None, :, None, None]
    return y


def _as2d(fn2d):
    """A 1-D reference from the 2-D one (H = 1: stride/dilation 1, padding 0 along H)."""
    def ref(x, w, b=None, **kw):
        kw2 = {}
        for k, v in kw.items():
            if k == "groups" or isinstance(v, str):
                kw2[k] = v
            elif k in ("padding", "output_padding"):
                kw2[k] = (0, _pair(v, 1)[0])
            else:
                kw2[k] = (1, _pair(v, 1)[0])
        return fn2d(x[..., None, :], w[:, :, None, :], b, **kw2)[..., 0, :]
    return ref


ref_conv1d = _as2d(ref_conv2d)
ref_conv_transpose1d = _as2d(ref_conv_transpose2d)


def _inputs(xs, ws, bias, seed):
    arrs = [randn(*xs, seed=seed), randn(*ws, seed=seed + 1)]
    return arrs + ([randn(ws[0] if bias != "t" else ws[1], seed=seed + 2)] if bias else [])


def _tf(name):
    return getattr(F, name) if torch else None


# ---- conv2d ---------------------------------------------------------------------------------------
CONV2D = [
    ((2, 3, 6, 5), (4, 3, 3, 3), True, {}),
    ((2, 4, 7, 6), (6, 2, 3, 2), True, dict(stride=2, padding=1, groups=2)),
    ((1, 2, 6, 6), (3, 2, 2, 3), False, dict(padding=(2, 1), dilation=(2, 1), stride=(1, 2))),
    ((2, 2, 5, 5), (4, 2, 2, 2), True, dict(padding="same", dilation=2)),   # asymmetric 'same'
    ((2, 2, 5, 6), (2, 2, 4, 3), True, dict(padding="same")),
    ((2, 3, 5, 4), (3, 3, 3, 3), True, dict(padding="valid")),
    ((2, 3, 5, 5), (6, 1, 3, 3), True, dict(groups=3, padding=1, stride=(2, 1))),  # depthwise
    ((2, 4, 3, 3), (5, 4, 1, 1), False, {}),
    ((3, 5, 5), (2, 3, 3, 3), True, dict(padding=1)),                              # unbatched
    ((1, 2, 7, 7), (2, 2, 2, 2), True, dict(stride=3)),                            # stride > kernel
]


@pytest.mark.parametrize("xs,ws,bias,kw", CONV2D, ids=[str(i) for i in range(len(CONV2D))])
def test_conv2d(xs, ws, bias, kw):
    check_op(conv2d, ref_conv2d, _inputs(xs, ws, bias, 3), kwargs=kw, torch_fn=_tf("conv2d"))


CONV1D = [
    ((2, 3, 9), (4, 3, 3), True, {}),
    ((2, 4, 10), (6, 2, 4), True, dict(stride=2, padding=2, dilation=2, groups=2)),
    ((2, 2, 7), (2, 2, 4), False, dict(stride=(3,), padding=(1,))),
]


@pytest.mark.parametrize("xs,ws,bias,kw", CONV1D, ids=[str(i) for i in range(len(CONV1D))])
def test_conv1d(xs, ws, bias, kw):
    check_op(conv1d, ref_conv1d, _inputs(xs, ws, bias, 5), kwargs=kw, torch_fn=_tf("conv1d"))


@pytest.mark.parametrize("xs,ws,kw", [((3, 8), (2, 3, 3), {}), ((2, 2, 7), (2, 2, 4), dict(dilation=2))],
                         ids=["unbatched_odd", "even_dilated"])
def test_conv1d_same(xs, ws, kw):
    check_op(lambda x, w, b: conv1d(x, w, b, padding="same", **kw),
             lambda x, w, b: ref_conv1d(x, w, b, padding="same", **kw), _inputs(xs, ws, True, 7),
             torch_fn=(lambda x, w, b: F.conv1d(x, w, b, padding="same", **kw)) if torch else None)


# ---- transposed convolutions -------------------------------------------------------------------
CONVT2D = [
    ((2, 3, 4, 4), (3, 2, 3, 3), True, {}),
    ((2, 4, 3, 4), (4, 3, 3, 2), True, dict(stride=2, padding=1, output_padding=1, groups=2)),
    ((1, 2, 3, 3), (2, 2, 2, 3), False, dict(stride=(2, 3), padding=(0, 1), output_padding=(1, 2),
                                             dilation=(1, 2))),
    ((2, 2, 4, 3), (2, 3, 3, 3), True, dict(dilation=2, output_padding=1)),   # output_padding < dilation
    ((3, 3, 4), (3, 2, 3, 3), True, dict(stride=2)),                          # unbatched
    ((2, 4, 3, 3), (4, 1, 3, 3), True, dict(groups=4, padding=1)),            # depthwise
]


@pytest.mark.parametrize("xs,ws,bias,kw", CONVT2D, ids=[str(i) for i in range(len(CONVT2D))])
def test_conv_transpose2d(xs, ws, bias, kw):
    inputs = _inputs(xs, ws, "t" if bias else False, 11)
    if bias:
        inputs[2] = randn(ws[1] * kw.get("groups", 1), seed=13)
    check_op(conv_transpose2d, ref_conv_transpose2d, inputs, kwargs=kw, torch_fn=_tf("conv_transpose2d"))


CONVT1D = [
    ((2, 3, 5), (3, 2, 3), True, {}),
    ((2, 4, 5), (4, 1, 4), True, dict(stride=3, padding=1, output_padding=2, groups=4)),
    ((3, 6), (3, 2, 2), False, dict(stride=2, dilation=2, output_padding=1)),
]


@pytest.mark.parametrize("xs,ws,bias,kw", CONVT1D, ids=[str(i) for i in range(len(CONVT1D))])
def test_conv_transpose1d(xs, ws, bias, kw):
    inputs = _inputs(xs, ws, False, 17)
    if bias:
        inputs.append(randn(ws[1] * kw.get("groups", 1), seed=19))
    check_op(conv_transpose1d, ref_conv_transpose1d, inputs, kwargs=kw, torch_fn=_tf("conv_transpose1d"))


def test_transpose_is_the_adjoint_of_conv():
    # <conv2d(x, w), y> == <x, conv_transpose2d(y, w)> for the same options
    x, w, y = randn(2, 4, 7, 6, seed=1), randn(6, 2, 3, 3, seed=2), randn(2, 6, 4, 3, seed=3)
    kw = dict(stride=2, padding=1, dilation=1, groups=2)
    a = np.sum(conv2d(ng.tensor(x), ng.tensor(w), **kw).numpy() * y)
    b = np.sum(x * conv_transpose2d(ng.tensor(y), ng.tensor(w), output_padding=(0, 1), **kw).numpy())
    np.testing.assert_allclose(a, b, rtol=1e-12)


# ---- gradients only where needed ---------------------------------------------------------------
@pytest.mark.parametrize("fn", [conv2d, conv_transpose2d])
@pytest.mark.parametrize("which", [(True, False, False), (False, True, False), (False, False, True),
                                   (False, True, True)])
def test_only_needed_gradients(fn, which, monkeypatch, conv_path):
    if conv_path == "samples":
        return _only_needed_per_sample(fn, which, monkeypatch)
    x, w, b = randn(2, 4, 5, 5, seed=1), randn(4, 2, 3, 3, seed=2), randn(4 if fn is conv2d else 4, seed=3)
    kw = dict(stride=2, padding=1, groups=2)
    full = [ng.tensor(a, requires_grad=True) for a in (x, w, b)]
    g = None

    def run(ts):
        nonlocal g
        y = fn(*ts, **kw)
        if g is None:
            g = ng.tensor(randn(*y.shape, seed=4))
        y.backward(g)

    run(full)
    calls = _spy(monkeypatch, conv_ops, ("_im2col", "_col2im"))
    part = [ng.tensor(a, requires_grad=r) for a, r in zip((x, w, b), which)]
    run(part)
    _same_grads(part, full, which)
    # kernel launches: forward 1 (im2col for conv, col2im for the transpose); backward only
    # what the requested gradients need (the conv keeps its forward columns for gW)
    need_x, need_w, _ = which
    if fn is conv2d:
        assert calls.count("_col2im") == int(need_x)
        assert calls.count("_im2col") == 1
    else:
        assert calls.count("_im2col") == int(need_x or need_w)
        assert calls.count("_col2im") == 1


def _spy(monkeypatch, module, names):
    """Record the calls of ``module.<name>`` for each name, in order."""
    calls = []
    for name in names:
        orig = getattr(module, name)
        monkeypatch.setattr(module, name, lambda *a, _o=orig, _n=name: (calls.append(_n), _o(*a))[1])
    return calls


def _same_grads(part, full, which):
    for t, f, r in zip(part, full, which):
        if r:
            np.testing.assert_allclose(t.grad.numpy(), f.grad.numpy(), rtol=1e-12, atol=1e-12)
        else:
            assert t.grad is None


def _only_needed_per_sample(fn, which, monkeypatch):
    """The per-sample path launches one kernel per requested gradient, and no other."""
    from numbagrad.kernels.cpu import conv as kc
    x, w, b = randn(2, 4, 5, 5, seed=1), randn(4, 2, 3, 3, seed=2), randn(4, seed=3)
    kw = dict(stride=2, padding=1, groups=2)
    g = randn(*fn(ng.tensor(x), ng.tensor(w), **kw).shape, seed=4)
    calls = _spy(monkeypatch, kc, ("_conv_fwd_samples", "_conv_dgrad_samples", "_conv_wgrad_samples"))
    part = [ng.tensor(a, requires_grad=r) for a, r in zip((x, w, b), which)]
    fn(*part, **kw).backward(ng.tensor(g))
    ref = [ng.tensor(a, requires_grad=True) for a in (x, w, b)]
    monkeypatch.setattr(conv_ops, "PER_SAMPLE", False)
    fn(*ref, **kw).backward(ng.tensor(g))
    _same_grads(part, ref, which)
    need_x, need_w, _ = which
    # conv2d: forward = fwd kernel, input gradient = dgrad; the transpose the other way round
    first, back_x = ("_conv_fwd_samples", "_conv_dgrad_samples")[::1 if fn is conv2d else -1]
    assert calls.count(first) == 1
    assert calls.count(back_x) == int(need_x)
    assert calls.count("_conv_wgrad_samples") == int(need_w)


def test_recomputed_columns_equal_saved(monkeypatch):
    x, w = randn(2, 3, 6, 6, seed=1), randn(4, 3, 3, 3, seed=2)
    grads = []
    for cap in (conv_ops.SAVE_COLS_MAX_BYTES, 0):
        monkeypatch.setattr(conv_ops, "SAVE_COLS_MAX_BYTES", cap)
        xt, wt = ng.tensor(x, requires_grad=True), ng.tensor(w, requires_grad=True)
        conv2d(xt, wt, stride=1, padding=1).sum().backward()
        grads.append((xt.grad.numpy(), wt.grad.numpy()))
    for a, b in zip(*grads):
        np.testing.assert_array_equal(a, b)


def test_parallel_sizes_match_reference():
    # cols of 8*9 x 2*24*24 = 82944 elements: above the test suite's PARALLEL_THRESHOLD (64K)
    assert 8 * 9 * 2 * 24 * 24 >= config.PARALLEL_THRESHOLD
    x, w, b = randn(2, 8, 24, 24, seed=1), randn(4, 8, 3, 3, seed=2), randn(4, seed=3)
    f32 = [ng.tensor(a.astype(np.float32)) for a in (x, w, b)]
    y = conv2d(*f32, padding=1)
    np.testing.assert_allclose(y.numpy(), ref_conv2d(x, w, b, padding=1), rtol=1e-4, atol=1e-4)
    xt, wt = ng.tensor(x, requires_grad=True), ng.tensor(w, requires_grad=True)
    g = randn(2, 4, 24, 24, seed=4)
    conv2d(xt, wt, padding=1).backward(ng.tensor(g))
    # independent identities (stride 1): gx = conv_transpose(g, w); gW = conv over the batch axis
    np.testing.assert_allclose(xt.grad.numpy(), ref_conv_transpose2d(g, w, padding=1), rtol=1e-10, atol=1e-10)
    gw = ref_conv2d(x.transpose(1, 0, 2, 3), g.transpose(1, 0, 2, 3), padding=1).transpose(1, 0, 2, 3)
    np.testing.assert_allclose(wt.grad.numpy(), gw, rtol=1e-10, atol=1e-10)


# ---- the kernels against NumPy compositions ----------------------------------------------------------
def _np_im2col(x, kh, kw, sh, sw, pads, dh, dw, oh_n, ow_n):
    (pt, pb), (pl, pr) = pads
    xp = np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    n_img, c = x.shape[:2]
    cols = np.empty((c, kh, kw, n_img, oh_n, ow_n), x.dtype)
    for i in range(kh):
        for j in range(kw):
            win = xp[:, :, i * dh:i * dh + sh * (oh_n - 1) + 1:sh, j * dw:j * dw + sw * (ow_n - 1) + 1:sw]
            cols[:, i, j] = win.transpose(1, 0, 2, 3)
    return cols.reshape(c * kh * kw, n_img, oh_n, ow_n)


KERNEL_CASES = [
    ((2, 3, 6, 5), (3, 3, 1, 1, (1, 1), (1, 1), 1, 1)),
    ((1, 2, 7, 8), (2, 3, 2, 3, (0, 1), (2, 0), 2, 1)),
    ((2, 1, 5, 5), (4, 4, 1, 1, (2, 1), (1, 2), 1, 1)),    # asymmetric padding ('same', even k)
    ((1, 2, 4, 9), (1, 2, 1, 4, (0, 0), (3, 3), 1, 3)),    # padding wider than a stride step
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape,geo", KERNEL_CASES, ids=[str(i) for i in range(len(KERNEL_CASES))])
def test_kernels_match_numpy(shape, geo, dtype):
    kh, kw, sh, sw, (pt, pb), (pl, pr), dh, dw = geo
    x = randn(*shape, seed=1).astype(dtype)
    oh_n = (shape[2] + pt + pb - dh * (kh - 1) - 1) // sh + 1
    ow_n = (shape[3] + pl + pr - dw * (kw - 1) - 1) // sw + 1
    args = (kh, kw, sh, sw, pt, pl, dh, dw)
    cols = np.full((shape[1] * kh * kw, shape[0], oh_n, ow_n), np.nan, dtype)
    K._im2col_cpu(x, cols, *args)
    expect = _np_im2col(x, kh, kw, sh, sw, ((pt, pb), (pl, pr)), dh, dw, oh_n, ow_n)
    np.testing.assert_array_equal(cols, expect)
    # col2im: the scatter-add of every column entry to where im2col read it (np.add.at)
    c = randn(*cols.shape, seed=2).astype(dtype)
    got = np.full(shape, np.nan, dtype)
    K._col2im_cpu(c, got, *args)
    idx = np.arange(x.size, dtype=np.float64).reshape(shape)
    src = _np_im2col(idx + 1, kh, kw, sh, sw, ((pt, pb), (pl, pr)), dh, dw, oh_n, ow_n).astype(np.int64) - 1
    expect = np.zeros(x.size, np.float64)
    keep = src >= 0
    np.add.at(expect, src[keep], c[keep].astype(np.float64))
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got, expect.reshape(shape), **tol)


def test_kernel_twins_agree():
    x = randn(3, 4, 9, 10, seed=1).astype(np.float32)
    args = (3, 2, 2, 1, 1, 0, 1, 2)
    oh_n, ow_n = (9 + 2 - 2 - 1) // 2 + 1, (10 - 2 - 1) // 1 + 1
    outs = []
    for k in (K._im2col_kernel.serial, K._im2col_kernel.parallel):
        cols = np.full((4 * 6, 3, oh_n, ow_n), np.nan, np.float32)
        k(x, cols, *args)
        outs.append(cols)
    np.testing.assert_array_equal(outs[0], outs[1])
    back = []
    for k in (K._col2im_kernel.serial, K._col2im_kernel.parallel):
        xb = np.full(x.shape, np.nan, np.float32)
        k(outs[0], xb, *args)
        back.append(xb)
    np.testing.assert_array_equal(back[0], back[1])


# ---- dtypes and errors -------------------------------------------------------------------------------
def test_float16_computed_in_float32():
    x, w, b = randn(2, 3, 5, 5, seed=1), randn(4, 3, 3, 3, seed=2), randn(4, seed=3)
    h = [ng.tensor(a.astype(np.float16), requires_grad=True) for a in (x, w, b)]
    y = conv2d(*h, padding=1)
    assert y.dtype == np.float16
    ref = ref_conv2d(*(a.astype(np.float16).astype(np.float64) for a in (x, w, b)), padding=1)
    np.testing.assert_allclose(y.detach().numpy().astype(np.float64), ref, rtol=2e-3, atol=2e-2)
    y.sum().backward()
    assert all(t.grad.dtype == np.float16 for t in h)
    w16 = ng.tensor(randn(3, 2, 3, 3, seed=4).astype(np.float16))
    yt = conv_transpose2d(ng.tensor(x.astype(np.float16)), w16)
    assert yt.dtype == np.float16 and yt.shape == (2, 2, 7, 7)


def _t(*shape, dtype=np.float32):
    return ng.tensor(np.zeros(shape, dtype))


@pytest.mark.parametrize("call,exc,match", [
    (lambda: conv2d(_t(2, 4, 8, 8), _t(5, 3, 3, 3)), RuntimeError, r"conv2d.*3 channels.*got 4 channels"),
    (lambda: conv2d(_t(4, 8), _t(5, 4, 3, 3)), RuntimeError, r"conv2d.*3D \(unbatched\) or 4D"),
    (lambda: conv2d(_t(2, 4, 8, 8), _t(5, 4, 3)), RuntimeError, r"conv2d.*4D weight"),
    (lambda: conv2d(_t(2, 4, 8, 8), _t(5, 2, 3, 3), groups=2), RuntimeError, r"divisible by 2"),
    (lambda: conv2d(_t(2, 4, 8, 8), _t(6, 4, 3, 3), _t(5)), RuntimeError, r"bias.*6 elements"),
    (lambda: conv2d(_t(1, 1, 2, 2), _t(1, 1, 3, 3)), RuntimeError, r"Kernel size can't be greater"),
    (lambda: conv2d(_t(1, 1, 5, 5), _t(1, 1, 3, 3, dtype=np.float64)), RuntimeError, r"should be the same"),
    (lambda: conv2d(_t(1, 1, 5, 5), _t(1, 1, 3, 3), padding="same", stride=2), ValueError, r"strided"),
    (lambda: conv2d(_t(1, 1, 5, 5), _t(1, 1, 3, 3), padding="full"), ValueError, r"invalid padding"),
    (lambda: conv2d(_t(1, 1, 5, 5), _t(1, 1, 3, 3), stride=0), RuntimeError, r"stride"),
    (lambda: conv2d(_t(1, 1, 5, 5), _t(1, 1, 3, 3), padding=-1), RuntimeError, r"negative padding"),
    (lambda: conv2d(_t(1, 1, 5, 5, dtype=np.int64), _t(1, 1, 3, 3, dtype=np.int64)), RuntimeError,
     r"floating-point"),
    (lambda: conv1d(_t(2, 3, 8), _t(4, 2, 3)), RuntimeError, r"conv1d.*2 channels.*got 3"),
    (lambda: conv_transpose2d(_t(1, 3, 5, 5), _t(4, 2, 3, 3)), RuntimeError,
     r"transposed.*4 channels.*got 3"),
    (lambda: conv_transpose2d(_t(1, 4, 5, 5), _t(4, 2, 3, 3), stride=2, output_padding=2), RuntimeError,
     r"output padding must be smaller"),
    (lambda: conv_transpose2d(_t(1, 4, 5, 5), _t(4, 2, 3, 3), groups=3), RuntimeError, r"divisible by 3"),
    (lambda: conv_transpose1d(_t(1, 4, 5), _t(4, 2, 3), _t(3)), RuntimeError, r"bias.*2 elements"),
    (lambda: conv_transpose2d(_t(1, 1, 1, 1), _t(1, 1, 1, 1), padding=1), RuntimeError, r"too small"),
])
def test_errors(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


@pytest.mark.parametrize("fn,ws", [(conv2d, (4, 3, 3, 3)), (conv_transpose2d, (3, 4, 3, 3))])
def test_batch_chunks_and_retain_graph(fn, ws, monkeypatch):
    # a chunk budget of one sample's columns: the batch runs in 3 chunks (incl. a short
    # last one); results equal the single-chunk run, and a retained graph backwards twice
    x, w, b = randn(5, 3, 6, 6, seed=1), randn(*ws, seed=2), randn(4, seed=3)
    kw = dict(stride=2, padding=1) if fn is conv2d else dict(stride=2, padding=1, output_padding=1)
    out = []
    for budget in (conv_ops.CHUNK_BYTES, 2 * 27 * 9 * 8):
        monkeypatch.setattr(conv_ops, "CHUNK_BYTES", budget)
        ts = [ng.tensor(a, requires_grad=True) for a in (x, w, b)]
        y = fn(*ts, **kw)
        g = ng.tensor(randn(*y.shape, seed=4))
        y.backward(g, retain_graph=True)
        first = [t.grad.numpy().copy() for t in ts]
        y.backward(g)
        out.append((y.detach().numpy(), first, [t.grad.numpy() for t in ts]))
    (y0, g0, gg0), (y1, g1, gg1) = out
    np.testing.assert_allclose(y1, y0, rtol=1e-12, atol=1e-12)
    for a, b_, c in zip(g0, g1, gg1):
        np.testing.assert_allclose(b_, a, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(c, 2 * a, rtol=1e-12, atol=1e-12)
