"""Rows of the op table (``tests/opdb.py``) for ``numbagrad/ops/scan.py``;
``opdb.py`` appends ``ROWS`` to ``OPS`` and ``NO_ROW`` to its ``NO_ROW``."""
ROWS = []
NO_ROW = {}
