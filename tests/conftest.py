import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))

import numbagrad as ng  # noqa: E402
from numbagrad.backend import config  # noqa: E402

# Tests reach the parallel kernel twins with moderate sizes (~100K elements) so that they
# stay fast; the production threshold is tuned for speed, not for coverage.
config.PARALLEL_THRESHOLD = 1 << 16


@pytest.fixture(autouse=True)
def _seed():
    ng.manual_seed(0)
    np.random.seed(0)
    yield


def pytest_collection_modifyitems(config, items):
    """``NUMBAGRAD_TEST_SHARD=i/n`` keeps every n-th collected test, starting with the
    i-th (1-based): ``tools/run_tests.py`` runs the simulator suite as two such shards side
    by side. Round-robin over the collection order, so slow files are spread over shards."""
    shard = os.environ.get("NUMBAGRAD_TEST_SHARD")
    if not shard:
        return
    try:
        i, n = (int(v) for v in shard.split("/"))
        assert 1 <= i <= n
    except (ValueError, AssertionError):
        raise pytest.UsageError(f"NUMBAGRAD_TEST_SHARD must be 'i/n' with 1 <= i <= n, got {shard!r}") from None
    keep = [it for k, it in enumerate(items) if k % n == i - 1]
    config.hook.pytest_deselected(items=[it for k, it in enumerate(items) if k % n != i - 1])
    items[:] = keep
