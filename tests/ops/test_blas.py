"""numbagrad's CPU matmul and in-kernel GEMM (``numbagrad/kernels/cpu/_blas.py``), against
NumPy's ``matmul`` in float64 (and float32 to its rounding): every operand layout BLAS can
take without a copy (row blocks, column slices, transposed views), layouts it cannot
(copied first), broadcast batches, ``out=``, empty and zero-K shapes, the serial and
parallel paths, and NumPy's fallback for everything else."""
import numpy as np
import pytest

from numbagrad.kernels.cpu import _blas as B

pytestmark = pytest.mark.skipif(not B.private_blas_available(),
                                reason="SciPy shares NumPy's BLAS here: matmul is NumPy's")


def _r(*shape, dtype=np.float64, seed=0):
    return np.random.default_rng(seed + sum(shape)).standard_normal(shape).astype(dtype)


def _views(a):
    """The same values under several memory layouts."""
    m, k = a.shape[-2:]
    wide = np.zeros(a.shape[:-2] + (m + 3, k + 5), a.dtype)
    wide[..., 1:m + 1, 2:k + 2] = a
    f = np.swapaxes(np.ascontiguousarray(np.swapaxes(a, -1, -2)), -1, -2)
    strided = np.zeros(a.shape[:-1] + (2 * k,), a.dtype)
    strided[..., ::2] = a
    return {"C": a, "F": f, "block": wide[..., 1:m + 1, 2:k + 2], "strided": strided[..., ::2],
            "reversed": np.ascontiguousarray(a[..., ::-1, :])[..., ::-1, :]}


@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (3, 5, 4), (1, 7, 9), (9, 7, 1), (65, 130, 70),
                                   (32, 128, 512), (300, 40, 2)])
@pytest.mark.parametrize("la", ["C", "F", "block", "strided", "reversed"])
@pytest.mark.parametrize("lb", ["C", "F", "block"])
def test_2d_layouts_match_numpy(m, k, n, la, lb):
    a, b = _r(m, k), _r(k, n, seed=1)
    got = B.matmul(_views(a)[la], _views(b)[lb])
    np.testing.assert_allclose(got, a @ b, rtol=1e-12, atol=1e-12)
    assert got.flags.c_contiguous and got.dtype == np.float64


@pytest.mark.parametrize("sa,sb", [((4, 5, 6), (4, 6, 3)), ((4, 5, 6), (6, 3)), ((5, 6), (4, 6, 3)),
                                   ((2, 1, 5, 6), (3, 6, 7)), ((2, 3, 40, 70), (70, 90)),
                                   ((1, 64, 32), (5, 32, 64))])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_batched_and_broadcast(sa, sb, dtype):
    a, b = _r(*sa, dtype=dtype), _r(*sb, dtype=dtype, seed=2)
    got = B.matmul(a, b)
    ref = np.matmul(a.astype(np.float64), b.astype(np.float64))
    assert got.shape == ref.shape and got.dtype == dtype
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(got, ref, rtol=tol, atol=tol * np.abs(ref).max())
    # transposed batches (attention's q @ k^T)
    if a.ndim == 3 and b.ndim == 3:
        bt = np.ascontiguousarray(np.swapaxes(b, -1, -2))
        np.testing.assert_allclose(B.matmul(a, np.swapaxes(bt, -1, -2)), got, rtol=tol, atol=tol)


@pytest.mark.parametrize("path", ["serial", "parallel"])
def test_serial_and_parallel_paths_agree(path, monkeypatch):
    monkeypatch.setattr(B, "PARALLEL_MACS", 0 if path == "parallel" else 1 << 62)
    for sa, sb in [((8, 3), (3, 200)), ((200, 3), (3, 8)), ((3, 8, 5), (3, 5, 9)), ((1, 64, 16), (1, 16, 4))]:
        a, b = _r(*sa), _r(*sb, seed=3)
        np.testing.assert_allclose(B.matmul(a, b), np.matmul(a, b), rtol=1e-12, atol=1e-12)
    a, b = _r(32, 64), _r(64, 96, seed=4)
    out = np.empty((32, 96))
    assert B.mm_into(a, b, out) is out
    np.testing.assert_allclose(out, a @ b, rtol=1e-12)


def test_out_argument_and_empty_shapes():
    a, b = _r(6, 4), _r(4, 5, seed=5)
    out = np.full((6, 5), np.nan)
    assert B.matmul(a, b, out=out) is out
    np.testing.assert_allclose(out, a @ b, rtol=1e-12)
    outf = np.asfortranarray(np.full((6, 5), np.nan))          # not C-contiguous: computed, then copied
    assert B.matmul(a, b, out=outf) is outf
    np.testing.assert_allclose(outf, a @ b, rtol=1e-12)
    z = B.matmul(np.ones((3, 0)), np.ones((0, 4)))                # K = 0: zeros, as NumPy
    assert z.shape == (3, 4) and not z.any()
    assert B.matmul(np.ones((0, 3)), np.ones((3, 4))).shape == (0, 4)
    assert B.matmul(np.ones((2, 0, 3)), np.ones((3, 4))).shape == (2, 0, 4)
    buf = np.full((3, 4), np.nan)
    B.mm_into(np.ones((3, 0)), np.ones((0, 4)), buf)
    assert not buf.any()


