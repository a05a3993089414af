"""In-place writes to tensors a backward needs (issue 20), hooks that change the gradient's
metadata, and views that stay aliased after an in-place rebase: each compared with PyTorch.

Every case runs the same code on ``numbagrad`` and on ``torch`` (the module pair ``T, F``),
so the reference is torch's own behaviour: where torch raises "modified by an inplace
operation", numbagrad raises too; where torch returns, the gradients agree.
"""
import numpy as np
import pytest

import numbagrad as ng
import numbagrad.nn.functional as ngF

torch = pytest.importorskip("torch")
import torch.nn.functional as tF  # noqa: E402

MODULES = {"numbagrad": (ng, ngF), "torch": (torch, tF)}
HUGE = 10_000_000
MODIFIED = "modified by an inplace operation"


def _x(T, shape=(5, 3), seed=0):
    return T.tensor(np.random.default_rng(seed).standard_normal(shape).astype(np.float32), requires_grad=True)


def _idx(T, values):
    return T.tensor(np.array(values, dtype=np.int64))


# Each case: (T, F, v) -> a zero-argument function that runs backward, after writing ``v``
# into a tensor that the op's backward needs.
def _index_case(name, op, index, pos, shape=(5, 3), dtype=np.int64):
    """``y = op(T, F, x, i)`` for an index tensor ``i``, then ``i[pos] = v``."""
    def case(T, F, v):
        x, i = _x(T, shape), T.tensor(np.array(index, dtype))
        y = op(T, F, x, i)
        i[pos] = v
        return lambda: (y * y).sum().backward()
    case.__name__ = name
    return case


def _mask_case(name, op):
    """``y = op(x, m)`` for a bool mask ``m``, then one entry of ``m`` flipped."""
    def case(T, F, v):
        x = _x(T)
        m = x.detach() > 0
        y = op(x, m)
        m[0, 0] = not bool(m[0, 0])
        return lambda: y.sum().backward()
    case.__name__ = name
    return case


def _output_case(name, op):
    """``values, indices = op(T, F, x)``, then ``indices`` written (torch saves them)."""
    def case(T, F, v):
        vals, i = op(T, F, _x(T, (1, 1, 4, 4)))
        i.view(-1)[0] = v
        return lambda: vals.sum().backward()
    case.__name__ = name
    return case


def _cross_entropy_weight(T, F, v):
    x, t = _x(T, (4, 5)), _idx(T, [0, 1, 2, 1])
    w = T.tensor(np.linspace(0.5, 1.5, 5).astype(np.float32))
    y = F.cross_entropy(x, t, weight=w)
    w[0] = 3.0
    return lambda: y.backward()


def _embedding_bag_offsets(T, F, v):
    w, i, off = _x(T), _idx(T, [1, 2, 3, 4]), _idx(T, [0, 2])
    y = F.embedding_bag(i, w, off)
    off[1] = 1
    return lambda: y.sum().backward()


def _ctc_targets(T, F, v):
    lp = T.tensor(np.random.default_rng(0).standard_normal((6, 2, 4)).astype(np.float32), requires_grad=True)
    tg = _idx(T, [[1, 2], [1, 1]])
    y = F.ctc_loss(F.log_softmax(lp, 2), tg, _idx(T, [6, 6]), _idx(T, [2, 2]))
    tg[0, 0] = 3
    return lambda: y.backward()


