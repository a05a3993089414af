"""Every op family on ``device="cuda"``: forward against NumPy, gradients against the CPU.

One table of cases, one parametrized test (``test_op``) running
:func:`optest.check_device` on each: the forward on CUDA tensors in float32 and float64
(and with strided inputs where cheap) against a float64 NumPy reference (or, with
``ref=None``, against the same op on the CPU: random ops draw the same numbers for the
same ``numbagrad.manual_seed``), every output on ``cuda:0``; then one random upstream
gradient through the CPU graph and through the CUDA graph, the CUDA ``.grad`` on
``cuda:0`` and equal to the CPU one (which ``tests/ops`` checks against finite
differences and PyTorch). Integer/bool array inputs become CUDA index tensors.

Shapes stay tiny (<= 24 elements): the simulator costs ~0.3 ms per simulated thread and
a few ms per launch. Known gaps of the CUDA backend are ``xfail(strict=True)`` with the
reason, so they turn into failures (to un-mark) the day they are fixed.
"""
import numpy as np
import pytest

import numbagrad as ng
import numbagrad.nn.functional as F
from optest import check_device, randn, to_device_tensors, _host
from reference import activations as R

cuda = pytest.importorskip("numba.cuda")

F32, F64 = np.float32, np.float64


def pos(*shape, seed=None):
    """Positive inputs (domain of log, sqrt, ...), away from 0."""
    return np.abs(randn(*shape, seed=seed)) + 0.5


def I(*v):  # noqa: E743 - an int64 index array
    return np.array(v, dtype=np.int64)


class C:
    """A case: ``fn(*tensors)`` vs ``ref(*arrays)`` on ``inputs`` (see check_device)."""

    def __init__(self, id, fn, ref, inputs, xfail=None, marks=(), **opts):
        self.id, self.fn, self.ref, self.inputs, self.xfail, self.opts = id, fn, ref, inputs, xfail, opts
        self.marks = list(marks)


# ---- NumPy references that NumPy lacks under one name -------------------------------------------------
def _quiet(fn):
    """``fn`` with NumPy's floating-point warnings off (log(0), 1/0). The simulator runs
    kernels as NumPy scalar code in its own threads (outside ``errstate``), so such a case
    also filters the warning."""
    def q(*a):
        with np.errstate(all="ignore"):
            return fn(*a)
    return q


def _lse(x, axis, keepdims=False):
    m = np.max(x, axis=axis, keepdims=True)
    r = np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True)) + m
    return r if keepdims else np.squeeze(r, axis=axis)


