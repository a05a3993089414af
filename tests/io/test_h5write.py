"""The checkpoint file built directly (``numbagrad/io/_h5write.py``) against h5py's.

* Its checksum, lookup3, equals the HDF5 library's own: every object header and the
  superblock of files the library wrote.
* Saved both ways (``FastWriter``, and h5py through ``_format._Writer``), the files hold
  the same tree, read with plain h5py: the same groups, datasets and attributes; every
  attribute and dataset of the same HDF5 datatype (``H5Tequal``), shape and value; every
  dataset chunked the same, with the same filters; and ``numbagrad.load`` returns equal
  objects from both.
* What the built file cannot hold (a complex value, an empty byte string, compression, a
  dataset of many chunks, an attribute of 64 KB) is written by h5py instead, and loads.
"""
import collections
import io
import struct

import h5py
import numpy as np
import pytest

import numbagrad as ng
from numbagrad.io import _format, _h5write
from test_format import everything, same


def _headers(buf):
    """``(start, end)`` of every version 2 object header in the file's bytes ``buf`` (found
    by its signature; the checksum follows ``end``)."""
    out, i = [], buf.find(b"OHDR")
    while i >= 0:
        flags = buf[i + 5]
        at = i + 6 + (16 if flags & 0x20 else 0) + (4 if flags & 0x10 else 0)
        width = 1 << (flags & 0x03)
        size = int.from_bytes(buf[at:at + width], "little")
        out.append((i, at + width + size))
        i = buf.find(b"OHDR", i + 4)
    return out


def test_lookup3_is_hdf5s_metadata_checksum(tmp_path):
    """Headers of many lengths (so every tail length of the hash) from files libhdf5 wrote."""
    checked, tails = 0, set()
    for n in range(1, 40):
        p = tmp_path / f"f{n}.h5"
        with h5py.File(p, "w", libver="latest") as f:
            for i in range(n % 9):
                f.attrs["a" * (i + 1)] = "x" * (n + i)
            f.create_dataset("d" * n, data=np.arange(n))
        buf = p.read_bytes()
        assert _h5write.lookup3(buf[:44]) == struct.unpack("<I", buf[44:48])[0]  # superblock v2/v3
        for start, end in _headers(buf):
            assert _h5write.lookup3(buf[start:end]) == struct.unpack("<I", buf[end:end + 4])[0]
            tails.add((end - start) % 12)
            checked += 1
    assert checked >= 60 and len(tails) >= 4


def test_hdf5_verifies_the_built_headers_of_every_length(tmp_path):
    """libhdf5 checks each object header's checksum when it reads it: the built files'
    headers, of every length mod 12 (each tail case of the hash), read back; one flipped
    header byte is refused by the library."""
    tails = set()
    for n in range(40):
        obj = {"s": "x" * n, "w": ng.arange(n % 5 + 1)}
        ng.save(obj, tmp_path / "c.ckpt")
        buf = (tmp_path / "c.ckpt").read_bytes()
        tails |= {(end - start) % 12 for start, end in _headers(buf)}
        with h5py.File(tmp_path / "c.ckpt", "r") as f:
            assert f.attrs["s"] == ("x" * n).encode() and list(f["w"][()]) == list(range(n % 5 + 1))
    assert tails == set(range(12))
    start, end = _headers(buf)[-1]                      # the root group's header, written last
    bad = bytearray(buf)
    bad[end - 3] ^= 0x01
    (tmp_path / "bad.ckpt").write_bytes(bytes(bad))
    with pytest.raises((OSError, KeyError), match="incorrect metadata checksum"):
        with h5py.File(tmp_path / "bad.ckpt", "r") as f:
            f.attrs["s"]


