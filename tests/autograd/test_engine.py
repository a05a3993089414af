import gc
import tracemalloc
import weakref

import numpy as np
import pytest

import numbagrad as ng
from optest import torch


def test_shared_input_accumulates():
    x = ng.tensor([1.0, 2.0], requires_grad=True)
    y = x * x + x * 3 + x
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * np.array([1.0, 2.0]) + 4)


def test_grad_accumulates_across_backward_calls_and_add_aliasing():
    a = ng.tensor([1.0, 2.0], requires_grad=True)
    b = ng.tensor([3.0, 4.0], requires_grad=True)
    (a + b).sum().backward()
    (a + b).sum().backward()
    # a + b hands the same gradient array to both leaves; accumulating into one must not
    # change the other.
    assert a.grad.tolist() == [2.0, 2.0]
    assert b.grad.tolist() == [2.0, 2.0]


def test_long_chain_is_not_recursive():
    x = ng.tensor([1.0], requires_grad=True)
    y = x
    for _ in range(10_000):
        y = y * 1.0001
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), [1.0001 ** 10_000], rtol=1e-3)


def test_second_backward_without_retain_graph_raises():
    x = ng.tensor([1.0, 2.0], requires_grad=True)
    y = (x * x).sum()
    y.backward()
    with pytest.raises(RuntimeError, match="second time"):
        y.backward()


def test_retain_graph_allows_second_backward():
    x = ng.tensor([1.0, 2.0], requires_grad=True)
    y = (x * x).sum()
    y.backward(retain_graph=True)
    y.backward()
    assert x.grad.tolist() == [4.0, 8.0]


def test_backward_needs_scalar_or_gradient():
    x = ng.ones(3, requires_grad=True)
    y = x * 2
    with pytest.raises(RuntimeError, match="scalar outputs"):
        y.backward()
    y.backward(ng.tensor([1.0, 2.0, 3.0]))
    assert x.grad.tolist() == [2.0, 4.0, 6.0]


def test_autograd_grad_does_not_touch_dot_grad():
    x = ng.tensor([3.0], requires_grad=True)
    w = ng.tensor([2.0], requires_grad=True)
    y = x * x * w
    gx, gw = ng.autograd.grad(y, [x, w])
    assert gx.tolist() == [12.0] and gw.tolist() == [9.0]
    assert x.grad is None and w.grad is None


