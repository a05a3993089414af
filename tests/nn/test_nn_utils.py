"""``numbagrad.nn.utils``: gradient clipping against torch and a per-tensor NumPy reference
(the fused multi-tensor kernels, the arena span, the NumPy fallback), parameter/vector
conversion, and gradient accumulation over micro-batches with every optimizer."""
import math

import numpy as np
import pytest

import numbagrad as ng
from numbagrad import nn, optim
from numbagrad.kernels.cpu import clip as kclip
from numbagrad.nn.utils import (clip_grad_norm_, clip_grad_value_, clip_grads_with_norm_, get_total_norm,
                                parameters_to_vector, vector_to_parameters)
from numbagrad.tensor import Tensor

SHAPES = [(5, 3), (7,), (2, 3, 2), (), (4, 1)]
NORMS = [2.0, 1.0, 3.0, 0.5, math.inf, -math.inf, 0.0]


def _grads(shapes, dtype, seed=0, scale=3.0):
    r = np.random.default_rng(seed)
    return [np.asarray(r.standard_normal(s) * scale, dtype=dtype) for s in shapes]


def _ng_params(grads, skip=()):
    ps = []
    for i, g in enumerate(grads):
        p = nn.Parameter(ng.tensor(np.zeros_like(g)))
        if i not in skip:
            p.grad = Tensor._from_array(g.copy())
        ps.append(p)
    return ps


def _ref_norm(arrays, p):
    """PyTorch's definition: the p-norm of the per-tensor p-norms, in float64 NumPy."""
    def vn(x):
        x = np.abs(np.asarray(x, np.float64).reshape(-1))
        if p == 0:
            return float(np.count_nonzero(x))
        if x.size == 0:
            return math.inf if p == -math.inf else 0.0
        if p == math.inf:
            return x.max()
        if p == -math.inf:
            return x.min()
        return float(np.sum(x ** p) ** (1 / p))
    return vn([vn(a) for a in arrays])


def _ref_clip(arrays, max_norm, p):
    dt = arrays[0].dtype.type
    total = dt(_ref_norm(arrays, p))
    c = min(dt(max_norm) / (total + dt(1e-6)), dt(1))
    return total, [a * dt(c) for a in arrays]


