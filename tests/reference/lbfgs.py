"""The input data of the L-BFGS kernel tests: a ring of curvature pairs of an SPD quadratic."""
import numpy as np


def curvature_history(dtype, n, cap, count, start, seed=2):
    """``count`` curvature pairs ``(y, s) = (H s, s)`` of a random SPD quadratic ``H`` (size
    ``n``) in a ring of ``cap`` rows, the oldest at row ``start`` (wrapping around row 0),
    with ``ro = 1 / (y . s)`` and a gradient ``g``; returns ``([dirs, stps, ro, g] as
    dtype, start, count)``."""
    rng = np.random.default_rng(seed)
    M = rng.standard_normal((n, n))
    H = M @ M.T / n + np.eye(n)
    dirs, stps, ro = np.zeros((cap, n)), np.zeros((cap, n)), np.zeros(cap)
    for k in range(count):
        j = (start + k) % cap
        s = rng.standard_normal(n)
        stps[j], dirs[j] = s, H @ s
        ro[j] = 1.0 / (dirs[j] @ s)
    return [a.astype(dtype) for a in (dirs, stps, ro, rng.standard_normal(n))], start, count
