"""Pointwise math beyond the core arithmetic of :mod:`.elementwise`: trigonometric and
hyperbolic functions and their inverses, the error and log-gamma functions, two-argument
functions (``atan2``, ``hypot``, ``fmod``, ``copysign``, ``logaddexp``, ``xlogy``...),
PyTorch's fused multiply-adds (``addcmul``, ``addcdiv``) and the in-place ``*_`` forms.

Every forward is one NumPy ufunc (or SciPy's, for ``erf``/``erfc``/``lgamma``) on the
backend array, so it runs the CPU loop or, on a CUDA array, the twin registered for that
ufunc in :mod:`numbagrad.kernels.cuda.elementwise`. Each backward is written with the
same ufuncs. Compositions of existing differentiable ops are used where the composite's
gradient is PyTorch's everywhere (``addcmul``, ``deg2rad``, ``logit``...).
"""
import math

import numpy as np

from .. import _dtype
from ..autograd.function import Function
from ..backend import backend_of
from ..tensor import Tensor
from ._util import be_of, binary_operands, as_tensor_arg
from .elementwise import (_Binary, _unary, _f, _ignore, _shape, add, sub, mul, div, log, log2, pow,
                          where, eq, clamp, sign, neg, square, exp, sin, cos, sqrt, rsqrt,
                          abs, floor, ceil, round, trunc, frac, reciprocal, exp2, expm1,
                          log1p, log10, lt, le, gt, ge, ne, logical_and, logical_or,
                          logical_xor, logical_not, remainder, floor_divide, clamp_min,
                          clamp_max)


def _sp(name):
    """SciPy's special function ``name``, imported on first use: ``scipy.special`` took
    ~0.2 s of ``import numbagrad`` (0.4 s on a loaded machine) for four rarely used ops."""
    from scipy import special
    return getattr(special, name)


def _half_safe(name):
    """SciPy's ufunc ``name`` (which has no float16 loop) in the input's dtype."""
    def f(be, x):
        ufunc = _sp(name)
        if x.dtype == np.float16:
            return ufunc(x.astype(np.float32)).astype(np.float16)
        return ufunc(x)
    return f


def _sq(x):
    return x * x


# ---- trigonometric and hyperbolic -------------------------------------------------------
tan = _unary("tan", lambda be, x: np.tan(x),
             lambda be, y, g: be.mul(g, y * y + _f(y.dtype, 1)), saves="y")
asin = _unary("asin", _ignore(lambda be, x: np.arcsin(x)),
              _ignore(lambda be, x, g: be.div(g, np.sqrt(_f(x.dtype, 1) - _sq(x)))))
acos = _unary("acos", _ignore(lambda be, x: np.arccos(x)),
              _ignore(lambda be, x, g: be.neg(be.div(g, np.sqrt(_f(x.dtype, 1) - _sq(x))))))
atan = _unary("atan", lambda be, x: np.arctan(x),
              lambda be, x, g: be.div(g, _sq(x) + _f(x.dtype, 1)))
sinh = _unary("sinh", lambda be, x: np.sinh(x), lambda be, x, g: be.mul(g, np.cosh(x)))
cosh = _unary("cosh", lambda be, x: np.cosh(x), lambda be, x, g: be.mul(g, np.sinh(x)))
asinh = _unary("asinh", lambda be, x: np.arcsinh(x),
               lambda be, x, g: be.div(g, np.sqrt(_sq(x) + _f(x.dtype, 1))))
acosh = _unary("acosh", _ignore(lambda be, x: np.arccosh(x)),
               _ignore(lambda be, x, g: be.div(g, np.sqrt(_sq(x) - _f(x.dtype, 1)))))
atanh = _unary("atanh", _ignore(lambda be, x: np.arctanh(x)),
               _ignore(lambda be, x, g: be.div(g, _f(x.dtype, 1) - _sq(x))))
arcsin, arccos, arctan, arcsinh, arccosh, arctanh = asin, acos, atan, asinh, acosh, atanh

# ---- error function and log-gamma (SciPy's ufuncs on the CPU, libdevice on CUDA) ----------
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
erf = _unary("erf", _half_safe("erf"),
             lambda be, x, g: be.mul(g, np.exp(-_sq(x)) * _f(x.dtype, _TWO_OVER_SQRT_PI)),
             doc="The error function, ``2/sqrt(pi) * integral_0^x exp(-t^2) dt``.")