# ---- against torch ------------------------------------------------------------------------------
@pytest.mark.parametrize("norm_type", NORMS + ["inf"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("max_norm", [1.0, 1e4])
def test_clip_grad_norm_matches_torch(norm_type, dtype, max_norm):
    torch = pytest.importorskip("torch")
    gs = _grads(SHAPES, dtype)
    ps = _ng_params(gs)
    ts = [torch.nn.Parameter(torch.zeros(g.shape, dtype=torch.float64 if dtype == np.float64 else torch.float32))
          for g in gs]
    for t, g in zip(ts, gs):
        t.grad = torch.tensor(g.copy())
    got = clip_grad_norm_(ps, max_norm, norm_type)
    ref = torch.nn.utils.clip_grad_norm_(ts, max_norm, norm_type)
    assert got.shape == () and got.dtype == np.dtype(dtype)
    tol = dict(rtol=2e-6, atol=0) if dtype == np.float32 else dict(rtol=1e-12, atol=0)
    np.testing.assert_allclose(got.item(), ref.item(), **tol)
    for p, t in zip(ps, ts):
        assert p.grad.dtype == np.dtype(dtype)
        np.testing.assert_allclose(p.grad.numpy(), t.grad.numpy(), rtol=tol["rtol"] * 2, atol=1e-30)


def test_clip_grad_norm_skips_params_without_grad_and_takes_a_single_tensor():
    torch = pytest.importorskip("torch")
    gs = _grads(SHAPES, np.float32, seed=1)
    ps = _ng_params(gs, skip=(1, 3))
    ts = [torch.nn.Parameter(torch.zeros(g.shape)) for g in gs]
    for i, (t, g) in enumerate(zip(ts, gs)):
        if i not in (1, 3):
            t.grad = torch.tensor(g.copy())
    np.testing.assert_allclose(clip_grad_norm_(ps, 0.5).item(), torch.nn.utils.clip_grad_norm_(ts, 0.5).item(),
                               rtol=2e-6)
    for p, t in zip(ps, ts):
        assert (p.grad is None) == (t.grad is None)
        if p.grad is not None:
            np.testing.assert_allclose(p.grad.numpy(), t.grad.numpy(), rtol=1e-6)
    # a single tensor
    p = _ng_params([gs[0]])[0]
    t = torch.nn.Parameter(torch.zeros(gs[0].shape))
    t.grad = torch.tensor(gs[0].copy())
    np.testing.assert_allclose(clip_grad_norm_(p, 1.0, 3).item(), torch.nn.utils.clip_grad_norm_(t, 1.0, 3).item(),
                               rtol=2e-6)
    np.testing.assert_allclose(p.grad.numpy(), t.grad.numpy(), rtol=1e-6)
    # no gradient at all: a zero norm, nothing touched
    q = nn.Parameter(ng.tensor(np.ones(3, np.float32)))
    z = clip_grad_norm_([q], 1.0)
    assert z.item() == 0.0 and q.grad is None
    # a generator is consumed once and still clipped
    ps = _ng_params(gs)
    clip_grad_norm_((p for p in ps), 1.0)
    np.testing.assert_allclose(_ref_norm([p.grad.numpy() for p in ps], 2.0), 1.0, rtol=1e-5)


def test_clip_grad_norm_nonfinite():
    torch = pytest.importorskip("torch")
    for bad in (np.nan, np.inf):
        gs = _grads(SHAPES, np.float32, seed=2)
        gs[2][0, 1, 1] = bad
        ps = _ng_params(gs)
        with pytest.raises(RuntimeError, match=r"total norm of order 2.0 .* non-finite"):
            clip_grad_norm_(ps, 1.0, error_if_nonfinite=True)
        np.testing.assert_array_equal(ps[0].grad.numpy(), gs[0])  # raised before any scaling
        ts = [torch.nn.Parameter(torch.zeros(g.shape)) for g in gs]
        for t, g in zip(ts, gs):
            t.grad = torch.tensor(g.copy())
        for nt in (2.0, math.inf, 1.0):
            a = clip_grad_norm_(ps, 1.0, nt).item()
            b = torch.nn.utils.clip_grad_norm_(ts, 1.0, nt).item()
            assert (math.isnan(a) and math.isnan(b)) or a == b
            for p, t in zip(ps, ts):
                np.testing.assert_array_equal(np.isnan(p.grad.numpy()), np.isnan(t.grad.numpy()))


def test_mixed_dtypes_and_value_clipping_match_torch():
    torch = pytest.importorskip("torch")
    gs = _grads(SHAPES[:2], np.float32, seed=3) + _grads(SHAPES[2:], np.float64, seed=4)
    ps = _ng_params(gs)
    ts = [torch.nn.Parameter(torch.tensor(np.zeros_like(g))) for g in gs]
    for t, g in zip(ts, gs):
        t.grad = torch.tensor(g.copy())
    a = clip_grad_norm_(ps, 2.0)
    b = torch.nn.utils.clip_grad_norm_(ts, 2.0)
    assert a.dtype == np.float64
    np.testing.assert_allclose(a.item(), b.item(), rtol=1e-6)
    for p, t in zip(ps, ts):
        np.testing.assert_allclose(p.grad.numpy(), t.grad.numpy(), rtol=2e-6)
    # clip_grad_value_, NaN kept, a negative clip value gives the (negative) bound everywhere as torch
    for v in (0.7, -0.3):
        gs = _grads(SHAPES, np.float32, seed=5)
        gs[0][0, 0] = np.nan
        ps = _ng_params(gs, skip=(4,))
        ts = [torch.nn.Parameter(torch.zeros(g.shape)) for g in gs]
        for i, (t, g) in enumerate(zip(ts, gs)):
            if i != 4:
                t.grad = torch.tensor(g.copy())
        assert clip_grad_value_(ps, v) is None
        torch.nn.utils.clip_grad_value_(ts, v)
        for p, t in zip(ps, ts):
            if p.grad is None:
                assert t.grad is None
            else:
                np.testing.assert_array_equal(p.grad.numpy(), t.grad.numpy())


def test_get_total_norm_and_clip_grads_with_norm_match_torch():
    torch = pytest.importorskip("torch")
    gs = _grads(SHAPES, np.float32, seed=6)
    for nt in (2.0, 1.0, math.inf):
        a = get_total_norm([ng.tensor(g) for g in gs], nt)
        b = torch.nn.utils.get_total_norm([torch.tensor(g) for g in gs], nt)
        np.testing.assert_allclose(a.item(), b.item(), rtol=2e-6)
    assert get_total_norm([]).item() == 0.0
    ps = _ng_params(gs)
    ts = [torch.nn.Parameter(torch.zeros(g.shape)) for g in gs]
    for t, g in zip(ts, gs):
        t.grad = torch.tensor(g.copy())
    clip_grads_with_norm_(ps, 1.5, get_total_norm([p.grad for p in ps]))
    torch.nn.utils.clip_grads_with_norm_(ts, 1.5, torch.nn.utils.get_total_norm([t.grad for t in ts]))
    for p, t in zip(ps, ts):
        np.testing.assert_allclose(p.grad.numpy(), t.grad.numpy(), rtol=1e-6)


# ---- the fused kernels against a per-tensor NumPy reference ------------------------------------
@pytest.mark.parametrize("norm_type", NORMS)
def test_fused_matches_numpy_reference_many_sizes(norm_type):
    r = np.random.default_rng(7)
    sizes = [0, 1, 3, 8, 9, 17, 1000, 40000, 0, 33000, 5]     # 74K elements: the parallel twin runs
    shapes = [(s,) if s % 2 else (s // 2 if s else 0, 2) if s else (0,) for s in sizes]
    gs = [(r.standard_normal(sh) * 2).astype(np.float32) for sh in shapes]
    assert sum(g.size for g in gs) >= ng.backend.config.PARALLEL_THRESHOLD
    total, clipped = _ref_clip(gs, 0.25, norm_type)
    ps = _ng_params(gs)
    got = clip_grad_norm_(ps, 0.25, norm_type)
    np.testing.assert_allclose(got.item(), total, rtol=2e-6)
    for p, c in zip(ps, clipped):
        np.testing.assert_allclose(p.grad.numpy(), c, rtol=2e-6, atol=1e-30)
    # the serial and parallel twins give the same partials (chunks depend only on the total)
    mode = kclip._norm_mode(float(norm_type))
    if mode != 3:
        ptrs, offs, like = kclip._table(gs)
        parts = [np.empty(kclip._nchunks(int(offs[-1]))) for _ in range(2)]
        kclip._NORM.serial(ptrs, offs, like, mode, float(norm_type), parts[0])
        kclip._NORM.parallel(ptrs, offs, like, mode, float(norm_type), parts[1])
        np.testing.assert_allclose(parts[0], parts[1], rtol=1e-13)


def test_fallback_paths_match_reference():
    """Non-contiguous gradients and CPU float16 go through NumPy, mixed with fused ones."""
    r = np.random.default_rng(8)
    base = r.standard_normal((6, 5)).astype(np.float32)
    gs = [base.T, r.standard_normal(7).astype(np.float32)]
    total, clipped = _ref_clip([g.copy() for g in gs], 0.5, 2.0)
    ps = _ng_params(gs)
    ps[0].grad = Tensor._from_array(base.copy().T)   # a transposed view
    assert not ps[0].grad.array.flags.c_contiguous
    np.testing.assert_allclose(clip_grad_norm_(ps, 0.5).item(), total, rtol=2e-6)
    for p, c in zip(ps, clipped):
        np.testing.assert_allclose(p.grad.numpy(), c, rtol=2e-6)
    h = [r.standard_normal(4).astype(np.float16)]
    ps = _ng_params(h)
    got = clip_grad_norm_(ps, 0.5)
    np.testing.assert_allclose(got.item(), _ref_norm(h, 2.0), rtol=1e-3)
    assert ps[0].grad.dtype == np.float16
    np.testing.assert_allclose(_ref_norm([ps[0].grad.numpy()], 2.0), 0.5, rtol=2e-3)
    ps = _ng_params([base.copy()])
    ps[0].grad = Tensor._from_array(base.copy().T)
    clip_grad_value_(ps, 0.2)
    np.testing.assert_array_equal(ps[0].grad.numpy(), np.clip(base.T, -0.2, 0.2))


def test_arena_gradients_run_as_one_span():
    """Gradients an optimizer step copied into its arena are views into one flat buffer: the
    address table collapses to one span, and the result is unchanged. (A step reads float32
    C-contiguous gradients where they are; a float64 gradient of a float32 parameter is cast
    into its arena slot and ``p.grad`` becomes the slot, where backward then accumulates.)"""
    r = np.random.default_rng(9)
    model = nn.Sequential(nn.Linear(6, 5), nn.Linear(5, 3))
    opt = optim.SGD(model.parameters(), lr=0.0)
    x = ng.tensor(r.standard_normal((4, 6)).astype(np.float32))
    model(x).sum().backward()
    for p in model.parameters():
        p.grad = ng.tensor(p.grad.numpy().astype(np.float64))
    opt.step()
    opt.zero_grad(set_to_none=False)
    model(x).sum().backward()
    gs = [p.grad.array for p in model.parameters()]
    ptrs, offs, _ = kclip._table(gs)
    assert ptrs.size == 1 and offs[-1] == sum(g.size for g in gs)
    assert kclip._table(gs)[0] is ptrs          # cached
    total, clipped = _ref_clip([g.copy() for g in gs], 0.1, 2.0)
    np.testing.assert_allclose(clip_grad_norm_(model.parameters(), 0.1).item(), total, rtol=2e-6)
    for p, c in zip(model.parameters(), clipped):
        np.testing.assert_allclose(p.grad.numpy(), c, rtol=2e-6)
    # a subset of the arena is not one span (a gap), and still right
    sub = [gs[0], gs[2]]
    assert kclip._table(sub)[0].size == 2
    out = np.zeros(1)
    kclip._grad_norm_cpu(sub, 1.0, out)
    np.testing.assert_allclose(out[0], _ref_norm(sub, 1.0), rtol=1e-12)


def test_clip_in_a_training_loop_matches_torch():
    torch = pytest.importorskip("torch")
    r = np.random.default_rng(10)
    w1, b1 = r.standard_normal((5, 4)).astype(np.float32), r.standard_normal(5).astype(np.float32)
    x = r.standard_normal((8, 4)).astype(np.float32)
    m = nn.Linear(4, 5)
    m.load_state_dict({"weight": w1, "bias": b1})
    tm = torch.nn.Linear(4, 5)
    with torch.no_grad():
        tm.weight.copy_(torch.tensor(w1))
        tm.bias.copy_(torch.tensor(b1))
    o, to = optim.Adam(m.parameters(), lr=0.1), torch.optim.Adam(tm.parameters(), lr=0.1)
    for k in range(4):
        o.zero_grad(set_to_none=(k % 2 == 0))
        to.zero_grad(set_to_none=(k % 2 == 0))
        (m(ng.tensor(x)) ** 2).sum().backward()
        (tm(torch.tensor(x)) ** 2).sum().backward()
        a = clip_grad_norm_(m.parameters(), 0.3)
        b = torch.nn.utils.clip_grad_norm_(tm.parameters(), 0.3)
        np.testing.assert_allclose(a.item(), b.item(), rtol=1e-5)
        o.step()
        to.step()
    np.testing.assert_allclose(m.weight.detach().numpy(), tm.weight.detach().numpy(), rtol=1e-5, atol=1e-6)


# ---- parameters <-> vector ----------------------------------------------------------------------
def test_parameters_to_vector_and_back_match_torch():
    torch = pytest.importorskip("torch")
    gs = _grads(SHAPES, np.float64, seed=11)
    ps = [nn.Parameter(ng.tensor(g.copy())) for g in gs]
    ts = [torch.nn.Parameter(torch.tensor(g.copy())) for g in gs]
    v, tv = parameters_to_vector(ps), torch.nn.utils.parameters_to_vector(ts)
    np.testing.assert_array_equal(v.detach().numpy(), tv.detach().numpy())
    c = np.linspace(-1, 1, v.shape[0])
    (v * ng.tensor(c)).sum().backward()
    (tv * torch.tensor(c)).sum().backward()
    for p, t in zip(ps, ts):
        np.testing.assert_array_equal(p.grad.numpy(), t.grad.numpy())
    new = np.arange(v.shape[0], dtype=np.float64)
    nv = ng.tensor(new.copy())
    vector_to_parameters(nv, ps)
    torch.nn.utils.vector_to_parameters(torch.tensor(new.copy()), ts)
    for p, t in zip(ps, ts):
        np.testing.assert_array_equal(p.detach().numpy(), t.detach().numpy())
    nv.array[0] = -7.0                                   # shares memory with the vector, as torch
    assert ps[0].detach().numpy().reshape(-1)[0] == -7.0
    with pytest.raises(TypeError, match="expected Tensor"):
        vector_to_parameters([1.0], ps)
    with pytest.raises(RuntimeError, match="elements"):
        vector_to_parameters(ng.tensor(np.zeros(3)), ps)


# ---- gradient accumulation ------------------------------------------------------------------------
@pytest.mark.parametrize("set_to_none", [True, False])
@pytest.mark.parametrize("opt_name", ["SGD", "Adam", "AdamW"])
def test_gradient_accumulation_equals_full_batch(opt_name, set_to_none):
    """4 micro-batches of loss/4 each, no zero_grad between them, then one step == one step on
    the whole batch; over several steps (the arena path from the second on)."""
    r = np.random.default_rng(12)
    x = r.standard_normal((16, 5))
    y = r.standard_normal((16, 3))

    def make():
        m = nn.Sequential(nn.Linear(5, 4), nn.Tanh(), nn.Linear(4, 3)).double()
        st = {k: np.random.default_rng(13 + i).standard_normal(tuple(v.shape))
              for i, (k, v) in enumerate(m.state_dict().items())}
        m.load_state_dict(st)
        kw = dict(lr=0.05)
        if opt_name == "SGD":
            kw.update(momentum=0.9, weight_decay=0.01)
        else:
            kw.update(weight_decay=0.01)
        return m, getattr(optim, opt_name)(m.parameters(), **kw)

    ma, oa = make()
    mb, ob = make()
    for _ in range(3):
        oa.zero_grad(set_to_none=set_to_none)
        for k in range(4):
            sl = slice(4 * k, 4 * k + 4)
            loss = ((ma(ng.tensor(x[sl])) - ng.tensor(y[sl])) ** 2).mean() / 4
            loss.backward()
        oa.step()
        ob.zero_grad(set_to_none=set_to_none)
        ((mb(ng.tensor(x)) - ng.tensor(y)) ** 2).mean().backward()
        ob.step()
    for pa, pb in zip(ma.parameters(), mb.parameters()):
        np.testing.assert_allclose(pa.detach().numpy(), pb.detach().numpy(), rtol=1e-10, atol=1e-12)
