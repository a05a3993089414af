"""Bilinear, Embedding, EmbeddingBag and the parameter summary: NumPy references, finite
differences, PyTorch parity (outputs, gradients, state_dict keys/shapes, loading torch's
state dict), initialisation, from_pretrained freeze semantics."""
import numpy as np
import pytest

import numbagrad as ng
from numbagrad import nn
from numbagrad.nn.linear import Bilinear
from numbagrad.nn.sparse import Embedding, EmbeddingBag
from numbagrad.nn.summary import count_parameters, summary
from numbagrad.ops.bilinear import bilinear
from numbagrad.ops.sparse import embedding_bag
from optest import check_grad, randn

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch not installed")


def _load_torch(m, tm):
    m.load_state_dict({k: v.detach().numpy() for k, v in tm.state_dict().items()})
    assert [(k, tuple(v.shape)) for k, v in m.state_dict().items()] == \
        [(k, tuple(v.shape)) for k, v in tm.state_dict().items()]


# ---- Bilinear ---------------------------------------------------------------------------------------
def test_bilinear_numpy_reference_and_finite_differences():
    x1, x2 = randn(3, 2, seed=1), randn(3, 4, seed=2)
    w, b = randn(5, 2, 4, seed=3), randn(5, seed=4)
    y = bilinear(ng.tensor(x1), ng.tensor(x2), ng.tensor(w), ng.tensor(b))
    np.testing.assert_allclose(y.numpy(), np.einsum("ni,oij,nj->no", x1, w, x2) + b, rtol=1e-12)
    check_grad(lambda a, c, w, b: bilinear(a, c, w, b), [x1, x2, w, b])
    check_grad(lambda a, c, w: bilinear(a, c, w), [x1, x2, w])


def test_bilinear_batch_dims_unbatched_and_errors():
    w = ng.tensor(randn(2, 3, 4, seed=5))
    a, c = randn(2, 5, 3, seed=6), randn(2, 5, 4, seed=7)
    y = bilinear(ng.tensor(a), ng.tensor(c), w)
    assert y.shape == (2, 5, 2)
    np.testing.assert_allclose(y.numpy(), np.einsum("bni,oij,bnj->bno", a, w.numpy(), c), rtol=1e-12)
    y1 = bilinear(ng.tensor(a[0, 0]), ng.tensor(c[0, 0]), w)
    assert y1.shape == (2,)
    np.testing.assert_allclose(y1.numpy(), y.numpy()[0, 0], rtol=1e-12)
    with pytest.raises(RuntimeError, match="leading"):
        bilinear(ng.tensor(a), ng.tensor(c[0]), w)
    with pytest.raises(RuntimeError, match="do not match weight"):
        bilinear(ng.tensor(c), ng.tensor(c), w)


def test_bilinear_init_and_repr():
    ng.manual_seed(0)
    m = Bilinear(16, 3, 4)
    assert m.weight.shape == (4, 16, 3) and m.bias.shape == (4,) and m.weight.dtype == np.float32
    w = m.weight.detach().numpy()
    assert np.abs(w).max() <= 0.25 and np.abs(w).max() > 0.2          # U(-1/sqrt(16), 1/sqrt(16))
    assert np.abs(m.bias.detach().numpy()).max() <= 0.25
    assert repr(Bilinear(2, 3, 4, bias=False)) == \
        "Bilinear(in1_features=2, in2_features=3, out_features=4, bias=False)"
    assert Bilinear(2, 3, 4, bias=False).bias is None


@needs_torch
@pytest.mark.parametrize("bias", [True, False])
def test_bilinear_matches_torch(bias):
    tm = torch.nn.Bilinear(3, 4, 5, bias=bias).double()
    m = Bilinear(3, 4, 5, bias=bias, dtype=ng.float64)
    _load_torch(m, tm)
    assert repr(m) == repr(tm)
    a, c = randn(2, 6, 3, seed=8), randn(2, 6, 4, seed=9)
    na, nc = ng.tensor(a, requires_grad=True), ng.tensor(c, requires_grad=True)
    ta, tc = torch.tensor(a, requires_grad=True), torch.tensor(c, requires_grad=True)
    out, tout = m(na, nc), tm(ta, tc)
    np.testing.assert_allclose(out.detach().numpy(), tout.detach().numpy(), rtol=1e-12, atol=1e-13)
    g = randn(2, 6, 5, seed=10)
    out.backward(ng.tensor(g))
    tout.backward(torch.tensor(g))
    for x, t in [(na, ta), (nc, tc), (m.weight, tm.weight)] + ([(m.bias, tm.bias)] if bias else []):
        np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-11, atol=1e-13)


