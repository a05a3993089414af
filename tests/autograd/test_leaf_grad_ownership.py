"""The engine stores a leaf's first gradient without a copy only when nothing else can
see that array (``autograd/engine.py``, ``_sole_owner``), and copies it otherwise: a later
in-place accumulation into ``.grad`` must never write into another leaf's gradient, a
user's gradient tensor, or an array a node still holds."""
import numpy as np

import numbagrad as ng
from numbagrad.autograd.function import Function


def _fn(make):
    """A Function whose backward returns ``make(g)``; the ids of what it returned."""
    ids = []

    class Fn(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2.0

        @staticmethod
        def backward(ctx, g):
            r = make(ctx, g)
            ids.append(id(r))
            return r
    return Fn, ids


def test_a_fresh_gradient_is_kept_as_it_is():
    Fn, ids = _fn(lambda ctx, g: np.full(g.shape, 3.0))
    x = ng.tensor(np.ones(5), requires_grad=True)
    Fn.apply(x).sum().backward()
    assert id(x.grad.array) == ids[0]
    np.testing.assert_array_equal(x.grad.numpy(), np.full(5, 3.0))


def test_a_fresh_view_is_kept_and_accumulates_correctly():
    Fn, ids = _fn(lambda ctx, g: np.full(g.size, 2.0).reshape(g.shape))
    x = ng.tensor(np.ones((2, 3)), requires_grad=True)
    Fn.apply(x).sum().backward()
    assert id(x.grad.array) == ids[0]
    Fn.apply(x).sum().backward()                     # accumulates in place
    np.testing.assert_array_equal(x.grad.numpy(), np.full((2, 3), 4.0))


def test_one_array_for_two_leaves_is_copied():
    a = ng.tensor(np.ones(4), requires_grad=True)
    b = ng.tensor(np.ones(4), requires_grad=True)
    (a + b).sum().backward()
    assert not np.shares_memory(a.grad.array, b.grad.array)
    (a * 3.0).sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), np.full(4, 4.0))
    np.testing.assert_array_equal(b.grad.numpy(), np.ones(4))


def test_a_users_gradient_is_never_aliased():
    for make in (lambda t: t.reshape(6), lambda t: t + 0.0, lambda t: t * 1.0):
        x = ng.tensor(np.ones((2, 3)), requires_grad=True)
        y = make(x)
        user = np.full(y.shape, 2.0)
        y.backward(ng.tensor(user))
        x.grad.array[...] += 1.0
        np.testing.assert_array_equal(user, np.full(y.shape, 2.0))


def test_an_array_a_node_still_holds_is_copied():
    Fn, _ = _fn(lambda ctx, g: ctx.keep)

    class Keep(Fn):
        @staticmethod
        def forward(ctx, x):
            ctx.keep = np.full(x.shape, 7.0)
            return x * 2.0

    x = ng.tensor(np.ones(3), requires_grad=True)
    y = Keep.apply(x).sum()
    y.backward(retain_graph=True)
    x.grad.array[...] = 0.0          # had .grad aliased the node's array, the next pass would see 0s
    y.backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.full(3, 7.0))


def test_a_leaf_with_hooks_gets_a_copy():
    seen = []
    x = ng.tensor(np.ones(3), requires_grad=True)
    x.register_hook(lambda g: seen.append(g) or None)
    (x * 2.0).sum().backward()
    assert not np.shares_memory(seen[0].numpy(), x.grad.array)
