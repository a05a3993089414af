"""Metric-learning losses (``numbagrad/ops/loss_metric.py``) on the CUDA backend: outputs
and gradients equal to the CPU's (``optest.check_device``), and the target-value error."""
import numpy as np
import pytest

import numbagrad as ng
from numbagrad.nn import loss_metric as M
from optest import check_device

_r = np.random.default_rng(0)
A, P, N = _r.standard_normal((3, 3, 4))
Y = np.array([1, -1, 1])
Y01 = np.array([1, 0, 1])

CASES = [
    (M.pairwise_distance, [A, P], {}),
    (M.pairwise_distance, [A, P[0]], dict(p=3.0)),
    (M.pairwise_distance, [A, P], dict(p=float("inf"))),
    (M.pairwise_distance, [A, P], dict(p=1.0)),
    (M.cosine_similarity, [A, P], {}),
    (M.triplet_margin_loss, [A, P, N], dict(swap=True)),
    (M.triplet_margin_loss, [A, P, N], dict(reduction="none")),
    (M.triplet_margin_with_distance_loss, [A, P, N], {}),
    (M.cosine_embedding_loss, [A, P, Y], dict(margin=0.1)),
    (M.hinge_embedding_loss, [A[:, 0], Y], dict(reduction="sum")),
    (M.margin_ranking_loss, [A[:, 0], P[:, 0], Y.astype(float)], {}),
    (M.contrastive_loss, [A, P, Y01], dict(margin=3.0)),
]


@pytest.mark.parametrize("fn,inputs,kw", CASES, ids=[f"{c[0].__name__}-{i}" for i, c in enumerate(CASES)])
def test_matches_cpu(fn, inputs, kw):
    check_device(fn, None, inputs, kwargs=kw)


def test_target_error_on_device():
    with pytest.raises(ValueError):
        M.hinge_embedding_loss(ng.tensor(A[:, 0], device="cuda"), ng.tensor(np.array([1, 0, 1]), device="cuda"))
