"""The op table: one row per op (or per case of an op), driving the CPU checks
(``tests/test_opdb.py``: :func:`optest.check_op`, forward in each dtype, contiguous and
strided, float64 finite differences, PyTorch parity) and the CUDA checks
(``tests/cuda/test_opdb_cuda.py``: :func:`optest.check_device`, forward against the same
NumPy reference, gradients against the CPU).

Adding an op is one row here, plus its NumPy reference in ``tests/reference/<family>.py``
when NumPy has none under one name. A public op with no row must be listed in
``NO_ROW`` with the reason and the tests that cover it (``test_opdb.py`` fails otherwise).

A row (:class:`OpInfo`):

* ``id``: the test id, unique; ``names``: the public ops it covers (default: the id up
  to its first ``-``, without an ``act-``/``cmp-`` prefix, when that is a public op).
* ``fn(*tensors, **kwargs)`` the op, ``ref(*float64 arrays, **kwargs)`` its reference
  (``None``: a random op, compared on CUDA with the CPU under the same seed);
  ``inputs``: NumPy arrays (floating ones are cast to each dtype of ``dtypes``; integer
  and bool ones are index/mask arguments); :meth:`OpInfo.make_inputs` hands out copies.
* ``kinks``: points where a unary op's derivative jumps. The CPU inputs keep away from
  them (checked: finite differences across a kink are meaningless). With ``extremes``
  the CUDA suite runs the row once more on its first input plus the kinks themselves,
  +-30, +-1e4 and NaN, against the CPU (the kink conventions and the exp(-|x|)
  formulations are shared scalar helpers: both devices must agree there).
* ``torch_fn``: PyTorch's op for the parity check (``"auto"``: ``torch.<name>`` when
  ``fn`` is ``numbagrad.<name>``); ``grad``: whether the op is differentiable.
* ``cuda``: ``True``, or the reason the row does not run on CUDA; ``cpu``: ``True``, or
  the reason the CPU check skips it. ``xfail``: a known gap of the CUDA backend
  (``xfail(strict=True)`` there, so it fails the day it is fixed).
* ``noncontig``: also run the CUDA check on strided inputs; ``strided=False``: the op
  refuses strided inputs (``view``), so the CPU check (strided by default) runs it contiguous;
  ``tol``/``grad_tol``: per-dtype tolerances for the forward/the device gradients.
* ``inplace``: the op's in-place form with the same arguments (``"auto"``: every
  ``numbagrad.<alias>_`` when ``fn`` is ``numbagrad.<name>``, under each of its spellings);
  the CPU check runs it on a copy of the first input and compares with ``fn``, and the row
  covers its name too.
* ``const``: indices of floating inputs the op does not differentiate (a loss's class
  weights): the CPU check passes them as constants in the dtype under test.

Shapes stay tiny (<= 24 elements): the CUDA simulator costs ~0.3 ms per simulated thread.
"""
import numpy as np
import pytest

import numbagrad as ng
import numbagrad.nn.functional as F
from optest import randn
from reference import activations as R
from reference import indexing as RI
from reference import loss as RL
from reference import reduce as RR
from reference import shape as RS

F32, F64 = np.float32, np.float64
_PREFIXES = ("act-", "cmp-")


class OpInfo:
    """One row of the table (see the module docstring)."""

    def __init__(self, id, fn, ref, inputs, names=None, kinks=(), dtypes=(F32, F64), torch_fn="auto", grad=True,
                 cuda=True, cpu=True, noncontig=False, strided=True, const=(), inplace="auto", extremes=False, tol=None,
                 grad_tol=None, xfail=None, marks=()):
        self.id, self.fn, self.ref, self.inputs = id, fn, ref, list(inputs)
        self.kinks, self.dtypes, self.grad, self.cuda, self.cpu = tuple(kinks), dtypes, grad, cuda, cpu
        self.noncontig, self.strided, self.tol, self.grad_tol = noncontig, strided, tol, grad_tol
        self.const, self.extremes, self.xfail, self.marks = tuple(const), extremes, xfail, list(marks)
        self.names = tuple(_default_names(id) if names is None else names)
        self.torch_fn = _auto_torch(fn, self.names) if torch_fn == "auto" else torch_fn
        if inplace == "auto":
            self.inplace = _inplace_forms(fn, self.names)
        else:
            self.inplace = () if inplace is None else (inplace,)
            self.names += tuple(n + "_" for n in self.names if callable(getattr(ng.ops, n + "_", None)))
        self.names += tuple(f.__name__ for f in self.inplace if f.__name__ not in self.names and
                            getattr(ng.ops, f.__name__, None) is f)

    def make_inputs(self):
        """Fresh copies of the inputs (an op under test never sees another's arrays)."""
        return [a.copy() if isinstance(a, np.ndarray) else a for a in self.inputs]

    def device_opts(self):
        """The keyword arguments of :func:`optest.check_device` for this row."""
        return dict(dtypes=self.dtypes, grad=self.grad, noncontig=self.noncontig, tol=self.tol,
                    grad_tol=self.grad_tol)

    def __repr__(self):
        return f"OpInfo({self.id!r})"


def _default_names(id):
    stem = id
    for p in _PREFIXES:
        if stem.startswith(p):
            stem = stem[len(p):]
    stem = stem.split("-")[0]
    return (stem,) if callable(getattr(ng.ops, stem, None)) else ()


def _auto_torch(fn, names):
    """``torch.<name>`` (or ``torch.nn.functional.<name>``) when ``fn`` is numbagrad's op of that name."""
    if len(names) != 1 or fn is not getattr(ng, names[0], getattr(ng.ops, names[0], None)):
        return None
    try:
        import torch
    except ImportError:  # pragma: no cover
        return None
    return getattr(torch, names[0], None) or getattr(torch.nn.functional, names[0], None)


def torch_f(name, *args, **kwargs):
    """``torch.nn.functional.<name>(t, *args, **kwargs)`` as a row's ``torch_fn`` (None without torch)."""
    try:
        import torch
    except ImportError:  # pragma: no cover
        return None
    return lambda t: getattr(torch.nn.functional, name)(t, *args, **kwargs)


def _inplace_forms(fn, names):
    """``numbagrad.<alias>_`` for every spelling ``<alias>`` of ``fn`` (``abs``, ``absolute``)
    with an in-place form, when ``fn`` is numbagrad's op ``names[0]``."""
    if len(names) != 1 or fn is not getattr(ng.ops, names[0], None):
        return ()
    forms = [getattr(ng.ops, a + "_", None) for a, v in sorted(vars(ng.ops).items()) if v is fn]
    return tuple(f for f in forms if callable(f))


def pos(*shape, seed=None):
    """Positive inputs (domain of log, sqrt, ...), away from 0."""
    return np.abs(randn(*shape, seed=seed)) + 0.5


def I(*v):  # noqa: E743 - an int64 index array
    return np.array(v, dtype=np.int64)


def _quiet(fn):
    """``fn`` with NumPy's floating-point warnings off (log(0), 1/0). The simulator runs
    kernels as NumPy scalar code in its own threads (outside ``errstate``), so such a row
    also filters the warning."""
    def q(*a):
        with np.errstate(all="ignore"):
            return fn(*a)
    return q


