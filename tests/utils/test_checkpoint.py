"""Gradient checkpointing (``numbagrad/utils/checkpoint.py``): gradients equal the plain
run's bit for bit (dropout included), every calling convention works, misuse raises,
and the saved-activation memory falls as ``memory_stats`` and ``tracemalloc`` see it."""
import tracemalloc

import numpy as np
import pytest

import numbagrad as ng
from numbagrad import nn
from numbagrad.utils.checkpoint import checkpoint, checkpoint_sequential


def mlp(depth, width, p=0.0, seed=0):
    ng.manual_seed(seed)
    layers = []
    for _ in range(depth):
        layers += [nn.Linear(width, width), nn.ReLU()] + ([nn.Dropout(p)] if p else [])
    return nn.Sequential(*layers)


def grads(model, *extra):
    return [p.grad.numpy().copy() for p in model.parameters()] + [t.grad.numpy().copy() for t in extra]


def zero(model, *extra):
    for p in list(model.parameters()) + list(extra):
        p.grad = None


@pytest.mark.parametrize("segments", [1, 2, 3, 5])
def test_sequential_with_dropout_is_bit_identical(segments):
    m = mlp(6, 16, p=0.3)
    x = ng.randn(8, 16, requires_grad=True)
    ng.manual_seed(11)
    y = m(x).pow(2).sum()
    y.backward()
    ref = grads(m, x)
    zero(m, x)
    ng.manual_seed(11)
    y2 = checkpoint_sequential(m, segments, x).pow(2).sum()
    after_forward = ng.get_rng_state()
    y2.backward()
    assert ng.get_rng_state() == after_forward  # recomputing restored, then gave back, the RNG
    assert y.item() == y2.item()
    for a, b in zip(ref, grads(m, x)):
        np.testing.assert_array_equal(a, b)


def test_multiple_inputs_non_tensor_args_kwargs_and_nested_outputs():
    lin = nn.Linear(4, 4)
    a = ng.randn(3, 4, requires_grad=True)
    b = ng.randn(3, 4)  # no grad
    idx = ng.tensor([2, 0, 1])

    def f(x, y, scale, *, mode):
        h = lin(x) * scale + y
        return {"h": h, "parts": (h.sum(1), [h[idx], mode]), "count": 3}

    def loss(out):
        return out["h"].sum() + out["parts"][0].pow(2).sum() + out["parts"][1][0].exp().sum()

    loss(f(a, b, 2.0, mode="m")).backward()
    ref = grads(lin, a)
    zero(lin, a)
    out = checkpoint(f, a, b, 2.0, mode="m")
    assert out["count"] == 3 and out["parts"][1][1] == "m" and b.grad is None
    loss(out).backward()
    # three outputs share h: their gradients reach h in the recomputed graph in another
    # order than in the plain one, so the sum may differ in the last bit (a single-output
    # segment, as in checkpoint_sequential, is bit-identical: see the tests above)
    for x, y in zip(ref, grads(lin, a)):
        np.testing.assert_allclose(x, y, rtol=1e-6)


def test_autograd_grad_and_retain_graph():
    m = mlp(3, 8)
    x = ng.randn(5, 8, requires_grad=True)
    params = list(m.parameters())
    ref = ng.autograd.grad(m(x).sum(), [x] + params)
    y = checkpoint(m, x).sum()
    got = ng.autograd.grad(y, [x] + params, retain_graph=True)
    for r, g in zip(ref, got):
        np.testing.assert_array_equal(r.numpy(), g.numpy())
    assert all(p.grad is None for p in params)  # autograd.grad leaves .grad alone
    again = ng.autograd.grad(y, [x])  # the retained graph recomputes once more
    np.testing.assert_array_equal(again[0].numpy(), ref[0].numpy())
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y.backward()


