"""Device plumbing of CUDA tensors: moving between devices, dtype conversions and creation
functions on the device, clear errors when devices mix, conversions back to Python,
autograd across a device move, in-place ops with their version counters, and the caching
allocator behind ``numbagrad.cuda.memory_allocated()``.

Runs under numba's CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``) or on a GPU; tiny shapes.
"""
import gc

import numpy as np
import pytest

import numbagrad as ng
from numbagrad.backend import cuda as cb
from numbagrad.backend.cuda_array import CudaArray
from optest import randn

cuda = pytest.importorskip("numba.cuda")

CUDA = ng.device("cuda:0")


def host(t):
    return t.detach().cpu().numpy()


# ---- moving between devices -------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, np.int64, np.int32, np.bool_])
def test_to_cuda_and_back_round_trip(dtype):
    a = (randn(3, 4, seed=1) * 3).astype(dtype)
    t = ng.tensor(a)
    g = t.to("cuda")
    assert g.device == CUDA and g.is_cuda and str(g.device) == "cuda:0"
    assert isinstance(g.array, CudaArray) and g.dtype == a.dtype and g.shape == a.shape
    back = g.cpu()
    assert back.device == ng.device("cpu") and not back.is_cuda
    np.testing.assert_array_equal(back.numpy(), a)
    assert g.cuda() is g and g.to("cuda:0") is g and t.cpu() is t  # no-op moves return self
    np.testing.assert_array_equal(host(t.cuda()), a)


def test_move_strided_views_and_device_objects():
    a = randn(4, 5, seed=2)
    t = ng.tensor(a)
    np.testing.assert_array_equal(host(t.T.to("cuda")), a.T)
    g = t.to(ng.device("cuda"))
    np.testing.assert_array_equal(g[::2, 1:].cpu().numpy(), a[::2, 1:])  # a strided device view
    np.testing.assert_array_equal(g.T.cpu().numpy(), a.T)
    np.testing.assert_array_equal(ng.flip(g, 0).cpu().numpy(), a[::-1])  # negative strides
    other = ng.zeros(1, device="cuda")
    assert t.to(other).device == CUDA  # to(tensor) takes its device (and dtype)
    assert t.to(other).dtype == np.float32


def test_numpy_of_a_cuda_tensor_is_a_host_copy_and_implicit_conversion_raises():
    g = ng.tensor([1.0, 2.0], device="cuda")
    h = g.numpy()
    assert isinstance(h, np.ndarray)
    h[0] = 5.0
    assert g.tolist() == [1.0, 2.0]
    with pytest.raises(TypeError, match="implicit conversion of a CUDA array"):
        np.asarray(g.array)


def test_unknown_cuda_index_raises():
    ng.zeros(1, device="cuda")  # initialise the backend first
    with pytest.raises(RuntimeError, match="cuda:1"):
        ng.zeros(2, device="cuda:1")


# ---- dtypes on the device -------------------------------------------------------------------------------
@pytest.mark.parametrize("src,dst", [(np.float32, np.float64), (np.float64, np.float32), (np.float32, np.float16),
                                     (np.float16, np.float32), (np.float32, np.int64), (np.int64, np.float32),
                                     (np.float32, np.bool_), (np.bool_, np.float32), (np.int64, np.int32)])
def test_dtype_conversion_on_device(src, dst):
    a = (randn(2, 3, seed=3) * 4).astype(src)
    if src == np.float32 and dst == np.bool_:
        a[0, 0] = 0
    g = ng.tensor(a, device="cuda").to(dst)
    assert g.device == CUDA and g.dtype == np.dtype(dst)
    np.testing.assert_array_equal(host(g), a.astype(dst))


def test_dtype_shortcuts_and_to_device_and_dtype_at_once():
    a = randn(2, 3, seed=4) * 3
    t = ng.tensor(a.astype(np.float32))
    g = t.to("cuda", ng.float64)
    assert g.device == CUDA and g.dtype == np.float64
    for m, dt in [("half", np.float16), ("double", np.float64), ("long", np.int64), ("int", np.int32),
                  ("bool", np.bool_), ("float", np.float32)]:
        r = getattr(g, m)()
        assert r.device == CUDA and r.dtype == np.dtype(dt)
        np.testing.assert_array_equal(host(r), a.astype(np.float32).astype(np.float64).astype(dt))


def test_cast_backward_stays_on_device():
    x = ng.tensor(randn(2, 3, seed=5), device="cuda", requires_grad=True)  # float64 leaf
    (x.float() * 2).sum().backward()
    assert x.grad.device == CUDA and x.grad.dtype == np.float64
    np.testing.assert_array_equal(host(x.grad), np.full((2, 3), 2.0))


