"""Whole models move between PyTorch and numbagrad.

The same architecture is written once against the ``torch.nn`` API and built with both
frameworks (``numbagrad.nn`` follows PyTorch's names). The tests check that the state
dicts have the same keys, shapes and dtypes; that torch's weights loaded into the
numbagrad model give torch's outputs; and that one backward pass gives torch's parameter
gradients -- for a CNN (conv, batch norm, group norm, pooling, dropout in eval), a
recurrent tagger (embedding, bidirectional LSTM, GRU) and a Transformer encoder.
"""
import numpy as np
import pytest

import numbagrad as ng

torch = pytest.importorskip("torch")


def cnn(nn):
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(8, 8, 3, stride=2, groups=2), nn.GroupNorm(2, 8), nn.GELU(),
        nn.AdaptiveAvgPool2d((2, 2)), nn.Flatten(), nn.Dropout(0.3), nn.Linear(32, 5))


def tagger(nn):
    class Tagger(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(20, 6, padding_idx=0)
            self.lstm = nn.LSTM(6, 5, num_layers=2, batch_first=True, bidirectional=True)
            self.gru = nn.GRU(10, 4, batch_first=True)
            self.head = nn.Linear(4, 3)

        def forward(self, idx):
            h, _ = self.lstm(self.emb(idx))
            h, _ = self.gru(h)
            return self.head(h)
    return Tagger()


def encoder(nn):
    layer = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0, batch_first=True,
                                       norm_first=True, activation="gelu")
    return nn.TransformerEncoder(layer, num_layers=2, norm=nn.LayerNorm(8), enable_nested_tensor=False)


def _inputs(kind, rng):
    if kind == "cnn":
        return rng.standard_normal((4, 3, 12, 12))
    if kind == "tagger":
        return rng.integers(0, 20, size=(3, 7))
    return rng.standard_normal((2, 5, 8))


BUILDERS = {"cnn": cnn, "tagger": tagger, "encoder": encoder}


def _pair(kind):
    torch.manual_seed(0)
    tm = BUILDERS[kind](torch.nn).double()
    nm = BUILDERS[kind](ng.nn).double()
    return tm, nm


@pytest.mark.parametrize("kind", list(BUILDERS))
def test_state_dict_layout_matches_torch(kind):
    tm, nm = _pair(kind)
    tsd, nsd = tm.state_dict(), nm.state_dict()
    assert list(nsd) == list(tsd)
    for k in tsd:
        assert tuple(nsd[k].shape) == tuple(tsd[k].shape), k
        assert str(nsd[k].dtype) == str(tsd[k].dtype).replace("torch.", ""), k
    n_params = sum(p.numel() for p in tm.parameters())
    assert sum(p.numel() for p in nm.parameters()) == n_params


@pytest.mark.parametrize("train", [False, True], ids=["eval", "train"])
@pytest.mark.parametrize("kind", list(BUILDERS))
def test_torch_weights_give_torch_outputs_and_grads(kind, train):
    tm, nm = _pair(kind)
    nm.load_state_dict({k: v.detach().numpy() for k, v in tm.state_dict().items()})
    if kind == "cnn":  # dropout draws differ between frameworks: keep it off in both
        tm[9].p = nm[9].p = 0.0
    tm.train(train)
    nm.train(train)
    x = _inputs(kind, np.random.default_rng(1))
    xt = torch.from_numpy(x)
    xn = ng.tensor(x)
    yt = tm(xt)
    yn = nm(xn)
    np.testing.assert_allclose(yn.detach().numpy(), yt.detach().numpy(), rtol=1e-9, atol=1e-11)
    w = np.random.default_rng(2).standard_normal(tuple(yt.shape))
    (yt * torch.from_numpy(w)).sum().backward()
    (yn * ng.tensor(w)).sum().backward()
    tgrads = {k: p.grad for k, p in tm.named_parameters()}
    for k, p in nm.named_parameters():
        tg = tgrads[k]
        if tg is None:
            assert p.grad is None or not np.any(p.grad.numpy()), k
            continue
        np.testing.assert_allclose(p.grad.numpy(), tg.numpy(), rtol=1e-8, atol=1e-10, err_msg=k)
    if train and kind == "cnn":  # batch norm's running statistics moved the same way
        nsd, tsd = nm.state_dict(), tm.state_dict()
        for k in ("1.running_mean", "1.running_var", "1.num_batches_tracked"):
            np.testing.assert_allclose(nsd[k].numpy(), tsd[k].numpy(), rtol=1e-10, err_msg=k)


def test_numbagrad_weights_load_into_torch():
    tm, nm = _pair("cnn")
    ng.manual_seed(3)
    nm = cnn(ng.nn).double()  # fresh numbagrad init, different from torch's
    tm.load_state_dict({k: torch.from_numpy(np.array(v.numpy())) for k, v in nm.state_dict().items()})
    tm.eval()
    nm.eval()
    x = _inputs("cnn", np.random.default_rng(4))
    np.testing.assert_allclose(nm(ng.tensor(x)).detach().numpy(), tm(torch.from_numpy(x)).detach().numpy(),
                               rtol=1e-9, atol=1e-11)
