"""ctc_loss / CTCLoss (numbagrad/ops/ctc.py, kernels/cpu/ctc.py).

Checked against a float64 NumPy reference written here (a plain alpha recursion per
sample), against float64 central differences (through log_softmax, where PyTorch's
gradient is the true one, and on free log-probabilities after removing the
``exp(log_probs)`` term PyTorch adds), and against PyTorch (value and gradient, float32
and float64) for padded and concatenated targets, every reduction and zero_infinity on
and off. Hard cases: T exactly long enough (T == L + number of adjacent repeats), one
step too short (inf, or 0 with zero_infinity), repeated labels, zero-length targets,
zero-length inputs, and a batch mixing them.
"""
import math

import numpy as np
import pytest

import numbagrad as ng
from numbagrad.nn.functional import log_softmax
from numbagrad.nn.loss_ctc import CTCLoss, ctc_loss
from optest import check_grad

REDUCTIONS = ("none", "mean", "sum")


# ---- the float64 NumPy reference ----------------------------------------------------------------
def ref_nll(lp, target, T_b, blank=0):
    """-log p(target | lp[:T_b]) by the textbook alpha recursion (float64, log space)."""
    ext = [blank]
    for c in target:
        ext += [int(c), blank]
    S = len(ext)
    if T_b == 0:
        return 0.0 if len(target) == 0 else math.inf
    a = np.full(S, -np.inf)
    a[0] = lp[0, blank]
    if S > 1:
        a[1] = lp[0, ext[1]]
    for t in range(1, T_b):
        prev = a.copy()
        for s in range(S):
            terms = [prev[s]]
            if s >= 1:
                terms.append(prev[s - 1])
            if s >= 2 and ext[s] != blank and ext[s] != ext[s - 2]:
                terms.append(prev[s - 2])
            v = -np.inf
            for x in terms:
                v = np.logaddexp(v, x)
            a[s] = v + lp[t, ext[s]]
    tail = a[S - 1] if S == 1 else np.logaddexp(a[S - 1], a[S - 2])
    return -float(tail)


def ref_loss(lp, targets, il, tl, blank=0, reduction="mean", zero_infinity=False):
    """Reference over a batch: lp (T, N, C) float64, padded targets (N, S)."""
    lp = np.asarray(lp, np.float64)
    per = np.array([ref_nll(lp[:, b], targets[b][:tl[b]], il[b], blank) for b in range(lp.shape[1])])
    if zero_infinity:
        per = np.where(np.isinf(per), 0.0, per)
    if reduction == "none":
        return per
    if reduction == "sum":
        return per.sum()
    return (per / np.maximum(np.asarray(tl), 1)).mean()


# ---- cases --------------------------------------------------------------------------------------
def _log_probs(T, N, C, seed=0, scale=1.5):
    x = np.random.default_rng(seed).standard_normal((T, N, C)) * scale
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def _repeats(seq):
    return sum(1 for a, b in zip(seq, seq[1:]) if a == b)


def mixed_batch(T=8, C=5):
    """One batch with every hard case: (targets padded to S=4, input lengths, target lengths)."""
    rows = [
        ([1, 2, 3, 4], T),        # plain
        ([2, 2, 3, 3], 6),        # repeats, T_b == L + repeats exactly
        ([1, 1, 1], 4),           # T_b = 4 < 3 + 2: impossible -> inf
        ([], T),                  # zero-length target
        ([3, 1], 5),              # shorter input
        ([4, 4, 4], 5),           # T_b == L + repeats exactly, all one label
        ([], 0),                  # zero-length input and target: loss 0
        ([2], 0),                 # zero-length input, one label: inf
    ]
    S = 4
    tg = np.zeros((len(rows), S), np.int64)
    tl = np.array([len(r[0]) for r in rows], np.int64)
    for i, (seq, _) in enumerate(rows):
        tg[i, :len(seq)] = seq
        tg[i, len(seq):] = 1 + i % (C - 1)  # padding: valid labels that must be ignored
    il = np.array([r[1] for r in rows], np.int64)
    return tg, il, tl


