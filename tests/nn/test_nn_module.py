"""nn.Module and nn.Parameter: registration, iteration, modes, conversion, state dicts,
hooks and repr (PyTorch's semantics)."""
import copy
import pickle

import numpy as np
import pytest

import numbagrad as ng
from numbagrad import nn

torch = pytest.importorskip("torch")


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 3)
        self.act = nn.ReLU()
        self.fc2 = nn.Linear(3, 2, bias=False)
        self.scale = nn.Parameter(ng.ones(2))
        self.register_buffer("running", ng.zeros(2))
        self.register_buffer("mask", ng.ones(2), persistent=False)
        self.register_buffer("count", ng.tensor(0))
        self.plain = 5

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x))) * self.scale


# ---- Parameter ----------------------------------------------------------------------
def test_parameter_is_a_tensor_that_requires_grad():
    p = nn.Parameter(ng.randn(3))
    assert isinstance(p, ng.Tensor) and isinstance(p, nn.Parameter)
    assert p.requires_grad and p.is_leaf
    assert not nn.Parameter(ng.randn(3), requires_grad=False).requires_grad
    assert repr(p).startswith("Parameter containing:\ntensor(")
    assert nn.Parameter().shape == (0,)


def test_parameter_shares_memory_and_flows_through_functions():
    base = ng.randn(3, 2)
    p = nn.Parameter(base)
    assert p.array is base.array
    x = ng.randn(4, 3)
    (x @ p).sum().backward()  # Function.apply accepts the subclass
    np.testing.assert_allclose(p.grad.numpy(), np.tile(x.numpy().sum(0)[:, None], (1, 2)), rtol=1e-6)


def test_parameter_deepcopy_and_pickle():
    p = nn.Parameter(ng.randn(3))
    p.sum().backward()
    q = copy.deepcopy(p)
    assert type(q) is nn.Parameter and q.requires_grad and q.array is not p.array
    assert q.grad is None and p.grad is not None  # as torch: the copy starts without a gradient
    np.testing.assert_array_equal(q.detach().numpy(), p.detach().numpy())
    r = pickle.loads(pickle.dumps(p))
    assert type(r) is nn.Parameter and r.requires_grad
    np.testing.assert_array_equal(r.detach().numpy(), p.detach().numpy())


def test_parameter_rejects_integer_data_with_grad():
    with pytest.raises(RuntimeError, match="floating point"):
        nn.Parameter(ng.tensor([1, 2]))


# ---- registration -------------------------------------------------------------------
def test_registration_and_iteration_order():
    net = Net()
    assert [n for n, _ in net.named_parameters()] == ["scale", "fc1.weight", "fc1.bias", "fc2.weight"]
    assert [n for n, _ in net.named_buffers()] == ["running", "mask", "count"]
    assert [n for n, _ in net.named_children()] == ["fc1", "act", "fc2"]
    assert [n for n, _ in net.named_modules()] == ["", "fc1", "act", "fc2"]
    assert len(list(net.parameters())) == 4 and len(list(net.parameters(recurse=False))) == 1
    assert list(net.modules())[1] is net.fc1
    assert net.plain == 5 and "plain" not in net._parameters
    assert net.get_submodule("fc1") is net.fc1
    assert net.get_parameter("fc1.bias") is net.fc1.bias
    assert net.get_buffer("running") is net.running
    assert "fc1" in dir(net) and "scale" in dir(net)


def test_reassignment_moves_between_registries_and_delete():
    net = Net()
    with pytest.raises(TypeError, match="cannot assign 'Linear' as parameter 'scale'"):
        net.scale = nn.Linear(1, 1)  # as in PyTorch
    net.act = nn.Parameter(ng.ones(1))  # a module name becomes a parameter
    assert "act" in net._parameters and "act" not in net._modules
    del net.act
    net.act = nn.ReLU()  # ... and back
    assert "act" in net._modules and "act" not in net._parameters
    net.fc2 = None
    assert net.fc2 is None and [n for n, _ in net.named_children()] == ["fc1", "act"]
    net.running = ng.ones(2)
    assert net._buffers["running"] is net.running
    del net.fc1
    with pytest.raises(AttributeError, match="fc1"):
        net.fc1
    net.fc2 = nn.Linear(3, 2)
    assert "fc2" in net._modules