def test_numpy_fallbacks():
    """Other dtypes, 1-D operands, mixed dtypes and shape errors take NumPy's matmul, with
    NumPy's results and errors."""
    ai, bi = np.arange(6).reshape(2, 3), np.arange(12).reshape(3, 4)
    np.testing.assert_array_equal(B.matmul(ai, bi), ai @ bi)
    v = _r(3)
    np.testing.assert_allclose(B.matmul(_r(2, 3), v), _r(2, 3) @ v)
    np.testing.assert_allclose(B.matmul(_r(2, 3), _r(3, 2, dtype=np.float32)),
                               _r(2, 3) @ _r(3, 2, dtype=np.float32))
    with pytest.raises(ValueError):
        B.matmul(_r(2, 3), _r(4, 2))


def test_gemm_accumulates_into_blocks():
    """The in-kernel gemm: beta, and blocks of larger arrays for every operand."""
    from numba import njit

    @njit
    def run(a, b, c, beta):
        B.gemm(a, b, c, beta)

    a, b = _r(20, 30), _r(30, 40, seed=6)
    big = _r(50, 60, seed=7)
    c = big.copy()
    run(a[2:9, 3:17], b[3:17, 1:12], c[10:17, 20:31], 1.0)
    ref = big.copy()
    ref[10:17, 20:31] += a[2:9, 3:17] @ b[3:17, 1:12]
    np.testing.assert_allclose(c, ref, rtol=1e-12, atol=1e-12)
    bt = np.ascontiguousarray(b.T)                         # a transposed view as the operand
    c2 = np.empty((20, 40))
    run(a, bt.T, c2, 0.0)
    np.testing.assert_allclose(c2, a @ b, rtol=1e-12)


@pytest.mark.skipif(B.PROVIDER != "openblas", reason="MKL runs sequential: no thread count to set")
def test_serial_scope_restores_the_thread_count():
    get, put = B._STATE["threads"]
    old = get()
    put(2)
    try:
        with B.serial_private_blas():
            assert get() == 1
        assert get() == 2
    finally:
        put(old)


_PROVIDER_SCRIPT = """
import numpy as np
from numbagrad.kernels.cpu import _blas as B
assert B.PROVIDER == {want!r}, B.PROVIDER
rng = np.random.default_rng(0)
for dt in (np.float32, np.float64):
    a, b = rng.standard_normal((3, 70, 90)).astype(dt), rng.standard_normal((90, 40)).astype(dt)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(B.matmul(a, b), ref, rtol=1e-4 if dt == np.float32 else 1e-12, atol=1e-4)
    big_a, big_b = rng.standard_normal((256, 300)).astype(dt), rng.standard_normal((300, 200)).astype(dt)
    out = np.empty((256, 200), dt)
    B.mm_into(big_a, big_b, out)   # split over threads
    np.testing.assert_allclose(out, big_a.astype(np.float64) @ big_b, rtol=1e-4, atol=1e-3)
print("ok", B.PROVIDER)
"""


def _provider_available(name):
    if name == "mkl":
        try:
            from importlib import metadata
            return metadata.version("mkl") is not None
        except Exception:
            return False
    return B._load_scipy_openblas() is not None or B.PROVIDER == "openblas"


@pytest.mark.parametrize("choice,want", [("openblas", "openblas"), ("mkl", "mkl"), ("none", None)])
def test_each_provider_gives_numpys_products(choice, want):
    """NUMBAGRAD_BLAS picks the library the kernels' GEMM symbols bind to; each one (and
    none: NumPy's matmul) computes the same products, in a fresh process."""
    import os
    import subprocess
    import sys
    if want is not None and not _provider_available(want):
        pytest.skip(f"{want} is not installed here")
    env = dict(os.environ, NUMBAGRAD_BLAS=choice)
    r = subprocess.run([sys.executable, "-c", _PROVIDER_SCRIPT.format(want=want)], env=env, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip() == f"ok {want}"


def test_without_a_private_blas_numpy_runs(monkeypatch):
    monkeypatch.setattr(B, "PROVIDER", None)
    monkeypatch.setitem(B._STATE, "threads", None)
    a, b = _r(4, 5), _r(5, 6, seed=8)
    np.testing.assert_allclose(B.matmul(a, b), a @ b, rtol=1e-12)
    with B.serial_private_blas():
        pass


def test_numba_runs_openmp_even_with_tbb_installed():
    """The mkl wheel installs tbb, which numba would otherwise prefer; numbagrad's tuning
    (backend/config.py) is for OpenMP. Checked in a fresh process that imports numba first."""
    import os
    import subprocess
    import sys
    script = ("import numba, numpy as np\nimport numbagrad\nfrom numba import njit, prange\n"
              "@njit(parallel=True)\ndef f(a):\n    for i in prange(a.size):\n        a[i] += 1\n"
              "f(np.zeros(10))\nprint(numba.threading_layer())")
    env = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_THREADING_LAYER")}
    r = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip() == "omp"