def test_nested_checkpoints_and_no_grad_inside():
    inner = mlp(2, 8, seed=1)
    outer = nn.Linear(8, 8)
    frozen = nn.Linear(8, 8)

    def block(x):
        with ng.no_grad():
            c = frozen(x)  # a constant inside the segment
        return outer(checkpoint(inner, x)) + c

    x = ng.randn(4, 8, requires_grad=True)
    block(x).sum().backward()
    ref = grads(inner) + grads(outer) + [x.grad.numpy().copy()]
    zero(inner)
    zero(outer, x)
    checkpoint(block, x).sum().backward()
    for a, b in zip(ref, grads(inner) + grads(outer) + [x.grad.numpy()]):
        np.testing.assert_array_equal(a, b)
    assert all(p.grad is None for p in frozen.parameters())


def test_misuse_is_a_clear_error():
    x = ng.randn(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="no floating-point tensor"):
        checkpoint(lambda t: (t > 0).long(), x)
    outside = x * 2  # a non-leaf tensor the function reads without taking it as an argument
    with pytest.raises(RuntimeError, match="pass it as an argument"):
        checkpoint(lambda t: t + outside, ng.randn(3))
    with pytest.raises(TypeError, match="callable or Module, got int"):
        checkpoint(3, x)
    with pytest.raises(ValueError, match="segments"):
        checkpoint_sequential(mlp(2, 4), 0, x)
    y = checkpoint(lambda t: t * 3, x).sum()
    y.backward()
    with pytest.raises(RuntimeError, match="second time"):
        y.backward()


def test_in_place_change_of_an_input_is_detected():
    x = ng.randn(3, requires_grad=True)
    h = x * 1.0
    y = checkpoint(lambda t: (t * t).sum(), h)
    with ng.no_grad():
        h.mul_(2)  # writes h's buffer, which the checkpoint holds
    with pytest.raises(RuntimeError, match="modified by an in-place operation"):
        y.backward()


def test_without_grad_it_is_a_plain_call():
    m = mlp(2, 4)
    x = ng.randn(2, 4)
    with ng.no_grad():
        y = checkpoint(m, x)
    assert y.grad_fn is None
    np.testing.assert_array_equal(y.numpy(), m(x).detach().numpy())


def test_sqrt_n_saving_on_a_32_layer_mlp():
    """Plain training keeps one activation per layer (each Linear's input, which is the
    previous ReLU's output). With s segments, the peak is the s - 1 checkpointed inputs
    plus the graph of the last, un-checkpointed segment: s - 1 + ceil-ish(32 / s) layers,
    at best 10 of 32 (s = 5, 6, 7) and 11 of 32 at s = 4 and s = 8."""
    m = mlp(32, 128)
    x = ng.randn(64, 128, requires_grad=True)
    layer = 64 * 128 * 4  # one activation

    def peak(run):
        zero(m, x)
        base = ng.memory_stats()["saved_bytes"]
        ng.reset_peak_memory_stats()
        run().sum().backward()
        assert ng.memory_stats()["saved_bytes"] == base  # everything the step saved is released
        return ng.memory_stats()["saved_bytes_peak"] - base, grads(m, x)

    plain, g_plain = peak(lambda: m(x))
    assert plain == 32 * layer
    for segments, layers in ((4, 11), (5, 10), (6, 10), (7, 10), (8, 11)):
        ck, g_ck = peak(lambda: checkpoint_sequential(m, segments, x))
        assert ck == layers * layer, (segments, ck / layer)
        if segments in (5, 6, 7):
            assert ck <= plain / 3
        for a, b in zip(g_plain, g_ck):
            np.testing.assert_array_equal(a, b)


def test_saved_bytes_agree_with_tracemalloc():
    m = mlp(8, 256)
    runs = (lambda: m(ng.randn(128, 256)), lambda: checkpoint_sequential(m, 4, ng.randn(128, 256)))
    for run in runs:  # warm-up: kernels compiled, the BLAS's and kernels' work buffers allocated
        run()
    base = ng.memory_stats()["saved_bytes"]
    for run in runs:
        before = ng.memory_stats()["saved_bytes"]
        tracemalloc.start()
        y = run().sum()
        held, _ = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        saved = ng.memory_stats()["saved_bytes"] - before
        # what stays allocated after the forward is what the graph keeps (plus small objects)
        assert saved > 0 and abs(held - saved) <= 0.05 * saved + 64 * 1024, (held, saved)
        del y
    assert ng.memory_stats()["saved_bytes"] == base  # a graph dropped without backward is released