RAISES = [
    _index_case("embedding", lambda T, F, x, i: F.embedding(i, x), [1, 2, 3], 0),
    _index_case("embedding_int32", lambda T, F, x, i: F.embedding(i, x), [1, 2, 3], 0, dtype=np.int32),
    _index_case("gather", lambda T, F, x, i: x.gather(0, i), [[1, 2, 3]], (0, 0)),
    _index_case("index_select", lambda T, F, x, i: x.index_select(0, i), [1, 2, 3], 0),
    _index_case("advanced", lambda T, F, x, i: x[i], [1, 2, 3], 0),
    _index_case("advanced_two", lambda T, F, x, i: x[i, i], [1, 2], 0),
    _index_case("take", lambda T, F, x, i: T.take(x, i), [1, 2, 3], 0),
    _index_case("index_add", lambda T, F, x, i: x.index_add(0, i, _x(T, (3, 3), 1)), [1, 2, 3], 0),
    _index_case("scatter_add", lambda T, F, x, i: x.scatter_add(0, i, _x(T, (1, 3), 1)), [[1, 2, 3]], (0, 0)),
    _index_case("scatter", lambda T, F, x, i: x.scatter(0, i, 1.0), [[1, 2, 3]], (0, 0)),
    _index_case("cross_entropy", lambda T, F, x, i: F.cross_entropy(x, i), [0, 1, 2, 1], 0, (4, 5)),
    _index_case("nll_loss", lambda T, F, x, i: F.nll_loss(x, i), [0, 1, 2, 1], 0, (4, 5)),
    _index_case("embedding_bag_input", lambda T, F, x, i: F.embedding_bag(i, x, _idx(T, [0, 2])),
                [1, 2, 3, 4], 0),
    _mask_case("mask", lambda x, m: x[m]),
    _mask_case("masked_select", lambda x, m: x.masked_select(m)),
    _mask_case("masked_fill", lambda x, m: x.masked_fill(m, 0.0)),
    _output_case("max_dim", lambda T, F, x: x.reshape(4, 4).max(0)),
    _output_case("sort", lambda T, F, x: x.reshape(4, 4).sort(0)),
    _output_case("topk", lambda T, F, x: x.reshape(4, 4).topk(2, 0)),
    _output_case("max_pool", lambda T, F, x: F.max_pool2d(x, 2, return_indices=True)),
    _output_case("max_pool_dilated", lambda T, F, x: F.max_pool2d(x, 2, stride=1, dilation=2, return_indices=True)),
    _cross_entropy_weight, _embedding_bag_offsets, _ctc_targets]


@pytest.mark.parametrize("case", RAISES, ids=lambda c: c.__name__.lstrip("_"))
@pytest.mark.parametrize("value", ["in_range", "huge"])
@pytest.mark.parametrize("lib", ["torch", "numbagrad"])
def test_write_to_a_saved_tensor_raises(case, value, lib):
    T, F = MODULES[lib]
    run = case(T, F, 0 if value == "in_range" else HUGE)
    with pytest.raises(RuntimeError, match=MODIFIED):
        run()


def test_error_names_dtype_shape_versions_and_op():
    w, i = _x(ng), _idx(ng, [1, 2, 3])
    y = ngF.embedding(i, w)
    i[0] = 4
    i[1] = 0
    with pytest.raises(RuntimeError) as e:
        y.sum().backward()
    msg = str(e.value)
    assert "[int64 [3]]" in msg and "is at version 2; expected version 0 instead" in msg
    assert "Embedding" in msg


def test_error_names_the_node_that_made_a_saved_output():
    x = _x(ng)
    vals, i = x.max(0)
    i[0] = 1
    with pytest.raises(RuntimeError, match=r"\[int64 \[3\]\], which is output 1 of _DimExtreme, is at version 1"):
        vals.sum().backward()


def test_retained_graph_raises_on_the_second_backward():
    w, i = _x(ng), _idx(ng, [1, 2, 3])
    y = ngF.embedding(i, w)
    y.sum().backward(retain_graph=True)
    i[0] = 0
    with pytest.raises(RuntimeError, match=MODIFIED):
        y.sum().backward()


def _grads(T, F, build):
    """Run ``build`` (returns the loss and the leaves) and the leaves' gradients as NumPy."""
    loss, leaves = build(T, F)
    loss.backward()
    return [np.asarray(p.grad.detach().numpy() if hasattr(p.grad, "detach") else p.grad) for p in leaves]


def _take_along_dim_written(T, F):
    x, i = _x(T), _idx(T, [[1, 2, 3]])
    y = T.take_along_dim(x, i, 0)
    i[0, 0] = 4  # torch's backward reads its own copy: no error, the gradient of the original
    return (y * y).sum(), [x]


def _index_add_input_only(T, F):
    x, i = _x(T), _idx(T, [1, 2, 3])
    s = T.tensor(np.ones((3, 3), np.float32))
    y = x.index_add(0, i, s)
    i[0] = 4  # the index is needed for the source's gradient only
    return (y * y).sum(), [x]


def _scatter_add_input_only(T, F):
    x, i = _x(T), _idx(T, [[1, 2, 3]])
    s = T.tensor(np.ones((1, 3), np.float32))
    y = x.scatter_add(0, i, s)
    i[0, 0] = 4
    return (y * y).sum(), [x]


def _ctc_lengths_written(T, F):
    lp = T.tensor(np.random.default_rng(0).standard_normal((6, 2, 4)).astype(np.float32), requires_grad=True)
    il, tl = _idx(T, [6, 5]), _idx(T, [2, 1])
    y = F.ctc_loss(F.log_softmax(lp, 2), _idx(T, [[1, 2], [3, 3]]), il, tl)
    il[0], tl[0] = 3, 1  # lengths are read as host ints in forward (torch too): no error
    return y, [lp]