def test_half_arithmetic_on_device():
    a = randn(2, 3, seed=6).astype(np.float16)
    g = ng.tensor(a, device="cuda")
    r = (g * g + 1).sum(1)
    assert r.dtype == np.float16 and r.device == CUDA
    np.testing.assert_allclose(host(r), (a.astype(np.float32) ** 2 + 1).sum(1), rtol=2e-3)


# ---- creation functions ----------------------------------------------------------------------------------
def test_creation_functions_with_device():
    cases = [
        (ng.zeros(2, 3, device="cuda"), np.zeros((2, 3), np.float32)),
        (ng.ones((2, 3), dtype=ng.float64, device="cuda"), np.ones((2, 3))),
        (ng.full((2, 2), 1.5, device="cuda"), np.full((2, 2), 1.5, np.float32)),
        (ng.full((3,), 7, device="cuda"), np.full(3, 7, np.int64)),
        (ng.arange(5, device="cuda"), np.arange(5)),
        (ng.arange(0.0, 1.0, 0.25, device="cuda"), np.arange(0, 1, 0.25, dtype=np.float32)),
        (ng.linspace(0, 1, 5, device="cuda"), np.linspace(0, 1, 5).astype(np.float32)),
        (ng.eye(3, 2, device="cuda"), np.eye(3, 2, dtype=np.float32)),
        (ng.tensor([[1, 2], [3, 4]], device="cuda"), np.array([[1, 2], [3, 4]])),
        (ng.tensor([True, False], device="cuda"), np.array([True, False])),
    ]
    for t, e in cases:
        assert t.device == CUDA, e
        assert t.dtype == e.dtype, (t.dtype, e.dtype)
        np.testing.assert_array_equal(host(t), e)
    assert ng.empty(2, 3, device="cuda").shape == (2, 3)
    e = ng.empty(0, 3, device="cuda")
    assert e.shape == (0, 3) and host(e).shape == (0, 3)


def test_random_creation_matches_cpu_for_the_same_seed():
    ng.manual_seed(7)
    c = [ng.rand(2, 3), ng.randn(4), ng.randint(0, 5, (3,)), ng.randperm(4)]
    ng.manual_seed(7)
    g = [ng.rand(2, 3, device="cuda"), ng.randn(4, device="cuda"), ng.randint(0, 5, (3,), device="cuda"),
         ng.randperm(4, device="cuda")]
    for a, b in zip(c, g):
        assert b.device == CUDA and b.dtype == a.dtype
        np.testing.assert_array_equal(host(b), a.numpy())


def test_like_functions_follow_the_input_device():
    x = ng.randn(2, 3, dtype=ng.float64, device="cuda")
    for t in [ng.zeros_like(x), ng.ones_like(x), ng.empty_like(x), ng.rand_like(x), ng.randn_like(x),
              ng.full_like(x, 2.5)]:
        assert t.device == CUDA and t.dtype == np.float64 and t.shape == (2, 3)
    np.testing.assert_array_equal(host(ng.full_like(x, 2.5)), np.full((2, 3), 2.5))
    assert ng.zeros_like(x, device="cpu").device == ng.device("cpu")


def test_tensor_of_a_cuda_tensor_keeps_its_device():
    assert ng.tensor(ng.ones(2, device="cuda")).device == CUDA


def test_requires_grad_at_creation_on_device():
    x = ng.ones(2, device="cuda", requires_grad=True)
    assert x.requires_grad and x.is_leaf and x.device == CUDA
    (x * x).sum().backward()
    np.testing.assert_array_equal(host(x.grad), [2.0, 2.0])


def test_zero_d_host_data_keeps_its_shape_on_device():
    assert ng.tensor(3.5, device="cuda").shape == ()


# ---- mixing devices -------------------------------------------------------------------------------------------
MIXED = [
    ("add", lambda c, g: c + g),
    ("sub", lambda c, g: g - c),
    ("mul", lambda c, g: ng.mul(c, g)),
    ("div", lambda c, g: g / c),
    ("maximum", lambda c, g: ng.maximum(c, g)),
    ("where", lambda c, g: ng.where(g > 0, c, g)),
    ("eq", lambda c, g: c == g),
    ("matmul", lambda c, g: c @ g.T),
    ("cat", lambda c, g: ng.cat([c, g])),
    ("stack", lambda c, g: ng.stack([g, c])),
    ("index_select", lambda c, g: ng.index_select(g, 0, ng.tensor([0]))),
    ("gather", lambda c, g: ng.gather(g, 1, ng.tensor([[0], [1]]))),
    ("scatter_add", lambda c, g: ng.scatter_add(g, 0, ng.tensor([[0, 1, 0]], device="cuda"), c[:1])),
    ("masked_fill", lambda c, g: ng.masked_fill(g, c > 0, 0.0)),
    ("embedding", lambda c, g: ng.embedding(ng.tensor([0, 1]), g)),
]


