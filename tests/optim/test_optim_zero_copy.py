"""Fresh gradients are read where they are: an optimizer step does not copy a C-contiguous
gradient of the parameter's dtype into the flat arena; the kernels read it through the
bucket's address table ``gsrc`` (``numbagrad/optim/optimizer.py``, module docstring).

Every fused optimizer (and LBFGS's gather) is checked bit for bit against the same
optimizer forced onto the copy path (``bucket.zero_copy = False``: every gradient copied
into its arena slot, as before zero-copy), with parameters spanning several arena blocks
at offsets that are not block-aligned. Then: gradients that must be copied
(non-contiguous, another dtype), gradient arrays replaced between steps, and
``zero_grad(set_to_none=False)`` with accumulation.
"""
import numpy as np
import pytest

import numbagrad as ng
from numbagrad import nn, optim
from numbagrad.optim.optimizer import _BLOCK
from numbagrad.tensor import Tensor

# a scalar first, so the large parameter starts at a non-block-aligned arena offset and spans
# several blocks (the address arithmetic of ``grad_block``); more than the parallel threshold
SHAPES = [(), (3,), (300, 300), (4, 5), (50, 40)]
assert 300 * 300 > 3 * _BLOCK

MAKERS = {
    "SGD": lambda P: optim.SGD(P, lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01),
    "SGD-plain": lambda P: optim.SGD(P, lr=0.1),
    "Adam": lambda P: optim.Adam(P, lr=1e-2, amsgrad=True, weight_decay=0.01),
    "AdamW": lambda P: optim.AdamW(P, lr=1e-2, maximize=True),
    "Adamax": lambda P: optim.Adamax(P, lr=1e-2),
    "RAdam": lambda P: optim.RAdam(P, lr=1e-2),
    "NAdam": lambda P: optim.NAdam(P, lr=1e-2),
    "RMSprop": lambda P: optim.RMSprop(P, lr=1e-2, momentum=0.5, centered=True),
    "Adagrad": lambda P: optim.Adagrad(P, lr=1e-2, lr_decay=0.01),
    "Adadelta": lambda P: optim.Adadelta(P, weight_decay=0.01),
    "Lamb": lambda P: optim.Lamb(P, lr=1e-2, weight_decay=0.01),
    "Lamb-noadapt": lambda P: optim.Lamb(P, lr=1e-2),
    "Lion": lambda P: optim.Lion(P, lr=1e-3, weight_decay=0.1),
}


def _params(dtype, seed=0, shapes=SHAPES):
    rng = np.random.default_rng(seed)
    return [nn.Parameter(ng.tensor(rng.standard_normal(s).astype(dtype))) for s in shapes]


def _grads(dtype, steps, seed=1, shapes=SHAPES):
    rng = np.random.default_rng(seed)
    return [[np.asarray(rng.standard_normal(s), dtype) for s in shapes] for _ in range(steps)]


def _buckets(o):
    return [b for a in o._arenas.values() for b in a.buckets]


def _force_copy(o, P):
    """Build ``o``'s arena now and put it on the copy path (every gradient copied)."""
    saved = [p.grad for p in P]
    for p in P:
        p.grad = ng.zeros(p.shape, dtype=p.dtype)
    for g in o.param_groups:
        o._prepare(g)
    for b in _buckets(o):
        b.zero_copy = False
    for p, g in zip(P, saved):
        p.grad = g


def _poison_arena_grads(o):
    """Fill every bucket's arena gradient with NaN: a kernel that read a slot would show it."""
    for b in _buckets(o):
        b.grad[...] = np.nan


def _values(P):
    return [p.detach().numpy().copy() for p in P]


