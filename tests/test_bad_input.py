"""Bad input, table-driven (issue 20): every public function of ``numbagrad.nn.functional``,
every Tensor method that takes a dimension, every optimizer constructor and the main
modules' constructors and forwards, each with a wrong shape, dtype, dim, device, empty
and 0-d input, NaN and inf where they mean something.

A row is ``(covers, call, exc, fragment)``. ``call(t)`` runs the case on the library ``t``
(``numbagrad``, or ``torch`` for the oracle). ``exc`` is the exception numbagrad must raise
(``None``: it must return) and ``fragment`` a piece of its message. Where torch is installed,
the same call on torch must raise where numbagrad raises and return where it returns, unless
the row says ``torch=False`` with the reason beside it. A NumPy or numba error (a broadcasting
``ValueError``, a ``TypingError``, ``ZeroDivisionError``, an ``AssertionError``) fails any row.
"""
import inspect
import math
import warnings

import numpy as np
import pytest

import numbagrad as ng
import numbagrad.nn.functional as F

try:
    import torch
except ImportError:  # the suite still runs; only the parity checks are skipped
    torch = None

NAN, INF = float("nan"), float("inf")


# ---- inputs, built the same way on either library ---------------------------------------------
def f32(t, *shape, fill=None):
    """A float32 tensor of ``shape`` with values in [-1, 1] (``fill``: one value everywhere)."""
    n = math.prod(shape)
    a = np.linspace(-1.0, 1.0, n) if fill is None else np.full(n, fill)
    return t.tensor(a.astype(np.float32).reshape(shape))


def i64(t, *values, shape=None):
    a = np.array(values, dtype=np.int64)
    return t.tensor(a if shape is None else a.reshape(shape))


def prm(t, *shape):
    return t.nn.Parameter(f32(t, *shape))


def _cuda_missing():
    return not ng.cuda.is_available()


# ---- the table --------------------------------------------------------------------------------
ROWS = []


def row(covers, call, exc=None, frag="", torch=True, when=None):
    """One case; ``torch=False`` only with a comment saying why torch's answer differs."""
    ROWS.append((covers, call, exc, frag, torch, when))


DIM5 = "Dimension out of range (expected to be in range of [-2, 1], but got 5)"
DIMM3 = "Dimension out of range (expected to be in range of [-2, 1], but got -3)"

# -- the silent cases of the issue, and the errors that did not say what went wrong
row("cat", lambda t: t.cat([f32(t, 2, 3), f32(t, 2, 3)], dim=2), IndexError,
    "cat: Dimension out of range (expected to be in range of [-2, 1], but got 2)")
row("cat", lambda t: t.cat([f32(t, 2, 3), f32(t, 2, 3)], dim=-3), IndexError, "cat: " + DIMM3)
row("cat", lambda t: t.cat([f32(t), f32(t)]), RuntimeError,
    "zero-dimensional tensor (at position 0) cannot be concatenated")
row("cat", lambda t: t.cat([f32(t, 2, 3), f32(t, 3)]), RuntimeError, "cat: sizes of tensors must match")
row("cat", lambda t: t.cat([f32(t, 2, 3), f32(t, 0, 3)]), None)
row("stack", lambda t: t.stack([f32(t, 2, 3), f32(t, 2, 3)], dim=5), IndexError,
    "stack: Dimension out of range (expected to be in range of [-3, 2], but got 5)")
row("stack", lambda t: t.stack([f32(t, 2, 3), f32(t, 3, 2)]), RuntimeError, "stack: expects each tensor")
row("stack", lambda t: t.stack([]), ValueError, "stack: expected a non-empty")
row("Tensor.transpose", lambda t: f32(t, 2, 3).transpose(0, 5), IndexError, "transpose: " + DIM5)
row("Tensor.transpose", lambda t: f32(t, 2, 3).transpose(-3, 0), IndexError, "transpose: " + DIMM3)
row("Tensor.transpose", lambda t: f32(t).transpose(0, -1), None)
row("Tensor.transpose", lambda t: f32(t).transpose(0, 1), IndexError,
    "Dimension out of range (expected to be in range of [-1, 0], but got 1)")
row("Tensor.swapaxes", lambda t: f32(t, 2, 3).swapaxes(0, 5), IndexError, DIM5)
row("Tensor.swapdims", lambda t: f32(t, 2, 3).swapdims(5, 0), IndexError, DIM5)
row("Tensor.narrow", lambda t: f32(t, 2, 3).narrow(5, 0, 1), IndexError, "narrow: " + DIM5)
row("Tensor.narrow", lambda t: f32(t, 2, 3).narrow(1, 2, 5), RuntimeError,
    "start (2) + length (5) exceeds dimension size (3)")
row("Tensor.narrow", lambda t: f32(t, 2, 3).narrow(1, -4, 1), IndexError, "narrow: start out of range")
row("Tensor.narrow", lambda t: f32(t, 2, 3).narrow(1, -1, 1), None)
row("Tensor.narrow", lambda t: f32(t).narrow(0, 0, 1), RuntimeError, "narrow() cannot be applied to a 0-dim tensor")
row("Tensor.split", lambda t: f32(t, 2, 3).split(1, dim=5), IndexError, "split: " + DIM5)
row("Tensor.split", lambda t: f32(t, 2, 3).split(0), RuntimeError, "split: split_size must be positive")
row("Tensor.split", lambda t: f32(t, 2, 3).split([1, 1], 1), RuntimeError, "do not sum to the size 3")
row("Tensor.chunk", lambda t: f32(t, 2, 3).chunk(2, dim=3), IndexError,
    "chunk: Dimension out of range (expected to be in range of [-2, 1], but got 3)")
row("Tensor.chunk", lambda t: f32(t, 2, 3).chunk(0), RuntimeError, "chunk: expects `chunks` to be greater than 0")
row("Tensor.movedim", lambda t: f32(t, 2, 3).movedim(0, 5), IndexError, "movedim: " + DIM5)
row("Tensor.movedim", lambda t: f32(t, 2, 3).movedim((0, 0), (1, 0)), RuntimeError, "movedim: repeated dim")
row("Tensor.movedim", lambda t: f32(t, 2, 3).movedim((0, 1), (1,)), RuntimeError, "movedim: Invalid source")
row("Tensor.moveaxis", lambda t: f32(t, 2, 3).moveaxis(5, 0), IndexError, DIM5)
row("Tensor.flatten", lambda t: f32(t, 2, 3).flatten(5), IndexError, "flatten: " + DIM5)
row("Tensor.flatten", lambda t: f32(t, 2, 3).flatten(1, 0), RuntimeError,
    "flatten: start_dim cannot come after end_dim")
row("Tensor.flatten", lambda t: f32(t).flatten(0), None)
row("Tensor.flatten", lambda t: f32(t).flatten(1), IndexError,
    "Dimension out of range (expected to be in range of [-1, 0], but got 1)")
row("add", lambda t: f32(t, 2, 3) + f32(t, 4), RuntimeError,
    "add: The size of tensor a (3) must match the size of tensor b (4) at non-singleton dimension 1")
row("mul", lambda t: f32(t, 2, 3) * f32(t, 3, 3), RuntimeError, "mul: The size of tensor a (2) must match")
row("where", lambda t: t.where(f32(t, 2, 3) > 0, f32(t, 2, 3), f32(t, 4)), RuntimeError,
    "where: The size of tensor a")
row("where", lambda t: t.where(f32(t, 4) > 0, f32(t, 2, 3), f32(t, 2, 3)), RuntimeError,
    "where: The size of tensor a (4) must match the size of tensor b (3) at non-singleton dimension 1")
row("where", lambda t: t.where(f32(t, 3) > 0, f32(t, 2, 3), 0.0), None)
# torch refuses a non-native byte order; numbagrad converts it (issue 20), so no parity here
row("Tensor", lambda t: t.tensor(np.arange(6, dtype=">f4").reshape(2, 3)).relu().sum(), None, torch=False)
row("from_numpy", lambda t: t.from_numpy(np.arange(6, dtype=">f4")).relu().sum(), None, torch=False)
row("as_tensor", lambda t: t.as_tensor(np.arange(6, dtype=">f4")).exp().sum(), None, torch=False)
row("device", lambda t: t.device("cuda:abc"), RuntimeError, "Invalid device string: 'cuda:abc'")
row("device", lambda t: t.device("cuda:-1"), RuntimeError, "Invalid device string: 'cuda:-1'")
row("device", lambda t: t.device("cuda", -1), RuntimeError, "Device index must not be negative")
row("device", lambda t: t.device("cpu", "a"), TypeError, "argument 'index' must be int")
row("device", lambda t: t.device("tpu"), ValueError, "unknown device type 'tpu'")
row("device", lambda t: t.zeros(2, device="cuda"), RuntimeError, "numbagrad has no CUDA backend",
    when=_cuda_missing)
for _make in [lambda t: f32(t, 2).to("cuda"), lambda t: f32(t, 2).cuda(), lambda t: t.ones(2, device="cuda"),
              lambda t: t.tensor([1.0], device="cuda"), lambda t: t.randn(2, device="cuda"),
              lambda t: t.arange(3, device="cuda"), lambda t: t.full((2,), 1.0, device="cuda"),
              lambda t: t.zeros_like(f32(t, 2), device="cuda"), lambda t: t.nn.Linear(2, 3, device="cuda"),
              lambda t: t.nn.Linear(2, 3).to("cuda"), lambda t: t.nn.Conv2d(1, 1, 1).cuda()]:
    row("device", _make, RuntimeError, "numbagrad has no CUDA backend", when=_cuda_missing)