@pytest.mark.parametrize("name,fn", MIXED, ids=[m[0] for m in MIXED])
def test_mixing_devices_raises_naming_the_op_and_devices(name, fn):
    c = ng.tensor(randn(2, 3, seed=8).astype(np.float32))
    g = ng.tensor(randn(2, 3, seed=9).astype(np.float32), device="cuda")
    with pytest.raises(RuntimeError) as e:
        fn(c, g)
    msg = str(e.value)
    assert name in msg and "cpu" in msg and "cuda:0" in msg, msg


def test_mixing_devices_in_linear_raises():
    x = ng.randn(2, 3)
    w = ng.randn(4, 3, device="cuda")
    with pytest.raises(RuntimeError, match=r"linear.*(cpu.*cuda:0|cuda:0.*cpu)"):
        ng.nn.functional.linear(x, w)


# ---- conversions to Python -------------------------------------------------------------------------------------
def test_repr_item_tolist():
    g = ng.tensor([[1.5, -2.0], [0.25, 3.0]], device="cuda")
    r = repr(g)
    assert "1.5" in r and "-2." in r and "0.25" in r
    assert ng.tensor(2.5, device="cuda").sum().item() == 2.5
    assert g[1, 0].item() == 0.25
    assert g.sum().item() == pytest.approx(2.75)
    assert g.tolist() == [[1.5, -2.0], [0.25, 3.0]]
    assert ng.tensor([3, 4], device="cuda").tolist() == [3, 4]
    assert float(g[0, 0]) == 1.5 and int(ng.tensor([7], device="cuda")) == 7
    assert bool(ng.tensor([1.0], device="cuda") > 0)
    with pytest.raises(ValueError, match="one-element"):
        g.item()
    x = ng.tensor([1.0], device="cuda", requires_grad=True)
    assert "requires_grad=True" in repr(x) and "grad_fn" in repr(x * 2)


def test_repr_names_the_device():
    assert "device='cuda:0'" in repr(ng.tensor([1.0], device="cuda"))


# ---- autograd across devices -------------------------------------------------------------------------------------
def test_backward_through_to_cuda_reaches_the_cpu_leaf():
    a = randn(3, 4, seed=10)
    x = ng.tensor(a, requires_grad=True)  # CPU leaf
    g = x.to("cuda")
    assert g.grad_fn is not None and g.device == CUDA
    y = (ng.exp(g) * 2).sum()
    y.backward()
    assert x.grad is not None and x.grad.device == ng.device("cpu")
    np.testing.assert_allclose(x.grad.numpy(), 2 * np.exp(a), rtol=1e-12)


def test_backward_through_cpu_reaches_the_cuda_leaf():
    a = randn(2, 3, seed=11)
    x = ng.tensor(a, device="cuda", requires_grad=True)
    y = (x.cpu() ** 2).sum()  # the loss on the CPU
    y.backward()
    assert x.grad.device == CUDA
    np.testing.assert_allclose(host(x.grad), 2 * a, rtol=1e-12)


def test_round_trip_with_dtype_change_and_both_branches():
    a = randn(2, 2, seed=12)
    x = ng.tensor(a, requires_grad=True)
    g = x.to("cuda", ng.float32)
    y = (g * 3).sum().cpu().double() + (x * 1).sum()
    y.backward()
    assert x.grad.device == ng.device("cpu") and x.grad.dtype == np.float64
    np.testing.assert_allclose(x.grad.numpy(), np.full((2, 2), 4.0))


def test_backward_seed_and_explicit_gradient_on_device():
    x = ng.randn(3, device="cuda", requires_grad=True)
    y = x * 2
    y.backward(ng.tensor([1.0, 2.0, 3.0], device="cuda"))
    np.testing.assert_array_equal(host(x.grad), [2.0, 4.0, 6.0])
    with pytest.raises(RuntimeError):
        (x * 2).backward(ng.tensor([1.0, 2.0, 3.0]))  # a CPU gradient for a CUDA output