def test_registration_errors():
    class Early(nn.Module):
        def __init__(self):
            self.w = nn.Parameter(ng.ones(1))

    with pytest.raises(AttributeError, match="before Module.__init__"):
        Early()
    net = Net()
    with pytest.raises(TypeError, match="cannot assign 'Tensor' as parameter 'scale'"):
        net.scale = ng.ones(2)
    with pytest.raises(TypeError, match="child module"):
        net.fc1 = 3
    with pytest.raises(TypeError, match="buffer"):
        net.running = 3
    with pytest.raises(KeyError, match="contain"):
        net.register_buffer("a.b", ng.ones(1))
    with pytest.raises(KeyError, match="already exists"):
        net.register_parameter("plain", nn.Parameter(ng.ones(1)))
    q = nn.Parameter(ng.ones(2))
    q.grad_fn = (q * 2).grad_fn  # what a Parameter made by an op would look like
    with pytest.raises(ValueError, match="non-leaf"):
        net.register_parameter("bad", q)
    with pytest.raises(NotImplementedError, match="forward"):
        nn.Module()(1)


def test_shared_parameters_are_listed_once():
    net = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2))
    net[1].weight = net[0].weight
    names = [n for n, _ in net.named_parameters()]
    assert names == ["0.weight", "0.bias", "1.bias"]
    assert len(list(net.named_parameters(remove_duplicate=False))) == 4


# ---- modes and gradients --------------------------------------------------------------
def test_train_eval_requires_grad_and_apply():
    net = Net()
    assert net.training and net.fc1.training
    assert net.eval() is net
    assert not net.training and not net.fc1.training and not net.act.training
    net.train()
    assert net.fc2.training
    net.requires_grad_(False)
    assert not any(p.requires_grad for p in net.parameters())
    seen = []
    net.apply(lambda m: seen.append(type(m).__name__))
    assert seen == ["Linear", "ReLU", "Linear", "Net"]


def test_zero_grad():
    net = Net()
    net(ng.randn(5, 4)).sum().backward()
    assert all(p.grad is not None for p in net.parameters())
    grads = [p.grad for p in net.parameters()]
    net.zero_grad(set_to_none=False)
    for p, g in zip(net.parameters(), grads):
        assert p.grad is g and not g.numpy().any()
    net.zero_grad()
    assert all(p.grad is None for p in net.parameters())


def test_call_runs_forward():
    net = Net()
    x = ng.randn(5, 4)
    np.testing.assert_array_equal(net(x).detach().numpy(), net.forward(x).detach().numpy())


# ---- conversion ---------------------------------------------------------------------
def test_to_dtype_keeps_parameter_objects():
    net = Net()
    params = list(net.parameters())
    net(ng.randn(2, 4)).sum().backward()
    assert net.double() is net
    assert list(net.parameters()) == params or all(a is b for a, b in zip(net.parameters(), params))
    assert all(p.dtype == np.float64 and p.grad.dtype == np.float64 for p in net.parameters())
    assert net.running.dtype == np.float64
    assert net.count.dtype == np.int64  # integer buffers keep their dtype
    out = net(ng.randn(2, 4, dtype=ng.float64))
    assert out.dtype == np.float64
    net.to(ng.float32)
    assert all(p.dtype == np.float32 for p in net.parameters())
    net.to("cpu")
    with pytest.raises(TypeError, match="floating point"):
        net.to(ng.int64)


# ---- state dict ---------------------------------------------------------------------
def test_state_dict_keys_values_and_sharing():
    net = Net()
    sd = net.state_dict()
    assert list(sd) == ["scale", "running", "count", "fc1.weight", "fc1.bias", "fc2.weight"]
    assert not sd["fc1.weight"].requires_grad
    assert np.shares_memory(sd["fc1.weight"].array, net.fc1.weight.array)
    assert net.state_dict(keep_vars=True)["fc1.weight"] is net.fc1.weight


def test_load_state_dict_copies_in_place():
    a, b = Net(), Net()
    w_before = b.fc1.weight.array
    res = b.load_state_dict(a.state_dict())
    assert res.missing_keys == [] and res.unexpected_keys == []
    assert repr(res) == "<All keys matched successfully>"
    assert b.fc1.weight.array is w_before  # in place: optimizer arenas stay valid
    for (n1, t1), (n2, t2) in zip(a.state_dict().items(), b.state_dict().items()):
        assert n1 == n2
        np.testing.assert_array_equal(t1.numpy(), t2.numpy())
    x = ng.randn(3, 4)
    np.testing.assert_array_equal(a(x).detach().numpy(), b(x).detach().numpy())