def fast_everything():
    """Every kind of value the built file holds: test_format's ``everything`` without its
    complex values and empty byte strings, and more dtypes, keys and sizes."""
    obj = everything()
    obj["arrays"] = tuple(a for a in obj["arrays"] if a.dtype.kind != "c") + (np.zeros((2, 0, 3)),)
    obj["scalars"] = [v for v in obj["scalars"] if not isinstance(v, complex) and not (type(v) is bytes and not v)]
    obj["scalars"] += ["ends in NUL\x00", np.uint64(2 ** 64 - 1), np.float16(-0.5)]
    obj["dtypes"] += [np.array([1, 2], dt) for dt in (np.uint16, np.uint32, np.uint64)]
    obj["dtypes"].append(ng.tensor(np.arange(4, dtype=np.float32)).to(ng.bfloat16))
    obj["keys"]["ünï"] = [1]
    obj["many"] = {f"k{i}": float(i) for i in range(300)}
    obj["long"] = "x" * 60000
    return obj


def _tree(f):
    """``{path: ("group"|"dataset", attrs, extra)}`` of an h5py file, every attribute as
    ``(TypeID, shape, value)``."""
    out = {}

    def attrs(obj):
        res = {}
        for name in obj.attrs:
            a = h5py.h5a.open(obj.id, name.encode())
            res[name] = (a.get_type(), a.shape, obj.attrs[name])
        return res

    def visit(name, obj):
        if isinstance(obj, h5py.Dataset):
            out[name] = ("dataset", attrs(obj), (obj.id.get_type(), obj.shape, obj.chunks,
                                                 obj.fletcher32, obj.compression, obj[()]))
        else:
            out[name] = ("group", attrs(obj), None)
    out["/"] = ("group", attrs(f), None)
    f.visititems(visit)
    return out


def _equal(a, b):
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a, b = np.asarray(a), np.asarray(b)
        return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b, equal_nan=a.dtype.kind == "f")
    if isinstance(a, float) and np.isnan(a):
        return np.isnan(b)
    return a == b


@pytest.mark.parametrize("checksum", [True, False])
def test_the_built_file_equals_h5pys(tmp_path, monkeypatch, checksum):
    obj = fast_everything()
    assert _format._built(obj, checksum) is not None
    ng.save(obj, tmp_path / "built.ckpt", checksum=checksum)
    with monkeypatch.context() as m:
        m.setattr(_format, "_built", lambda obj, checksum: None)
        ng.save(obj, tmp_path / "h5py.ckpt", checksum=checksum)
    with h5py.File(tmp_path / "built.ckpt", "r") as fb, h5py.File(tmp_path / "h5py.ckpt", "r") as fh:
        tb, th = _tree(fb), _tree(fh)
    assert list(tb) == list(th) or sorted(tb) == sorted(th)
    for path in th:
        kind, attrs, extra = th[path]
        kind_b, attrs_b, extra_b = tb[path]
        assert kind_b == kind, path
        assert sorted(attrs_b) == sorted(attrs), path
        for name, (tid, shape, value) in attrs.items():
            tid_b, shape_b, value_b = attrs_b[name]
            assert tid_b == tid, (path, name)           # H5Tequal
            assert shape_b == shape and _equal(value_b, value), (path, name, value_b, value)
        if kind == "dataset":
            assert extra_b[0] == extra[0], path
            assert extra_b[1:5] == extra[1:5], (path, extra_b[1:5], extra[1:5])
            assert _equal(extra_b[5], extra[5]), path
    same(ng.load(tmp_path / "built.ckpt"), ng.load(tmp_path / "h5py.ckpt"))
    same(ng.load(tmp_path / "built.ckpt"), obj)


def test_a_file_object_gets_the_built_file(tmp_path):
    obj = fast_everything()
    buf = io.BytesIO(b"old content that is longer than nothing" * 10000)
    ng.save(obj, buf)
    data = buf.getvalue()
    assert data[:8] == b"\x89HDF\r\n\x1a\n" and len(data) == struct.unpack("<Q", data[28:36])[0]  # end of file
    buf.seek(0)
    same(ng.load(buf), obj)
    with open(tmp_path / "f.ckpt", "wb") as fh:   # a real file: written with os.writev
        ng.save(obj, fh)
    assert (tmp_path / "f.ckpt").read_bytes() == data
    same(ng.load(tmp_path / "f.ckpt"), obj)


