"""``numbagrad.autocast("cuda")`` on the CUDA backend (float16 by default): CUDA tensors in a
listed op are cast, CPU tensors are left to the CPU state; parameter gradients are float32;
``cuda.amp.autocast`` is the same region. Runs on a GPU or under the simulator."""
import numpy as np

import numbagrad as ng
from numbagrad import nn
from numbagrad.nn import functional as F


def test_cuda_autocast_casts_cuda_ops_only():
    ng.manual_seed(0)
    m = nn.Linear(4, 3).to("cuda")
    x = ng.randn(2, 4).to("cuda")
    t = ng.tensor([0, 2]).to("cuda")
    cpu_lin = nn.Linear(4, 3)
    with ng.autocast("cuda"):
        assert ng.amp.is_autocast_enabled("cuda") and not ng.amp.is_autocast_enabled("cpu")
        y = m(x)
        loss = F.cross_entropy(y, t)
        assert cpu_lin(ng.randn(2, 4)).dtype == ng.float32
    assert y.dtype == ng.float16 and loss.dtype == ng.float32
    loss.backward()
    assert all(p.grad.dtype == ng.float32 for p in m.parameters())
    ref = m(x).detach().cpu().numpy()
    np.testing.assert_allclose(y.float().detach().cpu().numpy(), ref, rtol=2 * 2.0 ** -10,
                               atol=2 * 2.0 ** -10 * np.abs(ref).max())
    with ng.cuda.amp.autocast():
        assert m(x).dtype == ng.float16
    assert not ng.amp.is_autocast_enabled("cuda")
