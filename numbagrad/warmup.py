"""Compile the common kernels ahead of the first run, on every core.

    python -m numbagrad.warmup [--workers N] [--quiet]
    numbagrad.warmup()                         # the same, from Python

numbagrad's kernels are compiled by numba the first time a program needs them and then
loaded from the on-disk cache (``backend/cache.py``): a fresh install spends its first
run compiling (the digits job ~10-20 s on 2 cores), every later run ~0.3 s loading. This
command pays that cost once, up front, in parallel: it runs small training steps of the
common layers, losses and optimizers (the tasks in ``TASKS``, at sizes that use both the
serial and the parallel kernels) in ``N`` worker processes (default: one per core), with
a progress bar. Compiled kernels land in the cache every later process loads from, so
it is worth running after ``pip install`` and after each upgrade.
"""
import argparse
import os
import sys
import time
import types

import numpy as np


# ---- the tasks: each builds a small model and runs a few training steps ------------------
def _train(model, batches, loss_fn, opt_name="Adam", steps=2, **opt_kw):
    import numbagrad as ng
    opt = getattr(ng.optim, opt_name)(model.parameters(), **opt_kw)
    for _ in range(steps):
        for x, y in batches:
            opt.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
    with ng.no_grad():
        model.eval()
        model(batches[0][0])
        model.train()


def _classes(n, k, seed=0):
    import numbagrad as ng
    return ng.tensor(np.random.default_rng(seed).integers(0, k, n))


def _digits_mlp():
    import numbagrad as ng
    from numbagrad.examples.train_digits import build_model
    ng.manual_seed(0)
    f = ng.nn.functional.cross_entropy
    _train(build_model("mlp"), [(ng.randn(n, 64), _classes(n, 10)) for n in (32, 360, 1437)], f, lr=1e-3)


def _digits_mlp_loss():
    """The main job's loss kernels (cross_entropy forward and backward): about half of its
    first run's compiling. (Compiling the two halves in two processes at once did not make
    the job's cold run shorter on 2 cores: 7.7-9.3 s against 8.4-8.9 s, the workers'
    start-up eating the gain, so the job itself does not do it.)"""
    import numbagrad as ng
    for n in (32,):
        ng.nn.functional.cross_entropy(ng.randn(n, 10, requires_grad=True), _classes(n, 10)).backward()


def _digits_mlp_layers():
    """The main job's layer and optimizer kernels (GEMMs serial and parallel, the fused
    bias + ReLU, Adam), without its loss: the other half."""
    import numbagrad as ng
    from numbagrad.examples.train_digits import build_model
    ng.manual_seed(0)
    _train(build_model("mlp"), [(ng.randn(n, 64), None) for n in (32, 360)], lambda out, _: _plain_sum(out),
           lr=1e-3)


def _plain_sum(x):
    """``x.sum()`` whose backward hands the layers a fresh C-contiguous gradient, as the
    job's cross_entropy does (a broadcast view would compile other kernel variants)."""
    from numbagrad.autograd import Function

    class _Sum(Function):
        @staticmethod
        def forward(ctx, a):
            ctx.shape = a.shape
            return np.asarray(a.sum(), a.dtype)

        @staticmethod
        def backward(ctx, g):
            return np.full(ctx.shape, g, g.dtype)

    return _Sum.apply(x)


def _digits_cnn():
    import numbagrad as ng
    from numbagrad.examples.train_digits import build_model
    ng.manual_seed(0)
    f = ng.nn.functional.cross_entropy
    _train(build_model("cnn"), [(ng.randn(n, 64), _classes(n, 10)) for n in (32, 360)], f, lr=1e-3)


def _mlp_large():
    import numbagrad as ng
    nn = ng.nn
    ng.manual_seed(0)
    model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Dropout(0.1), nn.Linear(512, 256), nn.GELU(),
                          nn.Linear(256, 10))
    batches = [(ng.randn(n, 784), _classes(n, 10)) for n in (32, 128, 256)]
    _train(model, batches, nn.functional.cross_entropy, "AdamW", lr=1e-3)
    _train(model, batches[:1], nn.functional.cross_entropy, "SGD", lr=1e-2, momentum=0.9)


def _recurrent():
    import numbagrad as ng
    nn = ng.nn
    ng.manual_seed(0)
    for cls in (nn.LSTM, nn.GRU):
        rnn, head = cls(64, 128), nn.Linear(128, 10)

        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.rnn, self.head = rnn, head

            def forward(self, x):
                return self.head(self.rnn(x)[0][-1])

        _train(M(), [(ng.randn(10, b, 64), _classes(b, 10)) for b in (4, 32)], nn.functional.cross_entropy)


def _transformer():
    import numbagrad as ng
    nn = ng.nn
    ng.manual_seed(0)

    class GPT(nn.Module):
        def __init__(self, d=64, vocab=65, t=32):
            super().__init__()
            self.emb = nn.Embedding(vocab, d)
            self.pos = nn.Parameter(ng.randn(t, d) * 0.02)
            self.block = nn.TransformerEncoderLayer(d, 4, 4 * d, dropout=0.1, activation="gelu",
                                                    batch_first=True, norm_first=True)
            self.ln = nn.LayerNorm(d)
            self.head = nn.Linear(d, vocab)
            self.register_buffer("mask", ng.tensor(np.triu(np.full((t, t), -np.inf, np.float32), 1)))

        def forward(self, idx):
            x = self.emb(idx) + self.pos
            return self.head(self.ln(self.block(x, src_mask=self.mask, is_causal=True))).reshape(-1, 65)

    batches = [(ng.tensor(np.random.default_rng(b).integers(0, 65, (b, 32))), _classes(b * 32, 65))
               for b in (2, 16)]
    _train(GPT(), batches, nn.functional.cross_entropy, "AdamW", lr=1e-3)