def _setitem_op(x, v, idx):
    y = ng.clone(x)
    y[idx] = v
    return y


Op = OpInfo
_RANDOM = "random: compared with the CPU under the same seed on CUDA; tests/ops/test_dropout.py checks the CPU"

# ---- the table -----------------------------------------------------------------------------------------
a34, b34, b4, p34 = randn(3, 4, seed=1), randn(3, 4, seed=2), randn(4, seed=3), pos(3, 4, seed=4)
a234 = randn(2, 3, 4, seed=5)

OPS = []


def add(*cases):
    OPS.extend(cases)


# elementwise: binary arithmetic, broadcasting, scalar operands
add(
    Op("add", ng.add, np.add, [a34, b34], noncontig=True),
    Op("add-bcast-row", ng.add, np.add, [a34, b4]),
    Op("add-bcast-both", ng.add, np.add, [randn(2, 1, 4, seed=6), randn(3, 1, seed=7)]),
    Op("add-alpha", lambda a, b: ng.add(a, b, alpha=2.5), lambda a, b: a + 2.5 * b, [a34, b34]),
    Op("sub-bcast", ng.sub, np.subtract, [a34, randn(1, 4, seed=8)], noncontig=True),
    Op("mul-bcast-col", ng.mul, np.multiply, [a34, randn(3, 1, seed=9)]),
    Op("mul-0d", ng.mul, np.multiply, [randn(seed=10), randn(3, seed=11)]),
    Op("div", ng.div, np.divide, [a34, p34], noncontig=True),
    Op("div-bcast", ng.div, np.divide, [a34, pos(4, seed=12)]),
    Op("pow", ng.pow, np.power, [p34, b34]),
    Op("maximum", ng.maximum, np.maximum, [a34, b34]),
    Op("minimum-bcast", ng.minimum, np.minimum, [randn(4, seed=13), a34]),
    Op("remainder", ng.remainder, np.remainder, [a34 * 3, p34]),
    Op("lerp", lambda a, b: ng.lerp(a, b, 0.3), lambda a, b: a + 0.3 * (b - a), [a34, b34]),
    Op("rsub", ng.rsub, lambda a, b: b - a, [a34, b34]),
    Op("scalar-add", lambda x: x + 2.5, lambda x: x + 2.5, [a34], noncontig=True),
    Op("scalar-rsub", lambda x: 2.5 - x, lambda x: 2.5 - x, [a34]),
    Op("scalar-mul", lambda x: 3 * x, lambda x: 3 * x, [a34]),
    Op("scalar-div", lambda x: x / 4.0, lambda x: x / 4.0, [a34]),
    Op("scalar-rdiv", lambda x: 2.0 / x, lambda x: 2.0 / x, [p34]),
    Op("scalar-pow", lambda x: x ** 3, lambda x: x ** 3, [a34]),
    Op("scalar-rpow", lambda x: 2.0 ** x, lambda x: 2.0 ** x, [a34]),
    Op("neg-op", lambda x: -x, np.negative, [a34]),
    Op("floor_divide", lambda a, b: a // b, np.floor_divide, [a34 * 4, p34], grad=False,
       inplace=ng.floor_divide_),
)

# elementwise: comparisons and logic (bool results, never tracked)
for _name, _ref in [("eq", np.equal), ("ne", np.not_equal), ("lt", np.less), ("le", np.less_equal),
                    ("gt", np.greater), ("ge", np.greater_equal)]:
    add(Op(f"cmp-{_name}", getattr(ng, _name), _ref, [np.round(a34), np.round(b34)], grad=False))
