"""Datasets, samplers, DataLoader, load_digits and train_test_split."""
from collections import namedtuple

import numpy as np
import pytest

import numbagrad as ng
from numbagrad.data import (BatchSampler, ConcatDataset, DataLoader, Dataset, RandomSampler, SequentialSampler,
                            Subset, TensorDataset, default_collate, load_digits, random_split, train_test_split)


def _ds(n=10):
    X = ng.tensor(np.arange(n * 3, dtype=np.float32).reshape(n, 3))
    y = ng.tensor(np.arange(n))
    return TensorDataset(X, y)


def test_tensor_dataset():
    ds = _ds()
    assert len(ds) == 10
    x, y = ds[3]
    assert x.tolist() == [9.0, 10.0, 11.0] and y.item() == 3
    xb, yb = ds.get_batch(np.array([1, 4]))
    assert xb.shape == (2, 3) and yb.tolist() == [1, 4]
    assert len(TensorDataset(np.zeros((4, 2)))) == 4  # arrays are accepted
    with pytest.raises(ValueError, match="Size mismatch"):
        TensorDataset(ng.zeros(3, 2), ng.zeros(4))


@pytest.mark.parametrize("bs,drop,expect", [(3, False, [3, 3, 3, 1]), (3, True, [3, 3, 3]), (10, False, [10]),
                                            (20, True, []), (1, False, [1] * 10)])
def test_batching_and_len(bs, drop, expect):
    dl = DataLoader(_ds(), batch_size=bs, drop_last=drop)
    sizes = [len(y) for _, y in dl]
    assert sizes == expect and len(dl) == len(expect)
    if not drop:
        assert np.concatenate([y.numpy() for _, y in dl]).tolist() == list(range(10))
    xb, yb = next(iter(DataLoader(_ds(), batch_size=4)))
    assert isinstance(xb, ng.Tensor) and xb.dtype == np.float32 and yb.dtype == np.int64


def test_shuffle_is_seeded_and_changes_per_epoch():
    ds = _ds(50)
    ng.manual_seed(0)
    dl = DataLoader(ds, batch_size=8, shuffle=True)
    e1 = np.concatenate([y.numpy() for _, y in dl])
    e2 = np.concatenate([y.numpy() for _, y in dl])
    assert sorted(e1.tolist()) == list(range(50)) and sorted(e2.tolist()) == list(range(50))
    assert e1.tolist() != e2.tolist() and e1.tolist() != list(range(50))
    ng.manual_seed(0)
    again = np.concatenate([y.numpy() for _, y in DataLoader(ds, batch_size=8, shuffle=True)])
    assert again.tolist() == e1.tolist()
    g1, g2 = ng.Generator().manual_seed(5), ng.Generator().manual_seed(5)
    a = [y.tolist() for _, y in DataLoader(ds, batch_size=8, shuffle=True, generator=g1)]
    b = [y.tolist() for _, y in DataLoader(ds, batch_size=8, shuffle=True, generator=g2)]
    assert a == b


class Squares(Dataset):
    def __len__(self):
        return 7

    def __getitem__(self, i):
        return {"x": np.full(2, i, dtype=np.float32), "y": i * i, "f": 0.5 * i, "name": f"s{i}"}


def test_generic_dataset_and_default_collate():
    batches = list(DataLoader(Squares(), batch_size=3))
    assert len(batches) == 3
    b = batches[0]
    assert b["x"].shape == (3, 2) and b["x"].dtype == np.float32
    assert b["y"].tolist() == [0, 1, 4] and b["y"].dtype == np.int64
    assert b["f"].dtype == np.float64 and b["name"] == ["s0", "s1", "s2"]
    P = namedtuple("P", "a b")
    out = default_collate([P(ng.ones(2), 1), P(ng.zeros(2), 2)])
    assert isinstance(out, P) and out.a.shape == (2, 2) and out.b.tolist() == [1, 2]
    assert default_collate([(1, True), (2, False)])[1].dtype == np.bool_
    custom = DataLoader(_ds(), batch_size=4, collate_fn=lambda samples: len(samples))
    assert list(custom) == [4, 4, 2]
    assert [s[1].item() for s in DataLoader(_ds(3), batch_size=None)] == [0, 1, 2]


