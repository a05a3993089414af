"""DataLoader worker processes: batches equal the single-process loader's (order, exactly
once, shuffled epochs from the same generator state), the transport of nested batches
through shared memory, IterableDataset sharding with ``get_worker_info``, reproducible
worker seeds, a worker's exception and a worker's death raised in the main process
(bounded: the workers are gone afterwards and no shared memory is left), ``timeout``,
fork workers before and after numba's pool ran (in a fresh process), and the argument checks.

Spawning a worker costs about a second (it imports numbagrad), so the tests keep their
loaders' workers persistent across assertions and use one or two workers where that is
enough. The datasets live in ``_worker_datasets.py``: spawned workers import them."""
import gc
import os
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import numbagrad as ng
from numbagrad.data import DataLoader, IterableDataset, TensorDataset, get_worker_info
from numbagrad.data._worker import shm_names

import _worker_datasets as W

HANG_GUARD_S = 60   # generous wall-time ceiling: only there so a regression fails instead of hanging


def _mine():
    """Shared-memory names of this process's loaders still in /dev/shm."""
    return shm_names(f"ngdl_{os.getpid()}_")


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _gone(pids, within=10.0):
    end = time.monotonic() + within
    while any(_alive(p) for p in pids) and time.monotonic() < end:
        time.sleep(0.05)
    return not any(_alive(p) for p in pids)


def _plain(batch):
    """A batch as nested lists (Tensors and arrays converted), for exact comparison."""
    if isinstance(batch, ng.Tensor):
        return ("T", str(batch.dtype), batch.numpy().tolist())
    if isinstance(batch, np.ndarray):
        return ("A", str(batch.dtype), batch.tolist())
    if isinstance(batch, (tuple, list)):
        return [_plain(b) for b in batch]
    if isinstance(batch, dict):
        return {k: _plain(v) for k, v in batch.items()}
    return batch


def _tensor_ds(n):
    return TensorDataset(ng.tensor(np.arange(n * 2, dtype=np.float32).reshape(n, 2)), ng.tensor(np.arange(n)))


# (num_workers, dataset, batch_size, drop_last): 1 worker collates tuples of a Tensor, an int
# and a string; 2 use TensorDataset.get_batch; 3 fetch single samples (batch_size=None)
CASES = {1: (lambda: W.Labelled(23), 4, False), 2: (lambda: _tensor_ds(37), 5, True),
         3: (lambda: W.Labelled(11), None, False)}


