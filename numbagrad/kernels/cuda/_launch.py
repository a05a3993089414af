"""How CUDA kernels are declared, launched and checked.

* :func:`cuda_kernel` wraps a plain Python function written for ``numba.cuda`` (a
  grid-stride loop, so any launch size is correct) into a :class:`Kernel`: compiled
  lazily on first launch (once per argument types, by numba), and recorded in
  :data:`REGISTRY` together with example signatures, so ``tests/cuda/test_ptx.py`` can
  compile every kernel to PTX without a GPU (the simulator runs kernels as Python and
  hides typing errors).
* :func:`launch` converts numbagrad ``CudaArray`` arguments to numba device arrays,
  picks the grid from the element count (launch configurations are cached per size
  bucket) and launches on the default stream.
* Under ``NUMBA_ENABLE_CUDASIM=1`` every simulated thread costs ~0.3 ms, so blocks are
  small (:data:`TPB`) and grids are a single block; grid-stride loops keep results the
  same.

float16 convention: kernels read half elements, compute in float32 (``float32(x[i])``)
and store back (the store narrows), so half kernels accumulate in float32 and never
call a CPU-only scalar helper with a half value.
"""
import os

import numpy as np
from numba import cuda, types as nbtypes

from ...backend import config

SIM = os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0")

TPB = 8 if SIM else config.THREADS_PER_BLOCK
"""Threads per block of flat (grid-stride) kernels."""
ROW_TPB = 8 if SIM else 128
"""Threads per block of kernels that reduce one row per block in shared memory
(a compile-time constant: shared arrays are sized with it; a power of two)."""
MAX_BLOCKS = 1 if SIM else 8192
"""Grid cap; grid-stride loops cover the rest."""

FLOAT_TYPES = (nbtypes.float32, nbtypes.float16, nbtypes.float64)
"""Element types PTX tests compile float kernels for."""

REGISTRY = []
"""Every :class:`Kernel`, in declaration order (for the PTX test)."""


class Kernel:
    """A ``@cuda.jit`` kernel built lazily from ``fn``.

    ``signatures`` is a callable ``T -> tuple of numba types`` (``T`` runs over
    ``dtypes``) or a list of explicit tuples; it is used only by the PTX check, never to
    restrict what the kernel accepts at run time.
    """

    __slots__ = ("fn", "name", "signatures", "dtypes", "_jit", "_configured")

    def __init__(self, fn, signatures, dtypes, name=None):
        self.fn = fn
        self.name = name or f"{fn.__module__}.{fn.__qualname__}"
        self.signatures = signatures
        self.dtypes = dtypes
        self._jit = None
        self._configured = {}
        REGISTRY.append(self)

    @property
    def jit(self):
        if self._jit is None:
            self._jit = cuda.jit(self.fn)
        return self._jit

    def example_signatures(self):
        if callable(self.signatures):
            return [tuple(self.signatures(t)) for t in self.dtypes]
        return [tuple(s) for s in self.signatures]

    def __getitem__(self, config_):
        cfg = self._configured.get(config_)
        if cfg is None:
            cfg = self._configured[config_] = self.jit[config_]
        return cfg

    def __repr__(self):
        return f"<cuda kernel {self.name}>"


def cuda_kernel(signatures, dtypes=FLOAT_TYPES, name=None):
    """Decorator: declare a CUDA kernel (see :class:`Kernel`)."""
    def deco(fn):
        return Kernel(fn, signatures, dtypes, name)
    return deco


def device_fn(fn):
    """A CUDA device function (inlined into kernels; also runs under the simulator)."""
    return cuda.jit(device=True, inline=True)(fn) if not SIM else cuda.jit(device=True)(fn)


def dev(a):
    """The numba device array behind a numbagrad CUDA array (other values pass through)."""
    d = getattr(a, "dev", None)
    return a if d is None else d


