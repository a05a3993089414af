"""Metric-learning losses (numbagrad/ops/loss_metric.py): every loss and reduction against
a float64 NumPy reference (float32 and float64, strided inputs too), float64 central
finite differences (inputs kept away from the hinges' kinks), and PyTorch (values and
gradients, float32 to 1e-5 relative and float64); then the hard cases: zero distance,
the flat region of a hinge, exact kinks, p = 1 / 3 / inf norms, swap, unbatched inputs,
zero vectors in cosine similarity, user distance functions, and bad input."""
import math

import numpy as np
import pytest

import numbagrad as ng
from numbagrad.nn import loss_metric as M
from optest import check_forward, check_grad, ng_torch_tensors

REDUCTIONS = ["none", "mean", "sum"]
INF = math.inf


# ---- float64 NumPy references ----------------------------------------------------------------
def _red(loss, reduction):
    if reduction == "mean":
        return np.asarray(loss.mean())
    if reduction == "sum":
        return np.asarray(loss.sum())
    return loss


def ref_pdist(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    d = np.asarray(x1, np.float64) - np.asarray(x2, np.float64) + eps
    if d.ndim == 0:
        return np.abs(d)
    n = np.linalg.norm(d, ord=p, axis=-1)
    return n[..., None] if keepdim else n


def ref_cos_sim(x1, x2, dim=1, eps=1e-8):
    x1, x2 = np.broadcast_arrays(np.asarray(x1, np.float64), np.asarray(x2, np.float64))
    n1 = np.maximum(np.sqrt((x1 * x1).sum(dim)), eps)
    n2 = np.maximum(np.sqrt((x2 * x2).sum(dim)), eps)
    return (x1 * x2).sum(dim) / (n1 * n2)


def ref_triplet(a, pos, neg, margin=1.0, p=2, eps=1e-6, swap=False, reduction="mean"):
    dp = ref_pdist(a, pos, p, eps)
    dn = ref_pdist(a, neg, p, eps)
    if swap:
        dn = np.minimum(dn, ref_pdist(pos, neg, p, eps))
    return _red(np.maximum(margin + dp - dn, 0.0), reduction)


def ref_cos_emb(x1, x2, y, margin=0.0, reduction="mean"):
    cos = (x1 * x2).sum(-1) / np.sqrt(((x1 * x1).sum(-1) + 1e-12) * ((x2 * x2).sum(-1) + 1e-12))
    return _red(np.where(y == 1, 1.0 - cos, np.maximum(cos - margin, 0.0)), reduction)


def ref_hinge(x, y, margin=1.0, reduction="mean"):
    return _red(np.where(y == 1, x, np.maximum(margin - x, 0.0)), reduction)


def ref_ranking(x1, x2, y, margin=0.0, reduction="mean"):
    return _red(np.maximum(-y * (x1 - x2) + margin, 0.0), reduction)


def ref_contrastive(x1, x2, y, margin=1.0, reduction="mean"):
    d = ref_pdist(x1, x2)
    return _red(0.5 * np.where(y == 1, d * d, np.maximum(margin - d, 0.0) ** 2), reduction)


# ---- input generators that keep finite differences off the kinks ------------------------------
def _search(make, ok, tries=500):
    for seed in range(tries):
        case = make(np.random.default_rng(seed))
        if ok(*case):
            return case
    raise AssertionError("no case found")  # pragma: no cover


def triplet_case(n=6, d=3, margin=1.0, p=2, swap=False, both=True):
    """Triplets with every hinge argument at least 0.05 from 0 (and, with swap, the two
    negative distances 0.05 apart); ``both``: active and inactive rows present."""
    def ok(a, pos, neg):
        dn = ref_pdist(a, neg, p)
        dpn = ref_pdist(pos, neg, p)
        z = margin + ref_pdist(a, pos, p) - (np.minimum(dn, dpn) if swap else dn)
        good = np.all(np.abs(z) > 0.05) and (not swap or np.all(np.abs(dn - dpn) > 0.05))
        if swap:  # the swap must matter somewhere
            good = good and np.any(dpn < dn)
        return good and (not both or (np.any(z > 0) and np.any(z < 0)))
    return _search(lambda r: tuple(r.standard_normal((n, d)) for _ in range(3)), ok)


def _pm1(r, n):
    y = r.choice(np.array([1, -1]), n)
    y[0], y[1] = 1, -1
    return y


def cos_emb_case(n=6, d=4, margin=0.0):
    def ok(x1, x2, y):
        cos = (x1 * x2).sum(-1) / np.sqrt((x1 * x1).sum(-1) * (x2 * x2).sum(-1))
        neg = cos[y == -1] - margin
        return np.all(np.abs(neg) > 0.05) and np.any(neg > 0) and np.any(neg < 0)
    return _search(lambda r: (r.standard_normal((n, d)), r.standard_normal((n, d)), _pm1(r, n)), ok)


def hinge_case(shape=(3, 4), margin=1.0):
    def ok(x, y):
        z = margin - x[y == -1]
        return np.all(np.abs(z) > 0.05) and np.any(z > 0) and np.any(z < 0)
    return _search(lambda r: (r.standard_normal(shape) * 1.5,
                              r.choice(np.array([1, -1]), shape)), ok)


def ranking_case(n=8, margin=0.0):
    def ok(x1, x2, y):
        z = -y * (x1 - x2) + margin
        return np.all(np.abs(z) > 0.05) and np.any(z > 0) and np.any(z < 0)
    return _search(lambda r: (r.standard_normal(n), r.standard_normal(n), _pm1(r, n).astype(np.float64)), ok)


def contrastive_case(n=8, d=3, margin=2.0):
    def ok(x1, x2, y):
        z = margin - ref_pdist(x1, x2)[y == 0]
        return np.any(z > 0.05) and np.any(z < -0.05)
    return _search(lambda r: (r.standard_normal((n, d)), r.standard_normal((n, d)),
                              np.r_[1, 0, r.integers(0, 2, n - 2)]), ok)


# ---- PyTorch parity ----------------------------------------------------------------------------
TORCH_TOL = {np.float32: dict(rtol=1e-5, atol=1e-6), np.float64: dict(rtol=1e-10, atol=1e-12)}


def torch_parity(fn, tfn, inputs, kw=None, tkw=None, dtypes=(np.float32, np.float64), seed=3):
    """``fn`` and ``tfn`` on the same values: outputs and the gradients of every floating
    input for one random upstream gradient."""
    torch = pytest.importorskip("torch")
    kw = kw or {}
    tkw = kw if tkw is None else tkw
    for dt in dtypes:
        ns, ts = ng_torch_tensors(inputs, dt)
        out, tout = fn(*ns, **kw), tfn(*ts, **tkw)
        assert out.shape == tuple(tout.shape), (out.shape, tuple(tout.shape))
        assert str(out.dtype) == str(tout.dtype).replace("torch.", "")
        t = TORCH_TOL[dt]
        np.testing.assert_allclose(out.detach().numpy(), tout.detach().numpy(), err_msg=f"forward {dt}", **t)
        g = np.random.default_rng(seed).standard_normal(out.shape).astype(out.dtype)
        out.backward(ng.tensor(g))
        tout.backward(torch.tensor(g))
        for i, (a, b) in enumerate(zip(ns, ts)):
            if b.grad is None:
                assert a.grad is None or not np.any(a.grad.numpy()), f"input {i}: torch has no gradient"
                continue
            assert a.grad is not None, f"input {i}: no gradient"
            np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), err_msg=f"grad of input {i} ({dt})", **t)


