"""CUDA twins of the indexing kernels go through the op layer's range checks too (issue 20;
``tests/test_index_safety.py`` runs the CPU table): bad indices on device arrays raise
before any launch, in forward and in backward, and so does a write to a saved index.
Tiny shapes: under the simulator every launch runs as Python."""
import numpy as np
import pytest

pytest.importorskip("numba.cuda")

import numbagrad as ng  # noqa: E402
import numbagrad.nn.functional as F  # noqa: E402

BIG = 10_000_000


def _x():
    return ng.tensor(np.arange(12, dtype=np.float32).reshape(3, 4) / 7, device="cuda", requires_grad=True)


def _i(values):
    return ng.tensor(np.array(values, np.int64), device="cuda")


@pytest.mark.parametrize("bad", [-1000, BIG])
@pytest.mark.parametrize("op", ["embedding", "gather", "index_select", "getitem", "setitem", "index_add",
                                "scatter_add", "take_along_dim", "cross_entropy"])
def test_bad_index_on_the_device_raises_before_the_kernel(op, bad):
    x = _x()
    run = {
        "embedding": lambda: F.embedding(_i([0, bad]), x),
        "gather": lambda: x.gather(0, _i([[0, bad, 1, 2]])),
        "index_select": lambda: x.index_select(1, _i([bad])),
        "getitem": lambda: x[_i([0, bad])],  # the device's own advanced indexing (``take``)
        "setitem": lambda: x.detach().__setitem__((slice(None), _i([bad])), 1.0),  # its scatter
        "index_add": lambda: x.index_add(0, _i([bad]), _x()[:1]),
        "scatter_add": lambda: x.scatter_add(0, _i([[bad, 0, 1, 2]]), _x()[:1]),
        "take_along_dim": lambda: ng.take_along_dim(x, _i([[bad, 0, 1, 2]]), 0),
        "cross_entropy": lambda: F.cross_entropy(x, _i([0, bad, 1])),
    }[op]
    with pytest.raises(IndexError, match=f"{op}: (index|target) {bad} is out of (bounds|range)"):
        run()


@pytest.mark.parametrize("op", ["embedding", "getitem", "index_select"])
def test_saved_device_index_written_before_backward_raises(op):
    x, idx = _x(), _i([0, 2])
    y = {"embedding": lambda: F.embedding(idx, x), "getitem": lambda: x[idx],
         "index_select": lambda: x.index_select(0, idx)}[op]()
    idx[1] = 1
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


def test_device_index_changed_behind_the_version_counter_raises_in_backward():
    x, idx = _x(), _i([0, 2])
    y = F.embedding(idx, x)
    idx.array.copy_from(ng.tensor(np.array([0, BIG]), device="cuda").array)  # no version bump
    with pytest.raises(IndexError, match=f"embedding backward: index {BIG} is out of bounds"):
        y.sum().backward()
