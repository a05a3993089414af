"""``numbagrad.save``/``load`` (``numbagrad/io/_format.py``): every kind of value round-trips
with its type, the file is plain HDF5 that h5py reads without numbagrad, what the format
cannot hold is refused before anything is written, and loading never unpickles."""
import collections
import io
import json
import os
import subprocess
import sys

import h5py
import numpy as np
import pytest

import numbagrad as ng
from numbagrad.io import CheckpointError


def same(a, b, path="root"):
    """Deep equality with types: dict key order and key types, tuple vs list, dtypes, shapes."""
    assert type(a) is type(b), f"{path}: {type(a).__name__} != {type(b).__name__}"
    if isinstance(a, dict):
        assert list(a) == list(b) and [type(k) for k in a] == [type(k) for k in b], f"{path}: keys"
        for k in a:
            same(a[k], b[k], f"{path}->{k!r}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            same(x, y, f"{path}->{i}")
    elif isinstance(a, ng.Tensor):
        assert a.dtype == b.dtype and a.shape == b.shape and a.requires_grad == b.requires_grad, path
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy(), err_msg=path)
    elif isinstance(a, (np.ndarray, np.generic)):
        assert a.dtype == b.dtype and np.shape(a) == np.shape(b), path
        np.testing.assert_array_equal(a, b, err_msg=path)
    elif isinstance(a, float) and np.isnan(a):
        assert np.isnan(b), path
    else:
        assert a == b, path


def everything():
    rng = np.random.default_rng(0)
    return {
        "model": collections.OrderedDict([("layers.0.weight", ng.tensor(rng.standard_normal((3, 4)).astype(np.float32))),
                                          ("layers.0.bias", ng.zeros(3)), ("bn.num_batches_tracked", ng.tensor(7))]),
        "optimizer": {"state": {0: {"step": ng.tensor(3.0), "exp_avg": ng.ones(3, 4)}, 5: {}},
                      "param_groups": [{"lr": 1e-3, "betas": (0.9, 0.999), "params": [0, 5], "nesterov": False}]},
        "dtypes": [ng.tensor(rng.standard_normal(5).astype(dt)) for dt in (np.float16, np.float32, np.float64)]
        + [ng.tensor(np.array([1, 2, 3], dt) * (1 if dt == np.uint8 else -1)) for dt in (np.int8, np.int16, np.int32, np.int64, np.uint8)]
        + [ng.tensor(np.array([True, False]))],
        "arrays": (np.arange(6).reshape(2, 3), np.zeros((0, 4), np.float32), np.array(2.5), np.array([1 + 2j]),
                   np.asfortranarray(rng.standard_normal((3, 2))), np.arange(10.0)[::3]),
        "scalars": [0, -1, 1 << 63, -(1 << 70), 2 ** 128 + 1, 1.5, float("inf"), float("nan"), True, False,
                    3 + 4j, "", "héllo / wörld", b"", b"\x00\xff", None, np.float32(0.25), np.int16(-3), np.bool_(True)],
        "keys": {"a/b": 1, "": 2, ".": 3, "..": 4, "#0": 5, "ng_type": 6, "3": "str three", 3: "int three", -1: None},
        "param": ng.nn.Parameter(ng.ones(2)),
        "leaf": ng.tensor([1.0, 2.0], requires_grad=True),
        "zero_d": ng.tensor(1.25),
        "empty": {}, "empty_list": [], "empty_tuple": (),
        "nested": [[[{"deep": (1, [2, (3,)])}]]],
    }


def test_everything_round_trips_with_its_types(tmp_path):
    obj = everything()
    ng.save(obj, tmp_path / "c.ckpt")
    back = ng.load(tmp_path / "c.ckpt")
    same(obj, back)
    assert isinstance(back["param"], ng.nn.Parameter) and back["param"].requires_grad
    assert back["leaf"].requires_grad and back["leaf"].is_leaf


