"""Elementwise arithmetic, math functions and comparisons.

Binary ops broadcast like NumPy and promote like PyTorch; their backward sums the
gradient back to each input's shape (``backend.sum_to_shape``).
"""
import numpy as np

from .. import _dtype
from .._dtype import is_float as _isf
from ..autograd.function import Function
from ..backend import backend_of
from ..tensor import Tensor
from ._util import be_of, binary_operands, as_tensor_arg, broadcast_shape


def _shape(x):
    return getattr(x, "shape", ())


# ---- binary arithmetic -------------------------------------------------------------------
class Add(Function):
    _op = "add"  # Sub: "sub", whose gradient for ``b`` is negated
    __slots__ = ("shapes",)  # a slot: the node makes no __dict__

    @staticmethod
    def forward(ctx, a, b):
        ctx.shapes = (a.shape, b.shape)  # arrays or NumPy scalars (binary_operands)
        return be_of(a, b).add(a, b)   # NOTE: a literal call: the per-op path of the tiniest ops

    @staticmethod
    def backward(ctx, g):
        be = backend_of(g)
        na, nb = ctx.needs_input_grad
        sa, sb = ctx.shapes
        gb = be.sum_to_shape(g, sb) if nb else None
        return (be.sum_to_shape(g, sa) if na else None,
                be.neg(gb) if nb and ctx._op == "sub" else gb)


class Sub(Add):
    _op = "sub"
    __slots__ = ()

    @staticmethod
    def forward(ctx, a, b):
        ctx.shapes = (a.shape, b.shape)
        return be_of(a, b).sub(a, b)


class _Binary(Function):
    """A binary op ``be.<_op>(a, b)`` that saves its operands. Its backward is the chain
    rule: ``_grads(be, g, na, nb, *saved)`` returns the gradients of ``a`` and ``b`` in the
    broadcast shape (each may be left ``None`` where ``na``/``nb`` say it is not needed),
    and each is summed back to its operand's shape. A subclass that saves more (``Pow``,
    its output) overrides ``forward`` and keeps ``a, b`` the first two saved arrays."""
    _op = None

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return getattr(be_of(a, b), ctx._op)(a, b)

    @staticmethod
    def backward(ctx, g):
        saved = ctx.saved_tensors
        be = backend_of(g)
        na, nb = ctx.needs_input_grad
        ga, gb = ctx._grads(be, g, na, nb, *saved)
        return (be.sum_to_shape(ga, _shape(saved[0])) if na else None,
                be.sum_to_shape(gb, _shape(saved[1])) if nb else None)


class Mul(_Binary):
    _op = "mul"

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return be_of(a, b).mul(a, b)   # literal, as Add's: a common tiny op

    @staticmethod
    def _grads(be, g, na, nb, a, b):
        return (be.mul(g, b) if na else None), (be.mul(g, a) if nb else None)


class Div(_Binary):
    _op = "div"

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return be_of(a, b).div(a, b)

    @staticmethod
    def _grads(be, g, na, nb, a, b):
        # d(a/b)/db = -a / b^2
        return ((be.div(g, b) if na else None),
                (be.neg(be.div(be.mul(g, a), be.mul(b, b))) if nb else None))


class Pow(_Binary):
    @staticmethod
    def forward(ctx, a, b):
        be = be_of(a, b)
        y = be.pow(a, b)
        ctx.save_for_backward(a, b, y)
        return y

    @staticmethod
    def _grads(be, g, na, nb, a, b, y):
        ga = gb = None
        if na:
            # b * a^(b-1); written as b * a^(b-1) (not y*b/a) so that a == 0 is exact.
            # (an operator, not be.sub: b may be a NumPy scalar, e.g. x ** 3)
            bm1 = b - b.dtype.type(1)
            ga = be.mul(g, be.mul(b, be.pow(a, bm1)))
        if nb:
            # a^b * log(a); PyTorch's convention: 0 where a == 0 and b >= 0.
            with np.errstate(divide="ignore", invalid="ignore"):
                la = be.log(a)
            la = be.where(be.logical_and(be.equal(a, 0), be.greater_equal(b, 0)), 0, la)
            gb = be.mul(g, be.mul(y, la)).astype(g.dtype, copy=False)
        return ga, gb


