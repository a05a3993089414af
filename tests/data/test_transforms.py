"""numbagrad.data.transforms against NumPy: per sample and per batch, Tensor and array."""
import numpy as np
import pytest

import numbagrad as ng
from numbagrad.data.transforms import Compose, Normalize, RandomAffine, RandomCrop, RandomHorizontalFlip


def _imgs(shape, seed=0, dtype=np.float32):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def test_normalize_matches_formula():
    x = _imgs((4, 3, 5, 6))
    mean, std = [0.1, -0.2, 0.3], [0.5, 2.0, 1.5]
    ref = (x.astype(np.float64) - np.array(mean)[:, None, None]) / np.array(std)[:, None, None]
    t = Normalize(mean, std)
    out = t(ng.tensor(x))
    assert isinstance(out, ng.Tensor) and out.dtype == np.float32 and out.shape == x.shape
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(t(x[2]), ref[2], rtol=1e-6, atol=1e-6)            # one (C, H, W) array
    np.testing.assert_allclose(Normalize(0.5, 2.0)(x[0, 0]), (x[0, 0] - 0.5) / 2.0, rtol=1e-6)   # (H, W)
    y = x.copy()
    assert Normalize(mean, std, inplace=True)(y) is y
    np.testing.assert_allclose(y, ref, rtol=1e-6, atol=1e-6)
    with pytest.raises(ValueError, match="mean has 2 values but the input has 3 channels"):
        Normalize([0, 0], [1, 1])(x)
    with pytest.raises(TypeError, match="floating point, got dtype uint8"):
        Normalize(0, 1)(np.zeros((2, 2), np.uint8))
    with pytest.raises(ValueError, match="division by zero"):
        Normalize(0, [1, 0])


def _is_window(out, padded):
    """Where ``out`` (C, h, w) sits in ``padded`` (C, Hp, Wp), by exhaustive search."""
    C, h, w = out.shape
    hits = [(i, j) for i in range(padded.shape[1] - h + 1) for j in range(padded.shape[2] - w + 1)
            if np.array_equal(padded[:, i:i + h, j:j + w], out)]
    return hits


@pytest.mark.parametrize("mode", ["constant", "edge", "reflect", "symmetric"])
def test_random_crop_is_a_window_of_the_padded_input(mode):
    x = _imgs((6, 2, 7, 9))
    t = RandomCrop((5, 6), padding=(1, 2, 3, 0), padding_mode=mode, fill=-9.0, generator=ng.Generator().manual_seed(1))
    out = t(ng.tensor(x))
    assert out.shape == (6, 2, 5, 6)
    kw = {"constant_values": -9.0} if mode == "constant" else {}
    padded = np.pad(x, ((0, 0), (0, 0), (2, 0), (1, 3)), mode=mode, **kw)     # left 1, top 2, right 3, bottom 0
    offsets = []
    for n in range(6):
        hits = _is_window(out.numpy()[n], padded[n])
        assert hits, f"sample {n} is not a window of its padded image"
        offsets.append(hits[0])
    assert len(set(offsets)) > 1                          # each sample draws its own offset
    # the same draws per sample give the batch's result
    g = ng.Generator().manual_seed(2)
    t2 = RandomCrop(4, padding=2, generator=g)
    top, left = t2.sample_params(6, x.shape)
    batch = t2.apply(x, (top, left))
    for n in range(6):
        np.testing.assert_array_equal(t2.apply(x[n], (top[n:n + 1], left[n:n + 1])), batch[n])
    # pad_if_needed, and errors
    small = _imgs((1, 3, 3))
    grown = RandomCrop(5, pad_if_needed=True)(small)
    assert grown.shape == (1, 5, 5) and _is_window(small, np.pad(grown, ((0, 0), (0, 0), (0, 0)))) != []
    with pytest.raises(ValueError, match=r"crop size \(5, 5\) is larger than the padded image \(3, 3\)"):
        RandomCrop(5)(small)
    with pytest.raises(ValueError, match="padding_mode"):
        RandomCrop(3, padding_mode="wrap")


def test_random_crop_seeded_by_manual_seed():
    x = _imgs((5, 1, 8, 8))
    ng.manual_seed(3)
    a = RandomCrop(6, padding=1)(x)
    ng.manual_seed(3)
    np.testing.assert_array_equal(RandomCrop(6, padding=1)(x), a)


def test_horizontal_flip():
    x = _imgs((5, 3, 4, 6))
    np.testing.assert_array_equal(RandomHorizontalFlip(p=1.0)(x), x[..., ::-1])
    np.testing.assert_array_equal(RandomHorizontalFlip(p=0.0)(ng.tensor(x)).numpy(), x)
    np.testing.assert_array_equal(RandomHorizontalFlip(1.0)(x[0, 0]), x[0, 0, :, ::-1])
    t = RandomHorizontalFlip(0.5, generator=ng.Generator().manual_seed(0))
    flip = t.sample_params(64)
    assert 0 < flip.sum() < 64
    out = t.apply(np.repeat(x[:1], 64, 0), flip)
    for n in (0, 1, 2, 3):
        np.testing.assert_array_equal(out[n], x[0, :, :, ::-1] if flip[n] else x[0])
    with pytest.raises(ValueError, match="p must be a probability"):
        RandomHorizontalFlip(1.5)