def _concat(tg, tl):
    return np.concatenate([tg[b, :tl[b]] for b in range(len(tl))]).astype(np.int64)


def _mixed(layout, seed, T=8, C=5):
    """``mixed_batch(T, C)`` with log-probabilities: ``(lp, tg, il, tl, targets)``, ``targets``
    the padded ``tg`` or (layout 'concat') the concatenated labels."""
    tg, il, tl = mixed_batch(T, C)
    lp = _log_probs(T, len(il), C, seed=seed)
    return lp, tg, il, tl, (tg if layout == "padded" else _concat(tg, tl))


def _mixed_params(test):
    """Parametrise ``test(dtype, layout, reduction, zero_infinity)`` over all of them (the
    ``_mixed`` batch tests)."""
    for name, values in (("dtype", [np.float32, np.float64]), ("layout", ["padded", "concat"]),
                         ("reduction", REDUCTIONS), ("zero_infinity", [False, True])):
        test = pytest.mark.parametrize(name, values)(test)
    return test


def _np(t):
    return np.asarray(t.detach().numpy())


# ---- value vs the NumPy reference --------------------------------------------------------------
@_mixed_params
def test_value_matches_reference(dtype, layout, reduction, zero_infinity):
    lp, tg, il, tl, targets = _mixed(layout, seed=1)
    out = ctc_loss(ng.tensor(lp.astype(dtype)), targets, il, tl, reduction=reduction,
                   zero_infinity=zero_infinity)
    exp = ref_loss(lp, tg, il, tl, reduction=reduction, zero_infinity=zero_infinity)
    assert out.dtype == np.dtype(dtype)
    assert out.shape == (() if reduction != "none" else (len(il),))
    tol = dict(rtol=2e-6, atol=1e-6) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(_np(out).astype(np.float64), exp, **tol)
    if not zero_infinity:
        per = _np(ctc_loss(ng.tensor(lp.astype(dtype)), targets, il, tl, reduction="none"))
        assert np.isinf(per[[2, 7]]).all() and np.isfinite(np.delete(per, [2, 7])).all()


def test_barely_long_enough_and_one_step_short():
    C = 6
    for seq in ([1, 1], [1, 2, 2, 3], [5, 5, 5, 5], [1, 2, 3]):
        need = len(seq) + _repeats(seq)
        lp = _log_probs(need + 2, 1, C, seed=len(seq))
        tg = np.array([seq])
        v = float(_np(ctc_loss(ng.tensor(lp), tg, [need], [len(seq)], reduction="sum")))
        assert math.isfinite(v)
        np.testing.assert_allclose(v, ref_nll(lp[:, 0], seq, need), rtol=1e-12)
        short = ctc_loss(ng.tensor(lp), tg, [need - 1], [len(seq)], reduction="sum")
        assert math.isinf(float(_np(short)))
        x = ng.tensor(lp, requires_grad=True)
        z = ctc_loss(x, tg, [need - 1], [len(seq)], reduction="sum", zero_infinity=True)
        assert float(_np(z)) == 0.0
        z.backward()
        assert (_np(x.grad) == 0).all()


def test_zero_length_target_is_minus_sum_of_blank():
    T, C = 7, 4
    lp = _log_probs(T, 2, C, seed=3)
    for blank in (0, 2):
        out = ctc_loss(ng.tensor(lp), np.zeros((2, 0), np.int64), [7, 4], [0, 0], blank=blank, reduction="none")
        exp = [-lp[:7, 0, blank].sum(), -lp[:4, 1, blank].sum()]
        np.testing.assert_allclose(_np(out), exp, rtol=1e-13)