def TF():
    return pytest.importorskip("torch").nn.functional


# ---- pairwise_distance and cosine_similarity ----------------------------------------------------
PS = [2.0, 1.0, 3.0, INF, 0.5]


@pytest.mark.parametrize("p", PS)
@pytest.mark.parametrize("keepdim", [False, True])
def test_pairwise_distance(p, keepdim):
    x1, x2 = np.random.default_rng(1).standard_normal((2, 4, 3))
    kw = dict(p=p, keepdim=keepdim)
    check_forward(M.pairwise_distance, ref_pdist, [x1, x2], kwargs=kw, noncontig=True)
    check_grad(M.pairwise_distance, [x1, x2], kwargs=kw)
    check_grad(M.pairwise_distance, [x1, x2[:1]], kwargs=kw)  # broadcasting
    torch_parity(M.pairwise_distance, TF().pairwise_distance, [x1, x2], kw)
    torch_parity(M.pairwise_distance, TF().pairwise_distance, [x1, x2[0]], kw)


def test_pairwise_distance_shapes_and_dtypes():
    r = np.random.default_rng(2)
    check_forward(M.pairwise_distance, ref_pdist, [r.standard_normal(5), r.standard_normal(5)])  # 1-D -> 0-d
    check_forward(M.pairwise_distance, ref_pdist, [r.standard_normal((2, 3, 4)), r.standard_normal((3, 4))])
    check_forward(M.pairwise_distance, ref_pdist, [np.asarray(1.5), np.asarray(-0.5)])
    torch_parity(M.pairwise_distance, TF().pairwise_distance, [r.standard_normal((2, 3, 4)), r.standard_normal(4)])
    torch_parity(M.pairwise_distance, TF().pairwise_distance, [np.asarray(1.5), np.asarray(-0.5)])
    torch_parity(M.pairwise_distance, TF().pairwise_distance, [r.standard_normal((3, 4)), r.standard_normal((3, 4))],
                 dict(p=-1.0))
    out = M.pairwise_distance(ng.tensor([[1, 2]]), ng.tensor([[4, 6]]))
    assert out.dtype == ng.get_default_dtype() and np.allclose(out.numpy(), [5.0], rtol=1e-5)
    a = ng.tensor(np.ones((2, 3), np.float32))
    b = ng.tensor(np.zeros((2, 3), np.float64))
    assert M.pairwise_distance(a, b).dtype == np.float64
    h = M.pairwise_distance(a.half(), b.float().half())
    assert h.dtype == np.float16 and np.allclose(h.numpy().astype(np.float64), np.sqrt(3), rtol=1e-3)
    assert M.pairwise_distance(a, b, p=0).numpy().tolist() == [3.0, 3.0]