class Maximum(_Binary):
    _op, _cmp = "maximum", "greater"

    def _grads(ctx, be, g, na, nb, a, b):  # a method: it reads ``_cmp``
        # The gradient goes to the larger input (smaller for Minimum); ties split it evenly,
        # as PyTorch does.
        wa = be.where(getattr(be, ctx._cmp)(a, b), 1.0, be.where(be.equal(a, b), 0.5, 0.0)).astype(g.dtype)
        return (be.mul(g, wa) if na else None), (be.mul(g, 1 - wa) if nb else None)


class Minimum(Maximum):
    _op, _cmp = "minimum", "less"


class Remainder(_Binary):
    _op = "remainder"

    @staticmethod
    def _grads(be, g, na, nb, a, b):
        return (g if na else None), (be.mul(g, be.neg(be.floor(be.div(a, b)))) if nb else None)


def _binary(fn_cls, opname, doc):
    def op(a, b):
        a, b = binary_operands(a, b, opname)
        return fn_cls.apply(a, b)
    op.__name__ = op.__qualname__ = opname
    op.__doc__ = doc
    return op


def add(input, other, alpha=1):
    """``input + alpha * other`` with broadcasting."""
    if alpha != 1:
        other = mul(other, alpha)
    a, b = binary_operands(input, other, "add")
    return Add.apply(a, b)


def sub(input, other, alpha=1):
    """``input - alpha * other`` with broadcasting."""
    if alpha != 1:
        other = mul(other, alpha)
    a, b = binary_operands(input, other, "sub")
    return Sub.apply(a, b)


def mul(input, other):
    """Elementwise product with broadcasting."""
    a, b = binary_operands(input, other, "mul")
    return Mul.apply(a, b)


def div(input, other, rounding_mode=None):
    """True division (``rounding_mode=None``), or ``'floor'``/``'trunc'`` division."""
    a, b = binary_operands(input, other, "div")
    if rounding_mode is None:
        if not (isinstance(a, Tensor) and _isf(a.dtype) or isinstance(b, Tensor) and _isf(b.dtype)
                or isinstance(a, np.floating) or isinstance(b, np.floating)):
            from .shape import cast
            d = _dtype.get_default_dtype()
            a = cast(a, d) if isinstance(a, Tensor) else d.type(a)
            b = cast(b, d) if isinstance(b, Tensor) else d.type(b)
        return Div.apply(a, b)
    q = Div.apply(a, b)
    return floor(q) if rounding_mode == "floor" else trunc(q)


def true_divide(input, other):
    """``input / other`` (true division): an alias of :func:`div`."""
    return div(input, other)


def _no_int_zero(opname, b):
    """Raise PyTorch's error for an integer divisor that holds a 0 (NumPy returns 0 and warns)."""
    arr = b.array if isinstance(b, Tensor) else b
    if getattr(arr, "dtype", np.dtype(type(arr))).kind in "iub" and bool((arr == 0).any()):
        raise RuntimeError(f"{opname}: ZeroDivisionError: an integer divisor holds 0")


def floor_divide(input, other):
    """``input // other`` rounded toward minus infinity, as ``torch.floor_divide``; an integer
    division by zero raises.
    """
    a, b = binary_operands(input, other, "floor_divide")
    if (isinstance(a, Tensor) and a.dtype.kind in "iub") and not (isinstance(b, Tensor) and _isf(b.dtype)):
        aa = a.array if isinstance(a, Tensor) else a
        bb = b.array if isinstance(b, Tensor) else b
        _no_int_zero("floor_divide", bb)
        return Tensor._from_array(be_of(aa, bb).asarray(np.floor_divide(aa, bb)))
    return floor(Div.apply(a, b))


def remainder(input, other):
    """Python-style modulus (the sign of the divisor), as ``torch.remainder``."""
    a, b = binary_operands(input, other, "remainder")
    if getattr(a, "dtype", np.dtype(type(a))).kind in "iub":
        _no_int_zero("remainder", b)
    return Remainder.apply(a, b)