def test_samplers():
    ds = _ds(10)
    assert list(SequentialSampler(ds)) == list(range(10))
    ng.manual_seed(1)
    r = list(RandomSampler(ds))
    assert sorted(r) == list(range(10))
    assert len(list(RandomSampler(ds, replacement=True, num_samples=25))) == 25
    bs = BatchSampler(SequentialSampler(ds), 4, drop_last=False)
    assert list(bs) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]] and len(bs) == 3
    dl = DataLoader(ds, batch_sampler=[[0, 9], [5]])
    assert [y.tolist() for _, y in dl] == [[0, 9], [5]]
    dl = DataLoader(ds, batch_size=4, sampler=[9, 8, 7, 6, 5])
    assert [y.tolist() for _, y in dl] == [[9, 8, 7, 6], [5]]
    with pytest.raises(ValueError, match="mutually exclusive"):
        DataLoader(ds, sampler=[1], shuffle=True)
    with pytest.raises(ValueError, match="batch_size"):
        DataLoader(ds, batch_size=0)
    with pytest.raises(ValueError, match="num_workers"):
        DataLoader(ds, num_workers=-1)


def test_subset_concat_random_split():
    ds = _ds(10)
    sub = Subset(ds, [8, 2, 5])
    assert len(sub) == 3 and sub[0][1].item() == 8
    assert [y.tolist() for _, y in DataLoader(sub, batch_size=2)] == [[8, 2], [5]]
    assert getattr(Subset(Squares(), [1]), "get_batch", None) is None
    cat = ConcatDataset([ds, _ds(4)])
    assert len(cat) == 14 and cat[12][1].item() == 2 and cat[-1][1].item() == 3
    assert len(ds + _ds(2)) == 12
    ng.manual_seed(0)
    a, b = random_split(ds, [7, 3])
    assert len(a) == 7 and len(b) == 3
    assert sorted(list(a.indices) + list(b.indices)) == list(range(10))
    parts = random_split(ds, [0.5, 0.5])
    assert [len(p) for p in parts] == [5, 5]
    with pytest.raises(ValueError, match="Sum of input lengths"):
        random_split(ds, [3, 3])


def test_load_digits():
    X, y = load_digits()
    assert isinstance(X, ng.Tensor) and X.shape == (1797, 64) and X.dtype == np.float32
    assert y.shape == (1797,) and y.dtype == np.int64
    assert float(X.numpy().min()) == 0.0 and float(X.numpy().max()) == 1.0
    assert sorted(np.unique(y.numpy()).tolist()) == list(range(10))
    Xn, yn = load_digits(as_numpy=True)
    assert isinstance(Xn, np.ndarray) and np.array_equal(Xn, X.numpy())


def test_train_test_split():
    X, y = load_digits(as_numpy=True)
    a = train_test_split(X, y, test_size=0.2, seed=0)
    Xtr, Xte, ytr, yte = a
    assert Xtr.shape == (1437, 64) and Xte.shape == (360, 64) and len(ytr) == 1437 and len(yte) == 360
    b = train_test_split(X, y, test_size=0.2, seed=0)
    assert all(np.array_equal(u, v) for u, v in zip(a, b))
    c = train_test_split(X, y, test_size=0.2, seed=1)
    assert not np.array_equal(c[3], yte)
    # disjoint and complete: every row is in exactly one part
    rows = {r.tobytes() for r in np.concatenate([Xtr, Xte])}
    assert len(np.concatenate([Xtr, Xte])) == 1797 and len(rows) == len({r.tobytes() for r in X})
    Tt = train_test_split(ng.tensor(X), ng.tensor(y), test_size=100, seed=0)
    assert isinstance(Tt[0], ng.Tensor) and Tt[1].shape == (100, 64)
    s = train_test_split(X, y, test_size=0.2, seed=0, stratify=y)
    counts_all = np.bincount(y, minlength=10) / len(y)
    counts_test = np.bincount(s[3], minlength=10) / len(s[3])
    assert np.abs(counts_all - counts_test).max() < 0.01 and len(s[3]) == 360
    with pytest.raises(ValueError, match="inconsistent lengths"):
        train_test_split(X, y[:5])
