"""``numbagrad.special``: PyTorch's ``torch.special`` under its names.

Three kinds of function live here:

* **Aliases of numbagrad ops** (differentiable, CPU and CUDA unless the op itself is
  CPU only): ``expit`` (:func:`~numbagrad.sigmoid`), ``exp2``, ``expm1``, ``log1p``, ``erf``,
  ``erfc``, ``erfinv`` (CPU only), ``gammaln`` (:func:`~numbagrad.lgamma`), ``digamma`` and
  ``psi``, ``polygamma`` (``n >= 2`` CPU only), ``multigammaln``
  (:func:`~numbagrad.mvlgamma`), ``i0`` (CPU only), ``sinc``, ``logit``, ``xlogy``,
  ``logsumexp``, ``softmax``, ``log_softmax``; and ``round`` (with ``decimals``).
* **Differentiable functions added here**, with PyTorch's gradients: ``ndtr``, ``entr`` and
  ``xlog1py`` (written with ufuncs: CPU and CUDA); ``erfcx``, ``i0e``, ``i1``, ``i1e``,
  ``ndtri``, ``log_ndtr``, ``zeta``, ``gammainc``, ``gammaincc`` (SciPy's ufuncs on the
  host: CPU only, a CUDA tensor raises ``NotImplementedError`` naming the function).
  ``zeta(input, other)`` is differentiable in ``other`` only and ``gammainc``/``gammaincc``
  likewise: as in PyTorch, the backward raises ``NotImplementedError`` ("the derivative for
  ... is not implemented") when ``input`` requires grad.
* **Forward-only functions** (PyTorch gives them no gradient: its result does not require
  grad, so a backward through it raises "does not require grad"; numbagrad's result is the
  same, a tensor that does not require grad): the Bessel functions ``bessel_j0``,
  ``bessel_j1``, ``bessel_y0``, ``bessel_y1``, ``modified_bessel_i0``, ``modified_bessel_i1``,
  ``modified_bessel_k0``, ``modified_bessel_k1``, ``scaled_modified_bessel_k0``,
  ``scaled_modified_bessel_k1``, ``airy_ai`` (SciPy, CPU only) and ``spherical_bessel_j0``
  (ufuncs, CPU and CUDA); the orthogonal polynomials ``chebyshev_polynomial_{t,u,v,w}``,
  ``shifted_chebyshev_polynomial_{t,u,v,w}``, ``hermite_polynomial_{h,he}``,
  ``laguerre_polynomial_l`` and ``legendre_polynomial_p`` (SciPy's ``eval_*``, CPU only), each
  ``f(input, n)`` with ``n`` truncated to an integer and 0 for ``n < 0``, as in PyTorch.

float16 is computed in float32 (SciPy has no float16 loops); integer inputs give the
default float dtype.

Example
-------
>>> import numbagrad as torch
>>> x = torch.tensor([0.0, 1.0], requires_grad=True)
>>> y = torch.special.ndtr(x)
>>> [f"{v:.4f}" for v in y.tolist()]
['0.5000', '0.8413']
>>> y.sum().backward()
>>> [f"{v:.4f}" for v in x.grad.tolist()]
['0.3989', '0.2420']
"""
import math

import numpy as np

from .autograd.function import Function
from .backend import backend_of
from .ops import (sigmoid, exp2, expm1, log1p, erf, erfc, erfinv, lgamma, digamma, polygamma, mvlgamma,
                  i0, sinc, logit, xlogy, logsumexp, softmax, log_softmax, mul, div)
from .ops import round as _round
from .ops._util import as_tensor_arg, binary_operands
from .ops.elementwise import _Binary, _f
from .ops.pointwise import _float, _float_operands, _host_ufunc, _sp
from .tensor import Tensor

expit = sigmoid
gammaln = lgamma
psi = digamma
multigammaln = mvlgamma

_SQRT_2PI = math.sqrt(2.0 * math.pi)
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


