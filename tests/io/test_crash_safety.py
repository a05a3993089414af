"""Crash safety of ``numbagrad.save`` to a path (``numbagrad/io/_atomic.py``).

* A writer killed with SIGKILL at a random moment of saving a ~48 MB checkpoint leaves
  at the path either the previous checkpoint or the new one, each complete and exactly
  as saved (``numbagrad.load`` and bitwise comparison), never a partial file. The kill
  delays are drawn uniformly over the save's duration as measured first in the same
  setting. The writers are forked from one child process that imported numbagrad and
  built the tensors once (a ``python -c`` per kill would spend most of the test
  importing); a second test kills fresh ``python -c`` children that save in a loop.
* The temporary file of a killed writer is removed by the next successful save of the
  same target, and not while its writer is alive; other targets' temporary files stay.
* An exception during save (a value the format refuses, raised before writing; an error
  or KeyboardInterrupt injected mid-write in h5py's ``_Writer.dataset``; a failed write in
  the built file's commit) leaves the old file intact and no temporary file behind.
"""
import ctypes
import errno
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import numbagrad as ng
from numbagrad.io import _chunks, _format

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
N_TENSORS, N_FLOATS = 6, 2_000_000          # 6 x 8 MB float32 = 48 MB
N_KILLS = 20
N_KILLS_MAX = 100                           # kills go on until one landed mid-write (see below)
MARK = 16                                   # the first MARK floats of each tensor hold the generation
SEED = 20240615
ENV = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))

_SHARED = f"""
import os, sys
import numpy as np
import numbagrad as ng

def base_arrays():
    return [np.random.default_rng({SEED} + i).standard_normal({N_FLOATS}, dtype=np.float32)
            for i in range({N_TENSORS})]

def state(tensors, gen):
    for t in tensors:
        t.array[:{MARK}] = gen
    return {{"gen": gen, "model": {{f"layer{{i}}.weight": t for i, t in enumerate(tensors)}},
            "extra": [gen, ng.tensor(np.arange(5) * gen), "generation %d" % gen]}}
"""

# Reads a generation number per line on stdin, forks a writer that saves that generation
# to argv[1] and prints the writer's pid, reaps it and prints its wait status.
_FORK_SERVER = _SHARED + """
import io
tensors = [ng.tensor(a) for a in base_arrays()]
ng.save(state(tensors, 0), io.BytesIO())  # kernels loaded once: a writer's time is its save's
print("ready", flush=True)
for line in sys.stdin:
    gen = int(line)
    pid = os.fork()
    if pid == 0:
        try:
            ng.save(state(tensors, gen), sys.argv[1])
        except BaseException:
            os._exit(1)
        os._exit(0)
    print(pid, flush=True)
    print(os.waitpid(pid, 0)[1], flush=True)
"""

# Saves generations first, first+1, ... to argv[1] in a loop, printing each one saved.
_LOOP_WRITER = _SHARED + """
tensors = [ng.tensor(a) for a in base_arrays()]
gen = int(sys.argv[2])
while True:
    ng.save(state(tensors, gen), sys.argv[1])
    print(gen, flush=True)
    gen += 1
"""


