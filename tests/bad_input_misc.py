"""Bad-input rows (``tests/test_bad_input.py``) for ``numbagrad/ops/misc_ops.py``."""


def add(row, dim_rows, f32, i64):
    """Add this family's rows (see tests/bad_input_linalg.py for the helpers)."""
