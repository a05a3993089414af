"""Checkpoints: ``numbagrad.save``/``load`` (HDF5, fletcher32 on and off) vs
``torch.save``/``load`` of the same float32 state dict, in the same run, to a temporary
folder on local disk.

Two state dicts of about 100M float32 parameters (~400 MB):

* ``flat``: 200 tensors of 500k floats;
* ``gpt``: a GPT-2-style mix, 8 blocks of width 768 and a 50257 x 768 token embedding
  (96M parameters in 100 tensors, from 768 floats to one 154 MB tensor that numbagrad
  stores in several chunks).

Each save writes the same path again, as a training loop saving ``last.ckpt`` does:
``numbagrad.save`` writes a temporary file, fsyncs it and renames it over the target
(crash-safe); ``torch.save`` truncates and rewrites the file in place without fsync. The
fsync that torch leaves out is measured apart into ``extra_info["fsync_after_save_s"]``.
Loads read a file just written, so both frameworks read from the page cache: the figures
are memory-to-memory rates of the two formats, not of the disk. numbagrad's load reads
and verifies chunks of 1 MiB and more on a worker thread while it walks the file's groups,
then on two; ``torch.load`` reads on one, so on a busy machine
numbagrad's figure moves more than torch's. GB/s = state bytes /
median (``extra_info["write_GBps"]`` / ``["read_GBps"]``, and ``*_best`` from the fastest
round). Every load is checked equal to what was saved. The first ``numbagrad`` call of
each test (JIT compile or cache load of the fletcher32 kernel) is timed apart into
``extra_info["first_call_s"]``. Bars (issue 15): with checksums, numbagrad saves and
loads at least as fast as torch.

A third row is the main job's epoch (``python -m numbagrad``: the 64-128-64-10 MLP and
its Adam on the digits; training loop and test accuracy as ``main()`` runs them, without
the progress bar) with its per-epoch checkpoint of the whole run state (``run_state``:
model, optimizer, loader position, RNG, losses). Each timed unit is the save call and
then the next epoch, during which a background write runs, so what a save adds to the
job is the unit's median over the plain epoch's, less one. Four variants run
interleaved (plain, ``AsyncSaver.save`` as the main job does (the state sent to its
saver process), synchronous ``numbagrad.save``, ``torch.save`` of the same state as
torch tensors, converted outside the timing), 15 rounds each. numbagrad's column is the async unit, torch's the
torch.save unit; the row's note has the overheads against the issue's bar (< 1%).
"""
import os
import time

import numpy as np
import pytest

import _perfkit as kit

ROUNDS = 1 if kit.SMOKE else 3
GPT = dict(vocab=50257, ctx=1024, d=768, layers=8) if not kit.SMOKE else dict(vocab=97, ctx=16, d=8, layers=2)
FLAT = (20, 1000) if kit.SMOKE else (200, 500_000)


def _gpt_shapes(vocab, ctx, d, layers):
    shapes = {"wte.weight": (vocab, d), "wpe.weight": (ctx, d)}
    for i in range(layers):
        p = f"h.{i}."
        shapes.update({p + "ln_1.weight": (d,), p + "ln_1.bias": (d,),
                       p + "attn.c_attn.weight": (d, 3 * d), p + "attn.c_attn.bias": (3 * d,),
                       p + "attn.c_proj.weight": (d, d), p + "attn.c_proj.bias": (d,),
                       p + "ln_2.weight": (d,), p + "ln_2.bias": (d,),
                       p + "mlp.c_fc.weight": (d, 4 * d), p + "mlp.c_fc.bias": (4 * d,),
                       p + "mlp.c_proj.weight": (4 * d, d), p + "mlp.c_proj.bias": (d,)})
    shapes.update({"ln_f.weight": (d,), "ln_f.bias": (d,)})
    return shapes