def blocks_for(n, tpb=None):
    """Blocks for a grid-stride kernel over ``n`` items."""
    tpb = tpb or TPB
    return max(1, min(MAX_BLOCKS, -(-int(n) // tpb)))


def launch(kernel, n, *args):
    """Launch a flat grid-stride ``kernel`` over ``n`` items on the default stream."""
    if n <= 0:
        return
    kernel[blocks_for(n), TPB](*[dev(a) for a in args])


def from_template(module, name, src, env):
    """The function ``name`` defined by the source ``src`` with the globals ``env``, reported
    as defined in ``module``: how the kernel factories give a generated kernel or launcher
    its own parameter names and arity (numba compiles from the bytecode; CUDA kernels are
    not cached on disk, so a generated kernel costs nothing more)."""
    ns = dict(env)
    exec(compile(src, f"<{module}.{name}>", "exec"), ns)  # noqa: S102 (templates of the kernel modules)
    fn = ns[name]
    fn.__module__ = module
    return fn


def grid_kernel(module, name, params, elem, over, axes=(0, 1, 2), ndim=3):
    """The grid-stride kernel ``name(<params>)`` of ``module``: one thread per index
    ``(i0, i1, ..)`` of the ``axes`` of the ``ndim``-d array ``over`` (all of them: its
    elements; ``(0, 2)`` of three: its columns), which calls the device function
    ``elem(i0, i1, .., <params>)``. The split of the flat thread number is written once
    here (``indexing``, ``pooling``, ``conv``, ``rnn`` and ``reduce`` build their grid kernels
    with it); the generated kernel has the launcher's real parameter names.

    NOTE: the extents are unpacked from ``over.shape`` (``a, b = x.shape``): read one by
    one (``x.shape[1]``) numba-cuda emits a sign fix-up for each division."""
    ext = [f"e{j}" for j in range(len(axes))]
    idx = [f"i{j}" for j in range(len(axes))]
    taken = set(ext + idx) | {"_", "n", "k", "elem", "cuda"} | {f"{v}{j}" for v in "rs" for j in range(len(axes))}
    clash = taken & {p.strip() for p in params.split(",")}
    if clash:
        raise ValueError(f"grid_kernel: {name}'s parameters {sorted(clash)} would shadow the loop's names")
    names = iter(ext)
    unpack = ", ".join(next(names) if d in axes else "_" for d in range(ndim))
    src = f"def {name}({params}):\n    {unpack}{',' if ndim == 1 else ''} = {over}.shape\n"
    # s_j: the stride of index j, the product of the later extents
    for j in range(len(axes) - 2, -1, -1):
        src += f"    s{j} = {ext[-1] if j == len(axes) - 2 else f's{j + 1} * {ext[j + 1]}'}\n"
    src += f"    n = {ext[0]}{' * s0' if len(axes) > 1 else ''}\n"
    src += "    k = cuda.grid(1)\n    while k < n:\n"
    rest = "k"
    for j in range(len(axes) - 1):
        src += f"        {idx[j]} = {rest} // s{j}\n"
        if j < len(axes) - 2:
            src += f"        r{j} = {rest} - {idx[j]} * s{j}\n"
            rest = f"r{j}"
    last = f"{rest} - {idx[-2]} * s{len(axes) - 2}" if len(axes) > 1 else "k"
    src += f"        elem({', '.join(idx[:-1] + [last])}, {params})\n"
    src += "        k += cuda.gridsize(1)\n"
    return from_template(module, name, src, {"cuda": cuda, "elem": elem})


def flat_launcher(module, name, params, kernel, size, guard=None):
    """The launcher ``def <name>(<params>): launch(kernel, <size>.size, <params>)`` of a
    generated kernel, with real parameter names (the CPU twin's, which
    ``tests/test_kernel_twins.py`` compares); ``guard``: launch only when that argument
    has elements."""
    cond = f"if dev({guard}).size:\n        " if guard else ""
    src = f"def {name}({params}):\n    {cond}launch(kernel, dev({size}).size, {params})\n"
    fn = from_template(module, name, src, {"launch": launch, "dev": dev, "kernel": kernel})
    fn.__doc__ = f"Launch ``{kernel.name.rsplit('.', 1)[-1]}`` over ``{size}``'s elements."
    fn.kernel = kernel
    return fn


def launch_rows(kernel, rows, *args):
    """Launch a row kernel: one block of :data:`ROW_TPB` threads per row (grid-stride
    over rows beyond the grid cap)."""
    if rows <= 0:
        return
    kernel[max(1, min(MAX_BLOCKS, int(rows))), ROW_TPB](*[dev(a) for a in args])


_ALLOC = None   # set_allocator's: the CUDA backend's pool allocator


def set_allocator(alloc):
    """Called by the CUDA backend at init (``backend/cuda.py``): ``alloc(shape, dtype)``
    returns a pooled device array with a ``.dev`` numba view. Injected, so that kernels
    never import the backend above them."""
    global _ALLOC
    _ALLOC = alloc


def scratch(shape, dtype):
    """A device scratch array for a launcher, from numbagrad's caching pool once the CUDA
    backend is up (the returned numba array keeps its pool block alive)."""
    if _ALLOC is None:
        return cuda.device_array(shape, dtype)
    a = _ALLOC((shape,) if isinstance(shape, int) else shape, dtype)
    d = a.dev
    try:
        d._numbagrad_owner = a
    except AttributeError:  # pragma: no cover - a numba array type without a __dict__
        return cuda.device_array(shape, dtype)
    return d


@device_fn
def widen(v):
    """``v`` in its compute type: float32 for a half, itself otherwise (``v * 1.0f`` is exact,
    keeps -0.0 and NaN; float64 stays float64)."""
    return v * np.float32(1)


__all__ = ["SIM", "TPB", "ROW_TPB", "MAX_BLOCKS", "FLOAT_TYPES", "REGISTRY", "Kernel",
           "cuda_kernel", "device_fn", "dev", "launch", "from_template", "flat_launcher",
           "launch_rows", "blocks_for", "scratch", "widen"]
