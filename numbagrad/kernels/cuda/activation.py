"""CUDA kernels of the activation functions (twins of ``kernels/cpu/activation.py``).

Contract: the CPU module's, name for name. ``_<op>_fwd_cuda(x, *params, out)`` and
``_<op>_bwd_cuda(g, *saved, *params, out)`` take 1-D C-contiguous device arrays of one
floating dtype (float16, float32 or float64; numba device arrays or numbagrad CUDA
arrays), ``params`` NumPy scalars of that dtype, ``out`` preallocated; they launch one
kernel on the default stream and return nothing. ``_logsigmoid_fwd_cuda(x, out, buf)``
also writes ``buf = exp(-|x|)`` for ``_logsigmoid_bwd_cuda(g, x, buf, out)``, as the
CPU pair does.

Every op is one flat grid-stride kernel (``_<op>_<fwd|bwd>_kernel``): thread ``t``
computes elements ``t, t + gridsize, ...``, so any launch size is correct. The kernels and
launchers are made by two factories (:func:`_flat_kernel`,
:func:`~._launch.flat_launcher`) from a table of the scalar functions, one line per entry
point; only logsigmoid's forward (two outputs) is written out. The scalar
math is the CPU kernels' own (:mod:`numbagrad.kernels.scalar`, inlined); the
transcendental that the CPU path takes from a NumPy ufunc pass (``exp(-|x|)``,
``log1p``, ``expm1``, ``tanh``) is computed in the kernel with ``math.*`` (libdevice).
The CPU's hybrid ufunc-pass-plus-loop split exists only because pip's llvmlite has no
SVML; on the GPU a transcendental is a handful of instructions per thread, so one fused
kernel per op, reading each input once, is the natural form. gelu calls ``math.erf``
directly (libdevice ``erff``/``erf``) instead of the CPU's float32 ``erf_f32`` fit.

float16: every element and parameter is widened with :func:`_wide_device` (``v * 1.0f``:
half -> float32, float32/float64 unchanged, exact, keeps -0.0 and NaN), computed in
float32 and narrowed by the store, so the CPU-only scalar helpers never see a half.
"""
import math

from numba import cuda

from .. import scalar as S
from ._launch import cuda_kernel, dev, device_fn, flat_launcher, from_template, launch, widen

# the names be.kernel(family, name) resolves (see numbagrad/kernels/__init__.py)
ENTRY_POINTS = (  # fwd and bwd of each op
    "relu_fwd", "relu_bwd", "leaky_relu_fwd", "leaky_relu_bwd", "hardtanh_fwd", "hardtanh_bwd",
    "hardsigmoid_fwd", "hardsigmoid_bwd", "hardswish_fwd", "hardswish_bwd",
    "softsign_fwd", "softsign_bwd", "sigmoid_fwd", "sigmoid_bwd", "tanh_fwd", "tanh_bwd",
    "silu_fwd", "silu_bwd", "logsigmoid_fwd", "logsigmoid_bwd", "softplus_fwd", "softplus_bwd",
    "mish_fwd", "mish_bwd", "elu_fwd", "elu_bwd", "gelu_fwd", "gelu_bwd",
    "gelu_tanh_fwd", "gelu_tanh_bwd",
)


def _sig(*kinds):
    """Example signature for the PTX check: ``"a"`` a 1-D contiguous array of ``T``,
    ``"s"`` a scalar ``T``."""
    return lambda T: tuple(T[::1] if k == "a" else T for k in kinds)


def _size(a):
    return dev(a).size


_wide_device = widen  # shared with softmax.py and dropout.py


