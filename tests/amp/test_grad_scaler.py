"""``numbagrad.amp.GradScaler`` (``numbagrad/amp/grad_scaler.py``) and its fused unscale kernel
(``numbagrad/kernels/cpu/amp.py``).

* A scripted run of finite and overflowing steps (inf, -inf, NaN, values that overflow only
  once scaled, gradients that are None, float32 and float64 parameters in two groups, so
  three arena buckets) against torch's ``GradScaler("cpu")``: the scale and growth tracker
  after every ``update()`` are torch's exactly (also with factors that are not powers of
  two, which exercise ATen's float64-then-float32 rounding), the unscaled gradients are
  torch's bit for bit (both multiply by the same float32 ``inv_scale``), and a step runs
  exactly when torch's does (parameters and state unchanged bit for bit on skipped steps,
  torch's step counts, values within the optimizer tolerance of ``tests/optim``).
* ``unscale_`` + ``clip_grad_norm_`` + ``step``; the state machine's errors; ``state_dict``
  through ``ng.save``/``ng.load`` continues the same sequence; disabled pass-through.
* An MLP on ``load_digits`` trains identically with and without the scaler.
* bfloat16: unscaled gradients are torch's bit for bit (one float32 multiply, one rounding;
  NaNs only as NaNs), through the arena and the per-gradient path; a bfloat16 MLP trained
  with skipped inf/NaN steps has torch's scale sequence and skip pattern, parameters within
  bfloat16 rounding. float16 through the private ``allow_fp16`` path against NumPy.
* The kernel: serial and parallel twins against a NumPy reference, gradients read in place
  through the arena's address table, inactive parameters untouched.
torch is an optional oracle: those tests skip without it.
"""
import os
import pickle
import warnings

import numpy as np
import pytest
from optest import block_tables

import numbagrad as ng
from numbagrad import nn
from numbagrad.kernels.cpu import amp as K
from numbagrad.kernels.cpu._ptr import _addr_of

try:
    import torch
except ImportError:  # pragma: no cover - torch is the optional second oracle
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch not installed")
# the scripted losses overflow on purpose
pytestmark = pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")


# ---- the scripted run ----------------------------------------------------------------------------
SHAPES = {"w1": (3, 4), "b1": (4,), "unused": (2,), "w2": (5,), "w64": (2, 3)}
GROUPS = (("w1", "b1", "unused"), ("w2", "w64"))
# What each step's loss multiplies its parameters by: "ok" finite; "inf"/"ninf"/"nan" one
# element of one parameter; "big" finite values that overflow float32 once scaled;
# "nan64" a NaN in the float64 parameter only; "skip_w2" leaves w2's gradient None.
SCRIPT = ("ok", "ok", "ok", "inf", "ok", "nan", "ok", "ok", "ok", "big", "skip_w2", "ninf", "ok", "nan64",
          "ok", "ok", "ok", "ok")


def _coefs(seed=0):
    r = np.random.default_rng(seed)
    out = []
    for k, kind in enumerate(SCRIPT):
        c = {n: r.standard_normal(s) for n, s in SHAPES.items() if n != "unused"}
        if kind == "inf":
            c["w1"][1, 2] = np.inf
        elif kind == "ninf":
            c["b1"][3] = -np.inf
        elif kind == "nan":
            c["w2"][0] = np.nan
        elif kind == "big":
            c["w1"][0, 0] = 3e36             # finite in float32; times the scale it is not
        elif kind == "nan64":
            c["w64"][1, 1] = np.nan
        elif kind == "skip_w2":
            del c["w2"]
        out.append({n: v.astype(np.float64 if n == "w64" else np.float32) for n, v in c.items()})
    return out


def _init():
    r = np.random.default_rng(1)
    return {n: r.standard_normal(s).astype(np.float64 if n == "w64" else np.float32) for n, s in SHAPES.items()}


