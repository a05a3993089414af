"""Small pieces of PyTorch's surface that real programs hit (issue 14's table): ``tril`` /
``triu``, ``randint(high, size)``, ``where`` with two Python scalars, ``f"{loss:.4f}"``,
the ``new_*`` constructors, the device-kind properties and ``numbagrad.cuda``'s seed
functions. Checked against NumPy, and against torch where it is installed."""
import numpy as np
import pytest

import numbagrad as ng

try:
    import torch
except ImportError:
    torch = None


@pytest.mark.parametrize("shape", [(4, 4), (3, 5), (2, 5, 3)])
@pytest.mark.parametrize("diagonal", [0, 1, -1, 7, -7])
@pytest.mark.parametrize("name", ["tril", "triu"])
def test_triangles_match_numpy_and_pass_gradients_inside(name, diagonal, shape):
    rng = np.random.default_rng(0)
    a = rng.standard_normal(shape)
    a[..., 0, -1] = np.inf      # outside either triangle for small diagonals: still an exact 0
    x = ng.tensor(a, requires_grad=True)
    y = getattr(ng, name)(x, diagonal)
    ref = getattr(np, name)(a, diagonal)
    np.testing.assert_array_equal(y.detach().numpy(), ref)
    np.testing.assert_array_equal(getattr(x, name)(diagonal=diagonal).detach().numpy(), ref)
    g = rng.standard_normal(shape)
    y.backward(ng.tensor(g))
    np.testing.assert_array_equal(x.grad.numpy(), getattr(np, name)(g, diagonal))
    if torch is not None:
        np.testing.assert_array_equal(y.detach().numpy(), getattr(torch, name)(torch.tensor(a), diagonal).numpy())


def test_triangles_reject_bad_input():
    with pytest.raises(RuntimeError, match="tril: input tensor must have at least 2 dimensions"):
        ng.tril(ng.ones(3))
    with pytest.raises(TypeError, match="triu: diagonal must be an int"):
        ng.triu(ng.ones(2, 2), 0.5)


def test_randint_with_high_and_size_only():
    ng.manual_seed(3)
    a = ng.randint(10, (200,))
    assert a.shape == (200,) and a.dtype == np.int64
    v = a.numpy()
    assert v.min() >= 0 and v.max() < 10 and len(np.unique(v)) == 10
    ng.manual_seed(3)
    np.testing.assert_array_equal(ng.randint(0, 10, (200,)).numpy(), v)  # the same draw as (0, 10, size)


def test_where_with_two_python_scalars():
    c = ng.tensor([True, False, True])
    for a, b, dtype in [(1.0, 0.0, np.float32), (1, 0, np.int64), (True, False, np.bool_), (2, 0.5, np.float32)]:
        out = ng.where(c, a, b)
        assert out.dtype == dtype
        np.testing.assert_array_equal(out.numpy(), np.where([True, False, True], a, b).astype(dtype))
        if torch is not None:
            assert str(torch.where(torch.tensor([True, False, True]), a, b).dtype) == f"torch.{np.dtype(dtype)}"


def test_format_of_a_scalar_tensor():
    loss = ng.tensor(0.123456)
    assert f"{loss:.4f}" == "0.1235" and f"{ng.tensor(7):>3d}" == "  7" and f"{loss}" == str(loss.item())
    with pytest.raises(TypeError):
        f"{ng.ones(2):.2f}"
    if torch is not None:
        assert f"{torch.tensor(0.123456):.4f}" == f"{loss:.4f}"


def test_new_constructors_take_dtype_and_device_from_self():
    x = ng.ones(2, dtype=ng.float64)
    for t, want in [(x.new_zeros(2, 3), np.zeros((2, 3))), (x.new_zeros((2, 3)), np.zeros((2, 3))),
                    (x.new_ones(4), np.ones(4)), (x.new_full((2,), 7.0), np.full(2, 7.0)),
                    (x.new_tensor([1, 2]), np.array([1.0, 2.0]))]:
        assert t.dtype == np.float64 and t.device == x.device and not t.requires_grad
        np.testing.assert_array_equal(t.numpy(), want)
    e = x.new_empty(3, dtype=ng.int32, requires_grad=False)
    assert e.shape == (3,) and e.dtype == np.int32
    assert x.new_zeros(2, requires_grad=True).requires_grad
    src = ng.tensor([1.0, 2.0], requires_grad=True)
    c = x.new_tensor(src)
    assert c.is_leaf and not c.requires_grad and not np.shares_memory(c.array, src.array)


def test_device_kind_properties():
    x = ng.ones(2)
    assert x.is_cpu and not x.is_cuda and not x.is_xpu and not x.is_mps and not x.is_meta


