"""``save``/``load``: nested state in one HDF5 file, pickle-free and crash-safe.

Layout (format ``numbagrad.checkpoint``, version 1; readable with plain h5py)
------------------------------------------------------------------------------
* The root group ``/`` has the attributes ``format`` (``"numbagrad.checkpoint"``),
  ``format_version`` (1) and ``numbagrad_version``, and is itself the saved object when
  that is a dict, list or tuple (otherwise a one-item container of type ``single``).
* Every dict, list and tuple is a group with the attributes ``ng_type`` (``dict``,
  ``odict`` for an ``OrderedDict``, ``list``, ``tuple``, ``single``) and ``ng_items``: a
  JSON list of ``[key, kind, name]``, one per item in order. ``key`` is the dict key (a
  JSON string or integer, so int keys stay ints) or the list index; ``name`` is the HDF5
  name of the item inside the group: the key itself for a str key that is a valid name
  (``model/layers.0.weight``), else ``#<i>``.
* A tensor or array is a dataset at ``name`` (``kind`` ``tensor``, ``parameter`` or
  ``ndarray``), with the attributes ``ng_type``, ``device`` and ``requires_grad``
  (tensors) and ``ng_0d`` where a 0-d value is stored with shape ``(1,)``. Every
  non-empty dataset is chunked with the ``fletcher32`` checksum filter (and optionally
  ``gzip``/``lzf``), so a flipped data byte is an error, never a wrong value.
* A Python scalar, string, bytes or NumPy scalar is an attribute of its group named
  ``name`` (``kind`` ``int``, ``bigint`` (a decimal string: ints beyond 64 bits),
  ``float``, ``bool``, ``complex``, ``str``, ``bytes`` (uint8 array), ``npscalar``);
  ``None`` is ``kind`` ``none`` with no attribute.
* Strings (``format``, ``ng_type``, ``ng_items``, ``device``, str and bigint values) are
  fixed-length UTF-8 attributes, which h5py reads back as ``bytes`` (a str value ending
  in ``"\x00"``, which a fixed-length string cannot hold, is a uint8 array of its UTF-8
  bytes). NOTE: not h5py's default variable-length strings: those live in HDF5's global
  heap, which has no checksum (a flipped byte there silently changed a dict key, a str
  or a big int) and whose parser loops forever on some damaged heaps (HDF5 2.0.0,
  ``H5HG__cache_heap_deserialize``; found by ``tests/io/test_fuzz.py``).
* Every container group also has ``ng_crc32``: the CRC-32 of its ``ng_type``, its
  ``ng_items`` text and its scalar values (see :func:`_digest`), checked on load.
  Attributes small enough for the object header are covered by HDF5's own header
  checksums (``libver='latest'``), but a group with more than 8 attributes keeps them in
  a fractal heap, whose objects over 4 KiB are stored unchecksummed. ``device`` is left
  out of the CRC: it is a placement hint that ``map_location`` overrides and that users
  may edit with h5py; a damaged one names no usable device and fails.

Loading executes no code: it reads arrays, numbers and strings and builds dicts, lists,
tuples and tensors, and nothing the file names is imported or called. Anything the
format cannot hold is refused by ``save`` before a byte is written, with the key path.
Every failure to read a file (not HDF5, truncated, damaged, foreign, a checksum
mismatch, a missing item) raises :class:`~numbagrad.io.CheckpointError`.
"""
import collections
import errno
import json
import numbers
import os
import struct
import zlib

import numpy as np
from numba import njit

from .. import __version__
from ..backend import config
from ..tensor import Tensor
from ._atomic import atomic_path
from .errors import CheckpointError

FORMAT = "numbagrad.checkpoint"
FORMAT_VERSION = 1
CHUNK_BYTES = 64 << 20
"""Datasets are chunked along their first axis in chunks of at most this many bytes
(HDF5 requires chunks for filters; one chunk per tensor up to this size)."""
_COMPRESSIONS = (None, "gzip", "lzf")
_ARRAY_KINDS = "biufc"
_INT64 = (-(1 << 63), (1 << 63) - 1)


