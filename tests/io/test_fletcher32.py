"""numbagrad computes and checks HDF5's ``fletcher32`` itself (``_format._fletcher32_cpu``)
and moves chunks past HDF5's filter pipeline (``write_direct_chunk`` /
``read_direct_chunk``). The checksum must be bit-for-bit the one HDF5's filter stores, so
that plain h5py verifies numbagrad's files and numbagrad verifies h5py's."""
import h5py
import numpy as np
import pytest

import numbagrad as ng
from numbagrad.io import CheckpointError, _format

LENGTHS = (1, 2, 3, 4, 5, 718, 719, 720, 721, 722, 1439, 1440, 1441, 4096, 12345, 100001)


def hdf5_fletcher32(tmp_path, data):
    """The checksum HDF5's own filter appends to a chunk holding ``data`` (uint8)."""
    p = tmp_path / "h5.h5"
    with h5py.File(p, "w", libver="latest") as f:
        ds = f.create_dataset("x", shape=data.shape, dtype=np.uint8, chunks=data.shape, fletcher32=True)
        ds.write_direct(data)
    with h5py.File(p, "r") as f:
        mask, raw = f["x"].id.read_direct_chunk((0,))
    assert mask == 0 and len(raw) == data.size + 4
    return int.from_bytes(raw[-4:], "little")


@pytest.mark.parametrize("fill", ["random", "ones", "zeros", "alternating"])
def test_checksum_is_hdf5s(tmp_path, fill):
    r = np.random.default_rng(len(fill))
    for n in LENGTHS:
        data = {"random": lambda: r.integers(0, 256, n, dtype=np.uint8),
                "ones": lambda: np.full(n, 0xFF, np.uint8),      # the sums' largest values (uint32 wrap)
                "zeros": lambda: np.zeros(n, np.uint8),
                "alternating": lambda: np.tile(np.array([0xFF, 0x00], np.uint8), n)[:n]}[fill]()
        assert _format._fletcher32_cpu(data) == hdf5_fletcher32(tmp_path, data), (fill, n)


def test_a_large_buffer_of_all_ones(tmp_path):
    data = np.full((1 << 20) + 3, 0xFF, np.uint8)
    assert _format._fletcher32_cpu(data) == hdf5_fletcher32(tmp_path, data)


