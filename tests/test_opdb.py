"""The op table on the CPU: every row of ``tests/opdb.py`` through :func:`optest.check_op`
(forward in each dtype, contiguous and strided, against its NumPy reference; float64
gradients against central differences; PyTorch parity where the row names torch's op),
and the table's coverage: every public op has a row or a stated reason in ``NO_ROW``."""
import types

import numpy as np
import pytest

import numbagrad as ng
import numbagrad.nn.functional as F
from opdb import NO_ROW, OPS
from optest import check_op

KINK_GAP = 1e-3  # finite differences (eps 1e-6) never straddle a kink this far away


def _param(row):
    return pytest.param(row, id=row.id, marks=row.marks)


@pytest.mark.parametrize("row", [_param(r) for r in OPS if r.cpu is True])
def test_op(row):
    inputs = row.make_inputs()
    for k in row.kinks:
        gap = np.min(np.abs(inputs[0] - k))
        assert gap > KINK_GAP, f"{row.id}: an input lies {gap:.1e} from the kink at {k}"
    fn, ref, inputs = _with_constants(row, inputs)
    check_op(fn, ref, inputs, dtypes=row.dtypes, grad=row.grad, torch_fn=row.torch_fn if fn is row.fn else None,
             tol=row.tol, noncontig=row.strided)


def _with_constants(row, inputs):
    """``(fn, ref, inputs)`` with the row's ``const`` inputs closed over: ``fn`` gets them as
    tensors in the dtype of its first floating tensor, ``ref`` as the float64 arrays."""
    if not row.const:
        return row.fn, row.ref, inputs
    consts = {i: inputs[i] for i in row.const}
    rest = [a for i, a in enumerate(inputs) if i not in consts]

    def merge(args, const):
        it = iter(args)
        return [const(consts[i]) if i in consts else next(it) for i in range(len(inputs))]

    def fn(*ts):
        dtype = next(t.dtype for t in ts if isinstance(t, ng.Tensor) and t.is_floating_point())
        return row.fn(*merge(ts, lambda c: ng.tensor(c.astype(dtype))))

    return fn, (lambda *arrays: row.ref(*merge(arrays, lambda c: c))), rest


@pytest.mark.parametrize("row", [_param(r) for r in OPS if r.inplace and r.cpu is True])
def test_inplace_form(row):
    """Each in-place form writes the op's result into its first input and returns it."""
    for dtype in (np.float32, np.float64):
        _check_inplace(row, [ng.tensor(a.astype(dtype)) if a.dtype.kind == "f" else ng.tensor(a)
                             for a in row.make_inputs()])


def _check_inplace(row, args):
    expected = row.fn(*args).numpy().astype(np.float64)
    for inplace in row.inplace:
        target = ng.clone(args[0])
        out = inplace(target, *args[1:])
        assert out is target, f"{row.id}: {inplace.__name__} returned a new tensor"
        assert target.dtype == args[0].dtype, f"{row.id}: {inplace.__name__} changed the dtype"
        np.testing.assert_allclose(target.numpy().astype(np.float64), expected, rtol=1e-6, atol=1e-7,
                                   err_msg=f"{row.id}: {inplace.__name__}")


def public_ops():
    """The names of ``numbagrad.ops``' public functions (what it re-exports at the top level)."""
    return {n for n, v in vars(ng.ops).items()
            if not n.startswith("_") and callable(v) and not isinstance(v, (types.ModuleType, type))}


def test_every_public_op_has_a_row_or_a_reason():
    covered = {n for r in OPS for n in r.names}
    covered |= {n for n in public_ops() if any(getattr(ng.ops, n) is getattr(ng.ops, c, None) for c in covered)}
    missing = sorted(public_ops() - covered - set(NO_ROW))
    assert not missing, f"public ops with no row in tests/opdb.py and no reason in NO_ROW: {missing}"


def test_the_table_is_consistent():
    ids = [r.id for r in OPS]
    assert len(ids) == len(set(ids)), "duplicate row ids"
    public = public_ops() | {n for n in dir(F) if not n.startswith("_")}
    assert not {n for r in OPS for n in r.names} - public, "a row names a non-public op"
    covered = {n for r in OPS for n in r.names}
    assert not set(NO_ROW) & covered, f"NO_ROW lists ops that have rows: {sorted(set(NO_ROW) & covered)}"
    assert all(isinstance(v, str) and v for v in NO_ROW.values())
    assert not set(NO_ROW) - public, f"NO_ROW lists names that are not public: {sorted(set(NO_ROW) - public)}"
    for r in OPS:
        assert r.cuda is True or (isinstance(r.cuda, str) and r.cuda), r.id
        assert r.cpu is True or (isinstance(r.cpu, str) and r.cpu), r.id
