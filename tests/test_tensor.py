import numpy as np
import pytest

import numbagrad as ng


def test_creation_dtypes_and_shapes():
    assert ng.tensor([1.0, 2.0]).dtype == ng.float32
    assert ng.tensor([1, 2]).dtype == ng.int64
    assert ng.tensor([True]).dtype == ng.bool
    assert ng.tensor(np.zeros(2)).dtype == ng.float64  # NumPy arrays keep their dtype
    assert ng.zeros(2, 3).shape == (2, 3) and ng.zeros((2, 3)).shape == (2, 3)
    assert ng.ones(4, dtype=ng.float64).dtype == ng.float64
    assert ng.full((2,), 7).dtype == ng.int64 and ng.full((2,), 7.0).dtype == ng.float32
    assert ng.arange(5).tolist() == [0, 1, 2, 3, 4] and ng.arange(0, 1, 0.5).dtype == ng.float32
    np.testing.assert_allclose(ng.linspace(0, 1, 5).numpy(), np.linspace(0, 1, 5))
    np.testing.assert_array_equal(ng.eye(3).numpy(), np.eye(3))
    assert ng.randint(0, 10, (100,)).numpy().max() < 10
    x = ng.randn(2, 3)
    for like in (ng.zeros_like, ng.ones_like, ng.rand_like, ng.randn_like):
        y = like(x)
        assert y.shape == x.shape and y.dtype == x.dtype
    assert ng.full_like(x, 2.0).tolist() == [[2.0] * 3] * 2
    assert ng.tensor(3.5).item() == 3.5 and ng.tensor(3.5).ndim == 0
    with pytest.raises(ValueError, match="invalid size"):
        ng.zeros(-1)


def test_manual_seed_reproducible():
    ng.manual_seed(123)
    a = ng.randn(5).tolist()
    b = ng.rand(3).tolist()
    ng.manual_seed(123)
    assert ng.randn(5).tolist() == a and ng.rand(3).tolist() == b
    r = ng.rand(1000).numpy()
    assert 0 <= r.min() and r.max() < 1


def test_conversions():
    x = ng.tensor([[1.5, 2.5]])
    assert x.tolist() == [[1.5, 2.5]]
    assert isinstance(x.numpy(), np.ndarray)
    assert x.to(ng.int64).tolist() == [[1, 2]]
    assert x.to("float64").dtype == ng.float64
    assert x.double().dtype == ng.float64 and x.long().dtype == ng.int64
    assert x[0, 1].item() == 2.5
    assert float(ng.tensor(2.0)) == 2.0 and int(ng.tensor(3)) == 3
    with pytest.raises(ValueError, match="only a one-element tensor"):
        x.item()
    r = ng.tensor([1.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="detach"):
        r.numpy()


def test_metadata_and_repr():
    x = ng.zeros(2, 3, requires_grad=True)
    assert x.is_leaf and x.grad_fn is None and x.device == "cpu"
    assert x.numel() == 6 and x.size() == (2, 3) and x.size(1) == 3 and x.dim() == 2 and len(x) == 2
    y = x * 2
    assert not y.is_leaf and y.grad_fn is not None
    assert "grad_fn=<Mul>" in repr(y)
    assert "requires_grad=True" in repr(x)


def test_devices():
    assert ng.device("cpu") == "cpu"
    with pytest.raises(RuntimeError, match="cuda.*no CUDA backend"):
        ng.zeros(2, device="cuda")
    with pytest.raises(RuntimeError, match="cuda"):
        ng.zeros(2).to("cuda")
    with pytest.raises(ValueError, match="unknown device type"):
        ng.device("tpu")


def test_dtype_errors_are_clear():
    with pytest.raises(TypeError, match="unknown dtype name"):
        ng.zeros(2, dtype="float17")
    with pytest.raises(TypeError, match="add: mix of Tensor"):
        ng.ones(2) + [1, 2]
