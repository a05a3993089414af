"""Pooling ops (``numbagrad/ops/pooling.py``): forward against float64 NumPy reference loops,
gradients against central differences, and outputs / indices / gradients against PyTorch
for every option (stride, padding, dilation, ceil_mode edge cases, count_include_pad,
divisor_override, adaptive sizes that do not divide, unbatched inputs).

Max-pool inputs are permutations (no ties, gaps of 1/7 >> the difference step), so the
finite-difference check is away from the kinks; ties are tested separately against
torch (first maximum wins, and gets the gradient).
"""
import math
from fractions import Fraction

import numpy as np
import pytest

import numbagrad as ng
from numbagrad.ops import pooling as P
from optest import check_op, check_torch, parallel_and_serial, randn, torch

F = torch.nn.functional if torch else None


def distinct(*shape, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.permutation(math.prod(shape)).reshape(shape) - math.prod(shape) / 2) / 7.0


def _tf(name, *args, **kwargs):
    return (lambda t: getattr(F, name)(t, *args, **kwargs)) if torch else None


def _pair(v, n):
    return tuple(v) * (n if len(tuple(v)) == 1 else 1) if isinstance(v, (tuple, list)) else (v,) * n


# ---- float64 NumPy references (independent of the kernels: padded arrays, Fractions) ---------------
def _ref_out_len(n, k, s, p, d, ceil_mode):
    span = Fraction(n + 2 * p - (d * (k - 1) + 1), s)
    o = (math.ceil(span) if ceil_mode else math.floor(span)) + 1
    if ceil_mode and (o - 1) * s >= n + p:  # the last window must start inside input + left pad
        o -= 1
    return o


def ref_max_pool(x, nsp, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                 return_indices=False):
    k, p, d = _pair(kernel_size, nsp), _pair(padding, nsp), _pair(dilation, nsp)
    s = k if stride is None else _pair(stride, nsp)
    sp = x.shape[-nsp:]
    o = [_ref_out_len(n, *a, ceil_mode) for n, *a in zip(sp, k, s, p, d)]
    planes = x.reshape((-1,) + sp)
    # right padding long enough for every (ceil_mode) window
    big = [pi + oi * si + di * ki for pi, oi, si, di, ki in zip(p, o, s, d, k)]
    xp = np.pad(planes, [(0, 0)] + [(pi, bi) for pi, bi in zip(p, big)], constant_values=-np.inf)
    out = np.empty((planes.shape[0],) + tuple(o))
    idx = np.empty(out.shape, np.int64)
    for q in range(planes.shape[0]):
        for pos in np.ndindex(*o):
            taps = [range(oi * si, oi * si + di * ki, di) for oi, si, di, ki in zip(pos, s, d, k)]
            best, arg = -np.inf, None
            for tap in np.ndindex(*[len(t) for t in taps]):
                c = tuple(t[j] for t, j in zip(taps, tap))
                v = xp[(q,) + c]
                if v > best:
                    best, arg = v, tuple(ci - pi for ci, pi in zip(c, p))
            out[(q,) + pos] = best
            idx[(q,) + pos] = arg[-1] + (arg[0] * sp[1] if nsp == 2 else 0)
    shape = x.shape[:-nsp] + tuple(o)
    return (out.reshape(shape), idx.reshape(shape)) if return_indices else out.reshape(shape)


def ref_avg_pool(x, nsp, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
                 divisor_override=None):
    k, p = _pair(kernel_size, nsp), _pair(padding, nsp)
    s = k if stride is None else _pair(stride, nsp)
    sp = x.shape[-nsp:]
    o = [_ref_out_len(n, ki, si, pi, 1, ceil_mode) for n, ki, si, pi in zip(sp, k, s, p)]
    planes = x.reshape((-1,) + sp)
    out = np.empty((planes.shape[0],) + tuple(o))
    for pos in np.ndindex(*o):
        # window in unpadded coordinates, cut at the end of the right padding
        lo = [oi * si - pi for oi, si, pi in zip(pos, s, p)]
        hi = [min(l_ + ki, n + pi) for l_, ki, n, pi in zip(lo, k, sp, p)]
        inside = tuple(slice(max(l_, 0), min(h, n)) for l_, h, n in zip(lo, hi, sp))
        block = planes[(slice(None),) + inside]
        if divisor_override:
            div = divisor_override
        elif count_include_pad:
            div = math.prod(h - l_ for l_, h in zip(lo, hi))
        else:
            div = math.prod(block.shape[1:])
        out[(slice(None),) + pos] = block.reshape(block.shape[0], -1).sum(1) / div if block.size else 0.0
    return out.reshape(x.shape[:-nsp] + tuple(o))