def test_pairwise_distance_zero_difference_gradient():
    # eps = 0 and x1 == x2: the norm is 0 and its gradient is 0 (torch's convention), not NaN
    x = np.random.default_rng(3).standard_normal((3, 4))
    for p in (2.0, 1.0, 3.0, INF):
        torch_parity(M.pairwise_distance, TF().pairwise_distance, [x, x.copy()], dict(p=p, eps=0.0))
        a = ng.tensor(x, requires_grad=True)
        M.pairwise_distance(a, ng.tensor(x), p=p, eps=0.0).sum().backward()
        assert np.all(np.isfinite(a.grad.numpy()))
    # p = inf with tied maxima: the gradient is split evenly, as in torch
    torch_parity(M.pairwise_distance, TF().pairwise_distance,
                 [np.array([[1.0, -1.0, 0.5], [2.0, 0.0, -2.0]]), np.zeros((2, 3))], dict(p=INF, eps=0.0))


@pytest.mark.parametrize("dim", [1, 0, -1])
def test_cosine_similarity(dim):
    r = np.random.default_rng(4)
    x1, x2 = r.standard_normal((2, 3, 4, 2))
    kw = dict(dim=dim)
    check_forward(M.cosine_similarity, ref_cos_sim, [x1, x2], kwargs=kw, noncontig=True)
    check_grad(M.cosine_similarity, [x1, x2], kwargs=kw)
    check_grad(M.cosine_similarity, [x1, x2[:, :1]], kwargs=kw)
    torch_parity(M.cosine_similarity, TF().cosine_similarity, [x1, x2], kw)
    torch_parity(M.cosine_similarity, TF().cosine_similarity, [x1[:1], x2], kw)


def test_cosine_similarity_zero_and_tiny_vectors():
    r = np.random.default_rng(5)
    x1, x2 = r.standard_normal((2, 4, 3))
    x1[0] = 0.0
    x1[1] = 1e-10  # norm below eps: clamped, as in torch
    x2[2] = 0.0
    check_forward(M.cosine_similarity, ref_cos_sim, [x1, x2], dtypes=(np.float64,))
    torch_parity(M.cosine_similarity, TF().cosine_similarity, [x1, x2], dtypes=(np.float64,))
    a = ng.tensor(x1, requires_grad=True)
    M.cosine_similarity(a, ng.tensor(x2)).sum().backward()
    assert np.all(np.isfinite(a.grad.numpy()))
    torch_parity(M.cosine_similarity, TF().cosine_similarity, [r.standard_normal(5), r.standard_normal(5)],
                 dict(dim=0))


# ---- triplet_margin_loss ------------------------------------------------------------------------
TRIPLET = [dict(), dict(p=1), dict(p=3), dict(swap=True), dict(p=1, swap=True, margin=0.5), dict(p=INF)]


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("cfg", TRIPLET, ids=[str(c) for c in TRIPLET])
def test_triplet_margin_loss(cfg, reduction):
    a, pos, neg = triplet_case(margin=cfg.get("margin", 1.0), p=cfg.get("p", 2), swap=cfg.get("swap", False))
    kw = dict(cfg, reduction=reduction)
    check_forward(M.triplet_margin_loss, ref_triplet, [a, pos, neg], kwargs=kw, noncontig=True)
    check_grad(M.triplet_margin_loss, [a, pos, neg], kwargs=kw)
    torch_parity(M.triplet_margin_loss, TF().triplet_margin_loss, [a, pos, neg], kw)


def test_triplet_swap_changes_the_loss():
    a, pos, neg = triplet_case(swap=True)
    plain = M.triplet_margin_loss(ng.tensor(a), ng.tensor(pos), ng.tensor(neg), reduction="none").numpy()
    swapped = M.triplet_margin_loss(ng.tensor(a), ng.tensor(pos), ng.tensor(neg), swap=True,
                                    reduction="none").numpy()
    assert np.all(swapped >= plain) and np.any(swapped > plain)


@pytest.mark.parametrize("p", [2, 1, 3])
def test_triplet_zero_distance(p):
    # anchor == positive: d(a, p) = ||eps||_p, finite gradient through the eps (as torch)
    r = np.random.default_rng(6)
    a = r.standard_normal((4, 3))
    neg = a + 0.1 * r.standard_normal((4, 3))  # close negatives: the hinge is active
    for reduction in REDUCTIONS:
        kw = dict(p=p, reduction=reduction)
        check_forward(M.triplet_margin_loss, ref_triplet, [a, a.copy(), neg], kwargs=kw)
        torch_parity(M.triplet_margin_loss, TF().triplet_margin_loss, [a, a.copy(), neg], kw)
    # the analytic gradient (p = 2): d/da ||a - p + eps|| = eps / ||eps|| = 1/sqrt(D) each
    if p == 2:
        ta = ng.tensor(a, requires_grad=True)
        tp = ng.tensor(a.copy(), requires_grad=True)
        tn = ng.tensor(neg, requires_grad=True)
        M.triplet_margin_loss(ta, tp, tn, reduction="sum").backward()
        dn = a - neg + 1e-6
        want = 1 / np.sqrt(3) - dn / np.linalg.norm(dn, axis=1, keepdims=True)
        np.testing.assert_allclose(ta.grad.numpy(), want, rtol=1e-7)
        np.testing.assert_allclose(tp.grad.numpy(), -np.full((4, 3), 1 / np.sqrt(3)), rtol=1e-7)
    # unbatched, float32
    torch_parity(M.triplet_margin_loss, TF().triplet_margin_loss, [a[0], a[0].copy(), neg[0]], dict(p=p))