@pytest.mark.parametrize("case", ["complex", "npcomplex", "empty_bytes", "long_text", "compression", "many_chunks"])
def test_what_the_built_file_cannot_hold_is_written_by_h5py(tmp_path, monkeypatch, case):
    obj = {"w": ng.ones(300), "x": 1}
    kw = {}
    if case == "complex":
        obj["x"] = 1 + 2j
    elif case == "npcomplex":
        obj["x"] = np.array([1 + 2j, 3j])
    elif case == "empty_bytes":
        obj["x"] = b""
    elif case == "long_text":
        obj["x"] = "y" * 70000
    elif case == "compression":
        kw["compression"] = "gzip"
    else:
        monkeypatch.setattr(_format, "CHUNK_BYTES", 256)
    if case != "compression":
        assert _format._built(obj, True) is None
    ng.save(obj, tmp_path / "c.ckpt", **kw)
    same(ng.load(tmp_path / "c.ckpt"), obj)
    with h5py.File(tmp_path / "c.ckpt", "r") as f:
        assert f["w"].fletcher32 and (case != "many_chunks" or f["w"].chunks[0] <= 64)


# ---- a file rebuilt from the plan of one of the same structure ------------------------------------
def _changed(v, rng, p):
    """A copy of ``v`` of the same structure (``_format.signature``) whose arrays hold new
    values and whose int, float, bool and NumPy scalars change with probability ``p``."""
    if isinstance(v, dict):
        return type(v)((k, _changed(x, rng, p)) for k, x in v.items())
    if isinstance(v, (list, tuple)):
        return type(v)(_changed(x, rng, p) for x in v)

    def fresh(a):
        if a.dtype == ng.bfloat16 or a.dtype.kind == "f":
            return rng.standard_normal(a.shape).astype(a.dtype)
        if a.dtype.kind == "b":
            return rng.random(a.shape) < 0.5
        return rng.integers(0, 100, a.shape).astype(a.dtype)
    if isinstance(v, ng.Tensor):
        t = ng.tensor(fresh(v.detach().numpy()))
        return ng.nn.Parameter(t, requires_grad=v.requires_grad) if isinstance(v, ng.nn.Parameter) \
            else t.requires_grad_(v.requires_grad)
    if isinstance(v, np.ndarray):
        return fresh(v)
    if rng.random() >= p:
        return v
    if type(v) is bool:
        return not v
    if type(v) is int and -(1 << 63) <= v < (1 << 63):
        return v - 7 if v > 0 else v + 7
    if type(v) is float:
        return float(rng.choice([rng.standard_normal(), np.inf, -0.0, np.nan]))
    if isinstance(v, np.bool_):
        return np.bool_(not v)
    if isinstance(v, np.integer):
        return type(v)(rng.integers(0, 100))
    if isinstance(v, np.floating):
        return type(v)(rng.standard_normal())
    return v


def _bytes(built):
    return b"".join(bytes(p) for p in built.parts)


def _walked(obj, checksum):
    out = _h5write.FastWriter(checksum)
    out.finish(_format._Walk(out).write(obj))
    return _bytes(out)