def _run(lib, opt_name, scaler_kw, unscale_every=2, set_to_none=True):
    """The scripted run in ``lib`` (numbagrad or torch); per step: (scale, tracker) after
    update, the unscaled gradients (explicit unscale_ on every ``unscale_every``-th step),
    parameters and optimizer state after the step."""
    ps = {n: lib.nn.Parameter(lib.tensor(v.copy())) for n, v in _init().items()}
    groups = [{"params": [ps[n] for n in GROUPS[0]]}, {"params": [ps[n] for n in GROUPS[1]], "lr": 0.05}]
    if opt_name == "adam":
        opt = lib.optim.Adam(groups, lr=0.1)
    else:
        opt = lib.optim.SGD(groups, lr=0.1, momentum=0.9)
    scaler = lib.amp.GradScaler("cpu", **scaler_kw)
    log = []
    for k, coefs in enumerate(_coefs()):
        opt.zero_grad(set_to_none=set_to_none)
        loss = sum((ps[n] * lib.tensor(c)).sum() for n, c in coefs.items())
        scaler.scale(loss).backward()
        grads = None
        if k % unscale_every == 0:
            scaler.unscale_(opt)
            grads = {n: (None if p.grad is None else p.grad.detach().numpy().copy()) for n, p in ps.items()}
        scaler.step(opt)
        scaler.update()
        state = {}
        for i, (n, p) in enumerate(ps.items()):
            st = opt.state.get(p, {})
            state[n] = {key: np.array(v.detach().numpy() if hasattr(v, "detach") else v, copy=True)
                        for key, v in st.items()}
        log.append(dict(scale=scaler.get_scale(), tracker=scaler._get_growth_tracker(), grads=grads,
                        params={n: p.detach().numpy().copy() for n, p in ps.items()}, state=state,
                        sd=scaler.state_dict()))
    return log


SCALERS = [dict(init_scale=2.0 ** 16, growth_interval=3),
           dict(init_scale=3.0e4, growth_factor=1.7, backoff_factor=0.3, growth_interval=2),
           dict(init_scale=2.0 ** 120, growth_factor=2.0 ** 7, growth_interval=1)]   # growth stops short of inf


@needs_torch
@pytest.mark.parametrize("scaler_kw", SCALERS, ids=["pow2", "odd_factors", "near_max"])
@pytest.mark.parametrize("opt_name, set_to_none", [("adam", True), ("sgd", True), ("adam", False)])
def test_scripted_run_matches_torch(opt_name, set_to_none, scaler_kw):
    ours = _run(ng, opt_name, scaler_kw, set_to_none=set_to_none)
    ref = _run(torch, opt_name, scaler_kw, set_to_none=set_to_none)
    prev = None
    skipped = 0
    for k, (a, b) in enumerate(zip(ours, ref)):
        where = f"step {k} ({SCRIPT[k]})"
        assert a["scale"] == b["scale"], where                 # the float32 scale, exactly
        assert a["tracker"] == b["tracker"], where
        assert a["sd"] == b["sd"], where
        if b["grads"] is not None:
            for n in SHAPES:
                if b["grads"][n] is None:
                    assert a["grads"][n] is None, (where, n)
                else:
                    assert a["grads"][n].dtype == b["grads"][n].dtype
                    np.testing.assert_array_equal(a["grads"][n], b["grads"][n], err_msg=f"{where} {n}")
        ran_torch = prev is None or any(not np.array_equal(b["params"][n], prev[1]["params"][n]) for n in SHAPES)
        if prev is not None:
            ran_ours = any(not np.array_equal(a["params"][n], prev[0]["params"][n]) for n in SHAPES)
            assert ran_ours == ran_torch, where
            if not ran_ours:
                skipped += 1
                for n in SHAPES:                               # state untouched, bit for bit
                    assert a["state"][n].keys() == prev[0]["state"][n].keys(), (where, n)
                    for key in a["state"][n]:
                        np.testing.assert_array_equal(a["state"][n][key], prev[0]["state"][n][key])
        for n in SHAPES:
            np.testing.assert_allclose(a["params"][n], b["params"][n], rtol=1e-5, atol=1e-6, err_msg=f"{where} {n}")
            assert a["state"][n].keys() == b["state"][n].keys(), (where, n)
            for key in b["state"][n]:
                np.testing.assert_allclose(a["state"][n][key], b["state"][n][key], rtol=1e-5, atol=1e-6,
                                           err_msg=f"{where} {n} {key}")
        prev = (a, b)
    assert skipped >= 4 if scaler_kw["init_scale"] < 1e30 else skipped >= 1
    assert ours[-1]["state"]["unused"] == {}                   # never had a gradient: no state


@needs_torch
def test_unscaled_gradients_bit_for_bit_float64_and_odd_scales():
    """Gradients multiplied by inv_scale = float32(1/float64(scale)) for scales that are not
    powers of two (float64 gradients multiply in float64 by the float32 factor)."""
    for scale in (3.0e4, 19660.80078125, 1.0, 7.0e-3, 2.0 ** -140):
        for dt in (np.float32, np.float64):
            g = np.random.default_rng(2).standard_normal(37).astype(dt) * 1e3
            g[[3, 20]] = [np.inf, np.nan]
            tp = torch.nn.Parameter(torch.zeros(37, dtype=getattr(torch, dt.__name__)))
            np_ = nn.Parameter(ng.zeros(37, dtype=dt))
            tp.grad = torch.tensor(g.copy())
            np_.grad = ng.tensor(g.copy())
            ts, ns = torch.amp.GradScaler("cpu"), ng.amp.GradScaler("cpu")
            ts.scale(torch.ones(())), ns.scale(ng.ones(()))
            ts.update(scale), ns.update(scale)
            topt, nopt = torch.optim.SGD([tp], lr=0.1), ng.optim.SGD([np_], lr=0.1)
            ts.unscale_(topt)
            ns.unscale_(nopt)
            np.testing.assert_array_equal(np_.grad.numpy(), tp.grad.numpy())
            assert ns._found_inf(ns._per_optimizer_states[id(nopt)]) == 1.0


