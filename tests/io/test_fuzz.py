"""Fuzzing ``numbagrad.load``: a damaged or foreign file never loads as a different value.

A representative checkpoint (a model ``state_dict`` with float32, float16, int64 and bool
tensors, a Parameter, optimizer-like state keyed by ints, nested lists and tuples, str,
bytes, a big int, None, 0-d tensors, a NumPy array and scalar) is saved once. Each seed
then damages a copy in one of five ways:

* ``flip_any``: XOR 1-8 random bytes anywhere in the file with a random non-zero byte;
* ``flip_data``: the same inside the raw bytes of one tensor's chunk, or of the 4-byte
  fletcher32 checksum stored after it (found with ``bytes.find`` of the array's bytes);
* ``flip_attrs``: the same inside the stored bytes of one attribute value (the JSON item
  lists, str values, big ints, floats; found by reading the clean file with h5py and
  ``bytes.find``), wherever HDF5 keeps them: object headers, the fractal heap of a group
  with many attributes, or a global heap (``GCOL``) if strings were variable-length;
* ``truncate``: cut the file at a random length (the first such seed at 0: empty file);
* ``zero_run``: overwrite 1-4096 bytes with zeros (a lost block).

``numbagrad.load`` of the damaged copy must either return a value equal to what was
saved (same types, same keys in the same order, arrays equal in dtype, shape and bits)
or raise :class:`~numbagrad.io.CheckpointError` whose message names the file. Any other
exception, or a different value, fails the test with the seed, the mode and the bytes
touched.

A bug in the HDF5 C library (a segfault, an endless loop) would take the test process
down with it, so the loads run in a worker process: this file run as a script
(``python tests/io/test_fuzz.py WORKDIR FIRST STOP``), which prints one JSON line as it
starts each seed and one with the verdict. A worker that dies, or that hangs past
``CASE_TIMEOUT_S`` (``faulthandler`` ends it), fails the test with the seed it was on;
the parent restarts a worker after that seed, so one crash does not hide the rest.

Foreign files are checked in this process: a PNG, a pickle, an HDF5 file from plain
h5py, a text file and an empty file raise ``CheckpointError``; a nonexistent path raises
``FileNotFoundError`` and a directory ``IsADirectoryError`` -- path problems are the OS
errors ``open()`` and ``torch.load`` raise, ``CheckpointError`` is for contents.
"""
import collections
import json
import os
import pickle
import subprocess
import sys

import numpy as np

N_SEEDS = 2000
MODES = ("flip_any", "flip_data", "flip_attrs", "truncate", "zero_run")
CASE_TIMEOUT_S = 20.0
MAX_WORKER_DEATHS = 5
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


# ---- the checkpoint, the damage and the comparison (shared by the test and the worker) ----
def make_checkpoint():
    """The representative checkpoint: deterministic, about 10 KB of data."""
    import numbagrad as ng
    from numbagrad import nn
    r = np.random.default_rng(1234)
    model = collections.OrderedDict()
    model["embed.weight"] = ng.tensor(r.standard_normal((50, 16), dtype=np.float32))
    model["layers.0.weight"] = ng.tensor(r.standard_normal((32, 16), dtype=np.float32))
    model["layers.0.bias"] = ng.tensor(r.standard_normal(32, dtype=np.float32))
    model["norm.weight"] = ng.tensor(r.standard_normal(32).astype(np.float16))
    model["norm.running_mean"] = ng.tensor(r.standard_normal(32).astype(np.float16))
    model["norm.num_batches_tracked"] = ng.tensor(np.array(1234567, dtype=np.int64))   # 0-d
    model["mask"] = ng.tensor(r.random((8, 8)) > 0.5)
    model["token_ids"] = ng.tensor(r.integers(-(1 << 40), 1 << 40, 20, dtype=np.int64))
    model["empty"] = ng.tensor(np.zeros((0, 4), np.float32))
    model["head.weight"] = nn.Parameter(ng.tensor(r.standard_normal((10, 16), dtype=np.float32)))
    state = {}
    for i in range(2):
        state[i] = {"step": ng.tensor(np.array(17.0, dtype=np.float32)),
                    "exp_avg": ng.tensor(r.standard_normal(16, dtype=np.float32)),
                    "exp_avg_sq": ng.tensor(r.random(16, dtype=np.float32))}
    optimizer = {"state": state,
                 "param_groups": [{"lr": 1e-3, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.01,
                                   "amsgrad": False, "maximize": False, "foreach": None, "params": [0, 1]}]}
    notes = " ".join(f"line {i}: lr=0.001 loss={1 / (i + 1):.6f}" for i in range(200))  # > 4 KiB
    return {"model": model, "optimizer": optimizer, "epoch": 7, "run": "résumé-run 1", "notes": notes,
            "nul_end": "ends in NUL\x00",
            "big": (1 << 80) + 12345, "nothing": None, "blob": b"\x00\x01raw\xff",
            "nested": [1, (2.5, "x", [None, True, -3]), {"k": [0.1, 0.2]}, []],
            "grad_tensor": ng.tensor(r.standard_normal(4, dtype=np.float32), requires_grad=True),
            "array": r.integers(0, 100, (2, 3)), "npscalar": np.float32(1.5)}


