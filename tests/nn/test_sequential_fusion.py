"""``Sequential`` runs a hook-free ``Linear`` followed by ``ReLU``/``Tanh`` as one
fused ``linear_act`` node: the same forward values, bit for bit, as the modules called
one by one, the same gradients up to summation order, and the modules' own path
whenever a hook could observe the intermediate result."""
import numpy as np
import pytest

import numbagrad as ng
from numbagrad import nn


def _pair(act, dtype):
    ng.manual_seed(0)
    return nn.Sequential(nn.Linear(7, 5), act(), nn.Linear(5, 3), act(), nn.Linear(3, 2)).to(dtype)


def _one_by_one(model, x):
    for m in model:
        x = m(x)
    return x


def _grads(model, x, run):
    for p in model.parameters():
        p.grad = None
    xt = ng.tensor(x, requires_grad=True)
    out = run(xt)
    (out * ng.tensor(np.linspace(-1, 1, out.numel()).reshape(out.shape).astype(x.dtype))).sum().backward()
    return out.detach().numpy(), [xt.grad.numpy()] + [p.grad.numpy().copy() for p in model.parameters()]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("act", [nn.ReLU, nn.Tanh, nn.Sigmoid], ids=["relu", "tanh", "sigmoid-unfused"])
def test_fused_pairs_equal_the_modules_one_by_one(act, dtype):
    model = _pair(act, dtype)
    x = np.random.default_rng(1).standard_normal((9, 7)).astype(dtype)
    out_f, g_f = _grads(model, x, model)
    out_u, g_u = _grads(model, x, lambda t: _one_by_one(model, t))
    np.testing.assert_array_equal(out_f, out_u)
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-14)
    for a, b in zip(g_f, g_u):
        np.testing.assert_allclose(a, b, **tol)


def test_the_pair_is_one_graph_node():
    model = _pair(nn.ReLU, np.float32)
    out = model(ng.randn(4, 7, requires_grad=True))
    names = []
    node = out.grad_fn
    while node is not None:
        names.append(type(node).__name__)
        nxt = [e for e in node.next_edges if e is not None and not isinstance(e[0], ng.Tensor)]
        node = nxt[0][0] if nxt else None
    assert len(names) == 3 and names[0] == "Linear"  # fused, fused, then the last Linear


def test_hooks_keep_the_modules_own_path():
    model = _pair(nn.ReLU, np.float64)
    seen = []
    model[0].register_forward_hook(lambda m, a, out: seen.append(out.detach().numpy().copy()))
    x = np.random.default_rng(2).standard_normal((3, 7))
    out = model(ng.tensor(x))
    lin0 = x @ model[0].weight.detach().numpy().T + model[0].bias.detach().numpy()
    assert len(seen) == 1
    np.testing.assert_allclose(seen[0], lin0, rtol=1e-12)   # the Linear's own, pre-activation output
    np.testing.assert_array_equal(out.detach().numpy(), _one_by_one(model, ng.tensor(x)).detach().numpy())
    seen.clear()
    h = model[1].register_forward_pre_hook(lambda m, a: (a[0] * 0,))
    np.testing.assert_array_equal(model(ng.tensor(x)).detach().numpy(),
                                  _one_by_one(model, ng.tensor(x)).detach().numpy())
    h.remove()


def test_other_neighbours_and_subclasses_are_not_fused():
    class MyLinear(nn.Linear):
        def forward(self, x):
            return super().forward(x) * 2

    ng.manual_seed(0)
    model = nn.Sequential(MyLinear(4, 4), nn.ReLU(), nn.Linear(4, 4), nn.ReLU6(), nn.Linear(4, 4))
    x = ng.randn(2, 4)
    np.testing.assert_array_equal(model(x).detach().numpy(), _one_by_one(model, x).detach().numpy())