SHAPES = {"flat": {f"layers.{i}.weight": (FLAT[1],) for i in range(FLAT[0])}, "gpt": _gpt_shapes(**GPT)}
NBYTES = {k: 4 * sum(int(np.prod(s)) for s in v.values()) for k, v in SHAPES.items()}
_TITLES = {"flat": f"{FLAT[0]} x {FLAT[1] // 1000}k f32",
           "gpt": f"GPT-2-style mix, {GPT['layers']} blocks d{GPT['d']}, {len(SHAPES['gpt'])} tensors"}
for _s in ("flat", "gpt"):
    _what = f"{_TITLES[_s]} ({NBYTES[_s] / 4e6:.0f}M params, {NBYTES[_s] / 1e6:.0f} MB)"
    kit._workload(f"ckpt_save_{_s}", f"save {_what}, fletcher32", kind="bytes", work=NBYTES[_s],
                  bar=("ratio", "<=", 1.0), note="ng: temp file + fsync + rename; torch: in place, no fsync")
    kit._workload(f"ckpt_load_{_s}", f"load {_what}, fletcher32 checked", kind="bytes", work=NBYTES[_s],
                  bar=("ratio", "<=", 1.0), note="file in the page cache (just written)")
kit._workload("ckpt_save_flat_nock", f"save {_TITLES['flat']}, no checksum", kind="bytes", work=NBYTES["flat"],
              note="numbagrad checksum=False; torch: same run as the row with checksums")
kit._workload("ckpt_load_flat_nock", f"load {_TITLES['flat']}, no checksum", kind="bytes", work=NBYTES["flat"],
              note="numbagrad checksum=False; torch: same run as the row with checksums")
kit._workload("ckpt_digits_epoch", "digits main job: epoch + its checkpoint (run_state)",
              note="(filled in by the test: what the save adds to an epoch)")

CASES = [("flat", "numbagrad"), ("flat", "numbagrad_nochecksum"), ("flat", "torch"),
         ("gpt", "numbagrad"), ("gpt", "torch")]


@pytest.fixture(scope="module")
def arrays():
    r = np.random.default_rng(kit.SEED)
    return {s: {k: r.standard_normal(shape, dtype=np.float32) for k, shape in shapes.items()}
            for s, shapes in SHAPES.items()}


def _state_dict(framework, arrays):
    if framework == "torch":
        torch = pytest.importorskip("torch")
        return {k: torch.from_numpy(a) for k, a in arrays.items()}
    import numbagrad as ng
    return {k: ng.from_numpy(a) for k, a in arrays.items()}


def _save_load(framework):
    if framework == "torch":
        import torch
        return torch.save, torch.load
    import numbagrad as ng
    checksum = framework == "numbagrad"
    return (lambda obj, f: ng.save(obj, f, checksum=checksum)), ng.load


def _fsync_s(path):
    t = time.perf_counter()
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    return time.perf_counter() - t


@pytest.mark.benchmark(**kit.bench_mark())
@pytest.mark.parametrize("op", ("save", "load"))
@pytest.mark.parametrize("state,framework", CASES)
def test_checkpoint(benchmark, tmp_path, arrays, state, framework, op):
    fw = "torch" if framework == "torch" else "numbagrad"
    key = f"ckpt_{op}_{state}" + ("_nock" if framework == "numbagrad_nochecksum" else "")
    sd = _state_dict(framework, arrays[state])
    save, load = _save_load(framework)
    path = str(tmp_path / ("c.pt" if fw == "torch" else "c.ckpt"))
    benchmark.group = key
    benchmark.extra_info.update(framework=framework, workload=kit.WORKLOADS[key]["title"], bytes=NBYTES[state],
                                tensors=len(sd), folder=str(tmp_path))
    t = time.perf_counter()
    save(sd, path)
    if op == "save":
        benchmark.extra_info["first_call_s"] = time.perf_counter() - t
        if fw == "torch":
            benchmark.extra_info["fsync_after_save_s"] = _fsync_s(path)
        benchmark.pedantic(save, args=(sd, path), rounds=ROUNDS, iterations=1, warmup_rounds=1)
    else:
        t = time.perf_counter()
        load(path)
        benchmark.extra_info["first_call_s"] = time.perf_counter() - t
        benchmark.pedantic(load, args=(path,), rounds=ROUNDS, iterations=1, warmup_rounds=1)
    stats = getattr(benchmark, "stats", None)
    if stats is not None:  # None when benchmarks are disabled
        s = stats.stats
        rate = "write" if op == "save" else "read"
        benchmark.extra_info[f"{rate}_GBps"] = NBYTES[state] / s.median / 1e9
        benchmark.extra_info[f"{rate}_GBps_best"] = NBYTES[state] / s.min / 1e9
        kit.record(key, fw, s.median, s.min, s.rounds)
        if fw == "torch" and state == "flat":  # torch's figure for the no-checksum row too
            kit.record(key + "_nock", fw, s.median, s.min, s.rounds)
    back = load(path)
    assert list(back) == list(sd)
    for k, a in arrays[state].items():
        got = kit.to_numpy(back[k])
        assert got.dtype == np.float32 and np.array_equal(got, a), k