def _adaptive_size(x, nsp, output_size):
    o = _pair(output_size, nsp)
    return tuple(n if v is None else v for n, v in zip(x.shape[-nsp:], o))


def ref_adaptive(x, nsp, output_size, op="avg", return_indices=False):
    sp = x.shape[-nsp:]
    o = _adaptive_size(x, nsp, output_size)
    planes = x.reshape((-1,) + sp)
    out = np.empty((planes.shape[0],) + o)
    idx = np.empty(out.shape, np.int64)
    for pos in np.ndindex(*o):
        win = tuple(slice(math.floor(Fraction(i * n, m)), math.ceil(Fraction((i + 1) * n, m)))
                    for i, n, m in zip(pos, sp, o))
        block = planes[(slice(None),) + win].reshape(planes.shape[0], -1)
        if op == "avg":
            out[(slice(None),) + pos] = block.mean(1)
        else:
            a = block.argmax(1)  # first maximum
            out[(slice(None),) + pos] = block[np.arange(len(a)), a]
            width = win[-1].stop - win[-1].start
            r, c = a // width, a % width
            idx[(slice(None),) + pos] = (c + win[-1].start) + ((r + win[0].start) * sp[1] if nsp == 2 else 0)
    shape = x.shape[:-nsp] + o
    return (out.reshape(shape), idx.reshape(shape)) if return_indices else out.reshape(shape)


# ---- max pool ----------------------------------------------------------------------------------------
MAX2D = [
    dict(kernel_size=2),
    dict(kernel_size=3, stride=2, padding=1),
    dict(kernel_size=(2, 3), stride=(1, 2), padding=(1, 0)),
    dict(kernel_size=3, stride=2, padding=1, ceil_mode=True),
    dict(kernel_size=2, stride=2, ceil_mode=True),                       # odd sizes: extra window
    dict(kernel_size=2, stride=1, padding=1, dilation=2),
    dict(kernel_size=(3, 2), stride=(2, 3), padding=(1, 1), dilation=(2, 1), ceil_mode=True),
    dict(kernel_size=3, stride=3, padding=1, ceil_mode=True),            # last ceil window would start in pad
]


@pytest.mark.parametrize("kw", MAX2D, ids=lambda kw: ",".join(f"{k}={v}" for k, v in kw.items()))
def test_max_pool2d(kw):
    x = distinct(2, 2, 7, 6)
    kw = dict(kw, return_indices=True)
    check_op(lambda t: P.max_pool2d(t, **kw), lambda a: ref_max_pool(a, 2, **kw), [x],
             torch_fn=_tf("max_pool2d", **kw))


@pytest.mark.parametrize("kw", [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1, ceil_mode=True),
                                dict(kernel_size=2, stride=1, padding=1, dilation=3)], ids=str)
def test_max_pool1d(kw):
    x = distinct(2, 3, 9, seed=1)
    kw = dict(kw, return_indices=True)
    check_op(lambda t: P.max_pool1d(t, **kw), lambda a: ref_max_pool(a, 1, **kw), [x],
             torch_fn=_tf("max_pool1d", **kw))


def test_unbatched_inputs():
    x3 = distinct(3, 5, 4, seed=2)
    check_op(lambda t: P.max_pool2d(t, 2, 1, return_indices=True),
             lambda a: ref_max_pool(a, 2, 2, 1, return_indices=True), [x3],
             torch_fn=_tf("max_pool2d", 2, 1, return_indices=True), noncontig=False)
    x2 = distinct(3, 8, seed=3)
    check_op(lambda t: P.avg_pool1d(t, 3, 2, 1), lambda a: ref_avg_pool(a, 1, 3, 2, 1), [x2],
             torch_fn=_tf("avg_pool1d", 3, 2, 1), noncontig=False)
    check_op(lambda t: P.adaptive_max_pool2d(t, 3, True), lambda a: ref_adaptive(a, 2, 3, "max", True),
             [x3], torch_fn=_tf("adaptive_max_pool2d", 3, True), noncontig=False)


@pytest.mark.parametrize("name,nsp,kw", [("max_pool2d", 2, dict(kernel_size=3, stride=1, padding=1)),
                                         ("max_pool2d", 2, dict(kernel_size=2)),  # the unrolled 2x2 loop
                                         ("max_pool2d", 2, dict(kernel_size=2, stride=1)),
                                         ("max_pool1d", 1, dict(kernel_size=3, stride=1, padding=1))])
