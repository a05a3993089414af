"""Transformer layers (``numbagrad/nn/transformer.py``): ``state_dict()`` keys and shapes
equal PyTorch's, and with a PyTorch state dict loaded the outputs and all gradients equal
PyTorch's (float64, eval mode so dropout is off) for post-/pre-norm, relu/gelu/callable
activations, masks and key-padding masks; the stacks clone their layer with
``copy.deepcopy``; dropout acts in training mode.
"""
import numpy as np
import pytest

import numbagrad as ng
from numbagrad.nn.normalization import LayerNorm
from numbagrad.nn.transformer import (Transformer, TransformerDecoder, TransformerDecoderLayer,
                                      TransformerEncoder,
                                      TransformerEncoderLayer, generate_square_subsequent_mask)
from optest import randn, torch

needs_torch = pytest.mark.skipif(torch is None, reason="needs torch")
if torch is not None:
    torch.backends.mha.set_fastpath_enabled(False)  # the eval fast path zeroes padded outputs

D, NH, FF = 8, 2, 12


def _load(tm, nm):
    assert [(k, tuple(v.shape)) for k, v in tm.state_dict().items()] == \
           [(k, tuple(v.shape)) for k, v in nm.state_dict().items()]
    nm.load_state_dict({k: v.detach().numpy() for k, v in tm.state_dict().items()})
    tm.eval()
    nm.eval()


def _check(tm, nm, arrays, kw_t, kw_n, seed=0, tol=1e-10):
    rng = np.random.default_rng(seed)
    tm.zero_grad(set_to_none=True)
    nm.zero_grad(set_to_none=True)
    tt = [torch.tensor(a, requires_grad=True) for a in arrays]
    nt = [ng.tensor(a, requires_grad=True) for a in arrays]
    to = tm(*tt, **kw_t)
    no = nm(*nt, **kw_n)
    np.testing.assert_allclose(no.detach().numpy(), to.detach().numpy(), rtol=tol, atol=tol)
    g = rng.standard_normal(to.shape)
    to.backward(torch.tensor(g))
    no.backward(ng.tensor(g))
    for a, b in zip(tt, nt):
        np.testing.assert_allclose(b.grad.numpy(), a.grad.numpy(), rtol=tol, atol=tol)
    for name, p in tm.named_parameters():
        np.testing.assert_allclose(nm.get_parameter(name).grad.numpy(), p.grad.numpy(), rtol=tol, atol=tol,
                                   err_msg=name)


def _masks(L, S, B, seed=1):
    rng = np.random.default_rng(seed)
    kpm = rng.random((B, S)) > 0.7
    kpm[:, 0] = False
    return np.triu(np.full((L, L), -np.inf), 1), kpm


ACTS = ["relu", "gelu", "callable"]


def _acts(name):
    if name == "callable":  # any callable: here tanh (PyTorch calls it the same way)
        return torch.tanh, ng.tanh
    return name, name


@needs_torch
@pytest.mark.filterwarnings("ignore:Support for mismatched")
@pytest.mark.parametrize("act", ACTS)
@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_layer_and_stack_match_torch(norm_first, act):
    at, an = _acts(act)
    bf = norm_first  # cover both layouts
    tl = torch.nn.TransformerEncoderLayer(D, NH, FF, dropout=0.3, activation=at, norm_first=norm_first,
                                          batch_first=bf, dtype=torch.float64)
    nl = TransformerEncoderLayer(D, NH, FF, dropout=0.3, activation=an, norm_first=norm_first, batch_first=bf,
                                 dtype=ng.float64)
    _load(tl, nl)
    B, L = 2, 5
    x = randn(*((B, L, D) if bf else (L, B, D)), seed=2)
    causal, kpm = _masks(L, L, B)
    _check(tl, nl, [x], {}, {})
    _check(tl, nl, [x], dict(src_mask=torch.tensor(causal), is_causal=True),
           dict(src_mask=ng.tensor(causal), is_causal=True))
    _check(tl, nl, [x], dict(src_mask=torch.tensor(causal), src_key_padding_mask=torch.tensor(kpm)),
           dict(src_mask=ng.tensor(causal), src_key_padding_mask=ng.tensor(kpm)))
    te = torch.nn.TransformerEncoder(tl, 2, norm=torch.nn.LayerNorm(D, dtype=torch.float64),
                                     enable_nested_tensor=False)
    ne = TransformerEncoder(nl, 2, norm=LayerNorm(D, dtype=ng.float64))
    _load(te, ne)
    _check(te, ne, [x], dict(mask=torch.tensor(causal), src_key_padding_mask=torch.tensor(kpm)),
           dict(mask=ng.tensor(causal), src_key_padding_mask=ng.tensor(kpm)))
    _check(te, ne, [x], dict(mask=torch.tensor(causal)), dict(mask=ng.tensor(causal)))  # causal detected