def test_triplet_flat_region_gradient_is_exactly_zero():
    r = np.random.default_rng(7)
    a = r.standard_normal((5, 3))
    pos = a + 0.01 * r.standard_normal((5, 3))
    neg = a + 10.0
    for dt in (np.float32, np.float64):
        ts = [ng.tensor(v.astype(dt), requires_grad=True) for v in (a, pos, neg)]
        out = M.triplet_margin_loss(*ts, swap=True)
        assert float(out) == 0.0
        out.backward()
        for t in ts:
            assert t.grad is not None and np.all(t.grad.numpy() == 0.0)
    # mixed rows: the inactive rows get exactly zero gradient
    a, pos, neg = triplet_case()
    ts = [ng.tensor(v, requires_grad=True) for v in (a, pos, neg)]
    M.triplet_margin_loss(*ts).backward()
    inactive = 1.0 + ref_pdist(a, pos) - ref_pdist(a, neg) < 0
    assert inactive.any()
    for t in ts:
        assert np.all(t.grad.numpy()[inactive] == 0.0) and np.any(t.grad.numpy()[~inactive] != 0.0)


def test_triplet_exact_kink_matches_torch():
    # margin + d(a,p) - d(a,n) == 0 exactly (eps = 0, p = 1, exact values): torch's clamp_min
    # passes the gradient at 0, and so does numbagrad
    a = np.array([[0.0, 0.0], [0.0, 0.0]])
    pos = np.array([[1.0, 0.0], [0.0, 2.0]])
    neg = np.array([[2.0, 0.0], [0.0, 3.0]])
    torch_parity(M.triplet_margin_loss, TF().triplet_margin_loss, [a, pos, neg], dict(p=1, eps=0.0))


def test_triplet_unbatched_broadcast_empty_and_dtypes():
    r = np.random.default_rng(8)
    a, pos, neg = r.standard_normal((3, 5))
    for reduction in REDUCTIONS:
        kw = dict(reduction=reduction, margin=3.0)
        check_forward(M.triplet_margin_loss, ref_triplet, [a, pos, neg], kwargs=kw)
        torch_parity(M.triplet_margin_loss, TF().triplet_margin_loss, [a, pos, neg], kw)
    a, pos, neg = triplet_case()
    torch_parity(M.triplet_margin_loss, TF().triplet_margin_loss, [a, pos[:1], neg], dict(reduction="none"))
    e = np.zeros((0, 3))
    assert math.isnan(float(M.triplet_margin_loss(e, e, e)))
    assert float(M.triplet_margin_loss(e, e, e, reduction="sum")) == 0.0
    assert M.triplet_margin_loss(e, e, e, reduction="none").shape == (0,)
    f32, f64 = ng.tensor(a.astype(np.float32)), ng.tensor(pos)
    assert M.triplet_margin_loss(f32, f64, f32).dtype == np.float64
    h = M.triplet_margin_loss(*(ng.tensor(v.astype(np.float16)) for v in (a, pos, neg)), reduction="none")
    want = M.triplet_margin_loss(*(ng.tensor(v.astype(np.float16).astype(np.float32)) for v in (a, pos, neg)),
                                 reduction="none")
    assert h.dtype == np.float16
    np.testing.assert_array_equal(h.numpy(), want.numpy().astype(np.float16))


def test_triplet_legacy_reduction_args():
    a, pos, neg = triplet_case()
    base = [ng.tensor(v) for v in (a, pos, neg)]
    for sa, red, want in ((False, None, "sum"), (None, False, "none"), (True, True, "mean")):
        got = M.triplet_margin_loss(*base, size_average=sa, reduce=red).numpy()
        np.testing.assert_allclose(got, ref_triplet(a, pos, neg, reduction=want), rtol=1e-12)
    got = M.TripletMarginLoss(size_average=False)(*base).numpy()
    np.testing.assert_allclose(got, ref_triplet(a, pos, neg, reduction="sum"), rtol=1e-12)