def pow(input, exponent):
    """``input ** exponent`` with broadcasting; an integer base takes no negative integer power."""
    a, b = binary_operands(input, exponent, "pow")
    ka, kb = (getattr(v, "dtype", np.dtype(type(v))).kind for v in (a, b))
    if ka in "iu" and kb in "iu" and bool(((b.array if isinstance(b, Tensor) else b) < 0).any()):
        raise RuntimeError("pow: Integers to negative integer powers are not allowed.")
    return Pow.apply(a, b)


maximum = _binary(Maximum, "maximum",
                  "The elementwise maximum of ``input`` and ``other`` (NaN propagates), with broadcasting.")
minimum = _binary(Minimum, "minimum",
                  "The elementwise minimum of ``input`` and ``other`` (NaN propagates), with broadcasting.")


def rsub(input, other):
    """``other - input`` (the reversed subtraction)."""
    return sub(other, input)


# ---- unary math ---------------------------------------------------------------------------
def _unary(name, forward, backward, saves="x", doc=""):
    """Build the Function and public function of a unary op.

    ``forward(be, x) -> y``; ``backward(be, saved, g) -> grad`` where ``saved`` is ``x``
    or ``y`` as ``saves`` says.
    """
    class Op(Function):
        @staticmethod
        def forward(ctx, x):
            be = backend_of(x)
            y = forward(be, x)
            if saves == "x":
                ctx.save_for_backward(x)
            elif saves == "y":
                ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx, g):
            (s,) = ctx.saved_tensors or (None,)
            return backward(backend_of(g), s, g)

    Op.__name__ = Op.__qualname__ = name.capitalize().replace("_", "")

    def op(input):
        if not isinstance(input, Tensor):
            input = as_tensor_arg(input, name)
        if input.dtype.kind != "f" and not _isf(input.dtype) and name not in _INT_OK:
            from .shape import cast
            input = cast(input, _dtype.get_default_dtype())
        return Op.apply(input)

    op.__name__ = name
    op.__doc__ = doc or f"Elementwise ``{name}``."
    op.Function = Op
    return op


_INT_OK = {"neg", "abs", "sign", "square", "floor", "ceil", "round", "trunc"}


def _f(dtype, v):
    return dtype.type(v)


def _ignore(fn):
    def w(*args):
        with np.errstate(all="ignore"):
            return fn(*args)
    return w


neg = _unary("neg", lambda be, x: be.neg(x), lambda be, s, g: be.neg(g), saves=None)
exp = _unary("exp", lambda be, x: be.exp(x), lambda be, y, g: be.mul(g, y), saves="y")
exp2 = _unary("exp2", lambda be, x: np.exp2(x), lambda be, y, g: be.mul(g, y * _f(y.dtype, np.log(2))), saves="y")
expm1 = _unary("expm1", lambda be, x: be.expm1(x), lambda be, y, g: be.mul(g, y + _f(y.dtype, 1)), saves="y")
log = _unary("log", _ignore(lambda be, x: be.log(x)), lambda be, x, g: be.div(g, x))
log2 = _unary("log2", _ignore(lambda be, x: np.log2(x)), lambda be, x, g: be.div(g, x * _f(x.dtype, np.log(2))))
log10 = _unary("log10", _ignore(lambda be, x: np.log10(x)), lambda be, x, g: be.div(g, x * _f(x.dtype, np.log(10))))
log1p = _unary("log1p", _ignore(lambda be, x: be.log1p(x)), lambda be, x, g: be.div(g, x + _f(x.dtype, 1)))
sqrt = _unary("sqrt", _ignore(lambda be, x: be.sqrt(x)), lambda be, y, g: be.div(g, y * _f(y.dtype, 2)), saves="y")
rsqrt = _unary("rsqrt", _ignore(lambda be, x: _f(x.dtype, 1) / be.sqrt(x)),
               lambda be, y, g: be.mul(g, _f(y.dtype, -0.5) * y * y * y), saves="y")