@pytest.mark.parametrize("workers", sorted(CASES))
def test_batches_equal_the_single_process_loader(workers):
    make, bs, drop = CASES[workers]
    kw = dict(batch_size=bs, drop_last=drop, shuffle=True)
    single = DataLoader(make(), generator=ng.Generator().manual_seed(11), **kw)
    multi = DataLoader(make(), generator=ng.Generator().manual_seed(11), num_workers=workers,
                       persistent_workers=True, **kw)
    n = len(make())
    pids = None
    for epoch in range(2):
        want = [_plain(b) for b in single]
        got = [_plain(b) for b in multi]
        assert got == want and len(got) == len(multi)
        # every sample exactly once (all of them unless drop_last dropped the tail)
        ids = [b[1][2] if bs is not None else [b[1]] for b in got]
        flat = sorted(i for b in ids for i in b)
        assert flat == sorted(set(flat)) and len(flat) == (n // bs * bs if drop else n)
        if pids is None:
            pids = multi._pool.pids
        assert multi._pool.pids == pids and len(pids) == workers   # persistent: the same processes
    del multi
    gc.collect()
    assert _gone(pids) and _mine() == []


def test_shuffled_epochs_from_the_default_generator_match_num_workers_0():
    ds = _tensor_ds(20)
    ng.manual_seed(5)
    want = [[y.tolist() for _, y in DataLoader(ds, batch_size=3, shuffle=True)] for _ in range(2)]
    after = ng.rand(3).numpy()
    ng.manual_seed(5)
    loader = DataLoader(ds, batch_size=3, shuffle=True, num_workers=2, persistent_workers=True)
    got = [[y.tolist() for _, y in loader] for _ in range(2)]
    assert got == want and want[0] != want[1]
    np.testing.assert_array_equal(ng.rand(3).numpy(), after)   # the same random stream afterwards
    loader._shutdown_workers()


def test_nested_batches_travel_through_shared_memory():
    loader = DataLoader(W.DictSamples(7), batch_size=3, num_workers=1)
    got = list(loader)
    want = [{"x": np.arange(i * 3, i * 3 + 3 * len(ix), dtype=np.float32).reshape(-1, 3), "y": ix}
            for i, ix in ((0, [0, 1, 2]), (3, [3, 4, 5]), (6, [6]))]
    assert len(got) == 3
    for g, w in zip(got, want):
        assert isinstance(g["x"], ng.Tensor) and g["x"].dtype == np.float32
        np.testing.assert_array_equal(g["x"].numpy(), w["x"])
        assert g["y"].dtype == np.int64 and g["y"].tolist() == w["y"]
        pids = g["meta"]["pid"]   # ints collated into a tensor: made in the worker, not here
        assert len(set(pids.tolist())) == 1 and pids.tolist()[0] != os.getpid()
    assert _mine() == []


def test_worker_seeds_are_the_base_seed_plus_the_worker_id():
    """Worker w is seeded base_seed + w (numbagrad, NumPy's global RNG) before
    worker_init_fn; base_seed is drawn from the loader's generator each epoch."""
    g = ng.Generator().manual_seed(7)
    loader = DataLoader(W.RandomDraw(8), batch_size=2, num_workers=2, generator=g, persistent_workers=True,
                        worker_init_fn=W.record_init)
    ref = ng.Generator().manual_seed(7)
    saved = ng.get_rng_state()
    epochs = []
    for _ in range(2):
        base = ref.next_seed()   # no shuffle: the epoch draws only its base seed
        got = [tuple(t.tolist() if isinstance(t, ng.Tensor) else t for t in b) for b in loader]
        # reference: worker w's draws are those of a fresh seed base + w, over its batches k = w, w + 2, ...
        want_ng, want_np = {}, {}
        for w in range(2):
            ng.manual_seed(base + w)
            np.random.seed((base + w) % (1 << 32))
            for k in range(w, 4, 2):
                for i in (2 * k, 2 * k + 1):
                    want_ng[i] = float(ng.rand(1).numpy()[0])
                    want_np[i] = float(np.random.random_sample())
        ids = [i for b in got for i in b[0]]
        assert ids == list(range(8))
        assert [w for b in got for w in b[3]] == [0, 0, 1, 1, 0, 0, 1, 1]
        np.testing.assert_array_equal([v for b in got for v in b[1]], [want_ng[i] for i in range(8)])
        np.testing.assert_array_equal([v for b in got for v in b[2]], [want_np[i] for i in range(8)])
        epochs.append(got)
    ng.set_rng_state(saved)
    assert epochs[0] != epochs[1]   # a new base seed per epoch
    assert get_worker_info() is None
    loader._shutdown_workers()


def test_iterable_dataset_sharded_by_worker_info():
    loader = DataLoader(W.Range(0, 23), batch_size=4, num_workers=2, persistent_workers=True)
    shards = [list(range(0, 23, 2)), list(range(1, 23, 2))]
    chunks = [[s[j:j + 4] for j in range(0, len(s), 4)] for s in shards]
    want = [c for pair in zip(*chunks) for c in pair]   # one batch from each worker in turn
    for _ in range(2):
        got = [b.tolist() for b in loader]
        assert got == want
        assert sorted(sum(got, [])) == list(range(23))
    loader._shutdown_workers()
    # shards of different lengths: an exhausted worker is skipped, the others go on
    got = [b.tolist() for b in DataLoader(W.UnevenShards([7, 2]), batch_size=2, num_workers=2)]
    assert got == [[0, 1], [1000, 1001], [2, 3], [4, 5], [6]]


def test_iterable_dataset_in_the_main_process():
    ds = W.Range(3, 13)
    loader = DataLoader(ds, batch_size=4)
    assert [b.tolist() for b in loader] == [[3, 4, 5, 6], [7, 8, 9, 10], [11, 12]] and len(loader) == 3
    assert [b.tolist() for b in DataLoader(ds, batch_size=4, drop_last=True)] == [[3, 4, 5, 6], [7, 8, 9, 10]]
    assert [int(v) for v in DataLoader(ds, batch_size=None)] == list(range(3, 13))
    chained = ds + W.Range(0, 2)
    assert [int(v) for v in DataLoader(chained, batch_size=None)] == list(range(3, 13)) + [0, 1]
    assert len(chained) == 12
    it = iter(loader)
    next(it)
    with pytest.raises(TypeError, match="IterableDataset Range: a stream cannot be rewound"):
        loader.state_dict()
    list(it)
    assert loader.state_dict()["epoch_in_progress"] is False   # between epochs it works
    for kw in (dict(shuffle=True), dict(sampler=[0, 1]), dict(batch_sampler=[[0, 1]])):
        with pytest.raises(ValueError, match="DataLoader with IterableDataset: expected unspecified"):
            DataLoader(ds, **kw)

    class Plain(IterableDataset):
        pass

    with pytest.raises(NotImplementedError, match="Plain must implement __iter__"):
        next(iter(DataLoader(Plain())))


def test_worker_exception_is_raised_with_its_traceback():
    loader = DataLoader(W.Failing(12, 7), batch_size=2, num_workers=2)
    it = iter(loader)
    got = [next(it)[0].item() for _ in range(3)]   # batches 0-2 are fine
    assert got == [0.0, 2.0, 4.0]
    pids = it._pool.pids
    with pytest.raises(ValueError) as info:
        next(it)
    text = str(info.value)
    assert text.startswith("Caught ValueError in DataLoader worker process 1.\nOriginal Traceback (most recent "
                           "call last):")
    assert "_worker_datasets.py" in text and "sample 7 is bad on purpose" in text
    assert _gone(pids) and _mine() == []   # the workers were shut down
    with pytest.raises(RuntimeError, match="workers were shut down after the error above"):
        next(it)
    assert loader.state_dict()["num_yielded"] == 3   # the position is kept, for a resume
    # an exception in worker_init_fn comes with the first batch (KeyError keeps its type)
    with pytest.raises(KeyError, match="Caught KeyError in DataLoader worker process 0"):
        next(iter(DataLoader(W.Failing(4, -1), num_workers=1, worker_init_fn=W.failing_init)))


def test_a_killed_worker_raises_instead_of_hanging():
    loader = DataLoader(W.Suicidal(40, 9), batch_size=2, num_workers=2)
    it = iter(loader)
    next(it)
    pids = it._pool.pids
    t = time.monotonic()
    with pytest.raises(RuntimeError, match=r"DataLoader worker 0 \(pid \d+\) exited unexpectedly \(killed by "
                                           r"SIGKILL, exit code -9\)"):
        list(it)
    assert time.monotonic() - t < HANG_GUARD_S
    assert _gone(pids) and _mine() == []


def test_timeout_raises_and_stops_the_worker():
    # 0.5 s is shorter than a worker's start-up (spawn, import): that is not counted
    loader = DataLoader(W.Stalling(6, 2, 60.0), batch_size=None, num_workers=1, timeout=0.5)
    it = iter(loader)
    assert [float(next(it)) for _ in range(2)] == [0.0, 1.0]
    pids = it._pool.pids
    t = time.monotonic()
    with pytest.raises(RuntimeError, match="DataLoader timed out after 0.5 seconds"):
        next(it)
    assert time.monotonic() - t < HANG_GUARD_S
    assert _gone(pids) and _mine() == []


def test_fork_before_and_after_numbas_pool_started_and_exit_is_clean():
    """In a fresh process: fork works before numba's pool has run and after (the forked
    worker runs its kernels serially, ``config.fork_runs_serial``);
    a spawned persistent loader left to the interpreter's exit leaves no shared memory
    and no resource_tracker warning."""
    code = textwrap.dedent("""
        import os, sys
        sys.path.insert(0, sys.argv[1])
        import numpy as np
        import numbagrad as ng
        from numbagrad.data import DataLoader
        from numbagrad.data._worker import numba_pool_started
        import _worker_datasets as W
        if __name__ == "__main__":
            print("pid", os.getpid())
            assert not numba_pool_started()
            print("fork-before", [b.tolist() for b in DataLoader(W.Range(0, 4), batch_size=2, num_workers=1,
                                                                  multiprocessing_context="fork")])
            x = ng.randn(300_000)
            (x + x).sum()                          # a parallel kernel starts numba's pool
            assert numba_pool_started()
            print("fork-after", [b.tolist() for b in DataLoader(W.Range(0, 4), batch_size=2, num_workers=1,
                                                                 multiprocessing_context="fork")])
            keep = DataLoader(W.Labelled(6), batch_size=2, num_workers=1, persistent_workers=True)
            print("spawn", [b[1].tolist() for b in keep])
    """)
    proc = subprocess.run([sys.executable, "-c", code, os.path.dirname(W.__file__)], capture_output=True,
                          text=True, timeout=HANG_GUARD_S * 2)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    assert "fork-before [[0, 1], [2, 3]]" in out
    assert "fork-after [[0, 1], [2, 3]]" in out
    assert "spawn [[0, 1], [2, 3], [4, 5]]" in out
    assert "leaked" not in proc.stderr and "resource_tracker" not in proc.stderr, proc.stderr
    pid = int(out.split("pid ", 1)[1].split()[0])
    assert shm_names(f"ngdl_{pid}_") == []


def test_argument_checks_as_torch():
    torch = pytest.importorskip("torch")
    ds = _tensor_ds(4)
    tds = torch.utils.data.TensorDataset(torch.zeros(4))
    bad = [dict(num_workers=-1), dict(timeout=-1), dict(prefetch_factor=2),
           dict(persistent_workers=True), dict(num_workers=1, multiprocessing_context="nope"),
           dict(multiprocessing_context="spawn")]
    for kw in bad:
        with pytest.raises(ValueError):
            torch.utils.data.DataLoader(tds, **kw)
        with pytest.raises(ValueError):
            DataLoader(ds, **kw)
    with pytest.raises(ValueError, match="prefetch_factor option should be a positive integer"):
        DataLoader(ds, num_workers=1, prefetch_factor=0)
    with pytest.raises(TypeError, match="worker_init_fn must be callable"):
        DataLoader(ds, num_workers=1, worker_init_fn=3)
    with pytest.raises(TypeError, match="multiprocessing_context option should be a valid context"):
        DataLoader(ds, num_workers=1, multiprocessing_context=3)
    loader = DataLoader(ds, batch_size=2, pin_memory=True, num_workers=1, timeout=5, prefetch_factor=3)
    assert loader.prefetch_factor == 3 and loader.pin_memory is True   # pin_memory: accepted, a no-op
    assert DataLoader(ds, num_workers=2).prefetch_factor == 2 and DataLoader(ds).prefetch_factor is None


def test_an_unpicklable_collate_fn_gets_a_clear_error():
    loader = DataLoader(_tensor_ds(4), num_workers=1, collate_fn=lambda b: b)
    with pytest.raises(Exception, match="DataLoader: cannot start worker 0 with the 'spawn' start method: .*must "
                                        "be picklable"):
        next(iter(loader))
    assert _mine() == []