@needs_torch
def test_infs_made_by_the_unscale_are_not_found_as_torch():
    """torch checks the scaled values, before the multiply: with a scale below 1 a finite
    gradient can become inf and the step still runs."""
    res = []
    for lib in (ng, torch):
        p = lib.nn.Parameter(lib.zeros(3))
        p.grad = lib.tensor(np.array([3e38, 1.0, -2.0], np.float32))
        opt = lib.optim.SGD([p], lr=1.0)
        s = lib.amp.GradScaler("cpu")
        s.scale(lib.ones(()))
        s.update(0.25)
        s.step(opt)
        res.append(p.detach().numpy().copy())
    np.testing.assert_array_equal(res[0], res[1])
    assert np.isinf(res[0][0])


@needs_torch
def test_scale_outputs_structures_and_dtypes():
    outs = {}
    for lib in (ng, torch):
        s = lib.amp.GradScaler("cpu", init_scale=3.0e4, backoff_factor=0.3)
        s.scale(lib.ones(()))
        s.update(19660.8)
        x = lib.tensor(np.array([1.5, -2.25, 3.3], np.float32))
        h = lib.tensor(np.array([1.5, -2.25, 3.3, 0.7], np.float16))
        h0 = lib.tensor(np.array(1.3, np.float16))
        d = lib.tensor(np.array([1.1, 2.2]))
        i = lib.tensor(np.array([1, 2]))
        r = s.scale([x, (h, [h0]), (d, i)])
        assert type(r) is list and type(r[1]) is tuple and type(r[1][1]) is list and type(r[2]) is tuple
        m = s.scale(iter([x]))
        assert not isinstance(m, (list, tuple))
        outs[lib.__name__] = [t.detach().numpy() for t in (r[0], r[1][0], r[1][1][0], r[2][0], r[2][1], next(m))]
        with pytest.raises(ValueError, match="outputs must be a Tensor or an iterable of Tensors"):
            s.scale([x, 3.0])
    for a, b in zip(outs["numbagrad"], outs["torch"]):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)


def test_scale_backward_scales_gradients():
    p = nn.Parameter(ng.tensor(np.array([1.0, 2.0], np.float32)))
    s = ng.amp.GradScaler("cpu", init_scale=1024.0)
    out = s.scale((p * 3.0).sum())
    out.backward()
    np.testing.assert_array_equal(p.grad.numpy(), [3072.0, 3072.0])
    assert s.get_scale() == 1024.0


# ---- unscale_, clipping, the state machine ----------------------------------------------------------
@needs_torch
def test_unscale_then_clip_then_step_matches_torch():
    res = {}
    for lib in (ng, torch):
        r = np.random.default_rng(3)
        ps = [lib.nn.Parameter(lib.tensor(r.standard_normal(s).astype(np.float32))) for s in ((4, 3), (3,))]
        opt = lib.optim.SGD(ps, lr=0.5)
        s = lib.amp.GradScaler("cpu", init_scale=2.0 ** 12)
        xs = lib.tensor(r.standard_normal((6, 3)).astype(np.float32))
        norms = []
        for _ in range(3):
            opt.zero_grad()
            loss = ((xs @ ps[0].T) + ps[1].sum()).pow(2).sum()
            s.scale(loss).backward()
            s.unscale_(opt)
            norms.append(float(lib.nn.utils.clip_grad_norm_(ps, 1.0)))
            s.step(opt)
            s.update()
        res[lib.__name__] = (norms, [p.detach().numpy() for p in ps], s.get_scale())
    a, b = res["numbagrad"], res["torch"]
    np.testing.assert_allclose(a[0], b[0], rtol=1e-5)
    assert a[0][0] > 1.0                               # the clip really scaled
    for x, y in zip(a[1], b[1]):
        np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-6)
    assert a[2] == b[2]


def _ready(init_scale=2.0 ** 8):
    p = nn.Parameter(ng.tensor(np.array([1.0, -1.0], np.float32)))
    opt = ng.optim.SGD([p], lr=0.1)
    s = ng.amp.GradScaler("cpu", init_scale=init_scale)
    s.scale((p * p).sum()).backward()
    return p, opt, s