def test_unbatched_and_length_forms():
    T, C = 6, 5
    lp = _log_probs(T, 1, C, seed=4)
    exp = ref_nll(lp[:, 0], [1, 3], 6)
    for il, tl in [(6, 2), ([6], [2]), (np.array(6), np.array(2)), (ng.tensor([6]), ng.tensor([2]))]:
        out = ctc_loss(ng.tensor(lp[:, 0]), np.array([1, 3, 4]), il, tl, reduction="none")
        assert out.shape == ()
        np.testing.assert_allclose(float(_np(out)), exp, rtol=1e-12)
    out = ctc_loss(ng.tensor(lp[:, 0]), ng.tensor(np.array([1, 3])), ng.tensor(6), ng.tensor(2), reduction="mean")
    np.testing.assert_allclose(float(_np(out)), exp / 2, rtol=1e-12)
    # batched lengths as tuples, int32 tensors, arrays; targets as int32 / integral floats
    tg, il, tl = mixed_batch(T, C)
    il = np.minimum(il, T)
    lp = _log_probs(T, len(il), C, seed=5)
    ref = ref_loss(lp, tg, il, tl, reduction="none")
    for a, b, t in [(tuple(il), list(tl), tg), (ng.tensor(il.astype(np.int32)), tl, tg.astype(np.int32)),
                    (il, ng.tensor(tl), tg.astype(np.float64))]:
        np.testing.assert_allclose(_np(ctc_loss(ng.tensor(lp), t, a, b, reduction="none")), ref, rtol=1e-12)


def test_module_and_float16():
    T, C = 8, 5
    tg, il, tl = mixed_batch(T, C)
    lp = _log_probs(T, len(il), C, seed=6)
    m = CTCLoss(blank=0, reduction="sum", zero_infinity=True)
    assert m.reduction == "sum" and m.zero_infinity and m.blank == 0
    np.testing.assert_allclose(float(_np(m(ng.tensor(lp), tg, il, tl))),
                               ref_loss(lp, tg, il, tl, reduction="sum", zero_infinity=True), rtol=1e-12)
    x16 = ng.tensor(lp.astype(np.float16), requires_grad=True)
    out = ctc_loss(x16, tg, il, tl, reduction="mean", zero_infinity=True)
    assert out.dtype == np.float16
    exp = ref_loss(lp.astype(np.float16).astype(np.float64), tg, il, tl, reduction="mean", zero_infinity=True)
    np.testing.assert_allclose(float(_np(out)), exp, rtol=2e-3)
    out.backward()
    assert x16.grad.dtype == np.float16 and np.isfinite(_np(x16.grad)).all()
    with pytest.raises(ValueError, match="reduction"):
        CTCLoss(reduction="avg")