# ---- the kernel and launcher factories -------------------------------------------------------
# A flat activation kernel reads ``n_in`` arrays and ``n_par`` scalar parameters, widens each
# (:func:`_wide_device`) and stores ``f(*arrays, *params)`` into ``out``; ``f`` is a scalar
# function of ``kernels/scalar.py`` or a device function below that adds the transcendental
# the CPU takes from a ufunc pass. CUDA kernels are compiled per process (no disk cache), so a
# factory costs nothing.
def _flat_kernel(name, f, n_in, n_par):
    """The grid-stride kernel ``_<name>_kernel(a0, .., p0, .., out)``: ``out[i] =
    f(a0[i], .., p0, ..)``, every array element and parameter widened."""
    arrays = [f"a{k}" for k in range(n_in)]
    params = [f"p{k}" for k in range(n_par)]
    src = (f"def _{name}_kernel({', '.join(arrays + params)}, out):\n"
           + "".join(f"    {p}_ = w({p})\n" for p in params)
           + "    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):\n"
           + f"        out[i] = f({', '.join([f'w({a}[i])' for a in arrays] + [p + '_' for p in params])})\n")
    k = from_template(__name__, f"_{name}_kernel", src, {"cuda": cuda, "w": _wide_device, "f": f})
    return cuda_kernel(_sig(*("a",) * n_in, *("s",) * n_par, "a"))(k)


def _activation(name, params, f):
    """Kernel and launcher of one entry point. ``params``: the launcher's parameters, as
    ``kernels/cpu/activation.py``'s kernel names them: the input arrays, the scalar
    parameters (the names in ``_SCALARS``), then ``out``."""
    names = [p.strip() for p in params.split(",")]
    n_par = sum(n in _SCALARS for n in names)
    kernel = _flat_kernel(name, f, len(names) - 1 - n_par, n_par)
    globals()[f"_{name}_kernel"] = kernel   # a module attribute under its name, as when written out
    return flat_launcher(__name__, f"_{name}_cuda", params, kernel, size="out")


_SCALARS = {"slope", "lo", "hi", "beta", "threshold", "alpha", "scale", "input_scale"}


# ---- device functions: the transcendental the CPU takes from a ufunc pass, then scalar.py ------
def _of_exp(h):
    """The device function ``v -> h(v, exp(-|v|))`` (the ``*_from_exp`` forms of scalar.py)."""
    @device_fn
    def f(v):
        return h(v, math.exp(-abs(v)))
    return f


def _grad_of_exp(h):
    """The device function ``(g, v) -> h(g, v, exp(-|v|))``."""
    @device_fn
    def f(g, v):
        return h(g, v, math.exp(-abs(v)))
    return f


_sigmoid = _of_exp(S.sigmoid_from_exp)
_silu, _silu_grad = _of_exp(S.silu_from_exp), _grad_of_exp(S.silu_grad_from_exp)
_mish, _mish_grad = _of_exp(S.mish_from_exp), _grad_of_exp(S.mish_grad_from_exp)


@device_fn
def _tanh(v):
    return math.tanh(v)


@device_fn
def _softplus(v, b, th):
    z = b * v
    return S.softplus_from_log1p(v, z, math.log1p(math.exp(-abs(z))), b, th)


@device_fn
def _softplus_grad(g, v, b, th):
    z = b * v
    return S.softplus_grad_from_exp(g, z, math.exp(-abs(z)), th)


@device_fn
def _elu(v, a, s, si):
    """scale * (x if x > 0 else alpha * expm1(x * input_scale))"""
    m = v if v < 0 else type(v)(0)  # min(x, 0) as on the CPU (NaN -> 0; y is NaN anyway)
    return S.elu_from_expm1(v, math.expm1(m * si), a, s)


@device_fn
def _gelu(v):
    return S.gelu_from_erf(v, math.erf(v * type(v)(S.SQRT1_2)))


@device_fn
def _gelu_grad(g, v):
    t = type(v)
    return S.gelu_grad_from_erf_exp(g, v, math.erf(v * t(S.SQRT1_2)), math.exp(-(v * v) * t(0.5)))


@device_fn
def _gelu_tanh(v):
    return S.gelu_tanh_from_tanh(v, math.tanh(S.gelu_tanh_inner(v)))


@device_fn
def _gelu_tanh_grad(g, v):
    return S.gelu_tanh_grad_from_tanh(g, v, math.tanh(S.gelu_tanh_inner(v)))


