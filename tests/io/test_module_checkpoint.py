"""``Module.save_checkpoint``/``load_checkpoint`` and the functional forms
(``numbagrad/io/checkpoint.py``): the structural hash, the loaded/skipped/missing report,
strict loads that copy nothing on a mismatch, and partial loads for transfer learning."""
import subprocess
import sys

import numpy as np
import pytest

import numbagrad as ng
from numbagrad import nn
from numbagrad.io import CheckpointError, CheckpointMismatch

HASH_CODE = ("import numbagrad as ng; from numbagrad import nn\n"
             "m = nn.Sequential(nn.Conv2d(1, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 6 * 6, 3))\n"
             "print(ng.io.module_structure_hash(m))")


def net(out=3):
    return nn.Sequential(nn.Conv2d(1, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 6 * 6, out))


def params(m):
    return {k: v.detach().numpy().copy() for k, v in m.state_dict().items()}


def test_round_trip_restores_parameters_and_buffers(tmp_path):
    ng.manual_seed(0)
    a = net()
    a.train()
    a(ng.randn(2, 1, 8, 8))  # moves the BatchNorm running statistics
    h = a.save_checkpoint(tmp_path / "a.ckpt", extra={"epoch": 4})
    ng.manual_seed(1)
    b = net()
    rep = b.load_checkpoint(tmp_path / "a.ckpt")
    assert rep.complete and rep.hash_matches and rep.file_hash == h
    assert sorted(rep.loaded) == sorted(a.state_dict()) and rep.skipped == [] and rep.missing == []
    for k, v in params(a).items():
        np.testing.assert_array_equal(params(b)[k], v, err_msg=k)
    assert ng.io.read_checkpoint(tmp_path / "a.ckpt")["extra"] == {"epoch": 4}
    x = ng.randn(3, 1, 8, 8)
    a.eval(), b.eval()
    np.testing.assert_array_equal(a(x).detach().numpy(), b(x).detach().numpy())


def test_the_hash_is_the_same_in_another_process_and_tracks_structure():
    h_here = ng.io.module_structure_hash(net())
    r = subprocess.run([sys.executable, "-c", HASH_CODE], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == h_here
    assert ng.io.module_structure_hash(net(out=4)) != h_here  # a shape
    other = nn.Sequential(nn.Conv2d(1, 4, 3), nn.BatchNorm2d(4), nn.Tanh(), nn.Flatten(), nn.Linear(144, 3))
    assert ng.io.module_structure_hash(other) != h_here  # a module type, same parameters
    assert ng.io.module_structure_hash(net().double()) == h_here  # dtype is not structure


def test_strict_load_of_another_structure_raises_and_copies_nothing(tmp_path):
    net().save_checkpoint(tmp_path / "a.ckpt")
    b = net(out=5)
    before = params(b)
    with pytest.raises(CheckpointMismatch) as e:
        b.load_checkpoint(tmp_path / "a.ckpt")
    msg = str(e.value)
    assert "nothing was loaded" in msg and "shape of '4.weight': file (3, 144), model (5, 144)" in msg
    assert e.value.report.mismatched == [("4.weight", (3, 144), (5, 144)), ("4.bias", (3,), (5,))]
    for k, v in before.items():
        np.testing.assert_array_equal(params(b)[k], v)


def test_partial_load_into_a_bigger_model(tmp_path):
    ng.manual_seed(0)
    small = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    small.save_checkpoint(tmp_path / "small.ckpt")
    big = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 6), nn.ReLU(), nn.Linear(6, 2))
    rep = big.load_checkpoint(tmp_path / "small.ckpt", strict=False)
    assert rep.loaded == ["0.weight", "0.bias"]
    assert rep.skipped == ["2.weight", "2.bias"] and [m[0] for m in rep.mismatched] == ["2.weight", "2.bias"]
    assert rep.missing == ["4.weight", "4.bias"] and rep.hash_matches is False and not rep.complete
    assert rep.not_loaded == ["4.weight", "4.bias", "2.weight", "2.bias"]
    np.testing.assert_array_equal(big[0].weight.detach().numpy(), small[0].weight.detach().numpy())
    assert "in the model, not in the file: 4.weight, 4.bias" in str(rep)


def test_non_persistent_buffers_are_left_out(tmp_path):
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(2, 2)
            self.register_buffer("scratch", ng.zeros(3), persistent=False)
            self.register_buffer("count", ng.tensor(0))

    m = M()
    m.save_checkpoint(tmp_path / "m.ckpt")
    ck = ng.io.read_checkpoint(tmp_path / "m.ckpt")
    assert list(ck["buffers"]) == ["count"] and list(ck["parameters"]) == ["lin.weight", "lin.bias"]
    assert M().load_checkpoint(tmp_path / "m.ckpt").complete


def test_functional_form_with_any_collection(tmp_path):
    w = ng.randn(3, 2)
    stats = np.arange(4.0)
    h = ng.io.save_checkpoint(tmp_path / "c.ckpt", {"w": w}, [("stats", stats)])
    assert h == ng.io.structure_hash({"w": w}, {"stats": stats})
    w2, stats2 = ng.zeros(3, 2), np.zeros(4)
    rep = ng.io.load_checkpoint(tmp_path / "c.ckpt", {"w": w2}, {"stats": stats2}, expected_hash=h)
    assert rep.complete and rep.loaded == ["w", "stats"]
    np.testing.assert_array_equal(w2.numpy(), w.numpy())
    np.testing.assert_array_equal(stats2, stats)
    with pytest.raises(CheckpointMismatch, match="structure hash differs"):
        ng.io.load_checkpoint(tmp_path / "c.ckpt", {"w": w2}, {"stats": stats2}, expected_hash="0" * 64)
    with pytest.raises(TypeError, match=r"\(str, Tensor\) pairs"):
        ng.io.load_checkpoint(tmp_path / "c.ckpt", {"w": [1, 2]})


def test_a_plain_checkpoint_is_not_a_module_checkpoint(tmp_path):
    ng.save({"model": net().state_dict()}, tmp_path / "plain.ckpt")
    with pytest.raises(CheckpointError, match="not a module checkpoint"):
        net().load_checkpoint(tmp_path / "plain.ckpt")


def test_loading_casts_into_the_models_dtype(tmp_path):
    a = nn.Linear(3, 2)
    a.save_checkpoint(tmp_path / "a.ckpt")
    b = nn.Linear(3, 2).double()
    assert b.load_checkpoint(tmp_path / "a.ckpt").complete
    assert b.weight.dtype == np.float64
    np.testing.assert_array_equal(b.weight.detach().numpy(), a.weight.detach().numpy().astype(np.float64))
