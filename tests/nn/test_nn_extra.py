"""The padding layers (``numbagrad/nn/padding.py``) and the less common layers and losses
(``numbagrad/ops/nn_extra.py``, ``numbagrad/nn/extra.py``) against PyTorch: forward values in
float32 and float64, gradients against torch's and against float64 central differences
(``optest.check_grad``), batched and unbatched inputs, the identities of fold / unfold,
reprs, and the errors (raised where torch raises, of torch's type)."""
import numpy as np
import pytest

import numbagrad as ng
import numbagrad.nn as nn
import numbagrad.nn.functional as F
from optest import check_grad, randn

torch = pytest.importorskip("torch")
TF = torch.nn.functional

# torch warns on the legacy size_average / reduce arguments; numbagrad does not
pytestmark = pytest.mark.filterwarnings("ignore:size_average and reduce args:UserWarning")

TOL = {np.float32: dict(rtol=1e-5, atol=1e-6), np.float64: dict(rtol=1e-10, atol=1e-12)}


def _both(ng_fn, t_fn, inputs, diff=None, dtypes=(np.float32, np.float64), seed=0):
    """``ng_fn(*tensors)`` vs ``t_fn(*torch tensors)``: forward in each dtype, then in float64
    the gradients of the floating inputs ``diff`` (default: all floating ones) for one random
    upstream gradient. Integer arrays are passed as int64 tensors, never differentiated."""
    diff = [i for i, a in enumerate(inputs) if a.dtype.kind == "f"] if diff is None else diff
    for dt in dtypes:
        cast = [a.astype(dt) if a.dtype.kind == "f" else a for a in inputs]
        ours = [ng.tensor(a, requires_grad=(i in diff and dt == np.float64)) for i, a in enumerate(cast)]
        theirs = [torch.tensor(a, requires_grad=(i in diff and dt == np.float64)) for i, a in enumerate(cast)]
        y, ty = ng_fn(*ours), t_fn(*theirs)
        assert tuple(y.shape) == tuple(ty.shape)
        assert y.dtype == dt
        np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), **TOL[dt])
        if dt == np.float64 and diff:
            g = np.random.default_rng(seed).standard_normal(tuple(ty.shape))
            y.backward(ng.tensor(g))
            ty.backward(torch.tensor(g))
            for i in diff:
                np.testing.assert_allclose(ours[i].grad.numpy(), theirs[i].grad.numpy(), rtol=1e-9, atol=1e-11)


def _same_error(call, same_type=True):
    """``call(lib)`` raises on numbagrad exactly where it raises on torch, with torch's type
    (``same_type=False``: any type, where numbagrad's ``F.pad`` raises ``ValueError`` for torch's
    ``RuntimeError``)."""
    errs = []
    for lib in (ng, torch):
        try:
            call(lib)
            errs.append(None)
        except Exception as e:  # noqa: BLE001 - compared below
            errs.append(e)
    ours, theirs = errs
    assert (ours is None) == (theirs is None), f"numbagrad: {ours!r}, torch: {theirs!r}"
    if ours is not None and same_type:
        assert isinstance(ours, type(theirs)), f"numbagrad raised {ours!r}, torch {theirs!r}"
    return ours


# ---- padding layers --------------------------------------------------------------------------------
KINDS = ["ZeroPad", "ConstantPad", "ReflectionPad", "ReplicationPad", "CircularPad"]
PADS = {1: (1, 2), 2: (2, 0, 1, 2), 3: (1, 0, 0, 2, 2, 1)}


def _pad_args(kind, pad):
    return (pad, 1.5) if kind == "ConstantPad" else (pad,)


@pytest.mark.parametrize("d", [1, 2, 3])
@pytest.mark.parametrize("kind", KINDS)
def test_padding_layers_match_torch(kind, d):
    name = f"{kind}{d}d"
    for pad in (PADS[d], 2 if kind != "CircularPad" else 1):
        m, tm = getattr(nn, name)(*_pad_args(kind, pad)), getattr(torch.nn, name)(*_pad_args(kind, pad))
        assert m.padding == tm.padding and repr(m) == repr(tm)
        assert m.state_dict() == {} and len(tm.state_dict()) == 0
        for batched in (False, True):
            shape = (2,) * batched + (2,) + (3, 4, 5)[3 - d:]
            _both(m, tm, [randn(*shape, seed=d)])