def test_state_machine_errors():
    p, opt, s = _ready()
    s.unscale_(opt)
    with pytest.raises(RuntimeError, match=r"unscale_\(\) has already been called on this optimizer since the last "
                                           r"update\(\)"):
        s.unscale_(opt)
    s.step(opt)
    with pytest.raises(RuntimeError, match=r"unscale_\(\) is being called after step\(\)"):
        s.unscale_(opt)
    with pytest.raises(RuntimeError, match=r"step\(\) has already been called since the last update\(\)"):
        s.step(opt)
    s.update()
    s.unscale_(opt)                                  # a new iteration
    with pytest.raises(RuntimeError, match="Closure use is not currently supported"):
        s.step(opt, closure=lambda: 0.0)
    fresh = ng.amp.GradScaler("cpu")
    for call in (lambda: fresh.unscale_(opt), lambda: fresh.step(opt), lambda: fresh.update()):
        with pytest.raises(AssertionError, match=r"_scale is None.*scaler.scale\(loss or outputs\)"):
            call()
    fresh.scale(ng.ones(()))
    with pytest.raises(AssertionError, match="No inf checks were recorded prior to update"):
        fresh.update()
    q = nn.Parameter(ng.ones(2))
    with pytest.raises(AssertionError, match="No inf checks were recorded for this optimizer"):
        fresh.step(ng.optim.SGD([q], lr=0.1))        # no parameter has a gradient
    with pytest.raises(AssertionError, match=r"growth factor must be > 1.0 \(growth_factor=1.0\)"):
        ng.amp.GradScaler("cpu", growth_factor=1.0)
    with pytest.raises(AssertionError, match=r"backoff factor must be < 1.0 \(backoff_factor=1.5\)"):
        ng.amp.GradScaler("cpu", backoff_factor=1.5)


@needs_torch
def test_float16_gradients_refused_as_torch():
    for lib in (ng, torch):
        p = lib.nn.Parameter(lib.tensor(np.ones(3, np.float16)))
        p.grad = lib.tensor(np.ones(3, np.float16))
        s = lib.amp.GradScaler("cpu")
        s.scale(lib.ones(()))
        with pytest.raises(ValueError, match="Attempting to unscale FP16 gradients"):
            s.unscale_(lib.optim.SGD([p], lr=0.1))


# ---- bfloat16 (and float16 through the private path) -------------------------------------------------
def _bf16_bits(t):
    """The uint16 bit patterns of a bfloat16 tensor of either library."""
    if torch is not None and isinstance(t, torch.Tensor):
        return t.detach().view(torch.int16).numpy().view(np.uint16).copy()
    return t.detach().numpy().view(np.uint16).copy()


def _assert_same_bf16(a, b):
    """Equal bit patterns, except that a NaN only has to be a NaN (its payload is the
    converter's business: torch's vector rounding gives 0xffff, numbagrad's 0x7fc0)."""
    a, b = _bf16_bits(a), _bf16_bits(b)
    nan_a, nan_b = (a & 0x7FFF) > 0x7F80, (b & 0x7FFF) > 0x7F80
    np.testing.assert_array_equal(nan_a, nan_b)
    np.testing.assert_array_equal(a[~nan_a], b[~nan_b])


@needs_torch
def test_bfloat16_gradients_unscaled_bit_for_bit_as_torch():
    """torch multiplies each bfloat16 gradient in float32 by the float32 inv_scale and rounds
    once: one multiply and one rounding, so the bits are decided and must match, through the
    optimizer arena (two bfloat16 parameters, one without a gradient, next to a float32 one)
    and the per-gradient path of a duck-typed optimizer (a strided gradient too)."""
    r = np.random.default_rng(11)
    g = (r.standard_normal(300).astype(np.float32) * 1e3).astype(ng.bfloat16)
    g[[3, 200]] = [np.inf, np.nan]
    g32 = r.standard_normal(5).astype(np.float32) * 3e4

    class Plain:
        def __init__(self, params):
            self.param_groups = [{"params": list(params)}]

        def step(self):
            pass

    for scale in (3.0e4, 19660.80078125, 1.0, 7.0e-3, 2.0 ** -140):
        for plain in (False, True):
            res = {}
            for lib in (ng, torch):
                bf = lib.bfloat16
                ps = [lib.nn.Parameter(lib.zeros(100, dtype=bf)), lib.nn.Parameter(lib.zeros(4, dtype=bf)),
                      lib.nn.Parameter(lib.zeros(10, 20, dtype=bf)), lib.nn.Parameter(lib.zeros(5))]
                ps[0].grad = lib.tensor(g[:100].astype(np.float32)).to(bf)
                ps[2].grad = lib.tensor(g[100:].astype(np.float32).reshape(20, 10)).to(bf).T   # strided
                ps[3].grad = lib.tensor(g32.copy())
                opt = (Plain if plain else lambda q: lib.optim.SGD(q, lr=0.1))(ps)
                s = lib.amp.GradScaler("cpu")
                s.scale(lib.ones(()))
                s.update(scale)
                s.unscale_(opt)
                res[lib.__name__] = ps
            a, b = res["numbagrad"], res["torch"]
            for i in (0, 2):
                assert a[i].grad.dtype == ng.bfloat16
                _assert_same_bf16(a[i].grad, b[i].grad)
            assert a[1].grad is None
            np.testing.assert_array_equal(a[3].grad.numpy(), b[3].grad.numpy())