def _pad(x, p, mode="constant", value=0.0):
    widths = [(0, 0)] * x.ndim
    for i in range(len(p) // 2):
        widths[x.ndim - 1 - i] = (p[2 * i], p[2 * i + 1])
    if mode == "constant":
        return np.pad(x, widths, constant_values=value)
    return np.pad(x, widths, mode={"reflect": "reflect", "replicate": "edge", "circular": "wrap"}[mode])


def _gather(x, dim, idx):
    return np.take_along_axis(x, idx, dim)


def _scatter(x, dim, idx, src, add=False):
    out = x.copy()
    for pos_ in np.ndindex(*idx.shape):
        tgt = list(pos_)
        tgt[dim] = idx[pos_]
        if add:
            out[tuple(tgt)] += src[pos_]
        else:
            out[tuple(tgt)] = src[pos_] if isinstance(src, np.ndarray) else src
    return out


def _index_add(x, dim, idx, src, alpha=1.0):
    out = x.copy()
    for k, i in enumerate(idx):
        sl = [slice(None)] * x.ndim
        sl[dim] = i
        sk = [slice(None)] * x.ndim
        sk[dim] = k
        out[tuple(sl)] += alpha * src[tuple(sk)]
    return out


def _ce(x, t, weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.0):
    n, c = x.shape
    logp = x - _lse(x, 1, keepdims=True)
    w = np.ones(c) if weight is None else weight
    keep = t != ignore_index
    ts = np.where(keep, t, 0)
    nll = -logp[np.arange(n), ts] * w[ts]
    smooth = -(logp * w).sum(1) / c
    loss = ((1 - label_smoothing) * nll + label_smoothing * smooth) * keep
    if reduction == "none":
        return loss
    if reduction == "sum":
        return loss.sum()
    return loss.sum() / (w[ts] * keep).sum()


def _setitem_ref(x, v, idx):
    y = x.copy()
    y[idx] = v
    return y


def _setitem_op(x, v, idx):
    y = ng.clone(x)
    y[idx] = v
    return y


# ---- the table -----------------------------------------------------------------------------------------
a34, b34, b4, p34 = randn(3, 4, seed=1), randn(3, 4, seed=2), randn(4, seed=3), pos(3, 4, seed=4)
a234 = randn(2, 3, 4, seed=5)

CASES = []


def add(*cases):
    CASES.extend(cases)


# elementwise: binary arithmetic, broadcasting, scalar operands
add(
    C("add", ng.add, np.add, [a34, b34], noncontig=True),
    C("add-bcast-row", ng.add, np.add, [a34, b4]),
    C("add-bcast-both", ng.add, np.add, [randn(2, 1, 4, seed=6), randn(3, 1, seed=7)]),
    C("add-alpha", lambda a, b: ng.add(a, b, alpha=2.5), lambda a, b: a + 2.5 * b, [a34, b34]),
    C("sub-bcast", ng.sub, np.subtract, [a34, randn(1, 4, seed=8)], noncontig=True),
    C("mul-bcast-col", ng.mul, np.multiply, [a34, randn(3, 1, seed=9)]),
    C("mul-0d", ng.mul, np.multiply, [randn(seed=10), randn(3, seed=11)]),
    C("div", ng.div, np.divide, [a34, p34], noncontig=True),
    C("div-bcast", ng.div, np.divide, [a34, pos(4, seed=12)]),
    C("pow", ng.pow, np.power, [p34, b34]),
    C("maximum", ng.maximum, np.maximum, [a34, b34]),
    C("minimum-bcast", ng.minimum, np.minimum, [randn(4, seed=13), a34]),
    C("remainder", ng.remainder, np.remainder, [a34 * 3, p34]),
    C("lerp", lambda a, b: ng.lerp(a, b, 0.3), lambda a, b: a + 0.3 * (b - a), [a34, b34]),
    C("rsub", ng.rsub, lambda a, b: b - a, [a34, b34]),
    C("scalar-add", lambda x: x + 2.5, lambda x: x + 2.5, [a34], noncontig=True),
    C("scalar-rsub", lambda x: 2.5 - x, lambda x: 2.5 - x, [a34]),
    C("scalar-mul", lambda x: 3 * x, lambda x: 3 * x, [a34]),
    C("scalar-div", lambda x: x / 4.0, lambda x: x / 4.0, [a34]),
    C("scalar-rdiv", lambda x: 2.0 / x, lambda x: 2.0 / x, [p34]),
    C("scalar-pow", lambda x: x ** 3, lambda x: x ** 3, [a34]),
    C("scalar-rpow", lambda x: 2.0 ** x, lambda x: 2.0 ** x, [a34]),
    C("neg-op", lambda x: -x, np.negative, [a34]),
    C("floor_divide", lambda a, b: a // b, np.floor_divide, [a34 * 4, p34], grad=False),
)

# elementwise: comparisons and logic (bool results, never tracked)
for _name, _ref in [("eq", np.equal), ("ne", np.not_equal), ("lt", np.less), ("le", np.less_equal),
                    ("gt", np.greater), ("ge", np.greater_equal)]:
    add(C(f"cmp-{_name}", getattr(ng, _name), _ref, [np.round(a34), np.round(b34)], grad=False))
add(
    C("cmp-gt-scalar", lambda x: x > 0.1, lambda x: x > 0.1, [a34], grad=False),
    C("cmp-eq-bcast", ng.eq, np.equal, [np.round(a34), np.round(b4)], grad=False),
    C("logical_and", lambda a, b: ng.logical_and(a > 0, b > 0), lambda a, b: (a > 0) & (b > 0), [a34, b34],
      grad=False),
    C("logical_or", lambda a, b: ng.logical_or(a > 0, b > 0), lambda a, b: (a > 0) | (b > 0), [a34, b34],
      grad=False),
    C("logical_xor", lambda a, b: ng.logical_xor(a > 0, b > 0), lambda a, b: (a > 0) ^ (b > 0), [a34, b34],
      grad=False),
    C("logical_not", lambda a: ng.logical_not(a > 0), lambda a: ~(a > 0), [a34], grad=False),
    C("isnan-isinf-isfinite", _quiet(lambda a: (ng.isnan(ng.log(a)), ng.isinf(1 / a), ng.isfinite(ng.log(a)))),
      _quiet(lambda a: (np.isnan(np.log(a)), np.isinf(1 / a), np.isfinite(np.log(a)))),
      [np.array([[-1.0, 0.0, 2.0], [1.0, -0.5, 3.0]])], grad=False,
      marks=[pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning")]),  # simulator threads
)

# elementwise: unary math
_UNARY = [
    ("neg", np.negative, a34), ("exp", np.exp, a34), ("exp2", np.exp2, a34), ("expm1", np.expm1, a34),
    ("log", np.log, p34), ("log2", np.log2, p34), ("log10", np.log10, p34), ("log1p", np.log1p, p34),
    ("sqrt", np.sqrt, p34), ("rsqrt", lambda x: 1 / np.sqrt(x), p34), ("abs", np.abs, a34),
    ("sign", np.sign, a34), ("square", np.square, a34), ("reciprocal", lambda x: 1 / x, p34),
    ("sin", np.sin, a34), ("cos", np.cos, a34), ("floor", np.floor, a34 * 3), ("ceil", np.ceil, a34 * 3),
    ("round", np.round, a34 * 3), ("trunc", np.trunc, a34 * 3), ("frac", lambda x: x - np.trunc(x), a34 * 3),
]
for _name, _ref, _x in _UNARY:
    add(C(_name, getattr(ng, _name), _ref, [_x], noncontig=_name in ("exp", "log", "abs")))

# pointwise math (ops/pointwise.py): NumPy's and SciPy's ufuncs with their CUDA twins
from scipy import special as _sp  # noqa: E402
u34 = np.tanh(a34) * 0.9  # inside (-1, 1): the domain of asin, atanh
add(*[C(n, getattr(ng, n), r, [x]) for n, r, x in [
    ("tan", np.tan, u34), ("asin", np.arcsin, u34), ("atanh", np.arctanh, u34), ("sinh", np.sinh, a34),
    ("asinh", np.arcsinh, a34), ("erf", _sp.erf, a34), ("erfc", _sp.erfc, a34), ("lgamma", _sp.gammaln, p34)]])
add(*[C(n, getattr(ng, n), r, [a34, p34]) for n, r in [
    ("atan2", np.arctan2), ("hypot", np.hypot), ("fmod", np.fmod), ("copysign", np.copysign),
    ("logaddexp", np.logaddexp)]])
add(
    C("clamp", lambda x: ng.clamp(x, -0.5, 0.7), lambda x: np.clip(x, -0.5, 0.7), [a34], noncontig=True),
    C("clamp_min", lambda x: ng.clamp_min(x, 0.1), lambda x: np.maximum(x, 0.1), [a34]),
    C("clamp-tensor-bounds", lambda x, lo, hi: ng.clamp(x, lo, hi), lambda x, lo, hi: np.minimum(np.maximum(x, lo), hi),
      [a34, -np.abs(b4), np.abs(randn(3, 1, seed=14))]),
    C("where", lambda c, a, b: ng.where(c, a, b), np.where, [a34 > 0, a34, b34], noncontig=True),
    C("where-bcast-scalar", lambda c, a: ng.where(c, a, 0.5), lambda c, a: np.where(c, a, 0.5), [b4 > 0, a34]),
)

# reductions
add(
    C("sum-all", ng.sum, np.sum, [a34], noncontig=True),
    C("sum-dim", lambda x: ng.sum(x, 1), lambda x: np.sum(x, 1), [a34], noncontig=True),
    C("sum-dims-keepdim", lambda x: ng.sum(x, (0, 2), keepdim=True), lambda x: np.sum(x, (0, 2), keepdims=True),
      [a234]),
    C("sum-int", lambda i: ng.sum(i, 0), lambda i: np.sum(i, 0), [I(1, 2, 3, 4).reshape(2, 2)], grad=False),
    C("mean", lambda x: ng.mean(x, 0), lambda x: np.mean(x, 0), [a34], noncontig=True),
    C("mean-all", ng.mean, np.mean, [a234]),
    C("var", lambda x: ng.var(x, 1), lambda x: np.var(x, 1, ddof=1), [a34]),
    C("var-c0-keepdim", lambda x: ng.var(x, 0, correction=0, keepdim=True),
      lambda x: np.var(x, 0, keepdims=True), [a34]),
    C("std", lambda x: ng.std(x, -1), lambda x: np.std(x, -1, ddof=1), [a234]),
    C("var_mean", lambda x: ng.var_mean(x, 1), lambda x: (np.var(x, 1, ddof=1), np.mean(x, 1)), [a34]),
    C("prod", lambda x: ng.prod(x, 1), lambda x: np.prod(x, 1), [a34]),
    C("prod-all-zero", ng.prod, np.prod, [np.array([[1.5, 0.0, -2.0], [0.5, 3.0, -1.0]])]),
    C("max-all", ng.max, np.max, [a34], noncontig=True),
    C("min-all-ties", ng.min, np.min, [np.array([[1.0, -2.0, 3.0], [-2.0, 0.5, 4.0]])]),
    C("amax-dims", lambda x: ng.amax(x, (0, 2)), lambda x: np.amax(x, (0, 2)), [a234]),
    C("amin-keepdim", lambda x: ng.amin(x, 1, keepdim=True), lambda x: np.amin(x, 1, keepdims=True), [a34]),
    C("max-dim", lambda x: tuple(ng.max(x, 1)), lambda x: (np.max(x, 1), np.argmax(x, 1)), [a34],
      noncontig=True),
    C("min-dim-keepdim", lambda x: tuple(ng.min(x, 0, keepdim=True)),
      lambda x: (np.min(x, 0, keepdims=True), np.argmin(x, 0)[None]), [a34]),
    C("argmax", lambda x: ng.argmax(x, 1), lambda x: np.argmax(x, 1), [a34], grad=False),
    C("argmin-all", ng.argmin, np.argmin, [a34], grad=False),
    C("argmax-keepdim", lambda x: ng.argmax(x, 0, keepdim=True), lambda x: np.argmax(x, 0)[None], [a34],
      grad=False),
    C("logsumexp", lambda x: ng.logsumexp(x, 1), lambda x: _lse(x, 1), [a34 * 5], noncontig=True),
    C("logsumexp-dims", lambda x: ng.logsumexp(x, (0, 2), keepdim=True), lambda x: _lse(x, (0, 2), True), [a234]),
    C("norm-2", ng.norm, np.linalg.norm, [a34]),
    C("norm-1-dim", lambda x: ng.norm(x, 1, dim=1), lambda x: np.sum(np.abs(x), 1), [a34]),
    C("norm-inf", lambda x: ng.norm(x, float("inf"), dim=0), lambda x: np.max(np.abs(x), 0), [a34]),
    C("norm-3", lambda x: ng.norm(x, 3, dim=1), lambda x: np.sum(np.abs(x) ** 3, 1) ** (1 / 3), [a34]),
    C("cumsum", lambda x: ng.cumsum(x, 1), lambda x: np.cumsum(x, 1), [a34], noncontig=True),
    C("cumsum-dim0", lambda x: ng.cumsum(x, 0), lambda x: np.cumsum(x, 0), [a234]),
    C("all-any", lambda x: (ng.all(x > -1), ng.any(x > 1, 1), ng.all(x > -1, 0, keepdim=True)),
      lambda x: (np.all(x > -1), np.any(x > 1, 1), np.all(x > -1, 0, keepdims=True)), [a34], grad=False),
)

# matmul
add(
    C("matmul-2d", ng.matmul, np.matmul, [a34, randn(4, 2, seed=20)], noncontig=True),
    C("mm", ng.mm, np.matmul, [randn(2, 3, seed=21), randn(3, 4, seed=22)]),
    C("matmul-vec-mat", ng.matmul, np.matmul, [randn(3, seed=23), randn(3, 2, seed=24)]),
    C("matmul-mat-vec", ng.matmul, np.matmul, [randn(2, 3, seed=25), randn(3, seed=26)]),
    C("dot", ng.dot, np.dot, [randn(4, seed=27), randn(4, seed=28)]),
    C("matmul-batch-bcast", ng.matmul, np.matmul, [randn(2, 2, 3, seed=29), randn(3, 2, seed=30)]),
    C("matmul-batch-both", ng.matmul, np.matmul, [randn(2, 1, 2, 3, seed=31), randn(2, 3, 2, seed=32)]),
    C("bmm", ng.bmm, np.matmul, [randn(2, 2, 3, seed=33), randn(2, 3, 2, seed=34)]),
    C("outer", ng.outer, np.outer, [randn(3, seed=35), randn(4, seed=36)]),
    C("linear", F.linear, lambda x, w, b: x @ w.T + b, [a34, randn(2, 4, seed=37), randn(2, seed=38)],
      noncontig=True),
    C("linear-nobias-3d", F.linear, lambda x, w: x @ w.T, [randn(2, 2, 3, seed=39), randn(4, 3, seed=40)]),
)

# shape ops
add(
    C("reshape", lambda x: ng.reshape(x, (4, 3)), lambda x: x.reshape(4, 3), [a34], noncontig=True),
    C("view", lambda x: x.view(2, -1), lambda x: x.reshape(2, -1), [a34]),
    C("flatten", lambda x: ng.flatten(x, 1), lambda x: x.reshape(2, 12), [a234]),
    C("unflatten", lambda x: ng.unflatten(x, 1, (2, 2)), lambda x: x.reshape(3, 2, 2), [a34]),
    C("transpose", lambda x: ng.transpose(x, 0, 2), lambda x: np.swapaxes(x, 0, 2), [a234]),
    C("permute", lambda x: ng.permute(x, 2, 0, 1), lambda x: np.transpose(x, (2, 0, 1)), [a234], noncontig=True),
    C("T", lambda x: x.T, lambda x: x.T, [a34]),
    C("t-then-add", lambda x, y: x.t() + y, lambda x, y: x.T + y, [a34, randn(4, 3, seed=41)]),
    C("movedim", lambda x: ng.movedim(x, 0, -1), lambda x: np.moveaxis(x, 0, -1), [a234]),
    C("expand", lambda x: ng.expand(x, 2, 3, 4), lambda x: np.broadcast_to(x, (2, 3, 4)), [randn(3, 1, seed=42)]),
    C("expand-then-mul", lambda x, y: x.expand(3, 4) * y, lambda x, y: x * y, [randn(1, 4, seed=43), a34]),
    C("squeeze", lambda x: ng.squeeze(x, 1), lambda x: np.squeeze(x, 1), [randn(3, 1, 4, seed=44)]),
    C("unsqueeze", lambda x: ng.unsqueeze(x, -1), lambda x: x[..., None], [a34]),
    C("cat", lambda a, b: ng.cat([a, b], 1), lambda a, b: np.concatenate([a, b], 1), [a34, randn(3, 2, seed=45)],
      noncontig=True),
    C("cat-dim0-3", lambda a, b, c: ng.cat([a, b, c]), lambda a, b, c: np.concatenate([a, b, c]),
      [randn(1, 3, seed=46), randn(2, 3, seed=47), randn(1, 3, seed=48)]),
    C("stack", lambda a, b: ng.stack([a, b], 1), lambda a, b: np.stack([a, b], 1), [a34, b34]),
    C("hstack-vstack", lambda a, b: (ng.hstack([a, b]), ng.vstack([a, b])),
      lambda a, b: (np.hstack([a, b]), np.vstack([a, b])), [randn(4, seed=49), randn(4, seed=50)]),
    C("split", lambda x: ng.split(x, 2, 1), lambda x: tuple(np.split(x, 2, 1)), [a34], noncontig=True),
    C("split-sizes", lambda x: ng.split(x, [1, 3], 1), lambda x: tuple(np.split(x, [1], 1)), [a34]),
    C("chunk-uneven", lambda x: ng.chunk(x, 2, 0), lambda x: tuple(np.split(x, [2], 0)), [a34]),
    C("unbind", lambda x: ng.unbind(x, 1), lambda x: tuple(x[:, i] for i in range(3)), [randn(2, 3, seed=51)]),
    C("narrow", lambda x: ng.narrow(x, 1, 1, 2), lambda x: x[:, 1:3], [a34]),
    C("pad-constant", lambda x: ng.pad(x, (1, 2), value=0.5), lambda x: _pad(x, (1, 2), value=0.5), [a34],
      noncontig=True),
    C("pad-constant-2d", lambda x: ng.pad(x, (1, 0, 0, 2)), lambda x: _pad(x, (1, 0, 0, 2)), [randn(2, 3, seed=52)]),
    C("pad-reflect", lambda x: F.pad(x, (2, 1), mode="reflect"), lambda x: _pad(x, (2, 1), "reflect"), [a34]),
    C("pad-replicate", lambda x: F.pad(x, (1, 2, 1, 0), mode="replicate"),
      lambda x: _pad(x, (1, 2, 1, 0), "replicate"), [randn(2, 3, seed=53)]),
    C("pad-circular", lambda x: F.pad(x, (1, 2), mode="circular"), lambda x: _pad(x, (1, 2), "circular"),
      [randn(2, 3, seed=54)]),
    C("flip", lambda x: ng.flip(x, (0, 2)), lambda x: np.flip(x, (0, 2)), [a234]),
    C("flip-then-mul", lambda x, y: ng.flip(x, 1) * y, lambda x, y: np.flip(x, 1) * y, [a34, b34]),
    C("roll", lambda x: ng.roll(x, 1, 1), lambda x: np.roll(x, 1, 1), [a34], noncontig=True),
    C("roll-multi", lambda x: ng.roll(x, (1, -2), (0, 1)), lambda x: np.roll(x, (1, -2), (0, 1)), [a34]),
    C("roll-flat", lambda x: ng.roll(x, 5), lambda x: np.roll(x, 5), [a34]),
    C("repeat", lambda x: x.repeat(2, 1, 2), lambda x: np.tile(x, (2, 1, 2)), [randn(2, 3, seed=55)]),
    C("tile", lambda x: ng.tile(x, (2,)), lambda x: np.tile(x, 2), [randn(2, 3, seed=56)]),
    C("contiguous-clone", lambda x: (ng.contiguous(x.T), ng.clone(x)), lambda x: (x.T, x), [a34]),
    C("cast-roundtrip", lambda x: (x.to(ng.float32 if x.dtype == np.float64 else ng.float64) * 2).to(x.dtype),
      lambda x: x * 2, [a34], tol={F64: dict(rtol=1e-6, atol=1e-7)}),
)

# indexing
_m34 = a34 > 0.2
add(
    C("getitem-int", lambda x: x[1], lambda x: x[1], [a34]),
    C("getitem-slices", lambda x: x[1:, ::2], lambda x: x[1:, ::2], [a34], noncontig=True),
    C("getitem-neg-step", lambda x: x[::-1, 1], lambda x: x[::-1, 1], [a34]),
    C("getitem-none-ellipsis", lambda x: x[None, ..., 2], lambda x: x[None, ..., 2], [a234]),
    C("getitem-0d", lambda x: x[1, 2], lambda x: x[1, 2], [a34]),
    C("getitem-rows", lambda x, i: x[i], lambda x, i: x[i], [a34, I(2, 0, 2, -1)], noncontig=True),
    C("getitem-cols", lambda x, i: x[:, i], lambda x, i: x[:, i], [a34, I(3, 1, 1)]),
    C("getitem-rows-2d-index", lambda x, i: x[i], lambda x, i: x[i], [a34, I(0, 2, 2, 1).reshape(2, 2)]),
    C("getitem-bool-mask", lambda x, m: x[m], lambda x, m: x[m], [a34, _m34]),
    C("getitem-bool-rows", lambda x, m: x[m], lambda x, m: x[m], [a34, np.array([True, False, True])]),
    C("getitem-two-arrays", lambda x, i, j: x[i, j], lambda x, i, j: x[i, j], [a34, I(0, 2, 0), I(1, 3, 1)]),
    C("setitem-slice", lambda x, v: _setitem_op(x, v, (slice(1, 3), 1)),
      lambda x, v: _setitem_ref(x, v, (slice(1, 3), 1)), [a34, randn(2, seed=60)]),
    C("setitem-bcast-row", lambda x, v: _setitem_op(x, v, (1,)), lambda x, v: _setitem_ref(x, v, (1,)),
      [a34, randn(1, 4, seed=61)]),
    C("setitem-scalar-elem", lambda x, v: _setitem_op(x, v, (0, 2)), lambda x, v: _setitem_ref(x, v, (0, 2)),
      [a34, randn(seed=62)]),
    C("setitem-rows", lambda x, v, i: _setitem_op(x, v, i), lambda x, v, i: _setitem_ref(x, v, i),
      [a34, randn(2, 4, seed=63), I(2, 0)]),
    C("gather", lambda x, i: ng.gather(x, 1, i), lambda x, i: _gather(x, 1, i),
      [a34, I(0, 3, 3, 1, 2, 2).reshape(3, 2)], noncontig=True),
    C("gather-dim0", lambda x, i: ng.gather(x, 0, i), lambda x, i: _gather(x, 0, i),
      [a34, I(2, 0, 1, 1, 0, 0, 2, 2).reshape(2, 4)]),
    C("take_along_dim", lambda x, i: ng.take_along_dim(x, i, 1), lambda x, i: np.take_along_axis(x, i, 1),
      [a34, I(-1, 0, 1).reshape(3, 1)]),
    C("take", lambda x, i: ng.take(x, i), lambda x, i: np.take(x, i), [a34, I(0, 11, -1, 5)]),
    C("scatter", lambda x, i, s: ng.scatter(x, 1, i, s), lambda x, i, s: _scatter(x, 1, i, s),
      [a34, I(0, 3, 1, 2, 2, 0).reshape(3, 2), randn(3, 2, seed=64)]),
    C("scatter-value", lambda x, i: ng.scatter(x, 0, i, value=1.5), lambda x, i: _scatter(x, 0, i, 1.5),
      [a34, I(2, 0, 1, 1).reshape(1, 4)]),
    C("scatter_add", lambda x, i, s: ng.scatter_add(x, 0, i, s), lambda x, i, s: _scatter(x, 0, i, s, add=True),
      [a34, I(0, 0, 2, 1, 0, 0, 0, 2).reshape(2, 4), randn(2, 4, seed=65)], noncontig=True),
    C("index_select", lambda x, i: ng.index_select(x, 1, i), lambda x, i: x[:, i], [a34, I(3, 0, 3)],
      noncontig=True),
    C("index_select-dim0", lambda x, i: ng.index_select(x, 0, i), lambda x, i: x[i], [a234, I(1, 1, 0)]),
    C("index_add", lambda x, i, s: ng.index_add(x, 0, i, s, alpha=2.0),
      lambda x, i, s: _index_add(x, 0, i, s, 2.0), [a34, I(2, 0, 2), randn(3, 4, seed=66)]),
    C("masked_fill", lambda x, m: ng.masked_fill(x, m, -1.0), lambda x, m: np.where(m, -1.0, x), [a34, _m34],
      noncontig=True),
    C("masked_fill-bcast", lambda x, m: ng.masked_fill(x, m, 2.0), lambda x, m: np.where(m, 2.0, x),
      [a34, b4 > 0]),
    C("masked_select", lambda x, m: ng.masked_select(x, m), lambda x, m: x[m], [a34, _m34]),
    C("one_hot", lambda i: F.one_hot(i, 5), lambda i: np.eye(5, dtype=np.int64)[i], [I(0, 4, 2, 2)], grad=False),
    C("one_hot-infer", lambda i: F.one_hot(i), lambda i: np.eye(3, dtype=np.int64)[i], [I(0, 2, 1, 1).reshape(2, 2)],
      grad=False),
    C("embedding", lambda i, w: F.embedding(i, w), lambda i, w: w[i], [I(1, 3, 1, 0).reshape(2, 2), randn(4, 3, seed=67)]),
    C("embedding-padding", lambda i, w: F.embedding(i, w, padding_idx=1), lambda i, w: w[i],
      [I(1, 3, 1, 0, 2), randn(4, 3, seed=68)]),
    C("nonzero", lambda x: ng.nonzero(x > 0), lambda x: np.argwhere(x > 0), [a34], grad=False),
)

# activations
_ACT = [
    ("relu", F.relu, R.relu), ("relu6", F.relu6, R.relu6),
    ("leaky_relu", lambda x: F.leaky_relu(x, 0.2), lambda x: R.leaky_relu(x, 0.2)),
    ("elu", F.elu, R.elu), ("selu", F.selu, R.selu), ("celu", lambda x: ng.celu(x, 2.0), lambda x: R.celu(x, 2.0)),
    ("gelu", F.gelu, R.gelu), ("gelu-tanh", lambda x: F.gelu(x, approximate="tanh"),
                               lambda x: R.gelu(x, approximate="tanh")),
    ("silu", F.silu, R.silu), ("sigmoid", F.sigmoid, R.sigmoid), ("tanh", F.tanh, R.tanh),
    ("softplus", lambda x: F.softplus(x, 2.0, 1.0), lambda x: R.softplus(x, 2.0, 1.0)),
    ("hardtanh", lambda x: F.hardtanh(x, -0.5, 0.8), lambda x: R.hardtanh(x, -0.5, 0.8)),
    ("hardsigmoid", ng.hardsigmoid, R.hardsigmoid), ("hardswish", ng.hardswish, R.hardswish),
    ("mish", F.mish, R.mish), ("logsigmoid", ng.logsigmoid, R.logsigmoid), ("softsign", ng.softsign, R.softsign),
    ("tanhshrink", ng.tanhshrink, R.tanhshrink), ("softshrink", ng.softshrink, R.softshrink),
    ("hardshrink", ng.hardshrink, R.hardshrink),
    ("threshold", lambda x: ng.threshold(x, 0.1, -2.0), lambda x: R.threshold(x, 0.1, -2.0)),
]
for _name, _fn, _ref in _ACT:
    add(C(f"act-{_name}", _fn, _ref, [a34 * 2], noncontig=_name in ("relu", "gelu", "sigmoid")))
add(
    C("act-prelu", ng.prelu, lambda x, w: np.where(x > 0, x, w[None, :, None] * x),
      [a234, np.array([0.25, -0.5, 0.1])]),
    C("act-prelu-scalar", ng.prelu, lambda x, w: np.where(x > 0, x, w * x), [a34, np.array([0.3])]),
    C("act-glu", lambda x: ng.glu(x, -1), lambda x: R.glu(x, -1), [a34]),
)

# softmax family
add(
    C("softmax", lambda x: F.softmax(x, 1), lambda x: R.softmax(x, 1), [a34 * 3], noncontig=True),
    C("softmax-dim0", lambda x: F.softmax(x, 0), lambda x: R.softmax(x, 0), [a34]),
    C("softmax-3d-mid", lambda x: F.softmax(x, 1), lambda x: R.softmax(x, 1), [a234]),
    C("log_softmax", lambda x: F.log_softmax(x, -1), lambda x: R.log_softmax(x, -1), [a34 * 3], noncontig=True),
    C("log_softmax-dim0", lambda x: F.log_softmax(x, 0), lambda x: R.log_softmax(x, 0), [a234]),
    C("softmin", lambda x: ng.softmin(x, 1), lambda x: R.softmin(x, 1), [a34]),
)

# dropout (train mode): the same seed draws the same mask on both devices -> compare with the CPU
add(
    C("dropout", lambda x: F.dropout(x, 0.4), None, [a34], noncontig=True),
    C("dropout-eval", lambda x: F.dropout(x, 0.4, training=False) * 1, lambda x: x, [a34]),
    C("dropout1d", lambda x: ng.dropout1d(x, 0.5), None, [a234]),
    C("dropout2d-4d", lambda x: ng.dropout2d(x, 0.5), None, [randn(2, 3, 2, 2, seed=70)]),
    C("alpha_dropout", lambda x: ng.alpha_dropout(x, 0.3, training=True), None, [a34]),
)

# losses
add(
    C("cross_entropy", F.cross_entropy, _ce, [a34, I(0, 3, 1)], noncontig=True),
    C("cross_entropy-none-ignore", lambda x, t: F.cross_entropy(x, t, reduction="none", ignore_index=1),
      lambda x, t: _ce(x, t, reduction="none", ignore_index=1), [a34, I(0, 1, 3)]),
    C("cross_entropy-weight-smooth-sum", lambda x, t, w: F.cross_entropy(x, t, w, reduction="sum",
                                                                         label_smoothing=0.1),
      lambda x, t, w: _ce(x, t, w, reduction="sum", label_smoothing=0.1), [a34, I(2, 3, 0), pos(4, seed=71)]),
    C("cross_entropy-soft", F.cross_entropy,
      lambda x, p: -(p * (x - _lse(x, 1, keepdims=True))).sum(1).mean(), [a34, R.softmax(b34, 1)]),
    C("cross_entropy-3d", F.cross_entropy,
      lambda x, t: _ce(np.moveaxis(x, 1, -1).reshape(-1, 3), t.reshape(-1)),
      [randn(2, 3, 2, seed=72), I(0, 2, 1, 1).reshape(2, 2)]),
    C("cross_entropy-3d-none", lambda x, t: F.cross_entropy(x, t, reduction="none"),
      lambda x, t: _ce(np.moveaxis(x, 1, -1).reshape(-1, 3), t.reshape(-1), reduction="none").reshape(2, 2),
      [randn(2, 3, 2, seed=72), I(0, 2, 1, 1).reshape(2, 2)]),
    C("nll_loss", lambda x, t: F.nll_loss(F.log_softmax(x, 1), t), _ce, [a34, I(0, 3, 1)]),
    C("mse_loss", F.mse_loss, lambda a, b: np.mean((a - b) ** 2), [a34, b34]),
    C("l1_loss-sum", lambda a, b: F.l1_loss(a, b, reduction="sum"), lambda a, b: np.sum(np.abs(a - b)), [a34, b34]),
    C("composed-nll", lambda x, t: -ng.gather(F.log_softmax(x, 1), 1, t[:, None]).mean(),
      lambda x, t: _ce(x, t), [a34, I(0, 3, 1)]),
)


def _param(c):
    marks = c.marks + ([pytest.mark.xfail(reason=c.xfail, strict=True)] if c.xfail else [])
    return pytest.param(c, id=c.id, marks=marks)


_ids = [c.id for c in CASES]
assert len(_ids) == len(set(_ids)), "duplicate case ids"


@pytest.mark.parametrize("case", [_param(c) for c in CASES])
def test_op(case):
    check_device(case.fn, case.ref, case.inputs, **case.opts)


# ---- special cases -------------------------------------------------------------------------------------
def test_dropout_mask_matches_cpu_and_backward_uses_it():
    x = np.ones((4, 6))
    ng.manual_seed(123)
    ycpu = F.dropout(ng.tensor(x), 0.5).numpy()
    ng.manual_seed(123)
    xt = ng.tensor(x, device="cuda", requires_grad=True)
    y = F.dropout(xt, 0.5)
    yh = _host(y)
    np.testing.assert_array_equal(yh, ycpu)
    assert 0 < (yh == 0).sum() < yh.size
    y.sum().backward()
    np.testing.assert_array_equal(_host(xt.grad), yh)  # d(sum)/dx = mask * 2


def test_chain_of_ops_on_cuda_matches_cpu():
    """A small MLP-like graph, every op's backward on CUDA, one leaf used twice."""
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal((3, 4)), rng.standard_normal((4, 5)), rng.standard_normal(5), I(1, 0, 4)]

    def f(x, w, b, t):
        h = F.relu(x @ w + b)
        h = h * ng.sigmoid(h) - 0.1 * (h ** 2).mean(0)
        return -ng.gather(F.log_softmax(h, 1), 1, t[:, None]).mean() + (w * w).sum() * 1e-2

    check_device(f, None, xs, dtypes=(F64,))


def test_intermediate_non_leaf_grads_and_retain_grad():
    x = ng.tensor(randn(3, 4, seed=80), device="cuda", requires_grad=True)
    y = ng.exp(x)
    y.retain_grad()
    z = (y * 2).sum()
    z.backward()
    assert y.grad.device == ng.device("cuda") and x.grad.device == ng.device("cuda")
    np.testing.assert_allclose(_host(y.grad), np.full((3, 4), 2.0), rtol=1e-6)
    np.testing.assert_allclose(_host(x.grad), 2 * np.exp(randn(3, 4, seed=80)).astype(np.float32), rtol=1e-5)


def test_grad_accumulates_over_two_backwards():
    x = ng.tensor(randn(2, 3, seed=81), device="cuda", requires_grad=True)
    for _ in range(2):
        (x * 3).sum().backward()
    assert x.grad.device == ng.device("cuda")
    np.testing.assert_allclose(_host(x.grad), np.full((2, 3), 6.0))


@pytest.mark.parametrize("dtype", [F32, F64])
def test_index_tensors_from_the_cpu_are_rejected_or_moved(dtype):
    """An index tensor must live on the data's device (PyTorch raises otherwise)."""
    (x,) = to_device_tensors([a34], dtype, "cuda")
    idx = ng.tensor([0, 2])
    with pytest.raises((RuntimeError, TypeError)):
        ng.index_select(x, 0, idx)


def test_index_lists_and_host_index_tensors_for_getitem_move_to_the_device():
    (x,) = to_device_tensors([a34], F64, "cuda")
    np.testing.assert_array_equal(_host(ng.index_select(x, 1, [2, 0])), a34[:, [2, 0]])
    np.testing.assert_array_equal(_host(ng.gather(x, 1, np.array([[1], [0], [3]]))), a34[[0, 1, 2], [1, 0, 3]][:, None])
    y = x[ng.tensor([2, 0])]  # a CPU index tensor in getitem is moved, as PyTorch allows
    assert y.device == ng.device("cuda")
    np.testing.assert_array_equal(_host(y), a34[[2, 0]])
    np.testing.assert_array_equal(_host(x[[1, 1]]), a34[[1, 1]])
    np.testing.assert_array_equal(_host(x[np.array([True, False, True])]), a34[[0, 2]])
    with pytest.raises(IndexError, match="getitem: index 4 is out of bounds.*size 4.*\\(3, 4\\)"):
        x[:, ng.tensor([0, 4], device="cuda")]
    with pytest.raises(IndexError, match="getitem: boolean index did not match"):
        x[:, np.array([True, False])]
    with pytest.raises(RuntimeError, match="masked_fill: .*mask on cpu.*cuda:0"):
        ng.masked_fill(x, ng.tensor(a34 > 0), 0.0)


def test_comparison_helpers_and_nonzero_on_device():
    x, y = to_device_tensors([a34, a34 + 1e-9], F64, "cuda")
    assert ng.equal(x, x) and not ng.equal(x, y) and ng.allclose(x, y)
    c = ng.isclose(x, y)
    assert c.device == ng.device("cuda") and _host(c).all()
    w = ng.where(x > 0.5)
    assert all(t.device == ng.device("cuda") for t in w)
    for got, exp in zip(w, np.nonzero(a34 > 0.5)):
        np.testing.assert_array_equal(_host(got), exp)
    nz = ng.nonzero(x > 0.5, as_tuple=True)
    assert all(t.device == ng.device("cuda") and t.dtype == np.int64 for t in nz)
    i = ng.tensor([7, -7, 9], device="cuda")
    r = i // ng.tensor([2, 2, -4], device="cuda")
    assert r.device == ng.device("cuda") and r.dtype == np.int64
    np.testing.assert_array_equal(_host(r), [3, -4, -3])
    np.testing.assert_array_equal(_host(ng.clamp(x, max=0.0)), np.minimum(a34, 0.0))


def test_view_of_non_contiguous_on_device():
    (x,) = to_device_tensors([a34], F32, "cuda")
    with pytest.raises(RuntimeError, match="view: size \\[12\\] is not compatible"):
        x.T.view(12)
    v = x.T.view(4, 1, 3)  # compatible strides: allowed
    np.testing.assert_array_equal(_host(v), a34.T.astype(F32)[:, None, :])


@pytest.mark.xfail(reason="backend: CudaArray.reshape copies every non-C-contiguous array, even when the strides "
                          "allow a view (x.T.view(4, 1, 3) must share storage, as in NumPy/PyTorch)", strict=True)
def test_view_of_non_contiguous_shares_storage_on_device():
    (x,) = to_device_tensors([a34], F32, "cuda")
    v = x.T.view(4, 1, 3)
    v.fill_(0.0)
    assert _host(x).sum() == 0


def test_embedding_scale_grad_by_freq_and_max_norm_on_device():
    idx = I(1, 3, 1, 0)
    w = randn(4, 3, seed=90) * 2
    check_device(lambda i, t: F.embedding(i, t, scale_grad_by_freq=True), lambda i, t: t[i], [idx, w],
                 dtypes=(F64,))
    wc = ng.tensor(w)
    wg = ng.tensor(w, device="cuda")
    oc = F.embedding(ng.tensor(idx), wc, max_norm=1.0)
    og = F.embedding(ng.tensor(idx, device="cuda"), wg, max_norm=1.0)
    np.testing.assert_allclose(_host(og), oc.numpy(), rtol=1e-12)
    np.testing.assert_allclose(_host(wg), wc.numpy(), rtol=1e-12)  # rows renormalised in place
    assert wg._version_value == 1


@pytest.mark.parametrize("name,fn", [
    ("relu", F.relu), ("gelu", F.gelu), ("softmax", lambda x: F.softmax(x, 1)),
    ("log_softmax", lambda x: F.log_softmax(x, 0)), ("dropout", lambda x: F.dropout(x, 0.3)),
    ("add-mul", lambda x: x * x + x), ("sum", lambda x: x.sum(1)),
])
def test_float16_on_device_matches_the_cpu(name, fn):
    """float16 ops (computed in float32 by the ops, as on the CPU) give the CPU's result."""
    a = randn(3, 4, seed=91).astype(np.float16)
    ng.manual_seed(3)
    c = fn(ng.tensor(a))
    ng.manual_seed(3)
    g = fn(ng.tensor(a, device="cuda"))
    assert g.dtype == np.float16 and g.device == ng.device("cuda")
    np.testing.assert_allclose(_host(g).astype(F32), c.numpy().astype(F32), rtol=2e-3, atol=1e-3)