row("Tensor.size", lambda t: f32(t, 2, 3).size(5), IndexError, "size: " + DIM5)
row("Tensor.size", lambda t: f32(t).size(0), IndexError, "Dimension specified as 0 but tensor has no dimensions")


# -- Tensor methods that take a dimension
def _dim_rows(name, call, scalar=None, op=None):
    """``call(t, x, dim)``: dim 5 and -3 on a (2, 3) tensor raise, naming ``op`` (the method's
    own name unless it is an alias); dim -1 returns; on a 0-d tensor dim 0 returns (``scalar`` =
    None) or raises ``scalar`` (an exception type)."""
    row("Tensor." + name, lambda t: call(t, f32(t, 2, 3), 5), IndexError, f"{op or name}: " + DIM5)
    row("Tensor." + name, lambda t: call(t, f32(t, 2, 3), -3), IndexError, DIMM3)
    row("Tensor." + name, lambda t: call(t, f32(t, 2, 3), -1), None)
    if scalar is None:
        row("Tensor." + name, lambda t: call(t, f32(t), 0), None)
    else:  # torch's 0-d refusals: no dimension to index, or (narrow) no 0-d at all
        row("Tensor." + name, lambda t: call(t, f32(t), 0), scalar,
            "cannot be applied to a 0-dim tensor" if scalar is RuntimeError else
            f"{op or name}: Dimension specified as 0 but tensor has no dimensions")


IDX = lambda t: i64(t, 0, 1, 0, 1, 0, 1, shape=(2, 3))  # noqa: E731
_dim_rows("sum", lambda t, x, d: x.sum(d))
_dim_rows("mean", lambda t, x, d: x.mean(d))
_dim_rows("prod", lambda t, x, d: x.prod(d))
_dim_rows("var", lambda t, x, d: x.var(d))
_dim_rows("std", lambda t, x, d: x.std(d))
_dim_rows("amax", lambda t, x, d: x.amax(d))
_dim_rows("amin", lambda t, x, d: x.amin(d))
_dim_rows("max", lambda t, x, d: x.max(d))
_dim_rows("min", lambda t, x, d: x.min(d))
_dim_rows("argmax", lambda t, x, d: x.argmax(d))
_dim_rows("argmin", lambda t, x, d: x.argmin(d))
_dim_rows("logsumexp", lambda t, x, d: x.logsumexp(d))
_dim_rows("norm", lambda t, x, d: x.norm(dim=d))
_dim_rows("all", lambda t, x, d: x.all(d))
_dim_rows("any", lambda t, x, d: x.any(d))
_dim_rows("cumsum", lambda t, x, d: x.cumsum(d))
_dim_rows("softmax", lambda t, x, d: x.softmax(d))
_dim_rows("log_softmax", lambda t, x, d: x.log_softmax(d))
_dim_rows("sort", lambda t, x, d: x.sort(d))
_dim_rows("argsort", lambda t, x, d: x.argsort(d))
_dim_rows("topk", lambda t, x, d: x.topk(1, d))
_dim_rows("kthvalue", lambda t, x, d: x.kthvalue(1, d))
_dim_rows("squeeze", lambda t, x, d: x.squeeze(d))
row("Tensor.unsqueeze", lambda t: f32(t, 2, 3).unsqueeze(3), IndexError,
    "unsqueeze: Dimension out of range (expected to be in range of [-3, 2], but got 3)")
row("Tensor.unsqueeze", lambda t: f32(t, 2, 3).unsqueeze(-4), IndexError, "but got -4")
row("Tensor.unsqueeze", lambda t: f32(t, 2, 3).unsqueeze(-3), None)
row("Tensor.unsqueeze", lambda t: f32(t).unsqueeze(-1), None)
row("Tensor.unsqueeze", lambda t: f32(t).unsqueeze(2), IndexError, "[-1, 0], but got 2")
_dim_rows("flip", lambda t, x, d: x.flip((d,)))
_dim_rows("roll", lambda t, x, d: x.roll(1, d), scalar=IndexError)
_dim_rows("unbind", lambda t, x, d: x.unbind(d), scalar=IndexError)
_dim_rows("split", lambda t, x, d: x.split(1, d), scalar=IndexError)
_dim_rows("chunk", lambda t, x, d: x.chunk(1, d), scalar=IndexError)
_dim_rows("narrow", lambda t, x, d: x.narrow(d, 0, 1), scalar=RuntimeError)
_dim_rows("unflatten", lambda t, x, d: x.unflatten(d, (1, -1)), scalar=IndexError)
_dim_rows("flatten", lambda t, x, d: x.flatten(d))
_dim_rows("movedim", lambda t, x, d: x.movedim(d, 0))
_dim_rows("moveaxis", lambda t, x, d: x.moveaxis(0, d), op="movedim")
_dim_rows("transpose", lambda t, x, d: x.transpose(d, 0))
_dim_rows("swapaxes", lambda t, x, d: x.swapaxes(0, d), op="transpose")
_dim_rows("swapdims", lambda t, x, d: x.swapdims(d, 0), op="transpose")
_dim_rows("gather", lambda t, x, d: x.gather(d, i64(t, 0).reshape((1,) * x.ndim)))
_dim_rows("take_along_dim", lambda t, x, d: x.take_along_dim(i64(t, 0).reshape((1,) * x.ndim), d),
          scalar=IndexError)
_dim_rows("index_select", lambda t, x, d: x.index_select(d, i64(t, 0)))
_dim_rows("size", lambda t, x, d: x.size(d), scalar=IndexError)
row("Tensor.sum", lambda t: f32(t, 2, 3).sum((0, 0)), RuntimeError, "sum: dim 0 appears multiple times")
row("Tensor.sum", lambda t: f32(t, 2, 3).sum((0, -2)), RuntimeError, "appears multiple times")
row("Tensor.mean", lambda t: f32(t, 2, 3).mean((0, 5)), IndexError, DIM5)
row("Tensor.sum", lambda t: f32(t, 2, 3).sum(1.0), TypeError, "sum: argument 'dim' must be an int")
row("Tensor.permute", lambda t: f32(t, 2, 3).permute(0, 5), IndexError, "permute: " + DIM5)
row("Tensor.permute", lambda t: f32(t, 2, 3).permute(0, 0), RuntimeError, "permute: duplicate dims")
row("Tensor.permute", lambda t: f32(t, 2, 3).permute(0), RuntimeError, "permute: number of dims don't match")
row("Tensor.permute", lambda t: f32(t, 2, 3).permute(-1, 0), None)
row("Tensor.roll", lambda t: f32(t, 2, 3).roll(1, (0, 1)), RuntimeError, "roll: shifts and dimensions must align")
row("Tensor.roll", lambda t: f32(t, 2, 3).roll(1), None)
row("Tensor.tile", lambda t: f32(t, 2, 3).tile((2,)), None)
row("Tensor.tile", lambda t: f32(t, 2, 3).tile((2, 1, 1)), None)
row("Tensor.unique", lambda t: f32(t, 2, 3).unique(), None)
row("Tensor.unique", lambda t: f32(t, 2, 3).unique(dim=0), NotImplementedError, "unique: dim=0 is not supported",
    torch=False)  # numbagrad's unique has no dim=; torch has
row("Tensor.scatter", lambda t: f32(t, 2, 3).scatter(5, IDX(t), f32(t, 2, 3)), IndexError, "scatter: " + DIM5)
row("Tensor.scatter", lambda t: f32(t, 2, 3).scatter(1, IDX(t), f32(t, 2, 3)), None)
row("Tensor.scatter_", lambda t: f32(t, 2, 3).scatter_(-3, IDX(t), f32(t, 2, 3)), IndexError, DIMM3)
row("Tensor.scatter_add", lambda t: f32(t, 2, 3).scatter_add(5, IDX(t), f32(t, 2, 3)), IndexError, DIM5)
row("Tensor.scatter_add", lambda t: f32(t, 2, 3).scatter_add(0, IDX(t), f32(t, 2, 3)), None)
row("Tensor.scatter_add_", lambda t: f32(t, 2, 3).scatter_add_(5, IDX(t), f32(t, 2, 3)), IndexError, DIM5)
row("Tensor.index_add", lambda t: f32(t, 2, 3).index_add(5, i64(t, 0), f32(t, 1, 3)), IndexError, DIM5)
row("Tensor.index_add", lambda t: f32(t, 2, 3).index_add(0, i64(t, 0), f32(t, 1, 3)), None)
row("Tensor.index_add_", lambda t: f32(t, 2, 3).index_add_(-3, i64(t, 0), f32(t, 1, 3)), IndexError, DIMM3)
row("Tensor.gather", lambda t: f32(t, 2, 3).gather(1, f32(t, 2, 3)), RuntimeError, "gather: expected an integer")


# -- other Tensor ops and the factories: shapes, sizes, empty input
row("matmul", lambda t: f32(t, 2, 3) @ f32(t, 4, 5), RuntimeError,
    "matmul: shapes (2, 3) and (4, 5) cannot be multiplied")
row("matmul", lambda t: f32(t) @ f32(t, 3), RuntimeError, "matmul: both arguments need at least 1 dimension")
row("outer", lambda t: t.outer(f32(t, 3, 1), f32(t, 4)), RuntimeError, "outer: expected 1-D tensors")
row("outer", lambda t: t.outer(f32(t, 3), f32(t, 0)), None)
row("dot", lambda t: t.dot(f32(t, 3), f32(t, 3, 1)), RuntimeError, "dot: expected 1-D tensors")
row("bmm", lambda t: t.bmm(f32(t, 2, 3, 4), f32(t, 3, 4, 5)), RuntimeError,
    "bmm: expected 3-D tensors with equal batch")
