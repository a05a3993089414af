"""Batched matrix multiply on CUDA: a tiled shared-memory GEMM with register blocking.

Contract
--------
On the CPU NumPy/BLAS does this work (``np.matmul``), so NumPy is the reference.

* ``matmul(a, b, out)``: ``a`` is ``(Bt, M, K)``, ``b`` is ``(Bt, K, N)`` and ``out`` a
  C-contiguous ``(Bt, M, N)``; ``out[t] = a[t] @ b[t]``. ``a`` and ``b`` may have any
  strides: transposed views, and a batch stride of 0 for a broadcast operand (the
  kernel indexes ``a[t, i, k]``, so numba's strided arrays do the address arithmetic).
  float16 accumulates in float32 (the final store narrows), float32 in float32, float64
  in float64, integers and bool in int64 (a bool product is nonzero where NumPy's is
  True). ``K == 0`` gives zeros; ``M == 1`` or ``N == 1`` (matrix-vector) runs the
  same kernel.

Design
------
A block of ``TILE x TILE`` threads computes a ``(TILE*R) x (TILE*R)`` output tile; each
thread keeps an ``R x R`` accumulator block in registers, for the outputs
``(ty + r*TILE, tx + q*TILE)`` (so a warp's stores hit consecutive columns). The K axis
is walked in steps of ``TILE``: the block stages an ``(TILE*R) x TILE`` slab of ``a`` and
a ``TILE x (TILE*R)`` slab of ``b`` in shared memory (converted to the accumulation
type, zero-padded past the matrix edges), then every thread does ``R*R`` multiply-adds
per ``2R`` shared loads per k. Staging picks, per operand and uniformly per block, the
thread-to-element mapping whose neighbouring threads read neighbouring addresses: along
K when the operand's last stride is one element (``a`` row-major, ``b`` transposed), else
along the other axis (``a`` transposed, ``b`` row-major). Shared slabs are stored
``[k][row]`` with one element of padding per row, so the transposing stores do not
collide in one bank.

The grid is (N tiles, M tiles, batch), capped per dimension; grid-stride loops over the
tiles and the batch keep any grid correct. ``R`` is chosen at launch (:func:`_pick_reg`):
large outputs take the bigger register block (more work per shared load), small ones
``R = 1`` (more blocks to fill the GPU). The thresholds were not measured on a GPU (none
was available when this was written). Under the simulator ``TILE = 4`` and
``R`` is 1 or 2, so tiny shapes still cross tile edges.
"""
import numpy as np
from numba import cuda, types as nbt
from numba.np.numpy_support import from_dtype

from ._launch import MAX_BLOCKS, SIM, cuda_kernel, dev, device_fn

# the names be.kernel(family, name) resolves (see numbagrad/kernels/__init__.py)
ENTRY_POINTS = ()

TILE = 4 if SIM else 16
"""Threads per block side; also the K step of the shared slabs."""
REG_BLOCKS = (1, 2) if SIM else (1, 2, 4)
"""Register-block sizes ``R`` a kernel is declared for (each thread computes R x R outputs)."""
_MIN_BLOCKS = 4 if SIM else 264
"""Pick the largest R whose grid still has at least this many blocks (2 per SM on an
H100's 132 SMs; not measured)."""
_GRID_YZ_MAX = 65535
"""CUDA's limit on gridDim.y and gridDim.z."""


def _gemm(acc_t, R):
    BM = TILE * R   # output tile rows (= columns)
    BMP = BM + 1    # padded slab row (a compile-time constant for the shared shape)

    @device_fn
    def stage(dst, src, k_last, t, k_fast, k0, K, p0, P, zero):
        """``dst[kk, p]`` = element ``(p0 + p, k0 + kk)`` of ``src[t]`` (``k_last``: K is
        its last axis, as in ``a``; else its first, as in ``b``), zero past the edges;
        neighbouring tx read neighbouring addresses of whichever axis is contiguous."""
        tx = cuda.threadIdx.x
        ty = cuda.threadIdx.y
        for r in range(R):
            if k_fast:
                kk = tx
                p = ty + r * TILE
            else:
                kk = ty
                p = tx + r * TILE
            gp = p0 + p
            gk = k0 + kk
            if gp < P and gk < K:
                dst[kk, p] = src[t, gp, gk] if k_last else src[t, gk, gp]
            else:
                dst[kk, p] = zero

    def kernel(a, b, out, zero):
        """out[t] = a[t] @ b[t]; one block per (TILE*R)^2 output tile, grid-stride over
        tiles and batches; each thread accumulates R x R outputs in registers."""
        # As[kk, i] = a[t, row0 + i, k0 + kk]; Bs[kk, j] = b[t, k0 + kk, col0 + j]
        As = cuda.shared.array((TILE, BMP), acc_t)
        Bs = cuda.shared.array((TILE, BMP), acc_t)
        c = cuda.local.array((R, R), acc_t)
        av = cuda.local.array(R, acc_t)
        bv = cuda.local.array(R, acc_t)
        nbatch = out.shape[0]
        M = out.shape[1]
        N = out.shape[2]
        K = a.shape[2]
        tx = cuda.threadIdx.x
        ty = cuda.threadIdx.y
        a_k_fast = a.strides[2] == a.itemsize   # a's K axis is contiguous (row-major a)
        b_k_fast = b.strides[1] == b.itemsize   # b's K axis is contiguous (transposed b)
        ntm = (M + BM - 1) // BM
        ntn = (N + BM - 1) // BM
        t = cuda.blockIdx.z
        while t < nbatch:   # every loop bound is uniform over the block: barriers are safe
            tm = cuda.blockIdx.y
            while tm < ntm:
                row0 = tm * BM
                tn = cuda.blockIdx.x
                while tn < ntn:
                    col0 = tn * BM
                    for r in range(R):
                        for q in range(R):
                            c[r, q] = zero
                    k0 = 0
                    while k0 < K:
                        stage(As, a, True, t, a_k_fast, k0, K, row0, M, zero)
                        stage(Bs, b, False, t, b_k_fast, k0, K, col0, N, zero)
                        cuda.syncthreads()
                        for kk in range(TILE):
                            for r in range(R):
                                av[r] = As[kk, ty + r * TILE]
                            for q in range(R):
                                bv[q] = Bs[kk, tx + q * TILE]
                            for r in range(R):
                                for q in range(R):
                                    c[r, q] += av[r] * bv[q]
                        cuda.syncthreads()  # the slabs are overwritten by the next k step
                        k0 += TILE
                    for r in range(R):
                        gi = row0 + ty + r * TILE
                        if gi < M:
                            for q in range(R):
                                gj = col0 + tx + q * TILE
                                if gj < N:
                                    out[t, gi, gj] = c[r, q]
                    tn += cuda.gridDim.x
                tm += cuda.gridDim.y
            t += cuda.gridDim.z
    return kernel