@pytest.mark.parametrize("checksum", [True, False])
def test_a_file_built_from_kept_subtrees_is_the_walks_file(monkeypatch, checksum):
    """A save of a state saved before in part puts the kept subtrees' bytes in
    (``_h5write._Template``), their values, checksums and addresses rewritten: byte for
    byte the file the walk builds, for every mix of changed values, grown lists and
    moved subtrees, and it loads back as the new object."""
    reused = []
    real = _h5write._reuse
    monkeypatch.setattr(_h5write, "_reuse", lambda w, tpl, leaves: reused.append(len(leaves)) or real(w, tpl, leaves))
    monkeypatch.setattr(_format, "_TEMPLATES", collections.OrderedDict())
    monkeypatch.setattr(_format, "_SEEN", collections.OrderedDict())
    first = fast_everything()
    first["text"] = {"same length": "abc", "big": 1 << 100, "empty": ""}
    for _ in range(2):   # a template is kept at a subtree's second sighting
        assert _bytes(_format._built(first, checksum)) == _walked(first, checksum)
    assert not reused or set(reused) == {0}   # within the file: its empty dicts
    rng = np.random.default_rng(1)
    for p in (0.0, 0.05, 0.3, 1.0):
        obj = _changed(first, rng, p)
        obj["text"] = {"same length": "xyz", "big": (1 << 100) + 12345, "empty": "q"}   # same stored sizes
        built = _format._built(obj, checksum)
        assert _bytes(built) == _walked(obj, checksum), p
        same(ng.load(io.BytesIO(_bytes(built))), obj)
        assert reused[-1] == len(_format.signature(obj)[1])   # the whole file, from the root's template
    # a list grown by one: that list and the root are walked, every other subtree is kept,
    # and those after the list move (their addresses rewritten)
    n = len(reused)
    obj = _changed(first, rng, 1.0)
    obj["model"] = collections.OrderedDict(list(obj["model"].items()) + [("extra", ng.ones(2))])
    obj["scalars"].append(2.5)
    obj["text"]["same length"] = "a longer text"
    for _ in range(2):
        built = _format._built(obj, checksum)
        assert _bytes(built) == _walked(obj, checksum)
        same(ng.load(io.BytesIO(_bytes(built))), obj)
        obj["optimizer"]["param_groups"][0]["lr"] *= 0.5
    assert len(reused) - n > 5 and len(reused) - n < 40


@pytest.mark.parametrize("checksum", [True, False])
def test_kept_subtrees_take_1d_arrays_of_another_length(monkeypatch, checksum):
    """A history that grows each save (1-D arrays) keeps its template: lengths, chunk sizes
    and every later address are rewritten, byte for byte the walk's file; a length that
    needs wider dimension fields in the file is walked again."""
    reused = []
    real = _h5write._reuse
    monkeypatch.setattr(_h5write, "_reuse", lambda w, tpl, leaves: reused.append(len(leaves)) or real(w, tpl, leaves))
    monkeypatch.setattr(_format, "_TEMPLATES", collections.OrderedDict())
    monkeypatch.setattr(_format, "_SEEN", collections.OrderedDict())

    def state(n):
        return {"model": {"w": ng.ones(3, 4)},
                "history": {"epoch": np.arange(n), "loss": np.linspace(0, 1, n),
                            "steps": {"v": ng.arange(n * 7, dtype=ng.float32)}},
                "after": {"x": ng.zeros(5), "k": n}, "n": n}
    for n in (3, 4, 5, 9, 36, 35, 300, 301):
        built = _format._built(state(n), checksum)
        assert _bytes(built) == _walked(state(n), checksum), n
        same(ng.load(io.BytesIO(_bytes(built))), state(n))
    # the whole file (7 leaves) from the root's template from the third save on, but at 300
    # (2100 steps: two-byte dimension fields, another signature) and at 301 (its second sighting)
    assert reused.count(7) == 4, reused


def test_a_rebuilt_file_keeps_its_checksums_honest(tmp_path):
    """The patched headers' lookup3 and ng_crc32 are recomputed: HDF5 reads the rebuilt
    file, and a flipped byte in a patched value is still an error."""
    state = {"epoch": 1, "lr": 0.1, "w": ng.ones(4)}
    ng.save(state, tmp_path / "a.ckpt")
    state = {"epoch": 2, "lr": 0.05, "w": ng.zeros(4)}
    ng.save(state, tmp_path / "a.ckpt")
    with h5py.File(tmp_path / "a.ckpt", "r") as f:
        assert f.attrs["epoch"] == 2 and f.attrs["lr"] == 0.05
    same(ng.load(tmp_path / "a.ckpt"), state)
    data = bytearray((tmp_path / "a.ckpt").read_bytes())
    at = data.find(struct.pack("<d", 0.05))
    assert at > 0
    data[at] ^= 1
    (tmp_path / "b.ckpt").write_bytes(bytes(data))
    with pytest.raises(ng.io.CheckpointError):
        ng.load(tmp_path / "b.ckpt")