# ---- Embedding --------------------------------------------------------------------------------------
def test_embedding_init_padding_and_gradient():
    ng.manual_seed(0)
    e = Embedding(200, 30, padding_idx=-1)
    assert e.padding_idx == 199
    w = e.weight.detach().numpy()
    assert w.dtype == np.float32 and (w[199] == 0).all()
    assert abs(w[:199].mean()) < 0.05 and abs(w[:199].std() - 1) < 0.05     # N(0, 1)
    idx = np.array([[1, 199, 3], [3, 3, 0]])
    y = e(ng.tensor(idx))
    np.testing.assert_array_equal(y.detach().numpy(), w[idx])
    y.backward(ng.ones(2, 3, 30))
    gw = e.weight.grad.numpy()
    counts = np.bincount(idx.ravel(), minlength=200).astype(np.float32)
    counts[199] = 0                                                          # padding row: no gradient
    np.testing.assert_array_equal(gw, np.repeat(counts[:, None], 30, axis=1))
    with pytest.raises(ValueError, match=r"padding_idx \(5\) must be within num_embeddings \(5\)"):
        Embedding(5, 2, padding_idx=5)


def test_embedding_from_pretrained_freeze_semantics():
    table = ng.tensor(randn(4, 3, seed=11))
    frozen = Embedding.from_pretrained(table)
    assert not frozen.weight.requires_grad
    y = frozen(ng.tensor([2, 0]))
    assert not y.requires_grad
    np.testing.assert_array_equal(y.numpy(), table.numpy()[[2, 0]])
    table.array[2, 0] = 42.0                                                  # storage is shared, as in torch
    assert frozen.weight.array[2, 0] == 42.0
    train = Embedding.from_pretrained(ng.tensor(randn(4, 3, seed=12)), freeze=False, padding_idx=1)
    assert train.weight.requires_grad and train.padding_idx == 1
    train(ng.tensor([1, 2, 1])).sum().backward()
    np.testing.assert_array_equal(train.weight.grad.numpy()[1], 0)
    np.testing.assert_array_equal(train.weight.grad.numpy()[2], 1)
    with pytest.raises(AssertionError, match="2-dimensional"):
        Embedding.from_pretrained(ng.zeros(3))
    e = Embedding(4, 3, _weight=randn(4, 3, seed=13), _freeze=True)
    assert not e.weight.requires_grad


@needs_torch
@pytest.mark.parametrize("kw", [{}, {"padding_idx": 2}, {"scale_grad_by_freq": True},
                                {"max_norm": 1.0, "norm_type": 3.0}, {"sparse": True}], ids=str)
