"""``WeightedRandomSampler``: draw frequencies against the weights (chi-square, a fixed
seed and a generous threshold), distinct indices without replacement, seeding through
numbagrad's generators, exact mid-epoch resume in a DataLoader, and its argument errors
(as torch raises them where torch checks at construction)."""
import copy

import numpy as np
import pytest
from scipy import stats

import numbagrad as ng
from numbagrad.data import DataLoader, TensorDataset, WeightedRandomSampler

P_MIN = 1e-4   # a correct sampler fails this about once in 10,000 seeds; the seeds are fixed


def test_frequencies_follow_the_weights_with_replacement():
    weights = np.array([1.0, 2.0, 3.0, 4.0, 0.0, 10.0])
    s = WeightedRandomSampler(ng.tensor(weights), 40_000, generator=ng.Generator().manual_seed(1))
    idx = np.array(list(s))
    assert len(idx) == len(s) == 40_000 and idx.dtype.kind == "i"
    counts = np.bincount(idx, minlength=len(weights))
    assert counts[4] == 0   # zero weight: never drawn
    keep = weights > 0
    expected = weights[keep] / weights.sum() * len(idx)
    assert stats.chisquare(counts[keep], expected).pvalue > P_MIN
    # a far-off distribution is rejected by the same test (the test can fail)
    assert stats.chisquare(counts[keep], np.full(keep.sum(), len(idx) / keep.sum())).pvalue < P_MIN


def test_without_replacement_draws_distinct_indices_by_weight():
    weights = [5.0, 1.0, 1.0, 0.0, 3.0]
    s = WeightedRandomSampler(weights, 4, replacement=False, generator=ng.Generator().manual_seed(2))
    firsts = []
    for _ in range(3000):
        idx = s.indices()
        assert sorted(idx.tolist()) == [0, 1, 2, 4]   # distinct, never the zero weight
        firsts.append(idx[0])
    # the first draw of each epoch follows the weights
    counts = np.bincount(firsts, minlength=5)[[0, 1, 2, 4]]
    w = np.array([5.0, 1.0, 1.0, 3.0])
    assert stats.chisquare(counts, w / w.sum() * len(firsts)).pvalue > P_MIN


def test_seeded_by_numbagrads_generators():
    w = np.arange(1, 8, dtype=np.float32)
    a = WeightedRandomSampler(w, 12, generator=ng.Generator().manual_seed(3))
    b = WeightedRandomSampler(w, 12, generator=ng.Generator().manual_seed(3))
    for _ in range(2):                 # epoch after epoch, the same draws
        assert list(a) == list(b)
    e1, e2 = list(a), list(a)
    assert e1 != e2                    # a fresh draw per epoch
    assert set(e1) <= set(range(7))
    ng.manual_seed(4)
    c = list(WeightedRandomSampler(w, 12))
    ng.manual_seed(4)
    assert list(WeightedRandomSampler(w, 12)) == c
    # state_dict / load_state_dict restore the generator
    sd = a.state_dict()
    nxt = list(a)
    a.load_state_dict(copy.deepcopy(sd))
    assert list(a) == nxt


def test_mid_epoch_resume_in_a_dataloader():
    n = 9
    ds = TensorDataset(ng.tensor(np.arange(n, dtype=np.float32)), ng.tensor(np.arange(n)))

    def make(seed):
        return DataLoader(ds, batch_size=2, sampler=WeightedRandomSampler(
            np.linspace(1, 3, n), 11, generator=ng.Generator().manual_seed(seed)))

    first = make(5)
    it = iter(first)
    head = [next(it)[1].tolist() for _ in range(2)]
    sd = first.state_dict()
    rest = [y.tolist() for _, y in it] + [[y.tolist() for _, y in first]]
    resumed = make(99)
    resumed.load_state_dict(copy.deepcopy(sd))
    got = [y.tolist() for _, y in resumed] + [[y.tolist() for _, y in resumed]]
    assert got == rest and len(head) == 2


def test_argument_errors():
    torch = pytest.importorskip("torch")
    for args, kw in [(([1.0, 2.0], 0), {}), (([1.0, 2.0], -1), {}), (([1.0, 2.0], True), {}),
                     (([1.0, 2.0], 2.0), {}), (([1.0, 2.0], 2), dict(replacement=1)),
                     (([[1.0, 2.0]], 2), {})]:
        with pytest.raises(ValueError):
            torch.utils.data.WeightedRandomSampler(*args, **kw)
        with pytest.raises(ValueError):
            WeightedRandomSampler(*args, **kw)
    with pytest.raises(ValueError, match="weights should be a 1d sequence but given weights have shape \\(1, 2\\)"):
        WeightedRandomSampler([[1.0, 2.0]], 2)
    with pytest.raises(ValueError, match="num_samples should be a positive integer value, but got num_samples=0"):
        WeightedRandomSampler([1.0], 0)
    with pytest.raises(ValueError, match=r"WeightedRandomSampler: weights must be non-negative, got weights\[1\]=-1.0"):
        WeightedRandomSampler([1.0, -1.0], 2)
    with pytest.raises(ValueError, match="weights must be finite, got inf or nan at index 0"):
        WeightedRandomSampler([np.nan, 1.0], 2)
    with pytest.raises(ValueError, match="the weights sum to 0"):
        WeightedRandomSampler([0.0, 0.0], 2)
    with pytest.raises(ValueError, match="cannot draw num_samples=3 distinct indices without replacement from 2 "
                                         "positive weights"):
        WeightedRandomSampler([1.0, 0.0, 2.0], 3, replacement=False)
    with pytest.raises(TypeError, match="weights must be real numbers"):
        WeightedRandomSampler(["a", "b"], 2)
    with pytest.raises(ValueError, match="weights is empty"):
        WeightedRandomSampler([], 2)