def _arrays(obj):
    """Every non-empty array in ``obj`` as C-contiguous NumPy bytes."""
    from numbagrad import Tensor
    if isinstance(obj, dict):
        for v in obj.values():
            yield from _arrays(v)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            yield from _arrays(v)
    elif isinstance(obj, (Tensor, np.ndarray)):
        a = np.ascontiguousarray(_numpy(obj))
        if a.size:
            yield a


def data_regions(data, expected):
    """``[start, stop)`` of each array's raw bytes in the file, plus the 4-byte fletcher32
    checksum HDF5 stores after a filtered chunk. Arrays whose bytes are not unique in the
    file (e.g. a 0-d value that also appears elsewhere) are skipped."""
    regions = []
    for a in _arrays(expected):
        b = a.tobytes()
        i = data.find(b)
        if len(b) >= 8 and i >= 0 and data.find(b, i + 1) < 0:
            regions.append((i, i + len(b) + 4))
    return regions


def attribute_regions(path, data):
    """``[start, stop)`` of the stored bytes of every attribute value of at least 4 bytes
    in the clean file at ``path`` (first occurrence in ``data``)."""
    import h5py
    out = []

    def visit(obj):
        for name in obj.attrs:
            v = obj.attrs[name]
            b = v if isinstance(v, bytes) else v.encode() if isinstance(v, str) else np.asarray(v).tobytes()
            i = data.find(b) if len(b) >= 4 else -1
            if i >= 0:
                out.append((i, i + len(b)))
    with h5py.File(path, "r") as h:
        visit(h)
        h.visititems(lambda _, o: visit(o))
    return out


def damage(data, seed, regions, attrs):
    """``(mode, damaged bytes, description)`` for ``seed`` (deterministic)."""
    r = np.random.default_rng([seed, 2024])
    mode = MODES[seed % len(MODES)]
    if mode == "truncate":
        n = 0 if seed < len(MODES) else int(r.integers(0, len(data)))
        return mode, data[:n], f"truncated to {n} of {len(data)} bytes"
    buf = bytearray(data)
    if mode == "zero_run":
        n = int(r.integers(1, 4097))
        at = int(r.integers(0, len(data) - 1))
        buf[at:at + n] = bytes(len(buf[at:at + n]))
        return mode, bytes(buf), f"zeroed bytes [{at}, {at + n})"
    lo, hi = 0, len(data)
    if mode == "flip_data":
        lo, hi = regions[int(r.integers(0, len(regions)))]
    elif mode == "flip_attrs":
        lo, hi = attrs[int(r.integers(0, len(attrs)))]
    flips = []
    for _ in range(int(r.integers(1, 9))):
        at, x = int(r.integers(lo, hi)), int(r.integers(1, 256))
        buf[at] ^= x
        flips.append((at, x))
    return mode, bytes(buf), "xor " + ", ".join(f"@{at}^{x:#04x}" for at, x in flips) + f" in [{lo}, {hi})"