def _unsaved_index_written(T, F):
    x, i = _x(T), _idx(T, [1, 2, 3])
    y = (x * 2)[i.clone()]
    i[0] = 4  # a clone was used: nothing saved changed
    j = i + 1
    j[0] = 0
    return y.sum(), [x]


def _written_before_forward(T, F):
    w, i = _x(T), _idx(T, [1, 2, 3])
    i[0] = 4
    return F.embedding(i, w).sum(), [w]


@pytest.mark.parametrize("build", [_take_along_dim_written, _index_add_input_only, _scatter_add_input_only,
                                   _ctc_lengths_written, _unsaved_index_written, _written_before_forward],
                         ids=lambda b: b.__name__.lstrip("_"))
def test_writes_torch_allows_keep_working(build):
    want = _grads(torch, tF, build)
    got = _grads(ng, ngF, build)
    for g, t in zip(got, want):
        np.testing.assert_allclose(g, t, rtol=1e-5, atol=1e-6)


def test_leaf_index_without_grad_carries_a_version():
    i = ng.tensor(np.array([1, 2, 3]))
    v0 = i._version_value
    i[0] = 2
    i.add_(1)
    i.fill_(0)
    assert i._version_value == v0 + 3


# ---- hooks that change the gradient's metadata -------------------------------------------------
@pytest.mark.parametrize("leaf", [True, False], ids=["leaf", "non_leaf"])
@pytest.mark.parametrize("kind", ["size", "broadcastable_size", "dtype", "not_a_tensor"])
def test_hook_changing_the_gradient_raises_as_torch(kind, leaf):
    for T, F in MODULES.values():
        x = T.tensor(np.arange(3, dtype=np.float32), requires_grad=True)
        h = x if leaf else x * 1

        def hook(g):
            if kind == "size":
                return T.ones(4)
            if kind == "broadcastable_size":
                return T.ones(1)
            if kind == "dtype":
                return T.ones(3, dtype=T.float64)
            return 3.0
        h.register_hook(hook)
        if kind == "not_a_tensor":
            with pytest.raises(TypeError, match="hook"):
                (h * 2).sum().backward()
            continue
        word = "size" if "size" in kind else "type"
        with pytest.raises(RuntimeError, match=f"hook 'hook' has changed the {word} of value"):
            (h * 2).sum().backward()
        assert x.grad is None


def test_hook_returning_the_same_metadata_replaces_the_gradient():
    x = ng.tensor(np.arange(3, dtype=np.float32), requires_grad=True)
    x.register_hook(lambda g: g * 10)
    (x * 2).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.full(3, 20, np.float32))


# ---- views stay aliased after an in-place rebase --------------------------------------------------
def _views_after_rebase(T, F):
    a0 = T.tensor(np.arange(1, 7, dtype=np.float32), requires_grad=True)
    a = a0 * 1
    v = a[0:2]
    w = a.reshape(2, 3)[1]          # a view of a view
    a.mul_(2)
    same = [(v, a[0:2]), (w, a.reshape(2, 3)[1])]
    a.add_(1)                       # a second rebase: the views follow again
    same += [(v, a[0:2]), (w, a[3:6])]
    loss = (v * v).sum() * 3 + (a * w.sum()).sum()
    loss.backward()
    return [(p.detach().numpy().copy(), q.detach().numpy().copy()) for p, q in same], a0.grad.numpy().copy()


def test_views_taken_before_an_inplace_rebase_stay_aliased_as_in_torch():
    pairs, grad = _views_after_rebase(ng, ngF)
    tpairs, tgrad = _views_after_rebase(torch, tF)
    for (p, q), (tp, tq) in zip(pairs, tpairs):
        np.testing.assert_array_equal(p, q)
        np.testing.assert_allclose(p, tp, rtol=1e-6)
    np.testing.assert_allclose(grad, tgrad, rtol=1e-5)


def test_view_sees_later_writes_through_the_base():
    a = ng.tensor(np.arange(4, dtype=np.float32), requires_grad=True) * 1
    v = a[1:3]
    a.mul_(2)
    with ng.no_grad():
        a.add_(100)
    np.testing.assert_array_equal(v.detach().numpy(), a.detach().numpy()[1:3])
    assert v._version_value == a._version_value
