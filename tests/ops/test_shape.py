import numpy as np
import pytest

import numbagrad as ng
from optest import check_op, randn, torch


def test_reshape_view_flatten():
    x = randn(2, 3, 4, seed=1)
    check_op(lambda t: t.reshape(4, -1), lambda a: a.reshape(4, -1), [x])
    check_op(lambda t: t.view(6, 4), lambda a: a.reshape(6, 4), [x], noncontig=False)
    check_op(lambda t: t.flatten(1), lambda a: a.reshape(2, 12), [x])
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


def test_transpose_permute_t():
    x = randn(2, 3, 4, seed=2)
    check_op(lambda t: t.transpose(0, 2), lambda a: a.transpose(2, 1, 0), [x])
    check_op(lambda t: t.permute(1, 2, 0), lambda a: a.transpose(1, 2, 0), [x])
    check_op(lambda t: t.T, lambda a: a.T, [x[0]])
    check_op(lambda t: ng.movedim(t, 0, -1), lambda a: np.moveaxis(a, 0, -1), [x])


def test_squeeze_unsqueeze_expand():
    x = randn(3, 1, 4, seed=3)
    check_op(lambda t: t.squeeze(), lambda a: a.squeeze(), [x])
    check_op(lambda t: t.squeeze(1), lambda a: a.squeeze(1), [x])
    check_op(lambda t: t.unsqueeze(0), lambda a: a[None], [x])
    check_op(lambda t: t.unsqueeze(-1), lambda a: a[..., None], [x])
    check_op(lambda t: t.expand(2, 3, 5, 4), lambda a: np.broadcast_to(a, (2, 3, 5, 4)), [x])
    check_op(lambda t: t.expand(-1, 2, -1), lambda a: np.broadcast_to(a, (3, 2, 4)), [x])
    with pytest.raises(RuntimeError, match="expand: the expanded size"):
        ng.ones(3, 2).expand(3, 4)


def test_cat_stack_split_chunk():
    a, b = randn(2, 3, seed=4), randn(4, 3, seed=5)
    check_op(lambda x, y: ng.cat([x, y]), lambda x, y: np.concatenate([x, y]), [a, b],
             torch_fn=(lambda x, y: torch.cat([x, y])) if torch else None)
    check_op(lambda x, y: ng.stack([x, y], 1), lambda x, y: np.stack([x, y], 1), [a, a + 1])
    check_op(lambda x: ng.split(x, 2, 1), lambda x: tuple(np.split(x, [2], 1)), [b])
    check_op(lambda x: ng.chunk(x, 2, 0), lambda x: tuple(np.split(x, 2, 0)), [b])
    check_op(lambda x: ng.split(x, [1, 3], 0), lambda x: tuple(np.split(x, [1], 0)), [b])
    check_op(lambda x: ng.unbind(x, 1), lambda x: tuple(x[:, i] for i in range(3)), [a])
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


def test_flip_roll_repeat_narrow():
    x = randn(3, 4, seed=7)
    check_op(lambda t: t.flip(1), lambda a: a[:, ::-1], [x])
    check_op(lambda t: t.roll(1, 0), lambda a: np.roll(a, 1, 0), [x])
    check_op(lambda t: t.repeat(2, 1, 3), lambda a: np.tile(a, (2, 1, 3)), [x],
             torch_fn=(lambda t: t.repeat(2, 1, 3)) if torch else None)
    check_op(lambda t: t.narrow(1, 1, 2), lambda a: a[:, 1:3], [x])


def test_contiguous_clone_to():
    x = randn(3, 4, seed=8)
    check_op(lambda t: t.T.contiguous(), lambda a: np.ascontiguousarray(a.T), [x])
    check_op(lambda t: t.clone(), lambda a: a.copy(), [x])
    t = ng.tensor(x, requires_grad=True)
    t.to(ng.float32).sum().backward()
    assert t.grad.dtype == ng.float64
