"""The compositions of ``numbagrad/ops/nn_extra.py`` on the CUDA backend: outputs and gradients
equal to the CPU's (``optest.check_device``). They launch no kernel of their own, so this checks
that every piece (the host-built index arrays, the masks, the zero plane of ``fold``) lands on
the input's device. Shapes are tiny: every simulated thread costs ~0.3 ms."""
import numpy as np
import pytest

import numbagrad as ng
from numbagrad.ops import nn_extra as E
from optest import check_device, randn

GEO = dict(kernel_size=2, padding=1, stride=(1, 2))      # overlapping rows, zero border


def test_unfold_matches_cpu():
    check_device(lambda a: E.unfold(a, **GEO), None, [randn(1, 2, 3, 3, seed=0)])


def test_fold_matches_cpu():
    n = E.unfold(ng.zeros(1, 2, 3, 3), **GEO).shape
    check_device(lambda a: E.fold(a, (3, 3), **GEO), None, [randn(*n, seed=1)])


@pytest.mark.parametrize("reduction", ["none", "mean"])
def test_multilabel_margin_loss_matches_cpu(reduction):
    t = np.array([[2, 0, -1, 1], [1, -1, 3, 3]])
    check_device(lambda a, b: E.multilabel_margin_loss(a, b, reduction=reduction), None, [randn(2, 4, seed=2), t])


def test_local_response_norm_matches_cpu():
    check_device(lambda a: E.local_response_norm(a, 3, alpha=0.5), None, [randn(1, 4, 3, seed=3)])


def test_target_out_of_range_on_device():
    with pytest.raises(RuntimeError, match="out of range"):
        E.multilabel_margin_loss(ng.zeros(1, 3, device="cuda"), ng.tensor([[3, -1, 0]], device="cuda"))