def test_triplet_errors():
    x = ng.randn(3, 4)
    with pytest.raises(RuntimeError, match="triplet_margin_loss.*same number of dimensions.*2D.*1D"):
        M.triplet_margin_loss(x, ng.randn(4), x)
    with pytest.raises(RuntimeError, match=r"triplet_margin_loss.*\(3, 5\).*not broadcastable"):
        M.triplet_margin_loss(x, ng.randn(3, 5), x)
    for m in (0, -1.0):
        with pytest.raises(ValueError, match="margin must be greater than 0"):
            M.triplet_margin_loss(x, x, x, margin=m)
        with pytest.raises(ValueError, match="margin must be greater than 0"):
            M.triplet_margin_with_distance_loss(x, x, x, margin=m)
        with pytest.raises(ValueError, match="margin must be greater than 0"):
            M.TripletMarginLoss(margin=m)
        with pytest.raises(ValueError, match="margin must be greater than 0"):
            M.TripletMarginWithDistanceLoss(margin=m)
    with pytest.raises(ValueError, match="reduction"):
        M.triplet_margin_loss(x, x, x, reduction="avg")
    with pytest.raises(ValueError, match="reduction"):
        M.triplet_margin_with_distance_loss(x, x, x, reduction="avg")
    with pytest.raises(RuntimeError, match="same number of dimensions"):
        M.triplet_margin_with_distance_loss(x, x, ng.randn(1, 3, 4))


# ---- triplet_margin_with_distance_loss ------------------------------------------------------------
def _cos_dist_ng(x, y):
    return 1.0 - M.cosine_similarity(x, y)


def _l1_dist_ng(x, y):
    return ng.sum(ng.abs(x - y), dim=-1)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("dist", [None, "cos", "l1"])
@pytest.mark.parametrize("swap", [False, True])
def test_triplet_with_distance(dist, swap, reduction):
    torch = pytest.importorskip("torch") if dist is not None else None
    a, pos, neg = triplet_case(swap=swap) if dist is None else _search(
        lambda r: tuple(r.standard_normal((6, 3)) for _ in range(3)), lambda *c: True)
    fn_ng = {None: None, "cos": _cos_dist_ng, "l1": _l1_dist_ng}[dist]
    kw = dict(swap=swap, reduction=reduction, margin=0.5)
    if dist is None:
        check_forward(M.triplet_margin_with_distance_loss,
                      lambda *xs, **k: ref_triplet(*xs, **k), [a, pos, neg], kwargs=kw)
    kwn = dict(kw, distance_function=fn_ng)
    check_grad(M.triplet_margin_with_distance_loss, [a, pos, neg], kwargs=kwn)
    tk = dict(kw)
    if dist == "cos":
        tk["distance_function"] = lambda x, y: 1.0 - torch.nn.functional.cosine_similarity(x, y)
    elif dist == "l1":
        tk["distance_function"] = lambda x, y: (x - y).abs().sum(-1)
    torch_parity(M.triplet_margin_with_distance_loss, TF().triplet_margin_with_distance_loss, [a, pos, neg],
                 kwn, tk)


def test_triplet_with_distance_module_default_and_custom():
    a, pos, neg = triplet_case()
    ts = [ng.tensor(v) for v in (a, pos, neg)]
    m = M.TripletMarginWithDistanceLoss()
    assert isinstance(m.distance_function, M.PairwiseDistance)
    np.testing.assert_allclose(m(*ts).numpy(), ref_triplet(a, pos, neg), rtol=1e-12)
    m = M.TripletMarginWithDistanceLoss(distance_function=M.PairwiseDistance(p=1), margin=2.0, reduction="sum")
    assert "distance_function" in dict(m.named_modules())
    np.testing.assert_allclose(m(*ts).numpy(), ref_triplet(a, pos, neg, margin=2.0, p=1, reduction="sum"),
                               rtol=1e-12)
    # the custom distance gets the graph: gradients reach a parameter inside it
    w = ng.tensor(np.ones(3), requires_grad=True)
    loss = M.triplet_margin_with_distance_loss(*ts, distance_function=lambda x, y: ng.sum(w * (x - y) ** 2, dim=-1))
    loss.backward()
    assert w.grad is not None and np.any(w.grad.numpy() != 0)


# ---- cosine_embedding_loss ----------------------------------------------------------------------
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("margin", [0.0, 0.3, -0.2])
def test_cosine_embedding_loss(margin, reduction):
    x1, x2, y = cos_emb_case(margin=margin)
    kw = dict(margin=margin, reduction=reduction)
    check_forward(M.cosine_embedding_loss, ref_cos_emb, [x1, x2, y], kwargs=kw, noncontig=True)
    check_grad(M.cosine_embedding_loss, [x1, x2, y], kwargs=kw)
    torch_parity(M.cosine_embedding_loss, TF().cosine_embedding_loss, [x1, x2, y], kw)


