"""CUDA elementwise kernels: every NumPy ufunc numbagrad uses, strided copy and fill.

Contract. Arrays are passed as *(base, offset, strides)*: ``base`` is the whole device
block as a 1-D array of the element type, ``offset`` and ``strides`` count elements
(strides may be 0 for broadcast dimensions and negative for flipped views). ``shape``
and strides are padded to :data:`MAXD` dimensions (leading 1s / 0s) by the backend,
which also merges dimensions that are contiguous in every operand, so most calls are
rank 1 or 2. The ``flat_*`` variants take contiguous 1-D arrays of one shape (the common
case: same-shape operands, or one scalar operand), the ``nd_*`` variants anything.

One thread per output element, grid-stride. The operators are device functions of one
element, or the ``math`` function itself where it is the whole operator (numba-cuda
lowers ``math.exp`` and the like to libdevice); half kernels convert each operand to
float32 first (``_f32``) and the store narrows back, so float16 arithmetic is done in
float32.
"""
import math

import numpy as np
from scipy import special as _sp
from numba import cuda, int64, types as nbt

from ._launch import cuda_kernel, device_fn, widen, FLOAT_TYPES

# the names be.kernel(family, name) resolves (see numbagrad/kernels/__init__.py)
ENTRY_POINTS = ()

MAXD = 6
"""Rank the nd kernels are compiled for; the backend merges dimensions down to it."""

_I = int64
_SH = nbt.UniTuple(int64, MAXD)


# ---- element converters ---------------------------------------------------------------------
@device_fn
def _ident(x):
    return x


_f32 = widen  # float16 kernels convert each operand to float32


# ---- binary operators -----------------------------------------------------------------------
@device_fn
def _add(a, b):
    return a + b


@device_fn
def _sub(a, b):
    return a - b


@device_fn
def _mul(a, b):
    return a * b


@device_fn
def _truediv(a, b):
    return a / b


@device_fn
def _floordiv(a, b):
    return a // b


@device_fn
def _mod(a, b):
    return a % b


@device_fn
def _pow(a, b):
    return a ** b


@device_fn
def _maximum(a, b):
    if a != a:
        return a
    if b != b:
        return b
    return a if a >= b else b


@device_fn
def _minimum(a, b):
    if a != a:
        return a
    if b != b:
        return b
    return a if a <= b else b


@device_fn
def _eq(a, b):
    return a == b


@device_fn
def _ne(a, b):
    return a != b


@device_fn
def _lt(a, b):
    return a < b


@device_fn
def _le(a, b):
    return a <= b


@device_fn
def _gt(a, b):
    return a > b


@device_fn
def _ge(a, b):
    return a >= b


@device_fn
def _land(a, b):
    return (a != 0) and (b != 0)


@device_fn
def _lor(a, b):
    return (a != 0) or (b != 0)


@device_fn
def _lxor(a, b):
    return (a != 0) != (b != 0)


@device_fn
def _band(a, b):
    return a & b


@device_fn
def _bor(a, b):
    return a | b


@device_fn
def _bxor(a, b):
    return a ^ b


# ---- unary operators ------------------------------------------------------------------------
@device_fn
def _neg(x):
    return -x


@device_fn
def _abs(x):
    return abs(x)


@device_fn
def _sign(x):
    # keeps 0 (and -0) and NaN, like np.sign
    return type(x)(1) if x > 0 else (type(x)(-1) if x < 0 else x)


@device_fn
def _square(x):
    return x * x


@device_fn
def _reciprocal(x):
    return type(x)(1) / x


@device_fn
def _trunc(x):
    # math.trunc/floor return integers in numba; stay in the float type, pass inf/nan through
    if not (abs(x) < type(x)(4503599627370496.0)):  # 2**52: already integral, inf or nan
        return x
    return type(x)(int64(x))


@device_fn
def _floor(x):
    t = _trunc(x)
    return t - type(x)(1) if t > x else t


@device_fn
def _ceil(x):
    t = _trunc(x)
    return t + type(x)(1) if t < x else t


@device_fn
def _rint(x):
    # round half to even, as np.rint / np.round
    f = _floor(x)
    d = x - f
    if d > type(x)(0.5):
        return f + type(x)(1)
    if d == type(x)(0.5):
        h = f * type(x)(0.5)
        return f if _floor(h) == h else f + type(x)(1)
    return f


