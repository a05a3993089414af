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
