"""Host-side pieces shared by the gradient-clipping launchers of both targets
(``kernels/cpu/clip.py`` and ``kernels/cuda/clip.py``).

Norm modes, the ``mode`` argument of their norm kernels: 0 sum ``x^2``, 1 sum ``|x|``,
2 sum ``|x|^p``, 3 count of non-zero gradients (``p = 0``), 4 max ``|x|`` (``inf``),
5 min ``|x|`` (``-inf``).
"""
import math

import numpy as np


def _norm_mode(p):
    """The norm mode of ``norm_type`` ``p`` (a float)."""
    if p == 2.0:
        return 0
    if p == 1.0:
        return 1
    if p == math.inf:
        return 4
    if p == -math.inf:
        return 5
    if p == 0.0:
        return 3
    return 2


def _empty_norm(mode):
    """The norm of an empty list of gradients: ``inf`` for the min, else 0."""
    return math.inf if mode == 5 else 0.0


def clip_coef(total, max_norm):
    """PyTorch's ``clamp(max_norm / (total + 1e-6), max=1)`` in ``total``'s dtype (``float /
    tensor`` is ``tensor.reciprocal() * float`` there)."""
    t = total.dtype.type
    with np.errstate(all="ignore"):
        c = t(1) / (t(total[0]) + t(1e-6)) * t(max_norm)
    return t(1) if c > 1 else c  # NaN stays NaN
