"""Torch-level utilities (``numbagrad/utilities.py``) against NumPy, and against PyTorch
where it is installed."""
import numpy as np
import pytest

import numbagrad as ng

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch not installed")


@pytest.mark.parametrize("indexing", ["ij", "xy"])
def test_meshgrid_matches_numpy_and_is_differentiable(indexing):
    a = ng.tensor(np.array([1.0, 2.0, 3.0]), requires_grad=True)
    b = ng.tensor(np.array([10.0, 20.0]))
    c = ng.tensor(np.array([5.0, 6.0, 7.0, 8.0]))
    grids = ng.meshgrid(a, b, c, indexing=indexing)
    ref = np.meshgrid([1.0, 2.0, 3.0], [10.0, 20.0], [5.0, 6.0, 7.0, 8.0], indexing=indexing)
    for g, r in zip(grids, ref):
        np.testing.assert_array_equal(g.detach().numpy(), r)
    grids[0].sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), [8.0, 8.0, 8.0])  # each a_i appears 2*4 times


def test_meshgrid_rejects_2d_and_bad_indexing():
    with pytest.raises(ValueError, match="argument 1 has shape \\(2, 2\\)"):
        ng.meshgrid(ng.zeros(3), ng.zeros(2, 2))
    with pytest.raises(ValueError, match="indexing"):
        ng.meshgrid(ng.zeros(3), indexing="yx")


@needs_torch
def test_dtype_rules_match_torch():
    pairs = [(ng.int32, ng.float16, torch.int32, torch.float16), (ng.int64, ng.float32, torch.int64, torch.float32),
             (ng.uint8, ng.int8, torch.uint8, torch.int8), (ng.float32, ng.float64, torch.float32, torch.float64),
             (ng.bool_, ng.int16, torch.bool, torch.int16)]
    for a, b, ta, tb in pairs:
        assert ng.promote_types(a, b) == np.dtype(str(torch.promote_types(ta, tb)).replace("torch.", ""))
        for x, y, tx, ty in ((a, b, ta, tb), (b, a, tb, ta)):
            assert ng.can_cast(x, y) == torch.can_cast(tx, ty), (x, y)
    for t, tt in ((ng.tensor([1, 2]), torch.tensor([1, 2])), (ng.tensor([1.0]), torch.tensor([1.0]))):
        for s in (2, 2.5, True):
            assert str(ng.result_type(t, s)) == str(torch.result_type(tt, s)).replace("torch.", "")


def test_broadcast_shapes_atleast_and_constants():
    assert ng.broadcast_shapes((2, 1), (3,), 1) == (2, 3)
    assert ng.atleast_1d(ng.tensor(3.0)).shape == (1,)
    assert ng.atleast_2d(ng.zeros(4)).shape == (1, 4)
    a, b = ng.atleast_2d(ng.tensor(1.0), ng.zeros(2, 3))
    assert a.shape == (1, 1) and b.shape == (2, 3)
    assert ng.pi == np.pi and ng.e == np.e and ng.inf == np.inf and np.isnan(ng.nan)
    assert ng.finfo(ng.float32).eps == np.finfo(np.float32).eps
    assert ng.is_floating_point(ng.zeros(1)) and not ng.is_floating_point(ng.zeros(1, dtype=ng.int64))


def test_num_threads_round_trip_and_range_check():
    n = ng.get_num_threads()
    try:
        ng.set_num_threads(1)
        assert ng.get_num_threads() == 1
    finally:
        ng.set_num_threads(n)
    with pytest.raises(ValueError, match="set_num_threads: n=0"):
        ng.set_num_threads(0)