def test_no_grad_and_detach_on_device():
    x = ng.randn(2, device="cuda", requires_grad=True)
    with ng.no_grad():
        y = x * 2
    assert not y.requires_grad and y.device == CUDA
    d = x.detach()
    assert d.device == CUDA and not d.requires_grad and d.array is x.array


# ---- in-place ops -------------------------------------------------------------------------------------------------------
def test_inplace_arithmetic_and_version_counter():
    a = randn(2, 3, seed=13).astype(np.float32)
    t = ng.tensor(a, device="cuda")
    data, v = t.array, t._version_value
    t.add_(1.0)
    t.mul_(ng.tensor([1.0, 2.0, 3.0], device="cuda"))
    t += 1
    t.sub_(0.5)
    t.div_(2.0)
    assert t.array is data  # written in place, same device buffer
    assert t._version_value == v + 5
    np.testing.assert_allclose(host(t), ((a + 1) * [1, 2, 3] + 1 - 0.5) / 2, rtol=1e-6)


def test_fill_zero_copy_on_device_and_views_share_storage():
    t = ng.zeros(3, 4, device="cuda")
    v0 = t._version_value
    row = t[1]  # a view
    row.fill_(2.0)
    assert t._version_value == v0 + 1  # views share the version counter
    np.testing.assert_array_equal(host(t)[1], np.full(4, 2.0))
    t.zero_()
    assert host(t).sum() == 0 and t._version_value == v0 + 2
    src = ng.tensor(np.arange(4.0), device="cuda")
    t.copy_(src)  # broadcast (4,) -> (3, 4)
    np.testing.assert_array_equal(host(t), np.tile(np.arange(4.0), (3, 1)))
    t.copy_(ng.tensor(np.ones((3, 4), np.float64)))  # from the CPU, with a dtype change (as PyTorch)
    assert t.device == CUDA and t.dtype == np.float32
    np.testing.assert_array_equal(host(t), np.ones((3, 4)))
    t[:, 0] = 5.0
    t[2] = ng.tensor([1.0, 2.0, 3.0, 4.0], device="cuda")
    np.testing.assert_array_equal(host(t)[:, 0], [5, 5, 1])
    assert t._version_value == v0 + 6


def test_cpu_tensor_copy_from_cuda():
    c = ng.zeros(2, 2)
    c.copy_(ng.ones(2, 2, device="cuda") * 3)
    assert c.device == ng.device("cpu")
    np.testing.assert_array_equal(c.numpy(), np.full((2, 2), 3.0))


def test_inplace_masked_fill_and_scatter_add_on_device():
    t = ng.tensor(np.arange(6.0).reshape(2, 3), device="cuda")
    t.masked_fill_(t > 3, -1.0)
    np.testing.assert_array_equal(host(t), [[0, 1, 2], [3, -1, -1]])
    t.scatter_add_(1, ng.tensor([[0, 0], [2, 2]], device="cuda"), ng.ones(2, 2, dtype=ng.float64, device="cuda"))
    np.testing.assert_array_equal(host(t), [[2, 1, 2], [3, -1, 1]])
    t.index_add_(0, ng.tensor([1], device="cuda"), ng.ones(1, 3, dtype=ng.float64, device="cuda"))
    np.testing.assert_array_equal(host(t), [[2, 1, 2], [4, 0, 2]])


