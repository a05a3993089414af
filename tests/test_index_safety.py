"""No index reaches a kernel unchecked (issue 20): every kernel that indexes memory with
user data (ARCHITECTURE.md, "Index safety") is run with out-of-range data, negative and too
large, in a child process, and each case must end in a Python exception, never a signal.

Forward cases pass the bad data to the op. Backward cases write it after the forward
through ``.array`` (what a user's own ``@njit`` code would do), which no version counter
sees, so only the range check before the backward's kernel stands between the write and
the kernel. Where the op's backward reads a private copy (CTC lengths, the indices a max
pool returns) the write cannot reach the kernel: those cases must finish, or raise, without
a signal.

One child runs every case and reports each as a JSON line; if it dies, the case it was in
is recorded as crashed and a new child runs the rest.
"""
import json
import subprocess
import sys

import numpy as np
import pytest

NEG, BIG = -1000, 10_000_000


def _cases():
    """name -> (function of the bad value, values, what must happen: 'raise' or 'no_signal')."""
    import numbagrad as ng
    import numbagrad.nn.functional as F
    from numbagrad import metrics

    def x(shape=(5, 4), grad=True):
        return ng.tensor(np.arange(np.prod(shape), dtype=np.float32).reshape(shape) / 7, requires_grad=grad)

    def i(values):
        return ng.tensor(np.array(values, np.int64))

    def after(build):
        """Forward with good data (``build`` returns the output, the index's array and the
        position to write), then the bad value written through ``.array``, then backward."""
        def run(bad):
            y, arr, pos = build()
            arr[pos] = bad
            (y * y).sum().backward()
        return run

    c = {}
    # ---- indexing kernels, forward
    c["gather"] = lambda b: x().gather(0, i([[0, 1, b, 2]]))
    c["take_along_dim"] = lambda b: ng.take_along_dim(x(), i([[0, 1, b, 2]]), 0)
    c["scatter_add"] = lambda b: x().scatter_add(0, i([[0, b, 1, 2]]), x((1, 4)))
    c["scatter_add_"] = lambda b: x(grad=False).scatter_add_(0, i([[0, b, 1, 2]]), x((1, 4), False))
    c["scatter_src"] = lambda b: x().scatter(0, i([[0, b, 1, 2]]), x((1, 4)))
    c["scatter_value"] = lambda b: x().scatter(1, i([[0], [b], [1], [2], [3]]), 1.0)
    c["scatter_"] = lambda b: x(grad=False).scatter_(0, i([[0, b, 1, 2]]), 2.0)
    c["index_select"] = lambda b: x().index_select(1, i([0, b]))
    c["index_add"] = lambda b: x().index_add(0, i([b, 1]), x((2, 4)))
    c["index_add_"] = lambda b: x(grad=False).index_add_(1, i([b]), x((5, 1), False))
    c["embedding"] = lambda b: F.embedding(i([[0, b]]), x())
    c["embedding_bag_input"] = lambda b: F.embedding_bag(i([0, 1, b, 2]), x(), i([0, 2]))
    c["embedding_bag_offsets"] = lambda b: F.embedding_bag(i([0, 1, 2, 3]), x(), i([0, b]))
    c["one_hot"] = lambda b: F.one_hot(i([0, b, 2]), 5)
    c["getitem"] = lambda b: x()[i([0, b])]
    c["getitem_rows"] = lambda b: x()[:, i([0, b])]
    c["take"] = lambda b: ng.take(x(), i([0, b]))
    # ---- losses and metrics, forward
    c["cross_entropy_target"] = lambda b: F.cross_entropy(x(), i([0, 1, b, 2, 3]))
    c["nll_loss_target"] = lambda b: F.nll_loss(x(), i([0, 1, b, 2, 3]))

    def ctc(targets=((1, 2), (3, 3)), il=(6, 6), tl=(2, 2)):
        lp = F.log_softmax(x((6, 2, 5)), 2)
        return F.ctc_loss(lp, np.array(targets), np.array(il), np.array(tl))
    c["ctc_targets"] = lambda b: ctc(targets=((1, b), (3, 3)))
    c["ctc_input_lengths"] = lambda b: ctc(il=(6, b))
    c["ctc_target_lengths"] = lambda b: ctc(tl=(2, b))
    c["confusion_matrix_target"] = lambda b: metrics.confusion_matrix(np.array([0, 1, 2]), np.array([0, b, 1]),
                                                                      num_classes=3)
    c["confusion_matrix_pred"] = lambda b: metrics.confusion_matrix(np.array([0, b, 2]), np.array([0, 1, 1]),
                                                                    num_classes=3)
    c["topk_accuracy_target"] = lambda b: metrics.accuracy(np.eye(3, dtype=np.float32), np.array([0, b, 2]),
                                                           top_k=2)

    # ---- backward kernels reading saved indices (written through ``.array`` after the forward)
    def saved(make):
        def build():
            idx = make[1]()
            return make[0](idx), idx.array, make[2]
        return build
    c["gather_backward"] = after(saved((lambda j: x().gather(0, j), lambda: i([[0, 1, 2, 3]]), (0, 1))))
    c["scatter_add_backward"] = after(saved((lambda j: x().scatter_add(0, j, x((1, 4))), lambda: i([[0, 1, 2, 3]]),
                                             (0, 1))))
    c["scatter_backward"] = after(saved((lambda j: x().scatter(0, j, x((1, 4))), lambda: i([[0, 1, 2, 3]]),
                                         (0, 1))))
    c["index_select_backward"] = after(saved((lambda j: x().index_select(0, j), lambda: i([0, 3]), 1)))
    c["index_add_backward"] = after(saved((lambda j: x().index_add(0, j, x((2, 4))), lambda: i([0, 3]), 1)))
    c["embedding_backward"] = after(saved((lambda j: F.embedding(j, x()), lambda: i([0, 3]), 1)))
    c["getitem_backward"] = after(saved((lambda j: x()[j], lambda: i([0, 3]), 1)))
    c["take_backward"] = after(saved((lambda j: ng.take(x(), j), lambda: i([0, 3]), 1)))

    def numpy_index_backward(b):  # a NumPy index the caller keeps and writes
        j = np.array([0, 3])
        y = x()[j]
        j[1] = b
        (y * y).sum().backward()
    c["numpy_index_backward"] = numpy_index_backward

    def max_dim_backward(b):
        vals, idx = x().max(0)
        idx.array[1] = b
        (vals * vals).sum().backward()
    c["max_dim_backward"] = max_dim_backward

    def cross_entropy_backward(b):
        t = i([0, 1, 2, 3, 0])
        y = F.cross_entropy(x(), t)
        t.array[1] = b
        y.backward()
    c["cross_entropy_backward"] = cross_entropy_backward

    def pool_backward(dilation, adaptive=False):
        def run(b):
            inp = x((1, 2, 6, 6))
            if adaptive:
                y, idx = F.adaptive_max_pool2d(inp, 3, return_indices=True)
            else:
                y, idx = F.max_pool2d(inp, 2, stride=1, dilation=dilation, return_indices=True)
            idx.array[0, 0, 0, 0] = b
            (y * y).sum().backward()
        return run
    c["max_pool_backward"] = pool_backward(1)
    c["max_pool_dilated_backward"] = pool_backward(2)
    c["adaptive_max_pool_backward"] = pool_backward(1, adaptive=True)

    def ctc_lengths_backward(b):
        il, tl = np.array([6, 6]), np.array([2, 2])
        lp = F.log_softmax(x((6, 2, 5)), 2)
        y = F.ctc_loss(lp, np.array([[1, 2], [3, 3]]), il, tl)
        il[0], tl[0] = b, b
        y.backward()
    c["ctc_lengths_backward"] = ctc_lengths_backward

    no_signal = {"max_pool_backward", "max_pool_dilated_backward", "adaptive_max_pool_backward",
                 "ctc_lengths_backward"}
    return {name: (fn, "no_signal" if name in no_signal else "raise") for name, fn in c.items()}