def test_embedding_matches_torch(kw):
    tm = torch.nn.Embedding(6, 4, **kw).double()
    m = Embedding(6, 4, dtype=ng.float64, **kw)
    _load_torch(m, tm)
    assert repr(m) == repr(tm)
    idx = np.array([[1, 2, 2], [5, 0, 2]])
    out, tout = m(ng.tensor(idx)), tm(torch.tensor(idx))
    np.testing.assert_allclose(out.detach().numpy(), tout.detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(m.weight.detach().numpy(), tm.weight.detach().numpy(), rtol=1e-12)  # max_norm
    g = randn(2, 3, 4, seed=14)
    out.backward(ng.tensor(g))
    tout.backward(torch.tensor(g))
    tg = tm.weight.grad.to_dense() if tm.weight.grad.is_sparse else tm.weight.grad
    np.testing.assert_allclose(m.weight.grad.numpy(), tg.numpy(), rtol=1e-12, atol=1e-14)


@needs_torch
def test_embedding_from_pretrained_matches_torch_repr():
    w = randn(5, 2, seed=15)
    assert repr(Embedding.from_pretrained(ng.tensor(w), padding_idx=0)) == \
        repr(torch.nn.Embedding.from_pretrained(torch.tensor(w), padding_idx=0))


# ---- EmbeddingBag ----------------------------------------------------------------------------------
@needs_torch
@pytest.mark.parametrize("pad", [None, 2])
@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_matches_torch(mode, pad):
    tm = torch.nn.EmbeddingBag(6, 3, mode=mode, padding_idx=pad).double()
    m = EmbeddingBag(6, 3, mode=mode, padding_idx=pad, dtype=ng.float64)
    _load_torch(m, tm)
    assert repr(m) == repr(tm)
    inp, off = np.array([1, 2, 4, 5, 4, 3, 2, 2]), np.array([0, 2, 2, 5])   # an empty bag, an all-padding bag
    out, tout = m(ng.tensor(inp), ng.tensor(off)), tm(torch.tensor(inp), torch.tensor(off))
    np.testing.assert_allclose(out.detach().numpy(), tout.detach().numpy(), rtol=1e-12)
    g = randn(4, 3, seed=16)
    out.backward(ng.tensor(g))
    tout.backward(torch.tensor(g))
    np.testing.assert_allclose(m.weight.grad.numpy(), tm.weight.grad.numpy(), rtol=1e-12, atol=1e-14)
    inp2 = np.array([[1, 2, 2], [3, 4, 5]])
    np.testing.assert_allclose(m(ng.tensor(inp2)).detach().numpy(), tm(torch.tensor(inp2)).detach().numpy(),
                               rtol=1e-12)


@needs_torch
def test_embedding_bag_per_sample_weights_and_last_offset():
    tm = torch.nn.EmbeddingBag(6, 3, mode="sum", include_last_offset=True).double()
    m = EmbeddingBag(6, 3, mode="sum", include_last_offset=True, dtype=ng.float64)
    _load_torch(m, tm)
    inp, off = np.array([1, 2, 4, 5, 4, 3]), np.array([0, 2, 3, 6])
    psw = randn(6, seed=17)
    pn, pt = ng.tensor(psw, requires_grad=True), torch.tensor(psw, requires_grad=True)
    out = m(ng.tensor(inp), ng.tensor(off), per_sample_weights=pn)
    tout = tm(torch.tensor(inp), torch.tensor(off), per_sample_weights=pt)
    np.testing.assert_allclose(out.detach().numpy(), tout.detach().numpy(), rtol=1e-12)
    out.sum().backward()
    tout.sum().backward()
    np.testing.assert_allclose(pn.grad.numpy(), pt.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(m.weight.grad.numpy(), tm.weight.grad.numpy(), rtol=1e-12)


def test_embedding_bag_numpy_reference_and_errors():
    w = randn(5, 2, seed=18)
    y = embedding_bag(ng.tensor([0, 1, 4, 3]), ng.tensor(w), ng.tensor([0, 3]), mode="max")
    np.testing.assert_allclose(y.numpy(), np.stack([w[[0, 1, 4]].max(0), w[3]]))
    with pytest.raises(NotImplementedError, match="per_sample_weights"):
        embedding_bag(ng.tensor([[0, 1]]), ng.tensor(w), mode="mean", per_sample_weights=ng.ones(1, 2))
    with pytest.raises(ValueError, match="offsets"):
        embedding_bag(ng.tensor([0, 1]), ng.tensor(w))
    with pytest.raises(ValueError, match="mode"):
        EmbeddingBag(3, 2, mode="median")


# ---- summary ------------------------------------------------------------------------------------------
def test_summary_and_count_parameters():
    a = nn.Linear(4, 8)
    b = nn.Linear(8, 4)
    b.weight = nn.Parameter(np.zeros((4, 8), np.float32), requires_grad=False)
    model = nn.Sequential(Embedding(10, 4), a, nn.ReLU(), b)
    model[0].weight.requires_grad_(False)
    total = 40 + (32 + 8) + (32 + 4)
    assert count_parameters(model) == total
    assert count_parameters(model, trainable_only=True) == 32 + 8 + 4
    s = summary(model)
    lines = s.splitlines()
    assert lines[0].split() == ["Layer", "Type", "Parameters", "Count", "Trainable"]
    assert any(ln.split()[:2] == ["0", "Embedding"] and ln.split()[-2:] == ["40", "no"] for ln in lines)
    assert any(ln.split()[:2] == ["3", "Linear"] and ln.split()[-1] == "partly" for ln in lines)
    assert "weight (8, 4), bias (8,)" in s
    assert f"Total params: {total:,}" in s and "Trainable params: 44" in s and "Non-trainable params: 72" in s


def test_summary_counts_a_shared_parameter_once():
    enc, dec = nn.Linear(3, 5, bias=False), nn.Linear(3, 5, bias=False)
    dec.weight = enc.weight
    model = nn.Sequential(enc, dec)
    assert count_parameters(model) == 15
    s = summary(model)
    assert "= 0.weight" in s and "Total params: 15" in s
