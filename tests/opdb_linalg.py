"""Rows of the op table (``tests/opdb.py``) for ``numbagrad/ops/linalg_basic.py``;
``opdb.py`` appends ``ROWS`` to ``OPS`` and ``NO_ROW`` to its ``NO_ROW``.

Every op of the family is a composite of ops with CUDA twins, so the rows run on CUDA
too (shapes of at most 24 elements per input), all but ``inner-0d`` (see its reason). The references are NumPy's own functions
where NumPy has one (``np.kron``, ``np.cross``, ``np.tensordot``...) and short float64
loops otherwise (``diag_embed``, ``cdist``, ``block_diag``)."""
import itertools

import numpy as np

import numbagrad as ng
from opdb import Op, pos, randn

try:
    import torch
except ImportError:  # pragma: no cover - the parity checks are skipped
    torch = None

ROWS = []
NO_ROW = {}


def _t(name, **kwargs):
    """``torch.<name>(*tensors, **kwargs)`` as a row's ``torch_fn`` (None without torch)."""
    if torch is None:  # pragma: no cover
        return None
    return lambda *ts: getattr(torch, name)(*ts, **kwargs)


# ---- references ------------------------------------------------------------------------------
def diag_embed_ref(x, offset=0, dim1=-2, dim2=-1):
    n = x.shape[-1]
    size = n + abs(offset)
    out = np.zeros(x.shape[:-1] + (size, size))
    for k in range(n):
        out[..., k + max(0, -offset), k + max(0, offset)] = x[..., k]
    nd = x.ndim + 1
    return np.moveaxis(out, (nd - 2, nd - 1), (dim1 % nd, dim2 % nd))


def cdist_ref(x1, x2, p=2.0):
    d = np.abs(x1[..., :, None, :] - x2[..., None, :, :])
    if p == 0:
        return (d != 0).sum(-1).astype(d.dtype)
    if np.isinf(p):
        return d.max(-1)
    return (d ** p).sum(-1) ** (1.0 / p)


def block_diag_ref(*xs):
    xs = [np.atleast_2d(x) for x in xs]
    out = np.zeros((sum(x.shape[0] for x in xs), sum(x.shape[1] for x in xs)))
    r = c = 0
    for x in xs:
        out[r:r + x.shape[0], c:c + x.shape[1]] = x
        r, c = r + x.shape[0], c + x.shape[1]
    return out


def cartesian_prod_ref(*xs):
    return np.array(list(itertools.product(*xs)))


# ---- rows --------------------------------------------------------------------------------------
m23, m34, m24 = randn(2, 3, seed=301), randn(3, 4, seed=302), randn(2, 4, seed=303)
v2, v3, v4 = randn(2, seed=304), randn(3, seed=305), randn(4, seed=306)
b223, b234, b224 = randn(2, 2, 3, seed=307), randn(2, 3, 4, seed=308), randn(2, 2, 4, seed=309)

