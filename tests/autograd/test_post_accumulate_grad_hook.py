"""``Tensor.register_post_accumulate_grad_hook`` and ``engine.queue_callback``: what DDP's
overlap stands on. A hook runs once per backward pass, after the leaf's last gradient of
the pass has been accumulated (compared with torch when it is installed)."""
import gc

import numpy as np
import pytest

import numbagrad as ng
from numbagrad.autograd import engine


def _log_hooks(*leaves):
    log = []
    for name, t in leaves:
        t.register_post_accumulate_grad_hook(lambda p, name=name: log.append((name, p.grad.numpy().copy())))
    return log


def test_runs_once_with_the_final_gradient_of_a_leaf_used_several_times():
    a = ng.tensor([1.0, 2.0, 3.0], requires_grad=True)
    b = ng.tensor([0.5, -1.0, 2.0], requires_grad=True)
    log = _log_hooks(("a", a), ("b", b))
    ((a * b).sum() + (a * a).sum() + a.sum()).backward()
    assert [n for n, _ in log].count("a") == 1 and [n for n, _ in log].count("b") == 1
    got = dict(log)
    np.testing.assert_allclose(got["a"], b.detach().numpy() + 2 * a.detach().numpy() + 1)
    np.testing.assert_allclose(got["b"], a.detach().numpy())
    # a second pass accumulates: the hook sees the sum
    log.clear()
    (a * 2).sum().backward()
    np.testing.assert_allclose(dict(log)["a"], b.detach().numpy() + 2 * a.detach().numpy() + 3)
    assert "b" not in dict(log)                      # b got nothing in this pass


def test_matches_torch_order_and_values():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    w1, w2, x = (rng.standard_normal(s).astype(np.float32) for s in ((3, 4), (4, 2), (5, 3)))
    seen = {}
    for lib in ("ng", "torch"):
        T = ng.tensor if lib == "ng" else torch.tensor
        p1, p2 = T(w1, requires_grad=True), T(w2, requires_grad=True)
        log = []
        for n, p in (("w1", p1), ("w2", p2)):
            p.register_post_accumulate_grad_hook(lambda t, n=n: log.append((n, t.grad.detach().numpy().copy())))
        ((T(x) @ p1).tanh() @ p2).square().sum().backward()
        seen[lib] = log
    assert [n for n, _ in seen["ng"]] == [n for n, _ in seen["torch"]] == ["w2", "w1"]
    for (_, a), (_, b) in zip(seen["ng"], seen["torch"]):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_not_run_by_autograd_grad_nor_for_leaves_outside_inputs():
    a = ng.tensor([1.0, 2.0], requires_grad=True)
    b = ng.tensor([3.0, 4.0], requires_grad=True)
    log = _log_hooks(("a", a), ("b", b))
    ng.autograd.grad((a * b).sum(), [a])
    assert log == []
    (a * b).sum().backward(inputs=[b])
    assert [n for n, _ in log] == ["b"] and a.grad is None


class _NoGrad(ng.autograd.Function):
    """Passes values through; backward gives its input no gradient."""

    @staticmethod
    def forward(ctx, x):
        return x.copy()

    @staticmethod
    def backward(ctx, g):
        return None


def test_leaf_seeded_directly_and_paths_that_carry_no_gradient():
    a = ng.tensor([1.0, 2.0], requires_grad=True)
    log = _log_hooks(("a", a))
    a.backward(ng.tensor([1.0, 1.0]))
    assert [n for n, _ in log] == ["a"]
    # a -> (a * 2) -> _NoGrad: that path delivers nothing (the engine drops the a * 2 node);
    # the hook runs once the other path has delivered, with its gradient only
    for first in (True, False):
        log.clear()
        a.grad = None
        dead = _NoGrad.apply(a * 2).sum()
        live = (a * 3).sum()
        (dead + live if first else live + dead).backward()
        assert len(log) == 1
        np.testing.assert_array_equal(log[0][1], [3.0, 3.0])
    # nothing at all reaches the leaf: no hook, .grad stays None
    log.clear()
    a.grad = None
    _NoGrad.apply(a).sum().backward()
    assert log == [] and a.grad is None


def test_remove_errors_and_no_leak():
    a = ng.tensor([1.0], requires_grad=True)
    h = a.register_post_accumulate_grad_hook(lambda p: (_ for _ in ()).throw(AssertionError("removed hook ran")))
    h.remove()
    (a * 2).sum().backward()
    with pytest.raises(RuntimeError, match="doesn't require gradient"):
        ng.ones(1).register_post_accumulate_grad_hook(lambda p: None)
    with pytest.raises(RuntimeError, match="non-leaf"):
        (a * 2).register_post_accumulate_grad_hook(lambda p: None)
    n = len(engine._POST_HOOKS)
    t = ng.ones(2, requires_grad=True)
    t.register_post_accumulate_grad_hook(lambda p: None)
    assert len(engine._POST_HOOKS) == n + 1
    del t
    gc.collect()
    assert len(engine._POST_HOOKS) == n


def test_queue_callback_runs_after_every_hook_at_the_end_of_backward():
    a = ng.tensor([1.0, 2.0], requires_grad=True)
    b = ng.tensor([3.0, 4.0], requires_grad=True)
    order = []

    def hook(p, name):
        order.append(name)
        if name == "b":
            engine.queue_callback(lambda: order.append(("end", a.grad is not None and b.grad is not None)))
    a.register_post_accumulate_grad_hook(lambda p: hook(p, "a"))
    b.register_post_accumulate_grad_hook(lambda p: hook(p, "b"))
    (a.exp() * b).sum().backward()
    assert order[-1] == ("end", True) and sorted(order[:-1]) == ["a", "b"]
    with pytest.raises(RuntimeError, match="only be installed during the backward pass"):
        engine.queue_callback(lambda: None)