erfc = _unary("erfc", _half_safe("erfc"),
              lambda be, x, g: be.mul(g, np.exp(-_sq(x)) * _f(x.dtype, -_TWO_OVER_SQRT_PI)),
              doc="``1 - erf(x)``, accurate where ``erf(x)`` is near 1.")


def _psi(x):
    """digamma on a backend array from ufuncs only (so it runs on CUDA arrays too):
    reflection ``psi(x) = psi(1 - x) - pi / tan(pi x)`` below 1/2, ten steps of
    ``psi(x) = psi(x + 1) - 1/x``, then the asymptotic series in ``1/z^2`` to ``z^-8``
    at ``z >= 10.5`` (truncation error below 1e-12). Agrees with SciPy's ``psi`` to about
    1e-13 relative in float64 away from the poles (``nan`` at the negative integers,
    ``-inf``/``inf`` at ``+0``/``-0``)."""
    with np.errstate(all="ignore"):
        w = np.asarray(x, np.float64) if isinstance(x, np.ndarray) else x.astype(np.float64)
        neg = w < 0.5
        z = np.where(neg, 1.0 - w, w)
        acc = 1.0 / z
        for k in range(1, 10):
            acc = acc + 1.0 / (z + float(k))
        z = z + 10.0
        r = 1.0 / (z * z)
        series = np.log(z) - 0.5 / z - r * (1.0 / 12 - r * (1.0 / 120 - r * (1.0 / 252 - r * (1.0 / 240))))
        p = series - acc
        p = np.where(neg, p - math.pi / np.tan(math.pi * w), p)
        # the poles: nan at the negative integers (tan(pi w) is ~1e-16 there, not 0), and
        # -inf/+inf at +0/-0, as SciPy and PyTorch give
        p = np.where(neg & (w == np.floor(w)), np.where(w == 0.0, np.copysign(np.inf, -w), np.nan), p)
        return p.astype(x.dtype)


def _trigamma(x):
    """trigamma, ``psi'(x)``, on a backend array from ufuncs only (so it runs on CUDA arrays
    too), as :func:`_psi`: reflection ``psi'(x) = pi^2 / sin^2(pi x) - psi'(1 - x)`` below
    1/2 (the sine taken of ``x - rint(x)``, exact, so large negative ``x`` keeps its
    accuracy), ten steps of ``psi'(x) = psi'(x + 1) + 1/x^2``, then the asymptotic series
    ``1/z + 1/(2 z^2) + sum_k B_2k / z^(2k+1)`` to ``B_12`` at ``z >= 10.5`` (truncation
    error below 2e-13). Agrees with SciPy's ``polygamma(1, x)`` to about 1e-13 relative in
    float64 away from the poles (``x = 0, -1, -2, ...``, where it is ``inf``)."""
    with np.errstate(all="ignore"):
        w = np.asarray(x, np.float64) if isinstance(x, np.ndarray) else x.astype(np.float64)
        neg = w < 0.5
        z = np.where(neg, 1.0 - w, w)
        acc = 1.0 / (z * z)
        for k in range(1, 10):
            zk = z + float(k)
            acc = acc + 1.0 / (zk * zk)
        z = z + 10.0
        r = 1.0 / (z * z)
        tail = 1.0 / 6 - r * (1.0 / 30 - r * (1.0 / 42 - r * (1.0 / 30 - r * (5.0 / 66 - r * (691.0 / 2730)))))
        series = (1.0 + 0.5 / z + r * tail) / z
        p = series + acc
        s = np.sin(math.pi * (w - np.rint(w)))
        p = np.where(neg, (math.pi * math.pi) / (s * s) - p, p)
        return p.astype(x.dtype)


lgamma = _unary("lgamma", _ignore(_half_safe("gammaln")), lambda be, x, g: be.mul(g, _psi(x)),
                doc="``log|Gamma(x)|``; its gradient is digamma.")
digamma = _unary("digamma", lambda be, x: _psi(x), lambda be, x, g: be.mul(g, _trigamma(x)),
                 doc="""``psi(x) = d/dx log Gamma(x)``, from ufuncs only (CPU and CUDA).

    Its gradient is the trigamma function ``psi'(x)`` (``torch.polygamma(1, x)``); both are
    ``nan``/``inf`` at the poles ``x = 0, -1, -2, ...`` (PyTorch: ``-inf`` for ``digamma(0)``,
    ``nan`` at the negative integers).

    Example
    -------
    >>> import numbagrad as torch
    >>> x = torch.tensor([1.0, 2.5], requires_grad=True)
    >>> torch.digamma(x).sum().backward()
    >>> [round(v, 4) for v in x.grad.tolist()]
    [1.6449, 0.4904]
    """)