def test_cosine_embedding_unbatched_broadcast_kink_and_zero_vectors():
    x1, x2, y = cos_emb_case()
    for reduction in REDUCTIONS:
        kw = dict(reduction=reduction)
        for yy in (np.array(1), np.array(-1)):
            check_forward(M.cosine_embedding_loss, ref_cos_emb, [x1[0], x2[0], yy], kwargs=kw)
            torch_parity(M.cosine_embedding_loss, TF().cosine_embedding_loss, [x1[0], x2[0], yy], kw)
        torch_parity(M.cosine_embedding_loss, TF().cosine_embedding_loss, [x1, x2[:1], y], kw)
        torch_parity(M.cosine_embedding_loss, TF().cosine_embedding_loss, [x1[:1], x2[:1], y], kw)
        check_grad(M.cosine_embedding_loss, [x1[:1], x2, y], kwargs=kw)
    # orthogonal vectors with margin 0: cos - margin == 0 exactly (torch passes the gradient)
    torch_parity(M.cosine_embedding_loss, TF().cosine_embedding_loss,
                 [np.array([[1.0, 0.0], [0.0, 2.0]]), np.array([[0.0, 1.0], [3.0, 0.0]]), np.array([-1, -1])])
    # zero vectors: the 1e-12 keeps everything finite
    z = np.zeros((2, 3))
    z2 = np.random.default_rng(9).standard_normal((2, 3))
    torch_parity(M.cosine_embedding_loss, TF().cosine_embedding_loss, [z, z2, np.array([1, -1])],
                 dtypes=(np.float64,))
    # float targets, a float64 target keeps the inputs' dtype (torch too)
    torch_parity(M.cosine_embedding_loss, TF().cosine_embedding_loss, [x1, x2, y.astype(np.float64)])
    h = M.cosine_embedding_loss(ng.tensor(x1.astype(np.float16)), ng.tensor(x2.astype(np.float16)), y)
    assert h.dtype == np.float16
    assert abs(float(h) - float(ref_cos_emb(x1, x2, y))) < 1e-2


def test_cosine_embedding_errors():
    x = ng.randn(3, 4)
    with pytest.raises(RuntimeError, match="cosine_embedding_loss.*0D or 1D target"):
        M.cosine_embedding_loss(x, x, ng.ones(3, 1))
    with pytest.raises(RuntimeError, match=r"1D target tensor expects 2D input.*\(4,\)"):
        M.cosine_embedding_loss(x, ng.randn(4), ng.ones(3))
    with pytest.raises(RuntimeError, match="0D target tensor expects 1D input"):
        M.cosine_embedding_loss(x, x, ng.tensor(1))
    with pytest.raises(RuntimeError, match=r"cosine_embedding_loss.*\(3, 5\).*not broadcastable"):
        M.cosine_embedding_loss(x, ng.randn(3, 5), ng.ones(3))
    with pytest.raises(RuntimeError, match=r"target \(2,\).*does not broadcast"):
        M.cosine_embedding_loss(x, x, ng.ones(2))
    with pytest.raises(ValueError, match=r"cosine_embedding_loss: target values must be 1 or -1, got \[0\]"):
        M.cosine_embedding_loss(x, x, ng.tensor([1, 0, -1]))
    with pytest.raises(ValueError, match="reduction"):
        M.cosine_embedding_loss(x, x, ng.ones(3), reduction="max")


# ---- hinge_embedding_loss ------------------------------------------------------------------------
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("margin", [1.0, 0.5, 2.0])
def test_hinge_embedding_loss(margin, reduction):
    x, y = hinge_case(margin=margin)
    kw = dict(margin=margin, reduction=reduction)
    check_forward(M.hinge_embedding_loss, ref_hinge, [x, y], kwargs=kw, noncontig=True)
    check_grad(M.hinge_embedding_loss, [x, y], kwargs=kw)
    torch_parity(M.hinge_embedding_loss, TF().hinge_embedding_loss, [x, y], kw)
    torch_parity(M.hinge_embedding_loss, TF().hinge_embedding_loss, [x, y.astype(np.float32)], kw)


def test_hinge_embedding_shapes_kink_and_errors():
    x, y = hinge_case()
    for reduction in REDUCTIONS:
        kw = dict(reduction=reduction)
        check_forward(M.hinge_embedding_loss, ref_hinge, [x[0, 0], y[0, 0]], kwargs=kw)  # 0-d
        torch_parity(M.hinge_embedding_loss, TF().hinge_embedding_loss, [x[0], y[0]], kw)  # 1-D
        torch_parity(M.hinge_embedding_loss, TF().hinge_embedding_loss, [x, y[0]], kw)  # broadcast target
        torch_parity(M.hinge_embedding_loss, TF().hinge_embedding_loss, [x[0], y], kw)  # broadcast input
        torch_parity(M.hinge_embedding_loss, TF().hinge_embedding_loss, [x, y.astype(np.float64)], kw,
                     dtypes=(np.float32,))  # float64 target: the result keeps the input's dtype
    # exactly at the kink x == margin, and the flat region (x > margin, target -1): grad 0
    torch_parity(M.hinge_embedding_loss, TF().hinge_embedding_loss,
                 [np.array([1.0, 2.0, 0.5, 1.0]), np.array([-1, -1, -1, 1])], dict(reduction="sum"))
    t = ng.tensor(np.array([2.0, 3.0]), requires_grad=True)
    M.hinge_embedding_loss(t, ng.tensor([-1, -1])).backward()
    assert np.all(t.grad.numpy() == 0.0)
    with pytest.raises(RuntimeError, match=r"hinge_embedding_loss.*\(3, 4\).*\(5,\).*not broadcastable"):
        M.hinge_embedding_loss(ng.randn(3, 4), ng.ones(5))
    with pytest.raises(ValueError, match=r"hinge_embedding_loss: target values must be 1 or -1, got \[0, 2\]"):
        M.hinge_embedding_loss(ng.randn(4), ng.tensor([1, 0, 2, -1]))


