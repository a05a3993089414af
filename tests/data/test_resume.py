"""Exact resume: ``DataLoader.state_dict`` / ``load_state_dict`` at every position of an
epoch (the resumed batches equal the uninterrupted ones for the rest of that epoch and the
next two), the samplers' and generators' states, ``get_rng_state`` / ``set_rng_state``
validation, schedulers' state dicts of plain types, and a bit-identical resume of a
training run (dropout, OneCycleLR, Adam, a shuffled loader) in a fresh process through
``numbagrad.save`` / ``numbagrad.load``."""
import copy
import subprocess
import sys
import textwrap
import warnings
from collections import Counter

import numpy as np
import pytest

import numbagrad as ng
from numbagrad import nn, optim
from numbagrad.data import (BatchSampler, DataLoader, RandomSampler, Sampler, SequentialSampler,
                            SubsetRandomSampler, TensorDataset)
from numbagrad.optim import lr_scheduler as L

N = 10


def _ds(n=N):
    """Sample i is (x_i, i): the labels of a batch are its indices."""
    return TensorDataset(ng.tensor(np.arange(n * 2, dtype=np.float32).reshape(n, 2)), ng.tensor(np.arange(n)))


def _ids(batch):
    """The dataset indices in a batch (or a single sample, batch_size=None)."""
    y = batch[1].numpy()
    return y.reshape(-1).tolist()


def _epoch(it):
    return [_ids(b) for b in it]


# name -> factory(seed) of a loader; seed seeds the loader's own generator where it has one
LOADERS = {
    "sequential": lambda seed: DataLoader(_ds(), batch_size=4),
    "shuffle": lambda seed: DataLoader(_ds(), batch_size=4, shuffle=True),
    "shuffle_drop_last": lambda seed: DataLoader(_ds(), batch_size=4, shuffle=True, drop_last=True),
    "generator": lambda seed: DataLoader(_ds(), batch_size=3, shuffle=True,
                                         generator=ng.Generator().manual_seed(seed)),
    "generator_drop_last": lambda seed: DataLoader(_ds(), batch_size=3, shuffle=True, drop_last=True,
                                                   generator=ng.Generator().manual_seed(seed)),
    "samples": lambda seed: DataLoader(_ds(), batch_size=None, shuffle=True),
    "samples_generator": lambda seed: DataLoader(_ds(), batch_size=None, shuffle=True,
                                                 generator=ng.Generator().manual_seed(seed)),
    "subset": lambda seed: DataLoader(_ds(), batch_size=2, sampler=SubsetRandomSampler([1, 3, 4, 6, 8, 9, 0])),
    "subset_generator": lambda seed: DataLoader(
        _ds(), batch_size=2, drop_last=True,
        sampler=SubsetRandomSampler([1, 3, 4, 6, 8, 9, 0], generator=ng.Generator().manual_seed(seed))),
    "replacement": lambda seed: DataLoader(_ds(), batch_size=3, sampler=RandomSampler(_ds(), True, 8)),
    "batch_sampler": lambda seed: DataLoader(_ds(), batch_sampler=BatchSampler(
        RandomSampler(_ds(), generator=ng.Generator().manual_seed(seed)), 4, False)),
}
# positions in the second epoch: batches taken from its iterator, or "between" (exhausted)
POSITIONS = ["start", 1, "middle", "last", "between"]