def erfinv(input):
    """The inverse error function (SciPy's ``erfinv``); CPU only. Its gradient is
    ``sqrt(pi)/2 * exp(erfinv(x)^2)``."""
    return _ErfInv.apply(_float(as_tensor_arg(input, "erfinv")))


class _ErfInv(Function):
    @staticmethod
    def forward(ctx, x):
        y = _host_ufunc("erfinv", x, "erfinv")
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        with np.errstate(over="ignore"):
            return backend_of(g).mul(g, np.exp(_sq(y)) * _f(y.dtype, math.sqrt(math.pi) / 2))


def _host_ufunc(uf, x, opname):
    """SciPy's ufunc named ``uf`` on the host array ``x``."""
    if not isinstance(x, np.ndarray):
        raise NotImplementedError(f"{opname}: runs on the CPU only (SciPy's {uf}); "
                                  f"got a tensor of shape {tuple(x.shape)} on {backend_of(x).name}")
    with np.errstate(all="ignore"):
        return _half_safe(uf)(None, x)


def _float(t):
    if t.dtype.kind != "f":
        from .shape import cast
        return cast(t, _dtype.get_default_dtype())
    return t


# ---- simple composites ------------------------------------------------------------------
def deg2rad(input):
    """Degrees to radians: ``input * pi / 180``."""
    return mul(_float(as_tensor_arg(input, "deg2rad")), math.pi / 180.0)


def rad2deg(input):
    """Radians to degrees: ``input * 180 / pi``."""
    return mul(_float(as_tensor_arg(input, "rad2deg")), 180.0 / math.pi)


def positive(input):
    """``input`` itself (``torch.positive``)."""
    return input


sgn = sign
fix = trunc


def logit(input, eps=None):
    """``log(p / (1 - p))``, with ``p`` clamped to ``[eps, 1 - eps]`` when ``eps`` is given
    (the gradient is then 0 outside that range, as in PyTorch)."""
    p = _float(as_tensor_arg(input, "logit"))
    if eps is not None:
        p = clamp(p, eps, 1.0 - eps)
    return log(div(p, sub(1.0, p)))


def xlogy(input, other):
    """``input * log(other)``, and 0 where ``input == 0`` (even where ``other`` is 0 or nan)."""
    if not isinstance(input, Tensor) and not isinstance(other, Tensor):
        raise TypeError("xlogy: expected at least one Tensor operand")
    x = input if isinstance(input, Tensor) else Tensor(np.asarray(input, other.dtype))
    y = other if isinstance(other, Tensor) else Tensor(np.asarray(other, x.dtype))
    x, y = _float(x), _float(y)
    with np.errstate(all="ignore"):
        return where(eq(x, 0), 0.0, mul(x, log(y)))


def nan_to_num(input, nan=0.0, posinf=None, neginf=None):
    """NaN, +inf and -inf replaced by ``nan``, ``posinf`` and ``neginf`` (the dtype's
    largest and lowest finite values by default). The gradient passes where the input
    is finite."""
    x = as_tensor_arg(input, "nan_to_num")
    if x.dtype.kind != "f":
        return x.clone()
    fi = np.finfo(x.dtype)
    hi = fi.max if posinf is None else posinf
    lo = fi.min if neginf is None else neginf
    be = backend_of(x.array)
    a = x.array
    repl = be.where(be.isnan(a), x.dtype.type(nan), be.where(be.greater(a, 0), x.dtype.type(hi),
                                                             x.dtype.type(lo)))
    return where(Tensor._from_array(be.isfinite(a)), x, Tensor._from_array(repl.astype(x.dtype, copy=False)))


def float_power(input, exponent):
    """``input ** exponent`` in float64 (``torch.float_power``)."""
    from .shape import cast
    a = cast(input, np.float64) if isinstance(input, Tensor) else float(input)
    b = cast(exponent, np.float64) if isinstance(exponent, Tensor) else float(exponent)
    return pow(a, b)


def addcmul(input, tensor1, tensor2, *, value=1):
    """``input + value * tensor1 * tensor2``."""
    p = mul(tensor1, tensor2)
    return add(input, p if value == 1 else mul(p, value))


def addcdiv(input, tensor1, tensor2, *, value=1):
    """``input + value * tensor1 / tensor2``."""
    q = div(tensor1, tensor2)
    return add(input, q if value == 1 else mul(q, value))


def multiply(input, other):
    """Alias of :func:`mul`."""
    return mul(input, other)


