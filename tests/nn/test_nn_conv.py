"""Conv1d / Conv2d / ConvTranspose1d / ConvTranspose2d (``numbagrad/nn/conv.py``).

Against an independent float64 NumPy reference (sliding windows via ``as_strided`` and one
``einsum``; transposed layers via the adjoint identity), and with PyTorch installed: the
same ``state_dict`` keys and shapes, the same ``repr``, and torch's outputs and gradients
after loading torch's weights.
"""
import math

import numpy as np
import pytest

import numbagrad as ng
from numbagrad.nn.conv import Conv1d, Conv2d, ConvTranspose1d, ConvTranspose2d
from optest import randn, torch

needs_torch = pytest.mark.skipif(torch is None, reason="needs torch")
pytestmark = pytest.mark.filterwarnings("ignore:Using padding='same'")


# ---- reference (independent of tests/ops/test_conv.py's loops) -----------------------------------
def _windows(xp, kh, kw, sh, sw, dh, dw):
    """(N, C, OH, OW, kh, kw) view of the padded input."""
    n, c, h, w = xp.shape
    oh = (h - dh * (kh - 1) - 1) // sh + 1
    ow = (w - dw * (kw - 1) - 1) // sw + 1
    s = xp.strides
    return np.lib.stride_tricks.as_strided(
        xp, (n, c, oh, ow, kh, kw), (s[0], s[1], s[2] * sh, s[3] * sw, s[2] * dh, s[3] * dw))


