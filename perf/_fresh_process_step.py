"""The MLP training step of the perf suite, and a script timing it in a fresh process.

As a module (``perf/test_bench_mlp.py``): :func:`build` returns a ``step()`` closure for
numbagrad or torch. As a script::

    python perf/_fresh_process_step.py numbagrad --batch 128 --steps 6

prints one line ``PERF_RESULT {json}`` with the seconds spent since the top of the
script: importing numpy + the framework, building model/optimizer/data, the first
training step, and the median of the later steps (steady state). ``first - steady`` is
what the first step pays for JIT compilation (cold numba cache) or loading compiled
kernels (warm cache). The caller picks the cache with ``NUMBA_CACHE_DIR``.
"""
import time

_T0 = time.perf_counter()  # before any other import: the clock for "since process start"

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402

SIZES = (784, 512, 256, 10)


class Unavailable(Exception):
    """The framework lacks part of the API the workload needs (reported as a skip)."""


def _data(batch, sizes, seed):
    import numpy as np
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((batch, sizes[0]), dtype=np.float32)
    y = rng.integers(0, sizes[-1], size=batch, dtype=np.int64)
    return x, y


def _layers(nn, sizes):
    layers = []
    for i in range(len(sizes) - 1):
        layers.append(nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


def import_framework(framework, threads=None):
    """Import numpy and the framework; raise :class:`Unavailable` if the API is missing."""
    import numpy  # noqa: F401  (both frameworks' data comes from numpy)
    if framework == "torch":
        import torch
        if threads:
            torch.set_num_threads(threads)
        return torch
    if framework != "numbagrad":
        raise ValueError(f"unknown framework {framework!r}")
    import numbagrad as ng
    try:
        import numbagrad.nn  # noqa: F401
        import numbagrad.nn.functional  # noqa: F401
        import numbagrad.optim  # noqa: F401
    except ImportError as exc:
        raise Unavailable(f"numbagrad.nn / numbagrad.optim not importable: {exc}") from exc
    missing = [name for obj, name in ((ng.nn, "Sequential"), (ng.nn, "Linear"), (ng.nn, "ReLU"),
                                      (ng.nn.functional, "cross_entropy"), (ng.optim, "Adam"))
               if not hasattr(obj, name)]
    if missing:
        raise Unavailable("numbagrad lacks " + ", ".join(missing) + " (nn/optim not written yet?)")
    if threads:
        import numba
        numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    return ng


def build(framework, batch, sizes=SIZES, seed=0, threads=None, device="cpu"):
    """A ``step()`` closure: zero_grad, forward, cross_entropy, backward, Adam step.

    On ``device="cuda"`` the model and data live on the GPU and each step ends with a
    device synchronisation, so a timed step is the GPU's work, not its launch."""
    fw = import_framework(framework, threads)
    x, y = _data(batch, sizes, seed)
    fw.manual_seed(seed)
    model = _layers(fw.nn, sizes).to(device)
    opt = fw.optim.Adam(model.parameters(), lr=1e-3)
    if framework == "torch":
        xt, yt = fw.from_numpy(x).to(device), fw.from_numpy(y).to(device)
    else:
        xt, yt = fw.tensor(x, device=device), fw.tensor(y, device=device)
    cross_entropy = fw.nn.functional.cross_entropy
    sync = fw.cuda.synchronize if device != "cpu" else (lambda: None)

    def step():
        opt.zero_grad()
        loss = cross_entropy(model(xt), yt)
        loss.backward()
        opt.step()
        sync()
        return loss

    return step


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("framework", choices=("numbagrad", "torch"))
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--steps", type=int, default=6, help="training steps in all (>= 2)")
    p.add_argument("--sizes", default=",".join(map(str, SIZES)))
    p.add_argument("--threads", type=int, default=0)
    args = p.parse_args(argv)
    sizes = tuple(int(s) for s in args.sizes.split(","))

    t = time.perf_counter
    try:
        import_framework(args.framework, args.threads)
    except Unavailable as exc:
        print("PERF_RESULT " + json.dumps(dict(skip=str(exc))))
        return 0
    t_import = t()
    step = build(args.framework, args.batch, sizes, threads=args.threads)
    t_build = t()
    loss0 = float(step().item())
    t_first = t()
    later = []
    for _ in range(max(1, args.steps - 1)):
        s = t()
        step()
        later.append(t() - s)
    later.sort()
    steady = later[len(later) // 2]
    result = dict(
        framework=args.framework, batch=args.batch, sizes=sizes, pid=os.getpid(),
        numba_cache_dir=os.environ.get("NUMBA_CACHE_DIR"),
        import_s=t_import - _T0, build_s=t_build - t_import, first_step_s=t_first - t_build,
        steady_step_s=steady, compile_excess_s=(t_first - t_build) - steady,
        to_first_step_s=t_first - _T0, first_loss=loss0,
    )
    print("PERF_RESULT " + json.dumps(result))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
