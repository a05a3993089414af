"""Datasets for ``tests/data/test_workers.py``. They live in an importable module
because spawned DataLoader workers unpickle them by name."""
import os
import signal

import numpy as np

import numbagrad as ng
from numbagrad.data import Dataset, IterableDataset, get_worker_info


class Labelled(Dataset):
    """Sample i is ``(x_i, i, "s<i>")`` with ``x_i`` a float32 row: a tuple of a Tensor,
    an int and a string, so the batch has arrays through shared memory and pickled leaves."""

    def __init__(self, n, width=3):
        self.x = np.arange(n * width, dtype=np.float32).reshape(n, width)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return ng.tensor(self.x[i]), int(i), f"s{i}"


class DictSamples(Labelled):
    """Sample i is ``{"x": x_i, "y": i, "meta": {"pid": worker pid}}``."""

    def __getitem__(self, i):
        return {"x": self.x[i], "y": np.int64(i), "meta": {"pid": os.getpid()}}


class RandomDraw(Dataset):
    """Sample i is ``(i, a draw from numbagrad's default generator, one from NumPy's
    global RNG, the worker's id)``: what the worker seeding makes reproducible."""

    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        info = get_worker_info()
        return (int(i), float(ng.rand(1).numpy()[0]), float(np.random.random_sample()),
                -1 if info is None else info.id)


class _TrapAt(Dataset):
    """Sample i is ``float32(i)``, but fetching index ``at`` first calls :meth:`_trap`."""

    def __init__(self, n, at):
        self.n, self.at = n, at

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if i == self.at:
            self._trap(i)
        return np.float32(i)


class Failing(_TrapAt):
    """Raises ``ValueError`` at index ``at``."""

    def _trap(self, i):
        raise ValueError(f"sample {i} is bad on purpose")


class Suicidal(_TrapAt):
    """The worker that fetches index ``at`` kills itself with SIGKILL."""

    def _trap(self, i):
        os.kill(os.getpid(), signal.SIGKILL)


class Stalling(_TrapAt):
    """Index ``slow`` sleeps ``seconds`` (for ``timeout=``)."""

    def __init__(self, n, slow, seconds):
        super().__init__(n, slow)
        self.seconds = seconds

    def _trap(self, i):
        import time
        time.sleep(self.seconds)


class Range(IterableDataset):
    """The integers ``[start, stop)``, sharded between the workers by ``get_worker_info``
    (worker k takes every num_workers-th element from start + k), as torch's docs shard."""

    def __init__(self, start, stop):
        self.start, self.stop = start, stop

    def __iter__(self):
        info = get_worker_info()
        step, first = (1, self.start) if info is None else (info.num_workers, self.start + info.id)
        for v in range(first, self.stop, step):
            yield np.int64(v)

    def __len__(self):
        return self.stop - self.start


class UnevenShards(IterableDataset):
    """Worker k yields ``sizes[k]`` values ``1000 * k + j``: shards of different lengths,
    so some workers are exhausted before others."""

    def __init__(self, sizes):
        self.sizes = sizes

    def __iter__(self):
        info = get_worker_info()
        k = 0 if info is None else info.id
        for j in range(self.sizes[k]):
            yield 1000 * k + j


def record_init(worker_id):
    """A worker_init_fn: stores the worker's id and seed in NumPy's RNG draws' stead."""
    info = get_worker_info()
    assert info is not None and info.id == worker_id


def failing_init(worker_id):
    raise KeyError(f"init of worker {worker_id} failed")