def _numpy(t):
    return t.detach().numpy() if hasattr(t, "detach") else np.asarray(t)


def difference(got, want, path="root"):
    """None when ``got`` equals ``want`` exactly, else where and how they differ."""
    from numbagrad import Tensor
    if type(got) is not type(want):
        return f"{path}: {type(got).__name__} instead of {type(want).__name__}"
    if isinstance(want, dict):
        if list(got) != list(want):
            return f"{path}: keys {list(got)!r} instead of {list(want)!r}"
        for k in want:
            d = difference(got[k], want[k], f"{path}[{k!r}]")
            if d:
                return d
        return None
    if isinstance(want, (list, tuple)):
        if len(got) != len(want):
            return f"{path}: length {len(got)} instead of {len(want)}"
        for i, (g, w) in enumerate(zip(got, want)):
            d = difference(g, w, f"{path}[{i}]")
            if d:
                return d
        return None
    if isinstance(want, (Tensor, np.ndarray, np.generic)):
        if isinstance(want, Tensor) and got.requires_grad != want.requires_grad:
            return f"{path}: requires_grad {got.requires_grad} instead of {want.requires_grad}"
        g, w = np.asarray(_numpy(got)), np.asarray(_numpy(want))
        if g.dtype != w.dtype or g.shape != w.shape or g.tobytes() != w.tobytes():
            return f"{path}: array {g.dtype}{g.shape} differs from {w.dtype}{w.shape}"
        return None
    if isinstance(want, float):
        return None if got.hex() == want.hex() else f"{path}: {got!r} instead of {want!r}"
    return None if got == want else f"{path}: {got!r} instead of {want!r}"


# ---- the worker: python tests/io/test_fuzz.py WORKDIR FIRST STOP ---------------------------
def _worker(workdir, first, stop):
    import faulthandler
    import numbagrad as ng
    from numbagrad.io import CheckpointError

    expected = make_checkpoint()
    ref = os.path.join(workdir, "reference.h5")
    with open(ref, "rb") as fh:
        data = fh.read()
    regions, attrs = data_regions(data, expected), attribute_regions(ref, data)
    for seed in range(first, stop):
        mode, damaged, what = damage(data, seed, regions, attrs)
        path = os.path.join(workdir, f"damaged-{seed}.h5")
        with open(path, "wb") as fh:
            fh.write(damaged)
        print(json.dumps({"start": seed, "mode": mode, "what": what}), flush=True)
        faulthandler.dump_traceback_later(CASE_TIMEOUT_S, exit=True)
        try:
            got = ng.load(path)
        except CheckpointError as e:
            verdict = ("error" if e.path == path and path in str(e)
                       else f"CheckpointError that does not name the file: {e}")
        except Exception as e:  # noqa: BLE001 - anything else is the finding
            verdict = f"{type(e).__name__} instead of CheckpointError: {str(e)[:300]}"
        else:
            d = difference(got, expected)
            verdict = "equal" if d is None else f"loaded a different value: {d}"
        faulthandler.cancel_dump_traceback_later()
        os.remove(path)
        print(json.dumps({"seed": seed, "mode": mode, "what": what, "verdict": verdict}), flush=True)


def _run_workers(workdir, seeds):
    """Run the seeds in workers; ``(results by seed, deaths)``. A worker that dies is
    restarted after the seed it died on (at most ``MAX_WORKER_DEATHS`` times)."""
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    results, deaths, first = {}, [], seeds.start
    while first < seeds.stop:
        proc = subprocess.run([sys.executable, os.path.abspath(__file__), str(workdir), str(first),
                               str(seeds.stop)], cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=600)
        current = None
        for line in proc.stdout.splitlines():
            rec = json.loads(line)
            if "start" in rec:
                current = rec
            else:
                results[rec["seed"]] = rec
                current = None
        if proc.returncode == 0 and current is None:
            break
        if current is None:  # died outside a case: nothing to attribute it to
            raise AssertionError(f"fuzz worker exited {proc.returncode}:\n{proc.stderr[-4000:]}")
        how = ("hung (ended by faulthandler)" if "Timeout" in proc.stderr else
               f"died with signal {-proc.returncode}" if proc.returncode < 0 else f"exited {proc.returncode}")
        deaths.append(dict(current, how=how, stderr=proc.stderr[-1500:]))
        if len(deaths) > MAX_WORKER_DEATHS:
            break
        first = current["start"] + 1
    return results, deaths


