"""``numbagrad.ops.fused.linear_act`` on bfloat16 (``numbagrad/ops/fused.py``): the fused node is
taken (not the composed ops), computes in float32 and rounds once, so its values and
gradients equal torch's bfloat16 ``act(F.linear(x, w, b))`` to bfloat16 rounding; it saves
bfloat16 arrays only (no more bytes than the composed ops); under CPU bfloat16 autocast
``nn.Linear.forward_act`` and ``nn.Sequential`` fusion take it too."""
import numpy as np
import pytest

import numbagrad as ng
from numbagrad import nn
from numbagrad.ops.fused import ACTIVATIONS, LinearAct, _composed, linear_act

torch = pytest.importorskip("torch")
TF = torch.nn.functional

BF16 = ng.bfloat16
M, K, N = 24, 40, 16


def _data(bias=True, seed=0):
    r = np.random.default_rng(seed)
    x = (r.standard_normal((2, M // 2, K)) * 1.5).astype(np.float32)   # 3-D: batch dims folded
    w = (r.standard_normal((N, K)) / np.sqrt(K)).astype(np.float32)
    b = r.standard_normal(N).astype(np.float32) if bias else None
    g = r.standard_normal((2, M // 2, N)).astype(np.float32)
    return [a if a is None else a.astype(BF16).astype(np.float32) for a in (x, w, b, g)]  # bf16 values


def _torch_act(y, act):
    if act is None:
        return y
    if act == "gelu":
        return TF.gelu(y)
    if act == "gelu_tanh":
        return TF.gelu(y, approximate="tanh")
    return getattr(torch, act)(y) if act in ("tanh", "sigmoid") else getattr(TF, act)(y)


def _run(lib, x, w, b, g, act):
    def t(a):
        return None if a is None else lib.tensor(a).to(lib.bfloat16).requires_grad_()
    xt, wt, bt = t(x), t(w), t(b)
    if lib is torch:
        y = _torch_act(TF.linear(xt, wt, bt), act)
    else:
        y = linear_act(xt, wt, bt, act)
    y.backward(lib.tensor(g).to(lib.bfloat16))
    return y, [a.grad for a in (xt, wt, bt) if a is not None]


def _f32(t):
    return t.detach().float().numpy()


def _close(a, b, what):
    """Within bfloat16 rounding: 2 bfloat16 ulps of the element (2**-7 relative), and of
    the array's scale for elements that are sums with cancellation (GEMM gradients)."""
    a, b = _f32(a), _f32(b)
    np.testing.assert_allclose(a, b, rtol=2.0 ** -7, atol=2.0 ** -7 * np.abs(b).max(), err_msg=what)


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("act", ACTIVATIONS, ids=str)
def test_matches_torch_bfloat16_and_takes_the_fused_node(act, bias):
    x, w, b, g = _data(bias)
    y, grads = _run(ng, x, w, b, g, act)
    yt, grads_t = _run(torch, x, w, b, g, act)
    assert y.dtype == BF16 and all(a.dtype == BF16 for a in grads)
    node = y.grad_fn
    while type(node).__name__ in ("ReshapeBackward", "Reshape", "View"):  # 3-D output: a view node
        node = node.next_edges[0][0]
    assert isinstance(node, LinearAct), type(node)
    _close(y, yt, f"{act} output")
    for a, r, name in zip(grads, grads_t, ("input", "weight", "bias")):
        _close(a, r, f"{act} {name} gradient")


@pytest.mark.parametrize("act", ["gelu", "relu", "silu", None], ids=str)
def test_rounds_once_from_float32(act):
    """The output is the float32 fused result rounded once to nearest even, bit for bit:
    the same float32 computation on the (exactly widened) inputs, rounded by the same RNE
    rule as ``.to(bfloat16)``; not the composed ops' double rounding."""
    x, w, b, g = _data(seed=3)
    args = [ng.tensor(a) for a in (x, w, b)]
    ref32 = linear_act(*args, act)
    y = linear_act(*(a.to(BF16) for a in args), act)
    np.testing.assert_array_equal(y.numpy().view(np.uint16), ref32.to(BF16).numpy().view(np.uint16))


def test_saves_bfloat16_only():
    """The fused node keeps x, w and the bfloat16 pre-activation: the composed ops' bytes
    (linear keeps x and w, GELU its bfloat16 input), half of float32's."""
    x, w, b, _ = _data()
    xs = ng.tensor(x).to(BF16)
    ws = (ng.tensor(w).requires_grad_() * 1.0).to(BF16)   # non-leaf: counted as an activation
    bs = ng.tensor(b).to(BF16).requires_grad_()
    held = {}
    for name, fn in (("fused", linear_act), ("composed", _composed)):
        base = ng.memory_stats()["saved_bytes"]
        y = fn(xs, ws, bs, "gelu")
        held[name] = ng.memory_stats()["saved_bytes"] - base
        del y
    assert held["fused"] == held["composed"] == (x.size + w.size + M * N) * 2, held


def test_autocast_linear_forward_act_takes_the_fused_node():
    """Under CPU bfloat16 autocast ``Linear.forward_act(x, "gelu")`` (float32 parameters and
    input, cast to bfloat16 by autocast) records the fused node, with torch's autocast
    ``gelu(linear(x))`` values to bfloat16 rounding."""
    x, _, _, _ = _data()
    ng.manual_seed(0)
    lin = nn.Linear(K, N)
    tl = torch.nn.Linear(K, N)
    with torch.no_grad():
        tl.weight.copy_(torch.from_numpy(lin.weight.detach().numpy()))
        tl.bias.copy_(torch.from_numpy(lin.bias.detach().numpy()))
    with ng.autocast("cpu", dtype=BF16):
        y = lin.forward_act(ng.tensor(x), "gelu")
    with torch.autocast("cpu", dtype=torch.bfloat16):
        yt = TF.gelu(tl(torch.from_numpy(x)))
    assert y.dtype == BF16 and yt.dtype == torch.bfloat16
    assert isinstance(y.grad_fn.next_edges[0][0], LinearAct)   # Reshape <- LinearAct (3-D input)
    _close(y, yt, "autocast output")
