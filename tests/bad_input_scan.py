"""Bad-input rows (``tests/test_bad_input.py``) for ``numbagrad/ops/scan.py``."""


def add(row, dim_rows, f32, i64):
    """Add this family's rows: ``row(covers, call, exc, fragment, torch=True)`` and
    ``dim_rows(name, call, scalar=None, op=None)`` as documented in test_bad_input.py;
    ``f32(lib, *shape)`` / ``i64(lib, *values, shape=None)`` make inputs."""