def _fmt_path(path):
    return " -> ".join(repr(k) for k in path) if path else "(the root object)"


# ---- saving ----------------------------------------------------------------------------------
def _is_parameter(t):
    from ..nn.parameter import Parameter
    return isinstance(t, Parameter)


def _check(obj, path, seen):
    """Refuse what the format cannot hold, before anything is written."""
    if isinstance(obj, Tensor):
        if obj.dtype.kind not in _ARRAY_KINDS:
            raise TypeError(f"numbagrad.save: tensor of dtype {obj.dtype} at key {_fmt_path(path)} "
                            "cannot be stored")
        return
    if isinstance(obj, np.ndarray):
        if obj.dtype.kind not in _ARRAY_KINDS or obj.dtype.fields is not None:
            raise TypeError(f"numbagrad.save: NumPy array of dtype {obj.dtype} at key {_fmt_path(path)} cannot "
                            "be stored (only bool, integer, float and complex arrays)")
        return
    if obj is None or isinstance(obj, (bool, numbers.Integral, float, complex, str, bytes, bytearray)):
        if isinstance(obj, numbers.Integral) and not isinstance(obj, (int, np.integer)):
            raise TypeError(f"numbagrad.save: integer of type {type(obj).__name__} at key {_fmt_path(path)}")
        return
    if isinstance(obj, np.generic):
        if obj.dtype.kind not in _ARRAY_KINDS:
            raise TypeError(f"numbagrad.save: NumPy scalar of dtype {obj.dtype} at key {_fmt_path(path)}")
        return
    if type(obj) in (dict, collections.OrderedDict, list, tuple):
        if id(obj) in seen:
            raise TypeError(f"numbagrad.save: the {type(obj).__name__} at key {_fmt_path(path)} contains itself")
        seen.add(id(obj))
        if isinstance(obj, dict):
            kinds = {}
            for k, v in obj.items():
                if not (isinstance(k, str) or (isinstance(k, int) and not isinstance(k, bool))):
                    raise TypeError(f"numbagrad.save: dict key {k!r} of type {type(k).__name__} at key "
                                    f"{_fmt_path(path)}: keys must be str or int")
                if isinstance(k, int) and not _INT64[0] <= k <= _INT64[1]:
                    raise TypeError(f"numbagrad.save: int dict key {k} at key {_fmt_path(path)} is beyond 64 bits")
                _check(v, path + (k,), seen)
        else:
            for i, v in enumerate(obj):
                _check(v, path + (i,), seen)
        seen.discard(id(obj))
        return
    what = type(obj).__name__
    hint = (" (a dict or tuple subclass: pass dict(x) / tuple(x))"
            if isinstance(obj, (dict, tuple, list)) else
            " (save its state_dict() instead)" if hasattr(obj, "state_dict") else "")
    raise TypeError(f"numbagrad.save: cannot store a value of type {what} at key {_fmt_path(path)}{hint}; "
                    "a checkpoint holds tensors, NumPy arrays, Python numbers, str, bytes, None and "
                    "dicts (str or int keys), lists and tuples of these")


_SCALARS = ((np.generic, "npscalar", np.asarray), (bool, "bool", np.bool_), (int, "int", np.int64),
            (float, "float", np.float64), (complex, "complex", np.complex128))
"""(Python type, item kind, conversion to the attribute's value), tried in order."""


def _safe_name(k):
    return (isinstance(k, str) and k and "/" not in k and "\x00" not in k and k not in (".", "..")
            and not k.startswith(("#", "ng_")))


def _put_str(attrs, name, s):
    """Store ``s`` as a fixed-length UTF-8 attribute (see the module docstring for why not
    h5py's variable-length strings). A 0-byte string is stored as one NUL byte, which
    h5py reads back as ``b""``."""
    b = s.encode("utf-8")
    attrs.create(name, b, dtype=_h5().string_dtype("utf-8", max(1, len(b))))


