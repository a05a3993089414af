"""numbagrad.io.AsyncSaver / async_save: checkpoints written in the call and committed
(fsync, rename) by a commit process (the default), or written by a saver process
(``process=True``).

A saver process is a fresh interpreter that imports numbagrad (~1 s), so the tests share
one saver of each kind where they can."""
import collections
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

import numbagrad as ng
from numbagrad import nn, optim


@pytest.fixture(scope="module", params=[False, True], ids=["commit_process", "saver_process"])
def saver(request):
    s = ng.io.AsyncSaver(process=request.param)
    yield s
    s.close()


def _state(seed):
    ng.manual_seed(seed)
    model = nn.Sequential(nn.Linear(5, 4), nn.ReLU(), nn.Linear(4, 3))
    opt = optim.Adam(model.parameters(), lr=1e-2)
    model(ng.randn(8, 5)).sum().backward()
    opt.step()
    return model, opt


def _assert_same(a, b):
    assert type(a) is type(b), (type(a), type(b))
    if isinstance(a, dict):
        assert list(a) == list(b)
        for k in a:
            _assert_same(a[k], b[k])
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _assert_same(x, y)
    elif isinstance(a, ng.Tensor):
        assert a.dtype == b.dtype and a.shape == b.shape and a.requires_grad == b.requires_grad
        x, y = a.detach().numpy(), b.detach().numpy()
        assert x.tobytes() == y.tobytes()  # the same bits
    elif isinstance(a, np.ndarray):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)
    else:
        assert a == b


def test_async_file_loads_as_the_synchronous_one(saver, tmp_path):
    model, opt = _state(0)
    state = {"model": model.state_dict(), "optimizer": opt.state_dict(), "rng": ng.get_rng_state(),
             "epoch": 3, "note": "x", "nums": (1, 2.5, None), "arr": np.arange(6, dtype=np.int16)}
    fut = saver.save(state, tmp_path / "a.ckpt")
    ng.save(state, tmp_path / "s.ckpt")
    assert fut.result(timeout=60) is None
    _assert_same(ng.load(tmp_path / "a.ckpt"), ng.load(tmp_path / "s.ckpt"))


@pytest.mark.skipif(not hasattr(os, "getpriority"), reason="no os.getpriority on this platform")
def test_the_saver_runs_below_the_callers_priority(saver, tmp_path):
    # a save answered means the saver is past its start-up, where it lowers its priority
    saver.save({"x": np.ones(3)}, tmp_path / "n.ckpt").result(timeout=60)
    mine = os.getpriority(os.PRIO_PROCESS, os.getpid())
    assert os.getpriority(os.PRIO_PROCESS, saver.pid) == min(19, mine + 10)
    if saver._committer is not None and sys.platform.startswith("linux"):
        # what h5py writes (here: compressed) goes through the saver's thread, at its own nice +10
        saver.save({"x": np.ones(3)}, tmp_path / "z.ckpt", compression="gzip").result(timeout=60)
        assert os.getpriority(os.PRIO_PROCESS, saver.native_id) == min(19, mine + 10)
        assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == mine   # the caller's thread kept its own


def test_the_state_is_copied_when_save_returns(saver, tmp_path):
    w = ng.tensor(np.arange(12, dtype=np.float32).reshape(3, 4))
    arr = np.ones(5)
    fut = saver.save({"w": w, "a": arr}, tmp_path / "c.ckpt")
    w.array[...] = -1.0  # written after the call: must not reach the file
    arr[...] = 7.0
    fut.result(timeout=60)
    got = ng.load(tmp_path / "c.ckpt")
    np.testing.assert_array_equal(got["w"].numpy(), np.arange(12, dtype=np.float32).reshape(3, 4))
    np.testing.assert_array_equal(got["a"], np.ones(5))


def test_queued_saves_of_one_path_coalesce_to_the_newest(saver, tmp_path):
    path = tmp_path / "last.ckpt"
    futs = [saver.save({"step": i, "w": ng.full((50,), float(i))}, path) for i in range(30)]
    saver.wait()
    assert all(f.done() and f.exception() is None for f in futs)
    got = ng.load(path)
    assert got["step"] == 29
    np.testing.assert_array_equal(got["w"].numpy(), np.full(50, 29.0, np.float32))


