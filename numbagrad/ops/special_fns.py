"""Special functions of the top-level torch namespace beyond :mod:`.pointwise`:
``polygamma``, ``mvlgamma``, ``i0`` and ``sinc``, with their in-place forms.

Where they run:

* ``sinc`` is written with NumPy ufuncs on the backend array, so it runs on CPU and CUDA.
* ``polygamma(0, x)`` is :func:`~.pointwise.digamma` and ``polygamma(1, x)`` the ufunc-only
  trigamma series of :mod:`.pointwise` (CPU and CUDA); ``n >= 2`` is SciPy's
  ``polygamma`` on the host (CPU only). The gradient of ``polygamma(n, x)`` is
  ``polygamma(n + 1, x)``, so a CUDA tensor differentiates through ``n = 0`` only.
* ``mvlgamma`` is a sum of :func:`~.pointwise.lgamma` terms (CPU and CUDA, differentiable
  through lgamma's digamma gradient).
* ``i0`` is SciPy's ``i0`` on the host (CPU only; a CUDA tensor raises
  ``NotImplementedError`` naming the op), its gradient SciPy's ``i1``.

float16 inputs are computed in float32 (SciPy has no float16 loops), integer inputs in the
default float dtype, as in PyTorch.
"""
import math
import operator

import numpy as np

from ..autograd.function import Function
from ..backend import backend_of
from ..tensor import Tensor
from ._util import as_tensor_arg
from .elementwise import _f
from .pointwise import _float, _host_ufunc, _inplace, _sp, _trigamma, add, digamma, lgamma, sub


# ---- polygamma ------------------------------------------------------------------------------------------
def _check_order(n, opname="polygamma"):
    """``n`` as a Python int, with PyTorch's errors (a 0-d integer tensor is accepted)."""
    if isinstance(n, Tensor):
        if n.numel() != 1 or n.dtype.kind not in "iu":
            raise TypeError(f"{opname}(): argument 'n' (position 1) must be int, not Tensor")
        n = int(n.item())
    if isinstance(n, (bool, np.bool_)) or not isinstance(n, (int, np.integer)):
        raise TypeError(f"{opname}(): argument 'n' (position 1) must be int, not {type(n).__name__}")
    n = operator.index(n)
    if n < 0:
        raise RuntimeError(f"{opname}(n, x) does not support negative n.")
    return n


def _polygamma_array(n, x, opname="polygamma"):
    """``psi^(n)(x)`` on a backend array: ufunc series for ``n <= 1``, SciPy on the host above."""
    if n == 0:
        from .pointwise import _psi
        return _psi(x)
    if n == 1:
        return _trigamma(x)
    if not isinstance(x, np.ndarray):
        raise NotImplementedError(f"{opname}: n >= 2 runs on the CPU only (SciPy's polygamma); got a tensor "
                                  f"of shape {tuple(x.shape)} on {backend_of(x).name}")
    w = x.astype(np.float32) if x.dtype == np.float16 else x
    with np.errstate(all="ignore"):
        return np.asarray(_sp("polygamma")(n, w)).astype(x.dtype, copy=False)


