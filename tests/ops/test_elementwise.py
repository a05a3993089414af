import numpy as np
import pytest

import numbagrad as ng
from optest import check_op, randn, torch

T = (lambda name: getattr(torch, name)) if torch else (lambda name: None)

# binary ops and broadcasting, pow and the scalar operators: rows of tests/opdb.py


def test_binary_large_parallel_path():
    # Above the parallel threshold the flat @njit twin runs; it must agree with NumPy.
    n = 1 << 17
    a, b = randn(n, seed=3), randn(n, seed=4)
    for name, ref in [("add", np.add), ("sub", np.subtract), ("mul", np.multiply), ("div", np.divide)]:
        out = getattr(ng, name)(ng.tensor(a.astype(np.float32)), ng.tensor(b.astype(np.float32)))
        np.testing.assert_allclose(out.numpy(), ref(a.astype(np.float32), b.astype(np.float32)), rtol=1e-6)
    x = ng.tensor(a, requires_grad=True)
    (x * x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * a)


UNARY = [
    ("neg", np.negative, None), ("exp", np.exp, None), ("log", np.log, "pos"),
    ("sqrt", np.sqrt, "pos"), ("rsqrt", lambda x: 1 / np.sqrt(x), "pos"), ("abs", np.abs, "kink"),
    ("square", np.square, None), ("reciprocal", lambda x: 1 / x, "kink"), ("sin", np.sin, None),
    ("cos", np.cos, None), ("log1p", np.log1p, "pos"), ("expm1", np.expm1, None),
    ("log2", np.log2, "pos"), ("log10", np.log10, "pos"), ("exp2", np.exp2, None),
]


@pytest.mark.parametrize("name,ref,domain", UNARY)
@pytest.mark.parametrize("shape", [(), (7,)])  # 2-d: the rows of tests/opdb.py
def test_unary(name, ref, domain, shape):
    x = randn(*shape, seed=7, low=0.2 if domain else None)
    if domain == "pos":
        x = np.abs(x) + 0.1
    check_op(getattr(ng, name), ref, [x], torch_fn=T(name))


def test_sign_floor_have_zero_grad():
    x = ng.tensor([-1.5, 0.2, 2.7], requires_grad=True)
    (ng.sign(x) + ng.floor(x) + ng.ceil(x) + ng.round(x)).sum().backward()
    assert x.grad.tolist() == [0.0, 0.0, 0.0]
    np.testing.assert_array_equal(ng.floor(x.detach()).numpy(), np.floor([-1.5, 0.2, 2.7]).astype(np.float32))


def test_clamp():
    x = randn(4, 5, seed=8)
    x = np.where(np.abs(np.abs(x) - 0.5) < 0.05, 0.0, x)  # away from the kinks at +-0.5
    check_op(lambda t: ng.clamp(t, -0.5, 0.5), lambda a: np.clip(a, -0.5, 0.5), [x],
             torch_fn=(lambda t: torch.clamp(t, -0.5, 0.5)) if torch else None)
    check_op(lambda t: t.clamp(min=0.1), lambda a: np.maximum(a, 0.1), [x])


def test_where():
    c = randn(3, 4, seed=9) > 0
    a, b = randn(3, 4, seed=10), randn(4, seed=11)
    check_op(lambda x, y: ng.where(ng.tensor(c), x, y), lambda x, y: np.where(c, x, y), [a, b],
             torch_fn=(lambda x, y: torch.where(torch.from_numpy(c), x, y)) if torch else None)


def test_comparisons_and_logic():
    a = ng.tensor([1.0, 2.0, 3.0])
    b = ng.tensor([3.0, 2.0, 1.0])
    assert (a < b).tolist() == [True, False, False]
    assert (a == b).tolist() == [False, True, False]
    assert (a >= 2).tolist() == [False, True, True]
    assert ((a > 1) & (b > 1)).tolist() == [False, True, False]
    assert (~(a > 1)).tolist() == [True, False, False]
    assert (a != 2).dtype == ng.bool


def test_scalar_promotion_follows_pytorch():
    f = ng.ones(3)
    i = ng.arange(3)
    assert (f + 2).dtype == ng.float32
    assert (f * 2.5).dtype == ng.float32
    assert (i + 2).dtype == ng.int64
    assert (i * 2.5).dtype == ng.float32
    assert (i / 2).dtype == ng.float32
    assert (ng.ones(3, dtype=ng.int32) + ng.ones(3)).dtype == ng.float32
    assert (ng.ones(3, dtype=ng.float64) + ng.ones(3)).dtype == ng.float64
    assert (2 - f).tolist() == [1.0, 1.0, 1.0]
    assert (1 / ng.tensor([2.0, 4.0])).tolist() == [0.5, 0.25]


def test_broadcast_error_names_op_and_shapes():
    with pytest.raises(RuntimeError, match=r"add: The size of tensor a \(3\) must match the size of tensor b "
                                           r"\(4\) at non-singleton dimension 0 \(shapes \(3,\), \(4,\)\)"):
        ng.ones(3) + ng.ones(4)


def test_integer_ops():
    a = ng.tensor([7, -7, 5])
    assert (a // 2).tolist() == [3, -4, 2]
    assert (a % 3).tolist() == [1, 2, 2]
    assert ng.abs(a).tolist() == [7, 7, 5]


def test_comparisons_of_0d_tensors_hold_arrays_and_combine_with_reductions():
    """NumPy's comparison ufuncs return a scalar for 0-d operands; the Tensor must hold a
    0-d array, or a later op sees two array types ("expected all tensors on the same device,
    got cpu and cpu", found by the distributions' constraint checks)."""
    a, b = ng.tensor(1.0), ng.tensor(float("nan"))
    for t in (a < b, a == a, ng.logical_and(a < 2, a > 0), ng.logical_not(a < 2), ng.isnan(b), ng.isinf(a),
              ng.isfinite(a), ~(a < 2)):
        assert isinstance(t.array, np.ndarray) and t.shape == () and t.dtype == np.bool_
    both = ng.all(ng.tensor([1.0, 2.0]) > 0, dim=-1) & (a < 2)
    assert both.item() is True
    assert (ng.tensor(0.5) < ng.tensor(1.0)).logical_and(ng.tensor(True)).item() is True