@needs_torch
@pytest.mark.filterwarnings("ignore:Support for mismatched")
@pytest.mark.parametrize("act", ["relu", "gelu"])
@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_layer_and_stack_match_torch(norm_first, act):
    bf = not norm_first
    tl = torch.nn.TransformerDecoderLayer(D, NH, FF, activation=act, norm_first=norm_first, batch_first=bf,
                                          dtype=torch.float64)
    nl = TransformerDecoderLayer(D, NH, FF, activation=act, norm_first=norm_first, batch_first=bf,
                                 dtype=ng.float64)
    _load(tl, nl)
    B, L, S = 2, 4, 6
    tgt = randn(*((B, L, D) if bf else (L, B, D)), seed=3)
    mem = randn(*((B, S, D) if bf else (S, B, D)), seed=4)
    causal, mkpm = _masks(L, S, B)
    rng = np.random.default_rng(5)
    mmask = rng.standard_normal((L, S))
    _check(tl, nl, [tgt, mem], {}, {})
    kt = dict(tgt_mask=torch.tensor(causal), memory_mask=torch.tensor(mmask),
              memory_key_padding_mask=torch.tensor(mkpm), tgt_is_causal=True)
    kn = dict(tgt_mask=ng.tensor(causal), memory_mask=ng.tensor(mmask),
              memory_key_padding_mask=ng.tensor(mkpm),
              tgt_is_causal=True)
    _check(tl, nl, [tgt, mem], kt, kn)
    td = torch.nn.TransformerDecoder(tl, 2, norm=torch.nn.LayerNorm(D, dtype=torch.float64))
    nd = TransformerDecoder(nl, 2, norm=LayerNorm(D, dtype=ng.float64))
    _load(td, nd)
    kt.pop("tgt_is_causal")
    kn.pop("tgt_is_causal")
    _check(td, nd, [tgt, mem], kt, kn)


@needs_torch
def test_full_transformer_matches_torch():
    tm = torch.nn.Transformer(D, NH, 2, 1, FF, batch_first=True, dtype=torch.float64)
    nm = Transformer(D, NH, 2, 1, FF, batch_first=True, dtype=ng.float64)
    _load(tm, nm)
    src, tgt = randn(2, 5, D, seed=6), randn(2, 3, D, seed=7)
    m = torch.nn.Transformer.generate_square_subsequent_mask(3, dtype=torch.float64)
    np.testing.assert_array_equal(Transformer.generate_square_subsequent_mask(3, dtype=ng.float64).numpy(),
                                  m.numpy())
    _check(tm, nm, [src, tgt], dict(tgt_mask=m), dict(tgt_mask=ng.tensor(m.numpy())))


def test_state_dict_keys_and_clones():
    layer = TransformerEncoderLayer(D, NH, FF)
    keys = [k for k in layer.state_dict()]
    assert keys == ["self_attn.in_proj_weight", "self_attn.in_proj_bias", "self_attn.out_proj.weight",
                    "self_attn.out_proj.bias", "linear1.weight", "linear1.bias", "linear2.weight",
                    "linear2.bias", "norm1.weight", "norm1.bias", "norm2.weight", "norm2.bias"]
    enc = TransformerEncoder(layer, 3)
    assert len(enc.layers) == 3 and enc.num_layers == 3
    ws = [m.linear1.weight for m in enc.layers] + [layer.linear1.weight]
    assert len({id(w) for w in ws}) == 4  # deep copies: no shared parameters
    for w in ws[1:]:
        np.testing.assert_array_equal(w.detach().numpy(), ws[0].detach().numpy())
    enc.layers[0].linear1.weight.array[...] = 0
    assert np.abs(enc.layers[1].linear1.weight.detach().numpy()).sum() > 0
    dec = TransformerDecoderLayer(D, NH, FF, bias=False)
    assert [k for k in dec.state_dict()] == [
        "self_attn.in_proj_weight", "self_attn.out_proj.weight", "multihead_attn.in_proj_weight",
        "multihead_attn.out_proj.weight", "linear1.weight", "linear2.weight", "norm1.weight", "norm2.weight",
        "norm3.weight"]
    if torch is not None:
        assert keys == list(torch.nn.TransformerEncoderLayer(D, NH, FF).state_dict())
        tdec = torch.nn.TransformerDecoderLayer(D, NH, FF, bias=False)
        assert list(dec.state_dict()) == list(tdec.state_dict())
    with pytest.raises(RuntimeError, match="relu/gelu"):
        TransformerEncoderLayer(D, NH, activation="tanh")


def test_dropout_in_training_and_mask_helper():
    ng.manual_seed(0)
    layer = TransformerEncoderLayer(D, NH, FF, dropout=0.5, batch_first=True)
    x = ng.tensor(randn(2, 4, D, seed=8).astype(np.float32))
    a, b = layer(x).detach().numpy(), layer(x).detach().numpy()
    assert not np.allclose(a, b)  # two training-mode calls draw different dropout masks
    layer.eval()
    np.testing.assert_array_equal(layer(x).detach().numpy(), layer(x).detach().numpy())
    m = generate_square_subsequent_mask(4).numpy()
    assert m.dtype == np.float32
    assert np.isneginf(m[np.triu_indices(4, 1)]).all() and (m[np.tril_indices(4)] == 0).all()