def _digest(kind, v):
    """The bytes that stand for an item in its group's ``ng_crc32``: the value of a scalar
    item, nothing for a group, a dataset (their headers are checksummed by HDF5) or None."""
    if kind in ("int", "bigint"):
        return str(int(v)).encode()
    if kind == "bool":
        return b"1" if v else b"0"
    if kind == "float":
        return struct.pack("<d", v)
    if kind == "complex":
        return struct.pack("<dd", v.real, v.imag)
    if kind == "str":
        return v.encode("utf-8", "surrogatepass")
    if kind == "bytes":
        return bytes(v)
    if kind == "npscalar":
        return v.dtype.str.encode() + b":" + v.tobytes()
    return b""


def _group_crc(ng_type, items_text, digests):
    crc = zlib.crc32(f"{ng_type}\n{items_text}".encode("utf-8"))
    for d in digests:
        crc = zlib.crc32(d, zlib.crc32(struct.pack("<Q", len(d)), crc))
    return crc


@njit(cache=config.CACHE, nogil=True, error_model="numpy")
def _fletcher32_cpu(data):
    """HDF5's fletcher32 (``H5_checksum_fletcher32``, the ``fletcher32`` filter's sums) of
    ``data``, a 1-D uint8 array; returns the uint32 value the filter appends to a chunk
    (little-endian).

    Big-endian 16-bit words ``w``, in blocks of 360: ``s1 += w; s2 += s1`` in uint32, then
    one end-around-carry fold ``s = (s & 0xffff) + (s >> 16)`` of each sum per block; an
    odd last byte counts as ``byte << 8``; a final fold of both; ``(s2 << 16) | s1``. A
    block's sums are computed in closed form, ``s1 += sum(w)`` and
    ``s2 += len * s1 + sum((len - j) * w_j)``, exact in int64 and wrapped to uint32 like
    the C code's, so the loop vectorises (~15 GB/s on one core here; HDF5's filter ran at
    ~3 GB/s and copied each chunk into a new buffer). tests/io/test_fletcher32.py holds it
    to HDF5's own checksums."""
    m32 = 0xFFFFFFFF
    n = data.size
    left = n // 2
    s1 = 0
    s2 = 0
    i = 0
    while left > 0:
        blen = min(left, 360)
        left -= blen
        a = 0
        b = 0
        for j in range(blen):
            w = (np.int64(data[i + 2 * j]) << 8) | np.int64(data[i + 2 * j + 1])
            a += w
            b += (blen - j) * w
        i += 2 * blen
        s2 = (s2 + blen * s1 + b) & m32
        s1 = (s1 + a) & m32
        s1 = (s1 & 0xFFFF) + (s1 >> 16)
        s2 = (s2 & 0xFFFF) + (s2 >> 16)
    if n % 2:
        s1 = (s1 + (np.int64(data[n - 1]) << 8)) & m32
        s2 = (s2 + s1) & m32
        s1 = (s1 & 0xFFFF) + (s1 >> 16)
        s2 = (s2 & 0xFFFF) + (s2 >> 16)
    s1 = (s1 & 0xFFFF) + (s1 >> 16)
    s2 = (s2 & 0xFFFF) + (s2 >> 16)
    return ((s2 << 16) | s1) & m32