def _take_to(it, loader, where):
    """Advance the fresh iterator ``it`` to ``where``."""
    n = len(loader)
    k = {"start": 0, "middle": n // 2, "last": n, "between": n}.get(where, where)
    for _ in range(k):
        next(it)
    if where == "between":
        assert next(it, None) is None


@pytest.mark.parametrize("where", POSITIONS)
@pytest.mark.parametrize("name", list(LOADERS))
def test_resume_continues_the_epoch_and_the_next_two(name, where):
    ng.manual_seed(0)
    make = LOADERS[name]
    first = make(5)
    _epoch(first)                               # a whole first epoch
    it = iter(first)
    _take_to(it, first, where)
    sd = first.state_dict()
    rng = ng.get_rng_state()
    assert sd["epoch_in_progress"] == (where not in ("start", "between"))
    # the uninterrupted run: the rest of this epoch, then two more
    expected = ([] if where == "between" else [_epoch(it)]) + [_epoch(first), _epoch(first)]
    # a fresh loader (its generator seeded otherwise) and a scrambled default generator
    ng.manual_seed(1234)
    resumed = make(77)
    resumed.load_state_dict(copy.deepcopy(sd))
    if "generator" not in name:
        ng.set_rng_state(rng)
    got = [_epoch(resumed) for _ in expected]
    assert got == expected
    assert len(expected[-1]) == len(resumed)


@pytest.mark.parametrize("name", ["shuffle", "generator", "samples", "subset"])
def test_state_dict_inside_the_loop_and_reloading_into_the_same_loader(name):
    ng.manual_seed(3)
    loader = LOADERS[name](9)
    seen, sd, rng = [], None, None
    for i, b in enumerate(loader):
        seen.append(_ids(b))
        if i == 1:
            sd, rng = loader.state_dict(), ng.get_rng_state()
    after = [_epoch(loader), _epoch(loader)]
    assert sd["num_yielded"] == 2 and sorted(sd["order"].tolist()) == sorted(sum(seen, []))
    loader.load_state_dict(sd)                   # rewind the same loader
    ng.set_rng_state(rng)
    assert [_epoch(loader)] + [_epoch(loader), _epoch(loader)] == [seen[2:]] + after


def test_the_most_recent_iterator_counts_and_the_state_is_a_copy():
    ng.manual_seed(0)
    loader = DataLoader(_ds(), batch_size=3, shuffle=True)
    old = iter(loader)
    next(old)
    new = iter(loader)                           # not started: no epoch in progress
    sd = loader.state_dict()
    assert sd["epoch_in_progress"] is False and sd["order"] is None and sd["num_yielded"] == 0
    next(old)
    next(new)
    sd = loader.state_dict()
    assert sd["epoch_in_progress"] is True and sd["num_yielded"] == 1
    order = sd["order"].copy()
    sd["order"][:] = -1                          # the caller's copy
    assert np.array_equal(loader.state_dict()["order"], order)
    # after load_state_dict, and before the next iter(), the state is the loaded one
    loader.load_state_dict(loader.state_dict())
    again = loader.state_dict()
    assert np.array_equal(again["order"], order) and again["num_yielded"] == 1
    assert _ids(next(iter(loader))) == order[3:6].tolist()


class _EveryOther(Sampler):
    """A custom sampler without indices() or state."""

    def __init__(self, n):
        self.n = n

    def __iter__(self):
        return iter(range(0, self.n, 2))

    def __len__(self):
        return -(-self.n // 2)


class _Pairs:
    """A custom batch sampler (no state_dict)."""

    def __iter__(self):
        return iter([[0, 1], [2, 3], [4]])

    def __len__(self):
        return 3


def test_custom_samplers():
    # with batch_size=, the loader records any sampler's order: exact resume
    loader = DataLoader(_ds(), batch_size=2, sampler=_EveryOther(N))
    it = iter(loader)
    next(it)
    sd = loader.state_dict()
    assert sd["order"].tolist() == [0, 2, 4, 6, 8] and sd["sampler"] == {"sampler": None}
    fresh = DataLoader(_ds(), batch_size=2, sampler=_EveryOther(N))
    fresh.load_state_dict(sd)
    assert _epoch(fresh) == _epoch(it) == [[4, 6], [8]]
    # sample iteration over a custom sampler, or a custom batch sampler: the loader does
    # not know the order, so a state inside the epoch is refused, naming the class ...
    for lo, cls in ((DataLoader(_ds(), batch_size=None, sampler=_EveryOther(N)), "_EveryOther"),
                    (DataLoader(_ds(), batch_sampler=_Pairs()), "_Pairs")):
        it = iter(lo)
        next(it)
        with pytest.raises(TypeError, match=f"DataLoader.state_dict: .*{cls}"):
            lo.state_dict()
        rest = _epoch(it)
        sd = lo.state_dict()                     # ... while between epochs it works
        assert sd["epoch_in_progress"] is False and sd["sampler"] is None
        lo.load_state_dict(sd)
        assert len(_epoch(lo)) == len(rest) + 1
    # and a state inside an epoch cannot be loaded into a custom batch sampler
    src = DataLoader(_ds(5), batch_size=2)
    next(iter(src))
    with pytest.raises(TypeError, match="batch_sampler _Pairs is not the built-in BatchSampler"):
        DataLoader(_ds(5), batch_sampler=_Pairs()).load_state_dict(
            dict(src.state_dict(), batch_size=None))


def test_load_state_dict_errors_name_what_is_wrong():
    ng.manual_seed(0)
    loader = DataLoader(_ds(), batch_size=4, shuffle=True)
    next(iter(loader))
    sd = loader.state_dict()
    fresh = DataLoader(_ds(), batch_size=4, shuffle=True)
    cases = [
        ([1, 2], TypeError, "state_dict must be a dict from DataLoader.state_dict\\(\\), got list"),
        ({k: v for k, v in sd.items() if k != "order"}, ValueError, "missing key\\(s\\) \\['order'\\]"),
        (dict(sd, extra=1), ValueError, "unknown key\\(s\\) \\['extra'\\]"),
        (dict(sd, batch_size=5), ValueError, "state_dict\\['batch_size'\\] is 5, but this loader has batch_size=4"),
        (dict(sd, drop_last=True), ValueError, "state_dict\\['drop_last'\\] is True"),
        (dict(sd, num_yielded=4), ValueError, "state_dict\\['num_yielded'\\] is 4, but the saved epoch has only 3"),
        (dict(sd, num_yielded=1.0), TypeError, "state_dict\\['num_yielded'\\] must be an int, got float"),
        (dict(sd, epoch_in_progress="yes"), TypeError, "state_dict\\['epoch_in_progress'\\] must be a bool"),
        (dict(sd, order=sd["order"][:5]), ValueError, "state_dict\\['order'\\] has 5 indices, but an epoch"),
        (dict(sd, order=sd["order"] + 5), ValueError, "outside the dataset of 10 samples"),
        (dict(sd, order=sd["order"].astype(np.float64)), TypeError, "1-D int64 array .* dtype float64"),
        (dict(sd, order=sd["order"].tolist()), TypeError, "1-D int64 array of sample indices, got list"),
        (dict(sd, epoch_in_progress=False), ValueError, "'order' must be None and 'num_yielded' 0"),
        (dict(sd, generator=ng.Generator().get_state()), ValueError,
         "state_dict\\['generator'\\] is a generator state, but this loader was built with generator=None"),
        (dict(sd, generator=1), ValueError, "state_dict\\['generator'\\] is a generator state, but"),
        (dict(sd, sampler={"sampler": {"generator": ng.Generator().get_state()}}), ValueError,
         "RandomSampler.load_state_dict: state_dict\\['generator'\\] is a generator state, but this sampler has "
         "no generator"),
    ]
    for bad, exc, msg in cases:
        with pytest.raises(exc, match=msg):
            fresh.load_state_dict(bad)
    assert fresh.state_dict()["epoch_in_progress"] is False      # nothing was half-loaded
    fresh.load_state_dict(sd)
    assert fresh.state_dict()["num_yielded"] == 1


def test_sampler_state_dicts():
    g = ng.Generator().manual_seed(4)
    s = RandomSampler(range(6), generator=g)
    sd = s.state_dict()
    a = s.indices()
    s.load_state_dict(sd)
    assert np.array_equal(s.indices(), a)
    assert RandomSampler(range(6)).state_dict() == {"generator": None}
    assert SequentialSampler(range(3)).state_dict() == {}
    sub = SubsetRandomSampler([5, 2, 7], generator=ng.Generator().manual_seed(1))
    bs = BatchSampler(sub, 2, False)
    sd = bs.state_dict()
    assert set(sd) == {"sampler"} and set(sd["sampler"]) == {"generator"}
    first = bs.batches()
    bs.load_state_dict(sd)
    assert [b.tolist() for b in bs.batches()] == [b.tolist() for b in first]
    with pytest.raises(ValueError, match="SubsetRandomSampler.load_state_dict: state_dict has the keys \\['x'\\]"):
        sub.load_state_dict({"x": 1})
    with pytest.raises(TypeError, match="BatchSampler.load_state_dict: state_dict must be a dict"):
        bs.load_state_dict(None)
    with pytest.raises(TypeError, match="the sampler _EveryOther has no load_state_dict"):
        BatchSampler(_EveryOther(4), 2, False).load_state_dict({"sampler": {}})


# ---- random state -----------------------------------------------------------------------
def test_rng_state_is_a_plain_deep_copy_and_covers_dropout():
    ng.manual_seed(11)
    st = ng.get_rng_state()
    assert st["bit_generator"] == "PCG64" and set(st["state"]) == {"state", "inc"}
    assert all(type(v) is int for v in (st["state"]["state"], st["state"]["inc"], st["has_uint32"], st["uinteger"]))
    st["state"]["state"] = 1                     # a copy: the generator is unaffected
    assert ng.get_rng_state()["state"]["state"] != 1
    st = ng.get_rng_state()
    x = ng.ones(200)
    a = (ng.nn.functional.dropout(x, 0.5).numpy(), ng.rand(3).numpy(), ng.randperm(7).numpy())
    ng.set_rng_state(st)
    b = (ng.nn.functional.dropout(x, 0.5).numpy(), ng.rand(3).numpy(), ng.randperm(7).numpy())
    assert all(np.array_equal(u, v) for u, v in zip(a, b))
    g = ng.Generator().manual_seed(2)
    gs = g.get_state()
    u = ng.rand(4, generator=g).numpy()
    assert g.set_state(gs) is g and np.array_equal(ng.rand(4, generator=g).numpy(), u)


def test_set_rng_state_validates():
    good = ng.get_rng_state()
    mt = np.random.MT19937(0).state
    cases = [
        (None, TypeError, "numbagrad.set_rng_state: state must be a dict .* got NoneType"),
        (mt, ValueError, "unknown key|bit_generator"),
        (dict(good, bit_generator="MT19937"), ValueError, "state\\['bit_generator'\\] is 'MT19937'.*PCG64"),
        ({k: v for k, v in good.items() if k != "uinteger"}, ValueError, "missing \\['uinteger'\\]"),
        (dict(good, state={"state": 1}), ValueError, "state\\['state'\\] is not a PCG64 generator state: it must have exactly the keys .* missing"),
        (dict(good, state=[1, 2]), TypeError, "state\\['state'\\] must be a dict"),
        (dict(good, state={"state": -1, "inc": 1}), ValueError, "state\\['state'\\]\\['state'\\] must be in"),
        (dict(good, state={"state": 1 << 128, "inc": 1}), ValueError, "must be in \\[0, "),
        (dict(good, state={"state": "1", "inc": 1}), TypeError, "state\\['state'\\]\\['state'\\] must be an int"),
        (dict(good, has_uint32=2), ValueError, "state\\['has_uint32'\\] must be in \\[0, 2\\)"),
        (dict(good, uinteger=1.5), TypeError, "state\\['uinteger'\\] must be an int, got float"),
    ]
    for bad, exc, msg in cases:
        with pytest.raises(exc, match=msg):
            ng.set_rng_state(bad)
    assert ng.get_rng_state() == good            # unchanged by the failures
    with pytest.raises(ValueError, match="Generator.set_state: state\\['bit_generator'\\]"):
        ng.Generator().set_state(dict(good, bit_generator="Philox"))
    # numpy integers (as a reader may return them) are accepted
    ng.set_rng_state(dict(good, has_uint32=np.int64(good["has_uint32"])))
    assert ng.get_rng_state() == good


# ---- every state dict is plain data -----------------------------------------------------
def _plain(x, path="sd"):
    """Raise unless ``x`` is made only of dicts (str keys; int keys where noted),
    lists, tuples, Python scalars, None and NumPy arrays."""
    t = type(x)
    if t is dict:
        for k, v in x.items():
            assert type(k) is str or (type(k) is int and path.endswith("milestones")), (path, k)
            _plain(v, f"{path}.{k}")
    elif t in (list, tuple):
        for i, v in enumerate(x):
            _plain(v, f"{path}[{i}]")
    else:
        assert t in (int, float, bool, str, type(None)) or (t is np.ndarray and x.dtype != object), (path, t)


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_state_dicts_hold_only_plain_types():
    for name, make in LOADERS.items():
        loader = make(1)
        _plain(loader.state_dict(), name)
        it = iter(loader)
        next(it)
        sd = loader.state_dict()
        _plain(sd, name)
        assert sd["order"].dtype == np.int64
    _plain(ng.get_rng_state())
    p = [nn.Parameter(ng.ones(2))]
    scheds = [lambda o: L.OneCycleLR(o, 0.1, total_steps=50), lambda o: L.OneCycleLR(o, [0.1], epochs=5,
                                                                                       steps_per_epoch=10,
                                                                                       three_phase=True),
              lambda o: L.MultiStepLR(o, [3, 5, 5]), lambda o: L.CyclicLR(o, 0.01, 0.1, step_size_up=4),
              lambda o: L.SequentialLR(o, [L.LinearLR(o, 0.5, total_iters=3), L.MultiStepLR(o, [4])], [3]),
              lambda o: L.LinearWarmup(o, 3, L.CosineAnnealingLR(o, 10)), lambda o: L.ReduceLROnPlateau(o)]
    for make in scheds:
        for opt in (optim.SGD(p, lr=0.1, momentum=0.9), optim.Adam(p, lr=0.1)):
            s = make(opt)
            for i in range(7):
                opt.step()
                s.step(1.0 / (i + 1)) if isinstance(s, L.ReduceLROnPlateau) else s.step()
            _plain(s.state_dict(), type(s).__name__)


def test_multisteplr_state_dict_has_a_plain_milestones_dict():
    o = optim.SGD([nn.Parameter(ng.ones(2))], lr=1.0)
    s = L.MultiStepLR(o, [2, 4, 4], gamma=0.5)
    sd = s.state_dict()
    assert type(sd["milestones"]) is dict and sd["milestones"] == {2: 1, 4: 2}
    o2 = optim.SGD([nn.Parameter(ng.ones(2))], lr=1.0)
    s2 = L.MultiStepLR(o2, [9])
    s2.load_state_dict(sd)
    assert isinstance(s2.milestones, Counter) and s2.milestones == Counter([2, 4, 4])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        s2.step(5)                               # the closed form needs the Counter back
    assert s2.get_last_lr() == [0.125]


# ---- a training run resumed in a fresh process ---------------------------------------------
SCRIPT = textwrap.dedent('''
    """Train a small MLP (dropout, Adam, OneCycleLR per batch, a shuffled loader):
    full OUT       - 6 epochs uninterrupted, losses and parameters to OUT (.npz)
    first CKPT     - stop after 3.5 epochs, inside the loop, and numbagrad.save a checkpoint
    resume CKPT OUT - numbagrad.load it, restore everything, finish the 6 epochs"""
    import sys
    import warnings

    import numpy as np

    import numbagrad as ng
    from numbagrad import nn, optim
    from numbagrad.data import DataLoader, TensorDataset

    warnings.simplefilter("ignore")
    EPOCHS, BATCH, SAMPLES = 6, 8, 60          # 8 batches an epoch, the last one of 4
    STOP = 3 * 8 + 4                           # 3.5 epochs


    def build():
        ng.manual_seed(0)
        data = np.random.default_rng(0)
        X = data.standard_normal((SAMPLES, 5)).astype(np.float32)
        y = data.integers(0, 3, SAMPLES)
        model = nn.Sequential(nn.Linear(5, 16), nn.ReLU(), nn.Dropout(0.3), nn.Linear(16, 3))
        opt = optim.Adam(model.parameters(), lr=1e-2)
        loader = DataLoader(TensorDataset(ng.tensor(X), ng.tensor(y)), batch_size=BATCH, shuffle=True)
        sched = optim.lr_scheduler.OneCycleLR(opt, max_lr=0.05, epochs=EPOCHS, steps_per_epoch=len(loader))
        return model, opt, sched, loader


    def train(model, opt, sched, loader, start_epoch, losses, ckpt=None):
        model.train()
        for epoch in range(start_epoch, EPOCHS):
            for xb, yb in loader:
                opt.zero_grad()
                loss = nn.functional.cross_entropy(model(xb), yb)
                loss.backward()
                opt.step()
                sched.step()
                losses.append(loss.item())
                if ckpt is not None and len(losses) == STOP:
                    ng.save({"model": model.state_dict(), "optimizer": opt.state_dict(),
                             "scheduler": sched.state_dict(), "loader": loader.state_dict(),
                             "rng": ng.get_rng_state(), "epoch": epoch, "losses": losses}, ckpt)
                    return


    def report(model, losses, out):
        params = {k: v.detach().numpy() for k, v in model.state_dict().items()}
        np.savez(out, losses=np.array(losses, dtype=np.float64), **params)


    mode = sys.argv[1]
    model, opt, sched, loader = build()
    if mode == "full":
        losses = []
        train(model, opt, sched, loader, 0, losses)
        report(model, losses, sys.argv[2])
    elif mode == "first":
        train(model, opt, sched, loader, 0, [], ckpt=sys.argv[2])
    else:
        ck = ng.load(sys.argv[2])
        assert ck["epoch"] == 3 and len(ck["losses"]) == STOP, (ck["epoch"], len(ck["losses"]))
        assert ck["loader"]["epoch_in_progress"] and ck["loader"]["num_yielded"] == 4
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["optimizer"])
        sched.load_state_dict(ck["scheduler"])
        loader.load_state_dict(ck["loader"])
        ng.set_rng_state(ck["rng"])
        losses = list(ck["losses"])
        train(model, opt, sched, loader, ck["epoch"], losses)
        report(model, losses, sys.argv[3])
''')


def _check(proc):
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err.decode()[-3000:]


def test_resume_in_a_fresh_process_is_bit_identical(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    ckpt, full, resumed = (str(tmp_path / f) for f in ("run.ckpt", "full.npz", "resumed.npz"))
    run = lambda *args: subprocess.Popen([sys.executable, str(script), *args],  # noqa: E731
                                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    a, b = run("full", full), run("first", ckpt)   # two fresh processes side by side
    _check(a)
    _check(b)
    _check(run("resume", ckpt, resumed))          # a third finishes from the checkpoint
    with np.load(full) as f, np.load(resumed) as r:
        assert f.files == r.files and len(f["losses"]) == 6 * 8
        assert f["losses"].tolist() == r["losses"].tolist()      # every step's loss, bit for bit
        for k in f.files:
            assert np.array_equal(f[k], r[k]), k
        assert len(set(f["losses"].tolist())) > 40               # dropout/shuffle really vary


def test_mid_epoch_resume_with_workers_gives_the_exact_next_batches():
    """Workers keep the order in the main process: a state taken mid-epoch from a loader
    with 2 workers resumes at the next batch, in a loader with workers (the same
    persistent ones, reloaded) and in one without."""
    def make(seed, workers):
        return DataLoader(_ds(23), batch_size=3, shuffle=True, generator=ng.Generator().manual_seed(seed),
                          num_workers=workers, persistent_workers=workers > 0)

    loader = make(8, 2)
    _epoch(loader)                                # a whole first epoch, through the workers
    it = iter(loader)
    head = [_ids(next(it)) for _ in range(3)]
    sd = loader.state_dict()
    assert sd["epoch_in_progress"] is True and sd["num_yielded"] == 3 and isinstance(sd["base_seed"], int)
    expected = [_epoch(it), _epoch(loader)]       # the uninterrupted rest, then one more epoch
    assert sorted(sum(head + expected[0], [])) == list(range(23))
    single = make(1, 0)
    single.load_state_dict(copy.deepcopy(sd))
    assert [_epoch(single), _epoch(single)] == expected
    loader.load_state_dict(copy.deepcopy(sd))     # rewind the loader whose workers are running
    assert [_epoch(loader), _epoch(loader)] == expected
    assert loader.state_dict()["base_seed"] is None   # between epochs
    loader._shutdown_workers()