abs = _unary("abs", lambda be, x: be.abs(x), lambda be, x, g: be.mul(g, be.sign(x)))
sign = _unary("sign", lambda be, x: be.sign(x), lambda be, x, g: be.zeros_like(g), saves=None)
square = _unary("square", lambda be, x: be.mul(x, x), lambda be, x, g: be.mul(g, x * _f(x.dtype, 2)))
reciprocal = _unary("reciprocal", _ignore(lambda be, x: _f(x.dtype, 1) / x),
                    lambda be, y, g: be.mul(g, be.neg(y * y)), saves="y")
sin = _unary("sin", lambda be, x: be.sin(x), lambda be, x, g: be.mul(g, be.cos(x)))
cos = _unary("cos", lambda be, x: be.cos(x), lambda be, x, g: be.mul(g, be.neg(be.sin(x))))
floor = _unary("floor", lambda be, x: be.floor(x), lambda be, s, g: be.zeros_like(g), saves=None)
ceil = _unary("ceil", lambda be, x: be.ceil(x), lambda be, s, g: be.zeros_like(g), saves=None)
round = _unary("round", lambda be, x: be.round(x), lambda be, s, g: be.zeros_like(g), saves=None)
trunc = _unary("trunc", lambda be, x: be.trunc(x), lambda be, s, g: be.zeros_like(g), saves=None)
negative = neg
absolute = abs


def frac(input):
    """The fractional part ``input - trunc(input)`` (sign of ``input``)."""
    return sub(input, trunc(input))


# ---- clamp --------------------------------------------------------------------------------
class Clamp(Function):
    @staticmethod
    def forward(ctx, x, lo, hi):
        be = backend_of(x)
        ctx.save_for_backward(x)
        ctx.bounds = (lo, hi)
        return be.clip(x, lo, hi).astype(x.dtype, copy=False)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        lo, hi = ctx.bounds
        be = backend_of(g)
        mask = None
        if lo is not None:
            mask = be.greater_equal(x, lo)
        if hi is not None:
            below = be.less_equal(x, hi)
            mask = below if mask is None else be.logical_and(mask, below)
        if mask is None:  # no bound: the gradient passes everywhere
            return g, None, None
        return be.where(mask, g, g.dtype.type(0)), None, None


def clamp(input, min=None, max=None):
    """Clamp to ``[min, max]``. The gradient passes where ``min <= x <= max``.

    Tensor bounds are supported through :func:`maximum`/:func:`minimum`.
    """
    if min is None and max is None:
        raise ValueError("clamp: at least one of 'min' or 'max' must not be None")
    if isinstance(min, Tensor) or isinstance(max, Tensor):
        out = input
        if min is not None:
            out = maximum(out, min)
        if max is not None:
            out = minimum(out, max)
        return out
    input = as_tensor_arg(input, "clamp")
    d = input.dtype
    lo = None if min is None else d.type(min)
    hi = None if max is None else d.type(max)
    return Clamp.apply(input, lo, hi)


clip = clamp


def clamp_min(input, min):
    """``clamp(input, min=min)``: the elementwise maximum with ``min``."""
    return clamp(input, min=min)


def clamp_max(input, max):
    """``clamp(input, max=max)``: the elementwise minimum with ``max``."""
    return clamp(input, max=max)


# ---- where ----------------------------------------------------------------------------------
class Where(Function):
    @staticmethod
    def forward(ctx, cond, a, b):
        ctx.save_for_backward(cond)
        ctx.shapes = (_shape(a), _shape(b))
        return be_of(a, b, cond).where(cond, a, b)

    @staticmethod
    def backward(ctx, g):
        (cond,) = ctx.saved_tensors
        be = backend_of(g)
        _, na, nb = ctx.needs_input_grad
        zero = g.dtype.type(0)
        sa, sb = ctx.shapes
        return (None,
                be.sum_to_shape(be.where(cond, g, zero), sa) if na else None,
                be.sum_to_shape(be.where(cond, zero, g), sb) if nb else None)