class _Polygamma(Function):
    @staticmethod
    def forward(ctx, x, n):
        ctx.n = n
        ctx.save_for_backward(x)
        return _polygamma_array(n, x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return backend_of(g).mul(g, _polygamma_array(ctx.n + 1, x)), None


def polygamma(n, input):
    """The ``n``-th derivative of the digamma function,
    ``psi^(n)(x) = d^(n+1)/dx^(n+1) log Gamma(x)``.

    Parameters
    ----------
    n : int
        The order, ``>= 0`` (a 0-d integer tensor is accepted). ``n = 0`` is
        :func:`digamma`, ``n = 1`` the trigamma series (both ufunc-only: CPU and CUDA);
        ``n >= 2`` uses SciPy's ``polygamma`` (CPU only).
    input : Tensor
        Integer inputs give the default float dtype.

    Returns
    -------
    Tensor
        ``psi^(n)(input)``. Its gradient is ``polygamma(n + 1, input)``. As a method,
        ``x.polygamma(n)`` (``n`` first, ``self`` the input, as in PyTorch).

    Raises
    ------
    RuntimeError
        For ``n < 0`` (``polygamma(n, x) does not support negative n.``).
    TypeError
        For a non-integer ``n``.

    Example
    -------
    >>> import numbagrad as torch
    >>> x = torch.tensor([1.0, 2.0], requires_grad=True)
    >>> y = torch.polygamma(1, x)
    >>> [round(v, 4) for v in y.tolist()]
    [1.6449, 0.6449]
    >>> y.sum().backward()
    >>> [round(v, 4) for v in x.grad.tolist()]
    [-2.4041, -0.4041]
    """
    n = _check_order(n)
    x = _float(as_tensor_arg(input, "polygamma"))
    if n == 0:
        return digamma(x)
    return _Polygamma.apply(x, n)


def _polygamma_method(self, n):
    """``x.polygamma(n)``: :func:`polygamma` of ``self`` (``n`` first in the function, as in PyTorch)."""
    return polygamma(n, self)


_polygamma_method.__name__ = _polygamma_method.__qualname__ = "polygamma"


_TORCH_NAMES = {"int64": "Long", "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte", "bool": "Bool"}


def _float_target(input, opname):
    """``input`` for an in-place op with a floating result: PyTorch refuses an integer tensor."""
    input = as_tensor_arg(input, opname)
    if input.dtype.kind != "f" and str(input.dtype) != "bfloat16":
        name = _TORCH_NAMES.get(str(input.dtype), str(input.dtype))
        raise RuntimeError(f"{opname}: result type Float can't be cast to the desired output type {name}")
    return input


def polygamma_(input, n):
    """In-place :func:`polygamma`, as the method ``x.polygamma_(n)`` (``n`` after ``self``,
    as PyTorch's ``Tensor.polygamma_``): ``input`` (floating) holds ``psi^(n)(input)`` and is
    returned."""
    return _float_target(input, "polygamma_")._inplace_result("polygamma_", polygamma(n, input))


# ---- mvlgamma ---------------------------------------------------------------------------------------------
def mvlgamma(input, p):
    """The multivariate log-gamma function of dimension ``p``:
    ``log Gamma_p(x) = p (p - 1) / 4 * log(pi) + sum_{j=0}^{p-1} lgamma(x - j / 2)``.

    Composed of :func:`lgamma` ops, so it runs on CPU and CUDA and its gradient is
    ``sum_j digamma(x - j / 2)``.

    Parameters
    ----------
    input : Tensor
        Integer inputs give the default float dtype.
    p : int
        The dimension, ``>= 1``.

    Returns
    -------
    Tensor

    Raises
    ------
    RuntimeError
        For ``p < 1`` (``p has to be greater than or equal to 1``).
    TypeError
        For a non-integer ``p``.

    Notes
    -----
    PyTorch 2 no longer checks the domain ``x > (p - 1) / 2`` (older versions raised "All
    elements must be greater than (p-1)/2"): below it the terms are ``log|Gamma|`` of
    negative arguments, finite except at the poles. numbagrad does the same.

    Example
    -------
    >>> import numbagrad as torch
    >>> round(torch.mvlgamma(torch.tensor([2.5]), 2).item(), 4)
    0.8449
    """
    if isinstance(p, (bool, np.bool_)) or not isinstance(p, (int, np.integer)):
        raise TypeError(f"mvlgamma(): argument 'p' (position 2) must be int, not {type(p).__name__}")
    if p < 1:
        raise RuntimeError("mvlgamma: p has to be greater than or equal to 1")
    x = _float(as_tensor_arg(input, "mvlgamma"))
    out = lgamma(x)
    for j in range(1, int(p)):
        out = add(out, lgamma(sub(x, 0.5 * j)))
    const = p * (p - 1) / 4.0 * math.log(math.pi)
    return add(out, const) if const else out


def mvlgamma_(input, p):
    """In-place :func:`mvlgamma` (``x.mvlgamma_(p)``): ``input`` (floating) holds the result and
    is returned."""
    return _float_target(input, "mvlgamma_")._inplace_result("mvlgamma_", mvlgamma(input, p))


# ---- i0 -----------------------------------------------------------------------------------------------
class _I0(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return _host_ufunc("i0", x, "i0")

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return backend_of(g).mul(g, _host_ufunc("i1", x, "i0"))


def i0(input):
    """The modified Bessel function of the first kind of order 0,
    ``I_0(x) = sum_k (x^2 / 4)^k / (k!)^2``; SciPy's ``i0``, CPU only (a CUDA tensor raises
    ``NotImplementedError`` naming the op).

    Its gradient is ``I_1(x)`` (SciPy's ``i1``). Integer inputs give the default float dtype.

    Example
    -------
    >>> import numbagrad as torch
    >>> round(torch.i0(torch.tensor([1.0])).item(), 4)
    1.2661
    """
    return _I0.apply(_float(as_tensor_arg(input, "i0")))


# ---- sinc ----------------------------------------------------------------------------------------------
class _Sinc(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        zero = x == 0
        # x = 0 is divided as pi (no 0/0: the simulator's threads run outside errstate)
        px = np.where(zero, _f(x.dtype, math.pi), x * _f(x.dtype, math.pi))
        return np.where(zero, _f(x.dtype, 1), np.sin(px) / px)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        zero = x == 0
        w = np.where(zero, _f(x.dtype, 1), x)
        px = w * _f(x.dtype, math.pi)
        # PyTorch's formula, (pi x cos(pi x) - sin(pi x)) / (pi x^2), and its limit 0 at x = 0
        with np.errstate(all="ignore"):  # overflow of pi x^2 for |x| > 1e154: the quotient is 0
            d = (px * np.cos(px) - np.sin(px)) / (px * w)
        return backend_of(g).mul(g, np.where(zero, _f(x.dtype, 0), d))


def sinc(input):
    """The normalised sinc function, ``sin(pi x) / (pi x)``, and 1 at ``x = 0``.

    Written with ufuncs (CPU and CUDA). Its gradient is
    ``(pi x cos(pi x) - sin(pi x)) / (pi x^2)``, 0 at ``x = 0`` (the limit), PyTorch's
    formula. Integer inputs give the default float dtype.

    Example
    -------
    >>> import numbagrad as torch
    >>> [round(v, 4) for v in torch.sinc(torch.tensor([0.0, 0.5])).tolist()]
    [1.0, 0.6366]
    """
    return _Sinc.apply(_float(as_tensor_arg(input, "sinc")))


def _float_inplace(name, fn):
    op = _inplace(name, fn)

    def inplace(input):
        return op(_float_target(input, name + "_"))
    inplace.__name__ = inplace.__qualname__ = name + "_"
    inplace.__doc__ = (f"In-place :func:`{name}`: ``input`` (floating; an integer tensor raises, as in "
                       "PyTorch) holds the result and is returned.")
    return inplace


i0_ = _float_inplace("i0", i0)
sinc_ = _float_inplace("sinc", sinc)

__all__ = ["polygamma", "polygamma_", "mvlgamma", "mvlgamma_", "i0", "i0_", "sinc", "sinc_"]

METHODS = ("polygamma_", "mvlgamma", "mvlgamma_", "i0", "i0_", "sinc", "sinc_")
"""Names in ``__all__`` that are also ``Tensor`` methods (``x.name(...)`` is ``name(x, ...)``;
in-place ``name_`` forms included). Bound by ``tensor._install_operators``; ``polygamma_(input, n)``
already has the method's order."""

METHOD_FORMS = {"polygamma": _polygamma_method}
"""Methods whose argument order differs from the function's: ``x.polygamma(n)`` is
``polygamma(n, x)``. Bound by ``tensor._install_operators``."""