def _sigs(acc, pair=None):
    """Example signatures: C-contiguous and strided ('A') operands of each input dtype
    that accumulates in ``acc`` (or of the ``(operand dtype, out dtype)`` ``pair``)."""
    if pair is not None:
        ins = [(from_dtype(pair[0]), from_dtype(pair[1]))]
    elif acc == nbt.float32:
        ins = [(nbt.float32, nbt.float32), (nbt.float16, nbt.float16)]
    else:
        ins = [(nbt.float64, nbt.float64)]
    sigs = []
    for T, O in ins:
        for layout in ("C", "A"):
            sigs.append((nbt.Array(T, 3, layout), nbt.Array(T, 3, layout), nbt.Array(O, 3, "C"), acc))
    return sigs


def _acc_dtype(out_dtype):
    """float32 for float16/float32 outputs, float64 for float64, int64 (uint64) for
    signed/bool (unsigned) integer outputs (np.matmul of ints wraps the same way)."""
    dt = np.dtype(out_dtype)
    if dt.kind == "f":
        return np.dtype(np.float64) if dt.itemsize == 8 else np.dtype(np.float32)
    if dt.kind in "bi":
        return np.dtype(np.int64)
    if dt.kind == "u":
        return np.dtype(np.uint64)
    raise TypeError(f"matmul: unsupported dtype {dt} on CUDA")


_GEMM = {}
"""(accumulation dtype, R) -> kernel."""


def _make_gemm(acc, R, pair=None):
    """Declare the GEMM accumulating in ``acc`` with register block ``R``; one made on
    demand (integer dtypes) gets the launch's ``(operand dtype, out dtype)`` signature."""
    acc = np.dtype(acc)
    name = f"{__name__}._gemm_{acc.name}_r{R}"
    k = _GEMM[acc, R] = cuda_kernel(_sigs(from_dtype(acc), pair), name=name)(_gemm(from_dtype(acc), R))
    return k


for _acc in (np.float32, np.float64):
    for _R in REG_BLOCKS:
        _make_gemm(_acc, _R)

KERNELS = tuple(_GEMM.values())
"""Every kernel declared by this module at import (for the PTX check)."""


def _tiles(n, R):
    return -(-n // (TILE * R))


def _pick_reg(nbatch, M, N):
    """The largest register block whose grid still has ``_MIN_BLOCKS`` blocks (else 1)."""
    for R in sorted(REG_BLOCKS, reverse=True):
        if _tiles(M, R) * _tiles(N, R) * nbatch >= _MIN_BLOCKS:
            return R
    return 1


def matmul(a, b, out):
    """``out[t] = a[t] @ b[t]`` for ``a`` ``(Bt, M, K)``, ``b`` ``(Bt, K, N)`` (any
    strides) into a C-contiguous ``(Bt, M, N)`` ``out`` (see the module docstring)."""
    nbatch, M, K = a.shape
    _matmul(a, b, out, _pick_reg(nbatch, M, out.shape[2]))


def _matmul(a, b, out, R, grid=None):
    """:func:`matmul` with the register block ``R`` (and optionally the grid) forced."""
    nbatch, M, K = a.shape
    N = b.shape[2]
    if b.shape[0] != nbatch or b.shape[1] != K or tuple(out.shape) != (nbatch, M, N):
        raise ValueError(f"matmul: shapes {tuple(a.shape)} @ {tuple(b.shape)} -> {tuple(out.shape)} "
                         f"do not match (Bt, M, K) @ (Bt, K, N) -> (Bt, M, N)")
    if nbatch * M * N == 0:
        return
    acc = _acc_dtype(out.dtype)
    k = _GEMM.get((acc, R)) or _make_gemm(acc, R, (np.dtype(a.dtype), np.dtype(out.dtype)))
    if grid is None:
        grid = (max(1, min(MAX_BLOCKS, _tiles(N, R))),
                max(1, min(MAX_BLOCKS, _GRID_YZ_MAX, _tiles(M, R))),
                max(1, min(MAX_BLOCKS, _GRID_YZ_MAX, nbatch)))
    k[grid, (TILE, TILE)](dev(a), dev(b), dev(out), acc.type(0))


__all__ = ["matmul", "TILE", "REG_BLOCKS"]