def test_ties_pick_the_first_max_like_torch(name, nsp, kw):
    rng = np.random.default_rng(4)
    shape = (2, 3, 6, 6)[-(nsp + 2):]
    x = rng.integers(0, 3, size=shape).astype(np.float64)  # many ties
    kw = dict(kw, return_indices=True)
    y, i = getattr(P, name)(ng.tensor(x), **kw)
    ry, ri = ref_max_pool(x, nsp, **kw)
    np.testing.assert_array_equal(i.numpy(), ri)
    np.testing.assert_array_equal(y.numpy(), ry)
    check_torch(lambda t: getattr(P, name)(t, **kw), _tf(name, **kw), [x], rtol=0, atol=0)


def test_max_pool_nan_propagates_like_torch():
    x = distinct(1, 1, 4, 4)
    x[0, 0, 1, 2] = np.nan
    y, i = P.max_pool2d(ng.tensor(x), 2, return_indices=True)
    assert np.isnan(y.numpy()[0, 0, 0, 1]) and i.numpy()[0, 0, 0, 1] == 6
    if torch is not None:
        ty, ti = F.max_pool2d(torch.tensor(x), 2, return_indices=True)
        np.testing.assert_array_equal(i.numpy(), ti.numpy())
        np.testing.assert_array_equal(y.numpy(), ty.numpy())


def test_all_padding_window_like_torch():
    # dilation 2 and padding 1 on a 1-row input: the only output row's taps are -1 and 1,
    # both outside the input -> -inf, as in torch (no gradient reaches the input)
    x = distinct(1, 1, 1, 4)
    kw = dict(kernel_size=2, stride=1, padding=1, dilation=2)
    y = P.max_pool2d(ng.tensor(x, requires_grad=True), **kw)
    assert np.all(np.isneginf(y.detach().numpy()[0, 0, 0]))
    if torch is not None:
        np.testing.assert_array_equal(y.detach().numpy(), F.max_pool2d(torch.tensor(x), **kw).numpy())
        # all-padding columns of a 1-column input: the same values and indices as torch (index
        # ih0 * W + iw0: the next row's element, or one past the plane) but no gradient, where
        # torch's backward adds it at those indices (out of bounds for the last: not run here)
        x = np.arange(3.0).reshape(1, 1, 3, 1)
        kw = dict(kernel_size=(1, 2), stride=1, padding=(0, 1), dilation=(1, 2), return_indices=True)
        check_torch(lambda t: P.max_pool2d(t, **kw), _tf("max_pool2d", **kw), [x], grad=False)
        t = ng.tensor(x, requires_grad=True)
        P.max_pool2d(t, **kw)[0].sum().backward()
        np.testing.assert_array_equal(t.grad.numpy(), 0.0)


# ---- average pool ------------------------------------------------------------------------------------
AVG2D = [
    dict(kernel_size=2),
    dict(kernel_size=3, stride=2, padding=1),
    dict(kernel_size=3, stride=2, padding=1, count_include_pad=False),
    dict(kernel_size=3, stride=2, padding=1, ceil_mode=True),            # ceil window cut at the padding
    dict(kernel_size=3, stride=2, padding=1, ceil_mode=True, count_include_pad=False),
    dict(kernel_size=(2, 3), stride=(1, 2), padding=(1, 1), divisor_override=4),
    dict(kernel_size=(3, 2), stride=(3, 1), padding=(0, 1), ceil_mode=True, divisor_override=3),
]


@pytest.mark.parametrize("kw", AVG2D, ids=lambda kw: ",".join(f"{k}={v}" for k, v in kw.items()))
def test_avg_pool2d(kw):
    x = randn(2, 2, 7, 6, seed=5)
    check_op(lambda t: P.avg_pool2d(t, **kw), lambda a: ref_avg_pool(a, 2, **kw), [x],
             torch_fn=_tf("avg_pool2d", **kw))


@pytest.mark.parametrize("kw", [dict(kernel_size=3), dict(kernel_size=4, stride=3, padding=2, ceil_mode=True),
                                dict(kernel_size=3, stride=2, padding=1, count_include_pad=False)], ids=str)
def test_avg_pool1d(kw):
    x = randn(2, 3, 10, seed=6)
    check_op(lambda t: P.avg_pool1d(t, **kw), lambda a: ref_avg_pool(a, 1, **kw), [x],
             torch_fn=_tf("avg_pool1d", **kw))


# ---- adaptive ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("osz", [(3, 4), 1, (5, 2), (None, 4), (9, 7)], ids=str)
def test_adaptive_avg_pool2d(osz):
    x = randn(2, 2, 7, 5, seed=7)
    check_op(lambda t: P.adaptive_avg_pool2d(t, osz), lambda a: ref_adaptive(a, 2, osz), [x],
             torch_fn=_tf("adaptive_avg_pool2d", osz))


