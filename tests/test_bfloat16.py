"""bfloat16 as a storage dtype (issue 16, CPU part).

* The conversion kernels (``numbagrad/kernels/cpu/convert.py``) equal ``ml_dtypes``' casts
  bit for bit: all 2^16 bfloat16 patterns to float32, and float32 -> bfloat16 over a large
  random sample of bit patterns plus every class that rounds differently (ties to even and
  odd at every exponent, subnormals, overflow into inf, infs, NaNs); serial == parallel
  twins; torch's ``.to(torch.bfloat16)`` agrees except for NaN payloads (torch's vectorised
  cast writes 0xffff for every NaN).
* float32 <-> float16 kernels equal NumPy's casts bit for bit (NumPy's float32 -> float16 is
  round-to-nearest-even: equal to torch's), serial == parallel.
* Ops on bfloat16 tensors compute in float32 and round back (``Function.apply``): ``relu``,
  ``add``, ``matmul``, ``sum``, ``softmax`` and ``layer_norm`` equal torch's CPU bfloat16 ops
  to 1 bfloat16 ulp, and the gradients of a small MLP are within a few bfloat16 ulps; bfloat16
  meeting float32 gives float32. Pooling, convolutions, ``mean``/``sum``/``var``/``std``/
  ``logsumexp``, softmax/log_softmax, ``layer_norm``, ``gelu``, ``embedding`` and attention
  give torch's dtype, values and gradients to bfloat16 rounding; dropout keeps bfloat16 and
  draws the float32 mask. Nodes keep bfloat16 arrays for backward (half the bytes) and their
  version checks see in-place writes.
* The dtype's spellings, ``finfo``, factories, ``requires_grad``, ``state_dict``.
"""
import warnings

import ml_dtypes
import numpy as np
import pytest

import numbagrad as ng
from numbagrad import nn
from numbagrad.kernels.cpu import convert as C

try:
    import torch
except ImportError:  # torch is an optional oracle
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch not installed")
BF16 = np.dtype(ml_dtypes.bfloat16)


def _f32_bit_sample(n=1 << 22, seed=0):
    """float32 bit patterns: ``n`` random ones, and the ones that round differently."""
    r = np.random.default_rng(seed)
    rand = r.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)
    hi = np.arange(1 << 16, dtype=np.uint32) << np.uint32(16)      # every bfloat16 value, exactly
    ties = hi | np.uint32(0x8000)                                 # halfway: to even
    near = np.concatenate([hi | np.uint32(0x7FFF), hi | np.uint32(0x8001), hi | np.uint32(1),
                           hi | np.uint32(0xFFFF)])
    sub = np.arange(0, 1 << 18, dtype=np.uint32)                  # subnormals and tiny normals
    top = np.arange(0x7F7F0000, 0x7F800400, dtype=np.uint32)      # overflow into inf, inf, NaNs
    nan = np.array([0x7FC00000, 0x7F800001, 0x7FBFFFFF, 0x7FFFFFFF, 0x7FA00000], dtype=np.uint32)
    u = np.concatenate([rand, hi, ties, near, sub, top, nan])
    return np.concatenate([u, u | np.uint32(0x80000000)])


def _ml_bf16_bits(u32):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # NaN casts
        return u32.view(np.float32).astype(BF16).view(np.uint16)


def _ulps(a, b):
    """bfloat16 ulps between two bfloat16 arrays (sign-magnitude bits to a monotone line)."""
    def line(x):
        u = np.asarray(x, BF16).view(np.uint16).astype(np.int64)
        return np.where(u & 0x8000, -(u & 0x7FFF), u)
    return np.abs(line(a) - line(b))


# ---- conversion kernels ------------------------------------------------------------------------
def test_bf16_to_f32_all_patterns():
    src = np.arange(1 << 16, dtype=np.uint16)
    want = src.view(BF16).astype(np.float32).view(np.uint32)
    for kern in (C._bf16_to_f32_cpu.serial, C._bf16_to_f32_cpu.parallel):
        out = np.empty(src.size, np.uint32)
        kern(src, out)
        np.testing.assert_array_equal(out, want)
    np.testing.assert_array_equal(C.from_bf16(src.view(BF16)).view(np.uint32), want)


