"""Rows of the op table (``tests/opdb.py``) for ``numbagrad/ops/linalg_ops.py``, the top-level
``torch`` spellings of the LAPACK-backed matrix functions; ``opdb.py`` appends ``ROWS`` to
``OPS`` and ``NO_ROW`` to its ``NO_ROW``.

The inputs are well conditioned (``M + 3 I``, ``M M^T + n I`` for the symmetric
positive-definite ones) so that float32 forwards and float64 finite differences are
meaningful. Functions that read one triangle (``cholesky``) see ``X + X^T``, and those that
take a Cholesky factor see ``tril(X)`` (``triu`` for ``upper``), so that every perturbation
of the input is one the op responds to. Singular vectors and ``Q`` are compared through
``U * U`` (sign-invariant), since their signs are free. Every op here is host-only (LAPACK
through NumPy): no row runs on CUDA. ``tests/test_linalg.py`` covers ``numbagrad.linalg``."""
import warnings

import numpy as np

import numbagrad as ng
from opdb import Op, randn

try:
    import torch
except ImportError:  # pragma: no cover - the parity checks are skipped
    torch = None

ROWS = []
NO_ROW = {}
HOST = "runs on the CPU only (LAPACK through NumPy)"


def _t(fn):
    """``fn(torch)`` as a row's ``torch_fn`` (None without torch)."""
    return None if torch is None else fn(torch)


def _mT(a):
    return np.swapaxes(a, -1, -2)


def _well(*shape, seed):
    return randn(*shape, seed=seed) + 3 * np.eye(shape[-1])


def _spd(*shape, seed):
    m = randn(*shape, seed=seed)
    return m @ _mT(m) + shape[-1] * np.eye(shape[-1])


def _chol_lower(lib, x):
    return lib.tril(x)


def _quiet(f):
    """``f`` with PyTorch's (and numbagrad's) deprecation warnings silenced."""
    def q(*a):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return f(*a)
    return q


def _sq_svd(o):
    return o[0] * o[0], o[1], o[2] * o[2]


w233, w33 = _well(2, 3, 3, seed=401), _well(3, 3, seed=402)
s233 = _spd(2, 3, 3, seed=403)
L233 = np.linalg.cholesky(s233)
b232 = randn(2, 3, 2, seed=404)
m43, m34 = randn(4, 3, seed=405), randn(3, 4, seed=406)


def _svd_ref(x, some=True):
    u, s, vh = np.linalg.svd(x, full_matrices=not some)
    return u * u, s, _mT(vh) * _mT(vh)


def _qr_ref(x, some=True):
    q, r = np.linalg.qr(x, mode="reduced" if some else "complete")
    return q * q, r * r


def _tri_ref(b, a, upper=True):
    t = np.triu(a) if upper else np.tril(a)
    return np.linalg.solve(t, b)


ROWS += [
    Op("det", ng.det, np.linalg.det, [w233], cuda=HOST),
    Op("logdet", ng.logdet, lambda x: np.linalg.slogdet(x)[1], [s233], cuda=HOST),
    Op("slogdet", ng.slogdet, lambda x: tuple(np.linalg.slogdet(x)), [w233], cuda=HOST),
    Op("inverse", ng.inverse, np.linalg.inv, [w233], cuda=HOST),
    Op("pinverse", ng.pinverse, np.linalg.pinv, [m43], cuda=HOST),
    Op("pinverse-wide", ng.pinverse, np.linalg.pinv, [m34], cuda=HOST),
    Op("matrix_power", lambda x: ng.matrix_power(x, 3), lambda x: np.linalg.matrix_power(x, 3), [w233 / 3],
       torch_fn=_t(lambda T: lambda x: T.matrix_power(x, 3)), cuda=HOST),
    Op("matrix_power-neg", lambda x: ng.matrix_power(x, -2), lambda x: np.linalg.matrix_power(x, -2), [w233],
       names=("matrix_power",), torch_fn=_t(lambda T: lambda x: T.matrix_power(x, -2)), cuda=HOST),
    Op("matrix_exp", ng.matrix_exp, lambda x: __import__("scipy.linalg").linalg.expm(x), [w233 / 4], cuda=HOST),
    Op("cholesky", _quiet(lambda x: ng.cholesky(x + x.transpose(-2, -1))),
       lambda x: np.linalg.cholesky(x + _mT(x)), [s233 / 2], names=("cholesky",),
       torch_fn=_t(lambda T: _quiet(lambda x: T.cholesky(x + x.transpose(-2, -1))))),
    Op("cholesky-upper", _quiet(lambda x: ng.cholesky(x + x.transpose(-2, -1), upper=True)),
       lambda x: _mT(np.linalg.cholesky(x + _mT(x))), [s233 / 2], names=("cholesky",),
       torch_fn=_t(lambda T: _quiet(lambda x: T.cholesky(x + x.transpose(-2, -1), upper=True)))),
    Op("cholesky_solve", lambda b, f: ng.cholesky_solve(b, ng.tril(f)),
       lambda b, f: np.linalg.solve(np.tril(f) @ _mT(np.tril(f)), b), [b232, L233], names=("cholesky_solve",),
       torch_fn=_t(lambda T: lambda b, f: T.cholesky_solve(b, T.tril(f)))),
    Op("cholesky_solve-upper", lambda b, f: ng.cholesky_solve(b, ng.triu(f), upper=True),
       lambda b, f: np.linalg.solve(_mT(np.triu(f)) @ np.triu(f), b), [b232, _mT(L233)], names=("cholesky_solve",),
       torch_fn=_t(lambda T: lambda b, f: T.cholesky_solve(b, T.triu(f), upper=True))),
    Op("cholesky_inverse", lambda f: ng.cholesky_inverse(ng.tril(f)),
       lambda f: np.linalg.inv(np.tril(f) @ _mT(np.tril(f))), [L233[0]], names=("cholesky_inverse",),
       torch_fn=_t(lambda T: lambda f: T.cholesky_inverse(T.tril(f)))),
    Op("svd", lambda x: _sq_svd(ng.svd(x)), _svd_ref, [m43], names=("svd",),
       torch_fn=_t(lambda T: lambda x: _sq_svd(T.svd(x)))),
    Op("svd-wide-batched", lambda x: _sq_svd(ng.svd(x)), _svd_ref, [randn(2, 2, 3, seed=407)], names=("svd",),
       torch_fn=_t(lambda T: lambda x: _sq_svd(T.svd(x)))),
    Op("qr", lambda x: tuple(o * o for o in ng.qr(x)), _qr_ref, [m43], names=("qr",),
       torch_fn=_t(lambda T: _quiet(lambda x: tuple(o * o for o in T.qr(x))))),
    Op("triangular_solve", _quiet(lambda b, a: ng.triangular_solve(b, a).solution), _tri_ref, [b232, w233],
       names=("triangular_solve",), torch_fn=_t(lambda T: _quiet(lambda b, a: T.triangular_solve(b, a).solution))),
    Op("triangular_solve-lower", _quiet(lambda b, a: ng.triangular_solve(b, a, upper=False).solution),
       lambda b, a: _tri_ref(b, a, False), [b232, w233], names=("triangular_solve",),
       torch_fn=_t(lambda T: _quiet(lambda b, a: T.triangular_solve(b, a, upper=False).solution))),
]
for _r in ROWS:
    _r.cuda = HOST
