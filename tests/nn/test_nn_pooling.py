"""Pooling layers (``numbagrad/nn/pooling.py``): the forward is the functional op (checked in
``tests/ops/test_pooling.py``), so here: outputs and gradients equal torch's layer built
with the same arguments, the same attribute values and ``repr``, and the same (empty)
``state_dict``."""
import numpy as np
import pytest

import numbagrad as ng
from numbagrad.nn import pooling as L
from numbagrad.ops import pooling as P
from optest import randn

torch = pytest.importorskip("torch")

# (class name, constructor args, constructor kwargs, input shape)
CASES = [
    ("MaxPool1d", (3,), {}, (2, 3, 10)),
    ("MaxPool1d", (3, 2, 1, 2, True, True), {}, (3, 11)),
    ("MaxPool2d", (2,), {}, (2, 3, 6, 6)),
    ("MaxPool2d", ((2, 3), (1, 2), 1), dict(ceil_mode=True, return_indices=True), (2, 2, 5, 7)),
    ("MaxPool2d", (3,), dict(stride=2, padding=1, dilation=2), (2, 6, 7)),
    ("AvgPool1d", (3,), {}, (2, 3, 10)),
    ("AvgPool1d", (3, 2, 1, True, False), {}, (2, 3, 10)),
    ("AvgPool2d", (2,), {}, (2, 3, 6, 6)),
    ("AvgPool2d", ((2, 3), 1, 1, True, False, 3), {}, (2, 2, 5, 7)),
    ("AvgPool2d", (3,), dict(stride=(2, 1), padding=(1, 0), count_include_pad=False), (3, 6, 5)),
    ("AdaptiveAvgPool1d", (3,), {}, (2, 3, 10)),
    ("AdaptiveAvgPool2d", ((None, 3),), {}, (2, 3, 5, 7)),
    ("AdaptiveAvgPool2d", (1,), {}, (2, 3, 5, 7)),
    ("AdaptiveMaxPool1d", (4,), {}, (3, 9)),
    ("AdaptiveMaxPool2d", (4, True), {}, (2, 3, 5, 7)),
    ("AdaptiveMaxPool2d", ((3, 2),), {}, (3, 7, 5)),
    ("LPPool1d", (2.0, 3, 2), {}, (2, 3, 10)),
    ("LPPool2d", (2, 3), {}, (2, 3, 6, 6)),
]
ATTRS = ("kernel_size", "stride", "padding", "dilation", "ceil_mode", "return_indices", "count_include_pad",
         "divisor_override", "output_size", "norm_type")


def _distinct(shape, seed=0):
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape))
    return (rng.permutation(n).reshape(shape) - n / 2) / 7.0 + 0.01


@pytest.mark.parametrize("name,args,kwargs,shape", CASES, ids=[f"{c[0]}{i}" for i, c in enumerate(CASES)])
def test_layer_matches_torch(name, args, kwargs, shape):
    m = getattr(L, name)(*args, **kwargs)
    tm = getattr(torch.nn, name)(*args, **kwargs)
    assert repr(m) == repr(tm)
    for a in ATTRS:
        assert getattr(m, a, None) == getattr(tm, a, None), a
    assert list(m.state_dict().keys()) == list(tm.state_dict().keys()) == []
    m.load_state_dict({k: v.detach().numpy() for k, v in tm.state_dict().items()})

    x = _distinct(shape)
    if name.startswith("LP"):
        x = np.abs(x) + 0.1  # positive: lp pooling of negative values has sign kinks
    t = ng.tensor(x, requires_grad=True)
    tt = torch.tensor(x, requires_grad=True)
    y, ty = m(t), tm(tt)
    if isinstance(ty, tuple):
        np.testing.assert_array_equal(y[1].numpy(), ty[1].numpy())
        y, ty = y[0], ty[0]
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-12, atol=1e-14)
    g = randn(*ty.shape, seed=1)
    y.backward(ng.tensor(g))
    ty.backward(torch.tensor(g))
    np.testing.assert_allclose(t.grad.numpy(), tt.grad.numpy(), rtol=1e-12, atol=1e-14)


def test_layers_call_the_functional_ops():
    x = ng.tensor(randn(2, 3, 8, 8, seed=2).astype(np.float32))
    pairs = [(L.MaxPool2d(3, 2, 1), P.max_pool2d(x, 3, 2, 1)),
             (L.AvgPool2d(3, 2, 1, count_include_pad=False),
              P.avg_pool2d(x, 3, 2, 1, count_include_pad=False)),
             (L.AdaptiveAvgPool2d((3, 5)), P.adaptive_avg_pool2d(x, (3, 5))),
             (L.AdaptiveMaxPool2d(3), P.adaptive_max_pool2d(x, 3))]
    for m, ref in pairs:
        y = m(x)
        assert y.dtype == ng.float32
        np.testing.assert_array_equal(y.numpy(), ref.numpy())


def test_in_a_sequential_with_linear():
    # a classic head: pool, global average, flatten, linear -- gradients reach the input
    net = ng.nn.Sequential(L.MaxPool2d(2), L.AdaptiveAvgPool2d(1), ng.nn.Flatten(), ng.nn.Linear(3, 4))
    x = ng.tensor(randn(2, 3, 6, 6, seed=3).astype(np.float32), requires_grad=True)
    out = net(x)
    assert tuple(out.shape) == (2, 4)
    out.sum().backward()
    g = x.grad.numpy()
    assert g.shape == (2, 3, 6, 6)
    assert np.count_nonzero(g) == 2 * 3 * 9  # one max per 2x2 window gets gradient
    assert "MaxPool2d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False)" in repr(net)