CASE_NAMES = ["gather", "take_along_dim", "scatter_add", "scatter_add_", "scatter_src", "scatter_value", "scatter_",
              "index_select", "index_add", "index_add_", "embedding", "embedding_bag_input",
              "embedding_bag_offsets", "one_hot", "getitem", "getitem_rows", "take", "cross_entropy_target",
              "nll_loss_target", "ctc_targets", "ctc_input_lengths", "ctc_target_lengths",
              "confusion_matrix_target", "confusion_matrix_pred", "topk_accuracy_target", "gather_backward",
              "scatter_add_backward", "scatter_backward", "index_select_backward", "index_add_backward",
              "embedding_backward", "getitem_backward", "take_backward", "numpy_index_backward",
              "max_dim_backward", "cross_entropy_backward", "max_pool_backward", "max_pool_dilated_backward",
              "adaptive_max_pool_backward", "ctc_lengths_backward"]
RUNS = [f"{name}:{v}" for name in CASE_NAMES for v in ("neg", "big")]


def _child(runs):
    cases = _cases()
    for run in runs:
        name, v = run.split(":")
        print(json.dumps({"start": run}), flush=True)
        fn, _ = cases[name]
        try:
            fn(NEG if v == "neg" else BIG)
            rec = {"run": run, "result": "returned"}
        except Exception as e:  # noqa: BLE001 - the point: any Python exception, named
            rec = {"run": run, "result": "raised", "type": type(e).__name__, "msg": str(e)[:300]}
        print(json.dumps(rec), flush=True)