def test_unsupported_values_raise_at_the_call(saver, tmp_path):
    with pytest.raises(TypeError, match=r"'model' -> 'bad'"):
        saver.save({"model": {"bad": object()}}, tmp_path / "x.ckpt")
    with pytest.raises(TypeError, match="must be a path"):
        saver.save({}, object())
    with pytest.raises(FileNotFoundError, match="does not exist"):
        saver.save({}, tmp_path / "no" / "such" / "x.ckpt")
    assert not os.path.exists(tmp_path / "x.ckpt")


def test_a_failed_write_reaches_the_future_and_wait(saver, tmp_path):
    target = tmp_path / "is_a_dir"
    target.mkdir()
    (target / "keep").write_text("x")  # os.replace cannot replace a non-empty directory
    fut = saver.save({"a": 1}, target)
    with pytest.raises(OSError):
        fut.result(timeout=60)
    with pytest.raises(OSError):
        saver.wait()
    saver.wait()  # reported once
    ok = saver.save({"a": 2}, tmp_path / "fine.ckpt")  # the saver still works
    ok.result(timeout=60)
    assert ng.load(tmp_path / "fine.ckpt") == {"a": 2}


@pytest.mark.parametrize("process", [False, True], ids=["commit_process", "saver_process"])
def test_a_killed_saver_process_fails_the_saves_with_its_signal(tmp_path, process):
    s = ng.io.AsyncSaver(process=process)
    try:
        s.save({"a": 1}, tmp_path / "first.ckpt").result(timeout=60)
        os.kill(s.pid, signal.SIGKILL)
        fut = s.save({"a": 2}, tmp_path / "second.ckpt")
        with pytest.raises(RuntimeError, match="SIGKILL"):
            fut.result(timeout=60)
        with pytest.raises(RuntimeError, match="died"):
            s.save({"a": 3}, tmp_path / "third.ckpt").result(timeout=5)
        assert ng.load(tmp_path / "first.ckpt") == {"a": 1}
        assert not os.path.exists(tmp_path / "second.ckpt")
    finally:
        s.close()


@pytest.mark.parametrize("start", ["ng.io.async_save", "ng.io.AsyncSaver(process=True).save"])
def test_a_script_without_a_main_guard_saves_once_and_exit_waits(tmp_path, start):
    """The saver never re-runs the caller's script (multiprocessing's spawn would), and a
    script that exits right after async_save still leaves the complete file."""
    script = tmp_path / "train.py"
    out = tmp_path / "run.ckpt"
    script.write_text(textwrap.dedent(f"""
        import numbagrad as ng
        print("body ran", flush=True)
        w = ng.arange(100000, dtype=ng.float32)
        {start}({{"w": w, "epoch": 7}}, {str(out)!r})
    """))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("body ran") == 1, r.stdout
    got = ng.load(out)
    assert got["epoch"] == 7
    np.testing.assert_array_equal(got["w"].numpy(), np.arange(100000, dtype=np.float32))
    assert time.monotonic() - t0 < 120  # a hang guard, not a timing assertion