ROWS += [
    Op("addmm", ng.addmm, lambda i, a, b: i + a @ b, [m24, m23, m34]),
    Op("addmm-bcast-scaled", lambda i, a, b: ng.addmm(i, a, b, beta=0.5, alpha=-2.0),
       lambda i, a, b: 0.5 * i + -2.0 * (a @ b), [v4, m23, m34], torch_fn=_t("addmm", beta=0.5, alpha=-2.0)),
    Op("addmm-beta0", lambda i, a, b: ng.addmm(i, a, b, beta=0), lambda i, a, b: a @ b + 0 * i,
       [randn(1, 4, seed=310), m23, m34], torch_fn=_t("addmm", beta=0)),
    Op("addmv", ng.addmv, lambda i, m, v: i + m @ v, [v2, m23, v3]),
    Op("addmv-scaled", lambda i, m, v: ng.addmv(i, m, v, beta=2, alpha=0.5), lambda i, m, v: 2 * i + 0.5 * (m @ v),
       [randn(seed=311), m23, v3], torch_fn=_t("addmv", beta=2, alpha=0.5)),
    Op("addr", ng.addr, lambda i, a, b: i + np.outer(a, b), [m23, v2, v3]),
    Op("addr-bcast-scaled", lambda i, a, b: ng.addr(i, a, b, beta=-1, alpha=3),
       lambda i, a, b: -i + 3 * np.outer(a, b), [v3, v2, v3], torch_fn=_t("addr", beta=-1, alpha=3)),
    Op("baddbmm", ng.baddbmm, lambda i, a, b: i + a @ b, [b224, b223, b234]),
    Op("baddbmm-bcast-scaled", lambda i, a, b: ng.baddbmm(i, a, b, beta=0.25, alpha=2),
       lambda i, a, b: 0.25 * i + 2 * (a @ b), [randn(2, 1, 4, seed=312), b223, b234],
       torch_fn=_t("baddbmm", beta=0.25, alpha=2)),
    Op("addbmm", ng.addbmm, lambda i, a, b: i + (a @ b).sum(0), [m24, b223, b234]),
    Op("addbmm-bcast-scaled", lambda i, a, b: ng.addbmm(i, a, b, beta=3, alpha=-1),
       lambda i, a, b: 3 * i - (a @ b).sum(0), [randn(2, 1, seed=313), b223, b234],
       torch_fn=_t("addbmm", beta=3, alpha=-1)),
    Op("mv", ng.mv, np.matmul, [m34, v4]),
    Op("inner", ng.inner, np.inner, [m23, randn(4, 3, seed=314)]),
    Op("inner-vec", ng.inner, np.inner, [v3, randn(3, seed=315)]),
    Op("inner-0d", ng.inner, np.multiply, [randn(seed=316), m23],
       cuda="optest.to_device_tensors turns a 0-d input into shape (1,) (np.ascontiguousarray), "
            "which inner refuses against (2, 3); the 0-d path is mul, checked on CUDA by mul-0d"),
    Op("vdot", ng.vdot, np.vdot, [v4, randn(4, seed=317)]),
    Op("tensordot", ng.tensordot, np.tensordot, [randn(2, 3, 2, seed=318), randn(3, 2, 2, seed=319)]),
    Op("tensordot-int1", lambda a, b: ng.tensordot(a, b, 1), lambda a, b: np.tensordot(a, b, 1),
       [m23, m34], torch_fn=_t("tensordot", dims=1)),
    Op("tensordot-pairs", lambda a, b: ng.tensordot(a, b, ([0, 2], [2, 0])),
       lambda a, b: np.tensordot(a, b, ([0, 2], [2, 0])), [randn(2, 3, 2, seed=320), randn(2, 4, 2, seed=321)],
       torch_fn=_t("tensordot", dims=([0, 2], [2, 0]))),
    Op("kron", ng.kron, np.kron, [m23, randn(2, 2, seed=322)]),
    Op("kron-mixed-ndim", ng.kron, np.kron, [v2, randn(2, 3, seed=323)]),
    Op("diag-vec", ng.diag, np.diag, [v3]),
    Op("diag-vec-offset", lambda x: ng.diag(x, -1), lambda x: np.diag(x, -1), [v3], torch_fn=_t("diag", diagonal=-1)),
    Op("diag-mat", ng.diag, np.diag, [m34]),
    Op("diag-mat-offset", lambda x: ng.diag(x, 2), lambda x: np.diag(x, 2), [m34], torch_fn=_t("diag", diagonal=2)),
    Op("diagonal", ng.diagonal, np.diagonal, [m34]),
    Op("diagonal-3d", lambda x: ng.diagonal(x, -1, 2, 0), lambda x: np.diagonal(x, -1, 2, 0),
       [randn(3, 2, 4, seed=324)], torch_fn=_t("diagonal", offset=-1, dim1=2, dim2=0)),
    Op("diag_embed", ng.diag_embed, diag_embed_ref, [m23]),
    Op("diag_embed-dims", lambda x: ng.diag_embed(x, 1, 0, 2), lambda x: diag_embed_ref(x, 1, 0, 2),
       [m23], torch_fn=_t("diag_embed", offset=1, dim1=0, dim2=2)),
    Op("diagflat", ng.diagflat, np.diagflat, [randn(2, 2, seed=325)]),
    Op("diagflat-offset", lambda x: ng.diagflat(x, -2), lambda x: np.diagflat(x, -2), [v3],
       torch_fn=_t("diagflat", offset=-2)),
    Op("cross", lambda a, b: ng.cross(a, b, dim=1), lambda a, b: np.cross(a, b, axis=1),
       [randn(4, 3, seed=326), randn(4, 3, seed=327)], torch_fn=_t("cross", dim=1)),
    Op("cross-bcast-dim0", lambda a, b: ng.cross(a, b, dim=0), lambda a, b: np.cross(a, b, axis=0),
       [randn(3, 2, seed=328), randn(3, 1, seed=329)], torch_fn=_t("cross", dim=0)),
    Op("block_diag", ng.block_diag, block_diag_ref, [m23, v2, randn(seed=330)]),
    Op("cartesian_prod", ng.cartesian_prod, cartesian_prod_ref, [v2, v3, randn(2, seed=331)]),
]
for _p in (2.0, 1.0, 0.0, 0.5, 3.0, float("inf")):
    ROWS.append(Op(f"cdist-p{_p:g}", lambda a, b, p=_p: ng.cdist(a, b, p=p), lambda a, b, p=_p: cdist_ref(a, b, p),
                   [randn(3, 2, seed=332), randn(4, 2, seed=333)], torch_fn=_t("cdist", p=_p)))
ROWS.append(Op("cdist-batch-bcast", ng.cdist, cdist_ref, [randn(2, 1, 2, 3, seed=334), randn(3, 2, 3, seed=335)]))
# kept away from 0 so that no finite difference straddles |x|'s kink
ROWS.append(Op("cdist-p1.5", lambda a, b: ng.cdist(a, b, p=1.5), lambda a, b: cdist_ref(a, b, 1.5),
               [pos(2, 3, seed=336), -pos(3, 3, seed=337)], torch_fn=_t("cdist", p=1.5)))
