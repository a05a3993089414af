"""The checks every fused optimizer shares, driven by one list, ``optimkit.OPTIMIZERS``:
step-for-step parity with its oracle (``torch.optim``, or the float64 NumPy reference of
``optim_refs.py`` for LAMB and Lion) over 100 steps, convergence on a least-squares
quadratic and on Rosenbrock, the ``state_dict`` round trip, and "the second step compiles
nothing new". Each optimizer's own behaviour (skipped parameters, state layouts, loading a
torch state dict, its arena) is tested in its family's file."""
import importlib

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import optim_refs  # noqa: E402
import optimkit  # noqa: E402
from optimkit import OPTIMIZERS, maker  # noqa: E402

PARITY = [(o, kw) for o in OPTIMIZERS for kw in o.cases]
CONVERGE = [(o, row, style) for o in OPTIMIZERS for row in o.converge for style in row[5]]
STATE_DICT = [(o, row) for o in OPTIMIZERS for row in o.state_dict]
RECOMPILE = [(o, row) for o in OPTIMIZERS for row in o.recompile]


def _oracle(o):
    return getattr(torch.optim, o.oracle) if hasattr(torch.optim, o.oracle) else getattr(optim_refs, o.oracle)


def _kernel(o):
    family, entry = o.kernel
    return getattr(importlib.import_module(f"numbagrad.kernels.cpu.{family}"), f"_{entry}_cpu")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("o,kw", PARITY, ids=[f"{o.name}-{kw}" for o, kw in PARITY])
def test_matches_oracle(o, kw, dtype):
    # to optimkit.TOL; that the kernels round where torch rounds is checked bit for bit
    # against NumPy emulations of torch's rounding (test_optim_rounding.py)
    optimkit.run_parity(getattr(optimkit.ng.optim, o.name), _oracle(o), kw, dtype, torch,
                        tol=o.tol[dtype] if o.tol else None)


@pytest.mark.parametrize("o,row,closure_style", CONVERGE,
                         ids=[f"{o.name}-{row[0]}" + ("-closure" if len(row[5]) > 1 and style else "")
                              for o, row, style in CONVERGE])
def test_converges(o, row, closure_style):
    _, kw, problem, steps, atol, _ = row
    x, x_true = optimkit.converge(maker(o.name, kw), problem, steps, closure_style)
    np.testing.assert_allclose(x, x_true, atol=atol)


@pytest.mark.parametrize("o,row", STATE_DICT, ids=[f"{o.name}-{row[0]}" for o, row in STATE_DICT])
def test_state_dict_round_trip_continues_identically(o, row):
    _, kw, extra = row
    optimkit.check_state_dict_round_trip(maker(o.name, kw), **extra)


@pytest.mark.parametrize("o,row", RECOMPILE, ids=[f"{o.name}-{row[0]}" for o, row in RECOMPILE])
def test_second_step_compiles_nothing_new(o, row):
    _, kw, extra = row
    optimkit.check_no_recompile(maker(o.name, kw), [_kernel(o)], **extra)


def test_every_fused_optimizer_has_a_row():
    """A new optimizer class gets its row (LBFGS, not fused, has its own file)."""
    import numbagrad.optim as O
    fused = {n for n in dir(O) if isinstance(getattr(O, n), type) and issubclass(getattr(O, n), O.Optimizer)
             and getattr(O, n)._update_bucket is not None}
    assert fused == {o.name for o in OPTIMIZERS}