def test_the_commit_process_finishes_a_save_when_the_trainer_is_killed(tmp_path):
    """The default saver writes the file before ``save`` returns and the commit process
    makes it durable and renames it: a training process killed right after the call still
    leaves the new checkpoint (no temporary file behind)."""
    out = tmp_path / "k.ckpt"
    script = textwrap.dedent(f"""
        import os, signal
        import numbagrad as ng
        s = ng.io.AsyncSaver()
        s.save({{"w": ng.arange(1000, dtype=ng.float32), "epoch": 1}}, {str(out)!r}).result(timeout=60)
        s.save({{"w": ng.arange(1000, dtype=ng.float32) * 2, "epoch": 2}}, {str(out)!r})
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == -signal.SIGKILL, r.stderr
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # the commit process renames it after its fsync
        if ng.load(out)["epoch"] == 2:
            break
        time.sleep(0.05)
    got = ng.load(out)
    assert got["epoch"] == 2
    np.testing.assert_array_equal(got["w"].numpy(), np.arange(1000, dtype=np.float32) * 2)
    assert [p.name for p in tmp_path.iterdir()] == ["k.ckpt"]


def test_futures_complete_without_a_thread_in_the_training_process(tmp_path):
    """The default saver starts no thread for the files it builds: the answers of its
    commit process are read when a future, ``wait`` or the next ``save`` asks."""
    before = threading.active_count()
    with ng.io.AsyncSaver() as s:
        futs = [s.save({"i": i, "w": ng.full((10,), float(i))}, tmp_path / f"{i % 3}.ckpt") for i in range(9)]
        assert threading.active_count() == before and s.native_id is None
        assert futs[-1].result(timeout=60) is None
        s.wait()
        assert all(f.done() and f.exception() is None for f in futs)
    assert [ng.load(tmp_path / f"{k}.ckpt")["i"] for k in range(3)] == [6, 7, 8]


def test_max_pending_is_checked():
    with pytest.raises(ValueError, match="max_pending"):
        ng.io.AsyncSaver(max_pending=0)


def _cycle():
    a = [1]
    a.append({"x": a})
    return a


@pytest.mark.parametrize("bad", [
    {"a": object()}, {True: 1}, {2 ** 70: 1}, {1.5: 2}, {"a": [1, (2, np.array(["s"]))]},
    {"a": np.zeros(2, [("f", "i4")])}, _cycle(), {"x": {"y": np.int64}}, {"d": collections.defaultdict(int)},
])
def test_snapshot_refuses_exactly_what_save_refuses(tmp_path, bad):
    from numbagrad.io._format import snapshot
    with pytest.raises(TypeError) as sync:
        ng.save(bad, tmp_path / "x.ckpt")
    with pytest.raises(TypeError) as snap:
        snapshot(bad)
    assert str(snap.value) == str(sync.value)


def test_snapshot_keeps_types_and_values(tmp_path):
    from numbagrad.io._format import snapshot
    p = nn.Parameter(ng.randn(3))
    obj = collections.OrderedDict([("p", p), ("t", ng.arange(4)), (7, (1, 2 ** 70, 2.5, 1j, "s", b"b", None)),
                                   ("ba", bytearray(b"xy")), ("g", np.float32(3)), ("bf", ng.ones(2).bfloat16())])
    snap = snapshot(obj)
    ng.save(obj, tmp_path / "a.ckpt")
    ng.save(snap, tmp_path / "b.ckpt")
    _assert_same(ng.load(tmp_path / "a.ckpt"), ng.load(tmp_path / "b.ckpt"))
    assert type(ng.load(tmp_path / "b.ckpt")["p"]) is nn.Parameter


def test_the_commit_process_gets_every_byte_of_many_parts_and_large_files(tmp_path):
    """``Committer.send`` hands over a file in one ``sendmsg`` of its parts where it can;
    more parts than ``IOV_MAX`` and a file larger than the socket's buffer (a blocking
    send, possibly cut short) must still arrive whole and in order."""
    from numbagrad.io import _committer
    rng = np.random.default_rng(0)
    many = [bytes(rng.integers(0, 256, int(rng.integers(1, 40)), dtype=np.uint8)) for _ in range(3000)]
    big = [rng.integers(0, 256, 3 << 20, dtype=np.uint8), b"tail", rng.integers(0, 256, 5 << 20, dtype=np.uint8)]
    c = _committer.Committer()
    try:
        for k, parts in enumerate((many, big, many[:5])):
            path = str(tmp_path / f"f{k}.bin")
            c.send(k, path, parts, sum(len(p) if isinstance(p, bytes) else p.nbytes for p in parts))
            got = []
            while not got:
                got = c.answers(None)
            assert got == [(k, 0, 0)]
            with open(path, "rb") as fh:
                assert fh.read() == b"".join(bytes(p) for p in parts)
    finally:
        c.close()
        c.exit_code()
