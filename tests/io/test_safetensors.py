"""safetensors interchange: numbagrad.io.save_safetensors / load_safetensors.

Round trips of every dtype and of a model, the file's order and metadata, interop with
safetensors.torch (skipped without torch), the errors, the missing-package guard and
the atomic write."""
import glob
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import numbagrad as ng
from numbagrad.io import safetensors_io
from numbagrad.io.errors import CheckpointError
from numbagrad.io.safetensors_io import load_safetensors, save_safetensors

safetensors = pytest.importorskip("safetensors")
import safetensors.numpy  # noqa: E402

DTYPES = [np.bool_, np.uint8, np.int8, np.int16, np.int32, np.int64,
          np.float16, np.float32, np.float64]
SHAPES = [(), (0,), (3, 0, 2), (5,), (2, 3), (2, 1, 4)]


def _values(dtype, shape, rng):
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.integers(0, 2, size=shape).astype(bool)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        # the extremes too: the bytes must come back, not a clipped cast
        flat = rng.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True).ravel()
        flat[:2] = [info.min, info.max][:flat.size]
        return flat.reshape(shape)
    flat = rng.standard_normal(size=shape).astype(dtype).ravel()
    specials = np.array([np.inf, -0.0, np.finfo(dtype).tiny, np.finfo(dtype).max], dtype=dtype)
    flat[:4] = specials[:min(4, flat.size)]
    return flat.reshape(shape)


