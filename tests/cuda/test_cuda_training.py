"""Training on the CUDA backend: the same model, data and seed train identically on the
CPU (the reference, itself checked against PyTorch in tests/optim) and on CUDA."""
import gc

import numpy as np
import pytest

import numbagrad as ng
from numbagrad.backend import cuda as cb


def _model():
    ng.manual_seed(0)
    return ng.nn.Sequential(ng.nn.Linear(6, 5), ng.nn.ReLU(), ng.nn.Linear(5, 3))


def _train(device, opt_name, steps=3):
    m = _model().to(device)
    if opt_name == "adam":
        opt = ng.optim.Adam(m.parameters(), lr=1e-2)
    elif opt_name == "adamw_amsgrad":
        opt = ng.optim.AdamW(m.parameters(), lr=1e-2, amsgrad=True)
    else:
        opt = ng.optim.SGD(m.parameters(), lr=0.1, momentum=0.9, nesterov=True)
    rng = np.random.default_rng(0)
    x = ng.tensor(rng.standard_normal((4, 6)).astype(np.float32), device=device)
    y = ng.tensor(np.array([0, 1, 2, 1]), device=device)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = ng.nn.functional.cross_entropy(m(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, {k: v.cpu().numpy() for k, v in m.state_dict().items()}, m, opt


@pytest.mark.parametrize("opt_name", ["adam", "adamw_amsgrad", "sgd"])
def test_training_matches_cpu(opt_name):
    l_cpu, p_cpu, _, _ = _train("cpu", opt_name)
    l_gpu, p_gpu, m, opt = _train("cuda", opt_name)
    np.testing.assert_allclose(l_gpu, l_cpu, rtol=1e-5, atol=1e-6)
    for k in p_cpu:
        np.testing.assert_allclose(p_gpu[k], p_cpu[k], rtol=1e-4, atol=1e-5, err_msg=k)
    assert all(p.device == ng.device("cuda") for p in m.parameters())
    assert all(p.grad.device == ng.device("cuda") for p in m.parameters())
    for st in opt.state.values():
        for v in st.values():
            if isinstance(v, ng.Tensor) and v.ndim:
                assert v.device == ng.device("cuda")
    assert l_gpu[-1] < l_gpu[0]


def test_training_loop_stops_calling_the_driver():
    m = _model().to("cuda")
    opt = ng.optim.Adam(m.parameters(), lr=1e-2)
    x = ng.randn(4, 6, device="cuda")
    y = ng.tensor([0, 1, 2, 1], device="cuda")

    def step():
        opt.zero_grad()
        loss = ng.nn.functional.cross_entropy(m(x), y)
        loss.backward()
        opt.step()
        return loss.item()

    step()
    step()
    gc.collect()  # objects from earlier tests in reference cycles hold blocks until collected
    pool = cb.pool()
    before, used = pool.n_driver_allocs, ng.cuda.memory_allocated()
    for _ in range(3):
        step()
        gc.collect()
    assert pool.n_driver_allocs == before  # every block came from the cache
    assert ng.cuda.memory_allocated() == used  # and memory stays flat
    assert ng.cuda.memory_reserved() >= used


def test_optimizer_rejects_mixed_devices():
    a = ng.nn.Linear(2, 2)
    b = ng.nn.Linear(2, 2).to("cuda")
    opt = ng.optim.SGD(list(a.parameters()) + list(b.parameters()), lr=0.1)
    for p in list(a.parameters()) + list(b.parameters()):
        p.grad = ng.zeros_like(p)
    with pytest.raises(RuntimeError, match="different devices"):
        opt.step()


def test_state_dict_moves_between_devices():
    _, _, m, opt = _train("cuda", "adam", steps=2)
    sd = {k: v.cpu() for k, v in m.state_dict().items()}
    m2 = _model()
    m2.load_state_dict(sd)
    for k, v in m2.state_dict().items():
        np.testing.assert_array_equal(v.numpy(), sd[k].numpy())