def test_autograd_grad_wrt_intermediate_and_unused():
    x = ng.tensor([2.0], requires_grad=True)
    h = x * 3
    y = h * h
    (gh,) = ng.autograd.grad(y, [h], retain_graph=True)
    assert gh.tolist() == [12.0]
    z = ng.tensor([1.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="not used"):
        ng.autograd.grad(y, [z], retain_graph=True)
    gz, = ng.autograd.grad(y, [z], allow_unused=True)
    assert gz is None


def test_hooks_and_retain_grad():
    x = ng.tensor([1.0, 2.0], requires_grad=True)
    seen = []
    h = x.register_hook(lambda g: seen.append(g.tolist()))
    y = x * 2
    y.retain_grad()
    y.register_hook(lambda g: g * 10)  # replaces the gradient flowing on
    (y * y).sum().backward()
    # y = 2x, d(y^2)/dy = 2y = [4, 8], times 10 by the hook; retain_grad runs after every
    # other hook (PyTorch's rule), so y.grad shows the replaced gradient.
    assert y.grad.tolist() == [40.0, 80.0]
    assert seen == [[80.0, 160.0]]
    assert x.grad.tolist() == [80.0, 160.0]
    h.remove()


def test_leaf_hook_can_replace_gradient():
    x = ng.tensor([1.0, 2.0], requires_grad=True)
    x.register_hook(lambda g: g * 0)
    (x * 3).sum().backward()
    assert x.grad.tolist() == [0.0, 0.0]


def test_detach_and_requires_grad_():
    x = ng.tensor([1.0], requires_grad=True)
    d = (x * 2).detach()
    assert not d.requires_grad and d.is_leaf
    d.requires_grad_()
    (d * 3).backward()
    assert d.grad.tolist() == [3.0] and x.grad is None
    with pytest.raises(RuntimeError, match="floating point"):
        ng.tensor([1, 2]).requires_grad_()


def test_grad_modes():
    x = ng.ones(2, requires_grad=True)
    with ng.no_grad():
        assert not (x * 2).requires_grad
        with ng.enable_grad():
            assert (x * 2).requires_grad
    with ng.set_grad_enabled(False):
        assert not (x * 2).requires_grad
    assert ng.is_grad_enabled()
    with ng.inference_mode():
        assert not (x * 2).requires_grad

    @ng.no_grad()
    def f(t):
        return t * 2
    assert not f(x).requires_grad
    assert (x * 2).requires_grad


def test_version_counter_detects_inplace_modification_of_saved_tensor():
    w = ng.tensor([1.0, 2.0], requires_grad=True)
    y = (w * w).sum()
    with ng.no_grad():
        w.mul_(2)
    with pytest.raises(RuntimeError, match="modified by an in-place operation"):
        y.backward()


def test_inplace_on_leaf_requiring_grad_raises():
    w = ng.tensor([1.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf tensor that requires grad"):
        w.add_(1)


def test_inplace_on_nonleaf_rebases_history():
    x = ng.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    y += 1
    y *= y
    y.sum().backward()
    # y = (2x + 1)^2  ->  dy/dx = 4 (2x + 1)
    assert x.grad.tolist() == [12.0, 20.0]


def test_inplace_under_no_grad_writes_storage_and_views_see_it():
    x = ng.zeros(4)
    v = x.reshape(2, 2)
    x.add_(1)
    assert v.tolist() == [[1.0, 1.0], [1.0, 1.0]]
    assert x._version.value == 1 and v._version is x._version


def test_custom_function():
    class Cube(ng.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x ** 3

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            assert ctx.needs_input_grad == (True,)
            return 3 * x * x * g

    x = ng.tensor([2.0, -1.0], dtype=ng.float64, requires_grad=True)
    Cube.apply(x).sum().backward()
    assert x.grad.tolist() == [12.0, 3.0]
    assert ng.autograd.gradcheck(lambda t: Cube.apply(t), (ng.randn(5, dtype=ng.float64, requires_grad=True),))


def test_gradcheck_catches_a_wrong_gradient():
    class Wrong(ng.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 3 * x * g

    x = ng.randn(4, dtype=ng.float64, requires_grad=True)
    with pytest.raises(RuntimeError, match="mismatch"):
        ng.autograd.gradcheck(lambda t: Wrong.apply(t), (x,))
    assert ng.autograd.gradcheck(lambda t: Wrong.apply(t), (x,), raise_exception=False) is False


def test_anomaly_detection_names_the_op():
    x = ng.tensor([0.0, 1.0], requires_grad=True)
    with ng.autograd.detect_anomaly():
        y = ng.sqrt(x).sum()
        with pytest.raises(RuntimeError, match="Sqrt.*nan or inf"):
            y.backward()


def test_saved_arrays_released_after_backward():
    x = ng.randn(100, 100, requires_grad=True)
    y = ng.exp(x)
    node = y.grad_fn
    y.sum().backward()
    assert node._saved is None


def test_training_loop_memory_stays_flat():
    w = ng.randn(256, 256, requires_grad=True)
    x = ng.randn(64, 256)

    def step():
        loss = ((x @ w).tanh() * 0.5).sum() if hasattr(ng, "tanh") else ((x @ w) * 0.5).sum()
        loss.backward()
        w.grad = None

    for _ in range(5):
        step()
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    for _ in range(200):
        step()
    gc.collect()
    grown = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    assert grown < 1_000_000, f"memory grew by {grown} bytes over 200 steps"


def test_graph_is_freed_when_output_dropped():
    x = ng.randn(10, requires_grad=True)
    y = x * 2
    ref = weakref.ref(y.grad_fn)
    del y
    gc.collect()
    assert ref() is None


def test_multi_output_node_missing_grad_gets_zeros():
    x = ng.tensor([[1.0, 5.0], [3.0, 2.0]], requires_grad=True)
    vals, idx = ng.max(x, dim=1)
    vals.sum().backward()
    assert x.grad.tolist() == [[0.0, 1.0], [1.0, 0.0]]
    assert not idx.requires_grad and idx.dtype == ng.int64


@pytest.mark.skipif(torch is None, reason="torch not installed")
def test_composite_expression_matches_torch():
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((4,))
    ta, tb = ng.tensor(a, requires_grad=True), ng.tensor(b, requires_grad=True)
    pa, pb = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    ((ta * tb).exp() / (1 + ta ** 2) - tb).mean().backward()
    ((pa * pb).exp() / (1 + pa ** 2) - pb).mean().backward()
    np.testing.assert_allclose(ta.grad.numpy(), pa.grad.numpy(), rtol=1e-10)
    np.testing.assert_allclose(tb.grad.numpy(), pb.grad.numpy(), rtol=1e-10)


def test_zero_d_node_used_several_times_accumulates():
    # x[0] is a 0-d node feeding three ops; summing its 0-d gradients once returned a
    # NumPy scalar that the next accumulation could not write into.
    x = ng.tensor(np.array([-1.5, 2.0]), requires_grad=True)
    a, b = x[0], x[1]
    loss = (1 - a) ** 2 + 100 * (b - a * a) ** 2
    loss.backward()
    xv, yv = -1.5, 2.0
    expected = [-2 * (1 - xv) - 400 * xv * (yv - xv * xv), 200 * (yv - xv * xv)]
    np.testing.assert_allclose(x.grad.numpy(), expected, rtol=1e-12)
