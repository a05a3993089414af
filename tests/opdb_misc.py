"""Rows of the op table (``tests/opdb.py``) for ``numbagrad/ops/misc_ops.py``."""
ROWS = []
NO_ROW = {}