# ---- logsigmoid: two outputs (``buf = exp(-|x|)`` is kept for the backward) ----------------------
@cuda_kernel(_sig("a", "a", "a"))
def _logsigmoid_fwd_kernel(x, out, buf):
    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        v = _wide_device(x[i])
        e = math.exp(-abs(v))
        buf[i] = e
        out[i] = S.logsigmoid_from_log1p(v, math.log1p(e))


def _logsigmoid_fwd_cuda(x, out, buf):
    """out = logsigmoid(x); buf = exp(-|x|), kept for the backward."""
    launch(_logsigmoid_fwd_kernel, _size(out), x, out, buf)


# ---- host launchers: the names ``backend.kernel("activation", name)`` resolves --------------------
_relu_fwd_cuda = _activation("relu_fwd", "x, out", S.relu)
_relu_bwd_cuda = _activation("relu_bwd", "g, y, out", S.relu_grad)
_leaky_relu_fwd_cuda = _activation("leaky_relu_fwd", "x, slope, out", S.leaky_relu)
_leaky_relu_bwd_cuda = _activation("leaky_relu_bwd", "g, x, slope, out", S.leaky_relu_grad)
_hardtanh_fwd_cuda = _activation("hardtanh_fwd", "x, lo, hi, out", S.hardtanh)
_hardtanh_bwd_cuda = _activation("hardtanh_bwd", "g, x, lo, hi, out", S.hardtanh_grad)
_hardsigmoid_fwd_cuda = _activation("hardsigmoid_fwd", "x, out", S.hardsigmoid)
_hardsigmoid_bwd_cuda = _activation("hardsigmoid_bwd", "g, x, out", S.hardsigmoid_grad)
_hardswish_fwd_cuda = _activation("hardswish_fwd", "x, out", S.hardswish)
_hardswish_bwd_cuda = _activation("hardswish_bwd", "g, x, out", S.hardswish_grad)
_softsign_fwd_cuda = _activation("softsign_fwd", "x, out", S.softsign)
_softsign_bwd_cuda = _activation("softsign_bwd", "g, x, out", S.softsign_grad)
_sigmoid_fwd_cuda = _activation("sigmoid_fwd", "x, out", _sigmoid)
_sigmoid_bwd_cuda = _activation("sigmoid_bwd", "g, y, out", S.sigmoid_grad)
_tanh_fwd_cuda = _activation("tanh_fwd", "x, out", _tanh)
_tanh_bwd_cuda = _activation("tanh_bwd", "g, y, out", S.tanh_grad)
_silu_fwd_cuda = _activation("silu_fwd", "x, out", _silu)
_silu_bwd_cuda = _activation("silu_bwd", "g, x, out", _silu_grad)
_logsigmoid_bwd_cuda = _activation("logsigmoid_bwd", "g, x, buf, out", S.logsigmoid_grad_from_exp)
_softplus_fwd_cuda = _activation("softplus_fwd", "x, beta, threshold, out", _softplus)
_softplus_bwd_cuda = _activation("softplus_bwd", "g, x, beta, threshold, out", _softplus_grad)
_mish_fwd_cuda = _activation("mish_fwd", "x, out", _mish)
_mish_bwd_cuda = _activation("mish_bwd", "g, x, out", _mish_grad)
_elu_fwd_cuda = _activation("elu_fwd", "x, alpha, scale, input_scale, out", _elu)
_elu_bwd_cuda = _activation("elu_bwd", "g, x, y, alpha, scale, input_scale, out", S.elu_grad)
_gelu_fwd_cuda = _activation("gelu_fwd", "x, out", _gelu)
_gelu_bwd_cuda = _activation("gelu_bwd", "g, x, out", _gelu_grad)
_gelu_tanh_fwd_cuda = _activation("gelu_tanh_fwd", "x, out", _gelu_tanh)
_gelu_tanh_bwd_cuda = _activation("gelu_tanh_bwd", "g, x, out", _gelu_tanh_grad)