def test_float16_gradients_through_the_private_path_as_numpy():
    """``_unscale_grads_(..., allow_fp16=True)`` (torch's private flag) takes float16 gradients
    on the CPU: widened exactly, multiplied in float32, rounded once (NumPy's casts)."""
    g = (np.random.default_rng(12).standard_normal(50) * 3e3).astype(np.float16)
    g[7] = np.inf
    p = nn.Parameter(ng.zeros(50))

    class Plain:
        param_groups = [{"params": [p]}]

    p.grad = ng.tensor(g.copy())
    inv = np.float32(1 / 3.0e4)
    found = ng.amp.GradScaler("cpu")._unscale_grads_(Plain, inv, allow_fp16=True)
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(p.grad.numpy(), (g.astype(np.float32) * inv).astype(np.float16))
    assert found["cpu"][0] == 1.0


@needs_torch
def test_bfloat16_model_trains_as_torch_with_skipped_steps():
    """A bfloat16 MLP trained with SGD + momentum and a GradScaler that grows every second
    finite step; an inf gradient (step 3) and a NaN one (step 6) skip the step and back the
    scale off. The scale and growth tracker after every update and which steps ran are
    torch's exactly; the parameters stay within bfloat16 rounding of torch's (torch rounds
    to bfloat16 after every op of the matmuls and the SGD update, numbagrad after each
    op's float32 computation)."""
    r0 = np.random.default_rng(0)
    init = [r0.standard_normal((8, 6)) * 0.4, r0.standard_normal(8) * 0.1, r0.standard_normal((1, 8)) * 0.4,
            np.zeros(1)]
    data = [(r0.standard_normal((16, 6)), r0.standard_normal((16, 1))) for _ in range(8)]

    def run(lib):
        m = lib.nn.Sequential(lib.nn.Linear(6, 8), lib.nn.Tanh(), lib.nn.Linear(8, 1))
        with lib.no_grad():
            for p, v in zip(m.parameters(), init):
                p.copy_(lib.tensor(v.astype(np.float32)))
        m = m.to(lib.bfloat16)
        opt = lib.optim.SGD(m.parameters(), lr=0.05, momentum=0.9)
        s = lib.amp.GradScaler("cpu", init_scale=2.0 ** 10, growth_interval=2)
        out = []
        for k, (x, y) in enumerate(data):
            x = lib.tensor(x.astype(np.float32)).to(lib.bfloat16)
            y = lib.tensor(y.astype(np.float32)).to(lib.bfloat16)
            opt.zero_grad()
            s.scale(((m(x) - y) ** 2).mean()).backward()
            if k == 3:
                m[0].weight.grad[1, 2] = float("inf")
            if k == 6:
                m[2].bias.grad[0] = float("nan")
            s.step(opt)
            s.update()
            out.append((s.get_scale(), s._get_growth_tracker(),
                        [_bf16_bits(p) for p in m.parameters()]))
        return out

    ours, ref = run(ng), run(torch)
    ran = {"ours": [], "torch": []}
    for k, ((sa, ta, pa), (sb, tb, pb)) in enumerate(zip(ours, ref)):
        assert (sa, ta) == (sb, tb), k
        for name, ps, hist in (("ours", pa, ours), ("torch", pb, ref)):
            ran[name].append(k == 0 or any(not np.array_equal(u, v) for u, v in zip(ps, hist[k - 1][2])))
        for u, v in zip(pa, pb):
            a = u.view(ng.bfloat16).astype(np.float64)
            b = v.view(ng.bfloat16).astype(np.float64)
            assert np.isfinite(a).all()
            # within 2 bfloat16 ulps of the larger magnitude (2**-8 relative), 2**-10 absolute
            np.testing.assert_allclose(a, b, rtol=2.0 ** -7, atol=2.0 ** -10, err_msg=f"step {k}")
    assert ran["ours"] == ran["torch"]
    assert [k for k, r in enumerate(ran["ours"]) if not r] == [3, 6]
    assert [s for s, _, _ in ours][:5] == [1024.0, 2048.0, 2048.0, 1024.0, 1024.0]