def _input(x, name):
    return _float(as_tensor_arg(x, name))


# ---- differentiable, written with existing ops or ufuncs (CPU and CUDA) --------------------------------
def ndtr(input):
    """The standard normal CDF, ``Phi(x) = erfc(-x / sqrt(2)) / 2``.

    Composed of :func:`~numbagrad.erfc` (CPU and CUDA); the gradient is the normal density
    ``exp(-x^2 / 2) / sqrt(2 pi)``.

    Example
    -------
    >>> import numbagrad as torch
    >>> print(f"{torch.special.ndtr(torch.tensor([1.0])).item():.4f}")
    0.8413
    """
    return mul(erfc(mul(_input(input, "ndtr"), -1.0 / math.sqrt(2.0))), 0.5)


class _Entr(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        with np.errstate(all="ignore"):
            y = np.where(x > 0, -x * np.log(x), np.where(x == 0, _f(x.dtype, 0), _f(x.dtype, -np.inf)))
            return np.where(np.isnan(x), x, y)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        with np.errstate(all="ignore"):
            return backend_of(g).mul(g, -(np.log(x) + _f(x.dtype, 1)))


def entr(input):
    """The elementwise entropy term: ``-x log x`` for ``x > 0``, 0 at ``x = 0``, ``-inf``
    for ``x < 0`` (``nan`` stays ``nan``).

    Ufuncs only (CPU and CUDA). The gradient is ``-(1 + log x)``, PyTorch's formula (``inf``
    at 0, ``nan`` below).

    Example
    -------
    >>> import numbagrad as torch
    >>> print(f"{torch.special.entr(torch.tensor([0.5])).item():.4f}")
    0.3466
    """
    return _Entr.apply(_input(input, "entr"))


class _Xlog1py(_Binary):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        with np.errstate(all="ignore"):
            return np.where((a == 0) & ~np.isnan(b), _f(np.result_type(a, b), 0), a * np.log1p(b))

    @staticmethod
    def _grads(be, g, na, nb, a, b):
        with np.errstate(all="ignore"):
            # PyTorch's: d/da = xlog1py(g, b), set to 0 where a == 0 and b <= -1; d/db = g a / (1 + b)
            ga = None
            if na:
                ga = np.where((g == 0) & ~np.isnan(b), _f(g.dtype, 0), g * np.log1p(b))
                ga = np.where((a == 0) & (b <= -1), _f(g.dtype, 0), ga)
            gb = be.mul(g, a / (b + _f(g.dtype, 1))) if nb else None
        return ga, gb


def xlog1py(input, other):
    """``input * log1p(other)``, and 0 where ``input == 0`` unless ``other`` is ``nan``.

    Ufuncs only (CPU and CUDA); either operand may be a Python number. Gradients are
    PyTorch's: ``log1p(other)`` for ``input`` (0 where ``input == 0`` and
    ``other <= -1``) and ``input / (1 + other)`` for ``other``.

    Example
    -------
    >>> import numbagrad as torch
    >>> print(f"{torch.special.xlog1py(torch.tensor([2.0]), 1.0).item():.4f}")
    1.3863
    """
    a, b = _operands(input, other, "xlog1py")
    return _Xlog1py.apply(a, b)


def _operands(input, other, name):
    if not isinstance(input, Tensor) and not isinstance(other, Tensor):
        raise TypeError(f"{name}: expected at least one Tensor operand, got {type(input).__name__} and "
                        f"{type(other).__name__}")
    a, b = binary_operands(input, other, name)
    return _float_operands(a, b)


def round(input, *, decimals=0):
    """Round half to even, to ``decimals`` decimal places (negative: to the left of the
    point), as ``torch.special.round``: ``round(x * 10^d) / 10^d``. The gradient is 0.

    Example
    -------
    >>> import numbagrad as torch
    >>> torch.special.round(torch.tensor([1.2345]), decimals=2).tolist()
    [1.2300000190734863]
    """
    x = as_tensor_arg(input, "round")
    if decimals == 0:
        return _round(x)
    if decimals > 0:
        s = 10.0 ** decimals
        return div(_round(mul(x, s)), s)
    s = 10.0 ** -decimals
    return mul(_round(div(x, s)), s)


# ---- differentiable, SciPy's ufuncs on the host (CPU only) ---------------------------------------------------
def _host_unary(name, uf, grad, doc):
    """A CPU-only unary op: SciPy's ufunc ``uf`` forward; ``grad(h, x, y)`` the derivative
    (``h(ufname, array)`` evaluates another SciPy ufunc on the host)."""
    def h(ufname, a):
        return _host_ufunc(ufname, a, name)

    class Op(Function):
        @staticmethod
        def forward(ctx, x):
            y = h(uf, x)
            ctx.save_for_backward(x, y)
            return y

        @staticmethod
        def backward(ctx, g):
            x, y = ctx.saved_tensors
            with np.errstate(all="ignore"):
                return backend_of(g).mul(g, grad(h, x, y).astype(g.dtype, copy=False))

    Op.__name__ = Op.__qualname__ = "".join(p.capitalize() for p in name.split("_"))

    def op(input):
        return Op.apply(_input(input, name))

    op.__name__ = op.__qualname__ = name
    op.__doc__ = doc
    return op


def _i1_grad(h, x, y):
    return np.where(x == 0, _f(x.dtype, 0.5), h("i0", x) - y / x)


def _i1e_grad(h, x, y):
    return np.where(x == 0, _f(x.dtype, 0.5), h("i0e", x) - y * (np.sign(x) + _f(x.dtype, 1) / x))


_CPU = "SciPy's ``{}`` on the host: CPU only (a CUDA tensor raises ``NotImplementedError``)."
erfcx = _host_unary("erfcx", "erfcx", lambda h, x, y: _f(x.dtype, 2) * x * y - _f(x.dtype, _TWO_OVER_SQRT_PI), f"""
    The scaled complementary error function, ``exp(x^2) erfc(x)``; {_CPU.format("erfcx")}

    Its gradient is ``2 x erfcx(x) - 2 / sqrt(pi)``.

    Example
    -------
    >>> import numbagrad as torch
    >>> print(f"{{torch.special.erfcx(torch.tensor([1.0])).item():.4f}}")
    0.4276
    """)
i0e = _host_unary("i0e", "i0e", lambda h, x, y: h("i1e", x) - np.sign(x) * y, f"""
    The exponentially scaled modified Bessel function of order 0, ``exp(-|x|) I_0(x)``;
    {_CPU.format("i0e")}

    Its gradient is ``i1e(x) - sign(x) i0e(x)``.

    Example
    -------
    >>> import numbagrad as torch
    >>> print(f"{{torch.special.i0e(torch.tensor([1.0])).item():.4f}}")
    0.4658
    """)
i1 = _host_unary("i1", "i1", _i1_grad, f"""
    The modified Bessel function of the first kind of order 1, ``I_1(x)``; {_CPU.format("i1")}

    Its gradient is ``I_0(x) - I_1(x) / x``, and 1/2 at ``x = 0`` (the limit), as PyTorch.

    Example
    -------
    >>> import numbagrad as torch
    >>> print(f"{{torch.special.i1(torch.tensor([1.0])).item():.4f}}")
    0.5652
    """)
i1e = _host_unary("i1e", "i1e", _i1e_grad, f"""
    The exponentially scaled modified Bessel function of order 1, ``exp(-|x|) I_1(x)``;
    {_CPU.format("i1e")}

    Its gradient is ``i0e(x) - i1e(x) (sign(x) + 1/x)``, and 1/2 at ``x = 0``, as PyTorch.

    Example
    -------
    >>> import numbagrad as torch
    >>> print(f"{{torch.special.i1e(torch.tensor([1.0])).item():.4f}}")
    0.2079
    """)
ndtri = _host_unary("ndtri", "ndtri", lambda h, x, y: _f(x.dtype, _SQRT_2PI) * np.exp(y * y / _f(x.dtype, 2)),
                    f"""
    The inverse of :func:`ndtr` (the standard normal quantile function), ``nan`` outside
    ``[0, 1]``; {_CPU.format("ndtri")}

    Its gradient is ``sqrt(2 pi) exp(ndtri(x)^2 / 2)``.

    Example
    -------
    >>> import numbagrad as torch
    >>> print(f"{{torch.special.ndtri(torch.tensor([0.975])).item():.4f}}")
    1.9600
    """)
log_ndtr = _host_unary("log_ndtr", "log_ndtr",
                       lambda h, x, y: np.exp(-(y + x * x / _f(x.dtype, 2))) / _f(x.dtype, _SQRT_2PI), f"""
    ``log(ndtr(x))``, accurate far into the left tail; {_CPU.format("log_ndtr")}

    Its gradient is ``exp(-x^2 / 2 - log_ndtr(x)) / sqrt(2 pi)``.

    Example
    -------
    >>> import numbagrad as torch
    >>> print(f"{{torch.special.log_ndtr(torch.tensor([-10.0])).item():.2f}}")
    -53.23
    """)


def _host_binary(uf, a, b, name):
    """SciPy's binary ufunc ``uf`` on host operands (arrays or NumPy scalars), in their
    result dtype (float16 through float32)."""
    for v in (a, b):
        if not isinstance(v, (np.ndarray, np.generic)):
            raise NotImplementedError(f"{name}: runs on the CPU only (SciPy's {uf}); got a tensor of shape "
                                      f"{tuple(v.shape)} on {backend_of(v).name}")
    dt = np.result_type(a, b)
    w = np.float32 if dt == np.float16 else dt
    with np.errstate(all="ignore"):
        return np.asarray(_sp(uf)(np.asarray(a, w), np.asarray(b, w))).astype(dt, copy=False)


def _no_input_grad(name, torch_name):
    raise NotImplementedError(f"{name}: the derivative for '{torch_name}' is not implemented (as in PyTorch: "
                              f"{name} is differentiable in `other` only)")


def _in_other_only(name, torch_name, d_other):
    """A Function for SciPy's binary ufunc ``name`` (CPU only), differentiable in ``other``
    only, as in PyTorch: ``d_other(a, b)`` on the host arrays is ``d name / d other``; a
    backward that needs ``input``'s gradient raises (``torch_name`` spelt as PyTorch's error)."""
    class Fn(_Binary):
        @staticmethod
        def forward(ctx, a, b):
            ctx.save_for_backward(a, b)
            return _host_binary(name, a, b, name)

        @staticmethod
        def _grads(be, g, na, nb, a, b):
            if na:
                _no_input_grad(name, torch_name)
            return None, be.mul(g, d_other(a, b))
    Fn.__name__ = Fn.__qualname__ = "_" + name.capitalize()
    return Fn


# d/dq zeta(s, q) = -s zeta(s + 1, q)
_Zeta = _in_other_only("zeta", "zeta", lambda a, b: -a * _host_binary("zeta", a + a.dtype.type(1), b, "zeta"))


def zeta(input, other):
    """The Hurwitz zeta function ``zeta(s, q) = sum_{k >= 0} (k + q)^(-s)`` with
    ``s = input``, ``q = other``; SciPy's ``zeta``, CPU only (a CUDA tensor raises
    ``NotImplementedError``). Either operand may be a Python number.

    Differentiable in ``other`` only, as in PyTorch: ``d/dq = -s zeta(s + 1, q)``; a
    backward that needs the gradient of ``input`` raises ``NotImplementedError``.

    Example
    -------
    >>> import numbagrad as torch
    >>> print(f"{torch.special.zeta(torch.tensor([2.0]), 1.0).item():.4f}")
    1.6449
    """
    return _Zeta.apply(*_operands(input, other, "zeta"))


def _tensor_operands(input, other, name):
    """PyTorch's ``gammainc``/``gammaincc`` take two tensors (no Python numbers)."""
    for pos, (arg, v) in enumerate((("input", input), ("other", other)), 1):
        if not isinstance(v, Tensor):
            raise TypeError(f"{name}(): argument '{arg}' (position {pos}) must be Tensor, not {type(v).__name__}")
    return _operands(input, other, name)


def _gammainc_dx(a, x):
    """``d/dx P(a, x) = x^(a - 1) exp(-x) / Gamma(a)`` on host arrays (PyTorch's formula)."""
    with np.errstate(all="ignore"):
        dt = np.result_type(a, x)
        w = np.float32 if dt == np.float16 else dt
        a, x = np.asarray(a, w), np.asarray(x, w)
        return np.exp((a - 1) * np.log(x) - x - _sp("gammaln")(a)).astype(dt, copy=False)


_Gammainc = _in_other_only("gammainc", "igamma: input", _gammainc_dx)
_Gammaincc = _in_other_only("gammaincc", "igammac: input", lambda a, b: -_gammainc_dx(a, b))


def gammainc(input, other):
    """The regularised lower incomplete gamma function
    ``P(a, x) = 1/Gamma(a) integral_0^x t^(a-1) e^(-t) dt`` with ``a = input``,
    ``x = other``, both tensors (as in PyTorch); SciPy's ``gammainc``, CPU only.

    Differentiable in ``other`` only, as in PyTorch (``x^(a-1) e^(-x) / Gamma(a)``); a
    backward that needs the gradient of ``input`` raises ``NotImplementedError``.

    Example
    -------
    >>> import numbagrad as torch
    >>> print(f"{torch.special.gammainc(torch.tensor([1.0]), torch.tensor([1.0])).item():.4f}")
    0.6321
    """
    return _Gammainc.apply(*_tensor_operands(input, other, "gammainc"))


def gammaincc(input, other):
    """The regularised upper incomplete gamma function ``Q(a, x) = 1 - P(a, x)`` (see
    :func:`gammainc`); SciPy's ``gammaincc``, CPU only, differentiable in ``other`` only.

    Example
    -------
    >>> import numbagrad as torch
    >>> print(f"{torch.special.gammaincc(torch.tensor([1.0]), torch.tensor([1.0])).item():.4f}")
    0.3679
    """
    return _Gammaincc.apply(*_tensor_operands(input, other, "gammaincc"))


# ---- forward-only: Bessel functions -------------------------------------------------------------------------
_FWD = ("Forward only, as in PyTorch (which defines no gradient): the result never requires grad, so a "
        "backward through it raises.")


def _forward_only(name, compute, doc):
    def op(input):
        x = _input(input, name)
        with np.errstate(all="ignore"):
            return Tensor._from_array(compute(x.array, name))
    op.__name__ = op.__qualname__ = name
    op.__doc__ = doc
    return op


def _scipy(uf):
    return lambda a, name: _host_ufunc(uf, a, name)


def _airy_ai(a, name):
    if not isinstance(a, np.ndarray):
        _host_ufunc("airy", a, name)  # raises, naming the op
    w = a.astype(np.float32) if a.dtype == np.float16 else a
    with np.errstate(all="ignore"):
        return np.asarray(_sp("airy")(w)[0]).astype(a.dtype, copy=False)


def _spherical_j0(a, name):
    zero = a == 0
    w = np.where(zero, _f(a.dtype, 1), a)  # no 0/0
    return np.where(zero, _f(a.dtype, 1), np.sin(w) / w)


def _bessel_doc(what, where, example):
    return f"""{what}; {where}

    {_FWD}

    Example
    -------
    >>> import numbagrad as torch
    >>> print(f"{{torch.special.{example[0]}(torch.tensor([1.0])).item():.4f}}")
    {float(example[1]):.4f}
    """


for _name, _uf, _what, _ex in [
    ("bessel_j0", "j0", "The Bessel function of the first kind of order 0, ``J_0(x)``", "0.7652"),
    ("bessel_j1", "j1", "The Bessel function of the first kind of order 1, ``J_1(x)``", "0.4401"),
    ("bessel_y0", "y0", "The Bessel function of the second kind of order 0, ``Y_0(x)`` "
                        "(``-inf`` at 0, ``nan`` below)", "0.0883"),
    ("bessel_y1", "y1", "The Bessel function of the second kind of order 1, ``Y_1(x)`` "
                        "(``-inf`` at 0, ``nan`` below)", "-0.7812"),
    ("modified_bessel_i0", "i0", "The modified Bessel function of the first kind of order 0, "
                                 "``I_0(x)`` (:func:`i0` is its differentiable twin)", "1.2661"),
    ("modified_bessel_i1", "i1", "The modified Bessel function of the first kind of order 1, "
                                 "``I_1(x)`` (:func:`i1` is its differentiable twin)", "0.5652"),
    ("modified_bessel_k0", "k0", "The modified Bessel function of the second kind of order 0, "
                                 "``K_0(x)`` (``inf`` at 0, ``nan`` below)", "0.421"),
    ("modified_bessel_k1", "k1", "The modified Bessel function of the second kind of order 1, "
                                 "``K_1(x)`` (``inf`` at 0, ``nan`` below)", "0.6019"),
    ("scaled_modified_bessel_k0", "k0e", "``exp(x) K_0(x)``", "1.1445"),
    ("scaled_modified_bessel_k1", "k1e", "``exp(x) K_1(x)``", "1.6362"),
    ("airy_ai", "airy", "The Airy function ``Ai(x)``", "0.1353"),
]:
    globals()[_name] = _forward_only(_name, _airy_ai if _uf == "airy" else _scipy(_uf),
                                     _bessel_doc(_what, _CPU.format(_uf), (_name, _ex)))

spherical_bessel_j0 = _forward_only("spherical_bessel_j0", _spherical_j0, _bessel_doc(
    "The spherical Bessel function of the first kind of order 0, ``j_0(x) = sin(x) / x`` (1 at 0)",
    "written with ufuncs (CPU and CUDA).", ("spherical_bessel_j0", "0.8415")))


# ---- forward-only: orthogonal polynomials ------------------------------------------------------------------
def _polynomial(name, evaluate, what, example):
    def op(input, n):
        x, m = _operands(input, n, name)
        arrays = [v.array if isinstance(v, Tensor) else np.asarray(v) for v in (x, m)]
        for v in arrays:
            if not isinstance(v, np.ndarray):
                raise NotImplementedError(f"{name}: runs on the CPU only (SciPy's eval_* polynomials); got a "
                                          f"tensor of shape {tuple(v.shape)} on {backend_of(v).name}")
        xa, na = np.broadcast_arrays(*arrays)
        dt = np.result_type(*arrays)
        with np.errstate(all="ignore"):
            k = np.where(np.isfinite(na), na, -1).astype(np.int64)  # truncated to an integer, as PyTorch
            y = np.where(k < 0, 0.0, evaluate(np.maximum(k, 0), xa.astype(np.float64)))
        return Tensor._from_array(np.ascontiguousarray(y.astype(dt)))
    op.__name__ = op.__qualname__ = name
    op.__doc__ = f"""{what}, of degree ``n``.

    ``n`` (a tensor or a number, broadcast with ``input``) is truncated to an integer and the
    result is 0 for ``n < 0``, as in PyTorch. SciPy's ``eval_*`` on the host: CPU only (a CUDA
    tensor raises ``NotImplementedError``). {_FWD}

    Example
    -------
    >>> import numbagrad as torch
    >>> print(f"{{torch.special.{name}(torch.tensor([0.3]), 3).item():.4f}}")
    {float(example):.4f}
    """
    return op


def _u_pair(k, x, sign):
    """``U_k(x) + sign * U_{k-1}(x)`` (``U_{-1} = 0``): Chebyshev V (sign -1) and W (sign +1)."""
    u = _sp("eval_chebyu")
    return u(k, x) + sign * np.where(k >= 1, u(np.maximum(k - 1, 0), x), 0.0)


_POLYS = [
    ("chebyshev_polynomial_t", lambda k, x: _sp("eval_chebyt")(k, x),
     "The Chebyshev polynomial of the first kind ``T_n(x)``", "-0.792"),
    ("chebyshev_polynomial_u", lambda k, x: _sp("eval_chebyu")(k, x),
     "The Chebyshev polynomial of the second kind ``U_n(x)``", "-0.984"),
    ("chebyshev_polynomial_v", lambda k, x: _u_pair(k, x, -1.0),
     "The Chebyshev polynomial of the third kind ``V_n(x) = U_n(x) - U_{n-1}(x)``", "-0.344"),
    ("chebyshev_polynomial_w", lambda k, x: _u_pair(k, x, 1.0),
     "The Chebyshev polynomial of the fourth kind ``W_n(x) = U_n(x) + U_{n-1}(x)``", "-1.624"),
    ("shifted_chebyshev_polynomial_t", lambda k, x: _sp("eval_chebyt")(k, 2 * x - 1),
     "The shifted Chebyshev polynomial of the first kind ``T*_n(x) = T_n(2x - 1)``", "0.944"),
    ("shifted_chebyshev_polynomial_u", lambda k, x: _sp("eval_chebyu")(k, 2 * x - 1),
     "The shifted Chebyshev polynomial of the second kind ``U*_n(x) = U_n(2x - 1)``", "1.088"),
    ("shifted_chebyshev_polynomial_v", lambda k, x: _u_pair(k, 2 * x - 1, -1.0),
     "The shifted Chebyshev polynomial of the third kind ``V*_n(x) = V_n(2x - 1)``", "1.448"),
    ("shifted_chebyshev_polynomial_w", lambda k, x: _u_pair(k, 2 * x - 1, 1.0),
     "The shifted Chebyshev polynomial of the fourth kind ``W*_n(x) = W_n(2x - 1)``", "0.728"),
    ("hermite_polynomial_h", lambda k, x: _sp("eval_hermite")(k, x),
     "The physicists' Hermite polynomial ``H_n(x)``", "-3.384"),
    ("hermite_polynomial_he", lambda k, x: _sp("eval_hermitenorm")(k, x),
     "The probabilists' Hermite polynomial ``He_n(x)``", "-0.873"),
    ("laguerre_polynomial_l", lambda k, x: _sp("eval_laguerre")(k, x),
     "The Laguerre polynomial ``L_n(x)``", "0.2305"),
    ("legendre_polynomial_p", lambda k, x: _sp("eval_legendre")(k, x),
     "The Legendre polynomial ``P_n(x)``", "-0.3825"),
]
for _name, _eval, _what, _ex in _POLYS:
    globals()[_name] = _polynomial(_name, _eval, _what, _ex)

FORWARD_ONLY = ("bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1", "modified_bessel_i0", "modified_bessel_i1",
                "modified_bessel_k0", "modified_bessel_k1", "scaled_modified_bessel_k0",
                "scaled_modified_bessel_k1", "airy_ai", "spherical_bessel_j0") + tuple(p[0] for p in _POLYS)
"""The functions PyTorch gives no gradient (their results never require grad)."""

__all__ = ["expit", "exp2", "expm1", "log1p", "erf", "erfc", "erfinv", "erfcx", "gammaln", "digamma", "psi",
           "polygamma", "multigammaln", "i0", "i0e", "i1", "i1e", "ndtr", "ndtri", "log_ndtr", "logit", "xlogy",
           "xlog1py", "entr", "sinc", "round", "logsumexp", "softmax", "log_softmax", "zeta", "gammainc",
           "gammaincc"] + list(FORWARD_ONLY)