@pytest.mark.parametrize("d", [1, 2, 3])
@pytest.mark.parametrize("kind", KINDS)
def test_padding_layers_gradcheck(kind, d):
    m = getattr(nn, f"{kind}{d}d")(*_pad_args(kind, PADS[d]))
    check_grad(m, [randn(*((1, 2) + (3, 3, 4)[3 - d:]), seed=1)])


@pytest.mark.parametrize("d", [1, 2, 3])
@pytest.mark.parametrize("kind", KINDS)
def test_padding_layers_refuse_ranks_as_torch(kind, d):
    name = f"{kind}{d}d"
    for ndim in range(1, 7):
        shape = (3, 4, 5, 3, 4, 5)[:ndim]
        _same_error(lambda t: getattr(t.nn, name)(*_pad_args(kind, 1))(t.zeros(*shape)))


def test_padding_layers_refuse_oversized_padding():
    # F.pad's own checks: ValueError here, RuntimeError in torch
    _same_error(lambda t: t.nn.ReflectionPad1d(3)(t.zeros(1, 3)), same_type=False)
    _same_error(lambda t: t.nn.CircularPad1d(4)(t.zeros(1, 3)), same_type=False)
    _same_error(lambda t: t.nn.ReflectionPad2d((1, 2))(t.zeros(1, 3, 3)))   # 2 values pad the last dim only
    _same_error(lambda t: t.nn.ConstantPad2d([1, 2, 0, 1], -1.0)(t.zeros(2, 3)))
    assert nn.ReflectionPad2d([1, 2, 0, 1]).padding == (1, 2, 0, 1)


# ---- unfold / fold ---------------------------------------------------------------------------------
GEOS = [dict(kernel_size=2),
        dict(kernel_size=(2, 3), stride=(2, 1)),
        dict(kernel_size=(3, 2), dilation=(2, 1), padding=(1, 2), stride=(1, 2)),
        dict(kernel_size=3, padding=1),                # overlapping windows, "same" size
        dict(kernel_size=(1, 2), stride=2, dilation=2)]


@pytest.mark.parametrize("geo", GEOS, ids=range(len(GEOS)))
def test_unfold_fold_match_torch(geo):
    hw = (5, 6)
    for shape in ((2, 3) + hw, (3,) + hw):           # batched and unbatched
        x = randn(*shape, seed=2)
        _both(lambda a: F.unfold(a, **geo), lambda a: TF.unfold(a, **geo), [x])
        cols = TF.unfold(torch.tensor(x), **geo).numpy()
        _both(lambda a: F.fold(a, hw, **geo), lambda a: TF.fold(a, hw, **geo), [randn(*cols.shape, seed=3)])
    um, fm = nn.Unfold(**geo), nn.Fold(hw, **geo)
    assert repr(um) == repr(torch.nn.Unfold(**geo)) and repr(fm) == repr(torch.nn.Fold(hw, **geo))
    assert um.state_dict() == {} and fm.state_dict() == {}
    np.testing.assert_array_equal(um(ng.tensor(x)).numpy(), F.unfold(ng.tensor(x), **geo).numpy())


@pytest.mark.parametrize("geo", GEOS[1:3], ids=range(2))
def test_unfold_fold_gradcheck(geo):
    check_grad(lambda a: F.unfold(a, **geo), [randn(1, 2, 4, 5, seed=4)])
    n = TF.unfold(torch.zeros(1, 2, 4, 5), **geo).shape
    check_grad(lambda a: F.fold(a, (4, 5), **geo), [randn(*n, seed=5)])


@pytest.mark.parametrize("geo", GEOS, ids=range(len(GEOS)))
def test_fold_is_the_adjoint_of_unfold(geo):
    x = randn(2, 3, 5, 6, seed=6)
    u = F.unfold(ng.tensor(x), **geo).numpy()
    y = randn(*u.shape, seed=7)
    # <unfold(x), y> == <x, fold(y)>
    np.testing.assert_allclose(np.sum(u * y), np.sum(x * F.fold(ng.tensor(y), (5, 6), **geo).numpy()), rtol=1e-12)
    # fold(unfold(x)) is x times the number of windows covering each element
    cover = F.fold(F.unfold(ng.ones(2, 3, 5, 6, dtype=ng.float64), **geo), (5, 6), **geo).numpy()
    np.testing.assert_allclose(F.fold(ng.tensor(u), (5, 6), **geo).numpy(), x * cover, rtol=1e-12)


