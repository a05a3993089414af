"""Rows of the op table (``tests/opdb.py``) for ``numbagrad/ops/linalg_ops.py``."""
ROWS = []
NO_ROW = {}