@device_fn
def _exp2(x):
    return math.pow(type(x)(2), x)


def _log_of(f):
    """``f`` (a ``math`` logarithm) with NumPy's values off its domain: -inf at 0, NaN below."""
    @device_fn
    def log(x):
        return f(x) if x > 0 else (type(x)(-math.inf) if x == 0 else type(x)(math.nan))
    return log


_log = _log_of(math.log)
_log2 = _log_of(math.log2)
_log10 = _log_of(math.log10)


@device_fn
def _log1p(x):
    return math.log1p(x) if x > -1 else (type(x)(-math.inf) if x == -1 else type(x)(math.nan))


@device_fn
def _sqrt(x):
    return math.sqrt(x) if x >= 0 else type(x)(math.nan)


@device_fn
def _isnan(x):
    return x != x


@device_fn
def _isinf(x):
    return x == math.inf or x == -math.inf


@device_fn
def _isfinite(x):
    return not (x != x or x == math.inf or x == -math.inf)


@device_fn
def _lnot(x):
    return x == 0


@device_fn
def _invert(x):
    return ~x


@device_fn
def _invert_bool(x):
    return not x


BINARY = {
    np.add: _add, np.subtract: _sub, np.multiply: _mul, np.true_divide: _truediv,
    np.floor_divide: _floordiv, np.remainder: _mod, np.power: _pow,
    np.maximum: _maximum, np.minimum: _minimum, np.fmax: _maximum, np.fmin: _minimum,
    np.equal: _eq, np.not_equal: _ne, np.less: _lt, np.less_equal: _le,
    np.greater: _gt, np.greater_equal: _ge,
    np.logical_and: _land, np.logical_or: _lor, np.logical_xor: _lxor,
    np.bitwise_and: _band, np.bitwise_or: _bor, np.bitwise_xor: _bxor,
    np.arctan2: math.atan2, np.hypot: math.hypot, np.copysign: math.copysign, np.fmod: math.fmod,
}
UNARY = {
    np.negative: _neg, np.positive: _ident, np.absolute: _abs, np.sign: _sign,
    np.square: _square, np.reciprocal: _reciprocal,
    np.floor: _floor, np.ceil: _ceil, np.trunc: _trunc, np.rint: _rint,
    np.exp: math.exp, np.exp2: _exp2, np.expm1: math.expm1, np.log: _log, np.log2: _log2,
    np.log10: _log10, np.log1p: _log1p, np.sqrt: _sqrt,
    np.sin: math.sin, np.cos: math.cos, np.tan: math.tan, np.arcsin: math.asin, np.arccos: math.acos,
    np.arctan: math.atan, np.sinh: math.sinh, np.cosh: math.cosh, np.tanh: math.tanh,
    np.arcsinh: math.asinh, np.arccosh: math.acosh, np.arctanh: math.atanh,
    np.isnan: _isnan, np.isinf: _isinf, np.isfinite: _isfinite,
    np.logical_not: _lnot, np.invert: _invert,
    # SciPy's ufuncs behind numbagrad.erf/erfc/lgamma (float16 is computed in float32 by the op)
    _sp.erf: math.erf, _sp.erfc: math.erfc, _sp.gammaln: math.lgamma,
}
_INT_SAFE = {np.absolute, np.negative, np.positive, np.sign, np.square, np.floor, np.ceil,
             np.trunc, np.rint, np.logical_not, np.invert, np.isnan, np.isinf, np.isfinite}
"""Unary ufuncs numbagrad runs on integer/bool arrays in their own type."""


# ---- kernel factories -----------------------------------------------------------------------
@device_fn
def _offsets_device(i, shape, s0, s1, s2, s3):
    """Offsets (in elements, from each operand's own offset) of the ``i``-th element, in C
    order, of ``shape`` in up to four operands of strides ``s0``..``s3``: one split of
    ``i`` serves every operand. A kernel with fewer operands repeats a stride tuple for the
    rest; the compiler drops the unused sums."""
    r = i
    o0 = 0
    o1 = 0
    o2 = 0
    o3 = 0
    for d in range(MAXD - 1, -1, -1):
        q = r // shape[d]
        k = r - q * shape[d]
        r = q
        o0 += k * s0[d]
        o1 += k * s1[d]
        o2 += k * s2[d]
        o3 += k * s3[d]
    return o0, o1, o2, o3


