import numpy as np
import pytest

import numbagrad as ng
from numbagrad.backend import config
from optest import randn

ALPHA_PRIME = 1.7580993408473766


def _drop(n=100_000, p=0.5, dtype=np.float32, seed=0, **kw):
    ng.manual_seed(seed)
    return ng.dropout(ng.ones(n, dtype=dtype), p, **kw).numpy()


def test_reproducible_under_manual_seed():
    a = _drop(seed=7)
    b = _drop(seed=7)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, _drop(seed=8))
    ng.manual_seed(7)
    x = ng.ones(1000)
    first, second = ng.dropout(x).numpy(), ng.dropout(x).numpy()
    assert not np.array_equal(first, second)  # the generator advances between calls


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_fraction_of_zeros_and_mean(p):
    n = 200_000
    y = _drop(n, p, seed=1)
    frac = np.mean(y == 0)
    sigma = np.sqrt(p * (1 - p) / n)
    assert abs(frac - p) < 5 * sigma, (frac, p)
    np.testing.assert_allclose(np.unique(y), [0.0, 1 / (1 - p)], rtol=1e-6)
    assert abs(y.mean() - 1.0) < 5 * sigma / (1 - p)  # inverted scaling keeps E[y] = x


def test_mask_has_no_obvious_structure():
    y = _drop(1 << 16, 0.5, seed=2) > 0
    # neighbouring elements and elements 8 apart are uncorrelated
    for lag in (1, 2, 8, 64):
        c = np.corrcoef(y[:-lag], y[lag:])[0, 1]
        assert abs(c) < 0.02, (lag, c)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gradient_is_mask_times_scale(dtype):
    p = 0.3
    xv = randn(40, 50, seed=3).astype(dtype)
    x = ng.tensor(xv, requires_grad=True)
    y = ng.dropout(x, p)
    assert y.dtype == dtype
    g = randn(40, 50, seed=4).astype(dtype)
    y.backward(ng.tensor(g))
    mask = y.detach().numpy() != 0
    scale = dtype(1 / (1 - p))
    np.testing.assert_array_equal(y.detach().numpy(), np.where(mask, xv * scale, 0))
    np.testing.assert_array_equal(x.grad.numpy(), np.where(mask, g * scale, 0))


def test_identity_and_all_dropped():
    x = ng.tensor(randn(5, 4, seed=5), requires_grad=True)
    assert ng.dropout(x, 0.5, training=False) is x
    assert ng.dropout(x, 0.0) is x
    y = ng.dropout(x, 1.0)
    np.testing.assert_array_equal(y.detach().numpy(), np.zeros((5, 4)))
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.zeros((5, 4)))
    for bad in (-0.1, 1.5):
        with pytest.raises(ValueError, match="between 0 and 1"):
            ng.dropout(x, bad)


def test_parallel_path_equals_serial(monkeypatch):
    n = (1 << 17) + 5
    x = ng.tensor(randn(n, seed=6).astype(np.float32), requires_grad=True)
    ng.manual_seed(11)
    y_par = ng.dropout(x, 0.4)
    y_par.sum().backward()
    g_par = x.grad.numpy().copy()
    x.grad = None
    monkeypatch.setattr(config, "PARALLEL_THRESHOLD", 1 << 62)
    ng.manual_seed(11)
    y_ser = ng.dropout(x, 0.4)
    y_ser.sum().backward()
    np.testing.assert_array_equal(y_par.detach().numpy(), y_ser.detach().numpy())
    np.testing.assert_array_equal(g_par, x.grad.numpy())


def test_non_contiguous_inplace_and_dtypes():
    a = randn(6, 8, seed=7)
    ng.manual_seed(3)
    y = ng.dropout(ng.tensor(a).T, 0.5).numpy()
    kept = y != 0
    np.testing.assert_allclose(y[kept], 2 * a.T[kept].astype(np.float32))
    t = ng.tensor(a.copy())
    r = ng.dropout(t, 0.5, inplace=True)
    assert r is t and np.mean(t.numpy() == 0) > 0
    h = ng.dropout(ng.ones(1000, dtype=ng.float16), 0.5)
    assert h.dtype == ng.float16 and set(np.unique(h.numpy())) <= {0.0, 2.0}
    i = ng.dropout(ng.tensor(np.arange(1, 101)), 0.5)
    assert i.dtype == ng.get_default_dtype()