def np_conv2d(x, w, b, stride, pads, dilation, groups):
    """pads: ((top, bottom), (left, right))."""
    xp = np.pad(x, ((0, 0), (0, 0)) + tuple(pads))
    g = groups
    cg = w.shape[1]
    outs = []
    for k in range(g):
        xk = np.ascontiguousarray(xp[:, k * cg:(k + 1) * cg])
        win = _windows(xk, w.shape[2], w.shape[3], *stride, *dilation)
        wk = w[k * (w.shape[0] // g):(k + 1) * (w.shape[0] // g)]
        outs.append(np.einsum("ncxyij,ocij->noxy", win, wk))
    y = np.concatenate(outs, axis=1)
    return y if b is None else y + b[None, :, None, None]


def _pads_of(mod):
    if mod.padding == "same":
        r = mod._reversed_padding_repeated_twice
        return ((r[2], r[3]), (r[0], r[1])) if len(mod.kernel_size) == 2 else ((0, 0), (r[0], r[1]))
    if mod.padding == "valid":
        return ((0, 0), (0, 0))
    p = mod.padding if len(mod.padding) == 2 else (0,) + mod.padding
    return ((p[0], p[0]), (p[1], p[1]))


def ref_module(mod, x):
    """The float64 reference output of a Conv1d/Conv2d ``mod`` on ``x`` (zeros padding)."""
    w = mod.weight.detach().numpy().astype(np.float64)
    b = None if mod.bias is None else mod.bias.detach().numpy().astype(np.float64)
    one_d = len(mod.kernel_size) == 1
    unbatched = x.ndim == len(mod.kernel_size) + 1
    x4 = x[None] if unbatched else x
    if one_d:
        x4, w = x4[:, :, None, :], w[:, :, None, :]
    two = (lambda t: (1,) + t) if one_d else (lambda t: t)
    y = np_conv2d(x4, w, b, two(mod.stride), _pads_of(mod), two(mod.dilation), mod.groups)
    if one_d:
        y = y[:, :, 0, :]
    return y[0] if unbatched else y


# ---- construction ---------------------------------------------------------------------------
CONV_CFGS = [
    (Conv2d, (3, 8, 3), {}),
    (Conv2d, (4, 6, (3, 2)), dict(stride=2, padding=(1, 0), dilation=(1, 2), groups=2, bias=False)),
    (Conv2d, (2, 4, 4), dict(padding="same", dilation=2)),
    (Conv2d, (2, 4, 3), dict(padding="valid")),
    (Conv1d, (3, 5, 3), dict(stride=2, padding=1)),
    (Conv1d, (4, 4, 4), dict(padding="same", groups=4)),
]
TRANS_CFGS = [
    (ConvTranspose2d, (3, 4, 3), {}),
    (ConvTranspose2d, (4, 6, (3, 2)), dict(stride=2, padding=1, output_padding=(1, 0), groups=2, bias=False)),
    (ConvTranspose2d, (2, 2, 3), dict(dilation=2, output_padding=1)),
    (ConvTranspose1d, (3, 2, 4), dict(stride=3, padding=1, output_padding=2)),
]
ALL = CONV_CFGS + TRANS_CFGS


def _ids(cfgs):
    return [f"{c.__name__}-{i}" for i, (c, _, _) in enumerate(cfgs)]


def _input(cls, in_ch, seed=0, batch=2, dtype=np.float64):
    spatial = (7, 6) if cls in (Conv2d, ConvTranspose2d) else (9,)
    return randn(*(((batch,) if batch else ()) + (in_ch,) + spatial), seed=seed).astype(dtype)


@pytest.mark.parametrize("cls,args,kw", ALL, ids=_ids(ALL))
def test_parameter_shapes_and_init(cls, args, kw):
    m = cls(*args, **kw)
    in_ch, out_ch = args[:2]
    g = kw.get("groups", 1)
    ks = m.kernel_size
    transposed = cls in (ConvTranspose1d, ConvTranspose2d)
    shape = (in_ch, out_ch // g) + ks if transposed else (out_ch, in_ch // g) + ks
    assert m.weight.shape == shape and m.weight.dtype == np.float32
    assert (m.bias is None) == (kw.get("bias", True) is False)
    fan_in = shape[1] * math.prod(ks)      # PyTorch's fan_in: weight.shape[1] * receptive field
    bound = 1 / math.sqrt(fan_in)
    wv = m.weight.detach().numpy()
    assert np.abs(wv).max() <= bound * (1 + 1e-6)
    assert np.abs(wv).max() > 0.5 * bound   # really spread over the interval
    if m.bias is not None:
        assert np.abs(m.bias.detach().numpy()).max() <= bound * (1 + 1e-6)
    ng.manual_seed(5)
    a = cls(*args, **kw).weight.detach().numpy()
    ng.manual_seed(5)
    np.testing.assert_array_equal(a, cls(*args, **kw).weight.detach().numpy())


def test_dtype_and_attributes():
    m = Conv2d(2, 4, 3, stride=(2, 1), padding=1, dtype=ng.float64)
    assert m.weight.dtype == np.float64 and m.bias.dtype == np.float64
    assert (m.kernel_size, m.stride, m.padding, m.dilation, m.groups) == ((3, 3), (2, 1), (1, 1), (1, 1), 1)
    assert m.transposed is False and m.output_padding == (0, 0) and m.padding_mode == "zeros"
    t = ConvTranspose1d(2, 4, 3, output_padding=0)
    assert t.transposed is True and t.kernel_size == (3,) and t.output_padding == (0,)


@pytest.mark.parametrize("cls,args,kw,match", [
    (Conv2d, (4, 6, 3), dict(groups=3), "in_channels must be divisible by groups"),
    (Conv2d, (4, 6, 3), dict(groups=4), "divisible by groups"),
    (Conv2d, (4, 6, 3), dict(groups=0), "positive integer"),
    (Conv2d, (4, 6, 3), dict(padding="same", stride=2), "strided"),
    (Conv2d, (4, 6, 3), dict(padding="full"), "invalid padding"),
    (Conv2d, (4, 6, 3), dict(padding_mode="mirror"), "padding_mode"),
    (ConvTranspose2d, (4, 6, 3), dict(padding_mode="reflect"), '"zeros" padding mode'),
])
def test_constructor_errors(cls, args, kw, match):
    with pytest.raises(ValueError, match=match):
        cls(*args, **kw)


# ---- forward / backward against the reference ------------------------------------------------------
@pytest.mark.parametrize("cls,args,kw", CONV_CFGS, ids=_ids(CONV_CFGS))
@pytest.mark.parametrize("batch", [2, 0], ids=["batched", "unbatched"])
def test_conv_matches_reference(cls, args, kw, batch):
    m = cls(*args, **kw, dtype=ng.float64)
    x = _input(cls, args[0], seed=1, batch=batch)
    xt = ng.tensor(x, requires_grad=True)
    y = m(xt)
    ref = ref_module(m, x)
    np.testing.assert_allclose(y.detach().numpy(), ref, rtol=1e-10, atol=1e-12)
    # gradients: the layer is linear in x and in w, so <g, y> has gradient = the adjoint;
    # check by central differences along one random direction each (exact for a linear map)
    g = randn(*y.shape, seed=2)
    y.backward(ng.tensor(g))
    d = randn(*x.shape, seed=3)
    np.testing.assert_allclose(np.sum(xt.grad.numpy() * d), np.sum(g * ref_module(m, d)) -
                               (0.0 if m.bias is None else np.sum(g * ref_module(m, 0 * d))), rtol=1e-9)
    w0 = m.weight.detach().numpy().copy()
    dw = randn(*w0.shape, seed=4)
    with ng.no_grad():
        m.weight.array[...] = w0 + dw
    yp = ref_module(m, x)
    with ng.no_grad():
        m.weight.array[...] = w0
    np.testing.assert_allclose(np.sum(m.weight.grad.numpy() * dw), np.sum(g * (yp - ref)), rtol=1e-9)
    if m.bias is not None:
        ch = g.ndim - len(m.kernel_size) - 1
        other = tuple(i for i in range(g.ndim) if i != ch)
        np.testing.assert_allclose(m.bias.grad.numpy(), g.sum(axis=other), rtol=1e-10)


@pytest.mark.parametrize("cls,args,kw", TRANS_CFGS, ids=_ids(TRANS_CFGS))
def test_transposed_is_adjoint_of_conv(cls, args, kw):
    # <ConvT(x), z> = <x, Conv(z)> for the conv with the same weight (bias off)
    kw = dict(kw, bias=False)
    m = cls(*args, **kw, dtype=ng.float64)
    x = _input(cls, args[0], seed=1)
    y = m(ng.tensor(x)).detach().numpy()
    z = randn(*y.shape, seed=2)
    conv_cls = Conv2d if cls is ConvTranspose2d else Conv1d
    c = conv_cls(args[1], args[0], args[2], stride=kw.get("stride", 1), padding=kw.get("padding", 0),
                 dilation=kw.get("dilation", 1), groups=kw.get("groups", 1), bias=False, dtype=ng.float64)
    with ng.no_grad():
        c.weight.array[...] = m.weight.detach().numpy()
    cz = ref_module(c, z)
    # output_padding adds output rows no input pixel reaches: crop the conv to x's grid
    cz = cz[(Ellipsis,) + tuple(slice(0, s) for s in x.shape[2:])]
    np.testing.assert_allclose(np.sum(y * z), np.sum(x * cz), rtol=1e-10)


# ---- PyTorch parity --------------------------------------------------------------------------
def _torch_cls(cls):
    return getattr(torch.nn, cls.__name__)


@needs_torch
@pytest.mark.parametrize("cls,args,kw", ALL, ids=_ids(ALL))
def test_state_dict_and_repr_match_torch(cls, args, kw):
    m, t = cls(*args, **kw), _torch_cls(cls)(*args, **kw)
    assert [(k, tuple(v.shape)) for k, v in m.state_dict().items()] == \
        [(k, tuple(v.shape)) for k, v in t.state_dict().items()]
    assert repr(m) == repr(t)


def _check_like_torch(cls, args, kw, batch=2):
    """A float64 module ``cls(*args, **kw)`` with a torch twin's weights: the output and the
    input's gradient (one random upstream gradient) match torch's; returns both modules,
    their parameter gradients filled."""
    torch.manual_seed(0)
    t = _torch_cls(cls)(*args, **kw).double()
    m = cls(*args, **kw, dtype=ng.float64)
    m.load_state_dict({k: v.detach().numpy() for k, v in t.state_dict().items()})
    x = _input(cls, args[0], seed=1, batch=batch)
    xt, xx = ng.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    y, yy = m(xt), t(xx)
    np.testing.assert_allclose(y.detach().numpy(), yy.detach().numpy(), rtol=1e-10, atol=1e-12)
    g = randn(*y.shape, seed=2)
    y.backward(ng.tensor(g))
    yy.backward(torch.tensor(g))
    np.testing.assert_allclose(xt.grad.numpy(), xx.grad.numpy(), rtol=1e-10, atol=1e-12)
    return m, t


@needs_torch
@pytest.mark.parametrize("cls,args,kw", ALL, ids=_ids(ALL))
@pytest.mark.parametrize("batch", [2, 0], ids=["batched", "unbatched"])
def test_torch_weights_give_torch_outputs(cls, args, kw, batch):
    m, t = _check_like_torch(cls, args, kw, batch=batch)
    for (name, p), (tname, tp) in zip(m.named_parameters(), t.named_parameters()):
        assert name == tname
        np.testing.assert_allclose(p.grad.numpy(), tp.grad.numpy(), rtol=1e-10, atol=1e-12, err_msg=name)


@needs_torch
@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
@pytest.mark.parametrize("cls,args,kw", [(Conv2d, (2, 3, 3), dict(padding=(1, 2))),
                                         (Conv2d, (2, 3, 4), dict(padding="same")),
                                         (Conv1d, (2, 3, 3), dict(padding=2, stride=2))],
                         ids=["conv2d", "conv2d_same_even", "conv1d"])
def test_padding_modes_match_torch(mode, cls, args, kw):
    m, t = _check_like_torch(cls, args, dict(kw, padding_mode=mode))
    np.testing.assert_allclose(m.weight.grad.numpy(), t.weight.grad.numpy(), rtol=1e-10, atol=1e-12)


@needs_torch
@pytest.mark.parametrize("output_size", [(14, 12), (1, 2, 13, 11), (13, 12)])
def test_transpose_output_size_matches_torch(output_size):
    torch.manual_seed(0)
    t = torch.nn.ConvTranspose2d(4, 2, 3, stride=2, padding=1).double()
    m = ConvTranspose2d(4, 2, 3, stride=2, padding=1, dtype=ng.float64)
    m.load_state_dict({k: v.detach().numpy() for k, v in t.state_dict().items()})
    x = _input(ConvTranspose2d, 4, seed=1, batch=1)
    y = m(ng.tensor(x), output_size=output_size)
    yy = t(torch.tensor(x), output_size=list(output_size))
    assert y.shape == tuple(yy.shape)
    np.testing.assert_allclose(y.detach().numpy(), yy.detach().numpy(), rtol=1e-10, atol=1e-12)


def test_transpose_output_size_out_of_range():
    m = ConvTranspose2d(4, 2, 3, stride=2, padding=1)
    with pytest.raises(ValueError, match="valid sizes range from"):
        m(ng.tensor(np.zeros((1, 4, 7, 6), np.float32)), output_size=(15, 11))


def test_float32_training_step_reduces_loss():
    # a tiny end-to-end check: Conv2d -> ConvTranspose2d autoencoder on one batch
    ng.manual_seed(0)
    enc = Conv2d(1, 4, 3, stride=2, padding=1)
    dec = ConvTranspose2d(4, 1, 3, stride=2, padding=1, output_padding=1)
    x = ng.tensor(randn(4, 1, 8, 8, seed=3).astype(np.float32))
    params = list(enc.parameters()) + list(dec.parameters())
    opt = ng.optim.SGD(params, lr=0.05)
    losses = []
    for _ in range(15):
        opt.zero_grad()
        loss = ((dec(enc(x)) - x) ** 2).mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.8 * losses[0], losses