def test_update_new_scale():
    p, opt, s = _ready()
    s.step(opt)
    s.update(1000.1)
    assert s.get_scale() == float(np.float32(1000.1))
    s.update(64)
    assert s.get_scale() == 64.0
    s.update(ng.tensor([np.float64(0.1)]))
    assert s.get_scale() == float(np.float32(0.1))
    for bad, why in ((ng.ones(2), r"shape \(2,\)"), (ng.ones(1, requires_grad=True), "requires grad"),
                     ("2.0", "got str")):
        with pytest.raises(AssertionError, match=why):
            s.update(bad)


def test_skipped_step_leaves_optimizer_untouched():
    """A first step that is skipped creates no optimizer state and bumps no version."""
    p = nn.Parameter(ng.tensor(np.array([1.0, 2.0], np.float32)))
    opt = ng.optim.Adam([p], lr=0.1)
    s = ng.amp.GradScaler("cpu")
    s.scale((p * ng.tensor(np.array([np.inf, 1.0], np.float32))).sum()).backward()
    v0 = p._version.value
    assert s.step(opt) is None
    s.update()
    assert len(opt.state) == 0 and opt.state_dict()["state"] == {}
    assert p._version.value == v0
    np.testing.assert_array_equal(p.detach().numpy(), [1.0, 2.0])
    assert s.get_scale() == 2.0 ** 15


def test_step_returns_the_optimizer_step_value_and_passes_arguments():
    class Opt(ng.optim.SGD):
        def step(self, closure=None, tag=None):
            super().step()
            return ("stepped", tag)
    p, _, s = _ready()
    opt = Opt([p], lr=0.1)
    assert s.step(opt, None, tag=7) == ("stepped", 7)


def test_non_contiguous_gradient_in_the_arena():
    """A strided gradient is copied into the arena's slot by the gather (as a step does) and
    unscaled there; p.grad is then that slot."""
    p = nn.Parameter(ng.zeros(3, 4))
    q = nn.Parameter(ng.zeros(5))
    g = np.arange(12, dtype=np.float32).reshape(4, 3) * 8.0
    p.grad = ng.tensor(g).T                  # a transposed view
    q.grad = ng.tensor(np.full(5, 8.0, np.float32))
    opt = ng.optim.SGD([p, q], lr=1.0)
    s = ng.amp.GradScaler("cpu", init_scale=8.0)
    s.scale(ng.ones(()))
    s.unscale_(opt)
    np.testing.assert_array_equal(p.grad.numpy(), g.T / 8.0)
    np.testing.assert_array_equal(q.grad.numpy(), np.ones(5))
    s.step(opt)
    np.testing.assert_array_equal(p.detach().numpy(), -g.T / 8.0)


def test_duck_typed_optimizer_takes_the_per_gradient_path():
    """An optimizer that is not a numbagrad Optimizer (anything with ``param_groups``, as
    torch accepts) is unscaled one gradient at a time, with the same results."""
    r = np.random.default_rng(4)
    gs = [r.standard_normal(n).astype(np.float32) * 1024 for n in (5, 70000, 12)]

    class Plain:
        def __init__(self, params):
            self.param_groups = [{"params": list(params)}]
            self.steps = 0

        def step(self):
            self.steps += 1

    results = []
    for make in (lambda ps: ng.optim.SGD(ps, lr=0.0), Plain):
        ps = [nn.Parameter(ng.zeros(*g.shape)) for g in gs[:2]] + [nn.Parameter(ng.zeros(3, 4))]
        for p, g in zip(ps, gs[:2]):
            p.grad = ng.tensor(g.copy())
        ps[2].grad = ng.tensor(gs[2].reshape(4, 3).copy()).T          # strided
        ps.append(nn.Parameter(ng.zeros(2)))            # no gradient
        opt = make(ps)
        s = ng.amp.GradScaler("cpu", init_scale=1024.0)
        s.scale(ng.ones(()))
        s.step(opt)
        results.append([p.grad.numpy().copy() for p in ps[:-1]])
        if isinstance(opt, Plain):
            assert opt.steps == 1
            ps[1].grad.array[7] = np.nan
            s.update()
            s.scale(ng.ones(()))
            s.step(opt)
            assert opt.steps == 1
    for a, b, g in zip(results[0], results[1], gs[:2] + [gs[2].reshape(4, 3).T]):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(a, g / np.float32(1024))


# ---- state dict, pickling, disabled ------------------------------------------------------------------
def _loop(scaler, ps, opt, coefs):
    scales = []
    for c in coefs:
        opt.zero_grad()
        loss = sum((p * ng.tensor(v)).sum() for p, v in zip(ps, c))
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        scales.append(scaler.get_scale())
    return scales


