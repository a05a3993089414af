"""LAMB and Lion (``numbagrad/optim/lamb.py``, ``lion.py``; kernels in
``numbagrad/kernels/cpu/optim_lamb.py``).

Neither is in ``torch.optim``, so the oracle is a float64 NumPy per-tensor reference
written from the papers' formulas (``_ref_lamb``, ``_ref_lion`` in ``optim_refs.py``, not from the
kernels). ``optimkit.run_parity`` drives it through a small ``torch.optim.Optimizer``
adapter (``_RefLamb``, ``_RefLion``) that keeps float64 master copies and writes them
back to the torch parameters, so the harness and its torch-side state dicts are the
usual ones: float64 arenas must equal the reference to 1e-12, float32 arenas to a loose
tolerance (float32 rounding against an exact trajectory over 100 steps).
"""
import copy

import numpy as np
import pytest

import numbagrad as ng
from numbagrad import nn
from numbagrad.kernels.cpu import optim_lamb as K
from numbagrad.optim.lamb import Lamb
from numbagrad.optim.lion import Lion

torch = pytest.importorskip("torch")

import optimkit  # noqa: E402
from optest import block_tables  # noqa: E402
from optim_refs import _RefLamb, _RefLion, _ref_lamb  # noqa: E402
from optimkit import setup, train  # noqa: E402

TOL64 = dict(rtol=1e-12, atol=1e-12)
TOL32 = dict(rtol=2e-5, atol=2e-5)
SKIPS = {0: (1,), 3: (1, 2), 4: (0,), 9: (0, 1, 2, 3, 4), 40: (3,), 41: (3,)}


# ---- the reference: the papers' formulas, per tensor, float64 --------------------------------
def _parity(ng_cls, ref_cls, kw, dtype, **extra):
    tol = TOL64 if dtype == np.float64 else TOL32
    return optimkit.run_parity(ng_cls, ref_cls, kw, dtype, torch, tol=tol, **extra)


# ---- parity with the reference ----------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("ng_cls,ref_cls,kw", [(Lamb, _RefLamb, dict(lr=1e-2, weight_decay=0.1)),
                                               (Lamb, _RefLamb, dict(lr=1e-2)),
                                               (Lion, _RefLion, dict(lr=1e-2, weight_decay=0.1))],
                         ids=["lamb_adapt", "lamb_plain", "lion"])
def test_missing_grads_are_skipped(ng_cls, ref_cls, kw, dtype):
    P, T, o1, o2 = _parity(ng_cls, ref_cls, kw, dtype, steps=50, skips=SKIPS)
    optimkit.assert_state_close(o1, o2, P, T, TOL64 if dtype == np.float64 else TOL32)
    assert o1.state[P[3]]["step"].item() == 47 and o1.state[P[0]]["step"].item() == 48


def test_zero_parameter_and_zero_update_take_trust_one():
    """||p|| = 0 (a zero-initialised bias) or ||r|| = 0 (zero gradients from zero moments):
    the trust ratio is 1, as the reference says."""
    P = [nn.Parameter(ng.zeros(4, dtype=ng.float64)), nn.Parameter(ng.tensor(np.arange(1.0, 4.0)))]
    ref = [p.detach().numpy().copy() for p in P]
    mv = [[np.zeros_like(r), np.zeros_like(r)] for r in ref]
    o = Lamb(P, lr=0.1, always_adapt=True)
    rng = np.random.default_rng(0)
    for k in range(3):
        grads = [rng.standard_normal(4), np.zeros(3)]
        for i, p in enumerate(P):
            p.grad = ng.tensor(grads[i])
            ref[i], mv[i][0], mv[i][1] = _ref_lamb(ref[i], grads[i], *mv[i], k + 1, 0.1, (0.9, 0.999), 1e-6, 0,
                                                   True, 10.0, True, False)
        o.step()
    for p, r in zip(P, ref):
        np.testing.assert_allclose(p.detach().numpy(), r, **TOL64)
    np.testing.assert_array_equal(P[1].detach().numpy(), np.arange(1.0, 4.0))  # r == 0: no move


def test_lion_sign_of_zero_is_zero_and_nan_propagates():
    p = nn.Parameter(ng.tensor(np.array([1.0, 2.0, 3.0], np.float32)))
    o = Lion([p], lr=0.5)
    p.grad = ng.tensor(np.array([0.0, np.nan, -4.0], np.float32))
    o.step()
    out = p.detach().numpy()
    assert out[0] == 1.0 and np.isnan(out[1]) and out[2] == 3.5  # sign(0) = 0; NaN shows (torch.sign gives 0)


@pytest.mark.parametrize("ng_cls,ref_cls,kw", [(Lamb, _RefLamb, dict(lr=1e-3, weight_decay=0.01)),
                                               (Lion, _RefLion, dict(lr=1e-3, weight_decay=0.1))],
                         ids=["lamb", "lion"])
def test_large_parameters_span_blocks_and_use_the_parallel_kernel(ng_cls, ref_cls, kw):
    _parity(ng_cls, ref_cls, kw, np.float64, steps=4, shapes=optimkit.LARGE_SHAPES)