def _chunk_plan(shape, itemsize, rows):
    """``(bytes per chunk, number of chunks)`` of a C-ordered array chunked by ``rows``
    along its first axis (every other axis whole)."""
    row = itemsize
    for d in shape[1:]:
        row *= d
    return rows * row, -(-shape[0] // rows)


class _Writer:
    def __init__(self, compression, checksum):
        self.compression = compression
        self.checksum = checksum
        self._scratch = np.empty(0, np.uint8)

    def container(self, g, obj):
        if isinstance(obj, dict):
            t = "odict" if type(obj) is collections.OrderedDict else "dict"
            pairs = list(obj.items())
            names = [k if _safe_name(k) else f"#{i}" for i, (k, _) in enumerate(pairs)]
        else:
            t = "list" if isinstance(obj, list) else "tuple"
            pairs = list(enumerate(obj))
            names = [str(i) for i in range(len(pairs))]
        _put_str(g.attrs, "ng_type", t)
        items, digests = [], []
        for (k, v), name in zip(pairs, names):
            kind = self.item(g, name, v)
            items.append([k, kind, name])
            digests.append(_digest(kind, v))
        self.finish(g, t, items, digests)

    @staticmethod
    def finish(g, t, items, digests):
        """Write a container's ``ng_items`` and ``ng_crc32`` (after its items)."""
        text = json.dumps(items)
        _put_str(g.attrs, "ng_items", text)
        g.attrs["ng_crc32"] = np.int64(_group_crc(t, text, digests))

    def item(self, g, name, v):
        if isinstance(v, (dict, list, tuple)):
            self.container(g.create_group(name, track_order=True), v)
            return "group"
        if isinstance(v, Tensor):
            kind = "parameter" if _is_parameter(v) else "tensor"
            arr = v.detach().cpu().array if v.device.type != "cpu" else v.detach().array
            ds = self.dataset(g, name, np.asarray(arr))
            _put_str(ds.attrs, "ng_type", kind)
            _put_str(ds.attrs, "device", str(v.device))
            ds.attrs["requires_grad"] = bool(v.requires_grad)
            return kind
        if isinstance(v, np.ndarray):
            _put_str(self.dataset(g, name, v).attrs, "ng_type", "ndarray")
            return "ndarray"
        if v is None:
            return "none"
        if isinstance(v, int) and not isinstance(v, bool) and not _INT64[0] <= v <= _INT64[1]:
            _put_str(g.attrs, name, str(v))
            return "bigint"
        for typ, kind, conv in _SCALARS:
            if isinstance(v, typ):
                g.attrs[name] = conv(v)
                return kind
        if isinstance(v, str):
            if v.endswith("\x00"):  # a fixed-length string would lose it: the UTF-8 bytes
                g.attrs[name] = np.frombuffer(v.encode("utf-8"), np.uint8)
            else:
                _put_str(g.attrs, name, v)
            return "str"
        g.attrs[name] = np.frombuffer(bytes(v), np.uint8) if len(v) else np.zeros(0, np.uint8)
        return "bytes"

    def dataset(self, g, name, arr):
        zero_d = arr.ndim == 0
        a = np.ascontiguousarray(arr.reshape(1) if zero_d else arr)
        if a.size == 0:
            ds = g.create_dataset(name, shape=a.shape, dtype=a.dtype)
        else:
            row = max(1, a.nbytes // max(1, a.shape[0]))
            chunks = (max(1, min(a.shape[0], CHUNK_BYTES // row)),) + a.shape[1:]
            ds = g.create_dataset(name, shape=a.shape, dtype=a.dtype, chunks=chunks,
                                  fletcher32=self.checksum, compression=self.compression)
            if self.compression is None and a.dtype.isnative:
                self.write_chunks(ds, a, chunks[0])
            else:
                ds.write_direct(a)
        if zero_d:
            ds.attrs["ng_0d"] = True
        return ds

    def write_chunks(self, ds, a, rows):
        """Write ``a`` chunk by chunk past HDF5's filter pipeline (``write_direct_chunk``):
        a whole chunk straight from ``a``'s memory, or, with ``checksum``, copied into a
        reused buffer with the fletcher32 the filter would have appended
        (:func:`_fletcher32_cpu`): plain h5py reads verify it as usual. HDF5's own filter
        computed it at ~3 GB/s into a fresh buffer per chunk: 400 MB of float32 took
        0.43 s to write instead of 0.29 s (perf/test_bench_checkpoint.py)."""
        cb, n = _chunk_plan(a.shape, a.itemsize, rows)
        flat = a.reshape(-1).view(np.uint8)
        extra = 4 if self.checksum else 0
        tail = (0,) * (a.ndim - 1)
        for c in range(n):
            part = flat[c * cb:(c + 1) * cb]
            if part.size == cb and not extra:
                buf = part
            else:  # a checksum to append, or the edge chunk, stored full size (zero-filled)
                if self._scratch.size < cb + extra:
                    self._scratch = np.empty(cb + extra, np.uint8)
                buf = self._scratch[:cb + extra]
                buf[:part.size] = part
                buf[part.size:cb] = 0
                if extra:
                    buf[cb:] = np.array([_fletcher32_cpu(buf[:cb])], "<u4").view(np.uint8)
            ds.id.write_direct_chunk((c * rows,) + tail, buf)


def _h5():
    import h5py
    return h5py


def _write_file(h5file, obj, compression, checksum):
    root = h5file["/"]
    _put_str(root.attrs, "format", FORMAT)
    root.attrs["format_version"] = FORMAT_VERSION
    _put_str(root.attrs, "numbagrad_version", __version__)
    w = _Writer(compression, checksum)
    if type(obj) in (dict, collections.OrderedDict, list, tuple):
        w.container(root, obj)
    else:
        _put_str(root.attrs, "ng_type", "single")
        kind = w.item(root, "0", obj)
        w.finish(root, "single", [[0, kind, "0"]], [_digest(kind, obj)])


def save(obj, f, pickle_module=None, pickle_protocol=None, *, compression=None, checksum=True,
         _use_new_zipfile_serialization=None):
    """Write ``obj`` (tensors, NumPy arrays, Python scalars, str, bytes, None and dicts,
    lists and tuples of these, nested: every ``state_dict``) to ``f``, a path or a binary
    file object, as an HDF5 checkpoint (see the module docstring for the layout).

    A path is written crash-safely: a temporary file in the same folder, fsynced, then
    renamed over ``f``, so a killed process leaves the previous file intact.
    ``compression``: ``None``, ``'gzip'`` or ``'lzf'`` per dataset. ``checksum`` (default
    on): the ``fletcher32`` filter on every dataset. ``pickle_module`` and friends are
    accepted for ``torch.save`` compatibility; nothing is pickled.
    """
    if compression not in _COMPRESSIONS:
        raise ValueError(f"numbagrad.save: compression must be one of {_COMPRESSIONS}, got {compression!r}")
    if pickle_module is not None:
        raise TypeError("numbagrad.save: pickle_module is not used: checkpoints are HDF5 and never pickled")
    _check(obj, (), set())
    h5py = _h5()
    if isinstance(f, (str, bytes, os.PathLike)):
        with atomic_path(os.fsdecode(f)) as tmp:
            with h5py.File(tmp, "w", libver="latest", track_order=True) as h:
                _write_file(h, obj, compression, checksum)
        return
    if not (hasattr(f, "write") and hasattr(f, "seek")):
        raise TypeError(f"numbagrad.save: f must be a path or a binary file object, got {type(f).__name__}")
    with h5py.File(f, "w", libver="latest", track_order=True) as h:
        _write_file(h, obj, compression, checksum)


# ---- loading ---------------------------------------------------------------------------------
class _Reader:
    def __init__(self, name, map_location):
        self.name = name
        self.map_location = map_location

    def fail(self, reason, path=None):
        return CheckpointError(self.name, reason, _fmt_path(path) if path else None)

    def container(self, g, path):
        t = _attr(g, "ng_type")
        raw = _attr(g, "ng_items")
        if t not in ("dict", "odict", "list", "tuple", "single") or not isinstance(raw, str):
            raise self.fail(f"group {g.name!r} is not a numbagrad container (ng_type={t!r})", path)
        try:
            items = json.loads(raw)
        except ValueError as e:
            raise self.fail(f"damaged item list of group {g.name!r} ({e})", path) from None
        if not isinstance(items, list):
            raise self.fail(f"damaged item list of group {g.name!r}", path)
        keys, values, digests = [], [], []
        for i, it in enumerate(items):
            if not (isinstance(it, list) and len(it) == 3 and isinstance(it[0], (str, int))
                    and not isinstance(it[0], bool) and isinstance(it[1], str) and isinstance(it[2], str)):
                raise self.fail(f"damaged entry {i} in the item list of group {g.name!r}", path)
            k, kind, name = it
            if t in ("list", "tuple", "single") and k != i:
                raise self.fail(f"entry {i} of the {t} {g.name!r} has index {k!r}", path)
            keys.append(k)
            values.append(self.item(g, kind, name, path + (k,)))
            digests.append(_digest(kind, values[-1]))
        crc = _attr(g, "ng_crc32")
        if crc != _group_crc(t, raw, digests):
            raise self.fail(f"group {g.name!r} has no ng_crc32 checksum" if crc is None else
                            f"checksum mismatch in the attributes of group {g.name!r} (damaged, or edited "
                            "without updating ng_crc32)", path)
        if t == "single":
            if len(values) != 1:
                raise self.fail("the root holds no single object", path)
            return values[0]
        if t in ("dict", "odict"):
            d = dict(zip(keys, values)) if t == "dict" else collections.OrderedDict(zip(keys, values))
            if len(d) != len(keys):
                raise self.fail(f"duplicate keys in group {g.name!r}", path)
            return d
        return values if t == "list" else tuple(values)

    def item(self, g, kind, name, path):
        h5py = _h5()
        if kind == "group":
            sub = g.get(name)
            if not isinstance(sub, h5py.Group):
                raise self.fail(f"missing group {name!r} in {g.name!r}", path)
            return self.container(sub, path)
        if kind in ("tensor", "parameter", "ndarray"):
            ds = g.get(name)
            if not isinstance(ds, h5py.Dataset):
                raise self.fail(f"missing dataset {name!r} in {g.name!r}", path)
            return self.dataset(ds, kind, path)
        if kind == "none":
            return None
        if name not in g.attrs:
            raise self.fail(f"missing attribute {name!r} of {g.name!r}", path)
        v = g.attrs[name]
        try:
            if kind == "int":
                return int(_scalar(v, "i"))
            if kind == "bigint":
                return int(_as_str(v))
            if kind == "float":
                return float(_scalar(v, "f"))
            if kind == "bool":
                return bool(_scalar(v, "b"))
            if kind == "complex":
                return complex(_scalar(v, "c"))
            if kind == "str":
                if isinstance(v, np.ndarray) and v.dtype == np.uint8 and v.ndim == 1:
                    return v.tobytes().decode("utf-8")
                return _as_str(v)
            if kind == "bytes":
                a = np.asarray(v)
                if a.dtype != np.uint8 or a.ndim != 1:
                    raise ValueError(f"bytes stored as {a.dtype} of shape {a.shape}")
                return a.tobytes()
            if kind == "npscalar":
                a = np.asarray(v)
                if a.ndim != 0 or a.dtype.kind not in _ARRAY_KINDS:
                    raise ValueError(f"NumPy scalar stored as {a.dtype} of shape {a.shape}")
                return a[()]
        except (ValueError, TypeError) as e:
            raise self.fail(f"bad {kind} value ({e})", path) from None
        raise self.fail(f"unknown item kind {kind!r}", path)

    def dataset(self, ds, kind, path):
        if _attr(ds, "ng_type") != kind:
            raise self.fail(f"dataset {ds.name!r} is tagged {_attr(ds, 'ng_type')!r}, expected {kind!r}", path)
        dt = ds.dtype
        if dt.kind not in _ARRAY_KINDS or dt.fields is not None and dt.kind != "c":
            raise self.fail(f"dataset {ds.name!r} has dtype {dt}, not a tensor dtype", path)
        arr = None
        try:
            if 0 not in ds.shape:
                arr = self.read_chunks(ds, dt, path)
            if arr is None:
                arr = np.empty(ds.shape, dt)
                if arr.size:
                    ds.read_direct(arr)
        except (OSError, ValueError, RuntimeError) as e:
            raise self.fail(f"cannot read dataset {ds.name!r} ({_first_line(e)})", path) from None
        if arr.shape == (1,) and _attr(ds, "ng_0d"):  # an attribute read costs ~30 us: only where it can be
            arr = arr.reshape(())
        if kind == "ndarray":
            return arr
        t = Tensor._from_array(arr)
        dev = self.device_for(_attr(ds, "device") or "cpu", path)
        if dev != "cpu":
            t = t.to(dev)
        rg = bool(_attr(ds, "requires_grad"))
        if kind == "parameter":
            from ..nn.parameter import Parameter
            return Parameter(t, requires_grad=rg)
        return t.requires_grad_(True) if rg and t.dtype.kind == "f" else t

    def read_chunks(self, ds, dt, path):
        """The array of a dataset laid out as :meth:`_Writer.dataset` writes it (chunks of
        whole rows; no filter, or only fletcher32), read chunk by chunk past HDF5's filter
        pipeline (``read_direct_chunk``) into the result's own memory, each checksum
        verified with :func:`_fletcher32_cpu`; None for any other layout (the caller then
        reads through HDF5)."""
        h5py = _h5()
        shape, chunks = ds.shape, ds.chunks
        if chunks is None or tuple(chunks[1:]) != tuple(shape[1:]) or not dt.isnative:
            return None
        plist = ds.id.get_create_plist()
        filters = [plist.get_filter(i)[0] for i in range(plist.get_nfilters())]
        if filters not in ([], [h5py.h5z.FILTER_FLETCHER32]):
            return None
        extra = 4 * len(filters)
        cb, n = _chunk_plan(shape, dt.itemsize, chunks[0])
        nbytes = shape[0] * (cb // chunks[0])
        buf = np.empty(nbytes + extra, np.uint8)
        tail = (0,) * (len(shape) - 1)
        for c in range(n):
            offset = (c * chunks[0],) + tail
            size = ds.id.get_chunk_info_by_coord(offset).size
            if size != cb + extra:
                raise self.fail(f"chunk {c} of dataset {ds.name!r} holds {size} bytes, expected {cb + extra}",
                                path)
            whole = (c + 1) * cb <= nbytes
            # a chunk lands in place (its checksum in the next chunk's first bytes, read
            # after it is checked); the edge chunk, stored full size, goes through a copy
            dst = buf[c * cb:(c + 1) * cb + extra] if whole else np.empty(cb + extra, np.uint8)
            mask, _ = ds.id.read_direct_chunk(offset, out=dst)
            if mask:
                raise self.fail(f"chunk {c} of dataset {ds.name!r} was stored unfiltered", path)
            if extra and int(dst[cb:].view("<u4")[0]) != _fletcher32_cpu(dst[:cb]):
                raise self.fail(f"cannot read dataset {ds.name!r} (fletcher32 checksum mismatch in chunk {c})",
                                path)
            if not whole:
                buf[c * cb:nbytes] = dst[:nbytes - c * cb]
        return buf[:nbytes].view(dt).reshape(shape)

    def device_for(self, saved, path):
        m = self.map_location
        if isinstance(m, dict):
            m = m.get(saved, saved)
        target = saved if m is None else str(m)
        if target.startswith("cuda"):
            from .. import cuda
            if not cuda.is_available():
                raise RuntimeError(
                    f"numbagrad.load({self.name!r}): the tensor at key {_fmt_path(path)} was saved on {saved} and "
                    "CUDA is not available here; pass map_location='cpu'")
        return "cpu" if target.startswith("cpu") else target


def _first_line(e):
    return str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__


def _attr(obj, name):
    try:
        v = obj.attrs.get(name)
    except (OSError, KeyError, ValueError, TypeError):
        return None
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    if isinstance(v, np.generic):
        return v.item()
    return v


def _scalar(v, kinds):
    a = np.asarray(v)
    if a.ndim != 0 or a.dtype.kind not in kinds:
        raise ValueError(f"stored as {a.dtype} of shape {a.shape}")
    return a[()]


def _as_str(v):
    if isinstance(v, bytes):
        return v.decode("utf-8")
    if isinstance(v, str):
        return v
    raise ValueError(f"stored as {type(v).__name__}, not a string")


def _check_map_location(m):
    if m is None or isinstance(m, str):
        return m
    from ..device import device
    if isinstance(m, device):
        return str(m)
    if isinstance(m, dict) and all(isinstance(k, str) and isinstance(v, (str, device)) for k, v in m.items()):
        return {k: str(v) for k, v in m.items()}
    raise TypeError(f"numbagrad.load: map_location must be None, a device name ('cpu', 'cuda'), a "
                    f"numbagrad.device or a dict of device names, got {type(m).__name__} (functions are not "
                    "supported)")


def load(f, map_location=None, pickle_module=None, *, weights_only=None, mmap=None, **kwargs):
    """Read a checkpoint written by :func:`save` from a path or binary file object and
    return the same structure: tensors (on their saved device, or ``map_location``),
    arrays, scalars, dicts (int keys stay ints; OrderedDicts stay ordered), lists and
    tuples. No code runs: ``weights_only`` is always true in effect and ``pickle_module``
    is not used. Raises :class:`~numbagrad.io.CheckpointError` naming the file (and key)
    for any file that is not an intact numbagrad checkpoint."""
    if pickle_module is not None:
        raise TypeError("numbagrad.load: pickle_module is not used: checkpoints are HDF5 and never unpickled")
    if kwargs:
        raise TypeError(f"numbagrad.load: unexpected arguments {sorted(kwargs)}")
    m = _check_map_location(map_location)
    h5py = _h5()
    if isinstance(f, (str, bytes, os.PathLike)):
        name = os.fsdecode(f)
        if not os.path.exists(name):
            raise FileNotFoundError(f"numbagrad.load: no such file: {name!r}")
        if os.path.isdir(name):  # a wrong path, like a missing file: an OS error, as torch.load
            raise IsADirectoryError(errno.EISDIR, "numbagrad.load: is a directory, not a checkpoint", name)
        src = name
    elif hasattr(f, "read") and hasattr(f, "seek"):
        name = getattr(f, "name", None) or f"<{type(f).__name__}>"
        src = f
    else:
        raise TypeError(f"numbagrad.load: f must be a path or a binary file object, got {type(f).__name__}")
    reader = _Reader(name, m)
    try:
        h = h5py.File(src, "r")
    except (OSError, ValueError) as e:
        raise CheckpointError(name, f"not a readable HDF5 file ({_first_line(e)})") from None
    try:
        with h:
            fmt = _attr(h, "format")
            if fmt != FORMAT:
                raise CheckpointError(name, "not a numbagrad checkpoint (an HDF5 file without the "
                                      f"format attribute {FORMAT!r})")
            ver = _attr(h, "format_version")
            if not isinstance(ver, int) or isinstance(ver, bool) or not 1 <= ver <= FORMAT_VERSION:
                raise CheckpointError(name, f"format version {ver!r} is not one this numbagrad reads "
                                      f"(1 to {FORMAT_VERSION})")
            return reader.container(h["/"], ())
    except (CheckpointError, MemoryError, RuntimeError) as e:
        if isinstance(e, RuntimeError) and "CUDA is not available" not in str(e):
            raise CheckpointError(name, f"damaged file ({_first_line(e)})") from None
        raise
    except Exception as e:  # h5py raises OSError/KeyError/ValueError... on damaged files
        raise CheckpointError(name, f"damaged file ({type(e).__name__}: {_first_line(e)})") from None


__all__ = ["save", "load", "CheckpointError", "FORMAT", "FORMAT_VERSION"]