def test_state_dict_round_trip_through_ng_save_continues_the_sequence(tmp_path):
    r = np.random.default_rng(5)
    coefs = []
    for k in range(12):
        c = [r.standard_normal(4).astype(np.float32), r.standard_normal(2).astype(np.float32)]
        if k in (2, 7):
            c[0][1] = np.inf
        coefs.append(c)
    kw = dict(init_scale=3.0e4, growth_factor=1.7, backoff_factor=0.3, growth_interval=3)

    def fresh():
        ps = [nn.Parameter(ng.zeros(4)), nn.Parameter(ng.zeros(2))]
        return ps, ng.optim.SGD(ps, lr=0.01)
    ps, opt = fresh()
    whole = _loop(ng.amp.GradScaler("cpu", **kw), ps, opt, coefs)

    ps, opt = fresh()
    first = ng.amp.GradScaler("cpu", **kw)
    head = _loop(first, ps, opt, coefs[:5])
    sd = first.state_dict()
    assert sd["_growth_tracker"] == 2 and all(type(v) in (int, float) for v in sd.values())
    path = os.path.join(tmp_path, "scaler.h5")
    ng.save({"scaler": sd}, path)
    loaded = ng.load(path)["scaler"]
    assert loaded == sd
    second = ng.amp.GradScaler("cpu", init_scale=1.0, growth_interval=50)
    second.load_state_dict(loaded)
    assert second.get_scale() == sd["scale"]
    tail = _loop(second, ps, opt, coefs[5:])
    assert head + tail == whole
    third = ng.amp.GradScaler("cpu")
    third.scale(ng.ones(()))                          # already initialised: load overwrites
    third.load_state_dict(loaded)
    assert third.state_dict() == sd
    with pytest.raises(RuntimeError, match="source state dict is empty"):
        second.load_state_dict({})
    with pytest.raises(KeyError, match=r"lacks \['_growth_tracker'\]"):
        second.load_state_dict({k: v for k, v in sd.items() if k != "_growth_tracker"})


def test_pickle_between_iterations():
    p, opt, s = _ready(3.0e4)
    s.unscale_(opt)
    with pytest.raises(AssertionError, match="may only be pickled"):
        pickle.dumps(s)
    s.step(opt)
    s.update()
    t = pickle.loads(pickle.dumps(s))
    assert t.state_dict() == s.state_dict()
    assert t.scale(ng.ones(())).item() == s.get_scale()


def test_disabled_is_a_pass_through():
    p, opt, _ = _ready()
    s = ng.amp.GradScaler("cpu", enabled=False)
    loss = (p * p).sum()
    assert s.scale(loss) is loss
    assert s.unscale_(opt) is None
    g = p.grad.numpy().copy()
    assert s.step(opt) is None
    np.testing.assert_array_equal(p.detach().numpy(), np.array([1.0, -1.0], np.float32) - np.float32(0.1) * g)
    s.update()
    assert (s.get_scale(), s.state_dict(), s.is_enabled()) == (1.0, {}, False)
    s.load_state_dict({})


def test_cuda_device_without_cuda_warns_and_disables(monkeypatch):
    from numbagrad.backend import cuda as cb
    monkeypatch.setattr(cb, "available", lambda: False)  # as on a machine without a GPU, wherever this runs
    with pytest.warns(UserWarning, match=r"numbagrad\.amp\.GradScaler is enabled, but CUDA is not available"):
        s = ng.amp.GradScaler()
    assert not s.is_enabled()
    with pytest.warns(UserWarning, match=r"numbagrad\.cuda\.amp\.GradScaler is enabled"):
        assert not ng.cuda.amp.GradScaler(init_scale=1024.0).is_enabled()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert ng.amp.GradScaler("cpu").is_enabled()
        assert not ng.amp.GradScaler("cuda", enabled=False).is_enabled()


# ---- end to end ----------------------------------------------------------------------------------------
def _train_digits(use_scaler, steps=30):
    ng.manual_seed(0)
    x, y = ng.data.load_digits()
    model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
    opt = ng.optim.Adam(model.parameters(), lr=1e-2)
    scaler = ng.amp.GradScaler("cpu", init_scale=2.0 ** 16, growth_interval=10) if use_scaler else None
    losses = []
    for k in range(steps):
        lo = (k * 64) % (x.shape[0] - 64)
        xb, yb = x[lo:lo + 64], y[lo:lo + 64]
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(xb), yb)
        if scaler is None:
            loss.backward()
            opt.step()
        else:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        losses.append(loss.item())
    return losses, [p.detach().numpy().copy() for p in model.parameters()], scaler


def test_digits_mlp_trains_the_same_with_the_scaler():
    l0, p0, _ = _train_digits(False)
    l1, p1, scaler = _train_digits(True)
    assert scaler.get_scale() == 2.0 ** 19            # grew 3 times, never backed off
    np.testing.assert_allclose(l1, l0, rtol=1e-6)
    for a, b in zip(p1, p0):
        # powers-of-two scales scale every backward product exactly: in practice bit-identical
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
    assert l1[-1] < l1[0] * 0.5