def test_affine_identity_shift_and_rotation():
    x = _imgs((3, 2, 9, 9))
    zero = (np.zeros(3), np.zeros(3), np.zeros(3), np.ones(3))
    for interp in ("nearest", "bilinear"):
        t = RandomAffine(0, interpolation=interp)
        np.testing.assert_allclose(t.apply(x, zero), x, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(t(ng.tensor(x)).numpy(), x, rtol=1e-6, atol=1e-6)   # degrees=0 draws 0
    # integer shifts: np.roll with the wrapped part zero-filled (tx right, ty down)
    t = RandomAffine(0, interpolation="bilinear")
    for tx, ty in ((2, 0), (0, -3), (1, 4), (-2, -1)):
        ref = np.roll(x, (ty, tx), axis=(2, 3))
        if ty > 0:
            ref[:, :, :ty] = 0
        elif ty < 0:
            ref[:, :, ty:] = 0
        if tx > 0:
            ref[:, :, :, :tx] = 0
        elif tx < 0:
            ref[:, :, :, tx:] = 0
        out = t.apply(x, (np.zeros(3), np.full(3, float(tx)), np.full(3, float(ty)), np.ones(3)))
        np.testing.assert_allclose(out, ref, rtol=1e-6, atol=1e-6)
    # rotations by multiples of 90 degrees (counter-clockwise as displayed) on square images
    for H in (8, 9):
        sq = _imgs((2, 3, H, H), seed=H)
        for k in (1, 2, 3, -1):
            out = RandomAffine(0).apply(sq, (np.full(2, 90.0 * k), np.zeros(2), np.zeros(2), np.ones(2)))
            np.testing.assert_array_equal(out, np.rot90(sq, k, axes=(2, 3)))


def test_affine_bilinear_half_pixel_and_scale():
    x = _imgs((1, 1, 6, 7))
    # a half-pixel shift right: each output is the mean of two neighbours (the left one zero at the edge)
    out = RandomAffine(0, interpolation="bilinear").apply(x, ([0.0], [0.5], [0.0], [1.0]))
    left = np.concatenate([np.zeros((1, 1, 6, 1), np.float32), x[..., :-1]], axis=-1)
    np.testing.assert_allclose(out, 0.5 * (x + left), rtol=1e-5, atol=1e-6)
    # scale 2 about the centre of an odd-sized image keeps the centre pixel and doubles distances
    y = _imgs((1, 1, 9, 9), seed=3)
    z = RandomAffine(0).apply(y, ([0.0], [0.0], [0.0], [2.0]))
    assert z[0, 0, 4, 4] == y[0, 0, 4, 4] and z[0, 0, 4, 6] == y[0, 0, 4, 5] and z[0, 0, 8, 4] == y[0, 0, 6, 4]


@pytest.mark.parametrize("interp", ["nearest", "bilinear"])
def test_affine_batch_equals_per_sample_with_the_same_draws(interp):
    x = _imgs((6, 2, 10, 10), seed=5)
    t = RandomAffine(30, translate=(0.2, 0.1), scale=(0.8, 1.2), interpolation=interp, fill=0.5,
                     generator=ng.Generator().manual_seed(9))
    params = t.sample_params(6, x.shape)
    assert np.all(np.abs(params[0]) <= 30) and np.all(np.abs(params[1]) <= 2) and np.all(params[1] % 1 == 0)
    batch = t.apply(ng.tensor(x), params).numpy()
    for n in range(6):
        one = t.apply(x[n], tuple(p[n:n + 1] for p in params))
        np.testing.assert_allclose(one, batch[n], rtol=1e-6, atol=1e-6)
    assert not np.allclose(batch[0], x[0])
    # uint8 in, uint8 out; a generator makes it reproducible
    u = (np.random.default_rng(0).random((2, 1, 8, 8)) * 255).astype(np.uint8)
    a = RandomAffine(20, generator=ng.Generator().manual_seed(1))(u)
    assert a.dtype == np.uint8 and np.array_equal(a, RandomAffine(20, generator=ng.Generator().manual_seed(1))(u))
    with pytest.raises(ValueError, match="interpolation"):
        RandomAffine(10, interpolation="cubic")


def test_compose_and_batched_flag():
    x = _imgs((4, 1, 8, 8))
    g1, g2 = ng.Generator().manual_seed(4), ng.Generator().manual_seed(4)
    c = Compose([RandomCrop(6, padding=1, generator=g1), RandomHorizontalFlip(1.0), Normalize(0.2, 0.5)])
    assert c.batched and not Compose([c, lambda v: v]).batched
    out = c(x)
    crop = RandomCrop(6, padding=1, generator=g2)(x)
    np.testing.assert_allclose(out, (crop[..., ::-1] - 0.2) / 0.5, rtol=1e-6, atol=1e-6)
    with pytest.raises(TypeError, match="callable"):
        Compose([1])