def test_fold_inverts_unfold_without_overlap():
    x = randn(2, 3, 4, 6, seed=8)
    geo = dict(kernel_size=2, stride=2)
    np.testing.assert_array_equal(F.fold(F.unfold(ng.tensor(x), **geo), (4, 6), **geo).numpy(), x)
    x0 = np.zeros((0, 3, 4, 6))                       # an empty batch passes through
    assert tuple(F.fold(F.unfold(ng.tensor(x0), **geo), (4, 6), **geo).shape) == x0.shape


BAD_FOLDS = [
    lambda t: t.nn.functional.unfold(t.zeros(2, 3, 4, 5), (5, 3)),             # no block fits
    lambda t: t.nn.functional.unfold(t.zeros(2, 3, 4, 5), (0, 3)),
    lambda t: t.nn.functional.unfold(t.zeros(2, 3, 4, 5), 2, stride=0),
    lambda t: t.nn.functional.unfold(t.zeros(2, 3, 4, 5), 2, dilation=0),
    lambda t: t.nn.functional.unfold(t.zeros(2, 3, 4, 5), 2, padding=-1),
    lambda t: t.nn.functional.unfold(t.zeros(2, 3, 4, 5), (2, 3, 4)),
    lambda t: t.nn.functional.unfold(t.zeros(1, 2, 3, 4, 5), 2),
    lambda t: t.nn.functional.unfold(t.zeros(2, 0, 4, 5), 2),
    lambda t: t.nn.functional.unfold(t.zeros(2, 3, 4, 5, dtype=t.int64), 2),
    lambda t: t.nn.functional.unfold(t.zeros(1, 1, 3, 3), 2.0),
    lambda t: t.nn.functional.fold(t.zeros(12), (3, 4), 2),
    lambda t: t.nn.functional.fold(t.zeros(2, 12, 6, 1), (3, 4), 2),
    lambda t: t.nn.functional.fold(t.zeros(2, 12, 5), (3, 4), 2),           # L != number of blocks
    lambda t: t.nn.functional.fold(t.zeros(2, 13, 6), (3, 4), 2),           # not divisible by kH*kW
    lambda t: t.nn.functional.fold(t.zeros(2, 12, 6), (1, 4), 2),           # output smaller than a window
    lambda t: t.nn.functional.fold(t.zeros(2, 12, 6), (3, 4, 5), 2),
    lambda t: t.nn.functional.fold(t.zeros(2, 12, 6), (3, 4), 0),
    lambda t: t.nn.functional.fold(t.zeros(2, 12, 6), (3, 4), 2, stride=0),
    lambda t: t.nn.functional.fold(t.zeros(2, 0, 6), (3, 4), 2),
    lambda t: t.nn.functional.fold(t.zeros(0, 12, 6), (3, 4), 2),          # fine: an empty batch
    lambda t: t.nn.functional.fold(t.zeros(12, 6), (3, 4), 2),             # fine: unbatched
]


@pytest.mark.parametrize("call", BAD_FOLDS, ids=range(len(BAD_FOLDS)))
def test_unfold_fold_errors_as_torch(call):
    _same_error(call)


def test_fold_messages():
    with pytest.raises(RuntimeError, match=r"calculated number of sliding blocks 2 \* 3 = 6, but got "
                                           r"input.size\(2\)=5"):
        F.fold(ng.zeros(2, 12, 5), (3, 4), 2)
    with pytest.raises(RuntimeError, match="calculated shape of the array of sliding blocks as"):
        F.unfold(ng.zeros(2, 3, 4, 5), (5, 3))


# ---- local response norm -----------------------------------------------------------------------------
@pytest.mark.parametrize("size", [1, 2, 3, 5])
@pytest.mark.parametrize("shape", [(4, 5), (2, 4, 3), (2, 4, 3, 2), (1, 6, 2, 2, 2)])
def test_local_response_norm_matches_torch(size, shape):
    kw = dict(alpha=0.5, beta=0.6, k=1.5)
    x = randn(*shape, seed=size)
    if len(shape) == 2:                                # torch needs a spatial dim; unbatched (C, L) is 2-d
        _same_error(lambda t: t.nn.functional.local_response_norm(t.tensor(x), size))
        return
    _both(lambda a: F.local_response_norm(a, size, **kw), lambda a: TF.local_response_norm(a, size, **kw), [x])
    m, tm = nn.LocalResponseNorm(size, **kw), torch.nn.LocalResponseNorm(size, **kw)
    assert repr(m) == repr(tm) and m.state_dict() == {}
    _both(m, tm, [x])