def test_load_state_dict_strict_errors_and_non_strict():
    net = Net()
    sd = net.state_dict()
    sd.pop("fc1.bias")
    sd["extra.weight"] = ng.ones(1)
    sd["fc2.nope"] = ng.ones(1)
    with pytest.raises(RuntimeError) as e:
        Net().load_state_dict(sd)
    msg = str(e.value)
    assert "Error(s) in loading state_dict for Net" in msg
    assert 'Missing key(s) in state_dict: "fc1.bias"' in msg
    assert '"extra.weight"' in msg and '"fc2.nope"' in msg
    res = Net().load_state_dict(sd, strict=False)
    assert res.missing_keys == ["fc1.bias"]
    assert sorted(res.unexpected_keys) == ["extra.weight", "fc2.nope"]
    assert res == (["fc1.bias"], res.unexpected_keys)
    bad = Net().state_dict()
    bad["fc1.weight"] = ng.ones(2, 2)
    with pytest.raises(RuntimeError, match=r"size mismatch for fc1.weight: copying a param with shape \(2, 2\) "
                                           r"from checkpoint, the shape in current model is \(3, 4\)"):
        Net().load_state_dict(bad)
    with pytest.raises(RuntimeError, match="size mismatch"):
        Net().load_state_dict(bad, strict=False)


def test_load_torch_state_dict_and_match_outputs():
    tnet = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 2))
    net = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2))
    net.load_state_dict(tnet.state_dict())
    x = np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32)
    np.testing.assert_allclose(net(ng.tensor(x)).detach().numpy(),
                               tnet(torch.tensor(x)).detach().numpy(), rtol=1e-5, atol=1e-6)
    assert list(net.state_dict()) == list(tnet.state_dict())


def test_assign_load():
    a, b = Net(), Net()
    b.load_state_dict(a.state_dict(), assign=True)
    np.testing.assert_array_equal(a.fc1.weight.detach().numpy(), b.fc1.weight.detach().numpy())


def test_deepcopy_module():
    net = Net()
    net2 = copy.deepcopy(net)
    assert net2.fc1.weight is not net.fc1.weight and isinstance(net2.fc1.weight, nn.Parameter)
    x = ng.randn(3, 4)
    np.testing.assert_array_equal(net(x).detach().numpy(), net2(x).detach().numpy())


# ---- hooks --------------------------------------------------------------------------
def test_forward_hooks():
    lin = nn.Linear(2, 2)
    calls = []
    h1 = lin.register_forward_pre_hook(lambda m, args: (args[0] * 0,))
    h2 = lin.register_forward_hook(lambda m, args, out: out + 1)
    h3 = lin.register_forward_hook(lambda m, args, out: calls.append("second"))
    lin.register_forward_hook(lambda m, args, out: calls.append("first"), prepend=True)
    out = lin(ng.randn(3, 2))
    np.testing.assert_allclose(out.detach().numpy(), np.broadcast_to(lin.bias.detach().numpy() + 1, (3, 2)),
                               rtol=1e-6)
    assert calls == ["first", "second"]
    h1.remove()
    h2.remove()
    h3.remove()
    x = ng.randn(3, 2)
    calls.clear()
    np.testing.assert_allclose(lin(x).detach().numpy(),
                               x.numpy() @ lin.weight.detach().numpy().T + lin.bias.detach().numpy(), rtol=1e-6)
    assert calls == ["first"]


def test_forward_hooks_with_kwargs_and_always_call():
    class M(nn.Module):
        def forward(self, x, scale=1.0):
            if scale < 0:
                raise ValueError("negative")
            return x * scale

    m = M()
    m.register_forward_pre_hook(lambda mod, args, kwargs: (args, {"scale": 3.0}), with_kwargs=True)
    seen = []
    m.register_forward_hook(lambda mod, args, kwargs, out: seen.append(kwargs["scale"]), with_kwargs=True)
    assert m(ng.ones(1)).item() == 3.0 and seen == [3.0]
    m2 = M()
    got = []
    with m2.register_forward_hook(lambda mod, args, out: got.append(out), always_call=True):
        with pytest.raises(ValueError):
            m2(ng.ones(1), scale=-1.0)
    assert got == [None]
    assert not m2._forward_hooks


# ---- repr ---------------------------------------------------------------------------
def test_repr_matches_torch():
    ng_model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Dropout(0.1), nn.Linear(128, 10, bias=False),
                             nn.LogSoftmax(dim=1))
    t_model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Dropout(0.1),
                                  torch.nn.Linear(128, 10, bias=False), torch.nn.LogSoftmax(dim=1))
    assert repr(ng_model) == repr(t_model)
    assert repr(Net()).startswith("Net(\n  (fc1): Linear(in_features=4, out_features=3, bias=True)\n")
    inner = nn.Sequential(nn.Sequential(nn.Linear(1, 1)), nn.Tanh())
    assert repr(inner) == repr(torch.nn.Sequential(torch.nn.Sequential(torch.nn.Linear(1, 1)), torch.nn.Tanh()))