def _check_twins(kernel, u, want, convert):
    """Both twins of ``kernel`` and the public ``convert`` give the uint16 patterns ``want``
    for the float32 bit patterns ``u``."""
    for kern in (kernel.serial, kernel.parallel):
        out = np.empty(u.size, np.uint16)
        kern(u, out)
        bad = np.flatnonzero(out != want)
        assert bad.size == 0, [(hex(u[i]), hex(out[i]), hex(want[i])) for i in bad[:5]]
    np.testing.assert_array_equal(convert(u.view(np.float32)).view(np.uint16), want)


def test_f32_to_bf16_matches_ml_dtypes_bit_for_bit():
    u = _f32_bit_sample()
    _check_twins(C._f32_to_bf16_cpu, u, _ml_bf16_bits(u), C.to_bf16)


def test_f32_to_bf16_rounding_cases():
    f = np.array([1 + 2**-8, 1 + 3 * 2**-8, 1 + 2**-8 + 2**-20, 3.3895313892515355e38, 3.4e38, np.inf,
                  -np.inf, np.nan, 2**-133, 2**-134, -0.0], np.float32)
    got = C.to_bf16(f)
    assert got.view(np.uint16).tolist() == [0x3F80, 0x3F82, 0x3F81, 0x7F7F, 0x7F80, 0x7F80, 0xFF80, 0x7FC0,
                                            0x0001, 0x0000, 0x8000]


@needs_torch
def test_f32_to_bf16_matches_torch():
    u = _f32_bit_sample(1 << 20, seed=1)
    x = u.view(np.float32)
    ours = C.to_bf16(x).view(np.uint16)
    theirs = torch.from_numpy(x.copy()).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
    nan = np.isnan(x)
    np.testing.assert_array_equal(ours[~nan], theirs[~nan])
    assert np.isnan(ours[nan].view(BF16).astype(np.float32)).all()  # torch: 0xffff for every NaN


def _f16_bit_sample(n=1 << 22, seed=3):
    """float32 bit patterns around every float16 rounding boundary, plus random ones."""
    rand = np.random.default_rng(seed).integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)
    hi = np.arange(1 << 19, dtype=np.uint32) << np.uint32(13)  # float32s with float16's precision
    near = [hi | np.uint32(v) for v in (0, 1, 0x7FF, 0x800, 0xFFF, 0x1000, 0x1001, 0x1FFF)]
    small = np.arange(0, 1 << 20, dtype=np.uint32)
    sub = np.arange(0x33000000 - 64, 0x38800000 + 64, 97, dtype=np.uint32)  # float16 subnormal range
    u = np.concatenate([rand, *near, small, sub])
    return np.concatenate([u, u | np.uint32(0x80000000)])


def test_f32_to_f16_matches_numpy_bit_for_bit():
    u = _f16_bit_sample()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = u.view(np.float32).astype(np.float16).view(np.uint16)
    _check_twins(C._f32_to_f16_cpu, u, want, C.to_f16)


def test_f16_to_f32_all_patterns():
    src = np.arange(1 << 16, dtype=np.uint16)
    want = src.view(np.float16).astype(np.float32).view(np.uint32)
    for kern in (C._f16_to_f32_cpu.serial, C._f16_to_f32_cpu.parallel):
        out = np.empty(src.size, np.uint32)
        kern(src, C.F16_TO_F32, out)
        np.testing.assert_array_equal(out, want)
    np.testing.assert_array_equal(C.from_f16(src.view(np.float16)).view(np.uint32), want)