def subtract(input, other, *, alpha=1):
    """Alias of :func:`sub`: ``input - alpha * other``."""
    return sub(input, other, alpha=alpha)


def divide(input, other, *, rounding_mode=None):
    """Alias of :func:`div` (``rounding_mode`` ``None``, ``'trunc'`` or ``'floor'``)."""
    return div(input, other, rounding_mode=rounding_mode)


def heaviside(input, values):
    """0 where ``input < 0``, ``values`` where ``input == 0``, 1 where ``input > 0``. Not
    differentiable (as in PyTorch)."""
    x = as_tensor_arg(input, "heaviside")
    v = values if isinstance(values, Tensor) else Tensor(np.asarray(values, x.dtype))
    be = backend_of(x.array)
    a = x.array
    out = be.where(be.equal(a, 0), v.array, be.greater(a, 0).astype(x.dtype))
    return Tensor._from_array(out.astype(np.result_type(x.dtype, v.dtype), copy=False))


def signbit(input):
    """A bool tensor, true where the sign bit is set (negative numbers and ``-0.0``)."""
    x = as_tensor_arg(input, "signbit")
    return Tensor._from_array(backend_of(x.array).signbit(x.array))


# ---- two-argument functions with their own Function -----------------------------------------
def _float_operands(a, b):
    """Normalised operands ``a, b``, both in the default float dtype when neither is a
    floating tensor (integer inputs give a float result, as in torch)."""
    if any(isinstance(t, Tensor) and _dtype.is_float(t.dtype) for t in (a, b)):
        return a, b
    from .shape import cast
    d = _dtype.get_default_dtype()
    return (cast(a, d) if isinstance(a, Tensor) else d.type(a)), (cast(b, d) if isinstance(b, Tensor) else d.type(b))


def _bin_op(name, forward, backward, doc):
    """A binary op on float operands: ``forward(a, b) -> y`` and
    ``backward(a, b, y, g) -> (da, db)`` on backend arrays; gradients are summed back to
    each operand's shape."""
    class Op(_Binary):
        @staticmethod
        def forward(ctx, a, b):
            with np.errstate(all="ignore"):
                y = forward(a, b)
            ctx.save_for_backward(a, b, y)
            return y

        @staticmethod
        def _grads(be, g, na, nb, a, b, y):
            with np.errstate(all="ignore"):
                da, db = backward(a, b, y, g)
            return da.astype(g.dtype, copy=False), db.astype(g.dtype, copy=False)

    Op.__name__ = Op.__qualname__ = name.capitalize()

    def op(input, other):
        a, b = binary_operands(input, other, name)
        return Op.apply(*_float_operands(a, b))

    op.__name__ = name
    op.__doc__ = doc
    return op


def _atan2_bwd(a, b, y, g):
    r = a * a + b * b
    return g * b / r, -(g * a) / r


atan2 = _bin_op("atan2", np.arctan2, _atan2_bwd,
                "The angle of the point ``(other, input)``, in ``[-pi, pi]``.")
arctan2 = atan2
hypot = _bin_op("hypot", np.hypot, lambda a, b, y, g: (g * a / y, g * b / y),
                "``sqrt(input^2 + other^2)`` without overflow in the squares.")
_fmod_float = _bin_op("fmod", np.fmod, lambda a, b, y, g: (g, -(g * np.trunc(a / b))), "")


def fmod(input, other):
    """C's ``fmod``: the remainder takes the sign of the dividend (``remainder`` takes the
    divisor's). Integer operands give an integer result (not differentiable)."""
    a, b = binary_operands(input, other, "fmod")
    if all(not isinstance(t, Tensor) or t.dtype.kind in "iub" for t in (a, b)):
        aa = a.array if isinstance(a, Tensor) else a
        bb = b.array if isinstance(b, Tensor) else b
        if bool(bb == 0) if isinstance(bb, (int, np.integer)) else (
                isinstance(bb, np.ndarray) and bool((bb == 0).any())):
            raise ZeroDivisionError(f"fmod: integer division by zero (divisor of shape {np.shape(bb)})")
        return Tensor._from_array(be_of(aa, bb).asarray(np.fmod(aa, bb)))
    return _fmod_float(a, b)


def _lae_bwd(a, b, y, g):
    # d/da log(e^a + e^b) = e^(a - y); exact at ties and for infinite operands of one sign
    return g * np.exp(a - y), g * np.exp(b - y)


def _lae_fwd(a, b):
    m = np.maximum(a, b)
    m = np.where(np.isfinite(m), m, 0)
    return m + np.log(np.exp(a - m) + np.exp(b - m))