# ---- margin_ranking_loss --------------------------------------------------------------------------
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("margin", [0.0, 0.5])
def test_margin_ranking_loss(margin, reduction):
    x1, x2, y = ranking_case(margin=margin)
    kw = dict(margin=margin, reduction=reduction)
    check_forward(M.margin_ranking_loss, ref_ranking, [x1, x2, y], kwargs=kw, noncontig=True)
    check_grad(M.margin_ranking_loss, [x1, x2, y], kwargs=kw)  # the float target gets its gradient
    torch_parity(M.margin_ranking_loss, TF().margin_ranking_loss, [x1, x2, y], kw)
    torch_parity(M.margin_ranking_loss, TF().margin_ranking_loss, [x1, x2, y.astype(np.int64)], kw)


def test_margin_ranking_shapes_kink_and_errors():
    x1, x2, y = ranking_case()
    for reduction in REDUCTIONS:
        kw = dict(reduction=reduction)
        torch_parity(M.margin_ranking_loss, TF().margin_ranking_loss, [x1[0], x2[0], y[0]], kw)  # 0-d
        torch_parity(M.margin_ranking_loss, TF().margin_ranking_loss, [x1, x2[:1], y], kw)  # broadcast
        torch_parity(M.margin_ranking_loss, TF().margin_ranking_loss,
                     [x1.reshape(2, 4), x2.reshape(2, 4), y.reshape(2, 4)], kw)
    # equal scores with margin 0: exactly at the kink, torch passes the gradient
    torch_parity(M.margin_ranking_loss, TF().margin_ranking_loss,
                 [np.array([1.0, 2.0, 3.0]), np.array([1.0, 3.0, 3.0]), np.array([1.0, -1.0, -1.0])],
                 dict(reduction="sum"))
    # a float64 target promotes a float32 loss (torch too)
    out = M.margin_ranking_loss(ng.tensor(x1.astype(np.float32)), ng.tensor(x2.astype(np.float32)), ng.tensor(y))
    assert out.dtype == np.float64
    with pytest.raises(RuntimeError, match="margin_ranking_loss.*same number of dimensions"):
        M.margin_ranking_loss(ng.randn(3), ng.randn(3), ng.ones(3, 1))
    with pytest.raises(RuntimeError, match=r"margin_ranking_loss.*\(2,\).*not broadcastable"):
        M.margin_ranking_loss(ng.randn(3), ng.randn(3), ng.ones(2))
    # any real target is accepted, as in torch (a differentiable multiplier)
    torch_parity(M.margin_ranking_loss, TF().margin_ranking_loss,
                 [np.array([0.3, -1.0, 2.0]), np.array([1.0, 0.5, 0.1]), np.array([0.5, -2.0, 0.0])])


# ---- contrastive_loss --------------------------------------------------------------------------------
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("margin", [2.0, 1.0])
def test_contrastive_loss(margin, reduction):
    x1, x2, y = contrastive_case(margin=margin) if margin == 2.0 else contrastive_case(margin=margin, d=2)
    kw = dict(margin=margin, reduction=reduction)
    check_forward(M.contrastive_loss, ref_contrastive, [x1, x2, y], kwargs=kw, noncontig=True)
    check_grad(M.contrastive_loss, [x1, x2, y], kwargs=kw)
    # same values for int, float and bool targets
    base = M.contrastive_loss(x1, x2, y, **kw).numpy()
    for yy in (y.astype(np.float32), y.astype(bool), ng.tensor(y)):
        np.testing.assert_array_equal(M.contrastive_loss(x1, x2, yy, **kw).numpy(), base)
    torch = pytest.importorskip("torch")

    def torch_contrastive(a, b, t, margin, reduction):  # the same definition written in torch
        d = torch.nn.functional.pairwise_distance(a, b)
        loss = 0.5 * torch.where(t == 1, d ** 2, torch.clamp_min(margin - d, 0) ** 2)
        return {"mean": loss.mean, "sum": loss.sum, "none": lambda: loss}[reduction]()

    torch_parity(M.contrastive_loss, torch_contrastive, [x1, x2, y], kw)