def _losses():
    import numbagrad as ng
    F = ng.nn.functional
    for n in (64, 1 << 17):
        x = ng.randn(n, requires_grad=True)
        t = ng.rand(n)
        for f in (F.mse_loss, F.l1_loss, F.smooth_l1_loss, F.binary_cross_entropy_with_logits):
            f(x, t).backward()
    logits = ng.randn(8, 20, requires_grad=True)
    F.nll_loss(F.log_softmax(logits, 1), _classes(8, 20)).backward()
    lp = F.log_softmax(ng.randn(30, 4, 12), 2).detach().requires_grad_()
    F.ctc_loss(lp, ng.tensor(np.random.default_rng(0).integers(1, 12, (4, 10))), ng.full((4,), 30, dtype=ng.int64),
               ng.full((4,), 10, dtype=ng.int64)).backward()


def _optimizers():
    import numbagrad as ng
    for n in (1000, 1 << 17):
        p = ng.nn.Parameter(ng.randn(n))
        for name, kw in (("SGD", {"lr": 0.1, "momentum": 0.9}), ("RMSprop", {}), ("Adagrad", {}), ("Adam", {}),
                         ("AdamW", {})):
            opt = getattr(ng.optim, name)([p], **kw)
            for _ in range(2):
                p.grad = ng.randn(n)
                opt.step()
        ng.nn.utils.clip_grad_norm_([p], 1.0)


TASKS = {"digits MLP": _digits_mlp, "digits MLP: loss": _digits_mlp_loss, "digits MLP: layers": _digits_mlp_layers, "digits CNN": _digits_cnn, "MLP 784-512-256-10": _mlp_large,
         "LSTM and GRU": _recurrent, "transformer block": _transformer, "losses": _losses,
         "optimizers": _optimizers}


def _run_task(name):
    """Run task ``name`` in this (worker) process; ``(name, seconds, kernels compiled)``."""
    os.environ.setdefault("NUMBAGRAD_COMPILE_NOTICE", "0")
    import numbagrad  # noqa: F401
    from numbagrad.backend import cache
    cache.watch_compiles()
    before = cache.compiled()
    t = time.perf_counter()
    TASKS[name]()
    return name, time.perf_counter() - t, cache.compiled() - before


def run(workers=None, progress=True, tasks=None):
    """Compile the kernels of ``tasks`` (default: all of ``TASKS``) in ``workers`` spawned
    processes (default: one per core). Returns ``{"seconds", "compiled", "tasks", "cache_dir"}``."""
    import concurrent.futures as cf
    import multiprocessing as mp
    from .backend import cache
    if isinstance(tasks, str):
        raise TypeError(f"warmup: tasks must be a list of task names, got the string {tasks!r} "
                        f"(did you mean [{tasks!r}]?); the tasks are {list(TASKS)}")
    names = list(TASKS) if tasks is None else list(tasks)
    bad = [n for n in names if n not in TASKS]
    if bad:
        raise ValueError(f"warmup: unknown task(s) {bad}; the tasks are {list(TASKS)}")
    workers = (os.cpu_count() or 1) if workers is None else workers
    if not isinstance(workers, int) or isinstance(workers, bool) or workers < 1:
        raise ValueError(f"warmup: workers must be a whole number of processes, at least 1, got {workers!r}")
    t0 = time.perf_counter()
    bar = None
    if progress:
        from tqdm.auto import tqdm
        bar = tqdm(total=len(names), desc="numbagrad warmup", unit="task", file=sys.stderr)
    compiled = 0
    from numbagrad import warmup as this  # this module by its name, also when run as __main__
    with cf.ProcessPoolExecutor(max_workers=min(workers, len(names)), mp_context=mp.get_context("spawn")) as ex:
        futures = [ex.submit(this._run_task, n) for n in names]
        for fut in cf.as_completed(futures):
            name, _, n = fut.result()
            compiled += n
            if bar is not None:
                bar.set_postfix_str(f"{name}: {n} kernels")
                bar.update(1)
    if bar is not None:
        bar.close()
    return {"seconds": time.perf_counter() - t0, "compiled": compiled, "tasks": names,
            "cache_dir": cache.chosen_dir()}


def main(argv=None):
    """``python -m numbagrad.warmup [--workers N] [--quiet]``: compile the common kernels into the cache."""
    ap = argparse.ArgumentParser(prog="python -m numbagrad.warmup", description=__doc__.split("\n\n")[0])
    ap.add_argument("--workers", type=int, default=None, help="worker processes (default: one per core)")
    ap.add_argument("--quiet", action="store_true", help="no progress bar")
    a = ap.parse_args(argv)
    r = run(a.workers, progress=not a.quiet)
    print(f"numbagrad warmup: {r['compiled']} kernels compiled in {r['seconds']:.1f} s "
          f"({len(r['tasks'])} tasks), cached in {r['cache_dir']}")
    return 0


class _CallableModule(types.ModuleType):
    """``numbagrad.warmup(...)`` calls :func:`run`; the module stays importable as usual."""

    def __call__(self, workers=None, progress=True, tasks=None):
        return run(workers, progress, tasks)


sys.modules[__name__].__class__ = _CallableModule

if __name__ == "__main__":
    sys.exit(main())
