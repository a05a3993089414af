"""The kernel families and their entry points, for ``tests/test_kernel_twins.py``,
``tests/test_cuda_ptx.py`` and ``tools/op_map.py`` (see ``numbagrad/kernels/__init__.py``).

Imports only the CPU kernel modules; :func:`cuda_module` imports a CUDA one on demand
(it needs numba's CUDA target).
"""
import importlib
import pkgutil
import types

import numbagrad.kernels.cpu as _cpu_pkg

CPU_ONLY = {
    ("conv", "conv_fwd_samples"): "the CUDA conv runs im2col + the CUDA GEMM (ops/conv.py)",
    ("conv", "conv_dgrad_samples"): "the CUDA conv runs the GEMM + col2im (ops/conv.py)",
    ("conv", "conv_wgrad_samples"): "the CUDA conv runs im2col + the CUDA GEMM (ops/conv.py)",
    ("convert", "f32_to_f16"): "numba's CUDA target has float16: CUDA casts with astype",
    ("convert", "f16_to_f32"): "numba's CUDA target has float16: CUDA casts with astype",
    ("elementwise", "copy"): "a CPU backend primitive; CUDA copies with the device array's copy",
}
CPU_ONLY.update({("elementwise", n): "a CPU backend primitive; CUDA's: kernels/cuda/elementwise.py's ufuncs"
                 for n in ("add_fwd", "sub_fwd", "mul_fwd", "div_fwd", "neg_fwd", "axpy")})
"""CPU entry points without a CUDA twin, with the reason."""


def families(pkg=_cpu_pkg):
    """The family names of a kernel package (modules not starting with ``_``)."""
    return sorted(m.name for m in pkgutil.iter_modules(pkg.__path__) if not m.name.startswith("_"))


def cpu_module(family):
    return importlib.import_module(f"numbagrad.kernels.cpu.{family}")


def cuda_module(family):
    return importlib.import_module(f"numbagrad.kernels.cuda.{family}")


def cpu_entry_points():
    """``[(family, name)]`` for every CPU entry point."""
    return [(f, n) for f in families() for n in cpu_module(f).ENTRY_POINTS]


def py_function(fn):
    """The Python function behind a CPU kernel (a FlatKernel's serial dispatcher, a
    numba dispatcher, an AdaptiveKernel) or a plain launcher."""
    for attr in ("serial", "kernel", "py_func"):
        inner = getattr(fn, attr, None)
        if inner is not None and not isinstance(fn, types.FunctionType):
            fn = inner
    return getattr(fn, "py_func", fn)


def reached_kernels(launcher, kernel_type):
    """The ``kernel_type`` instances (CUDA :class:`~numbagrad.kernels.cuda._launch.Kernel`)
    a launcher reaches: names its code (and nested code) reads from its module globals,
    followed through plain functions, dicts, lists and tuples of the ``numbagrad.kernels``
    package."""
    found, seen = [], set()

    def names(code):
        yield from code.co_names
        for c in code.co_consts:
            if isinstance(c, types.CodeType):
                yield from names(c)

    def visit(obj):
        if id(obj) in seen:
            return
        seen.add(id(obj))
        if isinstance(obj, kernel_type):
            found.append(obj)
        elif isinstance(obj, (dict, list, tuple)):
            for v in (obj.values() if isinstance(obj, dict) else obj):
                visit(v)
        elif isinstance(obj, types.FunctionType) and obj.__module__.startswith("numbagrad.kernels"):
            for cell in obj.__closure__ or ():
                try:
                    visit(cell.cell_contents)
                except ValueError:
                    pass
            g = obj.__globals__
            for n in names(obj.__code__):
                if n in g:
                    visit(g[n])

    visit(launcher)
    return found