def test_inplace_on_graph_node_records_and_leaf_raises():
    x = ng.tensor(randn(2, 3, seed=14), device="cuda", requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf"):
        x.add_(1.0)
    with ng.no_grad():  # what an optimizer does
        x.mul_(2.0)
    y = x * 1
    y.add_(1.0)  # a non-leaf: recorded
    y.mul_(3.0)
    y.sum().backward()
    assert x.grad.device == CUDA
    np.testing.assert_array_equal(host(x.grad), np.full((2, 3), 3.0))


def test_inplace_after_save_is_detected():
    x = ng.tensor(randn(3, seed=15), device="cuda", requires_grad=True)
    h = x * 1
    y = ng.exp(h)  # saves its output
    with ng.no_grad():
        y.mul_(2.0)  # modifies the saved output in place (bumps its version)
    with pytest.raises(RuntimeError, match="modified by an inplace operation|version"):
        y.sum().backward()


# ---- memory --------------------------------------------------------------------------------------------------------------
def test_memory_returns_to_the_pool_when_tensors_die():
    gc.collect()
    base = ng.cuda.memory_allocated()
    t = ng.zeros(1000, device="cuda")  # 4000 bytes -> a 4096-byte size class
    assert ng.cuda.memory_allocated() == base + 4096
    assert ng.cuda.memory_reserved() >= ng.cuda.memory_allocated()
    v = t[10:20]  # a view keeps the block alive
    del t
    gc.collect()
    assert ng.cuda.memory_allocated() == base + 4096
    del v
    gc.collect()
    assert ng.cuda.memory_allocated() == base


def test_empty_cache_hands_free_blocks_back():
    gc.collect()
    pool = cb.pool()
    t = ng.zeros(3000, device="cuda")
    del t
    gc.collect()
    assert pool.cached_bytes() > 0
    ng.cuda.empty_cache()
    assert pool.cached_bytes() == 0
    assert ng.cuda.memory_reserved() == ng.cuda.memory_allocated()
    n = pool.n_driver_allocs
    ng.zeros(3000, device="cuda")
    assert pool.n_driver_allocs == n + 1  # the cache is gone: a fresh driver allocation


def test_a_loop_of_identical_steps_makes_no_new_driver_allocations():
    w = ng.randn(4, 3, device="cuda", requires_grad=True)
    x = ng.randn(5, 4, device="cuda")

    def step():
        y = ng.tanh(x @ w)
        loss = (ng.softmax(y, 1) * y).sum() + ng.logsumexp(y, 0).mean()
        loss.backward()
        with ng.no_grad():
            w.sub_(0.1 * w.grad)
        w.grad = None
        return loss.item()

    step()
    step()
    gc.collect()
    pool = cb.pool()
    n, used = pool.n_driver_allocs, ng.cuda.memory_allocated()
    for _ in range(3):
        step()
    gc.collect()
    assert pool.n_driver_allocs == n
    assert ng.cuda.memory_allocated() == used
    ng.cuda.reset_peak_memory_stats()
    assert ng.cuda.max_memory_allocated() == ng.cuda.memory_allocated()


def test_cuda_module_helpers():
    assert ng.cuda.is_available() and ng.cuda.device_count() == 1 and ng.cuda.current_device() == 0
    assert isinstance(ng.cuda.get_device_name(), str)
    ng.cuda.synchronize()


# ---- autograd API on device ----------------------------------------------------------------------------------------------
def test_autograd_grad_hooks_and_anomaly_on_device():
    a = randn(2, 3, seed=16)
    x = ng.tensor(a, device="cuda", requires_grad=True)
    y = ng.tensor(a * 2, device="cuda", requires_grad=True)
    (gx, gy) = ng.autograd.grad((x * y).sum(), (x, y))
    assert gx.device == CUDA and gy.device == CUDA and x.grad is None
    np.testing.assert_allclose(host(gx), 2 * a)
    np.testing.assert_allclose(host(gy), a)
    seen = []
    h = x * 1
    h.register_hook(lambda g: seen.append(g.device) or g * 2)
    (h * 3).sum().backward()
    assert seen == [CUDA]
    np.testing.assert_allclose(host(x.grad), np.full((2, 3), 6.0))
    with ng.autograd.detect_anomaly():
        z = ng.tensor([0.0, 1.0], device="cuda", requires_grad=True)
        with pytest.raises(RuntimeError, match="nan|NaN|inf"):
            ng.sqrt(z * 0 - 1).sum().backward()


def test_inplace_activation_and_dropout_on_device():
    t = ng.tensor([-1.0, 2.0, -3.0], device="cuda")
    data = t.array
    out = ng.nn.functional.relu(t, inplace=True)
    assert out is t and t.array is data and t._version_value == 1
    np.testing.assert_array_equal(host(t), [0.0, 2.0, 0.0])
    ng.manual_seed(0)
    d = ng.nn.functional.dropout(ng.ones(8, device="cuda"), 0.5, inplace=True)
    assert d.device == CUDA and set(host(d).tolist()) <= {0.0, 2.0}


def test_parameter_of_a_cuda_tensor_shares_its_device_array():
    t = ng.tensor(np.arange(6, dtype=np.float32).reshape(2, 3), device="cuda")
    p = ng.nn.Parameter(t)
    assert isinstance(p.array, CudaArray) and p.array is t.array and p.requires_grad
    assert str(p.device).startswith("cuda")
    np.testing.assert_array_equal(host(p), np.arange(6, dtype=np.float32).reshape(2, 3))
    q = ng.Tensor(t, dtype=ng.float64)
    assert isinstance(q.array, CudaArray) and q.dtype == np.float64
    np.testing.assert_array_equal(host(q), np.arange(6).reshape(2, 3))