def test_contrastive_shapes_regions_and_errors():
    r = np.random.default_rng(10)
    x1, x2 = r.standard_normal((2, 5))
    for y in (np.array(1), np.array(0)):
        check_forward(M.contrastive_loss, ref_contrastive, [x1, x2, y], kwargs=dict(margin=5.0))  # unbatched
    check_grad(M.contrastive_loss, [x1, x2, np.array(0)], kwargs=dict(margin=5.0))
    b1, b2 = r.standard_normal((2, 2, 3, 4))
    y = r.integers(0, 2, (2, 3))
    check_forward(M.contrastive_loss, ref_contrastive, [b1, b2, y], kwargs=dict(reduction="none"))
    check_forward(M.contrastive_loss, ref_contrastive, [b1, b2[:1], y], kwargs=dict(reduction="none"))
    # dissimilar pairs beyond the margin: loss 0 and gradient exactly 0
    a = ng.tensor(np.zeros((2, 3)), requires_grad=True)
    out = M.contrastive_loss(a, ng.tensor(np.full((2, 3), 3.0)), np.array([0, 0]))
    assert float(out) == 0.0
    out.backward()
    assert np.all(a.grad.numpy() == 0.0)
    # similar identical pairs: d = ||eps||, gradient finite
    a = ng.tensor(np.ones((2, 3)), requires_grad=True)
    M.contrastive_loss(a, ng.tensor(np.ones((2, 3))), np.array([1, 1])).backward()
    assert np.all(np.isfinite(a.grad.numpy()))
    with pytest.raises(ValueError, match=r"contrastive_loss: target must have the shape.*\(4,\).*got target \(3,\)"):
        M.contrastive_loss(ng.randn(4, 2), ng.randn(4, 2), np.array([1, 0, 1]))
    with pytest.raises(ValueError, match=r"contrastive_loss: target values must be 1 or 0, got \[-1\]"):
        M.contrastive_loss(ng.randn(3, 2), ng.randn(3, 2), np.array([1, -1, 0]))
    with pytest.raises(RuntimeError, match="contrastive_loss.*not broadcastable"):
        M.contrastive_loss(ng.randn(3, 2), ng.randn(3, 4), np.array([1, 1, 0]))
    with pytest.raises(ValueError, match="reduction"):
        M.contrastive_loss(ng.randn(3, 2), ng.randn(3, 2), np.array([1, 1, 0]), reduction="avg")


# ---- modules ---------------------------------------------------------------------------------------
def test_modules_match_functionals():
    r = np.random.default_rng(11)
    a, pos, neg = (ng.tensor(v) for v in triplet_case())
    x1, x2 = ng.tensor(r.standard_normal((4, 3))), ng.tensor(r.standard_normal((4, 3)))
    pm = ng.tensor(np.array([1, -1, -1, 1]))
    y01 = np.array([1, 0, 0, 1])
    cases = [
        (M.PairwiseDistance(p=1.0, keepdim=True), (x1, x2), lambda: M.pairwise_distance(x1, x2, 1.0, keepdim=True)),
        (M.CosineSimilarity(dim=0), (x1, x2), lambda: M.cosine_similarity(x1, x2, dim=0)),
        (M.TripletMarginLoss(margin=0.5, p=3, swap=True, reduction="none"), (a, pos, neg),
         lambda: M.triplet_margin_loss(a, pos, neg, margin=0.5, p=3, swap=True, reduction="none")),
        (M.TripletMarginWithDistanceLoss(swap=True, reduction="sum"), (a, pos, neg),
         lambda: M.triplet_margin_with_distance_loss(a, pos, neg, swap=True, reduction="sum")),
        (M.CosineEmbeddingLoss(margin=0.1), (x1, x2, pm), lambda: M.cosine_embedding_loss(x1, x2, pm, 0.1)),
        (M.HingeEmbeddingLoss(margin=0.5, reduction="sum"), (x1[:, 0], pm),
         lambda: M.hinge_embedding_loss(x1[:, 0], pm, 0.5, reduction="sum")),
        (M.MarginRankingLoss(margin=0.2), (x1[:, 0], x2[:, 0], pm),
         lambda: M.margin_ranking_loss(x1[:, 0], x2[:, 0], pm, 0.2)),
        (M.ContrastiveLoss(margin=2.0, reduction="none"), (x1, x2, y01),
         lambda: M.contrastive_loss(x1, x2, y01, 2.0, reduction="none")),
    ]
    for mod, args, fn in cases:
        np.testing.assert_array_equal(mod(*args).numpy(), fn().numpy(), err_msg=type(mod).__name__)
    assert M.MarginRankingLoss(size_average=False).reduction == "sum"
    assert M.HingeEmbeddingLoss(reduce=False).reduction == "none"
    assert M.CosineEmbeddingLoss().margin == 0.0 and M.HingeEmbeddingLoss().margin == 1.0
    with pytest.raises(ValueError, match="reduction"):
        M.ContrastiveLoss(reduction="avg")


def test_module_defaults_match_torch():
    torch = pytest.importorskip("torch")
    pairs = [(M.TripletMarginLoss(), torch.nn.TripletMarginLoss(), ("margin", "p", "eps", "swap", "reduction")),
             (M.TripletMarginWithDistanceLoss(), torch.nn.TripletMarginWithDistanceLoss(),
              ("margin", "swap", "reduction")),
             (M.CosineEmbeddingLoss(), torch.nn.CosineEmbeddingLoss(), ("margin", "reduction")),
             (M.HingeEmbeddingLoss(), torch.nn.HingeEmbeddingLoss(), ("margin", "reduction")),
             (M.MarginRankingLoss(), torch.nn.MarginRankingLoss(), ("margin", "reduction")),
             (M.PairwiseDistance(), torch.nn.PairwiseDistance(), ("norm", "eps", "keepdim")),
             (M.CosineSimilarity(), torch.nn.CosineSimilarity(), ("dim", "eps"))]
    for ours, theirs, attrs in pairs:
        for k in attrs:
            assert getattr(ours, k) == getattr(theirs, k), (type(ours).__name__, k)