# ---- the kernel ---------------------------------------------------------------------------------------
def _arena(sizes, block, dtype, seed, n_bad=3):
    """A random arena of ``sizes`` cut in blocks, with inf/NaN at random positions."""
    r = np.random.default_rng(seed)
    total = sum(sizes)
    g = (r.standard_normal(total) * 1e3).astype(dtype)
    bad = r.choice(total, n_bad, replace=False) if n_bad else []
    for j, pos in enumerate(bad):
        g[pos] = (np.nan, np.inf, -np.inf)[j % 3]
    tabs = block_tables(sizes, block)
    offs = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    return g, tabs, offs


def _reference(g, offs, active, inv):
    """NumPy: multiply active segments by inv (float64 widens the float32 factor); found when
    an active element was non-finite before."""
    out = g.copy()
    found = False
    for s in range(len(offs) - 1):
        if active[s]:
            seg = g[offs[s]:offs[s + 1]]
            found |= not np.isfinite(seg).all()
            out[offs[s]:offs[s + 1]] = seg * (np.float64(inv) if g.dtype == np.float64 else inv)
    return out, found


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("twin", ["serial", "parallel", "dispatch"])
@pytest.mark.parametrize("total", [1000, 3 * (1 << 16) + 17])
def test_kernel_matches_numpy(dtype, twin, total):
    sizes = [total // 3, total // 3 + 5, total - 2 * (total // 3) - 5]
    for seed, inv in ((0, np.float32(1 / 3.0e4)), (1, np.float32(2.0 ** -16)), (2, np.float32(1.0)),
                      (3, np.float32(7.5))):
        g, (st, en, sg), offs = _arena(sizes, 4096, dtype, seed, n_bad=seed % 3)
        active = np.array([1, seed % 2, 1], np.uint8)
        ref, found_ref = _reference(g, offs, active, inv)
        gsrc = np.zeros(6, np.int64)
        gsrc[1::2] = offs[:-1]
        found = np.zeros(1, np.float32)
        k = K._unscale_check_cpu if twin == "dispatch" else getattr(K._unscale_check_cpu, twin)
        k(g, st, en, sg, active, gsrc, inv, found)
        np.testing.assert_array_equal(g, ref)
        assert found[0] == (1.0 if found_ref else 0.0), (seed, found_ref)


def test_kernel_reads_gradients_in_place_through_gsrc():
    """Segments whose ``gsrc`` address is set are the arrays themselves (the optimizer leaves
    gradients where backward put them); the arena slots of those segments stay untouched."""
    sizes = [7, 70000, 3]
    g, (st, en, sg), offs = _arena(sizes, 16384, np.float32, 9, n_bad=0)
    own = [g[offs[s]:offs[s + 1]].copy() for s in range(3)]
    own[1][123] = np.nan
    arena = np.full(g.size, 5.0, np.float32)
    gsrc = np.zeros(6, np.int64)
    gsrc[1::2] = offs[:-1]
    for s in (0, 1):
        gsrc[2 * s] = _addr_of(own[s])
    arena[offs[2]:] = own[2]
    found = np.zeros(1, np.float32)
    inv = np.float32(0.125)
    expect = [o * inv for o in own]
    K._unscale_check_cpu(arena, st, en, sg, np.ones(3, np.uint8), gsrc, inv, found)
    np.testing.assert_array_equal(own[0], expect[0])
    np.testing.assert_array_equal(own[1], expect[1])
    np.testing.assert_array_equal(arena[offs[2]:], expect[2])
    assert (arena[:offs[2]] == 5.0).all()
    assert found[0] == 1.0


def test_kernel_compiles_once_per_dtype():
    g, (st, en, sg), offs = _arena([10, 20], 8, np.float32, 0, n_bad=0)
    gsrc = np.zeros(4, np.int64)
    f = np.zeros(1, np.float32)
    K._unscale_check_cpu.serial(g, st, en, sg, np.ones(2, np.uint8), gsrc, np.float32(0.5), f)
    n = len(K._unscale_check_cpu.serial.signatures)
    for _ in range(3):
        K._unscale_check_cpu.serial(g, st, en, sg, np.ones(2, np.uint8), gsrc, np.float32(2.0), f)
    assert len(K._unscale_check_cpu.serial.signatures) == n


def test_kernel_ignores_fastmath_config():
    """The finiteness test survives ``NUMBAGRAD_FASTMATH=1`` (the kernels are compiled with
    fastmath off whatever the config says)."""
    assert K._unscale_span.targetoptions.get("fastmath") in (False, None)
    assert not K._unscale_check_cpu.parallel.targetoptions.get("fastmath")