row("Tensor.view", lambda t: f32(t, 2, 3).view(4, 2), RuntimeError, "shape [4, 2] is invalid for input of shape (2, 3)")
row("Tensor.reshape", lambda t: f32(t, 2, 3).reshape(-1, -1), RuntimeError, "reshape: shape [-1, -1] is invalid")
row("Tensor.expand", lambda t: f32(t, 2, 3).expand(4, 3), RuntimeError, "expand: the expanded size (4) must match")
row("Tensor.expand", lambda t: f32(t, 2, 3).expand(3), RuntimeError, "expand: the number of sizes (1)")
row("Tensor.repeat", lambda t: f32(t, 2, 3).repeat(2), RuntimeError, "repeat: Number of dimensions of repeat dims (1)")
row("Tensor.repeat", lambda t: f32(t, 2, 3).repeat(-1, 1), RuntimeError, "repeat: repeats must be non-negative")
row("Tensor.repeat", lambda t: f32(t, 2, 3).repeat(0, 2, 1), None)
row("Tensor.tile", lambda t: f32(t, 2, 3).tile((-1,)), RuntimeError, "repeats must be non-negative")
row("Tensor.split", lambda t: f32(t, 2, 3).split([-1, 4], 1), RuntimeError, "split_sizes have only non-negative")
row("Tensor.logsumexp", lambda t: f32(t, 0).logsumexp(0), None)
row("Tensor.logsumexp", lambda t: f32(t, 2, 0).logsumexp(1), None)
row("Tensor.argmax", lambda t: f32(t, 0).argmax(), IndexError,
    "argmax: Expected reduction dim to be specified for input.numel() == 0")
row("Tensor.argmin", lambda t: f32(t, 2, 0).argmin(1), IndexError, "argmin: Expected reduction dim 1 to have non-zero")
row("Tensor.argmax", lambda t: f32(t, 2, 0).argmax(0), None)
row("Tensor.max", lambda t: f32(t, 0).max(), RuntimeError, "cannot reduce an empty tensor")
row("Tensor.topk", lambda t: f32(t, 3).topk(5), RuntimeError, "topk: k=5 is out of range")
row("Tensor.masked_fill", lambda t: f32(t, 3).masked_fill(f32(t, 3), 0.0), RuntimeError,
    "masked_fill: expected a boolean mask")
row("Tensor.masked_fill", lambda t: f32(t, 3).masked_fill(t.tensor([True, False]), 0.0), RuntimeError,
    "masked_fill: mask of shape (2,) is not broadcastable")
row("Tensor.item", lambda t: f32(t, 2).item(), (ValueError, RuntimeError), "only a one-element tensor")
row("Tensor.backward", lambda t: f32(t, 2).requires_grad_().mul(2).backward(), RuntimeError,
    "grad can be implicitly created only for scalar outputs")
row("Tensor.backward", lambda t: f32(t, 2).sum().backward(), RuntimeError, "does not require grad")
row("Tensor.requires_grad_", lambda t: i64(t, 1, 2).requires_grad_(), RuntimeError,
    "only tensors of floating point dtype can require gradients")
