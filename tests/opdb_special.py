"""Rows of the op table (``tests/opdb.py``) for ``numbagrad/ops/special_fns.py``;
``opdb.py`` appends ``ROWS`` to ``OPS`` and ``NO_ROW`` to its ``NO_ROW``.

``polygamma(0, x)``/``polygamma(1, x)``, ``mvlgamma`` and ``sinc`` are ufunc-only (CUDA rows);
``polygamma(n >= 2)`` and ``i0`` are SciPy on the host (CPU only). ``polygamma(1, x)``'s
gradient is ``polygamma(2, x)``: its CUDA row checks the forward only.
"""
import math

import numpy as np
from scipy import special as sp

import numbagrad as ng
from opdb import Op, randn, pos

try:
    import torch
except ImportError:  # pragma: no cover - the parity checks are skipped
    torch = None


def _torch(fn):
    return None if torch is None else fn


def _mvlgamma_ref(p):
    """``log Gamma_p(x)`` from SciPy's gammaln (its multigammaln takes scalars only)."""
    return lambda x: sum(sp.gammaln(x - j / 2.0) for j in range(p)) + p * (p - 1) / 4.0 * math.log(math.pi)


_HOST = "CPU only: SciPy's {} on the host (tests/ops/test_special.py checks the CUDA refusal)"
p23 = pos(2, 3, seed=301)
neg23 = np.array([[-2.3, -1.6, -0.4], [0.3, 1.7, -3.55]])  # negative non-integers: the reflection branch
sinc23 = np.array([[0.0, 0.3, -1.7], [2.5, -0.45, 1.25]])  # 0 exactly: sinc's removable singularity

ROWS = [
    Op("polygamma-0", lambda x: ng.polygamma(0, x), sp.digamma, [p23], names=("polygamma",),
       torch_fn=_torch(lambda t: torch.polygamma(0, t)), inplace=lambda x: ng.polygamma_(x, 0)),
    Op("polygamma-1", lambda x: ng.polygamma(1, x), lambda x: sp.polygamma(1, x), [p23], names=("polygamma",),
       torch_fn=_torch(lambda t: torch.polygamma(1, t)), inplace=lambda x: ng.polygamma_(x, 1),
       cuda="its gradient is polygamma(2, x), SciPy's on the host; the row polygamma-1-forward runs it on CUDA"),
    Op("polygamma-1-forward", lambda x: ng.polygamma(1, x), lambda x: sp.polygamma(1, x), [neg23],
       names=("polygamma",), torch_fn=_torch(lambda t: torch.polygamma(1, t)), grad=False, inplace=None),
    Op("polygamma-1-negative", lambda x: ng.polygamma(1, x), lambda x: sp.polygamma(1, x), [neg23],
       names=("polygamma",), torch_fn=_torch(lambda t: torch.polygamma(1, t)), inplace=None,
       cuda=_HOST.format("polygamma (the gradient, n = 2)")),
    Op("polygamma-3", lambda x: ng.polygamma(3, x), lambda x: sp.polygamma(3, x), [p23], names=("polygamma",),
       torch_fn=_torch(lambda t: torch.polygamma(3, t)), inplace=lambda x: ng.polygamma_(x, 3),
       cuda=_HOST.format("polygamma")),
    Op("mvlgamma-p3", lambda x: ng.mvlgamma(x, 3), _mvlgamma_ref(3), [p23 + 1.0], names=("mvlgamma",),
       torch_fn=_torch(lambda t: torch.mvlgamma(t, 3)), inplace=lambda x: ng.mvlgamma_(x, 3)),
    Op("mvlgamma-p1", lambda x: ng.mvlgamma(x, 1), sp.gammaln, [p23], names=("mvlgamma",),
       torch_fn=_torch(lambda t: torch.mvlgamma(t, 1)), inplace=None, cuda="the same lgamma as mvlgamma-p3"),
    Op("i0", ng.i0, sp.i0, [randn(2, 3, seed=302) * 2], cuda=_HOST.format("i0")),
    Op("sinc", ng.sinc, np.sinc, [sinc23]),
]
NO_ROW = {}