def test_cuda_seed_functions_are_harmless_without_a_gpu():
    ng.manual_seed(5)
    a = ng.rand(3).numpy()
    ng.manual_seed(5)
    ng.cuda.manual_seed(123)
    ng.cuda.manual_seed_all(123)
    b = ng.rand(3).numpy()
    if not ng.cuda.is_available():
        np.testing.assert_array_equal(a, b)  # the CPU generator was not touched


def _np_pixel_shuffle(a, r):
    *b, c, h, w = a.shape
    x = a.reshape(*b, c // (r * r), r, r, h, w)
    n = len(b)
    x = x.transpose(*range(n), n, n + 3, n + 1, n + 4, n + 2)
    return x.reshape(*b, c // (r * r), h * r, w * r)


@pytest.mark.parametrize("shape,r", [((2, 8, 3, 5), 2), ((9, 2, 2), 3), ((1, 2, 4, 1, 1), 1), ((2, 1, 12, 3, 2), 2)])
def test_pixel_shuffle_and_unshuffle(shape, r):
    rng = np.random.default_rng(1)
    a = rng.standard_normal(shape)
    x = ng.tensor(a, requires_grad=True)
    y = ng.nn.functional.pixel_shuffle(x, r)
    want = _np_pixel_shuffle(a, r)
    np.testing.assert_array_equal(y.detach().numpy(), want)
    np.testing.assert_array_equal(ng.nn.PixelShuffle(r)(x).detach().numpy(), want)
    back = ng.nn.PixelUnshuffle(r)(y)
    np.testing.assert_array_equal(back.detach().numpy(), a)
    g = rng.standard_normal(want.shape)
    y.backward(ng.tensor(g))  # a permutation: the gradient is the upstream one shuffled back
    np.testing.assert_array_equal(_np_pixel_shuffle(x.grad.numpy(), r), g)
    if torch is not None:
        np.testing.assert_array_equal(torch.nn.functional.pixel_shuffle(torch.tensor(a), r).numpy(), want)
        np.testing.assert_array_equal(torch.nn.functional.pixel_unshuffle(torch.tensor(want), r).numpy(), a)


def test_pixel_shuffle_rejects_bad_shapes():
    with pytest.raises(RuntimeError, match=r"pixel_shuffle: the channels \(6, shape \(1, 6, 2, 2\)\)"):
        ng.nn.functional.pixel_shuffle(ng.ones(1, 6, 2, 2), 2)
    with pytest.raises(RuntimeError, match="pixel_unshuffle: height and width"):
        ng.nn.functional.pixel_unshuffle(ng.ones(1, 1, 3, 4), 2)
    with pytest.raises(RuntimeError, match="positive int"):
        ng.nn.PixelShuffle(0)(ng.ones(1, 4, 2, 2))
    with pytest.raises(RuntimeError, match="at least 3 dimensions"):
        ng.nn.functional.pixel_shuffle(ng.ones(4, 2), 2)


def test_indexing_with_a_range():
    a = np.arange(20.0).reshape(4, 5)
    x = ng.tensor(a, requires_grad=True)
    idx = np.array([4, 0, 2, 2])
    y = x[range(4), ng.tensor(idx)]
    np.testing.assert_array_equal(y.detach().numpy(), a[range(4), idx])
    y.sum().backward()
    want = np.zeros_like(a)
    want[np.arange(4), idx] = 1
    np.testing.assert_array_equal(x.grad.numpy(), want)
    assert x[range(0)].shape == (0, 5) and x.detach()[range(1, 4, 2)].shape == (2, 5)


def test_from_numpy_of_a_memmap_shares_memory_as_a_plain_array(tmp_path):
    mm = np.memmap(tmp_path / "x.bin", dtype=np.float32, mode="w+", shape=(3, 4))
    mm[:] = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = ng.from_numpy(mm)
    assert type(t.array) is np.ndarray and np.shares_memory(t.array, mm)
    np.testing.assert_array_equal((t * 2).sum(1).numpy(), np.arange(12.0).reshape(3, 4).sum(1) * 2)
    mm[0, 0] = 100.0                       # the same memory, both ways
    assert t[0, 0].item() == 100.0
    t[1, 1] = -1.0
    assert mm[1, 1] == -1.0


def test_size_is_tensor_and_dtype():
    s = ng.Size([2, 3, 4])
    assert s == (2, 3, 4) == ng.ones(2, 3, 4).shape and s.numel() == 24 and isinstance(s, tuple)
    assert ng.Size() == () and ng.Size().numel() == 1 and repr(s) == "numbagrad.Size([2, 3, 4])"
    assert ng.is_tensor(ng.ones(1)) and ng.is_tensor(ng.nn.Parameter(ng.ones(1))) and not ng.is_tensor(np.ones(1))
    assert isinstance(ng.float32, ng.dtype) and isinstance(ng.ones(1).dtype, ng.dtype)
    if torch is not None:
        assert torch.Size([2, 3, 4]).numel() == s.numel()


def test_in_place_fills_and_casts():
    a = np.array([[-3.0, 0.5, 7.0]], np.float32)
    x = ng.tensor(a.copy())
    v = x._version_value
    assert x.clamp_(-1, 2) is x and x._version_value > v
    np.testing.assert_array_equal(x.numpy(), np.clip(a, -1, 2))
    assert x.type_as(ng.zeros(1, dtype=ng.float64)).dtype == np.float64
    ng.manual_seed(0)
    n = ng.zeros(20000).normal_(2.0, 0.5).numpy()
    assert abs(n.mean() - 2.0) < 5 * 0.5 / np.sqrt(n.size) and abs(n.std() - 0.5) < 0.01
    u = ng.zeros(20000).uniform_(1.0, 3.0).numpy()
    assert u.min() >= 1.0 and u.max() < 3.0 and abs(u.mean() - 2.0) < 5 * (2 / np.sqrt(12)) / np.sqrt(u.size)
    t = ng.tensor(np.arange(6.0).reshape(2, 3))
    assert t.apply_(lambda e: e * e + 1) is t
    np.testing.assert_array_equal(t.numpy(), np.arange(6.0).reshape(2, 3) ** 2 + 1)
    with pytest.raises(RuntimeError, match="apply_"):
        ng.ones(2, requires_grad=True).apply_(abs)


@pytest.mark.parametrize("p,dim", [(2.0, 1), (1, 0), (3.0, -1)])
def test_normalize_matches_numpy_and_torch(p, dim):
    a = np.random.default_rng(2).standard_normal((4, 5))
    a[1] = 0.0                                    # an all-zero row: divided by eps, stays 0
    got = ng.nn.functional.normalize(ng.tensor(a), p=p, dim=dim).numpy()
    n = np.sum(np.abs(a) ** p, axis=dim, keepdims=True) ** (1 / p)
    np.testing.assert_allclose(got, a / np.maximum(n, 1e-12), rtol=1e-12)
    if torch is not None:
        np.testing.assert_allclose(got, torch.nn.functional.normalize(torch.tensor(a), p=p, dim=dim).numpy(),
                                   rtol=1e-12)
    x = ng.tensor(a[[0, 2, 3]] if dim != 0 else a + 1.0, requires_grad=True)
    ng.autograd.gradcheck(lambda t: ng.nn.functional.normalize(t, p=p, dim=dim), (x,))


def _np_resize(a, out, mode, align_corners):
    """Loop reference of nearest / bilinear resizing of the last two dims."""
    h, w = a.shape[-2:]
    res = np.empty(a.shape[:-2] + tuple(out))

    def src(o, n_in, n_out):
        if mode == "nearest":
            return min(int(np.floor(o * n_in / n_out)), n_in - 1), None
        if align_corners:
            p = o * (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
        else:
            p = max((o + 0.5) * n_in / n_out - 0.5, 0.0)
        i0 = min(int(np.floor(p)), n_in - 1)
        return i0, (min(i0 + 1, n_in - 1), p - i0)
    for i in range(out[0]):
        y0, ly = src(i, h, out[0])
        for j in range(out[1]):
            x0, lx = src(j, w, out[1])
            if mode == "nearest":
                res[..., i, j] = a[..., y0, x0]
            else:
                (y1, wy), (x1, wx) = ly, lx
                top = a[..., y0, x0] * (1 - wx) + a[..., y0, x1] * wx
                bot = a[..., y1, x0] * (1 - wx) + a[..., y1, x1] * wx
                res[..., i, j] = top * (1 - wy) + bot * wy
    return res


@pytest.mark.parametrize("mode,align", [("nearest", None), ("bilinear", False), ("bilinear", True)])
@pytest.mark.parametrize("size", [(8, 10), (3, 2), (4, 7)])
def test_interpolate_matches_a_loop_reference_and_torch(mode, align, size):
    a = np.random.default_rng(4).standard_normal((2, 3, 4, 5))
    got = ng.nn.functional.interpolate(ng.tensor(a), size=size, mode=mode, align_corners=align).numpy()
    np.testing.assert_allclose(got, _np_resize(a, size, mode, align), rtol=1e-12, atol=1e-12)
    up = ng.nn.Upsample(size=size, mode=mode, align_corners=align)(ng.tensor(a)).numpy()
    np.testing.assert_array_equal(up, got)
    if torch is not None:
        want = torch.nn.functional.interpolate(torch.tensor(a), size=size, mode=mode, align_corners=align).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    x = ng.tensor(a[:1, :2], requires_grad=True)
    ng.autograd.gradcheck(lambda t: ng.nn.functional.interpolate(t, size=size, mode=mode, align_corners=align), (x,))


def test_interpolate_scale_factor_and_errors():
    a = np.random.default_rng(5).standard_normal((1, 2, 3, 4))
    got = ng.nn.functional.interpolate(ng.tensor(a), scale_factor=2).numpy()
    np.testing.assert_array_equal(got, a.repeat(2, axis=2).repeat(2, axis=3))
    one_d = ng.nn.functional.interpolate(ng.tensor(a[:, :, 0]), scale_factor=3).numpy()
    np.testing.assert_array_equal(one_d, a[:, :, 0].repeat(3, axis=2))
    assert ng.nn.UpsamplingBilinear2d(scale_factor=2)(ng.tensor(a)).shape == (1, 2, 6, 8)
    with pytest.raises(ValueError, match="exactly one of size and scale_factor"):
        ng.nn.functional.interpolate(ng.tensor(a))
    with pytest.raises(NotImplementedError, match="mode 'bicubic'"):
        ng.nn.functional.interpolate(ng.tensor(a), scale_factor=2, mode="bicubic")
    with pytest.raises(ValueError, match="3-D, 4-D or 5-D"):
        ng.nn.functional.interpolate(ng.ones(4), scale_factor=2)


@pytest.mark.parametrize("eq,shapes", [("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]), ("bij,bjk,k", [(2, 3, 4), (2, 4, 5), (5,)]),
                                       ("...ij,...jk", [(2, 3, 4), (2, 4, 5)]), ("ij->", [(3, 4)]),
                                       ("bij->j", [(2, 3, 4)]), ("i,j->ij", [(3,), (4,)]), ("bhqd,bhkd->bhqk",
                                                                                          [(1, 2, 3, 4), (1, 2, 5, 4)])])
def test_einsum_matches_numpy_torch_and_finite_differences(eq, shapes):
    rng = np.random.default_rng(6)
    arrs = [rng.standard_normal(s) for s in shapes]
    got = ng.einsum(eq, *[ng.tensor(a) for a in arrs])
    np.testing.assert_allclose(got.numpy(), np.einsum(eq, *arrs), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(ng.einsum(eq, [ng.tensor(a) for a in arrs]).numpy(), got.numpy())  # list form
    if torch is not None:
        np.testing.assert_allclose(got.numpy(), torch.einsum(eq, *[torch.tensor(a) for a in arrs]).numpy(),
                                   rtol=1e-12, atol=1e-12)
    ts = [ng.tensor(a, requires_grad=True) for a in arrs]
    ng.autograd.gradcheck(lambda *t: ng.einsum(eq, *t), tuple(ts))


def test_einsum_errors_and_numel():
    with pytest.raises(ValueError, match="has 2 operands, got 1"):
        ng.einsum("ij,jk", ng.ones(2, 2))
    with pytest.raises(ValueError, match="index 'j' has sizes 3 and 4"):
        ng.einsum("ij,jk", ng.ones(2, 3), ng.ones(4, 2))
    x = ng.ones(3, 3, requires_grad=True)
    with pytest.raises(NotImplementedError, match="repeated index"):
        ng.einsum("ii->i", x).sum().backward()
    np.testing.assert_array_equal(ng.einsum("ii->i", ng.tensor(np.arange(9.0).reshape(3, 3))).numpy(), [0, 4, 8])
    assert ng.numel(ng.ones(2, 5)) == 10


def test_an_endless_random_sampler_raises_instead_of_allocating():
    from numbagrad.data import DataLoader, RandomSampler, TensorDataset
    ds = TensorDataset(ng.arange(10))
    s = RandomSampler(ds, replacement=True, num_samples=int(1e10))
    assert len(s) == int(1e10)
    with pytest.raises(NotImplementedError, match=r"num_samples=10000000000 would draw 74\.5 GiB"):
        next(iter(DataLoader(ds, batch_size=4, sampler=s)))
    small = RandomSampler(ds, replacement=True, num_samples=1000)
    v = np.concatenate([b[0].numpy() for b in DataLoader(ds, batch_size=100, sampler=small)])
    assert v.shape == (1000,) and v.min() >= 0 and v.max() <= 9 and len(np.unique(v)) == 10


def test_deprecated_init_spellings_warn_and_fill_like_the_new_ones():
    a, b = ng.nn.Parameter(ng.zeros(4, 5)), ng.nn.Parameter(ng.zeros(4, 5))
    ng.manual_seed(1)
    with pytest.warns(FutureWarning, match="nn.init.xavier_uniform is now deprecated"):
        ng.nn.init.xavier_uniform(a)
    ng.manual_seed(1)
    ng.nn.init.xavier_uniform_(b)
    np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())
    with pytest.warns(FutureWarning):
        ng.nn.init.constant(a, 0.5)
    assert (a.detach().numpy() == 0.5).all()
