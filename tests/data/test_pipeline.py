"""numbagrad.data.Pipeline and prepare: lazy stages, pass semantics, vectorised batching,
seeded shuffling, prefetch threads, process workers, and use where a DataLoader goes."""
import operator
import threading
import time

import numpy as np
import pytest

import numbagrad as ng
from numbagrad.data import DataLoader, Pipeline, TensorDataset, prepare


def _xy(n=10):
    x = np.arange(n * 3, dtype=np.float32).reshape(n, 3)
    y = np.arange(n, dtype=np.int64) * 7
    return x, y


def _labels(p):
    return [b[1].numpy().tolist() for b in p]


def test_from_tensors_batch_gathers_like_a_dataloader():
    x, y = _xy(10)
    for drop, sizes in ((False, [4, 4, 2]), (True, [4, 4])):
        p = Pipeline.from_tensors(ng.tensor(x), y).batch(4, drop_last=drop)
        batches = list(p)
        assert len(p) == len(sizes) and [len(b[1]) for b in batches] == sizes
        ref = list(DataLoader(TensorDataset(x, y), batch_size=4, drop_last=drop))
        for (xb, yb), (xr, yr) in zip(batches, ref):
            assert isinstance(xb, ng.Tensor) and xb.dtype == np.float32 and yb.dtype == np.int64
            np.testing.assert_array_equal(xb.numpy(), xr.numpy())
            np.testing.assert_array_equal(yb.numpy(), yr.numpy())
    # items: tuples of rows; a single tensor gives its rows themselves
    xi, yi = Pipeline.from_tensors((x, y)).to_list()[3]
    np.testing.assert_array_equal(xi.numpy(), x[3])
    assert yi.item() == 21
    rows = Pipeline.from_tensors(x).to_list()
    assert isinstance(rows[2], ng.Tensor) and rows[2].tolist() == x[2].tolist()
    with pytest.raises(ValueError, match=r"first dimension.*\(10, 3\), \(9,\)"):
        Pipeline.from_tensors(x, y[:9])
    with pytest.raises(ValueError, match="0-d"):
        Pipeline.from_tensors(np.float32(1.0))