row("floor_divide", lambda t: i64(t, 7, -7) // 0, RuntimeError, "floor_divide: ZeroDivisionError")
row("floor_divide", lambda t: i64(t, 7, -7) // i64(t, 1, 0), RuntimeError, "floor_divide: ZeroDivisionError")
row("remainder", lambda t: i64(t, 7, -7) % 0, RuntimeError, "remainder: ZeroDivisionError")
row("remainder", lambda t: f32(t, 2) % 0.0, None)  # floats: NaN, as in torch
row("pow", lambda t: i64(t, 2, 3) ** -1, RuntimeError, "pow: Integers to negative integer powers are not allowed")
row("pow", lambda t: i64(t, 2, 3) ** i64(t, 1, -2), RuntimeError, "pow: Integers to negative integer powers",
    torch=False)  # torch refuses a negative scalar exponent only; a tensor one gives 2 ** -2 = 0
row("pow", lambda t: i64(t, 2, 3) ** -1.0, None)
row("lerp", lambda t: t.lerp(f32(t, 3), f32(t, 4), 0.5), RuntimeError, "The size of tensor a")
row("addcmul", lambda t: t.addcmul(f32(t, 3), f32(t, 4), f32(t, 3)), RuntimeError, "The size of tensor a")
row("einsum", lambda t: t.einsum("ij,jk->ik", f32(t, 2, 3), f32(t, 4, 5)), ValueError, "einsum: index 'j' has sizes")
row("arange", lambda t: t.arange(0, 5, 0), RuntimeError, "arange: step must be nonzero")
row("arange", lambda t: t.arange(5, 0, 1), RuntimeError, "arange: upper bound and lower bound inconsistent")
row("arange", lambda t: t.arange(5, 0, -1), None)
row("eye", lambda t: t.eye(-1), ValueError, "invalid size (-1,)")
row("linspace", lambda t: t.linspace(0, 1, -1), ValueError, "invalid size (-1,)")
row("zeros", lambda t: t.zeros(2, -1), ValueError, "invalid size (2, -1)")
row("zeros", lambda t: t.zeros(2, 0), None)
row("tensor", lambda t: t.tensor([[1, 2], [3]]), ValueError, "tensor: expected a rectangular nested sequence")
row("tensor", lambda t: t.tensor([[]]), None)


# -- torch.nn.functional: activations (0-d, empty, NaN and inf return; bad arguments raise)
def _act_rows(name, call=None):
    fn = call or (lambda t, x: getattr(t.nn.functional, name)(x))
    row(name, lambda t: fn(t, f32(t)), None)
    row(name, lambda t: fn(t, f32(t, 0, 3)), None)
    row(name, lambda t: fn(t, t.tensor([NAN, INF, -INF, 0.5])), None)
    if not name.endswith("_"):
        # numbagrad computes an integer input in the default float dtype (ops/activation.py
        # ``_float_input``), where most of torch's kernels have no integer version and raise
        row(name, lambda t: fn(t, i64(t, -2, 0, 3)), None, torch=False)


for _n in ["relu", "relu6", "elu", "selu", "celu", "gelu", "silu", "mish", "sigmoid", "tanh", "softplus",
           "hardtanh", "leaky_relu", "logsigmoid", "hardshrink", "softshrink", "softsign", "tanhshrink",
           "hardsigmoid", "hardswish", "rrelu"]:
    _act_rows(_n)
for _n in ["relu_", "elu_", "selu_", "celu_", "hardtanh_", "leaky_relu_", "rrelu_"]:
    _act_rows(_n)
_act_rows("threshold", lambda t, x: t.nn.functional.threshold(x, 0.1, 20.0))
_act_rows("threshold_", lambda t, x: t.nn.functional.threshold_(x, 0.1, 20.0))
row("gelu", lambda t: t.nn.functional.gelu(f32(t, 2, 3), approximate="fast"), ValueError, "gelu")
row("hardtanh", lambda t: t.nn.functional.hardtanh(f32(t, 2, 3), 1.0, -1.0), ValueError, "hardtanh")
row("rrelu", lambda t: t.nn.functional.rrelu(f32(t, 2, 3), 0.5, 0.1, training=True), ValueError,
    "rrelu: lower bound")
row("glu", lambda t: t.nn.functional.glu(f32(t, 2, 3)), RuntimeError, "glu: halving dimension must be even")
row("glu", lambda t: t.nn.functional.glu(f32(t, 2, 4), 5), IndexError, "glu: Dimension out of range")
row("glu", lambda t: t.nn.functional.glu(f32(t)), RuntimeError, "glu does not support scalars")
row("glu", lambda t: t.nn.functional.glu(f32(t, 2, 4), 0), None)
row("prelu", lambda t: t.nn.functional.prelu(f32(t, 2, 3), f32(t, 2)), RuntimeError,
    "prelu: mismatch of parameter numbers")
row("prelu", lambda t: t.nn.functional.prelu(f32(t, 2, 3), f32(t, 3)), None)
row("prelu", lambda t: t.nn.functional.prelu(f32(t, 0, 3), f32(t, 1)), None)
for _n in ["softmax", "log_softmax", "softmin"]:
    row(_n, lambda t, n=_n: getattr(t.nn.functional, n)(f32(t, 2, 3), 5), IndexError, f"{_n}: " + DIM5)
    row(_n, lambda t, n=_n: getattr(t.nn.functional, n)(f32(t, 0, 3), 1), None)
    row(_n, lambda t, n=_n: getattr(t.nn.functional, n)(f32(t), 0), None)
    row(_n, lambda t, n=_n: getattr(t.nn.functional, n)(t.tensor([[NAN, 1.0], [INF, 1.0]]), 1), None)
row("normalize", lambda t: t.nn.functional.normalize(f32(t, 2, 3), dim=5), IndexError, DIM5)
row("normalize", lambda t: t.nn.functional.normalize(f32(t, 2, 3, fill=0.0)), None)
row("normalize", lambda t: t.nn.functional.normalize(f32(t, 0, 3)), None)

# -- dropout family
for _n in ["dropout", "alpha_dropout", "feature_alpha_dropout", "dropout1d", "dropout2d", "dropout3d"]:
    row(_n, lambda t, n=_n: getattr(t.nn.functional, n)(f32(t, 2, 3, 4, 4), p=NAN, training=True), ValueError,
        "dropout probability has to be between 0 and 1, but got nan")
    row(_n, lambda t, n=_n: getattr(t.nn.functional, n)(f32(t, 2, 3, 4, 4), p=1.5, training=True), ValueError,
        "but got 1.5")
    row(_n, lambda t, n=_n: getattr(t.nn.functional, n)(f32(t, 2, 3, 4, 4), p=-0.1, training=True), ValueError,
        "but got -0.1")
row("dropout", lambda t: t.nn.functional.dropout(f32(t, 0, 3), 0.5), None)
row("dropout", lambda t: t.nn.functional.dropout(f32(t), 0.5), None)
row("dropout2d", lambda t: t.nn.functional.dropout2d(f32(t, 2), 0.5), RuntimeError, "dropout2d")

# -- linear layers
row("linear", lambda t: t.nn.functional.linear(f32(t, 2, 3), f32(t, 4, 5)), RuntimeError, "linear")
row("linear", lambda t: t.nn.functional.linear(f32(t, 2, 3), f32(t, 4, 3), f32(t, 5)), RuntimeError,
    "linear: bias of shape (5,) does not match the 4 out-features")
row("linear", lambda t: t.nn.functional.linear(f32(t, 0, 3), f32(t, 4, 3), f32(t, 4)), None)
row("linear", lambda t: t.nn.functional.linear(f32(t, 3), f32(t, 4, 3)), None)
row("linear", lambda t: t.nn.functional.linear(f32(t, 2, 3), i64(t, 1, 2, 3, shape=(1, 3))), RuntimeError,
    "linear: input dtype float32 does not match weight dtype int64")
row("bilinear", lambda t: t.nn.functional.bilinear(f32(t, 2, 3), f32(t, 2, 4), f32(t, 5, 3, 4)), None)
row("bilinear", lambda t: t.nn.functional.bilinear(f32(t, 2, 3), f32(t, 2, 4), f32(t, 5, 3, 3)), RuntimeError,
    "bilinear")
row("bilinear", lambda t: t.nn.functional.bilinear(f32(t, 2, 3), f32(t, 3, 4), f32(t, 5, 3, 4)), RuntimeError,
    "bilinear")

# -- convolutions and pools (N, C, L) / (N, C, H, W)
row("conv1d", lambda t: t.nn.functional.conv1d(f32(t, 1, 2, 5), f32(t, 3, 2, 3)), None)
row("conv1d", lambda t: t.nn.functional.conv1d(f32(t, 1, 4, 5), f32(t, 3, 2, 3)), RuntimeError, "conv1d")
row("conv1d", lambda t: t.nn.functional.conv1d(f32(t, 1, 2, 2), f32(t, 3, 2, 3)), RuntimeError, "conv1d")
row("conv1d", lambda t: t.nn.functional.conv1d(f32(t, 1, 2, 5), f32(t, 3, 2, 3), stride=0), RuntimeError, "stride")
row("conv2d", lambda t: t.nn.functional.conv2d(f32(t, 1, 2, 5, 5), f32(t, 3, 2, 3, 3)), None)
row("conv2d", lambda t: t.nn.functional.conv2d(f32(t, 1, 2, 5, 5), f32(t, 3, 2, 3)), RuntimeError, "conv2d")
row("conv2d", lambda t: t.nn.functional.conv2d(f32(t, 1, 2, 5, 5), f32(t, 3, 2, 3, 3), padding=-1), RuntimeError,
    "padding")
row("conv2d", lambda t: t.nn.functional.conv2d(f32(t, 1, 2, 5, 5), f32(t, 3, 2, 3, 3), groups=2), RuntimeError,
    "conv2d")
row("conv2d", lambda t: t.nn.functional.conv2d(f32(t, 1, 2, 5, 5), f32(t, 3, 2, 3, 3), f32(t, 2)), RuntimeError,
    "bias")
row("conv_transpose1d", lambda t: t.nn.functional.conv_transpose1d(f32(t, 1, 2, 5), f32(t, 2, 3, 3)), None)
row("conv_transpose1d", lambda t: t.nn.functional.conv_transpose1d(f32(t, 1, 3, 5), f32(t, 2, 3, 3)), RuntimeError,
    "conv_transpose1d")
row("conv_transpose2d", lambda t: t.nn.functional.conv_transpose2d(f32(t, 1, 2, 4, 4), f32(t, 2, 3, 3, 3)), None)
row("conv_transpose2d", lambda t: t.nn.functional.conv_transpose2d(f32(t, 1, 2, 4, 4), f32(t, 2, 3, 3, 3),
                                                                   stride=2, output_padding=2), RuntimeError,
    "output_padding")
for _n, _x in [("max_pool1d", (1, 2, 6)), ("avg_pool1d", (1, 2, 6)), ("max_pool2d", (1, 2, 6, 6)),
               ("avg_pool2d", (1, 2, 6, 6))]:
    row(_n, lambda t, n=_n, s=_x: getattr(t.nn.functional, n)(f32(t, *s), 2), None)
    row(_n, lambda t, n=_n, s=_x: getattr(t.nn.functional, n)(f32(t, *s), 0), RuntimeError, _n + ": ")
    row(_n, lambda t, n=_n, s=_x: getattr(t.nn.functional, n)(f32(t, *s), 7), RuntimeError, _n + ": ")
    row(_n, lambda t, n=_n, s=_x: getattr(t.nn.functional, n)(f32(t, *s), 2, padding=2), RuntimeError, "pad")
    row(_n, lambda t, n=_n, s=_x: getattr(t.nn.functional, n)(f32(t, 2), 2), RuntimeError, _n + ": ")
for _n, _x in [("adaptive_avg_pool1d", (1, 2, 6)), ("adaptive_max_pool1d", (1, 2, 6)),
               ("adaptive_avg_pool2d", (1, 2, 6, 6)), ("adaptive_max_pool2d", (1, 2, 6, 6))]:
    row(_n, lambda t, n=_n, s=_x: getattr(t.nn.functional, n)(f32(t, *s), 3), None)
    row(_n, lambda t, n=_n, s=_x: getattr(t.nn.functional, n)(f32(t, *s), -1), RuntimeError, _n + ": ")
    row(_n, lambda t, n=_n, s=_x: getattr(t.nn.functional, n)(f32(t, 2), 1), RuntimeError, _n + ": ")
row("lp_pool1d", lambda t: t.nn.functional.lp_pool1d(f32(t, 1, 2, 6), 2, 2), None)
row("lp_pool1d", lambda t: t.nn.functional.lp_pool1d(f32(t, 1, 2, 6), 2, 0), RuntimeError,
    "lp_pool1d: input (1, 2, 6) float32: kernel size should be greater than zero")
row("lp_pool2d", lambda t: t.nn.functional.lp_pool2d(f32(t, 1, 2, 6, 6), 2, 2), None)
row("lp_pool2d", lambda t: t.nn.functional.lp_pool2d(f32(t, 1, 2, 6, 6), 2, 7), RuntimeError,
    "lp_pool2d: input (1, 2, 6, 6) float32: Given input size: (6, 6). Calculated output size: (0, 0)")
row("pixel_shuffle", lambda t: t.nn.functional.pixel_shuffle(f32(t, 1, 8, 2, 2), 2), None)
row("pixel_shuffle", lambda t: t.nn.functional.pixel_shuffle(f32(t, 1, 6, 2, 2), 2), RuntimeError, "pixel_shuffle")
row("pixel_shuffle", lambda t: t.nn.functional.pixel_shuffle(f32(t, 8, 2), 2), RuntimeError, "pixel_shuffle")
row("pixel_unshuffle", lambda t: t.nn.functional.pixel_unshuffle(f32(t, 1, 2, 4, 4), 2), None)
row("pixel_unshuffle", lambda t: t.nn.functional.pixel_unshuffle(f32(t, 1, 2, 5, 4), 2), RuntimeError,
    "pixel_unshuffle")
row("pad", lambda t: t.nn.functional.pad(f32(t, 2, 3), (1, 1)), None)
row("pad", lambda t: t.nn.functional.pad(f32(t, 2, 3), (1,)), ValueError, "pad: padding length must be even")
row("pad", lambda t: t.nn.functional.pad(f32(t, 2, 3), (1, 1, 1, 1, 1, 1)), ValueError, "covers 3 dimensions")
row("pad", lambda t: t.nn.functional.pad(f32(t, 1, 2, 3), (1, 1), mode="bogus"), ValueError, "pad: unknown mode")
row("pad", lambda t: t.nn.functional.pad(f32(t, 1, 2, 3), (3, 3), mode="reflect"), ValueError,
    "pad: Padding size should be less than the corresponding input dimension")
row("pad", lambda t: t.nn.functional.pad(f32(t, 1, 2, 3), (2, 2), mode="reflect"), None)
row("pad", lambda t: t.nn.functional.pad(f32(t, 1, 2, 3), (4, 0), mode="circular"), ValueError,
    "pad: Padding value causes wrapping around more than once")
row("pad", lambda t: t.nn.functional.pad(f32(t, 1, 2, 3), (3, 3), mode="circular"), None)
row("pad", lambda t: t.nn.functional.pad(f32(t, 1, 2, 0), (1, 1), mode="replicate"), ValueError, "pad: cannot")
row("interpolate", lambda t: t.nn.functional.interpolate(f32(t, 1, 2, 3, 3), scale_factor=2), None)
row("interpolate", lambda t: t.nn.functional.interpolate(f32(t, 1, 2, 3, 3)), ValueError, "interpolate")
row("interpolate", lambda t: t.nn.functional.interpolate(f32(t, 1, 2, 3, 3), size=4, scale_factor=2), ValueError,
    "interpolate")
row("interpolate", lambda t: t.nn.functional.interpolate(f32(t, 1, 2, 3, 3), size=4, mode="bogus"),
    NotImplementedError, "interpolate")

# -- normalisation
row("batch_norm", lambda t: t.nn.functional.batch_norm(f32(t, 2, 3), f32(t, 3), f32(t, 3, fill=1.0)), None)
row("batch_norm", lambda t: t.nn.functional.batch_norm(f32(t, 2, 3), f32(t, 4), f32(t, 4, fill=1.0)), RuntimeError,
    "batch_norm")
row("batch_norm", lambda t: t.nn.functional.batch_norm(f32(t, 1, 3), None, None, training=True), ValueError,
    "more than 1 value per channel")
row("layer_norm", lambda t: t.nn.functional.layer_norm(f32(t, 2, 3), (3,)), None)
row("layer_norm", lambda t: t.nn.functional.layer_norm(f32(t, 2, 3), (4,)), RuntimeError, "layer_norm")
row("layer_norm", lambda t: t.nn.functional.layer_norm(f32(t, 2, 3), (3,), f32(t, 4)), RuntimeError, "layer_norm")
row("layer_norm", lambda t: t.nn.functional.layer_norm(f32(t, 0, 3), (3,)), None)
row("rms_norm", lambda t: t.nn.functional.rms_norm(f32(t, 2, 3), (3,)), None)
row("rms_norm", lambda t: t.nn.functional.rms_norm(f32(t, 2, 3), (2,)), RuntimeError, "rms_norm")
row("group_norm", lambda t: t.nn.functional.group_norm(f32(t, 2, 4, 3), 2), None)
row("group_norm", lambda t: t.nn.functional.group_norm(f32(t, 2, 4, 3), 3), RuntimeError, "group_norm")
row("group_norm", lambda t: t.nn.functional.group_norm(f32(t, 2, 4, 3), 0), RuntimeError, "group_norm")
row("instance_norm", lambda t: t.nn.functional.instance_norm(f32(t, 2, 3, 4)), None)
row("instance_norm", lambda t: t.nn.functional.instance_norm(f32(t, 2, 3, 1)), ValueError,
    "more than 1 spatial element")

# -- embeddings and one_hot
row("embedding", lambda t: t.nn.functional.embedding(i64(t, 0, 4), f32(t, 5, 3)), None)
row("embedding", lambda t: t.nn.functional.embedding(f32(t, 2), f32(t, 5, 3)), RuntimeError,
    "embedding: expected an integer")
row("embedding", lambda t: t.nn.functional.embedding(i64(t, 0, 1), f32(t, 5)), RuntimeError, "embedding: weight")
row("embedding", lambda t: t.nn.functional.embedding(i64(t, shape=(0,)), f32(t, 5, 3)), None)
row("embedding", lambda t: t.nn.functional.embedding(i64(t, 1), f32(t, 5, 3), padding_idx=7), ValueError,
    "padding_idx")
row("embedding_bag", lambda t: t.nn.functional.embedding_bag(i64(t, 0, 4), f32(t, 5, 3), i64(t, 0)), None)
row("embedding_bag", lambda t: t.nn.functional.embedding_bag(i64(t, 0, 1), f32(t, 5), i64(t, 0)), ValueError,
    "embedding_bag: weight has to be a 2D Tensor")
row("embedding_bag", lambda t: t.nn.functional.embedding_bag(i64(t, 0, 7), f32(t, 5, 3), i64(t, 0)), IndexError,
    "embedding_bag: index 7")
row("embedding_bag", lambda t: t.nn.functional.embedding_bag(f32(t, 2), f32(t, 5, 3), i64(t, 0)), TypeError,
    "embedding_bag: input must be an integer")
row("embedding_bag", lambda t: t.nn.functional.embedding_bag(i64(t, 0, 1), f32(t, 5, 3), i64(t, 1)), ValueError,
    "embedding_bag: offsets[0] has to be 0")
row("embedding_bag", lambda t: t.nn.functional.embedding_bag(i64(t, 0, 1), f32(t, 5, 3), i64(t, 0), mode="x"),
    ValueError, "embedding_bag: mode has to be one of")
row("embedding_bag", lambda t: t.nn.functional.embedding_bag(i64(t, 0, 1), f32(t, 5, 3), i64(t, 0),
                                                             padding_idx=9), ValueError, "embedding_bag: padding_idx")
row("one_hot", lambda t: t.nn.functional.one_hot(i64(t, 0, 2), 3), None)
row("one_hot", lambda t: t.nn.functional.one_hot(i64(t, 0, 3), 3), RuntimeError, "one_hot: class value 3")
row("one_hot", lambda t: t.nn.functional.one_hot(f32(t, 2), 3), RuntimeError, "one_hot")
row("one_hot", lambda t: t.nn.functional.one_hot(i64(t, 0, -1), 3), RuntimeError, "one_hot")

# -- attention
_q = lambda t: f32(t, 1, 2, 3, 4)  # noqa: E731
row("scaled_dot_product_attention", lambda t: t.nn.functional.scaled_dot_product_attention(_q(t), _q(t), _q(t)),
    None)
row("scaled_dot_product_attention", lambda t: t.nn.functional.scaled_dot_product_attention(
    _q(t), f32(t, 1, 2, 3, 5), _q(t)), RuntimeError, "scaled_dot_product_attention")
row("scaled_dot_product_attention", lambda t: t.nn.functional.scaled_dot_product_attention(
    _q(t), _q(t), _q(t), attn_mask=f32(t, 4, 4)), RuntimeError, "scaled_dot_product_attention")
row("scaled_dot_product_attention", lambda t: t.nn.functional.scaled_dot_product_attention(
    _q(t), _q(t), _q(t), dropout_p=NAN), ValueError, "dropout")


def _mha(t, embed_dim=4, heads=2, q=None):
    E = 4
    q = f32(t, 3, 1, E) if q is None else q
    return t.nn.functional.multi_head_attention_forward(
        q, q, q, embed_dim, heads, f32(t, 3 * E, E), f32(t, 3 * E), None, None, False, 0.0,
        f32(t, E, E), f32(t, E), training=False)


row("multi_head_attention_forward", lambda t: _mha(t), None)
row("multi_head_attention_forward", lambda t: _mha(t, heads=3), ValueError, "divisible by num_heads",
    torch=False)  # torch asserts (an AssertionError); numbagrad raises ValueError naming both values
row("multi_head_attention_forward", lambda t: _mha(t, embed_dim=8), ValueError, "embedding dimension of 8",
    torch=False)  # as above

# -- losses
_ce = lambda t, n=2, c=3: (f32(t, n, c), i64(t, *([1] * n)))  # noqa: E731
for _n in ["cross_entropy", "nll_loss", "focal_loss", "multi_margin_loss"]:
    torch_has = _n != "focal_loss"  # focal_loss is numbagrad's own
    row(_n, lambda t, n=_n: getattr(t.nn.functional, n)(*_ce(t)), None, torch=torch_has)
    row(_n, lambda t, n=_n: getattr(t.nn.functional, n)(f32(t, 2, 3), i64(t, 1, 1, 1)), (RuntimeError, ValueError),
        f"{_n}: ", torch=torch_has)
    row(_n, lambda t, n=_n: getattr(t.nn.functional, n)(f32(t, 2, 3), f32(t, 2)),
        (RuntimeError, TypeError, ValueError), _n, torch=torch_has)
    row(_n, lambda t, n=_n: getattr(t.nn.functional, n)(*_ce(t), reduction="bogus"), ValueError, "bogus",
        torch=torch_has)
    row(_n, lambda t, n=_n: getattr(t.nn.functional, n)(f32(t, 0, 3), i64(t, shape=(0,))), None, torch=torch_has)
row("cross_entropy", lambda t: t.nn.functional.cross_entropy(f32(t, 2, 3), i64(t, 1, 3)), (RuntimeError, IndexError),
    "cross_entropy: target 3")
row("cross_entropy", lambda t: t.nn.functional.cross_entropy(f32(t, 0, 3), f32(t, 0, 3)), None)
row("cross_entropy", lambda t: t.nn.functional.cross_entropy(f32(t, 0, 3), i64(t, shape=(0,)), reduction="sum"),
    None)
row("cross_entropy", lambda t: t.nn.functional.cross_entropy(f32(t, 0, 3, 2), i64(t, shape=(0, 2))), None)
row("cross_entropy", lambda t: t.nn.functional.cross_entropy(f32(t, 0, 3), i64(t, shape=(0,)), weight=f32(t, 3),
                                                             label_smoothing=0.1), None)
row("cross_entropy", lambda t: t.nn.functional.cross_entropy(f32(t, 0, 3), f32(t, 0, 3), label_smoothing=0.2), None)
row("cross_entropy", lambda t: t.nn.functional.cross_entropy(f32(t, 2, 0), i64(t, 0, 0)), IndexError,
    "cross_entropy: target 0 is out of bounds for 0 classes")
row("cross_entropy", lambda t: t.nn.functional.cross_entropy(f32(t, 2, 3), i64(t, 1, 1), label_smoothing=1.5),
    ValueError, "label_smoothing")
row("cross_entropy", lambda t: t.nn.functional.cross_entropy(f32(t, 2, 3), i64(t, 1, 1), weight=f32(t, 2)),
    ValueError, "cross_entropy: weight tensor should be defined either for all 3 classes")
row("cross_entropy", lambda t: t.nn.functional.cross_entropy(t.tensor([[NAN, 0.0, 1.0]]), i64(t, 1)), None)
row("nll_loss", lambda t: t.nn.functional.nll_loss(f32(t, 2, 3), i64(t, 1, -5)), (RuntimeError, IndexError),
    "nll_loss")
for _n in ["mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "soft_margin_loss", "kl_div", "poisson_nll_loss",
           "binary_cross_entropy_with_logits", "multilabel_soft_margin_loss"]:
    if not hasattr(F, _n):
        continue
    row(_n, lambda t, n=_n: getattr(t.nn.functional, n)(f32(t, 2, 3), f32(t, 2, 3, fill=0.5)), None)
    row(_n, lambda t, n=_n: getattr(t.nn.functional, n)(f32(t, 0, 3), f32(t, 0, 3)), None)
    if _n != "multilabel_soft_margin_loss":  # below: numbagrad asks for a class dimension
        row(_n, lambda t, n=_n: getattr(t.nn.functional, n)(f32(t), f32(t, fill=0.5)), None)
    row(_n, lambda t, n=_n: getattr(t.nn.functional, n)(f32(t, 2, 3), f32(t, 2, 3), reduction="bogus"), ValueError,
        "bogus")
    row(_n, lambda t, n=_n: getattr(t.nn.functional, n)(t.tensor([NAN, INF]), t.tensor([0.5, 0.5])), None)
row("mse_loss", lambda t: t.nn.functional.mse_loss(f32(t, 2, 3), f32(t, 4)), ValueError,
    "mse_loss: input of shape (2, 3) and target of shape (4,) are not broadcastable")
row("l1_loss", lambda t: t.nn.functional.l1_loss(f32(t, 2, 3), f32(t, 2, 4)), ValueError, "not broadcastable")
row("binary_cross_entropy_with_logits", lambda t: t.nn.functional.binary_cross_entropy_with_logits(
    f32(t, 2, 3), f32(t, 2, 4)), ValueError, "binary_cross_entropy_with_logits")
row("binary_cross_entropy", lambda t: t.nn.functional.binary_cross_entropy(f32(t, 2, 3, fill=0.5),
                                                                           f32(t, 2, 3, fill=1.0)), None)
row("binary_cross_entropy", lambda t: t.nn.functional.binary_cross_entropy(f32(t, 2, 3), f32(t, 2, 3)),
    RuntimeError, "binary_cross_entropy")  # inputs outside [0, 1]
row("binary_cross_entropy", lambda t: t.nn.functional.binary_cross_entropy(f32(t, 2, 3, fill=0.5),
                                                                           f32(t, 2, 2)), ValueError,
    "binary_cross_entropy: using a target size (2, 2) that is different to the input size (2, 3)")
row("binary_cross_entropy", lambda t: t.nn.functional.binary_cross_entropy(f32(t, 0, 3), f32(t, 0, 3)), None)
row("gaussian_nll_loss", lambda t: t.nn.functional.gaussian_nll_loss(f32(t, 2, 3), f32(t, 2, 3),
                                                                     f32(t, 2, 3, fill=1.0)), None)
row("gaussian_nll_loss", lambda t: t.nn.functional.gaussian_nll_loss(f32(t, 2, 3), f32(t, 2, 3),
                                                                     f32(t, 2, 3, fill=-1.0)), ValueError,
    "var has negative entry")
row("gaussian_nll_loss", lambda t: t.nn.functional.gaussian_nll_loss(f32(t, 2, 3), f32(t, 2, 3),
                                                                     f32(t, 2, 2, fill=1.0)), ValueError, "var")
row("sigmoid_focal_loss", lambda t: t.nn.functional.sigmoid_focal_loss(f32(t, 2, 3), f32(t, 2, 3, fill=1.0)), None,
    torch=False)  # torchvision's, not in torch.nn.functional
row("sigmoid_focal_loss", lambda t: t.nn.functional.sigmoid_focal_loss(f32(t, 2, 3), f32(t, 2, 4)), RuntimeError,
    "sigmoid_focal_loss", torch=False)  # as above
row("ctc_loss", lambda t: t.nn.functional.ctc_loss(f32(t, 4, 1, 3).log_softmax(2), i64(t, 1, 2, shape=(1, 2)),
                                                   i64(t, 4), i64(t, 2)), None)
row("ctc_loss", lambda t: t.nn.functional.ctc_loss(f32(t, 4, 1, 3).log_softmax(2), i64(t, 1, 5, shape=(1, 2)),
                                                   i64(t, 4), i64(t, 2)), IndexError,
    "ctc_loss: target index 5 is out of bounds for 3 classes",
    torch=False)  # torch reads past the class dimension without a word
row("ctc_loss", lambda t: t.nn.functional.ctc_loss(f32(t, 4, 1, 3).log_softmax(2), i64(t, 1, 2, shape=(1, 2)),
                                                   i64(t, 9), i64(t, 2)), (RuntimeError, ValueError), "ctc_loss")
row("ctc_loss", lambda t: t.nn.functional.ctc_loss(f32(t, 4, 1, 3).log_softmax(2), i64(t, 1, 2, shape=(1, 2)),
                                                   i64(t, 4), i64(t, 2), blank=3), (RuntimeError, ValueError),
    "ctc_loss")
row("pairwise_distance", lambda t: t.nn.functional.pairwise_distance(f32(t, 2, 3), f32(t, 2, 3)), None)
row("pairwise_distance", lambda t: t.nn.functional.pairwise_distance(f32(t, 2, 3), f32(t, 2, 4)), RuntimeError,
    "pairwise_distance")
row("pairwise_distance", lambda t: t.nn.functional.pairwise_distance(f32(t, 0, 3), f32(t, 0, 3)), None)
row("cosine_similarity", lambda t: t.nn.functional.cosine_similarity(f32(t, 2, 3), f32(t, 2, 3)), None)
row("cosine_similarity", lambda t: t.nn.functional.cosine_similarity(f32(t, 2, 3), f32(t, 2, 3), dim=5), IndexError,
    "cosine_similarity: " + DIM5)
row("cosine_similarity", lambda t: t.nn.functional.cosine_similarity(f32(t, 2, 3), f32(t, 2, 4)), RuntimeError,
    "cosine_similarity")
row("cosine_similarity", lambda t: t.nn.functional.cosine_similarity(f32(t, 2, 3, fill=0.0), f32(t, 2, 3)), None)
_trip = lambda t, s=(2, 3): (f32(t, *s), f32(t, *s, fill=0.1), f32(t, *s, fill=0.2))  # noqa: E731
row("triplet_margin_loss", lambda t: t.nn.functional.triplet_margin_loss(*_trip(t)), None)
row("triplet_margin_loss", lambda t: t.nn.functional.triplet_margin_loss(f32(t, 2, 3), f32(t, 2, 3), f32(t, 2, 4)),
    RuntimeError, "triplet_margin_loss: anchor of shape (2, 3) and positive of shape (2, 3) and negative of shape "
    "(2, 4) are not broadcastable")
row("triplet_margin_loss", lambda t: t.nn.functional.triplet_margin_loss(*_trip(t), margin=-1.0), ValueError,
    "triplet_margin_loss: margin must be greater than 0",
    torch=False)  # numbagrad refuses margin <= 0 as torch's triplet_margin_with_distance_loss does
row("triplet_margin_loss", lambda t: t.nn.functional.triplet_margin_loss(*_trip(t, (0, 3))), None)
row("triplet_margin_with_distance_loss", lambda t: t.nn.functional.triplet_margin_with_distance_loss(*_trip(t)),
    None)
row("triplet_margin_with_distance_loss", lambda t: t.nn.functional.triplet_margin_with_distance_loss(
    *_trip(t), margin=0.0), ValueError, "margin")
row("cosine_embedding_loss", lambda t: t.nn.functional.cosine_embedding_loss(f32(t, 2, 3), f32(t, 2, 3),
                                                                             t.tensor([1.0, -1.0])), None)
row("cosine_embedding_loss", lambda t: t.nn.functional.cosine_embedding_loss(f32(t, 2, 3), f32(t, 2, 3),
                                                                             t.tensor([1.0, -1.0, 1.0])),
    RuntimeError, "cosine_embedding_loss")
row("hinge_embedding_loss", lambda t: t.nn.functional.hinge_embedding_loss(f32(t, 2, 3), f32(t, 2, 3, fill=1.0)),
    None)
row("hinge_embedding_loss", lambda t: t.nn.functional.hinge_embedding_loss(f32(t, 2, 3), f32(t, 2, 3, fill=0.5)),
    ValueError, "hinge_embedding_loss", torch=False)  # torch scores targets other than +-1 silently
row("margin_ranking_loss", lambda t: t.nn.functional.margin_ranking_loss(f32(t, 3), f32(t, 3),
                                                                         t.tensor([1.0, -1.0, 1.0])), None)
row("margin_ranking_loss", lambda t: t.nn.functional.margin_ranking_loss(f32(t, 3), f32(t, 4),
                                                                         t.tensor([1.0, -1.0, 1.0])), RuntimeError,
    "margin_ranking_loss")
row("contrastive_loss", lambda t: t.nn.functional.contrastive_loss(f32(t, 2, 3), f32(t, 2, 3), t.tensor([1.0, 0.0])),
    None, torch=False)  # numbagrad's own
row("contrastive_loss", lambda t: t.nn.functional.contrastive_loss(f32(t, 2, 3), f32(t, 2, 4), t.tensor([1.0, 0.0])),
    RuntimeError, "contrastive_loss", torch=False)  # numbagrad's own
row("multilabel_soft_margin_loss", lambda t: t.nn.functional.multilabel_soft_margin_loss(f32(t, 2, 3), f32(t, 2, 4)),
    (RuntimeError, ValueError), "multilabel_soft_margin_loss")
row("multilabel_soft_margin_loss", lambda t: t.nn.functional.multilabel_soft_margin_loss(f32(t), f32(t)),
    ValueError, "multilabel_soft_margin_loss: input must have at least one dimension",
    torch=False)  # torch scores a 0-d input as one class; numbagrad asks for the class dimension


# -- optimizers: each hyperparameter out of its range (lr = NaN is another suite's row)
_BAD_HYPER = {  # argument -> values that every optimizer taking it refuses, and the message's word
    "lr": ([-1e-3, -INF], "Invalid learning rate"),  # lr = NaN: tests/optim (issue 20's numerics part)
    "eps": ([-1e-8, NAN], "Invalid epsilon value"),
    "weight_decay": ([-0.1, NAN], "Invalid weight_decay value"),
    "momentum": ([-0.5, NAN], "Invalid momentum value"),
    "betas": ([(1.0, 0.999), (0.9, -0.1), (-0.1, 0.9), (NAN, 0.9), (0.9, NAN)], "Invalid beta parameter"),
    "alpha": ([-0.5, NAN], "Invalid alpha value"),
    "rho": ([1.5, -0.1, NAN], "Invalid rho value"),
    "lr_decay": ([-0.1, NAN], "Invalid lr_decay value"),
    "initial_accumulator_value": ([-0.1, NAN], "Invalid initial_accumulator_value value"),
    "momentum_decay": ([-0.1, NAN], "Invalid momentum_decay value"),
}


def _optimizers():
    return sorted(n for n in dir(ng.optim) if inspect.isclass(getattr(ng.optim, n))
                  and issubclass(getattr(ng.optim, n), ng.optim.Optimizer) and n != "Optimizer")


for _opt in _optimizers():
    _sig = inspect.signature(getattr(ng.optim, _opt))
    _in_torch = _opt not in ("Lamb", "Lion")  # numbagrad's own
    row("optim." + _opt, lambda t, o=_opt: getattr(t.optim, o)([prm(t, 2, 3)]), None, torch=_in_torch)
    row("optim." + _opt, lambda t, o=_opt: getattr(t.optim, o)([]), ValueError, "empty parameter list",
        torch=_in_torch)
    row("optim." + _opt, lambda t, o=_opt: getattr(t.optim, o)(prm(t, 2, 3)), TypeError, "iterable",
        torch=_in_torch)
    for _arg, (_vals, _frag) in _BAD_HYPER.items():
        if _arg in _sig.parameters:
            for _v in _vals:
                if _opt == "Lion" and _v == (1.0, 0.999):
                    continue  # Lion's betas lie in the closed [0, 1]
                if _opt == "SGD" and _arg != "lr" and _v != _v:
                    continue  # SGD's check is `< 0`, as torch's: NaN momentum/weight_decay pass both
                row("optim." + _opt, lambda t, o=_opt, a=_arg, v=_v: getattr(t.optim, o)([prm(t, 2, 3)], **{a: v}),
                    ValueError, _frag, torch=_in_torch)
row("optim.SGD", lambda t: t.optim.SGD([prm(t, 2)], lr=0.1, nesterov=True), ValueError,
    "Nesterov momentum requires a momentum and zero dampening")
def _lbfgs_bogus(t):
    p = prm(t, 2)
    t.optim.LBFGS([p], line_search_fn="bogus").step(lambda: (p * p).sum().backward() or (p * p).sum())


row("optim.LBFGS", _lbfgs_bogus, RuntimeError, "only 'strong_wolfe' is supported")  # at the step, as torch
row("optim.LBFGS", lambda t: t.optim.LBFGS([prm(t, 2), prm(t, 2)], lr=-1.0), ValueError, "learning rate")


def _sgd_state_into_adam(t):
    p = prm(t, 2, 3)
    sgd = t.optim.SGD([p], lr=0.1)
    p.grad = f32(t, 2, 3)
    sgd.step()
    adam = t.optim.Adam([p])
    adam.load_state_dict(sgd.state_dict())
    adam.step()  # torch loads, then fails here (KeyError: 'betas')


row("Optimizer.load_state_dict", _sgd_state_into_adam, ValueError, "Adam.load_state_dict: parameter group 0 of the "
    "loaded state lacks ['betas', 'eps']")


def _sched(t, name, *args, **kw):
    opt = t.optim.SGD([prm(t, 2)], lr=0.1)
    s = getattr(t.optim.lr_scheduler, name)(opt, *args, **kw)
    opt.step()
    s.step()


row("lr_scheduler.StepLR", lambda t: _sched(t, "StepLR", step_size=0), ValueError,
    "StepLR: step_size must be a positive integer, got 0")
row("lr_scheduler.StepLR", lambda t: _sched(t, "StepLR", step_size=2), None)
row("lr_scheduler.LinearLR", lambda t: _sched(t, "LinearLR", total_iters=0), None)  # a no-op schedule, as in torch
row("lr_scheduler.LinearLR", lambda t: _sched(t, "LinearLR", start_factor=0.0), ValueError,
    "LinearLR: start_factor must be in (0, 1]")
row("lr_scheduler.PolynomialLR", lambda t: _sched(t, "PolynomialLR", total_iters=0), None)


# -- modules: constructors and forwards
row("nn.MultiheadAttention", lambda t: t.nn.MultiheadAttention(8, 3), ValueError,
    "MultiheadAttention: embed_dim must be divisible by num_heads, got embed_dim=8 and num_heads=3")
row("nn.MultiheadAttention", lambda t: t.nn.MultiheadAttention(8, 0), ValueError, "num_heads")
row("nn.MultiheadAttention", lambda t: t.nn.MultiheadAttention(8, 2), None)
row("nn.Linear", lambda t: t.nn.Linear(3, 4)(f32(t, 2, 5)), RuntimeError,
    "linear: input of shape (2, 5) does not match weight of shape (4, 3)")
row("nn.Linear", lambda t: t.nn.Linear(3, 4)(f32(t, 0, 3)), None)
row("nn.Linear", lambda t: t.nn.Linear(-1, 4), RuntimeError, "Linear: Trying to create tensor with negative dimension")
row("nn.Linear", lambda t: t.nn.Linear(3, 4)(i64(t, 1, 2, 3)), RuntimeError, "linear: input dtype int64")
row("nn.Conv2d", lambda t: t.nn.Conv2d(2, 4, 3, groups=3), ValueError, "in_channels must be divisible by groups")
row("nn.Conv2d", lambda t: t.nn.Conv2d(2, 4, 3, padding="bogus"), ValueError, "padding")
row("nn.Conv2d", lambda t: t.nn.Conv2d(2, 4, 3)(f32(t, 1, 3, 5, 5)), RuntimeError,
    "conv2d: given groups=1, weight of size [4, 2, 3, 3], expected input[1, 3, 5, 5] to have 2 channels")
row("nn.Conv2d", lambda t: t.nn.Conv2d(2, 4, 3, stride=2, padding="same"), ValueError, "padding='same'")
row("nn.Conv1d", lambda t: t.nn.Conv1d(2, 4, 3)(f32(t, 1, 2, 2)), RuntimeError,
    "conv1d: calculated padded input size per channel: (2). Kernel size: (3)")
row("nn.BatchNorm1d", lambda t: t.nn.BatchNorm1d(3)(f32(t, 2, 4)), RuntimeError,
    "batch_norm: running_mean should contain 4 elements not 3")
row("nn.BatchNorm1d", lambda t: t.nn.BatchNorm1d(3)(f32(t, 2, 3, 4, 5)), ValueError, "expected 2D or 3D input")
row("nn.BatchNorm2d", lambda t: t.nn.BatchNorm2d(3)(f32(t, 2, 3)), ValueError, "expected 4D input")
row("nn.BatchNorm2d", lambda t: t.nn.BatchNorm2d(3)(f32(t, 2, 3, 2, 2)), None)
row("nn.LayerNorm", lambda t: t.nn.LayerNorm(4)(f32(t, 2, 3)), RuntimeError,
    "layer_norm: given normalized_shape=[4], expected input with shape [*, 4]")
row("nn.GroupNorm", lambda t: t.nn.GroupNorm(3, 4), ValueError, "must be divisible by num_groups")
row("nn.GroupNorm", lambda t: t.nn.GroupNorm(0, 4), ValueError, "GroupNorm: num_groups must be a positive integer",
    torch=False)  # torch divides by it: ZeroDivisionError
for _make in [lambda t: t.nn.Conv2d(-2, 4, 3), lambda t: t.nn.BatchNorm1d(-1), lambda t: t.nn.LayerNorm(-1),
              lambda t: t.nn.Embedding(-1, 3), lambda t: t.nn.Bilinear(-1, 2, 3), lambda t: t.nn.PReLU(-1),
              lambda t: t.nn.Linear(3, -4)]:
    row("nn.constructors", _make, RuntimeError, "Trying to create tensor with negative dimension -")
row("nn.Unflatten", lambda t: t.nn.Unflatten(1, (2, 2))(f32(t, 2, 3)), RuntimeError,
    "unflatten: Provided sizes [2, 2] don't multiply up to the size of dim 1 (3)")
row("nn.Transformer", lambda t: t.nn.Transformer(d_model=8, nhead=3), ValueError,
    "embed_dim must be divisible by num_heads")
row("nn.Embedding", lambda t: t.nn.Embedding(5, 3)(f32(t, 2)), RuntimeError,
    "embedding: expected an integer (int32/int64) input tensor, got dtype float32")
row("nn.Embedding", lambda t: t.nn.Embedding(5, 3, padding_idx=5), ValueError,
    "Embedding: padding_idx (5) must be within num_embeddings (5)")
row("nn.Embedding", lambda t: t.nn.Embedding(5, 3)(i64(t, 0, 4)), None)
row("nn.Dropout", lambda t: t.nn.Dropout(1.5), ValueError, "dropout probability has to be between 0 and 1")
row("nn.Dropout", lambda t: t.nn.Dropout(NAN)(f32(t, 2, 3)), ValueError, "but got nan")  # torch: at forward
for _n in ["RNN", "LSTM", "GRU"]:
    row("nn." + _n, lambda t, n=_n: getattr(t.nn, n)(3, 4)(f32(t, 5, 2, 3)), None)
    row("nn." + _n, lambda t, n=_n: getattr(t.nn, n)(3, 4)(f32(t, 5, 2, 6)), RuntimeError, "input.size(-1) must")
    row("nn." + _n, lambda t, n=_n: getattr(t.nn, n)(3, 4, num_layers=0), ValueError, "num_layers")
    row("nn." + _n, lambda t, n=_n: getattr(t.nn, n)(3, 4, dropout=2.0), ValueError, "dropout")
    row("nn." + _n, lambda t, n=_n: getattr(t.nn, n)(3, 4)(f32(t, 5, 2, 3, 1)), ValueError,
        f"{_n}: Expected input to be 2D or 3D, got 4D tensor instead")
row("nn.TransformerEncoderLayer", lambda t: t.nn.TransformerEncoderLayer(8, 3), ValueError,
    "embed_dim must be divisible by num_heads")
row("nn.TransformerEncoderLayer", lambda t: t.nn.TransformerEncoderLayer(8, 2, dim_feedforward=16)(f32(t, 3, 2, 8)),
    None)
row("nn.TransformerEncoderLayer", lambda t: t.nn.TransformerEncoderLayer(8, 2, activation="bogus"),
    (RuntimeError, ValueError), "bogus")
row("nn.Flatten", lambda t: t.nn.Flatten(5)(f32(t, 2, 3)), IndexError, "flatten: " + DIM5)
row("nn.Unflatten", lambda t: t.nn.Unflatten(5, (1, 3))(f32(t, 2, 3)), IndexError, "unflatten: " + DIM5)
row("nn.Softmax", lambda t: t.nn.Softmax(5)(f32(t, 2, 3)), IndexError, "softmax: " + DIM5)
row("nn.MaxPool2d", lambda t: t.nn.MaxPool2d(2)(f32(t, 2, 3)), RuntimeError,
    "max_pool2d: expected a 3D or 4D (batch mode) tensor")


# ---- the checks -------------------------------------------------------------------------------
_FOREIGN = ("operands could not be broadcast", "TypingError", "NumbaError", "nopython", "division by zero",
            "modulo by zero", "cannot convert float NaN", "invalid literal for int()", "tuple index out of range",
            "list index out of range")


def _run(lib, call):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            call(lib)
        except Exception as e:  # noqa: BLE001 - every outcome is compared
            return e
    return None


# rows kept in files of their own, one per ops module: tests/bad_input_<family>.py, each an
# ``add(row, dim_rows, f32, i64)`` that adds its rows with this file's helpers
import bad_input_linalg  # noqa: E402
import bad_input_linalg_ops  # noqa: E402
import bad_input_misc  # noqa: E402
import bad_input_nn_extra  # noqa: E402
import bad_input_scan  # noqa: E402
import bad_input_special  # noqa: E402

for _m in (bad_input_linalg, bad_input_linalg_ops, bad_input_misc, bad_input_nn_extra, bad_input_scan, bad_input_special):
    _m.add(row, _dim_rows, f32, i64)


def _rid(r):
    return r[0]


@pytest.mark.parametrize("covers,call,exc,frag,torch_too,when", ROWS, ids=[_rid(r) for r in ROWS])
def test_row(covers, call, exc, frag, torch_too, when):
    if when is not None and not when():
        pytest.skip("not meaningful on this machine")
    err = _run(ng, call)
    if exc is None:
        assert err is None, f"{covers}: expected a result, got {type(err).__name__}: {err}"
    else:
        assert err is not None, f"{covers}: expected {exc}, got a result"
        assert isinstance(err, exc), f"{covers}: expected {exc}, got {type(err).__name__}: {err}"
        assert frag in str(err), f"{covers}: {frag!r} not in the message {str(err)!r}"
        assert not isinstance(err, (ZeroDivisionError, AssertionError, KeyError)), f"{covers}: {err!r}"
        assert type(err).__module__.split(".")[0] != "numba", f"{covers}: a numba error surfaced: {err!r}"
        for s in _FOREIGN:
            assert s not in str(err), f"{covers}: an internal error surfaced: {err!r}"
    if torch is not None and torch_too:
        terr = _run(torch, call)
        assert (terr is None) == (err is None), (
            f"{covers}: torch {'returns' if terr is None else 'raises ' + type(terr).__name__ + ': ' + str(terr)}, "
            f"numbagrad {'returns' if err is None else 'raises ' + type(err).__name__ + ': ' + str(err)}")


# ---- coverage of the table -------------------------------------------------------------------
_COVERED = {r[0] for r in ROWS}

# Public names of numbagrad.nn.functional that take no tensor input (none today): listed here
# with the reason, so that the next one is a decision, not an oversight.
FUNCTIONAL_SKIP = {}


def test_every_functional_function_has_a_row():
    names = [n for n in dir(F) if not n.startswith("_") and callable(getattr(F, n))
             and not inspect.isclass(getattr(F, n)) and not inspect.ismodule(getattr(F, n))]
    assert len(names) > 90
    missing = sorted(set(names) - _COVERED - set(FUNCTIONAL_SKIP))
    assert not missing, f"nn.functional functions without a bad-input row: {missing}"


def test_every_tensor_method_with_a_dim_has_a_row():
    dims = {"dim", "dims", "start_dim", "end_dim", "source", "destination", "axis", "dim0", "dim1"}
    names = []
    for n in dir(ng.Tensor):
        if n.startswith("_"):
            continue
        try:
            params = inspect.signature(getattr(ng.Tensor, n)).parameters
        except (TypeError, ValueError):
            continue
        if dims & set(params):
            names.append(n)
    assert len(names) > 40
    missing = sorted(n for n in names if "Tensor." + n not in _COVERED)
    assert not missing, f"Tensor methods taking a dim without a bad-input row: {missing}"


def test_every_optimizer_has_rows():
    missing = [n for n in _optimizers() if "optim." + n not in _COVERED]
    assert len(_optimizers()) >= 12 and not missing, missing


def test_memmap_is_accepted_everywhere(tmp_path):
    """A ``np.memmap`` is an ndarray: every entry point takes it, and ops and kernels run on it."""
    m = np.memmap(tmp_path / "m.bin", dtype=np.float32, mode="w+", shape=(2, 3))
    m[:] = np.arange(6, dtype=np.float32).reshape(2, 3)
    for make in (ng.Tensor, ng.tensor, ng.as_tensor, ng.from_numpy):
        t = make(m)
        assert type(t.array) is np.ndarray
        np.testing.assert_array_equal(ng.relu(t - 2).numpy(), np.maximum(m - 2, 0))
        np.testing.assert_allclose((t @ t.T).numpy(), np.asarray(m) @ np.asarray(m).T, rtol=1e-6)
    shared = ng.from_numpy(m)
    m[0, 0] = 7.0
    assert shared[0, 0].item() == 7.0  # viewed, not copied
    assert ng.backends is not None and ng.Tensor(m).device == "cpu"
    from numbagrad.backend.dispatch import backend_of
    assert backend_of(m) is backend_of(np.zeros(1))


def test_big_endian_is_converted():
    b = np.arange(6, dtype=">f4").reshape(2, 3) - 2
    for make in (ng.Tensor, ng.tensor, ng.as_tensor, ng.from_numpy):
        t = make(b)
        assert t.array.dtype == np.float32 and t.array.dtype.isnative
        np.testing.assert_array_equal(ng.relu(t).numpy(), np.maximum(b.astype(np.float32), 0))
        s = ng.softmax(t, 1).numpy()
        e = np.exp(b - b.max(1, keepdims=True))
        np.testing.assert_allclose(s, e / e.sum(1, keepdims=True), rtol=1e-6)


@pytest.mark.parametrize("ndim", [0, 1, 3])
def test_dim_check_matches_torch(ndim):
    """The one dimension check (``ops._util.wrap_dim``): for every dim from -5 to 4, ``sum``,
    ``softmax``, ``unsqueeze``, ``flip`` and ``narrow`` accept and refuse what PyTorch does, with
    PyTorch's message inside numbagrad's."""
    torch_ = pytest.importorskip("torch")
    a = np.linspace(-1, 1, 2 ** ndim).astype(np.float32).reshape((2,) * ndim)
    calls = [lambda x, d: x.sum(d), lambda x, d: x.softmax(d), lambda x, d: x.unsqueeze(d),
             lambda x, d: x.flip((d,)), lambda x, d: x.narrow(d, 0, 1)]
    for call in calls:
        for d in range(-5, 5):
            ours, theirs = _run(ng, lambda t: call(t.tensor(a), d)), _run(torch_, lambda t: call(t.tensor(a), d))
            assert (ours is None) == (theirs is None), (ndim, d, ours, theirs)
            if theirs is not None:
                assert type(ours) is type(theirs) and str(theirs) in str(ours), (ours, theirs)


def test_cross_entropy_empty_batch_values():
    """An empty batch: mean reduction is 0/0 = NaN, sum is 0, 'none' is empty, as in PyTorch,
    and backward gives an empty gradient (it raised ZeroDivisionError in issue 20)."""
    x = ng.zeros(0, 3, requires_grad=True)
    y = ng.tensor(np.zeros(0, np.int64))
    m = F.cross_entropy(x, y)
    assert np.isnan(m.item())
    assert F.cross_entropy(x, y, reduction="sum").item() == 0.0
    assert F.cross_entropy(x, y, reduction="none").shape == (0,)
    m.backward()
    assert x.grad.shape == (0, 3)
