"""The cost of the range check before the indexing kernels (issue 20, ``ops/_check.py``):
``F.embedding`` of 1M int64 indices into a 50,000 x 16 float32 table, with the check (the
public function) and without it (``Embedding.apply``, the kernel path the check guards),
the check alone, and torch's ``F.embedding`` (which checks too) in the same run.

The check's cost is the ratio of the first two rows (or the third row against the first);
no bar: the figures go into the report and ``ops/_check.py``'s docstring.
"""
import numpy as np
import pytest

import _perfkit as kit

N = 10_000 if kit.SMOKE else 1_000_000
ROWS, D = 50_000, 16

kit._workload("embedding_1M_checked", f"embedding {N / 1e6:g}M idx into {ROWS}x{D} f32, range-checked",
              note="F.embedding: the range check + the kernel")
kit._workload("embedding_1M_unchecked", f"embedding {N / 1e6:g}M idx into {ROWS}x{D} f32, check skipped",
              note="Embedding.apply: the kernel path alone")
kit._workload("index_check_1M", f"range check of {N / 1e6:g}M int64 indices", note="ops/_check.out_of_range")


def _data():
    r = np.random.default_rng(kit.SEED)
    return r.integers(0, ROWS, N).astype(np.int64), r.standard_normal((ROWS, D)).astype(np.float32)


@pytest.mark.benchmark(**kit.bench_mark(max_time=1.5))
@pytest.mark.parametrize("variant", ("checked", "unchecked", "check_only", "torch"))
def test_embedding_index_check(benchmark, variant):
    kit.pin_threads()
    idx, w = _data()
    if variant == "torch":
        torch = pytest.importorskip("torch")
        ti, tw = torch.from_numpy(idx), torch.from_numpy(w)
        out = kit.run_benchmark(benchmark, "embedding_1M_checked", "torch",
                                lambda: torch.nn.functional.embedding(ti, tw))
        np.testing.assert_array_equal(out.numpy(), w[idx])
        return
    import numbagrad as ng
    from numbagrad.ops import _check
    from numbagrad.ops.indexing import Embedding
    ti, tw = ng.tensor(idx), ng.tensor(w)
    if variant == "check_only":
        out = kit.run_benchmark(benchmark, "index_check_1M", "numbagrad", lambda: _check.out_of_range(idx, 0, ROWS))
        assert out is None
        return
    if variant == "checked":
        fn = lambda: ng.nn.functional.embedding(ti, tw)  # noqa: E731
    else:
        fn = lambda: Embedding.apply(tw, idx, -1, False, (N, D))  # noqa: E731
    key = "embedding_1M_checked" if variant == "checked" else "embedding_1M_unchecked"
    out = kit.run_benchmark(benchmark, key, "numbagrad", fn)
    np.testing.assert_array_equal(out.numpy(), w[idx])  # not a timing check: the lookup's values
