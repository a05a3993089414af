"""``Tensor.data`` (PyTorch's: a Tensor sharing the storage, out of the graph) and
``Tensor.array`` (the backend array that numbagrad's kernels take).

The behaviour is PyTorch's: ``.data`` has no gradient and no ``grad_fn``, shares memory,
and has a version counter of its own, so in-place writes through it are invisible to
autograd's saved-tensor check (``.detach()`` shares the counter instead). Checked
against plain NumPy arithmetic, and against torch where it is installed.
"""
import numpy as np
import pytest

import numbagrad as ng
from numbagrad import nn

try:
    import torch
except ImportError:  # the torch comparisons are skipped; the NumPy ones still run
    torch = None


def test_data_is_a_tensor_sharing_storage_out_of_the_graph():
    x = ng.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x * 2
    for t in (x, y):
        d = t.data
        assert type(d) is ng.Tensor and not d.requires_grad and d.grad_fn is None and d.is_leaf
        assert np.shares_memory(d.array, t.array) and d.shape == t.shape and d.dtype == t.dtype
    assert isinstance(x.array, np.ndarray)
    p = nn.Parameter(ng.ones(2))
    assert type(p.data) is ng.Tensor  # a plain Tensor, as torch's Parameter.data


def test_in_place_updates_through_data_move_the_parameter():
    """The hand-written SGD of many tutorials: ``p.data.add_(p.grad, alpha=-lr)``."""
    rng = np.random.default_rng(0)
    w0, g = rng.standard_normal((3, 2)), rng.standard_normal((3, 2))
    p = nn.Parameter(ng.tensor(w0.copy()))
    p.grad = ng.tensor(g)
    out = p.data.add_(p.grad, alpha=-0.1)
    np.testing.assert_allclose(p.detach().numpy(), w0 - 0.1 * g, rtol=1e-15)
    assert np.shares_memory(out.array, p.array)
    p.data.sub_(p.grad, alpha=0.5)
    np.testing.assert_allclose(p.detach().numpy(), w0 - 0.6 * g, rtol=1e-14)
    p.data.fill_(3.0)
    assert (p.detach().numpy() == 3.0).all()
    p.data.copy_(ng.tensor(w0))
    np.testing.assert_array_equal(p.detach().numpy(), w0)
    p.data.zero_()
    assert not p.detach().numpy().any()
    with pytest.raises(TypeError):
        p.data.mul_(2.0, alpha=3)  # mul has no alpha: the op's own error


def test_writes_through_data_are_not_version_checked_like_torch():
    """``y = x * x`` saves ``x``; a write through ``x.data`` is not seen by the saved-tensor
    check (a write through ``x.detach()`` is), and backward uses the new values."""
    x = ng.tensor([1.0, 2.0], requires_grad=True)
    y = (x * x).sum()
    v = x._version_value
    x.data.mul_(3.0)
    assert x._version_value == v
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * np.array([3.0, 6.0]))
    z = ng.tensor([1.0, 2.0], requires_grad=True)
    w = (z * z).sum()
    z.detach().mul_(3.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation|version"):
        w.backward()
    if torch is not None:
        tx = torch.tensor([1.0, 2.0], requires_grad=True)
        ty = (tx * tx).sum()
        tx.data.mul_(3.0)
        ty.backward()
        np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy())


def test_assigning_data_rebinds_the_storage():
    p = nn.Parameter(ng.ones(3))
    new = ng.zeros(2, 4, dtype=ng.float64)
    p.data = new
    assert p.shape == (2, 4) and p.dtype == np.float64 and np.shares_memory(p.array, new.array)
    assert p.requires_grad and isinstance(p, nn.Parameter)
    arr = np.full((2,), 5.0, np.float32)
    p.data = arr  # a NumPy array is kept as it is
    assert p.array is arr
    with pytest.raises(TypeError, match="Tensor.data"):
        p.data = [1.0, 2.0]


def test_optimizer_steps_after_data_is_rebound():
    """Rebinding ``.data`` (as ``model.double()`` does) makes the optimizer rebuild its
    buffers; the step is the plain SGD step on the new values."""
    p = nn.Parameter(ng.ones(4))
    opt = ng.optim.SGD([p], lr=0.5)
    p.grad = ng.ones(4)
    opt.step()
    p.data = ng.tensor(np.arange(4.0))
    p.grad = ng.tensor(np.full(4, 2.0))
    opt.step()
    np.testing.assert_allclose(p.detach().numpy(), np.arange(4.0) - 1.0)