@needs_torch
def test_numpy_float16_cast_is_round_to_nearest_even():
    u = _f32_bit_sample(1 << 20, seed=2)
    x = u.view(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ours = x.astype(np.float16)
    theirs = torch.from_numpy(x.copy()).half().numpy()
    nan = np.isnan(x)
    np.testing.assert_array_equal(ours[~nan].view(np.uint16), theirs[~nan].view(np.uint16))
    assert np.isnan(ours[nan]).all()


# ---- casts -------------------------------------------------------------------------------------
def test_cast_paths():
    r = np.random.default_rng(0)
    x = r.standard_normal((3, 4)).astype(np.float32)
    want = x.astype(BF16)
    for t in (ng.tensor(x).bfloat16(), ng.tensor(x).to(ng.bfloat16), ng.tensor(x).to("bfloat16"),
              ng.tensor(x).type(ng.bfloat16), ng.tensor(x.astype(np.float64)).bfloat16(),
              ng.tensor(x.astype(np.float16)).bfloat16(), ng.tensor(x, dtype=ng.bfloat16)):
        assert t.dtype == ng.bfloat16
        if t.numpy().view(np.uint16).tolist() != want.view(np.uint16).tolist():
            # float64/float16 sources are rounded once more through float32 (as torch does)
            np.testing.assert_array_equal(t.numpy().astype(np.float32), want.astype(np.float32))
    b = ng.tensor(x).bfloat16()
    np.testing.assert_array_equal(b.float().numpy(), want.astype(np.float32))
    assert b.double().dtype == ng.float64 and b.half().dtype == ng.float16
    np.testing.assert_array_equal(b.half().numpy(), want.astype(np.float32).astype(np.float16))
    # shapes: 0-d stays 0-d, strided sources are fine
    assert ng.tensor(1.5).bfloat16().shape == () and ng.tensor(1.5).bfloat16().item() == 1.5
    np.testing.assert_array_equal(ng.tensor(x).T.bfloat16().numpy().view(np.uint16), want.T.view(np.uint16))
    # integers round through float32
    assert ng.tensor([1, 257, 3]).bfloat16().tolist() == [1.0, 256.0, 3.0]


def test_cast_gradients_are_cast_back():
    x = ng.tensor([1.0, 2.0, 3.0], requires_grad=True)
    (x.bfloat16() * 3).float().sum().backward()
    assert x.grad.dtype == ng.float32 and x.grad.tolist() == [3.0, 3.0, 3.0]
    b = ng.tensor([1.0, 2.0], dtype=ng.bfloat16, requires_grad=True)
    (b.float() * 1.1).sum().backward()
    assert b.grad.dtype == ng.bfloat16
    assert b.grad.numpy().view(np.uint16).tolist() == [np.float32(1.1).astype(BF16).view(np.uint16)] * 2


# ---- ops on bfloat16 tensors ------------------------------------------------------------------
def _pair(shape, seed):
    a = np.random.default_rng(seed).standard_normal(shape).astype(np.float32).astype(BF16)
    return ng.tensor(a), a


def _check_vs_torch(ng_out, t_out, ulps=1):
    assert ng_out.dtype == ng.bfloat16
    theirs = t_out.detach().float().numpy().astype(BF16)
    d = _ulps(ng_out.detach().numpy(), theirs)
    assert d.max() <= ulps, (d.max(), ng_out, t_out)


@needs_torch
@pytest.mark.parametrize("op", ["relu", "add", "matmul", "sum", "softmax", "layer_norm"])
def test_ops_match_torch(op):
    x, xa = _pair((16, 33), 1)
    y, ya = _pair((16, 33), 2)
    w, wa = _pair((33, 7), 3)
    tx, ty, tw = (torch.from_numpy(a.astype(np.float32)).bfloat16() for a in (xa, ya, wa))
    fns = {
        "relu": (lambda: x.relu(), lambda: tx.relu()),
        "add": (lambda: x + y, lambda: tx + ty),
        "matmul": (lambda: x @ w, lambda: tx @ tw),
        "sum": (lambda: x.sum(dim=1), lambda: tx.sum(dim=1)),
        "softmax": (lambda: ng.softmax(x, dim=1), lambda: torch.softmax(tx, dim=1)),
        "layer_norm": (lambda: ng.nn.functional.layer_norm(x, (33,)),
                       lambda: torch.nn.functional.layer_norm(tx, (33,))),
    }
    ours, theirs = fns[op]
    exact = op in ("relu", "add")  # one rounding of an exact float32 result
    _check_vs_torch(ours(), theirs(), ulps=0 if exact else 1)


@needs_torch
def test_mlp_gradients_match_torch():
    r = np.random.default_rng(4)
    xs = r.standard_normal((8, 6)).astype(np.float32)
    ys = r.integers(0, 3, 8)
    net = nn.Sequential(nn.Linear(6, 10), nn.ReLU(), nn.Linear(10, 3)).to(ng.bfloat16)
    tnet = torch.nn.Sequential(torch.nn.Linear(6, 10), torch.nn.ReLU(), torch.nn.Linear(10, 3)).bfloat16()
    with torch.no_grad():
        for p, tp in zip(net.parameters(), tnet.parameters()):
            tp.copy_(torch.from_numpy(p.detach().float().numpy()))
    out = net(ng.tensor(xs).bfloat16())
    loss = ng.nn.functional.cross_entropy(out, ng.tensor(ys))
    loss.backward()
    tout = tnet(torch.from_numpy(xs).bfloat16())
    tloss = torch.nn.functional.cross_entropy(tout, torch.from_numpy(ys))
    tloss.backward()
    assert out.dtype == ng.bfloat16 and loss.dtype == ng.bfloat16
    _check_vs_torch(out, tout)
    assert abs(loss.item() - tloss.item()) <= 2 * 2**-8 * abs(tloss.item())
    for p, tp in zip(net.parameters(), tnet.parameters()):
        assert p.grad.dtype == ng.bfloat16
        g, tg = p.grad.float().numpy(), tp.grad.float().numpy()
        # torch rounds other intermediates to bfloat16: a few bf16 ulps of the largest entry
        np.testing.assert_allclose(g, tg, rtol=0, atol=4 * 2**-8 * np.abs(tg).max())


def test_mixed_bf16_float32_promotes_to_float32():
    b = ng.tensor([1.0, 2.0, 3.0], dtype=ng.bfloat16, requires_grad=True)
    f = ng.tensor([0.1, 0.2, 0.3], requires_grad=True)
    y = b + f
    assert y.dtype == ng.float32
    np.testing.assert_array_equal(y.detach().numpy(), np.array([1, 2, 3], np.float32) + f.detach().numpy())
    (y * f).sum().backward()
    assert b.grad.dtype == ng.bfloat16 and f.grad.dtype == ng.float32
    np.testing.assert_array_equal(b.grad.numpy(), f.detach().numpy().astype(BF16))
    assert (b * 2.0).dtype == ng.bfloat16 and (b + ng.tensor([1, 2, 3])).dtype == ng.bfloat16
    assert ng.promote_types(ng.bfloat16, ng.float16) == ng.float32
    assert ng.promote_types(ng.bfloat16, ng.float64) == ng.float64
    assert ng.promote_types(ng.bfloat16, ng.int32) == ng.bfloat16


def test_views_stay_views():
    b = ng.zeros(2, 3, dtype=ng.bfloat16)
    v = b.view(6)
    assert v.dtype == ng.bfloat16 and np.shares_memory(v.numpy(), b.numpy())
    v[1] = 2.5
    assert b[0, 1].item() == 2.5


# ---- spellings and metadata -------------------------------------------------------------------
def test_spellings():
    assert ng.bfloat16 is np.dtype(ml_dtypes.bfloat16)
    assert isinstance(ng.bfloat16, ng.dtype)
    assert ng.bfloat16.kind == "V"  # NOTE: why numbagrad asks _dtype.is_float, not kind == "f"
    for spelling in (ng.bfloat16, "bfloat16", ml_dtypes.bfloat16):
        for make in (lambda d: ng.zeros(2, dtype=d), lambda d: ng.ones(2, dtype=d),
                     lambda d: ng.empty(2, dtype=d), lambda d: ng.full((2,), 1.3, dtype=d),
                     lambda d: ng.tensor([1.0, 2.0], dtype=d), lambda d: ng.randn(2).to(d)):
            assert make(spelling).dtype == ng.bfloat16
    t = ng.ones(2, dtype=ng.bfloat16)
    assert t.is_floating_point() and ng.is_floating_point(t) and t.element_size() == 2
    assert t.requires_grad_().requires_grad
    assert "dtype=bfloat16" in repr(t)
    fi = ng.finfo(ng.bfloat16)
    assert fi.eps == 2.0**-7 and fi.bits == 16 and float(fi.max) == 3.3895313892515355e38
    assert ng.finfo(ng.float32).eps == np.finfo(np.float32).eps


def test_state_dict_carries_bfloat16():
    net = nn.Linear(4, 3).bfloat16()
    sd = net.state_dict()
    assert all(v.dtype == ng.bfloat16 for v in sd.values())
    other = nn.Linear(4, 3).to(ng.bfloat16)
    other.load_state_dict(sd)
    for a, b in zip(net.parameters(), other.parameters()):
        assert a.dtype == b.dtype == ng.bfloat16
        np.testing.assert_array_equal(a.detach().numpy().view(np.uint16), b.detach().numpy().view(np.uint16))
    f32 = nn.Linear(4, 3)
    f32.load_state_dict(sd)  # cast into the module's dtype, as torch's copy_
    assert f32.weight.dtype == ng.float32
    np.testing.assert_array_equal(f32.weight.detach().numpy(), net.weight.detach().float().numpy())


def test_non_differentiable_and_integer_outputs():
    x = ng.tensor([[1.0, 3.0], [4.0, 2.0]], dtype=ng.bfloat16, requires_grad=True)
    v, i = x.max(dim=1)
    assert v.dtype == ng.bfloat16 and i.dtype == ng.int64 and i.tolist() == [1, 0]
    v.sum().backward()
    assert x.grad.dtype == ng.bfloat16 and x.grad.float().tolist() == [[0.0, 1.0], [1.0, 0.0]]


# ---- more ops on bfloat16 tensors: forward and gradient against torch's CPU bfloat16 ops ------------
def _bf_inputs(shapes, seed):
    """bfloat16 leaves (numbagrad, torch) holding the same values."""
    r = np.random.default_rng(seed)
    out = []
    for s in shapes:
        a = r.standard_normal(s).astype(np.float32).astype(BF16).astype(np.float32)
        out.append((ng.tensor(a).bfloat16().requires_grad_(), torch.from_numpy(a).bfloat16().requires_grad_()))
    return out


def _more_cases():
    F, TF = ng.nn.functional, torch.nn.functional
    idx = np.random.default_rng(0).integers(0, 7, (3, 5))
    return {  # name: (input shapes, numbagrad fn, torch fn)
        "max_pool1d": ([(2, 3, 11)], lambda x: F.max_pool1d(x, 3, 2), lambda x: TF.max_pool1d(x, 3, 2)),
        "max_pool2d": ([(2, 3, 8, 9)], lambda x: F.max_pool2d(x, 2, padding=1),
                       lambda x: TF.max_pool2d(x, 2, padding=1)),
        "avg_pool1d": ([(2, 3, 11)], lambda x: F.avg_pool1d(x, 3, 2, 1), lambda x: TF.avg_pool1d(x, 3, 2, 1)),
        "avg_pool2d": ([(2, 3, 8, 9)], lambda x: F.avg_pool2d(x, 3, 2, 1), lambda x: TF.avg_pool2d(x, 3, 2, 1)),
        "adaptive_avg_pool2d": ([(2, 3, 8, 9)], lambda x: F.adaptive_avg_pool2d(x, 3),
                                lambda x: TF.adaptive_avg_pool2d(x, 3)),
        "adaptive_max_pool2d": ([(2, 3, 8, 9)], lambda x: F.adaptive_max_pool2d(x, 3),
                                lambda x: TF.adaptive_max_pool2d(x, 3)),
        "conv1d": ([(2, 3, 10), (4, 3, 3), (4,)], lambda x, w, b: F.conv1d(x, w, b, padding=1),
                   lambda x, w, b: TF.conv1d(x, w, b, padding=1)),
        "conv2d": ([(4, 3, 8, 8), (5, 3, 3, 3), (5,)], lambda x, w, b: F.conv2d(x, w, b, stride=2, padding=1),
                   lambda x, w, b: TF.conv2d(x, w, b, stride=2, padding=1)),
        "conv_transpose2d": ([(2, 3, 5, 5), (3, 4, 3, 3)], lambda x, w: F.conv_transpose2d(x, w, stride=2),
                             lambda x, w: TF.conv_transpose2d(x, w, stride=2)),
        "mean": ([(6, 35)], lambda x: x.mean(), lambda x: x.mean()),
        "mean_dim": ([(6, 35)], lambda x: x.mean(1), lambda x: x.mean(1)),
        "sum_dim": ([(6, 35)], lambda x: x.sum(0), lambda x: x.sum(0)),
        "var": ([(6, 35)], lambda x: x.var(1), lambda x: x.var(1)),
        "std": ([(6, 35)], lambda x: x.std(), lambda x: x.std()),
        "logsumexp": ([(6, 35)], lambda x: ng.logsumexp(x, 1), lambda x: torch.logsumexp(x, 1)),
        "log_softmax": ([(6, 35)], lambda x: F.log_softmax(x, 1), lambda x: TF.log_softmax(x, 1)),
        "softmax": ([(6, 35)], lambda x: F.softmax(x, 0), lambda x: TF.softmax(x, 0)),
        "layer_norm": ([(6, 35), (35,), (35,)], lambda x, w, b: F.layer_norm(x, (35,), w, b),
                       lambda x, w, b: TF.layer_norm(x, (35,), w, b)),
        "gelu": ([(6, 35)], F.gelu, TF.gelu),
        "gelu_tanh": ([(6, 35)], lambda x: F.gelu(x, approximate="tanh"), lambda x: TF.gelu(x, approximate="tanh")),
        "embedding": ([(7, 6)], lambda w: F.embedding(ng.tensor(idx), w),
                      lambda w: TF.embedding(torch.from_numpy(idx), w)),
        "sdpa_causal": ([(2, 3, 6, 8)] * 3, lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
                        lambda q, k, v: TF.scaled_dot_product_attention(q, k, v, is_causal=True)),
        "sdpa_mask": ([(2, 3, 6, 8)] * 3 + [(6, 6)],
                      lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m),
                      lambda q, k, v, m: TF.scaled_dot_product_attention(q, k, v, attn_mask=m)),
    }