# ---- gradients vs finite differences -----------------------------------------------------------
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("layout", ["padded", "concat"])
def test_grad_through_log_softmax_matches_finite_differences(layout, reduction):
    # PyTorch's ctc gradient is the true gradient w.r.t. the logits of a log_softmax.
    T, C = 6, 4
    tg = np.array([[1, 1, 2], [3, 0, 0], [2, 3, 1]])
    il, tl = np.array([6, 5, 6]), np.array([3, 0, 3])
    targets = tg if layout == "padded" else _concat(tg, tl)
    x = np.random.default_rng(7).standard_normal((T, 3, C))
    check_grad(lambda a: ctc_loss(log_softmax(a, dim=-1), targets, il, tl, reduction=reduction),
               [x], max_elementwise=80, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_grad_on_free_inputs_is_fd_plus_exp(reduction):
    # d loss / d log_probs for free inputs is the kernel's gradient minus g_b exp(log_probs)
    # on t < T_b: check that identity against central differences (unnormalised inputs).
    T, C = 5, 4
    tg = np.array([[1, 2], [3, 3], [2, 0]])
    il, tl = np.array([5, 5, 3]), np.array([2, 2, 0])
    lp = np.random.default_rng(8).standard_normal((T, 3, C))
    x = ng.tensor(lp, requires_grad=True)
    out = ctc_loss(x, tg, il, tl, reduction=reduction)
    up = np.random.default_rng(9).standard_normal(out.shape)
    out.backward(ng.tensor(up))
    if reduction == "none":
        gscale = up
    else:
        gscale = float(up) * (np.ones(3) if reduction == "sum" else 1.0 / np.maximum(tl, 1) / 3)
    mask = (np.arange(T)[:, None] < il[None, :])[:, :, None]
    free = _np(x.grad) - mask * np.exp(lp) * gscale[None, :, None]

    def f(a):
        return float(np.sum(ref_loss(a, tg, il, tl, reduction=reduction) * up))
    eps = 1e-6
    num = np.zeros_like(lp)
    for idx in np.ndindex(lp.shape):
        p, m = lp.copy(), lp.copy()
        p[idx] += eps
        m[idx] -= eps
        num[idx] = (f(p) - f(m)) / (2 * eps)
    np.testing.assert_allclose(free, num, rtol=1e-6, atol=1e-8)
    assert (_np(x.grad)[3:, 2] == 0).all()  # t >= input length


def test_no_grad_and_saved_alpha_reused():
    T, C = 6, 4
    tg, il, tl = np.array([[1, 2]]), [6], [2]
    lp = _log_probs(T, 1, C)
    with ng.no_grad():
        out = ctc_loss(ng.tensor(lp, requires_grad=True), tg, il, tl)
    assert not out.requires_grad
    x = ng.tensor(lp, requires_grad=True)
    loss = ctc_loss(x, tg, il, tl, reduction="sum")
    loss.backward(retain_graph=True)
    g1 = _np(x.grad).copy()
    loss.backward()
    np.testing.assert_allclose(_np(x.grad), 2 * g1, rtol=1e-14)


# ---- PyTorch parity ----------------------------------------------------------------------------
def _torch_pair(lp, targets, il, tl, dtype, reduction, zero_infinity, blank=0, up=None):
    torch = pytest.importorskip("torch")
    x = ng.tensor(lp.astype(dtype), requires_grad=True)
    xt = torch.tensor(lp.astype(dtype), requires_grad=True)
    out = ctc_loss(x, targets, il, tl, blank=blank, reduction=reduction, zero_infinity=zero_infinity)
    tout = torch.nn.functional.ctc_loss(xt, torch.tensor(targets), torch.tensor(il), torch.tensor(tl),
                                        blank=blank, reduction=reduction, zero_infinity=zero_infinity)
    if up is None:
        up = np.random.default_rng(11).standard_normal(out.shape)
    out.backward(ng.tensor(np.asarray(up, dtype)))
    tout.backward(torch.tensor(np.asarray(up, dtype)))
    return _np(out), tout.detach().numpy(), _np(x.grad), xt.grad.numpy()


TORCH_TOL = {np.float32: dict(rtol=1e-5, atol=1e-6), np.float64: dict(rtol=1e-10, atol=1e-12)}


@_mixed_params
def test_matches_torch_mixed_batch(dtype, layout, reduction, zero_infinity):
    lp, tg, il, tl, targets = _mixed(layout, seed=12)
    v, tv, g, tg_ = _torch_pair(lp, targets, il, tl, dtype, reduction, zero_infinity)
    assert v.dtype == tv.dtype and v.shape == tv.shape
    np.testing.assert_allclose(v, tv, **TORCH_TOL[dtype])
    np.testing.assert_array_equal(np.isnan(g), np.isnan(tg_))  # NaN rows of inf losses, as torch
    np.testing.assert_allclose(g, tg_, **TORCH_TOL[dtype])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_matches_torch_random_larger(dtype):
    rng = np.random.default_rng(13)
    T, N, C, S = 40, 6, 12, 10
    tl = rng.integers(0, S + 1, N)
    il = np.maximum(rng.integers(T // 2, T + 1, N), 2 * tl)  # long enough for any repeats
    tg = rng.integers(1, C, (N, S))
    tg[0, 1] = tg[0, 0]  # repeated labels
    lp = _log_probs(T, N, C, seed=14, scale=2.0)
    for reduction in REDUCTIONS:
        v, tv, g, tg_ = _torch_pair(lp, tg, il, tl, dtype, reduction, False)
        np.testing.assert_allclose(v, tv, **TORCH_TOL[dtype])
        np.testing.assert_allclose(g, tg_, **TORCH_TOL[dtype])


def test_matches_torch_blank_not_zero_and_unnormalised_inputs():
    T, C = 7, 5
    tg, il, tl = np.array([[0, 1, 1], [2, 3, 0]]), np.array([7, 6]), np.array([3, 2])
    lp = np.random.default_rng(15).standard_normal((T, 2, C))  # not log-probabilities: still torch's grads
    v, tv, g, tg_ = _torch_pair(lp, tg, il, tl, np.float64, "none", False, blank=4)
    np.testing.assert_allclose(v, tv, rtol=1e-10)
    np.testing.assert_allclose(g, tg_, rtol=1e-10, atol=1e-12)


def test_matches_torch_unbatched():
    torch = pytest.importorskip("torch")
    T, C = 6, 4
    lp = _log_probs(T, 1, C, seed=16)[:, 0]
    for reduction in REDUCTIONS:
        x = ng.tensor(lp, requires_grad=True)
        xt = torch.tensor(lp, requires_grad=True)
        out = ctc_loss(x, np.array([1, 2, 2]), [6], [3], reduction=reduction)
        tout = torch.nn.functional.ctc_loss(xt, torch.tensor([1, 2, 2]), torch.tensor([6]), torch.tensor([3]),
                                            reduction=reduction)
        assert out.shape == tuple(tout.shape)
        np.testing.assert_allclose(_np(out), tout.detach().numpy(), rtol=1e-12)
        out.backward()
        tout.backward()
        np.testing.assert_allclose(_np(x.grad), xt.grad.numpy(), rtol=1e-10, atol=1e-12)


# ---- errors --------------------------------------------------------------------------------------
def _err(kind, match, lp, *args, **kw):
    with pytest.raises(kind, match=match) as ei:
        ctc_loss(ng.tensor(lp), *args, **kw)
    assert "ctc_loss" in str(ei.value)
    return str(ei.value)


def test_errors():
    T, N, C = 6, 2, 4
    lp = _log_probs(T, N, C)
    tg, il, tl = np.array([[1, 2], [3, 3]]), [6, 5], [2, 2]
    msg = _err(RuntimeError, "blank", lp, np.array([[0, 2], [3, 3]]), il, tl)
    assert "(2, 2)" in msg and "int64" in msg
    msg = _err(IndexError, "out of bounds", lp, np.array([[1, 4], [3, 3]]), il, tl)
    assert "(6, 2, 4)" in msg and "float64" in msg
    _err(IndexError, "out of bounds", lp, np.array([[1, -1], [3, 3]]), il, tl)
    _err(RuntimeError, "at most T=6", lp, tg, [7, 5], tl)
    _err(RuntimeError, "padded target length", lp, tg, il, [3, 2])
    _err(RuntimeError, "sum\\(target_lengths\\)=4", lp, np.array([1, 2, 3]), il, tl)
    _err(RuntimeError, "batch_size=2", lp, tg, [6, 5, 4], tl)
    _err(RuntimeError, "batch_size=2", lp, tg, il, [2])
    _err(RuntimeError, "N=2", lp, np.array([[1, 2]]), il, tl)
    _err(RuntimeError, "at least 0", lp, tg, [-1, 5], tl)
    _err(RuntimeError, "at least 0", lp, tg, il, [2, -2])
    _err(RuntimeError, "integral", lp, tg, np.array([6.0, 5.0]), tl)
    _err(RuntimeError, "integer class indices", lp, np.array([[1.5, 2], [3, 3]]), il, tl)
    _err(RuntimeError, "3-D", lp[None], tg, il, tl)
    _err(RuntimeError, "3-D", lp[:, 0, 0], tg, il, tl)
    _err(RuntimeError, "blank=4", lp, tg, il, tl, blank=4)
    _err(RuntimeError, "2-D", lp, tg[None], il, tl)
    _err(ValueError, "reduction", lp, tg, il, tl, reduction="avg")
    with pytest.raises(TypeError, match="floating"):
        ctc_loss(ng.tensor(np.zeros((T, N, C), np.int64)), tg, il, tl)
    with pytest.raises(TypeError, match="Tensor"):
        ctc_loss(lp, tg, il, tl)