def _raw_file(path, entries, metadata=None):
    """Write a safetensors file by hand (the format is 8 bytes of header length, the
    JSON header, the data): lets the tests make BF16/F8/U16 files without torch."""
    header, blobs, offset = {}, [], 0
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, (tag, shape, data) in entries.items():
        header[name] = {"dtype": tag, "shape": list(shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as fh:
        fh.write(len(text).to_bytes(8, "little") + text + b"".join(blobs))


def _temp_files(folder):
    return glob.glob(os.path.join(str(folder), ".*.tmp-*"))


# ---- round trips ------------------------------------------------------------------------
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_round_trip_every_dtype(tmp_path, shape):
    rng = np.random.default_rng(0)
    state = {f"t_{np.dtype(d).name}": _values(d, shape, rng) for d in DTYPES}
    # half of them as numbagrad Tensors, half as NumPy arrays
    state = {k: (ng.tensor(v) if i % 2 else v) for i, (k, v) in enumerate(state.items())}
    path = tmp_path / "all.safetensors"
    save_safetensors(state, path)
    loaded = load_safetensors(path)
    assert set(loaded) == set(state)
    for key, value in state.items():
        want = value.numpy() if isinstance(value, ng.Tensor) else value
        got = loaded[key]
        assert isinstance(got, ng.Tensor) and got.device.type == "cpu" and not got.requires_grad
        assert got.dtype == want.dtype and tuple(got.shape) == want.shape, key
        # byte-exact: -0.0, inf and the integer extremes included
        assert got.numpy().tobytes() == want.tobytes(), key
    # what the NumPy API of safetensors itself reads agrees
    ref = safetensors.numpy.load_file(str(path))
    for key in state:
        assert np.array_equal(ref[key], loaded[key].numpy())


def test_order_is_the_files_order(tmp_path):
    # inserted in neither name nor dtype order: the file sorts by dtype alignment, then name
    state = {"z": np.zeros(2, np.float32), "a": np.ones(3, np.int8), "m": np.arange(4.0),
             "b": np.zeros((), np.float16), "c": np.zeros((0, 2), np.int64), "y": np.ones(1, np.float32)}
    path = tmp_path / "order.safetensors"
    save_safetensors(state, path)
    keys = list(load_safetensors(path))
    assert keys == ["c", "m", "y", "z", "b", "a"]
    with safetensors.safe_open(str(path), "np") as f:
        if hasattr(f, "offset_keys"):  # safetensors >= 0.6 says the same
            assert keys == list(f.offset_keys())
    # deterministic: the same dict in another insertion order gives the same bytes
    other = tmp_path / "order2.safetensors"
    save_safetensors(dict(reversed(list(state.items()))), other)
    assert path.read_bytes() == other.read_bytes()


def test_metadata_round_trip(tmp_path):
    path = tmp_path / "meta.safetensors"
    meta = {"format": "pt", "note": "ünïcode ✓", "empty": ""}
    save_safetensors({"w": np.eye(2, dtype=np.float32)}, path, metadata=meta)
    with safetensors.safe_open(str(path), "np") as f:
        assert f.metadata() == meta
    save_safetensors({"w": np.eye(2, dtype=np.float32)}, path)
    with safetensors.safe_open(str(path), "np") as f:
        assert not f.metadata()


def test_empty_state_dict(tmp_path):
    path = tmp_path / "empty.safetensors"
    save_safetensors({}, path)
    assert load_safetensors(path) == {}


def test_non_contiguous_big_endian_and_shared_memory(tmp_path):
    base = np.arange(24, dtype=np.float32).reshape(4, 6)
    state = {
        "transposed": base.T,                      # F-ordered view
        "strided": base[::2, 1::2],                # strided view
        "big_endian": base.astype(">f4"),          # non-native byte order
        "tied_a": base, "tied_b": base,            # the same memory twice
        "ng_view": ng.tensor(base).t(),            # a Tensor over a strided view
    }
    path = tmp_path / "views.safetensors"
    save_safetensors(state, path)
    loaded = load_safetensors(path)
    for key, value in state.items():
        want = value.numpy() if isinstance(value, ng.Tensor) else value
        assert np.array_equal(loaded[key].numpy(), want), key
        assert loaded[key].dtype == np.float32
    # tied weights come back as equal, independent copies
    a, b = loaded["tied_a"].numpy(), loaded["tied_b"].numpy()
    assert not np.shares_memory(a, b)
    a[0, 0] = -1
    assert b[0, 0] == 0


def test_loaded_tensors_are_writable_and_outlive_the_file(tmp_path):
    path = tmp_path / "w.safetensors"
    save_safetensors({"w": np.arange(6, dtype=np.float32).reshape(2, 3)}, path)
    t = load_safetensors(str(path))["w"]
    os.remove(path)
    t.add_(1)
    assert np.array_equal(t.numpy(), np.arange(1, 7, dtype=np.float32).reshape(2, 3))


def _model():
    return ng.nn.Sequential(ng.nn.Linear(4, 8), ng.nn.ReLU(), ng.nn.Linear(8, 2))


def test_model_round_trip(tmp_path):
    model = _model()
    path = tmp_path / "model.safetensors"
    save_safetensors(model.state_dict(), path)
    ng.manual_seed(123)
    fresh = _model()
    assert not np.array_equal(fresh[0].weight.detach().numpy(), model[0].weight.detach().numpy())
    result = fresh.load_state_dict(load_safetensors(path))
    assert not result.missing_keys and not result.unexpected_keys
    for (name, p), (name2, q) in zip(model.state_dict().items(), fresh.state_dict().items()):
        assert name == name2 and np.array_equal(p.numpy(), q.numpy()), name
    x = ng.randn(5, 4)
    assert np.array_equal(model(x).detach().numpy(), fresh(x).detach().numpy())
    # the Parameters themselves (requires_grad) save to the same bytes
    with_vars = tmp_path / "vars.safetensors"
    save_safetensors(model.state_dict(keep_vars=True), with_vars)
    assert with_vars.read_bytes() == path.read_bytes()


# ---- bfloat16 and dtypes numbagrad lacks -----------------------------------------------
def test_bf16_is_widened_to_float32_exactly(tmp_path):
    # 1, -2.5, 3.140625, inf, -0.0, the smallest subnormal: every one exact in bfloat16
    bits = np.array([[0x3F80, 0xC020, 0x4049], [0x7F80, 0x8000, 0x0001]], dtype="<u2")
    f32 = np.array([[1.0, -2.5, 3.140625], [np.inf, -0.0, 2.0 ** -133]], dtype=np.float32)
    path = tmp_path / "bf16.safetensors"
    _raw_file(path, {"w": ("BF16", f32.shape, bits.tobytes()),
                     "s": ("BF16", (), np.array([0x3F80], "<u2").tobytes()),
                     "b": ("F32", (1,), np.float32([7]).tobytes())})
    loaded = load_safetensors(path)
    assert loaded["w"].dtype == np.float32
    assert loaded["w"].numpy().tobytes() == f32.tobytes()
    assert loaded["s"].shape == () and loaded["s"].item() == 1.0
    assert loaded["b"].numpy().tolist() == [7.0]


@pytest.mark.parametrize("tag,itemsize", [("U16", 2), ("U32", 4), ("U64", 8), ("F8_E4M3", 1), ("C64", 8)])
def test_dtype_numbagrad_lacks_names_tensor_and_dtype(tmp_path, tag, itemsize):
    path = tmp_path / "odd.safetensors"
    _raw_file(path, {"fine": ("F32", (1,), b"\0" * 4), "odd": (tag, (2,), b"\0" * 2 * itemsize)})
    try:
        with safetensors.safe_open(str(path), "np"):
            known = True
    except safetensors.SafetensorError:  # F8 and C64 are newer than safetensors 0.4.0
        known = False
    with pytest.raises(CheckpointError) as info:
        load_safetensors(path)
    assert info.value.path == str(path) and str(path) in str(info.value)
    if known:
        assert info.value.key == "odd" and "odd" in str(info.value) and tag in str(info.value)


# ---- interop with PyTorch ---------------------------------------------------------------
def test_torch_written_file_loads(tmp_path):
    torch = pytest.importorskip("torch")
    import safetensors.torch
    torch.manual_seed(0)
    lin = torch.nn.Linear(3, 5)
    state = {k: v.detach() for k, v in lin.state_dict().items()}
    state.update(steps=torch.tensor(7), mask=torch.tensor([True, False]),
                 half=torch.randn(2, 2).half(), brain=torch.randn(3).bfloat16())
    path = tmp_path / "torch.safetensors"
    safetensors.torch.save_file(state, str(path), metadata={"format": "pt"})
    loaded = load_safetensors(path)
    assert set(loaded) == set(state)
    for key, value in state.items():
        want = value.float().numpy() if value.dtype == torch.bfloat16 else value.numpy()
        assert loaded[key].dtype == want.dtype, key
        assert loaded[key].numpy().tobytes() == want.tobytes(), key
    # into the numbagrad twin of the layer, same outputs
    twin = ng.nn.Linear(3, 5)
    twin.load_state_dict({k: loaded[k] for k in ("weight", "bias")})
    x = np.random.default_rng(1).standard_normal((4, 3)).astype(np.float32)
    np.testing.assert_array_equal(twin(ng.tensor(x)).detach().numpy(),
                                  lin(torch.from_numpy(x)).detach().numpy())


def test_numbagrad_written_file_loads_in_torch(tmp_path):
    torch = pytest.importorskip("torch")
    import safetensors.torch
    layer = ng.nn.Linear(3, 5)
    state = dict(layer.state_dict())
    state["ids"] = np.arange(4, dtype=np.int64)
    state["flags"] = ng.tensor([True, False, True])
    path = tmp_path / "ng.safetensors"
    save_safetensors(state, path, metadata={"format": "pt"})
    loaded = safetensors.torch.load_file(str(path))
    assert set(loaded) == set(state)
    for key, value in state.items():
        want = value.numpy() if isinstance(value, ng.Tensor) else value
        assert loaded[key].numpy().dtype == want.dtype and np.array_equal(loaded[key].numpy(), want), key
    lin = torch.nn.Linear(3, 5)
    lin.load_state_dict({k: loaded[k] for k in ("weight", "bias")})
    x = np.random.default_rng(1).standard_normal((4, 3)).astype(np.float32)
    np.testing.assert_array_equal(lin(torch.from_numpy(x)).detach().numpy(),
                                  layer(ng.tensor(x)).detach().numpy())


# ---- errors -----------------------------------------------------------------------------
@pytest.mark.parametrize("state,key,typename", [
    ({"w": np.zeros(2), "nested": {"a": np.zeros(1)}}, "nested", "dict"),
    ({"w": np.zeros(2), 3: np.zeros(1)}, "3", "int"),
    ({"name": "a string"}, "name", "str"),
    ({"lr": 0.1}, "lr", "float"),
    ({"step": np.int64(3)}, "step", "int64"),
    ({"objs": np.array([1, "a"], dtype=object)}, "objs", "object"),
    ({"c": np.zeros(2, np.complex64)}, "c", "complex64"),
    ({"u": np.zeros(2, np.uint16)}, "u", "uint16"),
])
def test_bad_state_dict_raises_type_error_naming_the_key(tmp_path, state, key, typename):
    path = tmp_path / "bad.safetensors"
    with pytest.raises(TypeError) as info:
        save_safetensors(state, path)
    assert repr(key) in str(info.value) or key in str(info.value)
    assert typename in str(info.value)
    assert not path.exists() and not _temp_files(tmp_path)


def test_bad_arguments(tmp_path):
    path = tmp_path / "bad.safetensors"
    with pytest.raises(TypeError, match="mapping"):
        save_safetensors([np.zeros(2)], path)
    with pytest.raises(TypeError, match="'epoch'.*int"):
        save_safetensors({"w": np.zeros(2)}, path, metadata={"epoch": 3})
    with pytest.raises(TypeError, match="metadata key 1"):
        save_safetensors({"w": np.zeros(2)}, path, metadata={1: "x"})
    with pytest.raises(ValueError, match="__metadata__"):
        save_safetensors({"__metadata__": np.zeros(2)}, path)
    assert not path.exists()


def _valid_bytes(tmp_path):
    path = tmp_path / "valid.safetensors"
    save_safetensors({"a": np.arange(10, dtype=np.float32), "b": np.ones((2, 2), np.int64)}, path)
    return path.read_bytes()


@pytest.mark.parametrize("corrupt", [
    lambda b: b"",
    lambda b: b"\x01\x02\x03",
    lambda b: b"definitely not a safetensors file, just some text" * 3,
    lambda b: b[:-5],                                     # truncated data
    lambda b: b[:20],                                     # truncated header
    lambda b: b + b"\0" * 8,                              # trailing bytes
    lambda b: (2 ** 40).to_bytes(8, "little") + b[8:],    # absurd header length
    lambda b: b[:8] + b"[" + b[9:],                       # header not JSON
], ids=["empty", "tiny", "text", "truncated-data", "truncated-header", "trailing", "huge-header", "bad-json"])
def test_corrupted_files_raise_checkpoint_error_naming_the_path(tmp_path, corrupt):
    path = tmp_path / "broken.safetensors"
    path.write_bytes(corrupt(_valid_bytes(tmp_path)))
    with pytest.raises(CheckpointError) as info:
        load_safetensors(path)
    assert info.value.path == str(path) and str(path) in str(info.value)


def test_missing_file_is_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError):
        load_safetensors(tmp_path / "nope.safetensors")


def test_missing_package_raises_import_error_with_pip_command(tmp_path, monkeypatch):
    for name in [m for m in sys.modules if m == "safetensors" or m.startswith("safetensors.")]:
        monkeypatch.setitem(sys.modules, name, None)
    with pytest.raises(ImportError, match=r'pip install "numbagrad\[safetensors\]"'):
        save_safetensors({"w": np.zeros(2)}, tmp_path / "x.safetensors")
    with pytest.raises(ImportError, match="pip install safetensors"):
        load_safetensors(tmp_path / "x.safetensors")
    assert not (tmp_path / "x.safetensors").exists()


def test_numbagrad_imports_without_safetensors():
    # A fresh interpreter where `import safetensors` fails: numbagrad, numbagrad.io and
    # this module import, and only the call raises.
    code = (
        "import sys; sys.modules['safetensors'] = None\n"
        "import numbagrad, numbagrad.io\n"
        "from numbagrad.io.safetensors_io import save_safetensors\n"
        "try:\n"
        "    save_safetensors({}, 'unused.safetensors')\n"
        "except ImportError as ex:\n"
        "    print('IMPORT-ERROR', ex)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    assert out.returncode == 0, out.stderr
    assert "IMPORT-ERROR" in out.stdout and "pip install" in out.stdout


# ---- atomic write -----------------------------------------------------------------------
def test_failed_write_keeps_the_old_file_and_leaves_no_temp(tmp_path, monkeypatch):
    path = tmp_path / "model.safetensors"
    save_safetensors({"w": np.full(3, 1.0, np.float32)}, path)
    before = path.read_bytes()

    def failing_save_file(tensors, filename, metadata=None):
        with open(filename, "wb") as fh:  # half a file, then the crash
            fh.write(b"\x10\x00\x00\x00\x00\x00\x00\x00{\"w\":")
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(safetensors.numpy, "save_file", failing_save_file)
    with pytest.raises(RuntimeError, match="disk on fire"):
        save_safetensors({"w": np.full(3, 2.0, np.float32)}, path)
    assert path.read_bytes() == before
    assert load_safetensors(path)["w"].numpy().tolist() == [1.0, 1.0, 1.0]
    assert not _temp_files(tmp_path)
    assert sorted(os.listdir(tmp_path)) == ["model.safetensors"]


def test_successful_write_replaces(tmp_path):
    path = tmp_path / "model.safetensors"
    save_safetensors({"w": np.zeros(2, np.float32)}, path)
    save_safetensors({"v": np.ones(2, np.float64)}, str(path))
    loaded = load_safetensors(path)
    assert list(loaded) == ["v"] and loaded["v"].numpy().tolist() == [1.0, 1.0]
    assert not _temp_files(tmp_path)


# ---- CUDA -------------------------------------------------------------------------------
@pytest.mark.skipif(not ng.cuda.is_available(), reason="no CUDA device")
def test_cuda_tensors_are_copied_to_host_and_loaded_onto_the_device(tmp_path):
    state = {"w": ng.tensor(np.arange(6, dtype=np.float32).reshape(2, 3)).to("cuda"),
             "i": ng.tensor(np.arange(3, dtype=np.int64)).to("cuda")}
    path = tmp_path / "cuda.safetensors"
    save_safetensors(state, path)
    on_host = load_safetensors(path)
    on_device = load_safetensors(path, device="cuda")
    for key, value in state.items():
        assert on_host[key].device.type == "cpu"
        assert on_device[key].device.type == "cuda"
        assert np.array_equal(on_host[key].numpy(), value.cpu().numpy())
        assert np.array_equal(on_device[key].cpu().numpy(), value.cpu().numpy())