@needs_torch
@pytest.mark.parametrize("op", ["max_pool1d", "max_pool2d", "avg_pool1d", "avg_pool2d", "adaptive_avg_pool2d",
                                "adaptive_max_pool2d", "conv1d", "conv2d", "conv_transpose2d", "mean", "mean_dim",
                                "sum_dim", "var", "std", "logsumexp", "log_softmax", "softmax", "layer_norm",
                                "gelu", "gelu_tanh", "embedding", "sdpa_causal", "sdpa_mask"])
def test_more_ops_and_gradients_match_torch(op):
    shapes, f, tf = _more_cases()[op]
    pairs = _bf_inputs(shapes, seed=len(op))
    out = f(*(p[0] for p in pairs))
    tout = tf(*(p[1] for p in pairs))
    assert out.dtype == ng.bfloat16 and tout.dtype == torch.bfloat16
    assert tuple(out.shape) == tuple(tout.shape)
    a, b = out.detach().float().numpy(), tout.detach().float().numpy()
    # one rounding of a float32 result (torch's accumulation order differs): an ulp of the
    # element, or of the scale where a sum cancels
    np.testing.assert_allclose(a, b, rtol=2.0 ** -7, atol=2.0 ** -8 * np.abs(b).max())
    up = np.random.default_rng(1).standard_normal(b.shape).astype(np.float32)
    (out.float() * ng.tensor(up)).sum().backward()
    (tout.float() * torch.from_numpy(up)).sum().backward()
    for (x, tx) in pairs:
        assert x.grad.dtype == ng.bfloat16 and tx.grad.dtype == torch.bfloat16
        g, tg = x.grad.float().numpy(), tx.grad.float().numpy()
        # torch rounds intermediates of some backward formulas to bfloat16 as well
        np.testing.assert_allclose(g, tg, rtol=2.0 ** -7, atol=4 * 2.0 ** -8 * np.abs(tg).max())


