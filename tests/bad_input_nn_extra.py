"""Bad-input rows (``tests/test_bad_input.py``) for ``nn_extra``."""


def add(row, dim_rows, f32, i64):
    """Add this family's rows (see tests/bad_input_linalg.py for the helpers)."""
