"""``docs/api_coverage.md`` is what ``tools/api_coverage.py`` generates from the installed
torch (2.13, the pinned oracle) and numbagrad as it is: adding a PyTorch name to
numbagrad without regenerating the table fails here."""
import importlib.util
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="the table is generated from torch")
def test_the_coverage_table_is_up_to_date():
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "api_coverage.py"), "--check"], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]


def test_common_names_are_mostly_there():
    """The figure the table reports, recomputed: at least 90% of the names typical training
    programs use (the tool's COMMON list) exist in numbagrad."""
    pytest.importorskip("torch")
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    try:
        import api_coverage
    finally:
        sys.path.pop(0)
    rows = api_coverage.survey()
    common = sum(len(r["common"]) for r in rows)
    missing = sum(len(r["common_missing"]) for r in rows)
    assert common > 300 and (common - missing) / common >= 0.9, [r["common_missing"] for r in rows]