def _assert_same_bits(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        np.testing.assert_array_equal(x, y, err_msg=f"parameter {i}")


def _run(make, dtype, grads, copy, steps, skip=()):
    """``steps`` steps of ``make`` on fresh C-contiguous gradients (``skip[k]``: parameters
    without one at step ``k``); the copy path when ``copy``. Returns (values, optimizer, P)."""
    P = _params(dtype)
    o = make(P)
    if copy:
        _force_copy(o, P)
    for k in range(steps):
        held = []
        for i, (p, g) in enumerate(zip(P, grads[k])):
            p.grad = None if i in dict(skip).get(k, ()) else ng.tensor(g)
            held.append(p.grad)
        if k == 0 and not copy:
            o.step()
            _poison_arena_grads(o)  # from now on the slots hold NaN: nothing may read them
        else:
            o.step()
        if not copy:
            assert all(p.grad is h for p, h in zip(P, held))  # p.grad keeps its own array
    return _values(P), o, P


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", list(MAKERS))
def test_fresh_gradients_are_read_in_place_bit_for_bit(name, dtype):
    grads = _grads(dtype, 4)
    skip = {2: (1, 3)}  # parameters without a gradient at one step
    got, o, P = _run(MAKERS[name], dtype, grads, copy=False, steps=4, skip=skip)
    ref, _, _ = _run(MAKERS[name], dtype, grads, copy=True, steps=4, skip=skip)
    _assert_same_bits(got, ref)
    (b,) = _buckets(o)
    assert np.isnan(b.grad).all()  # the arena's gradient slots were never written
    assert all(b.gsrc[2 * i] == p.grad.array.ctypes.data for i, p in enumerate(P))
    assert list(b.gsrc[1::2]) == list(np.cumsum([0] + [int(np.prod(s)) for s in SHAPES[:-1]]))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_lbfgs_gathers_fresh_gradients_in_place(dtype):
    rng = np.random.default_rng(3)
    A = [rng.standard_normal(s) for s in SHAPES]
    results = []
    for copy in (False, True):
        P = _params(dtype)
        o = optim.LBFGS(P, lr=0.5, max_iter=4, history_size=3)
        if copy:
            _force_copy(o, P)

        def closure():
            o.zero_grad()
            loss = sum((((p - ng.tensor(a.astype(dtype))) ** 2) * (i + 1)).sum() for i, (p, a) in
                       enumerate(zip(P, A)))
            loss.backward()
            return loss
        for _ in range(3):
            o.step(closure)
            if not copy:
                (b,) = _buckets(o)
                assert b.gsrc[::2].all()  # every gradient read where backward put it
        results.append(_values(P))
    _assert_same_bits(*results)


@pytest.mark.parametrize("name", ["Adam", "SGD", "Lamb", "Adagrad"])
def test_non_contiguous_and_other_dtype_gradients_are_copied(name):
    """A mix in one bucket: C-contiguous float32 (read in place), Fortran-ordered and strided
    views (copied), float64 for float32 parameters (cast into the slot), a 0-d float64."""
    grads = _grads(np.float32, 3)
    ref, _, _ = _run(MAKERS[name], np.float32, grads, copy=True, steps=3)
    P = _params(np.float32)
    o = MAKERS[name](P)
    for k in range(3):
        g = grads[k]
        given = [Tensor._from_array(np.array(g[0], np.float64)),                  # other dtype (0-d)
                 ng.tensor(g[1]),                                                # read in place
                 Tensor._from_array(np.asfortranarray(g[2])),                    # F-ordered
                 Tensor._from_array(np.repeat(g[3], 2, axis=1)[:, ::2]),         # strided view
                 Tensor._from_array(g[4].astype(np.float64))]                    # other dtype
        assert not given[2].array.flags.c_contiguous and not given[3].array.flags.c_contiguous
        for p, t in zip(P, given):
            p.grad = t
        o.step()
        (b,) = _buckets(o)
        assert list(b.gsrc[::2] != 0) == [False, True, False, False, False]
        assert P[1].grad is given[1]
        for i in (0, 2, 3, 4):  # copied: p.grad is now the arena slot, with the values given
            assert P[i].grad is not given[i] and P[i].grad.array is b.gviews[i]
            np.testing.assert_array_equal(P[i].grad.array, g[i])
    _assert_same_bits(_values(P), ref)


def test_gradients_replaced_or_changed_between_steps_are_read_from_where_they_are_now():
    grads = _grads(np.float32, 6)
    ref, _, _ = _run(MAKERS["Adam"], np.float32, grads, copy=True, steps=6)
    P = _params(np.float32)
    o = MAKERS["Adam"](P)
    arrays = [g.copy() for g in grads[0]]
    for p, a in zip(P, arrays):
        p.grad = Tensor._from_array(a)
    o.step()
    _poison_arena_grads(o)
    (b,) = _buckets(o)
    first = b.gsrc.copy()
    # step 1: the same arrays, new values written into them in place (same addresses)
    for a, g in zip(arrays, grads[1]):
        a[...] = g
    o.step()
    assert (b.gsrc == first).all()
    # step 2: new arrays (new addresses); the old ones are freed
    del arrays
    for p, g in zip(P, grads[2]):
        p.grad = ng.tensor(g)
    o.step()
    assert (b.gsrc[::2] != first[::2]).all()
    assert all(b.gsrc[2 * i] == p.grad.array.ctypes.data for i, p in enumerate(P))
    # step 3: one gradient must be copied (F-ordered): that one lands in its slot...
    for p, g in zip(P, grads[3]):
        p.grad = ng.tensor(g)
    P[2].grad = Tensor._from_array(np.asfortranarray(grads[3][2]))
    o.step()
    assert b.gsrc[4] == 0 and P[2].grad.array is b.gviews[2]
    # step 4: ...and a fresh array replaces the slot again; step 5: the slot is given back
    for p, g in zip(P, grads[4]):
        p.grad = ng.tensor(g)
    o.step()
    assert b.gsrc[4] != 0
    for p, g in zip(P, grads[5]):
        p.grad = ng.tensor(g)
    b.gviews[2][...] = grads[5][2]
    P[2].grad = Tensor._from_array(b.gviews[2])
    o.step()
    assert b.gsrc[4] == 0
    _assert_same_bits(_values(P), ref)


@pytest.mark.parametrize("first", ["fresh", "copied"])
def test_zero_grad_keeping_arrays_then_accumulating(first):
    """``zero_grad(set_to_none=False)`` zeroes whatever ``p.grad`` holds in place (the array
    backward made, read in place; or the arena slot after a copy) and backward accumulates
    into it: two half-batch passes step like one full-batch pass (to rounding), and the
    arrays keep their identity from step to step."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((8, 6))
    y = rng.standard_normal((8, 2))

    def model(seed):
        ng.manual_seed(seed)
        return nn.Sequential(nn.Linear(6, 5), nn.Tanh(), nn.Linear(5, 2)).to(ng.float64)

    def loss_of(m, rows):
        return ((m(ng.tensor(x[rows])) - ng.tensor(y[rows])) ** 2).sum()

    m1, m2 = model(1), model(1)
    o1, o2 = optim.Adam(m1.parameters(), lr=1e-2), optim.Adam(m2.parameters(), lr=1e-2)
    if first == "copied":
        # a first step on zero gradients (nothing moves; the step counts advance alike) that
        # must be copied for m1 (strided views): its p.grad become the arena slots
        for p1, p2 in zip(m1.parameters(), m2.parameters()):
            p1.grad = Tensor._from_array(np.zeros(p1.shape + (2,))[..., 0])
            p2.grad = ng.zeros(p2.shape, dtype=p2.dtype)
        o1.step()
        o2.step()
        assert all(p.grad.array is v for p, v in zip(m1.parameters(), _buckets(o1)[0].gviews))
    held = None
    for _ in range(4):
        o1.zero_grad(set_to_none=False)
        loss_of(m1, slice(0, 4)).backward()
        loss_of(m1, slice(4, 8)).backward()
        if held is not None:
            assert all(p.grad is h for p, h in zip(m1.parameters(), held))
        held = [p.grad for p in m1.parameters()]
        o1.step()
        o2.zero_grad()
        (loss_of(m2, slice(0, 4)) + loss_of(m2, slice(4, 8))).backward()
        o2.step()
        (b,) = _buckets(o1)
        assert (b.gsrc[::2] == 0).all() if first == "copied" else b.gsrc[::2].all()
    for p1, p2 in zip(m1.parameters(), m2.parameters()):
        np.testing.assert_allclose(p1.detach().numpy(), p2.detach().numpy(), rtol=1e-12, atol=1e-14)