def test_shuffle_seed_draws_a_fresh_reproducible_permutation_per_pass():
    x, y = _xy(50)
    p = Pipeline.from_tensors(x, y).shuffle(3).batch(8)
    passes = []
    for _ in range(3):
        passes.append(np.concatenate(_labels(p)) // 7)
    ref = np.random.default_rng(3)  # the seed seeds one PCG64 stream, drawn once per pass
    for got in passes:
        np.testing.assert_array_equal(got, ref.permutation(50))
    assert passes[0].tolist() != passes[1].tolist()
    # a Generator is drawn from (shared state); None draws from the default generator
    g1, g2 = ng.Generator().manual_seed(5), ng.Generator().manual_seed(5)
    a = _labels(Pipeline.from_tensors(x, y).shuffle(g1).batch(8))
    b = _labels(Pipeline.from_tensors(x, y).shuffle(g2).batch(8))
    assert a == b
    ng.manual_seed(11)
    c = _labels(Pipeline.from_tensors(x, y).shuffle().batch(8))
    ng.manual_seed(11)
    assert c == _labels(Pipeline.from_tensors(x, y).shuffle(None).batch(8))
    with pytest.raises(TypeError, match="seed"):
        Pipeline.from_tensors(x).shuffle("1")


def test_pass_semantics_iter_strict_for_restarts_reset():
    calls = []

    def fn(i):
        calls.append(i)
        return i * i

    p = Pipeline.from_fn(5, fn)
    assert calls == []                                # lazy: nothing read yet
    it = p.iter()
    assert next(it) == 0 and p.iter() is it           # .iter() is the current pass
    assert list(p) == [1, 4, 9, 16]                   # for continues a pass in progress
    assert list(p.iter()) == [] and p.to_list() == [] and p.fold(operator.add, 100) == 100
    assert list(p) == [0, 1, 4, 9, 16]                # for on an exhausted pass starts afresh
    p.reset()
    assert p.fold(operator.add, 100) == 130
    assert p.reset().to_list() == [0, 1, 4, 9, 16]
    # an epoch loop over a shuffled pipeline sees every item once per epoch
    sh = Pipeline.from_fn(6, lambda i: i).shuffle(0)
    epochs = [[v for v in sh] for _ in range(3)]
    assert all(sorted(e) == list(range(6)) for e in epochs)
    # stages are new pipelines: the receiver is unchanged and keeps its own pass
    base = Pipeline.from_array([3, 1, 2])
    doubled = base.map(lambda v: 2 * v)
    assert doubled.to_list() == [6, 2, 4] and base.to_list() == [3, 1, 2]


def test_len_where_known():
    p = Pipeline.from_fn(10, lambda i: i)
    assert len(p) == 10 and len(p.map(abs)) == 10 and len(p.shuffle(0)) == 10
    assert len(p.batch(3)) == 4 and len(p.batch(3, drop_last=True)) == 3
    assert len(p.take(4)) == 4 and len(p.take(40)) == 10 and len(p.repeat(3)) == 30
    assert len(p.prefetch(2)) == 10 and len(p.map_batch(4, list)) == 3
    for q in (p.filter(bool), p.repeat(None), p.filter(bool).take(3)):
        with pytest.raises(TypeError, match="unknown"):
            len(q)
    for q in (p, p.batch(3), p.take(4), p.repeat(3), p.shuffle(1).batch(3, drop_last=True)):
        assert len(q.to_list()) == len(q)


def test_stages_against_python():
    src = list(range(23))
    p = (Pipeline.from_array(src).map(lambda v: v * 3).filter(lambda v: v % 2 == 0)
         .map_batch(4, lambda items: tuple(items)))
    ev = [v * 3 for v in src if (v * 3) % 2 == 0]
    assert p.to_list() == [tuple(ev[i:i + 4]) for i in range(0, len(ev), 4)]
    assert Pipeline.from_array(src).take(5).repeat(2).to_list() == src[:5] * 2
    assert Pipeline.from_array(src).repeat(None).take(30).to_list() == (src * 2)[:30]
    assert Pipeline.from_array(src).filter(lambda v: v > 3).take(3).to_list() == [4, 5, 6]
    assert Pipeline.from_array(src).take(0).to_list() == []
    assert Pipeline.from_array(iter(range(4))).to_list() == [0, 1, 2, 3]   # an iterator is read once
    # shuffle after a non-indexed stage buffers the pass and permutes it
    sh = Pipeline.from_array(src).filter(lambda v: v % 3).shuffle(1)
    got = sh.to_list()
    kept = [v for v in src if v % 3]
    assert sorted(got) == kept and got == [kept[k] for k in np.random.default_rng(1).permutation(len(kept))]
    # repeat re-runs the upstream shuffle: each repetition a fresh permutation
    rep = Pipeline.from_fn(8, lambda i: i).shuffle(2).repeat(2).to_list()
    r = np.random.default_rng(2)
    assert rep == r.permutation(8).tolist() + r.permutation(8).tolist()
    # batch collates generic items with default_collate (dicts of numbers here)
    b = Pipeline.from_fn(5, lambda i: {"i": i, "v": np.full(2, i, np.float32)}).batch(2).to_list()
    assert [t["i"].tolist() for t in b] == [[0, 1], [2, 3], [4]]
    assert b[1]["v"].dtype == np.float32 and b[1]["v"].numpy().tolist() == [[2, 2], [3, 3]]
    arr = Pipeline.from_array(np.arange(12, dtype=np.float64).reshape(6, 2)).batch(4).to_list()
    assert isinstance(arr[0], ng.Tensor) and arr[1].numpy().tolist() == [[8, 9], [10, 11]]


def test_bad_arguments_name_the_stage():
    p = Pipeline.from_array([1, 2])
    with pytest.raises(ValueError, match=r"Pipeline.batch: n must be >= 1, got 0"):
        p.batch(0)
    with pytest.raises(ValueError, match=r"Pipeline.take: k must be >= 0, got -1"):
        p.take(-1)
    with pytest.raises(TypeError, match=r"Pipeline.map: fn must be callable"):
        p.map(3)
    with pytest.raises(TypeError, match=r"Pipeline.repeat: k must be an int or None"):
        p.repeat(1.5)
    with pytest.raises(ValueError, match=r"Pipeline.prefetch: k must be >= 1"):
        p.prefetch(0)
    with pytest.raises(TypeError, match=r"Pipeline.from_fn: n must be an int"):
        Pipeline.from_fn("3", abs)


def _prefetch_threads():
    return [t for t in threading.enumerate() if t.name == "numbagrad-prefetch"]


def test_prefetch_order_errors_bounded_and_no_leaked_threads():
    assert _prefetch_threads() == []
    p = Pipeline.from_fn(40, lambda i: i).shuffle(0).batch(3).prefetch(2)
    ref = Pipeline.from_fn(40, lambda i: i).shuffle(0).batch(3)
    assert [b.tolist() for b in p] == [b.tolist() for b in ref]
    assert _prefetch_threads() == []                  # an exhausted pass has joined its thread

    def boom(i):
        if i == 3:
            raise KeyError("bad sample 3")
        return i

    q = Pipeline.from_fn(10, boom).prefetch(4)
    with pytest.raises(KeyError, match="bad sample 3"):
        list(q)
    assert _prefetch_threads() == []

    # the shuffle order is drawn before the thread starts: reproducible beside the loop's draws
    x, y = _xy(30)
    runs = []
    for pre in (False, True):
        ng.manual_seed(0)
        src = prepare(x, y, 4, shuffle=True)
        src = src.prefetch(3) if pre else src
        runs.append([(yb.numpy().tolist(), ng.rand(2).tolist()) for _, yb in src])
    assert runs[0] == runs[1]
    assert _prefetch_threads() == []

    read = []
    k = 2
    slow = Pipeline.from_fn(1000, lambda i: read.append(i) or i).prefetch(k)
    it = slow.iter()
    assert next(it) == 0
    time.sleep(0.1)                                   # let the producer fill its queue
    assert 2 <= len(read) <= 1 + k + 1                # bounded: the queue plus one item in hand
    assert len(_prefetch_threads()) == 1
    slow.reset()                                      # stops and joins the producer
    assert _prefetch_threads() == []
    for v in slow:                                    # breaking out, then close()
        if v == 5:
            break
    slow.close()
    assert _prefetch_threads() == []


def test_map_with_process_workers_keeps_order():
    # operator.neg is picklable; spawn start method (fork would die after numba's OpenMP)
    p = Pipeline.from_array(list(range(25))).map(operator.neg, num_workers=2).batch(4)
    try:
        out = [b.tolist() for b in p]
        assert out == [[-v for v in range(i, min(i + 4, 25))] for i in range(0, 25, 4)]
        pool = p._parents[0]._pools[0]
        assert pool._ex._mp_context.get_start_method() == "spawn"
    finally:
        p.close()
    assert pool._ex is None


def test_prepare_and_use_as_a_dataloader():
    x, y = _xy(20)
    p = prepare(x, y, batch_size=6, shuffle=4)
    assert len(p) == 3
    perm = np.random.default_rng(4).permutation(20)
    got = _labels(p)
    assert got == [(y[perm[i:i + 6]]).tolist() for i in (0, 6, 12)]
    assert [b.tolist() for b in [xb for xb, _ in prepare(x, y, 8, shuffle=False)]] == [x[:8].tolist(),
                                                                                       x[8:16].tolist()]
    # update_bn takes a loader: a pipeline's pass feeds BatchNorm's cumulative average
    rng = np.random.default_rng(0)
    data = rng.standard_normal((24, 3)).astype(np.float32) * 2 + 5
    bn = ng.nn.BatchNorm1d(3)
    ng.optim.swa_utils.update_bn(prepare(data, np.zeros(24), 8, shuffle=1), bn)
    np.testing.assert_allclose(bn.running_mean.numpy(), data.mean(0), rtol=1e-5)
    # epochs of a training loop, as with a DataLoader
    seen = [np.concatenate(_labels(p)) for _ in range(2)]
    assert all(len(np.unique(s)) == 18 for s in seen) and seen[0].tolist() != seen[1].tolist()