@pytest.mark.parametrize("value", [ng.arange(4), [1, 2], (3,), 7, "s", None, np.ones(2)])
def test_a_single_value_round_trips(tmp_path, value):
    ng.save(value, tmp_path / "v.ckpt")
    same(value, ng.load(tmp_path / "v.ckpt"))


def test_file_objects_and_open_files(tmp_path):
    obj = everything()
    buf = io.BytesIO()
    ng.save(obj, buf)
    buf.seek(0)
    same(obj, ng.load(buf))
    with open(tmp_path / "f.ckpt", "wb") as fh:
        ng.save(obj, fh)
    with open(tmp_path / "f.ckpt", "rb") as fh:
        same(obj, ng.load(fh))


def test_plain_h5py_reads_the_layout(tmp_path):
    obj = everything()
    ng.save(obj, str(tmp_path / "c.h5"))
    with h5py.File(tmp_path / "c.h5", "r") as f:
        # strings are fixed-length UTF-8, which h5py returns as bytes
        assert f.attrs["format"] == b"numbagrad.checkpoint" and f.attrs["format_version"] == 1
        assert f.attrs["numbagrad_version"].decode() == ng.__version__
        w = f["model/layers.0.weight"]
        np.testing.assert_array_equal(w[...], obj["model"]["layers.0.weight"].numpy())
        assert w.fletcher32 and dict(w.attrs) == {"ng_type": b"tensor"}  # the rest is in the parent's ng_items
        items = json.loads(f["model"].attrs["ng_items"])
        assert items[0] == ["layers.0.weight", "tensor", "layers.0.weight", {"device": "cpu", "requires_grad": False}]
        np.testing.assert_array_equal(f["optimizer/state/#0/exp_avg"][...], np.ones((3, 4), np.float32))
        assert f["optimizer/param_groups/0"].attrs["lr"] == 1e-3
        assert f["scalars"].attrs["4"] == str(2 ** 128 + 1).encode()  # beyond 64 bits: a decimal string


@pytest.mark.parametrize("compression", ["gzip", "lzf"])
def test_compression_round_trips_and_shrinks(tmp_path, compression):
    obj = {"w": ng.zeros(256, 256), "x": ng.tensor(np.arange(1000) % 7)}
    ng.save(obj, tmp_path / "plain.ckpt")
    ng.save(obj, tmp_path / "small.ckpt", compression=compression)
    same(obj, ng.load(tmp_path / "small.ckpt"))
    assert (tmp_path / "small.ckpt").stat().st_size < (tmp_path / "plain.ckpt").stat().st_size / 4
    with h5py.File(tmp_path / "small.ckpt", "r") as f:
        assert f["w"].compression == compression and f["w"].fletcher32


def test_large_tensors_are_chunked_along_the_first_axis(tmp_path, monkeypatch):
    from numbagrad.io import _format
    monkeypatch.setattr(_format, "CHUNK_BYTES", 4096)
    a = ng.tensor(np.random.default_rng(1).standard_normal((100, 30)))
    ng.save({"a": a}, tmp_path / "c.ckpt")
    with h5py.File(tmp_path / "c.ckpt", "r") as f:
        assert f["a"].chunks == (17, 30)  # 4096 // (30 * 8) rows per chunk
    same({"a": a}, ng.load(tmp_path / "c.ckpt"))


@pytest.mark.parametrize("bad,where,what", [
    ({"optimizer": {"state": {3: {"exp_avg": object()}}}}, "'optimizer' -> 'state' -> 3 -> 'exp_avg'", "object"),
    ({"a": [1, {2.5: 1}]}, "'a' -> 1", "dict key 2.5"),
    ({"a": np.array(["x"])}, "'a'", "dtype <U1"),
    ({"a": collections.namedtuple("P", "x")(1)}, "'a'", "tuple subclass"),
    ({"m": ng.nn.Linear(2, 2)}, "'m'", "state_dict"),
    ({"f": lambda: 0}, "'f'", "function"),
])
def test_unsupported_values_are_refused_with_the_key_path(tmp_path, bad, where, what):
    target = tmp_path / "c.ckpt"
    ng.save({"old": 1}, target)
    with pytest.raises(TypeError) as e:
        ng.save(bad, target)
    assert where in str(e.value) and what in str(e.value)
    assert ng.load(target) == {"old": 1}  # nothing was written
    assert [p.name for p in tmp_path.iterdir()] == ["c.ckpt"]