def test_local_response_norm_gradcheck_and_errors():
    check_grad(lambda a: F.local_response_norm(a, 3, alpha=0.5, beta=0.75, k=1.0), [randn(2, 4, 3, seed=9)])
    _same_error(lambda t: t.nn.functional.local_response_norm(t.zeros(2, 3, 4), 0))
    _same_error(lambda t: t.nn.functional.local_response_norm(t.zeros(0, 3, 4), 2))
    assert F.local_response_norm(ng.zeros(0, 3, 4), 2).shape == (0, 3, 4)
    assert repr(nn.LocalResponseNorm(3)) == repr(torch.nn.LocalResponseNorm(3))


# ---- losses -----------------------------------------------------------------------------------------
REDUCTIONS = ["none", "mean", "sum"]


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_soft_margin_loss_matches_torch(reduction):
    x = randn(3, 4, seed=10)
    y = np.sign(randn(3, 4, seed=11))
    _both(lambda a, b: F.soft_margin_loss(a, b, reduction=reduction),
          lambda a, b: TF.soft_margin_loss(a, b, reduction=reduction), [x, y], diff=[0])
    _both(lambda a, b: F.soft_margin_loss(a, b, reduction=reduction),      # a broadcast (soft) target
          lambda a, b: TF.soft_margin_loss(a, b, reduction=reduction), [x, randn(4, seed=12)], diff=[0])
    _both(nn.SoftMarginLoss(reduction=reduction), torch.nn.SoftMarginLoss(reduction=reduction), [x, y], diff=[0])
    # torch refuses a target that requires grad; numbagrad's is differentiable in it: finite differences
    check_grad(lambda a, b: F.soft_margin_loss(a, b, reduction=reduction), [x, randn(3, 4, seed=12)])


def test_soft_margin_loss_legacy_args_and_errors():
    x, y = randn(3, 4, seed=13), np.sign(randn(3, 4, seed=14))
    for sa, rd in [(False, None), (None, False), (True, True)]:
        m = nn.SoftMarginLoss(size_average=sa, reduce=rd)
        tm = torch.nn.SoftMarginLoss(size_average=sa, reduce=rd)
        assert m.reduction == tm.reduction
        _both(lambda a, b: F.soft_margin_loss(a, b, size_average=sa, reduce=rd),
              lambda a, b: TF.soft_margin_loss(a, b, size_average=sa, reduce=rd), [x, y], diff=[0],
              dtypes=(np.float64,))
    assert repr(nn.SoftMarginLoss()) == repr(torch.nn.SoftMarginLoss())
    _same_error(lambda t: t.nn.functional.soft_margin_loss(t.zeros(3, 4), t.zeros(3, 5)))
    _same_error(lambda t: t.nn.functional.soft_margin_loss(t.zeros(3, 4), t.zeros(3, 4), reduction="bad"))
    assert np.isnan(F.soft_margin_loss(ng.zeros(0), ng.zeros(0)).item())
    # large margins stay finite
    assert F.soft_margin_loss(ng.tensor([-1e4]), ng.tensor([1.0])).item() == pytest.approx(1e4)


TARGETS = [np.array([[3, 0, -1, 1], [1, 2, 3, 0], [-1, 1, 0, 0]]),   # -1 ends a row; all classes; none
           np.array([[1, 1, -1, 2], [0, -1, 2, 3], [2, -1, -1, -1]])]  # a duplicate; entries after -1 ignored


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("ti", range(len(TARGETS)))
def test_multilabel_margin_loss_matches_torch(ti, reduction):
    x, t = randn(3, 4, seed=15), TARGETS[ti]
    fn = lambda a, b: F.multilabel_margin_loss(a, b, reduction=reduction)  # noqa: E731
    tfn = lambda a, b: TF.multilabel_margin_loss(a, b, reduction=reduction)  # noqa: E731
    _both(fn, tfn, [x, t])
    _both(fn, tfn, [x[1], t[1]])                                           # unbatched
    _both(nn.MultiLabelMarginLoss(reduction=reduction), torch.nn.MultiLabelMarginLoss(reduction=reduction), [x, t])
    check_grad(fn, [x, t])


