import numpy as np
import pytest

import numbagrad as ng
from optest import check_op, randn, torch


def test_reshape_view_flatten():  # reshape(4, 3), view(2, -1), flatten(x, 1): rows of tests/opdb.py
    x = randn(2, 3, 4, seed=1)
    check_op(lambda t: t.reshape(4, -1), lambda a: a.reshape(4, -1), [x])
    check_op(lambda t: t.view(6, 4), lambda a: a.reshape(6, 4), [x], noncontig=False)
    check_op(lambda t: ng.flatten(t), lambda a: a.reshape(-1), [x])


def test_view_of_noncontiguous_raises_and_shares_storage():
    x = ng.zeros(2, 3)
    v = x.view(3, 2)
    v.add_(1)
    assert x.sum().item() == 6
    with pytest.raises(RuntimeError, match="view: size"):
        x.t().view(6)
    with pytest.raises(RuntimeError, match=r"reshape: shape \[4, 4\] is invalid for input of shape \(2, 3\)"):
        x.reshape(4, 4)


# transpose, permute, .T, movedim: rows of tests/opdb.py


def test_squeeze_unsqueeze_expand():
    x = randn(3, 1, 4, seed=3)
    check_op(lambda t: t.squeeze(), lambda a: a.squeeze(), [x])
    check_op(lambda t: t.unsqueeze(0), lambda a: a[None], [x])  # squeeze(1), unsqueeze(-1): tests/opdb.py
    check_op(lambda t: t.expand(2, 3, 5, 4), lambda a: np.broadcast_to(a, (2, 3, 5, 4)), [x])
    check_op(lambda t: t.expand(-1, 2, -1), lambda a: np.broadcast_to(a, (3, 2, 4)), [x])
    with pytest.raises(RuntimeError, match="expand: the expanded size"):
        ng.ones(3, 2).expand(3, 4)


def test_cat_stack_split_chunk():
    a, b = randn(2, 3, seed=4), randn(4, 3, seed=5)
    check_op(lambda x, y: ng.cat([x, y]), lambda x, y: np.concatenate([x, y]), [a, b],
             torch_fn=(lambda x, y: torch.cat([x, y])) if torch else None)
    # stack, split (by size and by sizes), chunk, unbind: rows of tests/opdb.py
    with pytest.raises(RuntimeError, match=r"cat: sizes of tensors must match.*\(2, 3\), \(4, 2\)"):
        ng.cat([ng.ones(2, 3), ng.ones(4, 2)])
    with pytest.raises(RuntimeError, match="stack: expects each tensor to be equal size"):
        ng.stack([ng.ones(2), ng.ones(3)])


def test_cat_promotes_dtype():
    assert ng.cat([ng.ones(2), ng.ones(2, dtype=ng.float64)]).dtype == ng.float64


@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate", "circular"])
def test_pad(mode):
    x = randn(2, 3, 4, seed=6)
    npmode = {"constant": "constant", "reflect": "reflect", "replicate": "edge", "circular": "wrap"}[mode]
    check_op(lambda t: ng.pad(t, (1, 2, 2, 1), mode=mode),
             lambda a: np.pad(a, ((0, 0), (2, 1), (1, 2)), mode=npmode), [x],
             torch_fn=(lambda t: torch.nn.functional.pad(t, (1, 2, 2, 1), mode=mode)) if torch else None)


def test_pad_constant_value():
    x = ng.ones(2)
    assert ng.pad(x, (1, 1), value=5.0).tolist() == [5.0, 1.0, 1.0, 5.0]


def test_repeat():  # flip, roll, narrow: rows of tests/opdb.py
    x = randn(3, 4, seed=7)
    check_op(lambda t: t.repeat(2, 1, 3), lambda a: np.tile(a, (2, 1, 3)), [x],
             torch_fn=(lambda t: t.repeat(2, 1, 3)) if torch else None)


def test_to_keeps_the_leaf_dtype():  # contiguous, clone: a row of tests/opdb.py
    x = randn(3, 4, seed=8)
    t = ng.tensor(x, requires_grad=True)
    t.to(ng.float32).sum().backward()
    assert t.grad.dtype == ng.float64