def test_dropout_keeps_bfloat16_and_the_float32_mask():
    x = ng.randn(64, 33).bfloat16().requires_grad_()
    ng.manual_seed(5)
    y = ng.nn.functional.dropout(x, 0.3)
    ng.manual_seed(5)
    ref = ng.nn.functional.dropout(x.detach().float(), 0.3)  # the same draw on the widened input
    assert y.dtype == ng.bfloat16
    kept = ref.numpy() != 0
    assert 0.6 < kept.mean() < 0.8
    np.testing.assert_array_equal(y.detach().numpy().view(np.uint16), ref.numpy().astype(BF16).view(np.uint16))
    y.float().sum().backward()
    assert x.grad.dtype == ng.bfloat16
    np.testing.assert_array_equal(x.grad.float().numpy(), np.where(kept, np.float32(1 / 0.7), 0).astype(BF16)
                                  .astype(np.float32))
    with ng.no_grad():  # in place on a bfloat16 tensor
        z = x.detach().clone()
        ng.manual_seed(5)
        ng.nn.functional.dropout(z, 0.3, inplace=True)
    assert z.dtype == ng.bfloat16
    np.testing.assert_array_equal(z.numpy().view(np.uint16), y.detach().numpy().view(np.uint16))


def test_nodes_save_bfloat16_and_check_versions():
    """A node on bfloat16 tensors keeps the bfloat16 arrays (half the float32 copies' bytes),
    and an in-place write to a saved input is caught."""
    w = ng.randn(64, 64).requires_grad_()
    x = ng.randn(128, 64).requires_grad_()
    sizes = {}
    for dt in (ng.float32, ng.bfloat16):
        xi, wi = (x * 1.0).to(dt), (w * 1.0).to(dt)  # non-leaf operands: both count as activations
        base = ng.memory_stats()["saved_bytes"]
        y = ng.matmul(xi, wi)
        sizes[dt] = ng.memory_stats()["saved_bytes"] - base
        y.float().sum().backward()
    assert sizes[ng.float32] == (128 * 64 + 64 * 64) * 4
    assert sizes[ng.bfloat16] == (128 * 64 + 64 * 64) * 2
    a = ng.randn(8, 8).bfloat16().requires_grad_()
    b = a * 1.0
    y = b.sin()  # saves its input b
    with ng.no_grad():
        b.add_(1.0)
    with pytest.raises(RuntimeError, match="modified by an in-place operation"):
        y.float().sum().backward()


