"""``DistributedSampler`` against torch's (index lists, padding, drop_last) and
``Pipeline.shard`` against the sampler; single process (ranks given explicitly)."""
import numpy as np
import pytest

import numbagrad as ng
from numbagrad.data import DataLoader, DistributedSampler, Pipeline, TensorDataset


def _torch_lists(n, ws, drop_last, shuffle=False, seed=0, epoch=0):
    torch = pytest.importorskip("torch")
    from torch.utils.data.distributed import DistributedSampler as TDS
    out = []
    for r in range(ws):
        s = TDS(range(n), num_replicas=ws, rank=r, shuffle=shuffle, seed=seed, drop_last=drop_last)
        s.set_epoch(epoch)
        out.append(list(s))
    return out


@pytest.mark.parametrize("drop_last", [False, True])
def test_index_lists_equal_torchs_without_shuffle(drop_last):
    for n in (0, 1, 2, 5, 7, 10, 11, 16):
        for ws in (1, 2, 3, 4, 8, 13):
            ours = [DistributedSampler(range(n), ws, r, shuffle=False, drop_last=drop_last) for r in range(ws)]
            theirs = _torch_lists(n, ws, drop_last)
            assert [s.indices().tolist() for s in ours] == theirs, (n, ws)
            assert [list(s) for s in ours] == theirs
            assert [len(s) for s in ours] == [len(t) for t in theirs]


@pytest.mark.parametrize("drop_last", [False, True])
def test_shuffled_epochs_use_torchs_layout_over_one_shared_permutation(drop_last):
    n, ws = 11, 4
    ranks = [DistributedSampler(range(n), ws, r, shuffle=True, seed=5, drop_last=drop_last) for r in range(ws)]
    orders = []
    for epoch in (0, 1):
        for s in ranks:
            s.set_epoch(epoch)
        order = ranks[0].epoch_order()
        assert all(np.array_equal(s.epoch_order(), order) for s in ranks)   # every rank agrees
        perm = order[:n] if not drop_last else None
        if perm is not None:
            assert sorted(perm.tolist()) == list(range(n))
            # torch's split of that permutation: its unshuffled lists, mapped through it
            theirs = [[int(perm[i]) for i in lst] for lst in _torch_lists(n, ws, drop_last)]
            assert [s.indices().tolist() for s in ranks] == theirs
        mine = np.concatenate([s.indices() for s in ranks])
        assert len(set(mine.tolist())) == (n // ws * ws if drop_last else n)   # a cover (padding repeats)
        orders.append(order)
    assert not np.array_equal(orders[0], orders[1])                          # set_epoch reshuffles
    again = DistributedSampler(range(n), ws, 0, shuffle=True, seed=5, drop_last=drop_last)
    again.set_epoch(1)
    assert np.array_equal(again.epoch_order(), orders[1])                    # seed + epoch decides


def test_state_dict_round_trip_and_errors():
    s = DistributedSampler(range(9), 2, 1, seed=3)
    s.set_epoch(4)
    state = s.state_dict()
    assert state == {"epoch": 4, "seed": 3}
    t = DistributedSampler(range(9), 3, 0)          # another world size resumes the same epoch
    t.load_state_dict(state)
    assert (t.epoch, t.seed) == (4, 3)
    assert np.array_equal(t.epoch_order()[:9], s.epoch_order()[:9])
    with pytest.raises(ValueError, match=r"has the keys \['epoch'\], expected \['epoch', 'seed'\]"):
        t.load_state_dict({"epoch": 1})
    with pytest.raises(ValueError, match=r"Invalid rank 2, rank should be in the interval \[0, 1\]"):
        DistributedSampler(range(4), 2, 2)
    with pytest.raises(ValueError, match="num_replicas must be a positive integer"):
        DistributedSampler(range(4), 0, 0)
    with pytest.raises(ValueError, match="Default process group has not been initialized"):
        DistributedSampler(range(4))


def test_dataloader_batches_follow_the_sampler():
    x = ng.arange(10).reshape(10, 1).float()
    ds = TensorDataset(x, ng.arange(10))
    s = DistributedSampler(ds, num_replicas=3, rank=2, shuffle=False)
    got = [yb.tolist() for _, yb in DataLoader(ds, batch_size=2, sampler=s)]
    assert got == [[2, 5], [8, 1]]          # 10 padded to 12 with 0, 1


@pytest.mark.parametrize("drop_last", [False, True])
def test_pipeline_shard_equals_the_samplers_split(drop_last):
    for n in (0, 1, 3, 7, 12):
        for ws in (1, 2, 3, 5):
            for r in range(ws):
                want = DistributedSampler(range(n), ws, r, shuffle=False, drop_last=drop_last).indices().tolist()
                indexed = Pipeline.from_array(np.arange(n)).shard(r, ws, drop_last)
                streamed = Pipeline.from_array(np.arange(n)).filter(lambda v: True).shard(r, ws, drop_last)
                assert [int(v) for v in indexed] == want, (n, ws, r)
                assert [int(v) for v in streamed] == want, (n, ws, r)
                assert len(indexed) == len(want)


def test_pipeline_shard_after_a_shared_shuffle_partitions_the_batches():
    x = ng.arange(24)
    shards = [Pipeline.from_tensors(x).shuffle(7).shard(r, 3).batch(4) for r in range(3)]
    seen = np.concatenate([np.concatenate([b.numpy() for b in s]) for s in shards])
    assert sorted(seen.tolist()) == list(range(24))
    with pytest.raises(ValueError, match=r"rank=3 is not in \[0, world_size - 1 = 2\]"):
        Pipeline.from_tensors(x).shard(3, 3)
    with pytest.raises(ValueError, match="rank and world_size are needed when no process group"):
        Pipeline.from_tensors(x).shard()