def test_two_part_checksum_equals_the_whole(tmp_path):
    # an edge chunk is read partly into the result, partly into scratch, and checked in two parts
    r = np.random.default_rng(7)
    for n in (0, 1, 719, 720, 721, 1440, 5001, 100_000, 100_001):
        data = r.integers(0, 256, n, dtype=np.uint8)
        for blocks in range(0, n // 720 + 1, max(1, n // 720 // 3)):
            cut = blocks * 720
            assert _format._fletcher32_2(data[:cut], data[cut:]) == _format._fletcher32_cpu(data), (n, cut)
    data = r.integers(0, 256, 5001, dtype=np.uint8)
    assert _format._fletcher32_2(data[:2160], data[2160:]) == hdf5_fletcher32(tmp_path, data)


def values():
    r = np.random.default_rng(3)
    return {"f32": ng.tensor(r.standard_normal((37, 11)).astype(np.float32)),
            "f16": ng.tensor(r.standard_normal(101).astype(np.float16)),
            "i8_odd": ng.tensor(r.integers(-100, 100, 13, dtype=np.int8)),     # an odd number of bytes
            "bool_odd": ng.tensor(r.random(9) > 0.5),
            "c64": np.array(r.standard_normal(7) + 1j * r.standard_normal(7), np.complex64),
            "i64_3d": ng.tensor(r.integers(-(1 << 60), 1 << 60, (5, 3, 2))),
            "big_endian": np.arange(20, dtype=">f4"),                            # goes through HDF5's filter
            "zero_d": ng.tensor(2.5),
            "f64_rows": ng.tensor(r.standard_normal((1000, 3)))}  # 24-byte rows: edge chunks of whole blocks and a rest


def _same(a, b):
    a, b = (x.detach().numpy() if hasattr(x, "detach") else x for x in (a, b))
    return a.dtype.newbyteorder("=") == b.dtype.newbyteorder("=") and a.shape == b.shape and np.array_equal(a, b)


@pytest.mark.parametrize("chunk_bytes", [64 << 20, 96, 2000])  # one chunk each; many, with a partial edge chunk
@pytest.mark.parametrize("checksum", [True, False])
def test_round_trip_and_plain_h5py_verifies(tmp_path, monkeypatch, chunk_bytes, checksum):
    monkeypatch.setattr(_format, "CHUNK_BYTES", chunk_bytes)
    obj = values()
    ng.save(obj, tmp_path / "c.ckpt", checksum=checksum)
    back = ng.load(tmp_path / "c.ckpt")
    for k in obj:
        assert _same(back[k], obj[k]), k
    with h5py.File(tmp_path / "c.ckpt", "r") as f:
        for k, v in obj.items():
            if k == "zero_d":
                continue
            ds = f[k]
            assert ds.fletcher32 == checksum
            if chunk_bytes == 96:
                assert ds.id.get_num_chunks() == -(-ds.shape[0] // ds.chunks[0])
            want = v.detach().numpy() if hasattr(v, "detach") else v
            np.testing.assert_array_equal(ds[...], want)  # HDF5 verifies every checksum here


def _flip_first_data_byte(path, arr):
    data = bytearray(path.read_bytes())
    i = data.find(arr.tobytes())
    assert i >= 0
    data[i] ^= 0x40
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("chunk_bytes", [64 << 20, 256])
def test_a_flipped_byte_fails_in_numbagrad_and_in_h5py(tmp_path, monkeypatch, chunk_bytes):
    monkeypatch.setattr(_format, "CHUNK_BYTES", chunk_bytes)
    a = np.random.default_rng(0).standard_normal((64, 8)).astype(np.float32)
    ng.save({"w": ng.tensor(a)}, tmp_path / "c.ckpt")
    _flip_first_data_byte(tmp_path / "c.ckpt", a[:8])
    with pytest.raises(CheckpointError, match="fletcher32 checksum mismatch in chunk 0"):
        ng.load(tmp_path / "c.ckpt")
    with h5py.File(tmp_path / "c.ckpt", "r") as f, pytest.raises(OSError):
        f["w"][...]


@pytest.mark.parametrize("piece", [720, 1 << 30])  # chunks read and summed in pieces of 720 bytes, or whole
@pytest.mark.parametrize("checksum", [True, False])
def test_worker_thread_reads(tmp_path, monkeypatch, checksum, piece):
    # every chunk on the worker threads (as chunks of 1 MiB and more are), then a damaged one
    monkeypatch.setattr(_format, "_PIECE", piece)
    monkeypatch.setattr(_format, "_POOL_BYTES", 0)
    monkeypatch.setattr(_format, "_WORKERS", 3)
    monkeypatch.setattr(_format, "CHUNK_BYTES", 2000)
    obj = values()
    ng.save(obj, tmp_path / "c.ckpt", checksum=checksum)
    back = ng.load(tmp_path / "c.ckpt")
    for k in obj:
        assert _same(back[k], obj[k]), k
    if checksum:
        a = obj["f64_rows"].numpy()
        _flip_first_data_byte(tmp_path / "c.ckpt", a[77 * 5:77 * 5 + 20])
        with pytest.raises(CheckpointError, match=r"'/f64_rows' \(fletcher32 checksum mismatch in chunk 5\)"):
            ng.load(tmp_path / "c.ckpt")


def test_numbagrad_reads_what_hdf5s_filter_wrote(tmp_path, monkeypatch):
    # the writer's slow path (HDF5's own filter), then numbagrad's reader checks the sums
    monkeypatch.setattr(_format._Writer, "write_chunks",
                        lambda self, dsid, a, rows: dsid.write(h5py.h5s.ALL, h5py.h5s.ALL, a))
    monkeypatch.setattr(_format, "CHUNK_BYTES", 200)
    obj = values()
    ng.save(obj, tmp_path / "c.ckpt")
    monkeypatch.undo()
    back = ng.load(tmp_path / "c.ckpt")
    for k in obj:
        assert _same(back[k], obj[k]), k


def test_a_chunk_of_the_wrong_size_is_an_error(tmp_path):
    ng.save({"w": ng.ones(100)}, tmp_path / "c.ckpt")
    with h5py.File(tmp_path / "c.ckpt", "r+") as f:
        f["w"].id.write_direct_chunk((0,), np.zeros(40, np.uint8).tobytes())
    with pytest.raises(CheckpointError, match="holds 40 bytes, expected 404"):
        ng.load(tmp_path / "c.ckpt")