def _binary_kernels(name, op, cv):
    def flat_vv(n, a, b, o):
        i = cuda.grid(1)
        s = cuda.gridsize(1)
        while i < n:
            o[i] = op(cv(a[i]), cv(b[i]))
            i += s

    def flat_vs(n, a, b, o):
        i = cuda.grid(1)
        s = cuda.gridsize(1)
        bv = cv(b)
        while i < n:
            o[i] = op(cv(a[i]), bv)
            i += s

    def flat_sv(n, a, b, o):
        i = cuda.grid(1)
        s = cuda.gridsize(1)
        av = cv(a)
        while i < n:
            o[i] = op(av, cv(b[i]))
            i += s

    def nd(n, shape, a, ao, ast, b, bo, bst, o, oo, ost):
        i = cuda.grid(1)
        s = cuda.gridsize(1)
        while i < n:
            ia, ib, io, _ = _offsets_device(i, shape, ast, bst, ost, ost)
            o[oo + io] = op(cv(a[ao + ia]), cv(b[bo + ib]))
            i += s

    half = cv is _f32
    dts = (nbt.float16,) if half else FLOAT_TYPES[:1] + FLOAT_TYPES[2:] + (nbt.int64, nbt.int32)
    out_t = (lambda T: nbt.boolean) if op in (_eq, _ne, _lt, _le, _gt, _ge, _land, _lor, _lxor) else (lambda T: T)
    if op in (_band, _bor, _bxor):
        dts = () if half else (nbt.int64, nbt.int32, nbt.boolean)
    elif op in (math.atan2, math.hypot, math.copysign, math.fmod, _truediv) and not half:
        dts = FLOAT_TYPES[:1] + FLOAT_TYPES[2:]
    sfx = "_h" if half else ""
    # PTX check: the nd variant for every dtype, the flat ones (same element code) for the first
    mk = lambda fn, sig, tag: cuda_kernel(sig, dtypes=dts if tag == "nd" else dts[:1],
                                          name=f"elementwise.{name}.{tag}{sfx}")(fn)
    return {
        "vv": mk(flat_vv, lambda T: (_I, T[::1], T[::1], out_t(T)[::1]), "flat_vv"),
        "vs": mk(flat_vs, lambda T: (_I, T[::1], T, out_t(T)[::1]), "flat_vs"),
        "sv": mk(flat_sv, lambda T: (_I, T, T[::1], out_t(T)[::1]), "flat_sv"),
        "nd": mk(nd, lambda T: (_I, _SH, T[::1], _I, _SH, T[::1], _I, _SH, out_t(T)[::1], _I, _SH), "nd"),
    }


def _unary_kernels(name, op, cv, int_safe):
    def flat(n, a, o):
        i = cuda.grid(1)
        s = cuda.gridsize(1)
        while i < n:
            o[i] = op(cv(a[i]))
            i += s

    def nd(n, shape, a, ao, ast, o, oo, ost):
        i = cuda.grid(1)
        s = cuda.gridsize(1)
        while i < n:
            ia, io, _, _ = _offsets_device(i, shape, ast, ost, ost, ost)
            o[oo + io] = op(cv(a[ao + ia]))
            i += s

    half = cv is _f32
    if op is _invert:
        dts = () if half else (nbt.int64, nbt.int32)
    elif half:
        dts = (nbt.float16,)
    else:
        dts = FLOAT_TYPES[:1] + FLOAT_TYPES[2:] + ((nbt.int64,) if int_safe else ())
    out_t = (lambda T: nbt.boolean) if op in (_isnan, _isinf, _isfinite, _lnot) else (lambda T: T)
    sfx = "_h" if half else ""
    mk = lambda fn, sig, tag: cuda_kernel(sig, dtypes=dts if tag == "nd" else dts[:1],
                                          name=f"elementwise.{name}.{tag}{sfx}")(fn)
    return {
        "v": mk(flat, lambda T: (_I, T[::1], out_t(T)[::1]), "flat"),
        "nd": mk(nd, lambda T: (_I, _SH, T[::1], _I, _SH, out_t(T)[::1], _I, _SH), "nd"),
    }


KERNELS = {}
"""``(ufunc, half) -> {variant: Kernel}`` for every ufunc in :data:`BINARY`/:data:`UNARY`."""
_NO_HALF = {np.bitwise_and, np.bitwise_or, np.bitwise_xor, np.invert, _sp.erf, _sp.erfc, _sp.gammaln}
for _uf, _op in BINARY.items():
    for _half in ((False,) if _uf in _NO_HALF else (False, True)):
        KERNELS[(_uf, _half)] = _binary_kernels(_uf.__name__, _op, _f32 if _half else _ident)