# ---- tests --------------------------------------------------------------------------------
def test_fuzzed_checkpoints_load_equal_or_raise_checkpoint_error(tmp_path):
    import numbagrad as ng
    expected = make_checkpoint()
    ref = tmp_path / "reference.h5"
    ng.save(expected, ref)
    assert difference(ng.load(ref), expected) is None
    data = ref.read_bytes()
    assert len(data_regions(data, expected)) >= 10, "the data-region mode finds too few arrays"
    assert len(attribute_regions(ref, data)) >= 20, "the attribute mode finds too few values"

    results, deaths = _run_workers(tmp_path, range(N_SEEDS))
    bad = [r for r in results.values() if r["verdict"] not in ("equal", "error")]
    report = [f"seed {r['seed']} ({r['mode']}, {r['what']}): {r['verdict']}" for r in bad]
    report += [f"seed {d['start']} ({d['mode']}, {d['what']}): worker {d['how']}\n{d['stderr']}"
               for d in deaths]
    assert not report, f"{len(report)} of {N_SEEDS} damaged files misbehaved:\n" + "\n".join(report[:40])
    assert len(results) == N_SEEDS
    by_mode = collections.Counter((r["mode"], r["verdict"]) for r in results.values())
    # every mode ran, and damage to array bytes or strings was caught rather than ignored
    assert all(by_mode[(m, "equal")] + by_mode[(m, "error")] >= N_SEEDS // len(MODES) for m in MODES)
    assert by_mode[("flip_data", "equal")] == 0, by_mode
    assert by_mode[("truncate", "equal")] == 0, by_mode


def _assert_checkpoint_error(path, *words):
    import numbagrad as ng
    from numbagrad.io import CheckpointError
    try:
        ng.load(path)
    except CheckpointError as e:
        assert e.path == str(path) and str(path) in str(e), str(e)
        assert all(w in str(e) for w in words), str(e)
        return e
    raise AssertionError(f"{path} loaded without error")


def test_foreign_files(tmp_path):
    png = tmp_path / "image.png"
    png.write_bytes(b"\x89PNG\r\n\x1a\n" + b"\x00\x00\x00\rIHDR" + os.urandom(2000))
    _assert_checkpoint_error(png, "not a readable HDF5 file")

    pkl = tmp_path / "state.pt"
    pkl.write_bytes(pickle.dumps({"weight": np.ones(3), "step": 3}))
    _assert_checkpoint_error(pkl, "not a readable HDF5 file")

    txt = tmp_path / "notes.txt"
    txt.write_text("epoch 3: loss 0.25\n" * 50)
    _assert_checkpoint_error(txt)

    empty = tmp_path / "empty.h5"
    empty.write_bytes(b"")
    _assert_checkpoint_error(empty)

    import h5py
    plain = tmp_path / "plain.h5"
    with h5py.File(plain, "w") as h:
        h.create_dataset("weight", data=np.arange(12.0).reshape(3, 4))
        h.attrs["format"] = "something.else"
    _assert_checkpoint_error(plain, "not a numbagrad checkpoint")
    with h5py.File(plain, "w") as h:  # no attributes at all
        h.create_dataset("weight", data=np.arange(12.0))
    _assert_checkpoint_error(plain, "not a numbagrad checkpoint")


def test_missing_path_and_directory_are_os_errors(tmp_path):
    import pytest
    import numbagrad as ng
    with pytest.raises(FileNotFoundError):
        ng.load(tmp_path / "nope.h5")
    with pytest.raises(IsADirectoryError):
        ng.load(tmp_path)


if __name__ == "__main__":
    _worker(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