def _arena_args(dtype, kind, seed=0):
    """A bucket-shaped argument tuple for the kernels: parameters of 40000 (3 blocks), 7
    and 20000 elements, one of them inactive."""
    from numbagrad.optim.optimizer import _BLOCK, ArenaLayout
    sizes = (40000, 7, 20000)
    rng = np.random.default_rng(seed)
    total = sum(sizes)
    tables = block_tables(sizes, _BLOCK)
    active = np.array([1, 0, 1], np.uint8)
    gsrc = np.zeros(6, np.int64)  # every gradient in its arena slot
    t = np.dtype(dtype).type
    p, g = rng.standard_normal(total).astype(dtype), rng.standard_normal(total).astype(dtype)
    layout = ArenaLayout(*tables, active, gsrc)
    if kind == "lamb":
        m, v = rng.standard_normal(total).astype(dtype) * t(0.1), np.abs(rng.standard_normal(total)).astype(dtype)
        return (p, g, m, v, np.zeros(total, dtype), layout, np.array([3, 0, 7], np.float32),
                np.zeros(6, dtype), np.zeros(2 * len(tables[0])), (1e-2, 0.9, 0.999, t(0.1), t(0.9), t(0.999),
                                                                    t(1e-3), t(1e-6), t(0.01), t(1), 10.0, True, True,
                                                                    True))
    return (p, g, rng.standard_normal(total).astype(dtype), layout, np.zeros(3, np.float32),
            (t(-1e-2), t(0.9), t(0.1), t(0.99), t(0.01), t(0.999), t(1)))


@pytest.mark.parametrize("kind", ["lamb", "lion"])
def test_serial_and_parallel_twins_are_bit_identical(kind):
    """The per-block partial sums are combined in block order: the result does not depend
    on the threading."""
    kern = K._lamb_step_cpu if kind == "lamb" else K._lion_step_cpu
    a, b = _arena_args(np.float32, kind), _arena_args(np.float32, kind)
    kern.serial(*a)
    kern.parallel(*b)
    for x, y in zip(a, b):
        if isinstance(x, np.ndarray):
            np.testing.assert_array_equal(x, y)
    assert a[0][40000] == _arena_args(np.float32, kind)[0][40000]  # inactive parameter untouched


# ---- state dict -----------------------------------------------------------------------------
@pytest.mark.parametrize("ng_cls,ref_cls,kw,keys",
                         [(Lamb, _RefLamb, dict(lr=1e-2, weight_decay=0.1), ["step", "exp_avg", "exp_avg_sq"]),
                          (Lion, _RefLion, dict(lr=1e-2), ["step", "exp_avg"])], ids=["lamb", "lion"])
def test_state_dict_layout_and_loading_a_torch_state_dict(ng_cls, ref_cls, kw, keys):
    P, T, grads = setup(np.float64, steps=12, torch=torch)
    o1, o2 = ng_cls(P, **kw), ref_cls(T, **kw)
    s1, s2 = optimkit.check_state_dict_like_torch(o1, o2, P, T, grads, torch, tol=TOL64)
    assert list(s1["state"]) == [0, 1, 3, 4, 2]  # first-step order, as torch
    assert all(list(st) == keys for st in s1["state"].values())
    assert s1["param_groups"] == s2["param_groups"]
    # a torch-side state dict (torch tensors) loads and continues like the reference
    fresh = [nn.Parameter(ng.tensor(t.detach().numpy().copy())) for t in T]
    o3 = ng_cls(fresh, **kw)
    o3.load_state_dict(o2.state_dict())
    for k in range(3, 12):
        optimkit.set_grads(fresh, T, grads[k], torch=torch)
        o3.step()
        o2.step()
    optimkit.assert_close(fresh, T, np.float64, TOL64)


# ---- the fused arena --------------------------------------------------------------------------
def test_lamb_scratch_lives_with_the_arena():
    P, _, grads = setup(np.float32, steps=4)
    o = Lamb(P, lr=1e-2)
    train(o, P, grads, [0])
    (arena,) = o._arenas.values()
    bucket = arena.buckets[0]
    assert "update" not in bucket.work   # no trust ratio (weight_decay 0): no update buffer
    o.param_groups[0]["weight_decay"] = 0.1
    train(o, P, grads, [1])
    assert bucket.work["update"].shape == bucket.param.shape
    assert bucket.work["blk_part"].shape == (2 * bucket.blk_start.size,)
    assert "update" not in o.state[P[0]] and "work" not in str(o.state_dict())
    c = copy.deepcopy(o)                  # the scratch is not pickled; rebuilt on demand
    train(c, c.param_groups[0]["params"], grads, [2])


def test_constructor_validation_and_defaults():
    p = nn.Parameter(ng.ones(2))
    for cls in (Lamb, Lion):
        optimkit.check_constructor_rejects(cls, [(dict(lr=-1), "Invalid learning rate"),
                                                 (dict(betas=(-0.1, 0.9)), "beta parameter at index 0"),
                                                 (dict(betas=(0.9, 1.5)), "beta parameter at index 1"),
                                                 (dict(weight_decay=-1), "Invalid weight_decay value")])
        cls([p], foreach=True, fused=True, capturable=True)  # accepted
    with pytest.raises(ValueError, match="beta parameter at index 1"):
        Lamb([p], betas=(0.9, 1.0))        # bias correction divides by 1 - beta2**t
    Lion([p], betas=(1.0, 1.0))
    with pytest.raises(ValueError, match="Invalid epsilon value"):
        Lamb([p], eps=-1e-8)
    with pytest.raises(ValueError, match="Invalid clamp value"):
        Lamb([p], clamp_value=0)
    assert Lamb([p]).defaults == dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-6, weight_decay=0, bias_correction=True,
                                      clamp_value=10.0, always_adapt=False, maximize=False)
    assert Lion([p]).defaults == dict(lr=1e-4, betas=(0.9, 0.99), weight_decay=0, maximize=False)
    assert repr(Lion([p])).startswith("Lion (\nParameter Group 0\n    betas: (0.9, 0.99)")


def test_float16_parameters_are_refused_clearly():
    p = nn.Parameter(ng.ones(3, dtype=ng.float16))
    p.grad = ng.ones(3, dtype=ng.float16)
    for cls in (Lamb, Lion):
        with pytest.raises(TypeError, match="float16"):
            cls([p]).step()