def test_multilabel_margin_loss_edges_and_errors():
    x = randn(3, 4, seed=16)
    _both(lambda a, b: F.multilabel_margin_loss(a, b, reduction="none"),     # 0-d input and target
          lambda a, b: TF.multilabel_margin_loss(a, b, reduction="none"), [np.array(0.5), np.array(0)])
    _both(lambda a, b: F.multilabel_margin_loss(a, b, size_average=False),
          lambda a, b: TF.multilabel_margin_loss(a, b, size_average=False), [x, TARGETS[0]])
    assert F.multilabel_margin_loss(ng.zeros(0, 4), ng.zeros(0, 4, dtype=ng.int64), reduction="sum").item() == 0
    assert repr(nn.MultiLabelMarginLoss()) == repr(torch.nn.MultiLabelMarginLoss())
    bad = [lambda t: t.tensor([[4, 0, -1, 1]] * 3),            # out of range
           lambda t: t.tensor([[0, -1, -5, 1]] * 3),           # checked after the first -1 too
           lambda t: t.tensor(TARGETS[0]).float(),
           lambda t: t.tensor(TARGETS[0]).int(),
           lambda t: t.tensor(TARGETS[0][:, :3])]
    for b in bad:
        _same_error(lambda t: t.nn.functional.multilabel_margin_loss(t.tensor(x), b(t)))
    _same_error(lambda t: t.nn.functional.multilabel_margin_loss(t.zeros(2, 3, 4), t.zeros(2, 3, 4).long()))
    _same_error(lambda t: t.nn.functional.multilabel_margin_loss(t.zeros(2, 0), t.zeros(2, 0).long()))


# ---- channel shuffle ----------------------------------------------------------------------------------
@pytest.mark.parametrize("shape,groups", [((2, 6, 3), 2), ((2, 6, 3), 3), ((1, 6, 2, 2), 6), ((2, 4, 1, 2, 2), 1)])
def test_channel_shuffle_matches_torch(shape, groups):
    x = randn(*shape, seed=17)
    _both(lambda a: F.channel_shuffle(a, groups), lambda a: TF.channel_shuffle(a, groups), [x])
    m, tm = nn.ChannelShuffle(groups), torch.nn.ChannelShuffle(groups)
    assert repr(m) == repr(tm) and m.state_dict() == {}
    _both(m, tm, [x])
    check_grad(lambda a: F.channel_shuffle(a, groups), [x])
    xi = np.arange(np.prod(shape)).reshape(shape)                        # integers shuffle too
    np.testing.assert_array_equal(F.channel_shuffle(ng.tensor(xi), groups).numpy(),
                                  TF.channel_shuffle(torch.tensor(xi), groups).numpy())


@pytest.mark.parametrize("call", [lambda t: t.nn.functional.channel_shuffle(t.zeros(2, 6, 3), 0),
                                  lambda t: t.nn.functional.channel_shuffle(t.zeros(2, 6, 3), -2),
                                  lambda t: t.nn.functional.channel_shuffle(t.zeros(2, 6, 3), 4),
                                  lambda t: t.nn.functional.channel_shuffle(t.zeros(2, 6), 2),
                                  lambda t: t.nn.functional.channel_shuffle(t.zeros(2, 6, 3), 2.0),
                                  lambda t: t.nn.ChannelShuffle(4)(t.zeros(2, 6, 3))])
def test_channel_shuffle_errors_as_torch(call):
    _same_error(call)


def test_module_paths_hold_the_new_classes():
    import numbagrad.nn.modules.channelshuffle as C
    import numbagrad.nn.modules.fold as Fo
    import numbagrad.nn.modules.padding as P
    assert P.ReflectionPad2d is nn.ReflectionPad2d and Fo.Fold is nn.Fold and C.ChannelShuffle is nn.ChannelShuffle
    assert sorted(P.__all__) == sorted(torch.nn.modules.padding.__all__)
    from numbagrad.nn.modules import loss, normalization
    assert loss.SoftMarginLoss is nn.SoftMarginLoss and loss.MultiLabelMarginLoss is nn.MultiLabelMarginLoss
    assert normalization.LocalResponseNorm is nn.LocalResponseNorm