def test_a_cycle_is_refused(tmp_path):
    a = [1]
    a.append(a)
    with pytest.raises(TypeError, match="contains itself"):
        ng.save({"a": a}, tmp_path / "c.ckpt")


def test_bad_arguments(tmp_path):
    with pytest.raises(ValueError, match="compression"):
        ng.save({}, tmp_path / "c.ckpt", compression="zstd")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        ng.save({}, tmp_path / "no" / "c.ckpt")
    ng.save({"t": ng.ones(1)}, tmp_path / "c.ckpt")
    with pytest.raises(TypeError, match="functions are not supported"):
        ng.load(tmp_path / "c.ckpt", map_location=lambda s, loc: s)
    with pytest.raises(FileNotFoundError):
        ng.load(tmp_path / "missing.ckpt")
    with pytest.raises(TypeError, match="pickle_module"):
        ng.load(tmp_path / "c.ckpt", pickle_module=object())


def test_map_location(tmp_path):
    ng.save({"t": ng.ones(2)}, tmp_path / "c.ckpt")
    assert ng.load(tmp_path / "c.ckpt", map_location="cpu")["t"].device.type == "cpu"
    assert ng.load(tmp_path / "c.ckpt", map_location={"cpu": "cpu"})["t"].device.type == "cpu"
    if not ng.cuda.is_available():
        with pytest.raises(RuntimeError, match="map_location='cpu'"):
            ng.load(tmp_path / "c.ckpt", map_location="cuda")


def test_a_cuda_tagged_tensor_needs_map_location_without_a_gpu(tmp_path):
    from numbagrad.io import _format
    ng.save({"t": ng.ones(2)}, tmp_path / "c.ckpt")
    with h5py.File(tmp_path / "c.ckpt", "r+") as f:  # the device is in ng_items, under ng_crc32
        items = json.loads(f.attrs["ng_items"])
        assert items == [["t", "tensor", "t", {"device": "cpu", "requires_grad": False}]]
        items[0][3]["device"] = "cuda:0"
        text = json.dumps(items)
        f.attrs.create("ng_items", text.encode(), dtype=h5py.string_dtype("utf-8", len(text)))
        with pytest.raises(CheckpointError, match="checksum mismatch in the attributes of group '/'"):
            ng.load(tmp_path / "c.ckpt")  # edited without updating ng_crc32
        f.attrs["ng_crc32"] = np.int64(_format._group_crc("dict", text, [b""]))
    if ng.cuda.is_available():
        assert ng.load(tmp_path / "c.ckpt")["t"].device.type == "cuda"
    else:
        with pytest.raises(RuntimeError, match=r"'t' was saved on cuda:0 and CUDA is not available"):
            ng.load(tmp_path / "c.ckpt")
    assert ng.load(tmp_path / "c.ckpt", map_location="cpu")["t"].device.type == "cpu"


def test_loading_never_unpickles(tmp_path):
    ng.save(everything(), tmp_path / "c.ckpt")
    code = ("import pickle, sys\n"
            "def boom(*a, **k): raise AssertionError('unpickling during load')\n"
            "pickle.loads = pickle.load = boom\n"
            "pickle.Unpickler = boom\n"
            "import numbagrad as ng\n"
            f"ck = ng.load({str(tmp_path / 'c.ckpt')!r})\n"
            "assert ck['optimizer']['param_groups'][0]['betas'] == (0.9, 0.999)\n"
            "print('ok')\n")
    # numba reads its own on-disk kernel cache with pickle: off here, so any unpickling is the loader's
    env = dict(os.environ, NUMBAGRAD_CACHE="0")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-2000:]