for _uf, _op in UNARY.items():
    for _half in ((False,) if _uf in _NO_HALF else (False, True)):
        KERNELS[(_uf, _half)] = _unary_kernels(_uf.__name__, _op, _f32 if _half else _ident,
                                              _uf in _INT_SAFE)


# ---- where (ternary), copy and fill ---------------------------------------------------------
def _where_nd(n, shape, c, co, cst, a, ao, ast, b, bo, bst, o, oo, ost):
    i = cuda.grid(1)
    s = cuda.gridsize(1)
    while i < n:
        ic, ia, ib, io = _offsets_device(i, shape, cst, ast, bst, ost)
        o[oo + io] = a[ao + ia] if c[co + ic] else b[bo + ib]
        i += s


where_nd = cuda_kernel(lambda T: (_I, _SH, nbt.boolean[::1], _I, _SH, T[::1], _I, _SH, T[::1], _I, _SH,
                                  T[::1], _I, _SH),
                       dtypes=FLOAT_TYPES + (nbt.int64, nbt.boolean), name="elementwise.where.nd")(_where_nd)


@cuda_kernel(lambda T: (_I, _SH, T[::1], _I, _SH, T[::1], _I, _SH),
             dtypes=FLOAT_TYPES + (nbt.int64, nbt.int32, nbt.boolean))
def copy_nd(n, shape, a, ao, ast, o, oo, ost):
    """``o[...] = a[...]`` over strided views; the store converts the element type."""
    i = cuda.grid(1)
    s = cuda.gridsize(1)
    while i < n:
        ia, io, _, _ = _offsets_device(i, shape, ast, ost, ost, ost)
        o[oo + io] = a[ao + ia]
        i += s


@cuda_kernel(lambda T: (_I, _SH, T[::1], _I, _SH, nbt.boolean[::1], _I, _SH),
             dtypes=FLOAT_TYPES + (nbt.int64, nbt.int32))
def to_bool_nd(n, shape, a, ao, ast, o, oo, ost):
    """``o[...] = a[...] != 0`` (a cast to bool)."""
    i = cuda.grid(1)
    s = cuda.gridsize(1)
    while i < n:
        ia, io, _, _ = _offsets_device(i, shape, ast, ost, ost, ost)
        o[oo + io] = a[ao + ia] != 0
        i += s


@cuda_kernel(lambda T: (_I, T[::1], _I, _SH, _SH, T),
             dtypes=FLOAT_TYPES + (nbt.int64, nbt.int32, nbt.boolean))
def fill_nd(n, o, oo, shape, ost, v):
    """``o[...] = v`` over a strided view."""
    i = cuda.grid(1)
    s = cuda.gridsize(1)
    while i < n:
        io, _, _, _ = _offsets_device(i, shape, ost, ost, ost, ost)
        o[oo + io] = v
        i += s


@cuda_kernel(lambda T: (_I, T[::1], T[::1]), dtypes=FLOAT_TYPES + (nbt.int64, nbt.int32, nbt.boolean))
def copy_flat(n, a, o):
    i = cuda.grid(1)
    s = cuda.gridsize(1)
    while i < n:
        o[i] = a[i]
        i += s


@cuda_kernel(lambda T: (_I, T[::1], T), dtypes=FLOAT_TYPES + (nbt.int64, nbt.int32, nbt.boolean))
def fill_flat(n, o, v):
    i = cuda.grid(1)
    s = cuda.gridsize(1)
    while i < n:
        o[i] = v
        i += s


@cuda_kernel(lambda T: (_I, T[::1], T, T[::1]), dtypes=FLOAT_TYPES)
def axpy_flat(n, y, alpha, x):
    """``y += alpha * x`` (gradient accumulation)."""
    i = cuda.grid(1)
    s = cuda.gridsize(1)
    while i < n:
        y[i] += alpha * x[i]
        i += s


@cuda_kernel(lambda T: (_I, T, T, T[::1]), dtypes=FLOAT_TYPES + (nbt.int64, nbt.int32))
def arange_flat(n, start, step, o):
    i = cuda.grid(1)
    s = cuda.gridsize(1)
    while i < n:
        o[i] = start + i * step
        i += s
