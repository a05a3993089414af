"""The op table (``tests/opdb.py``) on ``device="cuda"``: every row through
:func:`optest.check_device`.

The forward on CUDA tensors in each dtype of the row (and with strided inputs where the
row says ``noncontig``) against the row's float64 NumPy reference (or, with ``ref=None``,
against the same op on the CPU: random ops draw the same numbers for the same
``numbagrad.manual_seed``), every output on ``cuda:0``; then one random upstream gradient
through the CPU graph and through the CUDA graph, the CUDA ``.grad`` on ``cuda:0`` and
equal to the CPU one (which ``tests/test_opdb.py`` checks against finite differences and
PyTorch). Integer/bool array inputs become CUDA index tensors. Rows with ``extremes`` run
once more on their kinks, +-30, +-1e4 and NaN against the CPU. Known gaps of the CUDA
backend are ``xfail(strict=True)`` with the reason, so they turn into failures (to
un-mark) the day they are fixed; rows with ``cuda=<reason>`` do not run here.
"""
import numpy as np
import pytest

from opdb import OPS
from optest import check_device

cuda = pytest.importorskip("numba.cuda")

F32, F64 = np.float32, np.float64
SPECIAL = [-1e4, -30.0, 30.0, 1e4, np.nan]
# the CPU and CUDA kernels share their scalar helpers: both dtypes agree to rounding
EXACT = {F32: dict(rtol=1e-5, atol=1e-6), F64: dict(rtol=1e-12, atol=1e-14)}


def _param(row):
    marks = row.marks + ([pytest.mark.xfail(reason=row.xfail, strict=True)] if row.xfail else [])
    return pytest.param(row, id=row.id, marks=marks)


@pytest.mark.parametrize("row", [_param(r) for r in OPS if r.cuda is True])
def test_op(row):
    check_device(row.fn, row.ref, row.make_inputs(), **row.device_opts())


@pytest.mark.parametrize("row", [_param(r) for r in OPS if r.cuda is True and r.extremes])
def test_kinks_and_extremes(row):
    x = np.concatenate([row.make_inputs()[0].reshape(-1), row.kinks, SPECIAL])
    check_device(row.fn, None, [x], dtypes=(F32, F64), tol=EXACT, grad_tol=EXACT)