@pytest.mark.parametrize("osz", [(3, 4), (5, None), (9, 7)], ids=str)
def test_adaptive_max_pool2d(osz):
    x = distinct(2, 2, 7, 5, seed=8)
    check_op(lambda t: P.adaptive_max_pool2d(t, osz, return_indices=True),
             lambda a: ref_adaptive(a, 2, osz, "max", True), [x],
             torch_fn=_tf("adaptive_max_pool2d", osz, return_indices=True))


@pytest.mark.parametrize("osz", [3, 4, 10])
def test_adaptive_1d(osz):
    x = distinct(2, 2, 7, seed=9)
    check_op(lambda t: P.adaptive_avg_pool1d(t, osz), lambda a: ref_adaptive(a, 1, osz), [x],
             torch_fn=_tf("adaptive_avg_pool1d", osz))
    check_op(lambda t: P.adaptive_max_pool1d(t, osz, True), lambda a: ref_adaptive(a, 1, osz, "max", True),
             [x], torch_fn=_tf("adaptive_max_pool1d", osz, True))


def test_adaptive_output_zero_and_empty_batch():
    y = P.adaptive_avg_pool2d(ng.tensor(randn(1, 2, 3, 3, seed=10)), 0)
    assert tuple(y.shape) == (1, 2, 0, 0)
    x = ng.tensor(np.zeros((0, 2, 4, 4)), requires_grad=True)
    y = P.max_pool2d(x, 2)
    assert tuple(y.shape) == (0, 2, 2, 2)
    y.sum().backward()
    assert tuple(x.grad.shape) == (0, 2, 4, 4)


# ---- lp pool (composed from avg_pool, as in torch) ---------------------------------------------------
@pytest.mark.parametrize("name,shape,args", [("lp_pool2d", (1, 2, 6, 5), (2.0, 3, 2)),
                                             ("lp_pool2d", (1, 2, 6, 5), (3, (2, 3), None, True)),
                                             ("lp_pool1d", (2, 2, 7), (2.0, 2))])
def test_lp_pool(name, shape, args):
    x = np.abs(randn(*shape, seed=11)) + 0.2  # positive: no sign kink
    nsp = 2 if name.endswith("2d") else 1
    ceil = bool(args[3:4] and args[3])

    def ref(a):
        s = ref_avg_pool(a ** args[0], nsp, args[1], *args[2:3], ceil_mode=ceil)
        return (s * math.prod(_pair(args[1], nsp))) ** (1 / args[0])

    check_op(lambda t: getattr(P, name)(t, *args), ref, [x], torch_fn=_tf(name, *args), noncontig=False)


# ---- dtypes, parallel twin, errors -------------------------------------------------------------------
def test_float16_computed_in_float32():
    x = distinct(1, 2, 4, 6)
    xh = ng.tensor(x.astype(np.float16), requires_grad=True)
    y, i = P.max_pool2d(xh, 2, return_indices=True)
    assert y.dtype == ng.float16 and i.dtype == ng.int64
    np.testing.assert_array_equal(y.detach().numpy(), ref_max_pool(x.astype(np.float16), 2, 2))
    a = P.avg_pool2d(xh, 2)
    assert a.dtype == ng.float16
    ref = ref_avg_pool(x.astype(np.float16).astype(np.float64), 2, 2)
    np.testing.assert_allclose(a.detach().numpy().astype(np.float64), ref, rtol=1e-3, atol=1e-3)
    (y.sum() + a.sum()).backward()
    assert xh.grad.dtype == ng.float16


def test_integer_input_raises():
    msg = r"max_pool2d: expected a floating input, got \(1, 1, 2, 2\) int64"
    with pytest.raises(NotImplementedError, match=msg):
        P.max_pool2d(ng.tensor(np.zeros((1, 1, 2, 2), np.int64)), 2)


@pytest.mark.parametrize("name,kw", [("max_pool2d", dict(kernel_size=3, stride=2, padding=1)),
                                     ("max_pool2d", dict(kernel_size=2)),
                                     ("avg_pool2d", dict(kernel_size=3, stride=2, padding=1)),
                                     ("adaptive_avg_pool2d", dict(output_size=(5, 7))),
                                     ("adaptive_max_pool2d", dict(output_size=(5, 7)))])
