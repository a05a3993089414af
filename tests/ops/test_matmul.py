import numpy as np
import pytest

import numbagrad as ng
from optest import check_op, randn, torch

# matrix @ matrix, vector @ matrix, matrix @ vector, batch @ matrix: rows of tests/opdb.py
SHAPES = [((4,), (4,)), ((2, 3, 4), (2, 4, 5)), ((1, 3, 4), (2, 4, 5)), ((3, 4), (2, 4, 5))]


@pytest.mark.parametrize("sa,sb", SHAPES)
def test_matmul(sa, sb):
    a, b = randn(*sa, seed=1), randn(*sb, seed=2)
    check_op(ng.matmul, np.matmul, [a, b], torch_fn=torch.matmul if torch else None,
             tol={np.float32: dict(rtol=1e-4, atol=1e-4)})


def test_operator():  # bmm, mm: rows of tests/opdb.py
    a, b = randn(2, 3, 4, seed=3), randn(2, 4, 5, seed=4)
    check_op(lambda x, y: x @ y, np.matmul, [a[0], b[0]], tol={np.float32: dict(rtol=1e-4, atol=1e-4)})


@pytest.mark.parametrize("xshape,bias", [((5, 3), False), ((2, 5, 3), True), ((3,), True), ((3,), False)])
def test_linear(xshape, bias):  # (5, 3) with a bias and (2, 5, 3) without: rows of tests/opdb.py
    x, w = randn(*xshape, seed=5), randn(4, 3, seed=6)
    ins = [x, w] + ([randn(4, seed=7)] if bias else [])

    def ref(x, w, b=None):
        y = x @ w.T
        return y + b if b is not None else y
    check_op(ng.linear, ref, ins, tol={np.float32: dict(rtol=1e-4, atol=1e-4)},
             torch_fn=torch.nn.functional.linear if torch else None)


def test_shape_and_dtype_errors():
    with pytest.raises(RuntimeError, match=r"matmul: shapes \(3, 4\) and \(5, 2\) cannot be multiplied"):
        ng.ones(3, 4) @ ng.ones(5, 2)
    with pytest.raises(RuntimeError, match="same dtype"):
        ng.ones(3, 4) @ ng.ones(4, 2, dtype=ng.float64)
    with pytest.raises(RuntimeError, match="bmm: expected 3-D"):
        ng.bmm(ng.ones(3, 4), ng.ones(4, 2))
    with pytest.raises(RuntimeError, match="linear: input of shape"):
        ng.linear(ng.ones(2, 3), ng.ones(4, 5))