@pytest.fixture(scope="module")
def outcomes():
    """Every run's outcome; a run during which the child died is recorded with its exit code."""
    out = {}
    todo = list(RUNS)
    while todo:
        p = subprocess.run([sys.executable, __file__] + todo, capture_output=True, text=True, timeout=600)
        started = None
        for line in p.stdout.splitlines():
            rec = json.loads(line)
            if "start" in rec:
                started = rec["start"]
            else:
                out[rec["run"]] = rec
                started = None
        if p.returncode == 0 and started is None:
            break
        if started is None:  # died outside any case (import, say)
            raise AssertionError(f"the child failed (exit {p.returncode}):\n{p.stderr[-3000:]}")
        out[started] = {"run": started, "result": "died", "returncode": p.returncode, "stderr": p.stderr[-2000:]}
        todo = todo[todo.index(started) + 1:]
    return out


def test_every_case_of_the_table_is_run():
    assert set(CASE_NAMES) == set(_cases())


@pytest.mark.parametrize("run", RUNS)
def test_out_of_range_data_raises_and_never_kills_the_process(outcomes, run):
    rec = outcomes[run]
    assert rec["result"] != "died", f"{run}: the process died (exit {rec.get('returncode')}):\n{rec.get('stderr')}"
    if _cases_expect(run) == "raise":
        assert rec["result"] == "raised", f"{run}: returned without an error"
        value = str(NEG if run.endswith(":neg") else BIG)
        # the message names the bad value (ops whose check words it so) or the version / range
        assert rec["type"] in ("IndexError", "RuntimeError", "ValueError"), rec
        assert value in rec["msg"] or "out of" in rec["msg"] or "offsets" in rec["msg"] \
            or "at least 0" in rec["msg"], rec


_EXPECT = {}


def _cases_expect(run):
    if not _EXPECT:
        _EXPECT.update({name: e for name, (_, e) in _cases().items()})
    return _EXPECT[run.split(":")[0]]


if __name__ == "__main__":
    _child(sys.argv[1:])