def _lae2_fwd(a, b):
    m = np.maximum(a, b)
    m = np.where(np.isfinite(m), m, 0)
    return m + np.log2(np.exp2(a - m) + np.exp2(b - m))


logaddexp = _bin_op("logaddexp", _lae_fwd, _lae_bwd, "``log(exp(input) + exp(other))`` without overflow.")
logaddexp2 = _bin_op("logaddexp2", _lae2_fwd, lambda a, b, y, g: (g * np.exp2(a - y), g * np.exp2(b - y)),
                     "``log2(2^input + 2^other)`` without overflow.")


class _CopySign(Function):
    @staticmethod
    def forward(ctx, a, b):
        y = np.copysign(a, b)
        ctx.save_for_backward(a, y)
        ctx.other_shape = _shape(b)
        return y

    @staticmethod
    def backward(ctx, g):
        a, y = ctx.saved_tensors
        be = backend_of(g)
        na, nb = ctx.needs_input_grad
        # d|a|*sign(b)/da = sign(a) * sign(y): 0 where a == 0, as in PyTorch
        da = be.sum_to_shape(g * (np.sign(a) * np.sign(y)).astype(g.dtype, copy=False), _shape(a)) if na else None
        # zeros for ``other``, as PyTorch gives
        db = be.zeros(ctx.other_shape, g.dtype) if nb else None
        return da, db


def copysign(input, other):
    """``|input|`` with the sign of ``other``; the gradient flows to ``input`` only."""
    a, b = binary_operands(input, other, "copysign")
    return _CopySign.apply(*_float_operands(a, b))


# ---- in-place forms ---------------------------------------------------------------------------
def _inplace(name, fn):
    def op(input, *args, **kwargs):
        return input._inplace_result(name + "_", fn(input, *args, **kwargs))
    op.__name__ = name + "_"
    op.__doc__ = f"In-place :func:`{name}`: ``input`` holds the result (same dtype) and is returned."
    return op


INPLACE = dict(
    abs=abs, absolute=abs, neg=neg, negative=neg, exp=exp, exp2=exp2, expm1=expm1, log=log, log2=log2,
    log10=log10, log1p=log1p, sqrt=sqrt, rsqrt=rsqrt, square=square, reciprocal=reciprocal,
    sign=sign, sgn=sign, sin=sin, cos=cos, tan=tan, asin=asin, acos=acos, atan=atan, sinh=sinh,
    cosh=cosh, asinh=asinh, acosh=acosh, atanh=atanh, arcsin=asin, arccos=acos, arctan=atan,
    arcsinh=asinh, arccosh=acosh, arctanh=atanh, erf=erf, erfc=erfc, erfinv=erfinv, lgamma=lgamma,
    digamma=digamma, floor=floor, ceil=ceil, round=round, trunc=trunc, fix=trunc, frac=frac,
    deg2rad=deg2rad, rad2deg=rad2deg, logit=logit, nan_to_num=nan_to_num,
    atan2=atan2, arctan2=atan2, hypot=hypot, fmod=fmod, remainder=remainder, copysign=copysign,
    xlogy=xlogy, float_power=float_power, floor_divide=floor_divide, heaviside=heaviside,
    addcmul=addcmul, addcdiv=addcdiv, multiply=mul, subtract=subtract, divide=divide,
    true_divide=div, clamp_min=clamp_min, clamp_max=clamp_max,
    eq=eq, ne=ne, lt=lt, le=le, gt=gt, ge=ge, not_equal=ne, greater=gt, greater_equal=ge,
    less=lt, less_equal=le, logical_and=logical_and, logical_or=logical_or,
    logical_xor=logical_xor, logical_not=logical_not,
)
"""The ops with a ``name_`` in-place form (Tensor method and, where torch has one, function)."""

for _n, _fn in INPLACE.items():
    globals()[_n + "_"] = _inplace(_n, _fn)

__all__ = (["tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "arcsin",
            "arccos", "arctan", "arcsinh", "arccosh", "arctanh", "erf", "erfc", "erfinv", "lgamma",
            "digamma", "deg2rad", "rad2deg", "positive", "sgn", "fix", "logit", "xlogy", "nan_to_num",
            "float_power", "addcmul", "addcdiv", "multiply", "subtract", "divide", "heaviside",
            "signbit", "atan2", "arctan2", "hypot", "fmod", "logaddexp", "logaddexp2", "copysign"]
           + [n + "_" for n in INPLACE])