def test_checkpoint_every_epoch_digits(tmp_path):
    """One epoch of the main job with and without its per-epoch checkpoint, interleaved
    (plain, async, sync, torch, plain, ...) so that all four medians come from the same
    minutes of a noisy machine."""
    import numbagrad as ng
    from numbagrad import optim
    from numbagrad.data import DataLoader, TensorDataset, load_digits, train_test_split
    from numbagrad.examples.train_digits import accuracy, build_model, run_state
    from numbagrad.nn import functional as F
    kit.pin_threads()
    saver = ng.io.AsyncSaver()  # first, as the main job does: its start-up overlaps the set-up
    ng.manual_seed(0)
    X, y = load_digits()
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.2, seed=0)
    loader = DataLoader(TensorDataset(X_train, y_train), batch_size=32, shuffle=True)
    model = build_model()
    opt = optim.Adam(model.parameters(), lr=1e-3)
    losses = []

    def epoch():  # train_digits.main's epoch, without the progress bar
        model.train()
        for xb, yb in loader:
            loss = F.cross_entropy(model(xb), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
            loss.item()
        losses.append(1.0)
        accuracy(model, X_test, y_test)

    state = [None]  # the run state to save, built outside the timing (the same work for every variant)
    variants = {"plain": lambda: None,
                "async": lambda: saver.save(state[0], tmp_path / "async.ckpt"),
                "sync": lambda: ng.save(state[0], tmp_path / "sync.ckpt")}
    torch = None
    try:
        import torch
    except ImportError:
        pass
    if torch is not None:
        def to_torch(v):
            if isinstance(v, dict):
                return {k: to_torch(x) for k, x in v.items()}
            if isinstance(v, (list, tuple)):
                return type(v)(to_torch(x) for x in v)
            return torch.from_numpy(kit.to_numpy(v).copy()) if isinstance(v, ng.Tensor) else v

        def torch_save():  # the same state as torch tensors
            torch.save(state[0], tmp_path / "torch.pt")
        variants["torch"] = torch_save
    state[0] = run_state(model, opt, loader, 0, losses)
    variants["sync"]()
    saver.save(state[0], tmp_path / "async.ckpt").result()  # the savers are up
    epoch()  # JIT compile / cache load
    rounds = 1 if kit.SMOKE else 15
    unit = {k: [] for k in variants}   # the save call, then the next epoch (an async write runs during it)
    call = {k: [] for k in variants}   # the save call alone: what the loop waits for
    saved = {}                         # the epoch number each variant saved last
    for _ in range(rounds):
        for name, save in variants.items():
            state[0] = run_state(model, opt, loader, len(losses), losses)
            if name == "torch":
                state[0] = to_torch(state[0])
            saved[name] = len(losses)
            t0 = time.perf_counter()
            save()
            t1 = time.perf_counter()
            epoch()
            t2 = time.perf_counter()
            unit[name].append(t2 - t0)
            call[name].append(t1 - t0)
    saver.wait()
    saver.close()
    med = {k: float(np.median(v)) for k, v in unit.items()}
    over = {k: med[k] / med["plain"] - 1 for k in med}
    key = "ckpt_digits_epoch"
    kit.record(key, "numbagrad", med["async"], min(unit["async"]), rounds)
    if "torch" in med:
        kit.record(key, "torch", med["torch"], min(unit["torch"]), rounds)
    kit.WORKLOADS[key]["note"] = (
        f"plain epoch {med['plain'] * 1e3:.1f} ms; per-epoch save adds: AsyncSaver {100 * over['async']:+.1f}% "
        f"(call {np.median(call['async']) * 1e6:.0f} us; bar < 1%: {'met' if over['async'] < 0.01 else 'MISSED'}), "
        f"ng.save {100 * over['sync']:+.1f}%"
        + (f", torch.save {100 * over['torch']:+.1f}%" if "torch" in over else ""))
    for name in ("async", "sync"):
        back = ng.load(tmp_path / f"{name}.ckpt")
        assert list(back["model"]) == list(model.state_dict())
        assert back["epoch"] == saved[name], (name, back["epoch"], saved[name])


kit._workload("ckpt_digits_job", "digits main job, whole run (python -m numbagrad --quiet), checkpoint every epoch",
              note="(filled in by the test: what the checkpoints add to the job's wall time)")


def test_checkpoint_every_epoch_digits_whole_job(tmp_path):
    """The issue's bar read literally: the main job as a user runs it (``python -m
    numbagrad --quiet``: start-up, 20 epochs with early stopping, the test accuracy), with
    and without ``--checkpoint PATH`` (synchronous) and ``--checkpoint PATH
    --async-checkpoint``; fresh processes, interleaved, wall time from spawn to exit.
    numbagrad's column is the async job; the note has the plain and synchronous jobs."""
    import subprocess
    import sys
    env = dict(os.environ)
    env["PYTHONPATH"] = kit.REPO_ROOT + os.pathsep + env.get("PYTHONPATH", "")
    env["NUMBAGRAD_COMPILE_NOTICE"] = "0"
    base = [sys.executable, "-m", "numbagrad", "--quiet"] + (["--epochs", "2"] if kit.SMOKE else [])
    variants = {"plain": base,
                "sync": base + ["--checkpoint", str(tmp_path / "sync.ckpt")],
                "async": base + ["--checkpoint", str(tmp_path / "async.ckpt"), "--async-checkpoint"]}
    subprocess.run(base, env=env, capture_output=True, check=True, timeout=600)   # JIT cache warm
    rounds = 1 if kit.SMOKE else 7
    wall = {k: [] for k in variants}
    out = {}
    for _ in range(rounds):
        for name, cmd in variants.items():
            for f in tmp_path.glob("*.ckpt"):
                f.unlink()
            t = time.perf_counter()
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
            wall[name].append(time.perf_counter() - t)
            assert proc.returncode == 0, proc.stderr[-3000:]
            out[name] = proc.stdout
    med = {k: float(np.median(v)) for k, v in wall.items()}
    over = {k: med[k] / med["plain"] - 1 for k in med}
    key = "ckpt_digits_job"
    kit.record(key, "numbagrad", med["async"], min(wall["async"]), rounds)
    kit.WORKLOADS[key]["note"] = (
        f"plain job {med['plain']:.2f} s; checkpoints add: --async-checkpoint {100 * over['async']:+.1f}% "
        f"(bar < 1%: {'(smoke)' if kit.SMOKE else 'met' if over['async'] < 0.01 else 'MISSED'}), "
        f"synchronous --checkpoint {100 * over['sync']:+.1f}% ({rounds} interleaved rounds, medians)")
    # the runs are the same training: the same test accuracy
    acc = {k: v.split("(")[0] for k, v in out.items()}
    assert acc["async"] == acc["sync"] == acc["plain"], out
    assert ng_load_ok(tmp_path / "async.ckpt")


def ng_load_ok(path):
    import numbagrad as ng
    return "model" in ng.load(path)