def test_backward_through_graph_uses_same_mask():
    x = ng.tensor(randn(30, seed=8), requires_grad=True)
    h = x * 2.0
    y = ng.dropout(h, 0.5)
    (y * y).sum().backward()  # d/dx sum(y^2) = 2 y * mask * 2 * 2
    yv = y.detach().numpy()
    np.testing.assert_allclose(x.grad.numpy(), 2 * yv * (yv != 0) * 2.0 * 2.0)


@pytest.mark.parametrize("fn,shape,mask_dims", [
    (ng.dropout1d, (4, 8, 10), 2), (ng.dropout1d, (8, 10), 1),
    (ng.dropout2d, (4, 8, 5, 5), 2), (ng.dropout3d, (2, 6, 3, 3, 3), 2), (ng.dropout3d, (6, 3, 3, 3), 1)])
def test_feature_dropout_zeros_whole_channels(fn, shape, mask_dims):
    ng.manual_seed(4)
    x = ng.tensor(np.abs(randn(*shape, seed=9)) + 0.1, requires_grad=True)
    y = fn(x, 0.5)
    yv = y.detach().numpy()
    per_channel = (yv != 0).reshape(shape[:mask_dims] + (-1,))
    assert np.all(per_channel.all(-1) | (~per_channel).all(-1))  # a channel is all kept or all dropped
    kept = per_channel.all(-1)
    assert 0 < kept.mean() < 1
    np.testing.assert_allclose(yv, np.where(yv != 0, 2 * x.detach().numpy(), 0), rtol=1e-6)
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), (yv != 0) * 2.0)


def test_feature_dropout_rank_checks():
    with pytest.raises(RuntimeError, match="dropout1d"):
        ng.dropout1d(ng.ones(2, 3, 4, 5))
    with pytest.warns(UserWarning, match="3D input to dropout2d"):
        y = ng.dropout2d(ng.ones(4, 16, 3), 0.5)
    yv = y.numpy()
    assert np.all((yv == 0).all(-1) | (yv != 0).all(-1))  # (N, C, L): whole rows of length L
    x = ng.ones(2, 3, 4, 4)
    assert ng.dropout2d(x, 0.5, training=False) is x


def test_alpha_dropout():
    x = ng.tensor(randn(200_000, seed=10).astype(np.float32), requires_grad=True)
    assert ng.alpha_dropout(x, 0.2) is x  # training defaults to False, as in PyTorch
    ng.manual_seed(5)
    p = 0.2
    y = ng.alpha_dropout(x, p, training=True)
    yv = y.detach().numpy()
    # SELU fixed point: zero mean, unit variance are preserved
    assert abs(yv.mean()) < 0.02 and abs(yv.std() - 1) < 0.02
    a = 1 / np.sqrt((ALPHA_PRIME ** 2 * p + 1) * (1 - p))
    dropped_value = -ALPHA_PRIME * a * (1 - p)
    dropped = np.isclose(yv, dropped_value, rtol=1e-6)
    assert abs(dropped.mean() - p) < 0.01
    xv = x.detach().numpy()
    np.testing.assert_allclose(yv[~dropped], a * xv[~dropped] + ALPHA_PRIME * a * p, rtol=1e-5, atol=1e-6)
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.where(dropped, 0, a), rtol=1e-6)
    np.testing.assert_array_equal(ng.alpha_dropout(ng.ones(5), 1.0, training=True).numpy(), np.zeros(5))


def test_feature_alpha_dropout():
    ng.manual_seed(6)
    x = ng.tensor(randn(8, 64, 9, seed=11), requires_grad=True)
    y = ng.feature_alpha_dropout(x, 0.5, training=True)
    yv = y.detach().numpy()
    a = 1 / np.sqrt((ALPHA_PRIME ** 2 * 0.5 + 1) * 0.5)
    dropped = np.isclose(yv, -ALPHA_PRIME * a * 0.5).all(-1)
    assert 0.3 < dropped.mean() < 0.7
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.where(dropped[..., None], 0.0, a) * np.ones((8, 64, 9)))


def test_matches_torch_statistics_not_stream():
    # The stream differs from PyTorch's by design; the distribution must not.
    torch = pytest.importorskip("torch")
    ty = torch.nn.functional.dropout(torch.ones(100_000), 0.25).numpy()
    y = _drop(100_000, 0.25, seed=12)
    assert abs(np.mean(ty == 0) - np.mean(y == 0)) < 0.01
    assert set(np.unique(ty)) == set(np.unique(y))