def test_foreign_and_newer_files_raise_checkpoint_error(tmp_path):
    p = tmp_path / "foreign.h5"
    with h5py.File(p, "w") as f:
        f["x"] = np.arange(3)
    with pytest.raises(CheckpointError, match="foreign.h5.*not a numbagrad checkpoint"):
        ng.load(p)
    q = tmp_path / "newer.ckpt"
    ng.save({"a": 1}, q)
    with h5py.File(q, "r+") as f:
        f.attrs["format_version"] = 99
    with pytest.raises(CheckpointError, match="format version 99"):
        ng.load(q)
    r = tmp_path / "notes.txt"
    r.write_text("hello")
    with pytest.raises(CheckpointError, match="notes.txt.*not a readable HDF5 file") as e:
        ng.load(r)
    assert e.value.path == str(r)


def test_a_missing_item_is_an_error_naming_the_key(tmp_path):
    p = tmp_path / "c.ckpt"
    ng.save({"model": {"w": ng.ones(2), "b": ng.zeros(2)}}, p)
    with h5py.File(p, "r+") as f:
        del f["model/b"]
    with pytest.raises(CheckpointError, match=r"at key 'model' -> 'b'.*missing dataset") as e:
        ng.load(p)
    assert e.value.key == "'model' -> 'b'"


def test_torch_style_calls(tmp_path):
    m = ng.nn.Linear(3, 2)
    ng.save(m.state_dict(), tmp_path / "m.pt", pickle_protocol=2, _use_new_zipfile_serialization=True)
    m2 = ng.nn.Linear(3, 2)
    m2.load_state_dict(ng.load(tmp_path / "m.pt", weights_only=True))
    np.testing.assert_array_equal(m2.weight.detach().numpy(), m.weight.detach().numpy())
    assert ng.serialization.load is not None and ng.serialization.save is not None


def test_root_keys_named_like_the_format_attributes(tmp_path):
    obj = {"format": 1, "format_version": "x", "numbagrad_version": ng.ones(2), "epoch": 3}
    ng.save(obj, tmp_path / "c.ckpt")
    same(obj, ng.load(tmp_path / "c.ckpt"))
    with h5py.File(tmp_path / "c.ckpt", "r") as f:
        assert f.attrs["format"] == b"numbagrad.checkpoint" and f.attrs["#0"] == 1


def test_load_reads_no_dataset_attribute(tmp_path):
    # ng_type on a dataset is for plain h5py readers; everything load needs is in ng_items
    obj = {"w": ng.ones(3, requires_grad=True), "s": ng.tensor(2.0), "a": np.arange(4)}
    ng.save(obj, tmp_path / "c.ckpt")
    with h5py.File(tmp_path / "c.ckpt", "r+") as f:
        for k in obj:
            del f[k].attrs["ng_type"]
    back = ng.load(tmp_path / "c.ckpt")
    same(obj, back)
    assert back["w"].requires_grad and back["s"].shape == ()


def test_bfloat16_round_trips_as_tagged_uint16(tmp_path):
    """HDF5 has no bfloat16: its bits are stored as uint16 and ng_items tags the dtype."""
    rng = np.random.default_rng(3)
    t = ng.tensor(rng.standard_normal((3, 5)).astype(np.float32)).to(ng.bfloat16)
    obj = {"t": t, "a": np.arange(6, dtype=np.float32).astype(ng.bfloat16), "s": ng.tensor(2.5).to(ng.bfloat16)}
    ng.save(obj, tmp_path / "bf.ckpt")
    back = ng.load(tmp_path / "bf.ckpt")
    assert back["t"].dtype == ng.bfloat16 and back["a"].dtype == ng.bfloat16 and back["s"].shape == ()
    np.testing.assert_array_equal(back["t"].array.view(np.uint16), t.array.view(np.uint16))
    np.testing.assert_array_equal(back["a"].view(np.uint16), obj["a"].view(np.uint16))
    with h5py.File(tmp_path / "bf.ckpt", "r") as f:
        assert f["t"].dtype == np.uint16