@needs_torch
@pytest.mark.parametrize("need_weights", [False, True])
def test_bfloat16_multihead_attention_matches_torch(need_weights):
    ng.manual_seed(0)
    m = nn.MultiheadAttention(16, 4, batch_first=True)
    tm = torch.nn.MultiheadAttention(16, 4, batch_first=True)
    tm.load_state_dict({k: torch.from_numpy(v.numpy().copy()) for k, v in m.state_dict().items()})
    m, tm = m.bfloat16(), tm.bfloat16()
    (x, tx), = _bf_inputs([(3, 7, 16)], seed=3)
    mask = np.triu(np.full((7, 7), -np.inf, np.float32), 1)
    y, w = m(x, x, x, attn_mask=ng.tensor(mask).bfloat16(), need_weights=need_weights)
    ty, tw = tm(tx, tx, tx, attn_mask=torch.from_numpy(mask).bfloat16(), need_weights=need_weights)
    assert y.dtype == ng.bfloat16 and (w is None or w.dtype == ng.bfloat16)
    b = ty.detach().float().numpy()
    np.testing.assert_allclose(y.detach().float().numpy(), b, rtol=2.0 ** -7, atol=2.0 ** -7 * np.abs(b).max())
    y.float().sum().backward()
    ty.float().sum().backward()
    for a, ta in [(x, tx)] + list(zip(m.parameters(), tm.parameters())):
        assert a.grad.dtype == ng.bfloat16
        tg = ta.grad.float().numpy()
        np.testing.assert_allclose(a.grad.float().numpy(), tg, rtol=2.0 ** -7, atol=4 * 2.0 ** -8 * np.abs(tg).max())
