"""One training step of LeNet-5 on 1x28x28 images (float32): forward, cross_entropy,
backward, SGD with momentum -- numbagrad vs an identical torch model in the same run.

The model (the modern LeNet-5: ReLU and max pooling)::

    Conv2d(1, 6, 5, padding=2) - ReLU - MaxPool2d(2)     -> 6 x 14 x 14
    Conv2d(6, 16, 5) - ReLU - MaxPool2d(2)               -> 16 x 5 x 5
    Flatten - Linear(400, 120) - ReLU - Linear(120, 84) - ReLU - Linear(84, 10)

Bar from issue 4: batch 64, <= 1.5x torch (torch ~7.3 ms here).
"""
import numpy as np
import pytest

import _perfkit as kit

BATCH = 4 if kit.SMOKE else 64
kit._workload("lenet_step", f"LeNet-5 1x28x28 train step b{BATCH}", bar=("ratio", "<=", 1.5),
              note="fwd + cross_entropy + bwd + SGD(momentum=0.9)")


def lenet(nn):
    return nn.Sequential(
        nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(400, 120), nn.ReLU(),
        nn.Linear(120, 84), nn.ReLU(),
        nn.Linear(84, 10))


def build(framework, batch=BATCH, seed=kit.SEED):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((batch, 1, 28, 28), dtype=np.float32)
    y = rng.integers(0, 10, size=batch, dtype=np.int64)
    if framework == "torch":
        torch = pytest.importorskip("torch")
        torch.set_num_threads(kit.THREADS)
        fw, xt, yt = torch, torch.from_numpy(x), torch.from_numpy(y)
    else:
        import numbagrad as fw
        if not all(hasattr(fw.nn, n) for n in ("Conv2d", "MaxPool2d")):
            pytest.skip("numbagrad.nn lacks Conv2d/MaxPool2d")
        xt, yt = fw.tensor(x), fw.tensor(y)
    fw.manual_seed(seed)
    model = lenet(fw.nn)
    opt = fw.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    cross_entropy = fw.nn.functional.cross_entropy

    def step():
        opt.zero_grad()
        loss = cross_entropy(model(xt), yt)
        loss.backward()
        opt.step()
        return loss

    return step


@pytest.mark.benchmark(**kit.bench_mark(max_time=1.5))
@pytest.mark.parametrize("framework", ("numbagrad", "torch"))
def test_lenet_train_step(benchmark, framework):
    kit.run_training_benchmark(benchmark, "lenet_step", framework, build(framework), warm=5)