def where(condition, input=None, other=None):
    """``input`` where ``condition`` else ``other`` (broadcasting); with one argument, the
    indices of the nonzero elements as in ``torch.where(cond)``."""
    condition = as_tensor_arg(condition, "where")
    if input is None and other is None:
        return tuple(Tensor._from_array(i) for i in np.nonzero(condition.array))
    if not isinstance(input, Tensor) and not isinstance(other, Tensor) and \
            all(isinstance(v, (bool, int, float, np.number)) for v in (input, other)):
        # two Python scalars (``where(mask, 1.0, 0.0)``): PyTorch's result dtype (the default
        # float if either is a float, else int64, or bool for two bools), on the mask's device
        kinds = {type(v) for v in (input, other)}
        dt = (_dtype.get_default_dtype() if any(np.issubdtype(type(v), np.floating) or isinstance(v, float)
                                                for v in (input, other))
              else np.bool_ if kinds == {bool} else np.int64)
        input = Tensor._from_array(backend_of(condition.array).asarray(np.asarray(input, dt)))
    a, b = binary_operands(input, other, "where")
    broadcast_shape("where", condition.shape, _shape(a), _shape(b))  # names where and the three shapes
    cond = condition if condition.dtype == np.bool_ else condition.bool()
    return Where.apply(cond, a, b)


# ---- comparisons and logic (not differentiable) ---------------------------------------------
def _bool_tensor(r):
    """A bool Tensor of the backend result ``r``: NumPy's comparison ufuncs give a scalar
    (``np.bool_``), not a 0-d array, for 0-d operands; a Tensor holds an array."""
    return Tensor._from_array(np.asarray(r) if isinstance(r, np.generic) else r)


def _cmp(name, method):
    def op(input, other):
        a, b = binary_operands(input, other, name)
        aa = a.array if isinstance(a, Tensor) else a
        bb = b.array if isinstance(b, Tensor) else b
        return _bool_tensor(getattr(be_of(aa, bb), method)(aa, bb))
    op.__name__ = name
    op.__doc__ = f"Elementwise ``{name}`` (a bool tensor, never tracked)."
    return op


eq = _cmp("eq", "equal")
ne = _cmp("ne", "not_equal")
lt = _cmp("lt", "less")
le = _cmp("le", "less_equal")
gt = _cmp("gt", "greater")
ge = _cmp("ge", "greater_equal")
greater, greater_equal, less, less_equal, not_equal = gt, ge, lt, le, ne
logical_and = _cmp("logical_and", "logical_and")
logical_or = _cmp("logical_or", "logical_or")
logical_xor = _cmp("logical_xor", "logical_xor")


def logical_not(input):
    """Elementwise ``not input`` (nonzero is true), as a bool tensor."""
    input = as_tensor_arg(input, "logical_not")
    return _bool_tensor(backend_of(input.array).logical_not(input.array))


def isnan(input):
    """A bool tensor, true where ``input`` is NaN."""
    return _bool_tensor(backend_of(input.array).isnan(input.array))


def isinf(input):
    """A bool tensor, true where ``input`` is plus or minus infinity."""
    return _bool_tensor(backend_of(input.array).isinf(input.array))


def isfinite(input):
    """A bool tensor, true where ``input`` is neither NaN nor infinite."""
    return _bool_tensor(backend_of(input.array).isfinite(input.array))


def equal(input, other):
    """True if both tensors have the same shape and elements (``torch.equal``)."""
    return tuple(input.shape) == tuple(other.shape) and bool(np.all(input.detach().numpy() == other.detach().numpy()))


def allclose(input, other, rtol=1e-5, atol=1e-8, equal_nan=False):
    """Whether ``|input - other| <= atol + rtol * |other|`` holds everywhere (a Python bool)."""
    return bool(np.allclose(input.detach().numpy(), other.detach().numpy(), rtol=rtol, atol=atol,
                            equal_nan=equal_nan))


def isclose(input, other, rtol=1e-5, atol=1e-8, equal_nan=False):
    """A bool tensor, true where ``|input - other| <= atol + rtol * |other|``."""
    return Tensor._from_array(np.isclose(input.array, other.array, rtol=rtol, atol=atol, equal_nan=equal_nan))


def lerp(input, end, weight):
    """``input + weight * (end - input)``."""
    return add(input, mul(sub(end, input), weight))