class ForkServer:
    def __init__(self, target):
        self.proc = subprocess.Popen([sys.executable, "-c", _FORK_SERVER, str(target)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, env=ENV, cwd=ROOT)
        assert self.proc.stdout.readline().strip() == "ready"

    def start(self, gen):
        """Fork a writer of ``gen``; returns its pid (it is saving from now on)."""
        self.proc.stdin.write(f"{gen}\n")
        self.proc.stdin.flush()
        return int(self.proc.stdout.readline())

    def wait(self):
        """The wait status of the last writer, once the server has reaped it."""
        return int(self.proc.stdout.readline())

    def save(self, gen):
        """An uninterrupted save; returns the seconds from fork to reaped."""
        t = time.perf_counter()
        self.start(gen)
        status = self.wait()
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
        return time.perf_counter() - t

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


@pytest.fixture(scope="module")
def base():
    return [np.random.default_rng(SEED + i).standard_normal(N_FLOATS, dtype=np.float32) for i in range(N_TENSORS)]


def assert_generation(path, base, allowed):
    """``path`` loads as one of the generations ``allowed``, complete and bit-exact;
    returns that generation."""
    ck = ng.load(path)
    gen = ck["gen"]
    assert gen in allowed, f"{path} holds generation {gen}, expected one of {allowed}"
    assert list(ck["model"]) == [f"layer{i}.weight" for i in range(N_TENSORS)]
    for t, a in zip(ck["model"].values(), base):
        got = t.detach().numpy()
        assert got.dtype == np.float32 and got.shape == a.shape
        assert np.all(got[:MARK] == gen) and np.array_equal(got[MARK:], a[MARK:])
    assert ck["extra"][0] == gen and ck["extra"][2] == f"generation {gen}"
    np.testing.assert_array_equal(ck["extra"][1].numpy(), np.arange(5) * gen)
    return gen


def temp_files(folder, target):
    return sorted(p for p in os.listdir(folder) if p.startswith(f".{os.path.basename(target)}.tmp-"))


def test_sigkill_at_random_moments_leaves_the_old_or_the_new_checkpoint(tmp_path, base):
    target = str(tmp_path / "model.ckpt")
    server = ForkServer(target)
    try:
        server.save(0)
        duration = float(np.median([server.save(g) for g in (1, 2, 3)]))
        current = assert_generation(target, base, (3,))
        rng = np.random.default_rng(SEED)
        kept_old = replaced = 0
        killed_pids = set()
        for k in range(N_KILLS_MAX):
            gen = 100 + k
            delay = float(rng.uniform(0.0, duration))
            pid = server.start(gen)
            time.sleep(delay)
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:  # pragma: no cover - the server reaps only after our kill
                pass
            status = server.wait()
            killed = os.WIFSIGNALED(status)
            if killed:
                killed_pids.add(pid)
            else:
                assert os.WEXITSTATUS(status) == 0, (k, status)
            where = f"kill {k} at {delay * 1e3:.0f} ms of a {duration * 1e3:.0f} ms save"
            try:
                got = assert_generation(target, base, (current, gen) if killed else (gen,))
            except AssertionError as e:
                raise AssertionError(f"{where}: {e}") from None
            kept_old += got == current
            replaced += got == gen
            current = got
            # nothing but the target and the temporary files of killed writers
            others = [p for p in os.listdir(tmp_path) if p != "model.ckpt"]
            for p in others:
                assert p.startswith(".model.ckpt.tmp-"), (where, others)
                assert int(p.split(".tmp-")[1].split("-")[0]) in killed_pids, (where, others)
            # at least N_KILLS, and on until a kill has landed mid-write (the temporary file
            # is written in a few ms of a save that takes ~100 from fork to reap)
            if k + 1 >= N_KILLS and kept_old >= N_KILLS // 4 and temp_files(tmp_path, target):
                break
        assert kept_old >= N_KILLS // 4, f"only {kept_old} of {N_KILLS} kills landed before the rename"
        assert temp_files(tmp_path, target), "no kill landed while a temporary file was being written"
        # the next successful save removes what the killed writers left
        server.save(999)
        assert temp_files(tmp_path, target) == []
        assert sorted(os.listdir(tmp_path)) == ["model.ckpt"]
        assert_generation(target, base, (999,))
    finally:
        server.close()


def test_sigkill_of_fresh_processes_saving_in_a_loop(tmp_path, base):
    target = str(tmp_path / "loop.ckpt")
    last = None
    for round_ in range(2):
        first = 1000 * (round_ + 1)
        proc = subprocess.Popen([sys.executable, "-c", _LOOP_WRITER, target, str(first)], stdout=subprocess.PIPE,
                                text=True, env=ENV, cwd=ROOT)
        try:
            saved = [int(proc.stdout.readline()) for _ in range(2)]  # two complete saves, then kill mid-loop
            time.sleep(np.random.default_rng(round_).uniform(0.0, 0.1))
        finally:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
        seen = [int(x) for x in proc.stdout.read().split()]
        last = (saved + seen)[-1]
        assert_generation(target, base, (last, last + 1))
    ng.save({"gen": -1}, target)  # in this process: removes the killed writers' temporary files
    assert os.listdir(tmp_path) == ["loop.ckpt"]


def test_temp_file_of_a_killed_writer_is_removed_by_the_next_save(tmp_path):
    target = tmp_path / "c.ckpt"
    ng.save({"v": 1}, target)
    code = ("import sys, time\n"
            "from numbagrad.io import atomic_path\n"
            "with atomic_path(sys.argv[1]) as tmp:\n"
            "    open(tmp, 'wb').write(b'half a checkpoint')\n"
            "    print(tmp, flush=True)\n"
            "    time.sleep(120)\n")
    proc = subprocess.Popen([sys.executable, "-c", code, str(target)], stdout=subprocess.PIPE, text=True,
                            env=ENV, cwd=ROOT)
    try:
        tmp = proc.stdout.readline().strip()
        assert os.path.dirname(tmp) == str(tmp_path) and os.path.basename(tmp).startswith(".c.ckpt.tmp-")
        ng.save({"v": 2}, target)  # the writer is alive: its file is left alone
        assert os.path.exists(tmp)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()  # reaped: its pid is no longer alive
    dead = proc.pid
    other = tmp_path / f".other.ckpt.tmp-{dead}-00000000"  # another target's: never touched
    other.write_bytes(b"x")
    ng.save({"v": 3}, target)
    assert not os.path.exists(tmp)
    assert sorted(os.listdir(tmp_path)) == [".other.ckpt.tmp-%d-00000000" % dead, "c.ckpt"]
    assert ng.load(target) == {"v": 3}


@pytest.fixture
def old_checkpoint(tmp_path):
    old = {"w": ng.tensor(np.arange(10, dtype=np.float32)), "step": 5}
    ng.save(old, tmp_path / "c.ckpt")
    return old


def _assert_old_intact(tmp_path, old):
    back = ng.load(tmp_path / "c.ckpt")
    assert back["step"] == old["step"]
    np.testing.assert_array_equal(back["w"].numpy(), old["w"].numpy())
    assert os.listdir(tmp_path) == ["c.ckpt"]


def _big_state(n=4):
    return {"model": {f"l{i}.weight": ng.tensor(np.full(1000, i, np.float32)) for i in range(n)},
            "optimizer": {"state": {0: {"step": 3}}, "param_groups": [{"lr": 0.1}]}}


def test_refused_value_deep_inside_leaves_old_file_and_no_temp(tmp_path, old_checkpoint):
    bad = _big_state()
    bad["optimizer"]["state"][0]["exp_avg"] = [1.0, {"x": object()}]
    with pytest.raises(TypeError, match=r"'optimizer' -> 'state' -> 0 -> 'exp_avg' -> 1 -> 'x'"):
        ng.save(bad, tmp_path / "c.ckpt")
    _assert_old_intact(tmp_path, old_checkpoint)


@pytest.mark.parametrize("exc", [RuntimeError("disk on fire"), KeyboardInterrupt()])
def test_exception_mid_write_leaves_old_file_and_no_temp(tmp_path, old_checkpoint, monkeypatch, exc):
    """An exception in h5py's writer (``_Writer.dataset``) once two datasets are in the
    temporary file (every file through h5py here)."""
    calls = []
    real = _format._Writer.dataset
    monkeypatch.setattr(_format, "_built", lambda obj, checksum: None)

    def failing(self, g, name, arr, chunk_bytes):
        calls.append(name)
        if len(calls) == 3:
            raise exc
        return real(self, g, name, arr, chunk_bytes)

    monkeypatch.setattr(_format._Writer, "dataset", failing)
    with pytest.raises(type(exc)):
        ng.save(_big_state(), tmp_path / "c.ckpt")
    assert len(calls) == 3
    _assert_old_intact(tmp_path, old_checkpoint)
    # and a failed first save of a new target leaves nothing at all
    calls.clear()
    with pytest.raises(type(exc)):
        ng.save(_big_state(), tmp_path / "new.ckpt")
    assert os.listdir(tmp_path) == ["c.ckpt"]
    monkeypatch.undo()
    ng.save(_big_state(), tmp_path / "c.ckpt")  # the writer still works afterwards
    assert list(ng.load(tmp_path / "c.ckpt")["model"]) == [f"l{i}.weight" for i in range(4)]


@pytest.mark.skipif(not _chunks.HAVE_COMMIT, reason="no libc commit kernel here")
def test_a_failed_commit_leaves_old_file_and_no_temp(tmp_path, old_checkpoint, monkeypatch):
    """The built file's commit (one call without the GIL, ``_chunks._commit``) failing
    after part of the temporary file is written: an OSError naming the step and the
    errno, the old file intact, no temporary file."""
    def failing(names, table, flags, status):
        with open(ctypes.string_at(int(names[0])).decode(), "wb") as fh:
            fh.write(b"half a checkpoint")
        status[0], status[1] = 2, errno.EIO

    monkeypatch.setattr(_chunks, "_commit", failing)
    with pytest.raises(OSError, match="write of the temporary file failed") as e:
        ng.save(_big_state(), tmp_path / "c.ckpt")
    assert e.value.errno == errno.EIO
    _assert_old_intact(tmp_path, old_checkpoint)
    monkeypatch.undo()
    ng.save(_big_state(), tmp_path / "c.ckpt")  # the writer still works afterwards
    assert list(ng.load(tmp_path / "c.ckpt")["model"]) == [f"l{i}.weight" for i in range(4)]