def test_parallel_path_equals_serial(name, kw, monkeypatch):
    x64 = distinct(64, 16, 20, 20, seed=12)  # 409,600 elements: above the test threshold (64K)
    fn = getattr(P, name)
    (y_par, g_par), (y_ser, g_ser) = parallel_and_serial(lambda x: fn(x, **kw), x64, 13, monkeypatch)
    np.testing.assert_array_equal(y_par, y_ser)
    np.testing.assert_array_equal(g_par, g_ser)


@pytest.mark.parametrize("call,exc,match", [
    (lambda x: P.max_pool2d(x, 3, padding=2), RuntimeError, "pad should be at most half of kernel size"),
    (lambda x: P.avg_pool2d(x, 3, padding=2), RuntimeError, "pad should be at most half of kernel size"),
    (lambda x: P.max_pool1d(x[0], 2, padding=2), RuntimeError, "max_pool1d: .*pad should be at most half"),
    (lambda x: P.max_pool2d(x, 3, padding=2, dilation=2), RuntimeError, "pad should be at most half"),
    (lambda x: P.max_pool2d(x, 7), RuntimeError,
     r"Calculated output size: \(0, 0\). Output size is too small"),
    (lambda x: P.avg_pool2d(x, (2, 6)), RuntimeError, "Output size is too small"),
    (lambda x: P.max_pool2d(x, 0), RuntimeError, "kernel size should be greater than zero"),
    (lambda x: P.max_pool2d(x, 2, stride=0), RuntimeError, "stride should be greater than zero"),
    (lambda x: P.max_pool2d(x, 2, dilation=0), RuntimeError, "dilation should be greater than zero"),
    (lambda x: P.max_pool2d(x, 2, padding=-1), RuntimeError, "pad must be non-negative"),
    (lambda x: P.max_pool2d(x, (2, 3, 4)), RuntimeError,
     "kernel_size must either be a single int, or a tuple of 2"),
    (lambda x: P.max_pool2d(x, 2.0), TypeError, "kernel_size"),
    (lambda x: P.avg_pool2d(x, 2, divisor_override=0), RuntimeError, "divisor must be not zero"),
    (lambda x: P.max_pool2d(x[0, 0], 2), RuntimeError, r"expected a 3D or 4D .* got \(5, 5\) float32"),
    (lambda x: P.max_pool1d(x, 2), RuntimeError, r"expected a 2D or 3D .* got \(2, 3, 5, 5\)"),
    (lambda x: P.adaptive_avg_pool2d(x, (2, 3, 4)), RuntimeError, "output_size must be"),
    (lambda x: P.adaptive_max_pool2d(x, -1), RuntimeError, "non-negative"),
    (lambda x: P.adaptive_avg_pool2d(x[:, :, :0], 2), RuntimeError, r"got \(2, 3, 0, 5\)"),
])
def test_errors(call, exc, match):
    x = ng.tensor(np.zeros((2, 3, 5, 5), np.float32))
    with pytest.raises(exc, match=match):
        call(x)


@pytest.mark.skipif(torch is None, reason="needs torch")
@pytest.mark.parametrize("call", [
    lambda m, x: m.max_pool2d(x, 3, padding=2), lambda m, x: m.avg_pool2d(x, 3, padding=2),
    lambda m, x: m.max_pool2d(x, 3, padding=2, dilation=2), lambda m, x: m.max_pool1d(x[0], 2, padding=2),
    lambda m, x: m.max_pool2d(x, 7), lambda m, x: m.avg_pool2d(x, 2, divisor_override=0),
    lambda m, x: m.max_pool2d(x, 2, dilation=0), lambda m, x: m.max_pool2d(x, 2, padding=-1),
    lambda m, x: m.max_pool2d(x[0, 0], 2), lambda m, x: m.adaptive_avg_pool2d(x[:, :, :0], 2),
])
def test_errors_where_torch_raises(call):
    """Each rejected call above is also rejected by torch with the same exception type."""
    x = np.zeros((2, 3, 5, 5), np.float32)
    with pytest.raises(RuntimeError) as ours:
        call(P, ng.tensor(x))
    with pytest.raises(RuntimeError):
        call(F, torch.tensor(x))
    assert ours.type is RuntimeError


def test_gradient_accumulates_over_overlapping_windows():
    # stride 1, kernel 3: the global max is in 9 windows and gets all 9 output gradients
    x = distinct(1, 1, 5, 5, seed=14)
    t = ng.tensor(x, requires_grad=True)
    P.max_pool2d(t, 3, 1, 1).sum().backward()
    g = t.grad.numpy()
    assert g.reshape(-1)[np.argmax(x)] == 9.0
    assert g.sum() == 25.0