add(
    Op("cmp-gt-scalar", lambda x: x > 0.1, lambda x: x > 0.1, [a34], grad=False),
    Op("cmp-eq-bcast", ng.eq, np.equal, [np.round(a34), np.round(b4)], grad=False),
    # (the CPU check passes bool arrays as they are, hence as_tensor)
    Op("logical_and", lambda a, b: ng.logical_and(ng.as_tensor(a), ng.as_tensor(b)), np.logical_and, [a34 > 0, b34 > 0],
       grad=False, inplace=ng.logical_and_),
    Op("logical_or", lambda a, b: ng.logical_or(ng.as_tensor(a), ng.as_tensor(b)), np.logical_or, [a34 > 0, b34 > 0],
       grad=False, inplace=ng.logical_or_),
    Op("logical_xor", lambda a, b: ng.logical_xor(ng.as_tensor(a), ng.as_tensor(b)), np.logical_xor, [a34 > 0, b34 > 0],
       grad=False, inplace=ng.logical_xor_),
    Op("logical_not", ng.logical_not, np.logical_not, [a34 > 0], grad=False),
    Op("isnan-isinf-isfinite", _quiet(lambda a: (ng.isnan(ng.log(a)), ng.isinf(1 / a), ng.isfinite(ng.log(a)))),
      _quiet(lambda a: (np.isnan(np.log(a)), np.isinf(1 / a), np.isfinite(np.log(a)))),
      [np.array([[-1.0, 0.0, 2.0], [1.0, -0.5, 3.0]])], grad=False, names=("isnan", "isinf", "isfinite"),
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
    add(Op(_name, getattr(ng, _name), _ref, [_x], noncontig=_name in ("exp", "log", "abs")))

# pointwise math (ops/pointwise.py): NumPy's and SciPy's ufuncs with their CUDA twins
from scipy import special as _sp  # noqa: E402
u34 = np.tanh(a34) * 0.9  # inside (-1, 1): the domain of asin, atanh
add(*[Op(n, getattr(ng, n), r, [x]) for n, r, x in [
    ("tan", np.tan, u34), ("asin", np.arcsin, u34), ("atanh", np.arctanh, u34), ("sinh", np.sinh, a34),
    ("asinh", np.arcsinh, a34), ("erf", _sp.erf, a34), ("erfc", _sp.erfc, a34), ("lgamma", _sp.gammaln, p34)]])
add(*[Op(n, getattr(ng, n), r, [a34, p34]) for n, r in [
    ("atan2", np.arctan2), ("hypot", np.hypot), ("fmod", np.fmod), ("copysign", np.copysign),
    ("logaddexp", np.logaddexp)]])
add(
    Op("clamp", lambda x: ng.clamp(x, -0.5, 0.7), lambda x: np.clip(x, -0.5, 0.7), [a34], noncontig=True),
    Op("clamp_min", lambda x: ng.clamp_min(x, 0.1), lambda x: np.maximum(x, 0.1), [a34]),
    Op("clamp-tensor-bounds", lambda x, lo, hi: ng.clamp(x, lo, hi),
       lambda x, lo, hi: np.minimum(np.maximum(x, lo), hi),
      [a34, -np.abs(b4), np.abs(randn(3, 1, seed=14))]),
    Op("where", lambda c, a, b: ng.where(c, a, b), np.where, [a34 > 0, a34, b34], noncontig=True),
    Op("where-bcast-scalar", lambda c, a: ng.where(c, a, 0.5), lambda c, a: np.where(c, a, 0.5), [b4 > 0, a34]),
)

# reductions
add(
    Op("sum-all", ng.sum, np.sum, [a34], noncontig=True),
    Op("sum-dim", lambda x: ng.sum(x, 1), lambda x: np.sum(x, 1), [a34], noncontig=True),
    Op("sum-dims-keepdim", lambda x: ng.sum(x, (0, 2), keepdim=True), lambda x: np.sum(x, (0, 2), keepdims=True),
      [a234]),
    Op("sum-int", lambda i: ng.sum(i, 0), lambda i: np.sum(i, 0), [I(1, 2, 3, 4).reshape(2, 2)], grad=False),
    Op("mean", lambda x: ng.mean(x, 0), lambda x: np.mean(x, 0), [a34], noncontig=True),
    Op("mean-all", ng.mean, np.mean, [a234]),
    Op("var", lambda x: ng.var(x, 1), lambda x: np.var(x, 1, ddof=1), [a34]),
    Op("var-c0-keepdim", lambda x: ng.var(x, 0, correction=0, keepdim=True),
      lambda x: np.var(x, 0, keepdims=True), [a34]),
    Op("std", lambda x: ng.std(x, -1), lambda x: np.std(x, -1, ddof=1), [a234]),
    Op("var_mean", lambda x: ng.var_mean(x, 1), lambda x: (np.var(x, 1, ddof=1), np.mean(x, 1)), [a34]),
    Op("prod", lambda x: ng.prod(x, 1), lambda x: np.prod(x, 1), [a34]),
    Op("prod-all-zero", ng.prod, np.prod, [np.array([[1.5, 0.0, -2.0], [0.5, 3.0, -1.0]])]),
    Op("max-all", ng.max, np.max, [a34], noncontig=True),
    Op("min-all-ties", ng.min, np.min, [np.array([[1.0, -2.0, 3.0], [-2.0, 0.5, 4.0]])]),
    Op("amax-dims", lambda x: ng.amax(x, (0, 2)), lambda x: np.amax(x, (0, 2)), [a234]),
    Op("amin-keepdim", lambda x: ng.amin(x, 1, keepdim=True), lambda x: np.amin(x, 1, keepdims=True), [a34]),
    Op("max-dim", lambda x: tuple(ng.max(x, 1)), lambda x: (np.max(x, 1), np.argmax(x, 1)), [a34],
      noncontig=True),
    Op("min-dim-keepdim", lambda x: tuple(ng.min(x, 0, keepdim=True)),
      lambda x: (np.min(x, 0, keepdims=True), np.argmin(x, 0)[None]), [a34]),
    Op("argmax", lambda x: ng.argmax(x, 1), lambda x: np.argmax(x, 1), [a34], grad=False),
    Op("argmin-all", ng.argmin, np.argmin, [a34], grad=False),
    Op("argmax-keepdim", lambda x: ng.argmax(x, 0, keepdim=True), lambda x: np.argmax(x, 0)[None], [a34],
      grad=False),
    Op("logsumexp", lambda x: ng.logsumexp(x, 1), lambda x: RR.logsumexp(x, 1), [a34 * 5], noncontig=True),
    Op("logsumexp-dims", lambda x: ng.logsumexp(x, (0, 2), keepdim=True), lambda x: RR.logsumexp(x, (0, 2), True),
       [a234]),
    Op("norm-2", ng.norm, np.linalg.norm, [a34]),
    Op("norm-1-dim", lambda x: ng.norm(x, 1, dim=1), lambda x: np.sum(np.abs(x), 1), [a34]),
    Op("norm-inf", lambda x: ng.norm(x, float("inf"), dim=0), lambda x: np.max(np.abs(x), 0), [a34]),
    Op("norm-3", lambda x: ng.norm(x, 3, dim=1), lambda x: np.sum(np.abs(x) ** 3, 1) ** (1 / 3), [a34]),
    Op("cumsum", lambda x: ng.cumsum(x, 1), lambda x: np.cumsum(x, 1), [a34], noncontig=True),
    Op("cumsum-dim0", lambda x: ng.cumsum(x, 0), lambda x: np.cumsum(x, 0), [a234]),
    Op("all-any", lambda x: (ng.all(x > -1), ng.any(x > 1, 1), ng.all(x > -1, 0, keepdim=True)),
      lambda x: (np.all(x > -1), np.any(x > 1, 1), np.all(x > -1, 0, keepdims=True)), [a34], grad=False,
      names=("all", "any")),
)

# matmul
add(
    Op("matmul-2d", ng.matmul, np.matmul, [a34, randn(4, 2, seed=20)], noncontig=True),
    Op("mm", ng.mm, np.matmul, [randn(2, 3, seed=21), randn(3, 4, seed=22)]),
    Op("matmul-vec-mat", ng.matmul, np.matmul, [randn(3, seed=23), randn(3, 2, seed=24)]),
    Op("matmul-mat-vec", ng.matmul, np.matmul, [randn(2, 3, seed=25), randn(3, seed=26)]),
    Op("dot", ng.dot, np.dot, [randn(4, seed=27), randn(4, seed=28)]),
    Op("matmul-batch-bcast", ng.matmul, np.matmul, [randn(2, 2, 3, seed=29), randn(3, 2, seed=30)]),
    Op("matmul-batch-both", ng.matmul, np.matmul, [randn(2, 1, 2, 3, seed=31), randn(2, 3, 2, seed=32)]),
    Op("bmm", ng.bmm, np.matmul, [randn(2, 2, 3, seed=33), randn(2, 3, 2, seed=34)]),
    Op("outer", ng.outer, np.outer, [randn(3, seed=35), randn(4, seed=36)]),
    Op("linear", F.linear, lambda x, w, b: x @ w.T + b, [a34, randn(2, 4, seed=37), randn(2, seed=38)],
      noncontig=True),
    Op("linear-nobias-3d", F.linear, lambda x, w: x @ w.T, [randn(2, 2, 3, seed=39), randn(4, 3, seed=40)]),
)

# shape ops
add(
    Op("reshape", lambda x: ng.reshape(x, (4, 3)), lambda x: x.reshape(4, 3), [a34], noncontig=True),
    Op("view", lambda x: x.view(2, -1), lambda x: x.reshape(2, -1), [a34], strided=False),
    Op("flatten", lambda x: ng.flatten(x, 1), lambda x: x.reshape(2, 12), [a234]),
    Op("unflatten", lambda x: ng.unflatten(x, 1, (2, 2)), lambda x: x.reshape(3, 2, 2), [a34]),
    Op("transpose", lambda x: ng.transpose(x, 0, 2), lambda x: np.swapaxes(x, 0, 2), [a234]),
    Op("permute", lambda x: ng.permute(x, 2, 0, 1), lambda x: np.transpose(x, (2, 0, 1)), [a234], noncontig=True),
    Op("T", lambda x: x.T, lambda x: x.T, [a34]),
    Op("t-then-add", lambda x, y: x.t() + y, lambda x, y: x.T + y, [a34, randn(4, 3, seed=41)]),
    Op("movedim", lambda x: ng.movedim(x, 0, -1), lambda x: np.moveaxis(x, 0, -1), [a234]),
    Op("expand", lambda x: ng.expand(x, 2, 3, 4), lambda x: np.broadcast_to(x, (2, 3, 4)), [randn(3, 1, seed=42)]),
    Op("expand-then-mul", lambda x, y: x.expand(3, 4) * y, lambda x, y: x * y, [randn(1, 4, seed=43), a34]),
    Op("squeeze", lambda x: ng.squeeze(x, 1), lambda x: np.squeeze(x, 1), [randn(3, 1, 4, seed=44)]),
    Op("unsqueeze", lambda x: ng.unsqueeze(x, -1), lambda x: x[..., None], [a34]),
    Op("cat", lambda a, b: ng.cat([a, b], 1), lambda a, b: np.concatenate([a, b], 1), [a34, randn(3, 2, seed=45)],
      noncontig=True),
    Op("cat-dim0-3", lambda a, b, c: ng.cat([a, b, c]), lambda a, b, c: np.concatenate([a, b, c]),
      [randn(1, 3, seed=46), randn(2, 3, seed=47), randn(1, 3, seed=48)]),
    Op("stack", lambda a, b: ng.stack([a, b], 1), lambda a, b: np.stack([a, b], 1), [a34, b34]),
    Op("hstack-vstack", lambda a, b: (ng.hstack([a, b]), ng.vstack([a, b])),
      lambda a, b: (np.hstack([a, b]), np.vstack([a, b])), [randn(4, seed=49), randn(4, seed=50)],
      names=("hstack", "vstack")),
    Op("split", lambda x: ng.split(x, 2, 1), lambda x: tuple(np.split(x, 2, 1)), [a34], noncontig=True),
    Op("split-sizes", lambda x: ng.split(x, [1, 3], 1), lambda x: tuple(np.split(x, [1], 1)), [a34]),
    Op("chunk-uneven", lambda x: ng.chunk(x, 2, 0), lambda x: tuple(np.split(x, [2], 0)), [a34]),
    Op("unbind", lambda x: ng.unbind(x, 1), lambda x: tuple(x[:, i] for i in range(3)), [randn(2, 3, seed=51)]),
    Op("narrow", lambda x: ng.narrow(x, 1, 1, 2), lambda x: x[:, 1:3], [a34]),
    Op("pad-constant", lambda x: ng.pad(x, (1, 2), value=0.5), lambda x: RS.pad(x, (1, 2), value=0.5), [a34],
      noncontig=True),
    Op("pad-constant-2d", lambda x: ng.pad(x, (1, 0, 0, 2)), lambda x: RS.pad(x, (1, 0, 0, 2)), [randn(2, 3, seed=52)]),
    Op("pad-reflect", lambda x: F.pad(x, (2, 1), mode="reflect"), lambda x: RS.pad(x, (2, 1), "reflect"), [a34]),
    Op("pad-replicate", lambda x: F.pad(x, (1, 2, 1, 0), mode="replicate"),
      lambda x: RS.pad(x, (1, 2, 1, 0), "replicate"), [randn(2, 3, seed=53)]),
    Op("pad-circular", lambda x: F.pad(x, (1, 2), mode="circular"), lambda x: RS.pad(x, (1, 2), "circular"),
      [randn(2, 3, seed=54)]),
    Op("flip", lambda x: ng.flip(x, (0, 2)), lambda x: np.flip(x, (0, 2)), [a234]),
    Op("flip-then-mul", lambda x, y: ng.flip(x, 1) * y, lambda x, y: np.flip(x, 1) * y, [a34, b34]),
    Op("roll", lambda x: ng.roll(x, 1, 1), lambda x: np.roll(x, 1, 1), [a34], noncontig=True),
    Op("roll-multi", lambda x: ng.roll(x, (1, -2), (0, 1)), lambda x: np.roll(x, (1, -2), (0, 1)), [a34]),
    Op("roll-flat", lambda x: ng.roll(x, 5), lambda x: np.roll(x, 5), [a34]),
    Op("repeat", lambda x: x.repeat(2, 1, 2), lambda x: np.tile(x, (2, 1, 2)), [randn(2, 3, seed=55)]),
    Op("tile", lambda x: ng.tile(x, (2,)), lambda x: np.tile(x, 2), [randn(2, 3, seed=56)]),
    Op("contiguous-clone", lambda x: (ng.contiguous(x.T), ng.clone(x)), lambda x: (x.T, x), [a34],
       names=("contiguous", "clone")),
    Op("cast-roundtrip", lambda x: (x.to(ng.float32 if x.dtype == np.float64 else ng.float64) * 2).to(x.dtype),
      lambda x: x * 2, [a34], tol={F64: dict(rtol=1e-6, atol=1e-7)},
      cpu="float64 finite differences see the float32 round trip's rounding; tests/ops/test_shape.py checks casts"),
)

# indexing
_m34 = a34 > 0.2
add(
    Op("getitem-int", lambda x: x[1], lambda x: x[1], [a34]),
    Op("getitem-slices", lambda x: x[1:, ::2], lambda x: x[1:, ::2], [a34], noncontig=True),
    Op("getitem-neg-step", lambda x: x[::-1, 1], lambda x: x[::-1, 1], [a34]),
    Op("getitem-none-ellipsis", lambda x: x[None, ..., 2], lambda x: x[None, ..., 2], [a234]),
    Op("getitem-0d", lambda x: x[1, 2], lambda x: x[1, 2], [a34]),
    Op("getitem-rows", lambda x, i: x[i], lambda x, i: x[i], [a34, I(2, 0, 2, -1)], noncontig=True),
    Op("getitem-cols", lambda x, i: x[:, i], lambda x, i: x[:, i], [a34, I(3, 1, 1)]),
    Op("getitem-rows-2d-index", lambda x, i: x[i], lambda x, i: x[i], [a34, I(0, 2, 2, 1).reshape(2, 2)]),
    Op("getitem-bool-mask", lambda x, m: x[m], lambda x, m: x[m], [a34, _m34]),
    Op("getitem-bool-rows", lambda x, m: x[m], lambda x, m: x[m], [a34, np.array([True, False, True])]),
    Op("getitem-two-arrays", lambda x, i, j: x[i, j], lambda x, i, j: x[i, j], [a34, I(0, 2, 0), I(1, 3, 1)]),
    Op("setitem-slice", lambda x, v: _setitem_op(x, v, (slice(1, 3), 1)),
      lambda x, v: RI.setitem(x, v, (slice(1, 3), 1)), [a34, randn(2, seed=60)]),
    Op("setitem-bcast-row", lambda x, v: _setitem_op(x, v, (1,)), lambda x, v: RI.setitem(x, v, (1,)),
      [a34, randn(1, 4, seed=61)]),
    Op("setitem-scalar-elem", lambda x, v: _setitem_op(x, v, (0, 2)), lambda x, v: RI.setitem(x, v, (0, 2)),
      [a34, randn(seed=62)]),
    Op("setitem-rows", lambda x, v, i: _setitem_op(x, v, i), lambda x, v, i: RI.setitem(x, v, i),
      [a34, randn(2, 4, seed=63), I(2, 0)]),
    Op("gather", lambda x, i: ng.gather(x, 1, i), lambda x, i: RI.gather(x, 1, i),
      [a34, I(0, 3, 3, 1, 2, 2).reshape(3, 2)], noncontig=True),
    Op("gather-dim0", lambda x, i: ng.gather(x, 0, i), lambda x, i: RI.gather(x, 0, i),
      [a34, I(2, 0, 1, 1, 0, 0, 2, 2).reshape(2, 4)]),
    Op("take_along_dim", lambda x, i: ng.take_along_dim(x, i, 1), lambda x, i: np.take_along_axis(x, i, 1),
      [a34, I(-1, 0, 1).reshape(3, 1)]),
    Op("take", lambda x, i: ng.take(x, i), lambda x, i: np.take(x, i), [a34, I(0, 11, -1, 5)]),
    Op("scatter", lambda x, i, s: ng.scatter(x, 1, i, s), lambda x, i, s: RI.scatter(x, 1, i, s),
      [a34, I(0, 3, 1, 2, 2, 0).reshape(3, 2), randn(3, 2, seed=64)]),
    Op("scatter-value", lambda x, i: ng.scatter(x, 0, i, value=1.5), lambda x, i: RI.scatter(x, 0, i, 1.5),
      [a34, I(2, 0, 1, 1).reshape(1, 4)]),
    Op("scatter_add", lambda x, i, s: ng.scatter_add(x, 0, i, s), lambda x, i, s: RI.scatter(x, 0, i, s, add=True),
      [a34, I(0, 0, 2, 1, 0, 0, 0, 2).reshape(2, 4), randn(2, 4, seed=65)], noncontig=True),
    Op("index_select", lambda x, i: ng.index_select(x, 1, i), lambda x, i: x[:, i], [a34, I(3, 0, 3)],
      noncontig=True),
    Op("index_select-dim0", lambda x, i: ng.index_select(x, 0, i), lambda x, i: x[i], [a234, I(1, 1, 0)]),
    Op("index_add", lambda x, i, s: ng.index_add(x, 0, i, s, alpha=2.0),
      lambda x, i, s: RI.index_add(x, 0, i, s, 2.0), [a34, I(2, 0, 2), randn(3, 4, seed=66)]),
    Op("masked_fill", lambda x, m: ng.masked_fill(x, m, -1.0), lambda x, m: np.where(m, -1.0, x), [a34, _m34],
      noncontig=True),
    Op("masked_fill-bcast", lambda x, m: ng.masked_fill(x, m, 2.0), lambda x, m: np.where(m, 2.0, x),
      [a34, b4 > 0]),
    Op("masked_select", lambda x, m: ng.masked_select(x, m), lambda x, m: x[m], [a34, _m34]),
    Op("one_hot", lambda i: F.one_hot(i, 5), lambda i: np.eye(5, dtype=np.int64)[i], [I(0, 4, 2, 2)], grad=False),
    Op("one_hot-infer", lambda i: F.one_hot(i), lambda i: np.eye(3, dtype=np.int64)[i], [I(0, 2, 1, 1).reshape(2, 2)],
      grad=False),
    Op("embedding", lambda i, w: F.embedding(i, w), lambda i, w: w[i],
       [I(1, 3, 1, 0).reshape(2, 2), randn(4, 3, seed=67)]),
    Op("embedding-padding", lambda i, w: F.embedding(i, w, padding_idx=1), lambda i, w: w[i],
      [I(1, 3, 1, 0, 2), randn(4, 3, seed=68)],
      cpu="padding_idx's row has no gradient by definition, which finite differences cannot see; "
          "tests/ops/test_indexing.py::test_embedding checks it against PyTorch"),
    Op("nonzero", lambda x: ng.nonzero(x > 0), lambda x: np.argwhere(x > 0), [a34], grad=False),
)

# activations
# (name, fn, reference, kinks, in-place form): the kinks are where the derivative jumps
_ACT = [
    ("relu", F.relu, R.relu, [0.0], ng.relu_), ("relu6", F.relu6, R.relu6, [0.0, 6.0], None),
    ("leaky_relu", lambda x: F.leaky_relu(x, 0.2), lambda x: R.leaky_relu(x, 0.2), [0.0],
     lambda x: ng.leaky_relu_(x, 0.2)),
    ("elu", F.elu, R.elu, [0.0], ng.elu_), ("selu", F.selu, R.selu, [0.0], ng.selu_),
    ("celu", lambda x: ng.celu(x, 2.0), lambda x: R.celu(x, 2.0), [0.0], lambda x: ng.celu_(x, 2.0)),
    ("gelu", F.gelu, R.gelu, [], None),
    ("gelu-tanh", lambda x: F.gelu(x, approximate="tanh"), lambda x: R.gelu(x, approximate="tanh"), [], None),
    ("silu", F.silu, R.silu, [], None), ("sigmoid", F.sigmoid, R.sigmoid, [], ng.sigmoid_),
    ("tanh", F.tanh, R.tanh, [], ng.tanh_),
    ("softplus", F.softplus, R.softplus, [], None),
    ("softplus-beta2-thr1", lambda x: F.softplus(x, 2.0, 1.0), lambda x: R.softplus(x, 2.0, 1.0), [0.5], None),
    ("hardtanh", lambda x: F.hardtanh(x, -0.5, 0.8), lambda x: R.hardtanh(x, -0.5, 0.8), [-0.5, 0.8],
     lambda x: ng.hardtanh_(x, -0.5, 0.8)),
    ("hardsigmoid", ng.hardsigmoid, R.hardsigmoid, [-3.0, 3.0], None),
    ("hardswish", ng.hardswish, R.hardswish, [-3.0, 3.0], None),
    ("mish", F.mish, R.mish, [], None), ("logsigmoid", ng.logsigmoid, R.logsigmoid, [], None),
    ("softsign", ng.softsign, R.softsign, [0.0], None),
    ("tanhshrink", ng.tanhshrink, R.tanhshrink, [], None),
    ("softshrink", ng.softshrink, R.softshrink, [-0.5, 0.5], None),
    ("hardshrink", ng.hardshrink, R.hardshrink, [-0.5, 0.5], None),
    ("threshold", lambda x: ng.threshold(x, 0.1, -2.0), lambda x: R.threshold(x, 0.1, -2.0), [0.1],
     lambda x: ng.threshold_(x, 0.1, -2.0)),
]
_ACT_SCALE = {"relu6": 4.0, "hardsigmoid": 4.0, "hardswish": 4.0}  # reach every piece
_ACT_TORCH = {"leaky_relu": torch_f("leaky_relu", 0.2), "celu": torch_f("celu", 2.0),
              "gelu-tanh": torch_f("gelu", approximate="tanh"), "softplus-beta2-thr1": torch_f("softplus", 2.0, 1.0),
              "hardtanh": torch_f("hardtanh", -0.5, 0.8), "threshold": torch_f("threshold", 0.1, -2.0)}
for _name, _fn, _ref, _kinks, _inplace in _ACT:
    add(Op(f"act-{_name}", _fn, _ref, [a34 * _ACT_SCALE.get(_name, 2.0)], kinks=_kinks, inplace=_inplace,
           torch_fn=_ACT_TORCH.get(_name, "auto"), extremes=True, noncontig=_name in ("relu", "gelu", "sigmoid")))
add(
    Op("act-prelu", ng.prelu, lambda x, w: np.where(x > 0, x, w[None, :, None] * x),
      [a234, np.array([0.25, -0.5, 0.1])]),
    Op("act-prelu-scalar", ng.prelu, lambda x, w: np.where(x > 0, x, w * x), [a34, np.array([0.3])]),
    Op("act-glu", lambda x: ng.glu(x, -1), lambda x: R.glu(x, -1), [a34]),
)

# softmax family
add(
    Op("softmax", lambda x: F.softmax(x, 1), lambda x: R.softmax(x, 1), [a34 * 3], noncontig=True,
       torch_fn=torch_f("softmax", 1)),
    Op("softmax-dim0", lambda x: F.softmax(x, 0), lambda x: R.softmax(x, 0), [a34], torch_fn=torch_f("softmax", 0)),
    Op("softmax-3d-mid", lambda x: F.softmax(x, 1), lambda x: R.softmax(x, 1), [a234], torch_fn=torch_f("softmax", 1)),
    Op("log_softmax", lambda x: F.log_softmax(x, -1), lambda x: R.log_softmax(x, -1), [a34 * 3], noncontig=True,
       torch_fn=torch_f("log_softmax", -1)),
    Op("log_softmax-dim0", lambda x: F.log_softmax(x, 0), lambda x: R.log_softmax(x, 0), [a234],
       torch_fn=torch_f("log_softmax", 0)),
    Op("softmin", lambda x: ng.softmin(x, 1), lambda x: R.softmin(x, 1), [a34], torch_fn=torch_f("softmin", 1)),
)

# dropout (train mode): the same seed draws the same mask on both devices -> compare with the CPU
add(
    Op("dropout", lambda x: F.dropout(x, 0.4), None, [a34], noncontig=True, cpu=_RANDOM),
    Op("dropout-eval", lambda x: F.dropout(x, 0.4, training=False) * 1, lambda x: x, [a34]),
    Op("dropout1d", lambda x: ng.dropout1d(x, 0.5), None, [a234], cpu=_RANDOM),
    Op("dropout2d-4d", lambda x: ng.dropout2d(x, 0.5), None, [randn(2, 3, 2, 2, seed=70)], cpu=_RANDOM),
    Op("alpha_dropout", lambda x: ng.alpha_dropout(x, 0.3, training=True), None, [a34], cpu=_RANDOM),
)

# losses
add(
    Op("cross_entropy", F.cross_entropy, RL.cross_entropy, [a34, I(0, 3, 1)], noncontig=True, names=("cross_entropy",)),
    Op("cross_entropy-none-ignore", lambda x, t: F.cross_entropy(x, t, reduction="none", ignore_index=1),
      lambda x, t: RL.cross_entropy(x, t, reduction="none", ignore_index=1), [a34, I(0, 1, 3)]),
    Op("cross_entropy-weight-smooth-sum", lambda x, t, w: F.cross_entropy(x, t, w, reduction="sum",
                                                                         label_smoothing=0.1),
      lambda x, t, w: RL.cross_entropy(x, t, w, reduction="sum", label_smoothing=0.1),
      [a34, I(2, 3, 0), pos(4, seed=71)],
      const=(2,)),
    Op("cross_entropy-soft", F.cross_entropy,
      lambda x, p: -(p * (x - RR.logsumexp(x, 1, keepdims=True))).sum(1).mean(), [a34, R.softmax(b34, 1)],
      const=(1,)),  # numbagrad gives probability targets no gradient (PyTorch does)
    Op("cross_entropy-3d", F.cross_entropy,
      lambda x, t: RL.cross_entropy(np.moveaxis(x, 1, -1).reshape(-1, 3), t.reshape(-1)),
      [randn(2, 3, 2, seed=72), I(0, 2, 1, 1).reshape(2, 2)]),
    Op("cross_entropy-3d-none", lambda x, t: F.cross_entropy(x, t, reduction="none"),
      lambda x, t: RL.cross_entropy(np.moveaxis(x, 1, -1).reshape(-1, 3), t.reshape(-1),
                                    reduction="none").reshape(2, 2),
      [randn(2, 3, 2, seed=72), I(0, 2, 1, 1).reshape(2, 2)]),
    Op("nll_loss", lambda x, t: F.nll_loss(F.log_softmax(x, 1), t), RL.cross_entropy, [a34, I(0, 3, 1)],
       names=("nll_loss",)),
    Op("mse_loss", F.mse_loss, lambda a, b: np.mean((a - b) ** 2), [a34, b34], names=("mse_loss",)),
    Op("l1_loss-sum", lambda a, b: F.l1_loss(a, b, reduction="sum"), lambda a, b: np.sum(np.abs(a - b)), [a34, b34],
       names=("l1_loss",)),
    Op("composed-nll", lambda x, t: -ng.gather(F.log_softmax(x, 1), 1, t[:, None]).mean(),
      lambda x, t: RL.cross_entropy(x, t), [a34, I(0, 3, 1)]),
)

# more pointwise math (ops/pointwise.py), with tests/ops/test_pointwise.py's tolerances
_PW = {F32: dict(rtol=2e-6, atol=1e-6), F64: dict(rtol=1e-12, atol=1e-13)}
b4p, b34p = np.abs(b4) + 0.2, np.abs(b34) + 0.2
add(*[Op(n, getattr(ng, n), r, [x], tol=_PW) for n, r, x in [
    ("acos", np.arccos, u34), ("acosh", np.arccosh, np.abs(a34) + 1.2), ("atan", np.arctan, a34),
    ("cosh", np.cosh, a34), ("deg2rad", np.deg2rad, a34), ("rad2deg", np.rad2deg, a34),
    ("logit", lambda x: np.log(x / (1 - x)), (u34 + 1) / 2), ("positive", np.positive, a34)]])
add(*[Op(n, getattr(ng, n), r, [x, y], tol=_PW) for n, r, x, y in [
    ("xlogy", lambda x, y: x * np.log(y), b34p, b4p), ("logaddexp2", np.logaddexp2, b34, b4),
    ("divide", np.divide, b34p, b4p), ("multiply", np.multiply, b34, b4), ("subtract", np.subtract, b34, b4)]])

# aliases' spellings, in-place forms and the small ops (2 x 3 inputs)
x23, y23, p23 = randn(2, 3, seed=101), randn(2, 3, seed=102), pos(2, 3, seed=103)
u23, x31, y14 = np.tanh(x23) * 0.9, randn(3, 1, seed=104), randn(1, 4, seed=105)
_ex = np.array([[0.5, np.nan, np.inf], [-np.inf, -1.5, 2.0]])
add(Op("true_divide", ng.true_divide, np.divide, [x23, p23]))
add(
    Op("erfinv", ng.erfinv, _sp.erfinv, [u34], tol=_PW, cuda="CPU only: SciPy's erfinv has no CUDA kernel here"),
    Op("digamma", ng.digamma, _sp.digamma, [p23]),  # its gradient is trigamma (ops/pointwise.py)
    Op("float_power", ng.float_power, np.power, [b34p, b4p], dtypes=(F64,), tol=_PW),  # float64 always, as torch
    Op("heaviside", ng.heaviside, np.heaviside, [np.round(x23), y23], grad=False),
    Op("signbit", ng.signbit, np.signbit, [x23], grad=False),
    Op("nan_to_num", lambda x: ng.nan_to_num(x, 1.0, 5.0, -5.0), lambda x: np.nan_to_num(x, nan=1.0, posinf=5.0,
                                                                                           neginf=-5.0),
       [_ex], inplace=lambda x: ng.nan_to_num_(x, 1.0, 5.0, -5.0), strided=False),  # optest's strided copy: no NaN
    Op("clamp_max", lambda x: ng.clamp_max(x, 0.2), lambda x: np.minimum(x, 0.2), [x23],
       inplace=lambda x: ng.clamp_max_(x, 0.2)),
    Op("clamp_min-inplace", lambda x: ng.clamp_min(x, -0.2), lambda x: np.maximum(x, -0.2), [x23],
       inplace=lambda x: ng.clamp_min_(x, -0.2)),
    Op("addcmul", lambda x, a, b: ng.addcmul(x, a, b, value=0.5), lambda x, a, b: x + 0.5 * a * b,
       [x23, y23, p23], inplace=lambda x, a, b: ng.addcmul_(x, a, b, value=0.5)),
    Op("addcdiv", lambda x, a, b: ng.addcdiv(x, a, b, value=0.5), lambda x, a, b: x + 0.5 * a / b,
       [x23, y23, p23], inplace=lambda x, a, b: ng.addcdiv_(x, a, b, value=0.5)),
    Op("isclose", ng.isclose, np.isclose, [x23, np.where(x23 > 0, x23, x23 + 0.5)], grad=False),
    Op("equal-allclose", lambda a, b: (ng.equal(a, a), ng.equal(a, b), ng.allclose(a, b), ng.allclose(a, a)),
       lambda a, b: (True, False, False, True), [x23, x23 + 0.5], names=("equal", "allclose"), grad=False,
       cuda="returns Python bools; tests/cuda/test_cuda_ops.py::test_comparison_helpers_and_nonzero_on_device"),
    Op("std_mean", lambda x: ng.std_mean(x, 1), lambda x: (np.std(x, 1, ddof=1), np.mean(x, 1)), [x23]),
    Op("normalize", lambda x: ng.normalize(x, dim=1), lambda x: x / np.linalg.norm(x, axis=1, keepdims=True), [x23]),
    Op("tril", lambda x: ng.tril(x, 1), lambda x: np.tril(x, 1), [a34]),
    Op("triu", lambda x: ng.triu(x, -1), lambda x: np.triu(x, -1), [a34]),
    Op("argwhere", lambda x: ng.argwhere(x > 0), lambda x: np.argwhere(x > 0), [x23], grad=False),
    Op("sort", lambda x: tuple(ng.sort(x, 1)), lambda x: (np.sort(x, 1), np.argsort(x, 1)), [x23]),
    Op("argsort", lambda x: ng.argsort(x, 0), lambda x: np.argsort(x, 0), [x23], grad=False),
    Op("topk", lambda x: tuple(ng.topk(x, 2, 1)),
       lambda x: (-np.sort(-x, 1)[:, :2], np.argsort(-x, 1)[:, :2]), [x23]),
    Op("kthvalue", lambda x: tuple(ng.kthvalue(x, 2, 1)), lambda x: (np.sort(x, 1)[:, 1], np.argsort(x, 1)[:, 1]),
       [x23]),
    Op("searchsorted", ng.searchsorted, np.searchsorted, [np.sort(randn(5, seed=106)), x23], grad=False),
    Op("bucketize", ng.bucketize, lambda v, b: np.searchsorted(b, v), [x23, np.sort(randn(5, seed=107))],
       grad=False),
    Op("unique", ng.unique, np.unique, [np.round(a34)], grad=False),
    Op("expand_as", ng.expand_as, lambda x, y: np.broadcast_to(x, y.shape), [x31, a34]),
    Op("view_as", ng.view_as, lambda x, y: x.reshape(y.shape), [x23, randn(3, 2, seed=108)], strided=False),
    Op("reshape_as", ng.reshape_as, lambda x, y: x.reshape(y.shape), [x23, randn(3, 2, seed=108)]),
    Op("broadcast_to", lambda x: ng.broadcast_to(x, (3, 4)), lambda x: np.broadcast_to(x, (3, 4)), [x31]),
    Op("broadcast_tensors", lambda a, b: tuple(ng.broadcast_tensors(a, b)),
       lambda a, b: tuple(np.broadcast_arrays(a, b)), [x31, y14]),
    Op("ravel", ng.ravel, np.ravel, [x23]),
    Op("einsum", lambda a, b: ng.einsum("ij,jk->ik", a, b), lambda a, b: np.einsum("ij,jk->ik", a, b),
       [x23, randn(3, 2, seed=109)]),
    Op("pixel_shuffle", lambda x: ng.pixel_shuffle(x, 2),
       lambda x: x.reshape(1, 1, 2, 2, 1, 2).transpose(0, 1, 4, 2, 5, 3).reshape(1, 1, 2, 4),
       [randn(1, 4, 1, 2, seed=110)]),
    Op("pixel_unshuffle", lambda x: ng.pixel_unshuffle(x, 2),
       lambda x: x.reshape(1, 1, 1, 2, 2, 2).transpose(0, 1, 3, 5, 2, 4).reshape(1, 4, 1, 2),
       [randn(1, 1, 2, 4, seed=111)]),
    Op("interpolate-nearest", lambda x: ng.interpolate(x, scale_factor=2), lambda x: np.repeat(x, 2, -1),
       [randn(1, 2, 3, seed=112)]),
    Op("fill_", lambda x: ng.fill_(x * 1, 0.5), lambda x: np.full_like(x, 0.5), [x23]),
    Op("zero_", lambda x: ng.zero_(x * 1), np.zeros_like, [x23]),
    Op("copy_", lambda x, y: ng.copy_(x * 1, y), lambda x, y: np.broadcast_to(y, x.shape), [x23, randn(3, seed=113)]),
    Op("masked_fill_", lambda x, m: ng.masked_fill_(x * 1, m, -1.0), lambda x, m: np.where(m, -1.0, x),
       [x23, x23 > 0.3]),
    Op("index_add_", lambda x, i, s: ng.index_add_(x * 1, 1, i, s), lambda x, i, s: RI.index_add(x, 1, i, s),
       [x23, I(2, 0), randn(2, 2, seed=114)]),
    Op("scatter_", lambda x, i, s: ng.scatter_(x * 1, 1, i, s), lambda x, i, s: RI.scatter(x, 1, i, s),
       [x23, I(2, 0, 1, 2).reshape(2, 2), randn(2, 2, seed=115)]),
    Op("scatter_add_", lambda x, i, s: ng.scatter_add_(x * 1, 1, i, s),
       lambda x, i, s: RI.scatter(x, 1, i, s, add=True), [x23, I(2, 2, 1, 1).reshape(2, 2), randn(2, 2, seed=116)]),
    Op("dropout3d", lambda x: ng.dropout3d(x, 0.5), None, [randn(2, 2, 1, 1, 2, seed=117)], cpu=_RANDOM),
    Op("feature_alpha_dropout", lambda x: ng.feature_alpha_dropout(x, 0.5, training=True), None,
       [randn(2, 3, 2, seed=118)], cpu=_RANDOM),
    Op("feature_dropout", lambda x: ng.feature_dropout(x, 0.5, True), None, [randn(2, 3, 2, seed=119)],
       cpu=_RANDOM),
)


# the layer ops at their smallest (their own suites, tests/ops/test_<family>.py and
# tests/cuda/test_cuda_<family>.py, cover the options)
_ON_CUDA = "tests/cuda/test_cuda_{}.py runs it on CUDA (the simulator's time goes to uncovered rows)"
x126, w322 = randn(1, 2, 6, seed=120), randn(3, 2, 2, seed=121)
add(
    Op("rrelu-eval", lambda x: ng.rrelu(x), lambda x: R.leaky_relu(x, (1 / 8 + 1 / 3) / 2), [a34 * 2], kinks=[0.0],
       inplace=ng.rrelu_),
    Op("to_device", lambda x: ng.to_device(ng.to_device(x, "cpu"), x.device), lambda x: x, [x23]),
    Op("layer_norm", lambda x: ng.layer_norm(x, (4,)),
       lambda x: (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5), [a34],
       cuda=_ON_CUDA.format("normalization")),
    Op("max_pool1d", lambda x: ng.max_pool1d(x, 2), lambda x: x.reshape(1, 2, 3, 2).max(-1), [x126],
       cuda=_ON_CUDA.format("pooling")),
    Op("avg_pool1d", lambda x: ng.avg_pool1d(x, 2), lambda x: x.reshape(1, 2, 3, 2).mean(-1), [x126],
       cuda=_ON_CUDA.format("pooling")),
    Op("adaptive_max_pool1d", lambda x: ng.adaptive_max_pool1d(x, 3), lambda x: x.reshape(1, 2, 3, 2).max(-1),
       [x126]),
    Op("adaptive_avg_pool1d", lambda x: ng.adaptive_avg_pool1d(x, 3), lambda x: x.reshape(1, 2, 3, 2).mean(-1),
       [x126]),
    Op("conv1d", ng.conv1d,
       lambda x, w: np.einsum("nctk,ock->not", np.lib.stride_tricks.sliding_window_view(x, 2, 2), w),
       [x126, w322], cuda=_ON_CUDA.format("conv")),
    Op("bilinear", ng.bilinear, lambda a, b, w, c: np.einsum("ni,oij,nj->no", a, w, b) + c,
       [x23, randn(2, 2, seed=122), randn(4, 3, 2, seed=123), randn(4, seed=124)]),
)

_FAMILY = "{ops}: options and shapes beyond one row; tests/ops/test_{f}.py checks it (vs PyTorch) on the CPU"
_RAND = "random sampling: tests/ops/test_sorting.py checks its draws (seeded, distribution, errors, gradient)"
# Public ops with no row: the reason, and where they are tested (test_opdb.py fails on any other).
NO_ROW = {
    **{n: _FAMILY.format(ops="pooling", f="pooling") + ", tests/cuda/test_cuda_pooling.py on CUDA"
       for n in ("avg_pool2d", "max_pool2d", "adaptive_avg_pool2d", "adaptive_max_pool2d")},
    **{n: _FAMILY.format(ops="pooling", f="pooling") + " (not yet on CUDA in any test)"
       for n in ("lp_pool1d", "lp_pool2d")},
    **{n: _FAMILY.format(ops="normalization", f="normalization") + ", tests/cuda/test_cuda_normalization.py on CUDA"
       for n in ("batch_norm", "group_norm", "rms_norm")},
    "instance_norm": _FAMILY.format(ops="normalization", f="normalization") + " (not yet on CUDA in any test)",
    **{n: _FAMILY.format(ops="convolution", f="conv") + ", tests/cuda/test_cuda_conv.py on CUDA"
       for n in ("conv2d", "conv_transpose2d")},
    "conv_transpose1d": _FAMILY.format(ops="convolution", f="conv") + " (not yet on CUDA in any test)",
    **{n: _FAMILY.format(ops="recurrent layer", f="rnn")
       + "; tests/cuda/test_cuda_rnn.py runs the layers and cells on CUDA"
       for n in ("lstm", "lstm_cell", "gru", "gru_cell", "rnn_tanh", "rnn_tanh_cell", "rnn_relu", "rnn_relu_cell")},
    "scaled_dot_product_attention": _FAMILY.format(ops="attention", f="attention")
    + ", tests/cuda/test_cuda_attention.py on CUDA",
    "multi_head_attention_forward": _FAMILY.format(ops="attention", f="attention"),
    "linear_act": _FAMILY.format(ops="fused linear + activation", f="fused")
    + ", tests/cuda/test_cuda_fused.py on CUDA",
    "embedding_bag": "offsets, modes and per-sample weights: tests/nn/test_nn_layers_misc.py checks it against PyTorch",
    **{n: _RAND for n in ("bernoulli", "multinomial", "normal", "poisson")},
    # the losses (public in numbagrad.nn.functional; listed here for when ops/ re-exports them)
    **{n: "a loss with its own suite: tests/nn/test_nn_loss.py, test_loss_pointwise.py, test_loss_metric.py, "
          "test_loss_ctc.py (vs PyTorch) and tests/cuda/test_cuda_loss*.py, test_cuda_bce.py, test_cuda_ctc.py"
       for n in ("binary_cross_entropy", "binary_cross_entropy_with_logits", "contrastive_loss",
                 "cosine_embedding_loss", "ctc_loss", "focal_loss", "gaussian_nll_loss", "hinge_embedding_loss",
                 "huber_loss", "margin_ranking_loss", "multi_margin_loss", "multilabel_soft_margin_loss",
                 "poisson_nll_loss", "sigmoid_focal_loss", "smooth_l1_loss", "triplet_margin_loss",
                 "triplet_margin_with_distance_loss")},
}



def lib_row(id, f, ref, inputs, **kw):
    """A row whose op is ``f(lib, *tensors)``: numbagrad's ``fn`` and PyTorch's parity op
    (``torch_fn``, None without torch) are the same call on either library."""
    try:
        import torch
    except ImportError:  # the parity check is skipped
        torch = None
    tfn = None if torch is None else (lambda *a: f(torch, *a))
    return Op(id, lambda *a: f(ng, *a), ref, inputs, torch_fn=tfn, **kw)

# rows kept in files of their own, one per ops module (imported last: they use the helpers above)
from opdb_linalg import ROWS as _ROWS_LINALG, NO_ROW as _NO_ROW_LINALG  # noqa: E402
from opdb_scan import ROWS as _ROWS_SCAN, NO_ROW as _NO_ROW_SCAN  # noqa: E402
from opdb_linalg_ops import ROWS as _ROWS_LINALG_OPS, NO_ROW as _NO_ROW_LINALG_OPS  # noqa: E402
from opdb_misc import ROWS as _ROWS_MISC, NO_ROW as _NO_ROW_MISC  # noqa: E402
from opdb_special import ROWS as _ROWS_SPECIAL, NO_ROW as _NO_ROW_SPECIAL  # noqa: E402

for _rows, _reasons in ((_ROWS_LINALG, _NO_ROW_LINALG), (_ROWS_SCAN, _NO_ROW_SCAN), (_ROWS_SPECIAL, _NO_ROW_SPECIAL),
                       (_ROWS_LINALG_OPS, _NO_ROW_LINALG_OPS), (_ROWS_MISC, _NO_ROW_MISC)):
    add(*_rows)
    NO_ROW.update(_reasons)
