"""``save``/``load``: nested state in one HDF5 file, pickle-free and crash-safe.

Layout (format ``numbagrad.checkpoint``, version 1; readable with plain h5py)
------------------------------------------------------------------------------
* The root group ``/`` has the attributes ``format`` (``"numbagrad.checkpoint"``),
  ``format_version`` (1) and ``numbagrad_version``, and is itself the saved object when
  that is a dict, list or tuple (otherwise a one-item container of type ``single``).
* Every dict, list and tuple is a group with the attributes ``ng_type`` (``dict``,
  ``odict`` for an ``OrderedDict``, ``list``, ``tuple``, ``single``) and ``ng_items``: a
  JSON list of ``[key, kind, name]``, one per item in order, and ``[key, kind, name,
  meta]`` for a tensor or array. ``key`` is the dict key (a JSON string or integer, so
  int keys stay ints) or the list index; ``name`` is the HDF5 name of the item inside the
  group: the key itself for a str key that is a valid name (``model/layers.0.weight``)
  and not ``format``, ``format_version`` or ``numbagrad_version`` at the root, else
  ``#<i>``. ``meta`` is ``{"device": "cpu", "requires_grad": false}`` for a tensor,
  ``{}`` for an array, with ``"0d": true`` added where a 0-d value is stored with shape
  ``(1,)``, and ``"dtype": "bfloat16"`` where bfloat16 data is stored as its ``uint16``
  bits (HDF5 has no bfloat16 type).
* A tensor or array is a dataset at ``name`` (``kind`` ``tensor``, ``parameter`` or
  ``ndarray``) whose one attribute, ``ng_type``, repeats its kind for plain-h5py readers;
  ``load`` reads no dataset attribute: the parent's ``ng_items`` has all it needs, under
  the parent's ``ng_crc32``. Every non-empty dataset is chunked along its first axis
  (whole rows, at most ``CHUNK_BYTES`` a chunk, rows spread evenly over the chunks) with
  the ``fletcher32`` checksum filter (and optionally ``gzip``/``lzf``), so a flipped data
  byte is an error, never a wrong value.
* A Python scalar, string, bytes or NumPy scalar is an attribute of its group named
  ``name`` (``kind`` ``int``, ``bigint`` (a decimal string: ints beyond 64 bits),
  ``float``, ``bool``, ``complex``, ``str``, ``bytes`` (uint8 array), ``npscalar``);
  ``None`` is ``kind`` ``none`` with no attribute.
* Strings (``format``, ``ng_type``, ``ng_items``, str and bigint values) are
  fixed-length UTF-8 attributes, which h5py reads back as ``bytes`` (a str value ending
  in ``"\x00"``, which a fixed-length string cannot hold, is a uint8 array of its UTF-8
  bytes). NOTE: not h5py's default variable-length strings: those live in HDF5's global
  heap, which has no checksum (a flipped byte there silently changed a dict key, a str
  or a big int) and whose parser loops forever on some damaged heaps (HDF5 2.0.0,
  ``H5HG__cache_heap_deserialize``; found by ``tests/io/test_fuzz.py``).
* Every container group also has ``ng_crc32``: the CRC-32 of its ``ng_type``, its
  ``ng_items`` text (so each tensor's device, ``requires_grad`` and 0-d flag) and its
  scalar values (see :func:`_digest`), checked on load. Attributes small enough for the
  object header are covered by HDF5's own header checksums (``libver='latest'``), but a
  group with more than 8 attributes keeps them in a fractal heap, whose objects over
  4 KiB are stored unchecksummed. To load a tensor on another device, pass
  ``map_location``; editing its ``device`` in ``ng_items`` means recomputing
  ``ng_crc32``.

Writing: the walk over the object (:class:`_Walk`: kinds, ``ng_items``, ``ng_crc32``) is
one; the file calls are :class:`._h5write.FastWriter`'s, which builds the file's bytes
itself (~0.6 ms for the digits job's run state, where h5py's ~60 us an object took 10 ms;
~0.1 ms when a state of the same structure was saved before: the subtrees kept from it,
see :func:`signature` and ``_h5write._Template``), or, for what it does not write (compression, a dataset of more than one chunk, a complex
value, an empty byte string, an attribute of 64 KB or more), h5py's (:class:`_Writer`).
The two files are the same tree to any HDF5 reader (tests/io/test_h5write.py); the built
one keeps every attribute in its checksummed object header. h5py's writer goes around
HDF5's per-object costs where it can: attributes through low-level ``h5a`` calls,
datasets created with ``h5d.create``, chunks written with ``write_direct_chunk`` and their
fletcher32 computed by a numba kernel. Reading: from
a path, chunks are read at their file offsets (``get_chunk_info``) with ``pread`` from a
numba kernel (``_chunks.py``) straight into the result, big ones on a worker thread while
the groups are walked, each checksum verified before ``load`` returns (see
:meth:`_Reader.read_chunks`).

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
import threading
import zlib

import numpy as np

from .. import __version__, _dtype
from ..tensor import Tensor
from ._atomic import atomic_path, commit_parts
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
_PARAMETER = []


def _is_parameter(t):
    if not _PARAMETER:
        from ..nn.parameter import Parameter
        _PARAMETER.append(Parameter)
    return isinstance(t, _PARAMETER[0])


class _Frozen:
    """A tensor as :func:`snapshot` copies it for a later or background save: its host
    array (a private copy), its item kind (``tensor``/``parameter``), device name and
    ``requires_grad``. Written exactly as the tensor would have been; plain data, so it
    pickles to a saver process (``io/async_save.py``) without the Tensor class."""
    __slots__ = ("array", "kind", "device", "requires_grad")

    def __init__(self, array, kind, device, requires_grad):
        self.array, self.kind, self.device, self.requires_grad = array, kind, device, requires_grad

    def __getstate__(self):
        return self.array, self.kind, self.device, self.requires_grad

    def __setstate__(self, state):
        self.array, self.kind, self.device, self.requires_grad = state


_IMMUTABLE_LEAVES = (str, float, bool, type(None), bytes)
"""Leaf types :func:`snapshot` keeps as they are with no check (ints are checked: a
subclass of ``numbers.Integral`` that is not ``int`` is refused)."""


def snapshot(obj, path=(), seen=None):
    """A copy of ``obj``, checked as :func:`save` checks it (the same ``TypeError`` with
    the key path), that later changes to its tensors and arrays cannot reach: containers
    rebuilt with their types, tensors as :class:`_Frozen` host copies, arrays copied,
    immutable scalars kept. What :func:`save` writes from the snapshot equals what it
    would have written from ``obj`` at the time of the call. One walk that checks and
    copies the common types itself (~2 us an item) and leaves the rest to :func:`_check`."""
    t = type(obj)
    if t in _IMMUTABLE_LEAVES:
        return obj
    if isinstance(obj, Tensor):
        a = obj.array
        if a.dtype.kind not in _ARRAY_KINDS and a.dtype != _dtype.bfloat16:
            _check(obj, path, set())  # raises
        kind = "tensor" if t is Tensor else "parameter" if _is_parameter(obj) else "tensor"
        if type(a) is np.ndarray:
            return _Frozen(a.copy(), kind, "cpu", bool(obj.requires_grad))
        return _Frozen(np.array(obj.detach().cpu().array, copy=True), kind, str(obj.device),
                       bool(obj.requires_grad))
    if t is np.ndarray:
        if (obj.dtype.kind not in _ARRAY_KINDS and obj.dtype != _dtype.bfloat16) or obj.dtype.fields is not None:
            _check(obj, path, set())  # raises
        return obj.copy()
    if t in (dict, collections.OrderedDict, list, tuple):
        seen = set() if seen is None else seen
        if id(obj) in seen:
            raise TypeError(f"numbagrad.save: the {t.__name__} at key {_fmt_path(path)} contains itself")
        seen.add(id(obj))
        if t is dict or t is collections.OrderedDict:
            out = t()
            for k, v in obj.items():
                if type(k) is not str and (type(k) is not int or not _INT64[0] <= k <= _INT64[1]):
                    _check({k: None}, path, set())  # raises for a bad key (a valid one passes)
                out[k] = snapshot(v, path + (k,), seen)
        else:
            out = t(snapshot(v, path + (i,), seen) for i, v in enumerate(obj))
        seen.discard(id(obj))
        return out
    _check(obj, path, set())  # raises for what the format cannot hold
    return bytearray(obj) if t is bytearray else obj


def _check(obj, path, seen):
    """Refuse what the format cannot hold, before anything is written."""
    if type(obj) is _Frozen:
        return
    if isinstance(obj, Tensor):
        if obj.dtype.kind not in _ARRAY_KINDS and obj.dtype != _dtype.bfloat16:
            raise TypeError(f"numbagrad.save: tensor of dtype {obj.dtype} at key {_fmt_path(path)} "
                            "cannot be stored")
        return
    if isinstance(obj, np.ndarray):
        if (obj.dtype.kind not in _ARRAY_KINDS and obj.dtype != _dtype.bfloat16) or obj.dtype.fields is not None:
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


_PY_SCALARS = {"bool": np.bool_, "int": np.int64, "float": np.float64}
"""A Python bool, int (within 64 bits) or float: what its attribute stores (see ``_SCALARS``)."""


_ROOT_ATTRS = ("format", "format_version", "numbagrad_version")


def _safe_name(k, root=False):
    return (isinstance(k, str) and k and "/" not in k and "\x00" not in k and k not in (".", "..")
            and not k.startswith(("#", "ng_")) and not (root and k in _ROOT_ATTRS))


def _put_str(oid, name, s):
    """Store ``s`` as a fixed-length UTF-8 attribute ``name`` of the HDF5 object ``oid``
    (an h5py ``ObjectID``; see the module docstring for why not h5py's variable-length
    strings). A 0-byte string is stored as one NUL byte, which h5py reads back as ``b""``.
    Low-level ``h5a`` calls: ~12 us an attribute where ``attrs.create`` took ~40."""
    b = s.encode("utf-8")
    h5t = _h5().h5t
    tid = h5t.C_S1.copy()
    tid.set_size(max(1, len(b)))
    tid.set_cset(h5t.CSET_UTF8)
    _put_attr(oid, name, np.array(b, f"S{max(1, len(b))}"), tid)


def _put_value(oid, name, v):
    """Store the NumPy scalar or array ``v`` as the attribute ``name`` of ``oid``, typed as
    h5py's ``attrs[name] = v`` would (bool as h5py's enum, complex as its compound)."""
    a = np.asarray(v)
    if a.size == 0:  # an empty array: h5py's own path (a zero-length dataspace)
        _h5().AttributeManager(_Parent(oid))[name] = a
        return
    _put_attr(oid, name, a, _h5().h5t.py_create(a.dtype, logical=True))


class _Parent:
    """The minimum of a high-level h5py object an ``AttributeManager`` needs."""
    def __init__(self, oid):
        self.id = oid


_SPACES = {}


def _put_attr(oid, name, a, tid):
    """``h5a.create`` + ``write``: a new attribute (item names are unique in a group and
    never collide with ``ng_*`` or, at the root, the format attributes: see ``_safe_name``)."""
    h5py = _h5()
    space = _SPACES.get(a.shape)
    if space is None:
        space = h5py.h5s.create(h5py.h5s.SCALAR) if a.ndim == 0 else h5py.h5s.create_simple(a.shape)
        if len(_SPACES) < 64:
            _SPACES[a.shape] = space
    h5py.h5a.create(oid, name.encode("utf-8"), tid, space).write(np.ascontiguousarray(a), mtype=tid)


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


from . import _chunks, _h5write  # noqa: E402
from ._chunks import _BLOCK, _fletcher32_2, _fletcher32_blocks, _fletcher32_cpu, _fletcher32_end  # noqa: E402,F401


def _chunk_plan(shape, itemsize, rows):
    """``(bytes per chunk, number of chunks)`` of a C-ordered array chunked by ``rows``
    along its first axis (every other axis whole)."""
    row = itemsize
    for d in shape[1:]:
        row *= d
    return rows * row, -(-shape[0] // rows)


def _rows_per_chunk(shape, itemsize, chunk_bytes):
    """Rows per chunk: whole rows, at most ``chunk_bytes`` (``CHUNK_BYTES``) a chunk, the rows spread evenly
    over the chunks (HDF5 stores an edge chunk full size: 50257 rows of 3 KB in 64 MiB
    chunks were 3 chunks of 21845 rows, the last one 70% padding; now 16753 rows each)."""
    row = itemsize
    for d in shape[1:]:
        row *= d
    most = max(1, min(shape[0], chunk_bytes // max(1, row)))
    n = -(-shape[0] // most)
    return -(-shape[0] // n)


class _Walk:
    """The walk ``save`` makes over the object: containers, items and their kinds,
    ``ng_items`` and ``ng_crc32``. The file calls are the writer's (``out``): :class:`_Writer`
    (h5py) or :class:`._h5write.FastWriter` (the file's bytes built directly). Each has
    ``root()``, ``group(parent, name)``, ``dataset(parent, name, array, chunk_bytes)``,
    ``put_str(obj, name, s)``, ``put_value(obj, name, v)`` and ``close(parent, name, obj)``
    (after the object's own attributes)."""

    def __init__(self, out, sig=None):
        self.out = out
        self.leaves = 0   # items that are not containers, so far
        self.sig = sig    # signature(obj) to reuse kept subtrees by (FastWriter), else None
        self.at = 0       # containers entered, so far (the index into the signature's spans)

    def write(self, obj):
        """Write ``obj``; the root group's address (None for h5py)."""
        out = self.out
        if type(obj) in (dict, collections.OrderedDict, list, tuple):
            addr, key = self.kept(True)
            if addr is not None:
                return addr
            mark = self.sig and _h5write._mark(out)
        root = out.root()
        out.put_str(root, "format", FORMAT)
        out.put_value(root, "format_version", np.int64(FORMAT_VERSION))
        out.put_str(root, "numbagrad_version", __version__)
        if type(obj) in (dict, collections.OrderedDict, list, tuple):
            self.container(root, obj, root=True)
            addr = out.close_root(root)
            self.keep(key, mark, addr)
            return addr
        else:
            out.put_str(root, "ng_type", "single")
            kind, meta, patch = self.item(root, "0", obj)
            self.finish(root, "single", [[0, kind, "0"] if meta is None else [0, kind, "0", meta]],
                        [_digest(kind, obj)], [0 if patch else None])
        return out.close_root(root)

    def kept(self, root):
        """For the container entered next: ``(the address of its kept subtree put into the
        file, None)``, or ``(None, its template key)`` where none is kept (or no reuse)."""
        if not self.sig:
            return None, None
        sig, leaves, spans = self.sig
        s0, s1, l0, l1, n = spans[self.at]
        key = (self.out.checksum, root, sig[s0:s1])
        with _TEMPLATES_LOCK:
            tpl = _TEMPLATES.get(key)
            if tpl is not None:
                _TEMPLATES.move_to_end(key)
        if tpl is None:
            self.at += 1
            return None, key
        self.at += n
        self.leaves = l1
        return _h5write._reuse(self.out, tpl, leaves[l0:l1]), None

    def keep(self, key, mark, addr):
        """Keep the subtree just written (from ``mark``, header at ``addr``) as a template
        if a subtree of its signature was written before (a history that grows each save
        never is: its templates would cost more than they save)."""
        if key is None:
            return
        with _TEMPLATES_LOCK:
            if key not in _SEEN:
                _SEEN[key] = None
                while len(_SEEN) > 4 * _TEMPLATES_KEPT:
                    _SEEN.popitem(last=False)
                return
        tpl = _h5write._Template(self.out, mark, addr)
        with _TEMPLATES_LOCK:
            _TEMPLATES[key] = tpl
            while len(_TEMPLATES) > _TEMPLATES_KEPT:
                _TEMPLATES.popitem(last=False)

    def container(self, g, obj, root=False):
        if isinstance(obj, dict):
            t = "odict" if type(obj) is collections.OrderedDict else "dict"
            pairs = list(obj.items())
            names = [k if _safe_name(k, root) else f"#{i}" for i, (k, _) in enumerate(pairs)]
        else:
            t = "list" if isinstance(obj, list) else "tuple"
            pairs = list(enumerate(obj))
            names = [str(i) for i in range(len(pairs))]
        self.out.put_str(g, "ng_type", t)
        items, digests, ids = [], [], []
        for (k, v), name in zip(pairs, names):
            kind, meta, patch = self.item(g, name, v)
            items.append([k, kind, name] if meta is None else [k, kind, name, meta])
            digests.append(_digest(kind, v))
            ids.append(self.leaves - 1 if patch else None)
        self.finish(g, t, items, digests, ids)

    def finish(self, g, t, items, digests, ids):
        """Write a container's ``ng_items`` and ``ng_crc32`` (after its items); ``ids``: the
        leaf number of each item whose value is patchable (:func:`_patchable`), else None."""
        text = json.dumps(items)
        self.out.put_str(g, "ng_items", text)
        self.out.put_value(g, "ng_crc32", np.int64(_group_crc(t, text, digests)))
        self.out.crc(g, t, text, digests, ids)

    def item(self, g, name, v):
        """Write ``v`` as the item ``name`` of the group ``g``; ``(kind, meta, patch)``:
        ``meta`` the dict of an array item's 4th ``ng_items`` element, else None, and
        ``patch`` whether it is a patchable scalar (:func:`_patchable`)."""
        out = self.out
        t = type(v)
        if t is float or t is bool or (t is int and _INT64[0] <= v <= _INT64[1]):  # the common leaves, first
            self.leaves += 1
            kind = t.__name__
            out.put_scalar(g, name, kind, v)
            out.leaf(kind, True)
            return kind, None, True
        if isinstance(v, (dict, list, tuple)):
            addr, key = self.kept(False)
            if addr is not None:
                out.link(g, name, addr)
                return "group", None, False
            mark = self.sig and _h5write._mark(out)
            sub = out.group(g, name)
            self.container(sub, v)
            self.keep(key, mark, out.close(g, name, sub))
            return "group", None, False
        self.leaves += 1
        arr = _array_item(v)
        if arr is None:
            kind, how, value = _scalar_item(v)
            if how == "str":
                out.put_str(g, name, value)
            elif how == "value":
                out.put_value(g, name, value)
            patch = _patchable(kind, how)
            out.leaf(kind, patch)
            return kind, None, patch
        kind, arr, meta = arr
        ds = out.dataset(g, name, arr, CHUNK_BYTES)
        out.leaf(kind, False)
        out.put_str(ds, "ng_type", kind)  # for plain h5py readers; load reads ng_items
        out.close(g, name, ds)
        return kind, meta, False


def _array_item(v):
    """``(kind, array, meta)`` of a tensor, :class:`_Frozen` or NumPy array item, the array
    as it is stored (host memory, C-contiguous, bfloat16 as its ``uint16`` bits, 0-d as
    ``(1,)``) and ``meta`` its ``ng_items`` dict; None for any other value."""
    if isinstance(v, Tensor):
        kind = "tensor" if type(v) is Tensor else "parameter" if _is_parameter(v) else "tensor"
        arr = v.array
        if type(arr) is np.ndarray:  # host memory
            meta = {"device": "cpu", "requires_grad": bool(v.requires_grad)}
        else:
            arr = np.asarray(v.detach().cpu().array)
            meta = {"device": str(v.device), "requires_grad": bool(v.requires_grad)}
    elif type(v) is _Frozen:
        kind, arr = v.kind, v.array
        meta = {"device": v.device, "requires_grad": v.requires_grad}
    elif isinstance(v, np.ndarray):
        kind, arr, meta = "ndarray", v, {}
    else:
        return None
    if arr.dtype == _dtype.bfloat16:  # HDF5 has no bfloat16: its bits as uint16, tagged in ng_items
        arr = arr.view(np.uint16)
        meta["dtype"] = "bfloat16"
    if arr.ndim == 0:
        meta["0d"] = True
        arr = arr.reshape(1)
    return kind, np.ascontiguousarray(arr), meta


def _scalar_item(v):
    """``(kind, how, value)`` of a scalar item: its ``ng_items`` kind, and what its group
    stores: ``how`` ``"str"`` (a string attribute ``value``), ``"value"`` (a NumPy value
    attribute) or None (nothing: ``None``)."""
    if v is None:
        return "none", None, None
    if isinstance(v, int) and not isinstance(v, bool) and not _INT64[0] <= v <= _INT64[1]:
        return "bigint", "str", str(v)
    for typ, kind, conv in _SCALARS:
        if isinstance(v, typ):
            return kind, "value", conv(v)
    if isinstance(v, str):
        if v.endswith("\x00"):  # a fixed-length string would lose it: the UTF-8 bytes
            return "str", "value", np.frombuffer(v.encode("utf-8"), np.uint8)
        return "str", "str", v
    return "bytes", "value", np.frombuffer(bytes(v), np.uint8) if len(v) else np.zeros(0, np.uint8)


_FIXED = ("int", "float", "bool", "npscalar")


def _patchable(kind, how):
    """Whether a scalar item's stored bytes can be rewritten in place for another value of
    the same signature token: a fixed-size value (int, float, bool, NumPy scalar), or a
    string attribute (str, big int) of the same length."""
    return kind in _FIXED or how == "str"


def signature(obj):
    """``(sig, leaves, spans)``: what fixes the layout of ``obj``'s file, and its leaves.

    ``sig`` is a tuple of tokens in walk order: container types with their keys or
    lengths, each array's kind, dtype, shape and meta, each scalar's kind with its
    stored size where it is patchable (:func:`_patchable`), else its value. ``leaves``:
    the items that are not containers, in the order :class:`_Walk` writes them (arrays
    as stored, see :func:`_array_item`). ``spans``: per container, in the walk's order
    (the root first), ``(first token, end token, first leaf, end leaf, containers in
    its subtree)``. Two subtrees with the same tokens give the same run of bytes but for
    their leaves' values and their position: ``_h5write._Template``."""
    sig, leaves, spans = [], [], []
    try:
        _sig_item(obj, sig, leaves, spans)
    except (_Refused, RecursionError):
        _check(obj, (), set())  # raises the TypeError with the key path
        raise TypeError("numbagrad.save: the object cannot be stored") from None
    return tuple(sig), leaves, spans


def _shape_token(a):
    """An array's shape in its signature token: a non-empty 1-D array (a history that grows
    each epoch) gives only the byte width its length is stored with in the file, so a
    kept template takes any length of that width (``_h5write._reuse`` rewrites it)."""
    if a.ndim == 1 and a.size:
        return ("n", _h5write._dim_width(a.shape[0], a.itemsize))
    return a.shape


class _Refused(Exception):
    """:func:`signature` met what :func:`save` refuses (``_check`` then says where)."""


_LEAF_TYPES = (int, float, complex, str, bytes, bytearray, type(None))


def _sig_item(v, sig, leaves, spans):
    t = type(v)
    if t is float or t is bool or (t is int and _INT64[0] <= v <= _INT64[1]):  # the common leaves, first
        sig.append(t.__name__)
        leaves.append(v)
        return
    if t is dict or t is collections.OrderedDict or t is list or t is tuple:
        at, s0, l0 = len(spans), len(sig), len(leaves)
        spans.append(None)
        if t is dict or t is collections.OrderedDict:
            keys = tuple(v)
            for k in keys:
                if type(k) is not str and (type(k) is not int or not _INT64[0] <= k <= _INT64[1]):
                    raise _Refused
            sig.append(("o" if t is collections.OrderedDict else "d", keys))
            for x in v.values():
                _sig_item(x, sig, leaves, spans)
        else:
            sig.append(("l" if t is list else "t", len(v)))
            for x in v:
                _sig_item(x, sig, leaves, spans)
        spans[at] = (s0, len(sig), l0, len(leaves), len(spans) - at)
        return
    if isinstance(v, (dict, list, tuple)):
        raise _Refused
    if t is Tensor or t is np.ndarray:  # a host array of a plain dtype, n-d: its token without the meta dict
        a = v.array if t is Tensor else v
        if type(a) is np.ndarray and a.ndim and a.dtype.kind in _ARRAY_KINDS and a.dtype.fields is None \
                and a.dtype != _dtype.bfloat16:
            if not a.flags.c_contiguous:
                a = np.ascontiguousarray(a)
            sig.append(("tensor", a.dtype.str, _shape_token(a), bool(v.requires_grad)) if t is Tensor
                       else ("ndarray", a.dtype.str, _shape_token(a), None))
            leaves.append(a)
            return
    arr = _array_item(v)
    if arr is not None:
        kind, a, meta = arr
        if (a.dtype.kind not in _ARRAY_KINDS or a.dtype.fields is not None) and meta.get("dtype") != "bfloat16":
            raise _Refused
        sig.append((kind, a.dtype.str, _shape_token(a), tuple(meta.items())))
        leaves.append(a)
        return
    if t not in _LEAF_TYPES and not (isinstance(v, np.generic) and v.dtype.kind in _ARRAY_KINDS):
        try:
            _check(v, (), set())
        except TypeError:
            raise _Refused from None
    kind, how, value = _scalar_item(v)
    if kind in _FIXED:
        sig.append((kind, value.dtype.str) if kind == "npscalar" else kind)
    elif how == "str":
        sig.append((kind, len(value.encode("utf-8")) or 1))
    else:
        sig.append((kind, value.tobytes() if isinstance(value, np.ndarray) else value))
    leaves.append(v)


class _Writer:
    """The h5py writer of :class:`_Walk`: every file (any compression, many-chunk datasets,
    complex values, long attributes) can be written this way; ``save`` uses it where
    :class:`._h5write.FastWriter` raises ``Unsupported``. Groups are h5py groups,
    datasets their ``DatasetID`` wrapped in :class:`_Parent`."""

    def __init__(self, h5file, compression, checksum):
        self.file = h5file
        self.compression = compression
        self.checksum = checksum
        self._scratch = np.empty(0, np.uint8)
        self._dcpls = {}  # dataset creation property lists by chunk shape
        h5py = _h5()
        self._lcpl = h5py.h5p.create(h5py.h5p.LINK_CREATE)
        self._lcpl.set_char_encoding(h5py.h5t.CSET_UTF8)

    def root(self):
        return self.file["/"]

    @staticmethod
    def group(parent, name):
        return parent.create_group(name, track_order=True)

    @staticmethod
    def close(parent, name, obj):
        pass

    @staticmethod
    def leaf(kind, patch):
        pass

    @staticmethod
    def close_root(root):
        return None

    @staticmethod
    def crc(g, t, text, digests, ids):
        pass

    @staticmethod
    def put_str(obj, name, s):
        _put_str(obj.id, name, s)

    @staticmethod
    def put_value(obj, name, v):
        _put_value(obj.id, name, v)

    @staticmethod
    def put_scalar(obj, name, kind, v):
        _put_value(obj.id, name, _PY_SCALARS[kind](v))

    def dataset(self, g, name, a, chunk_bytes):
        """Write the C-contiguous ``a`` (a 0-d array already as ``(1,)``) as the dataset
        ``name`` of ``g``, returning its low-level ``DatasetID`` (in a :class:`_Parent`).
        The common case (no compression, native byte order) is created with low-level
        ``h5d`` calls (~20 us, where ``create_dataset`` took ~75) and written with
        :meth:`write_chunks`."""
        h5py = _h5()
        if a.size == 0:
            dsid = g.create_dataset(name, shape=a.shape, dtype=a.dtype).id
        else:
            rows = _rows_per_chunk(a.shape, a.itemsize, chunk_bytes)
            chunks = (rows,) + a.shape[1:]
            if self.compression is None and a.dtype.isnative:
                dcpl = self._dcpls.get(chunks)
                if dcpl is None:
                    dcpl = self._dcpls[chunks] = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
                    dcpl.set_chunk(chunks)
                    if self.checksum:
                        dcpl.set_fletcher32()
                    dcpl.set_obj_track_times(False)
                dsid = h5py.h5d.create(g.id, name.encode("utf-8"), h5py.h5t.py_create(a.dtype, logical=True),
                                       h5py.h5s.create_simple(a.shape), dcpl=dcpl, lcpl=self._lcpl)
                self.write_chunks(dsid, a, rows)
            else:
                ds = g.create_dataset(name, shape=a.shape, dtype=a.dtype, chunks=chunks,
                                      fletcher32=self.checksum, compression=self.compression)
                ds.write_direct(a)
                dsid = ds.id
        return _Parent(dsid)

    def write_chunks(self, dsid, a, rows):
        """Write ``a`` chunk by chunk past HDF5's filter pipeline (``write_direct_chunk`` on
        the low-level dataset ``dsid``): a whole chunk straight from ``a``'s memory, or,
        with ``checksum``, copied into a reused buffer with the fletcher32 the filter would
        have appended (:func:`_fletcher32_cpu`): plain h5py reads verify it as usual.
        HDF5's own filter computed it at ~3 GB/s into a fresh buffer per chunk: 400 MB of
        float32 took 0.43 s to write instead of 0.29 s (perf/test_bench_checkpoint.py)."""
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
                    buf[cb:].view("<u4")[0] = _fletcher32_cpu(buf[:cb])
            dsid.write_direct_chunk((c * rows,) + tail, buf)


def _h5():
    import h5py
    return h5py


def _write_h5py(h5file, obj, compression, checksum):
    _Walk(_Writer(h5file, compression, checksum)).write(obj)


_TEMPLATES = collections.OrderedDict()
"""``(checksum, root?, a container's signature tokens)`` -> ``_h5write._Template`` of the
subtrees built most recently (at most ``_TEMPLATES_KEPT``): a save of a state whose parts
were saved before (a training loop's checkpoint every epoch) puts those parts' bytes in
with the values rewritten, and walks only what is new (a history grown by one entry)."""
_TEMPLATES_KEPT = 1024
_SEEN = collections.OrderedDict()
"""The keys of subtrees written once (a template is kept at the second)."""
_TEMPLATES_LOCK = threading.Lock()


def _built(obj, checksum):
    """The file's bytes built by :class:`._h5write.FastWriter` (reusing the kept subtrees,
    see ``_TEMPLATES``: byte for byte the same file), or None where it cannot write
    ``obj`` (see ``_h5write.Unsupported``)."""
    out = _h5write.FastWriter(checksum)
    try:
        out.finish(_Walk(out, signature(obj)).write(obj))
    except _h5write.Unsupported:
        return None
    return out


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
    if not (isinstance(f, (str, bytes, os.PathLike)) or (hasattr(f, "write") and hasattr(f, "seek"))):
        _check(obj, (), set())  # what the object holds is checked first
        raise TypeError(f"numbagrad.save: f must be a path or a binary file object, got {type(f).__name__}")
    if compression is None:
        built = _built(obj, checksum)  # checks the object as _check does (signature)
    else:
        _check(obj, (), set())
        built = None
    if isinstance(f, (str, bytes, os.PathLike)):
        if built is not None:
            commit_parts(os.fsdecode(f), built.parts)
            return
        with atomic_path(os.fsdecode(f)) as tmp:
            with _h5().File(tmp, "w", libver="latest", track_order=True) as h:
                _write_h5py(h, obj, compression, checksum)
        return
    if built is not None:
        f.seek(0)
        built.write_to(f)
        if hasattr(f, "truncate"):
            f.truncate()
        return
    with _h5().File(f, "w", libver="latest", track_order=True) as h:
        _write_h5py(h, obj, compression, checksum)


# ---- loading ---------------------------------------------------------------------------------
_POOL_BYTES = 1 << 20
"""A chunk of at least this many bytes is queued for the reading threads (:meth:`_Reader.add_job`)."""
_WORKERS = min(4, os.cpu_count() or 1)
"""With 2 or more, big chunks are read by one worker thread during the walk of the file's
groups and by it and the loading thread after the walk; with 1, as the walk finds them."""


_PIECE = 1456 * _BLOCK
"""A big chunk is read and checksummed in pieces of this many bytes (~1 MiB, whole
fletcher32 blocks), each summed while it is still in the cache."""


class _Placement:
    """A tensor to move to its device once its group is verified."""
    __slots__ = ("t", "saved", "kind", "rg", "path", "jobs")

    def __init__(self, t, saved, kind, rg, path, jobs):
        self.t, self.saved, self.kind, self.rg, self.path, self.jobs = t, saved, kind, rg, path, jobs


def _finish_tensor(t, kind, rg):
    if kind == "parameter":
        from ..nn.parameter import Parameter
        return Parameter(t, requires_grad=rg)
    return t.requires_grad_(True) if rg and t.dtype.kind == "f" else t


class _Reader:
    def __init__(self, name, map_location, fd=None, fsize=0):
        self.name = name
        self.map_location = map_location
        self.fd = fd          # a descriptor of the file HDF5 has open, for raw chunk reads; None: a file object
        self.fsize = fsize
        self.jobs = []        # [None, read args, path, dataset name, chunk index(, verdict)]: big chunks
        import threading
        self.cond = threading.Condition()
        self.pending = []     # jobs no thread has claimed yet
        self.walking = True   # the walk of the groups goes on (the worker waits for more jobs)
        self.worker = None

    def fail(self, reason, path=None):
        return CheckpointError(self.name, reason, _fmt_path(path) if path else None)

    def container(self, g, path, gname="/"):
        t = _attr(g, "ng_type")
        raw = _attr(g, "ng_items")
        if t not in ("dict", "odict", "list", "tuple", "single") or not isinstance(raw, str):
            raise self.fail(f"group {gname!r} is not a numbagrad container (ng_type={t!r})", path)
        try:
            items = json.loads(raw)
        except ValueError as e:
            raise self.fail(f"damaged item list of group {gname!r} ({e})", path) from None
        if not isinstance(items, list):
            raise self.fail(f"damaged item list of group {gname!r}", path)
        keys, values, digests = [], [], []
        for i, it in enumerate(items):
            if not (isinstance(it, list) and len(it) in (3, 4) and isinstance(it[0], (str, int))
                    and not isinstance(it[0], bool) and isinstance(it[1], str) and isinstance(it[2], str)
                    and (len(it) == 4) == (it[1] in ("tensor", "parameter", "ndarray"))
                    and (len(it) == 3 or isinstance(it[3], dict))):
                raise self.fail(f"damaged entry {i} in the item list of group {gname!r}", path)
            k, kind, name = it[:3]
            if t in ("list", "tuple", "single") and k != i:
                raise self.fail(f"entry {i} of the {t} {gname!r} has index {k!r}", path)
            keys.append(k)
            sub = gname.rstrip("/") + "/" + name
            if len(it) == 4:
                values.append(self.dataset(g, name, sub, kind, it[3], path + (k,)))
            else:
                values.append(self.item(g, kind, name, sub, path + (k,)))
            digests.append(_digest(kind, values[-1]))
        crc = _attr(g, "ng_crc32")
        if crc != _group_crc(t, raw, digests):
            raise self.fail(f"group {gname!r} has no ng_crc32 checksum" if crc is None else
                            f"checksum mismatch in the attributes of group {gname!r} (damaged, or edited "
                            "without updating ng_crc32)", path)
        for i, v in enumerate(values):
            if type(v) is _Placement:
                self.wait(v.jobs)
                dev = self.device_for(v.saved, v.path)
                values[i] = _finish_tensor(v.t.to(dev) if dev != "cpu" else v.t, v.kind, v.rg)
        if t == "single":
            if len(values) != 1:
                raise self.fail("the root holds no single object", path)
            return values[0]
        if t in ("dict", "odict"):
            d = dict(zip(keys, values)) if t == "dict" else collections.OrderedDict(zip(keys, values))
            if len(d) != len(keys):
                raise self.fail(f"duplicate keys in group {gname!r}", path)
            return d
        return values if t == "list" else tuple(values)

    def item(self, g, kind, name, sub, path):
        h5py = _h5()
        if kind == "group":
            grp = g.get(name)
            if not isinstance(grp, h5py.Group):
                raise self.fail(f"missing group {name!r} in {g.name!r}", path)
            return self.container(grp, path, sub)
        if kind == "none":
            return None
        try:
            v = _read_attr(g.id, name)
        except KeyError:
            raise self.fail(f"missing attribute {name!r} of {g.name!r}", path) from None
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

    def dataset(self, g, name, sub, kind, meta, path):
        """The tensor or array item ``name`` of ``g``; ``meta`` is its ``ng_items`` dict
        (device, requires_grad, 0d). No attribute of the dataset is read."""
        h5py = _h5()
        zero_d = meta.get("0d", False)
        dev = meta.get("device", "cpu")
        rg = meta.get("requires_grad", False)
        bf16 = meta.get("dtype") == "bfloat16"
        if not (zero_d is True or zero_d is False) or not isinstance(dev, str) or not isinstance(rg, bool) \
                or meta.get("dtype", "bfloat16") != "bfloat16" \
                or (kind == "ndarray" and ("device" in meta or "requires_grad" in meta)):
            raise self.fail(f"damaged metadata {meta!r} of dataset {sub!r}", path)
        try:
            dsid = h5py.h5d.open(g.id, name.encode("utf-8"))
        except Exception:  # noqa: BLE001 - h5py raises KeyError, OSError, ValueError... for a missing name
            dsid = None
        if dsid is None or not isinstance(dsid, h5py.h5d.DatasetID):
            raise self.fail(f"missing dataset {name!r} in {g.name!r}", path)
        dt, shape = dsid.dtype, dsid.shape
        if dt.kind not in _ARRAY_KINDS or dt.fields is not None and dt.kind != "c":
            raise self.fail(f"dataset {sub!r} has dtype {dt}, not a tensor dtype", path)
        if not isinstance(shape, tuple) or zero_d and shape != (1,):
            raise self.fail(f"dataset {sub!r} has shape {shape}, expected {(1,) if zero_d else 'an array'}",
                            path)
        jobs = len(self.jobs)
        try:
            arr = None
            if 0 not in shape:
                arr = self.read_chunks(dsid, dt, shape, sub, path)
            if arr is None:
                arr = np.empty(shape, dt)
                if arr.size:
                    dsid.read(h5py.h5s.ALL, h5py.h5s.ALL, arr)
        except (OSError, ValueError, RuntimeError, TypeError, KeyError) as e:
            raise self.fail(f"cannot read dataset {sub!r} ({_first_line(e)})", path) from None
        if bf16:
            if arr.dtype != np.uint16:
                raise self.fail(f"bfloat16 dataset {sub!r} stored as {arr.dtype}, expected uint16", path)
            arr = arr.view(_dtype.bfloat16)
        if zero_d:
            arr = arr.reshape(())
        if kind == "ndarray":
            return arr
        t = Tensor._from_array(arr)
        if dev != "cpu" or self.map_location is not None:
            # placed after the group's ng_crc32 is checked (it covers the device) and
            # its bytes are in: see container()
            return _Placement(t, dev, kind, rg, path, self.jobs[jobs:])
        return _finish_tensor(t, kind, rg)

    def read_chunks(self, dsid, dt, shape, sub, path):
        """The array of a dataset laid out as :meth:`_Writer.dataset` writes it (chunks of
        whole rows; no filter, or only fletcher32), read past HDF5's filter pipeline, each
        chunk's checksum verified with :func:`_fletcher32_cpu`; None for any other layout
        (the caller then reads through HDF5).

        From a path, each chunk's bytes are read at its file offset (``get_chunk_info``,
        checked against the file's size) straight into the result with ``pread`` inside
        :func:`_chunks._read_jobs` (:meth:`_run`): a chunk under ``_POOL_BYTES`` at once, bigger ones queued
        (:meth:`add_job`) for a worker thread that reads them while this thread walks on
        (``pread`` and the checksums in one ``nogil`` numba call per batch,
        :func:`_chunks._read_jobs`) and for both threads after the walk, every verdict in
        before ``load`` returns. 400 MB: the walk of 200 datasets ~20 ms, reads ~5 GB/s a
        thread; 55 ms where reading only after the walk took 63 and torch.load 50. HDF5's
        ``read_direct_chunk`` cost ~40 us a chunk more (a lookup by coordinates and its
        own copy) and one thread verified while none read: 400 MB took 143 ms to load
        where torch took 53. From a file object, ``read_direct_chunk``."""
        h5py = _h5()
        plist = dsid.get_create_plist()
        if plist.get_layout() != h5py.h5d.CHUNKED or not dt.isnative:
            return None
        chunks = plist.get_chunk()
        if tuple(chunks[1:]) != tuple(shape[1:]):
            return None
        filters = [plist.get_filter(i)[0] for i in range(plist.get_nfilters())]
        if filters not in ([], [h5py.h5z.FILTER_FLETCHER32]):
            return None
        extra = 4 * len(filters)
        rows = chunks[0]
        cb, n = _chunk_plan(shape, dt.itemsize, rows)
        nbytes = shape[0] * (cb // rows)
        stored = dsid.get_num_chunks()
        if stored != n:
            raise self.fail(f"dataset {sub!r} holds {stored} chunks, expected {n}", path)
        infos = [None] * n
        for i in range(n):
            info = dsid.get_chunk_info(i)
            c, r = divmod(info.chunk_offset[0], rows)
            if r or any(info.chunk_offset[1:]) or not 0 <= c < n or infos[c] is not None:
                raise self.fail(f"dataset {sub!r} has a chunk at {info.chunk_offset}", path)
            infos[c] = info
        for c, info in enumerate(infos):
            if info.size != cb + extra:
                raise self.fail(f"chunk {c} of dataset {sub!r} holds {info.size} bytes, expected {cb + extra}",
                                path)
            if info.filter_mask:
                raise self.fail(f"chunk {c} of dataset {sub!r} was stored unfiltered", path)
        if self.fd is None:
            return self.read_direct(dsid, dt, shape, sub, path, infos, cb, extra, nbytes)
        buf = np.empty(nbytes, np.uint8)
        for c, info in enumerate(infos):
            if info.byte_offset + info.size > self.fsize:
                raise self.fail(f"chunk {c} of dataset {sub!r} lies beyond the end of the file", path)
            used = min(cb, nbytes - c * cb)
            spill = tail = None
            if used == cb:
                head = buf[c * cb:(c + 1) * cb]
                bufs = [head]
            else:  # the edge chunk, stored full size: whole fletcher32 blocks in place, the rest in scratch
                h = used // _BLOCK * _BLOCK
                head = buf[c * cb:c * cb + h]
                tail = np.empty(cb - h, np.uint8)
                bufs = [head, tail]
                spill = (buf[c * cb + h:c * cb + used], tail[:used - h])
            trailer = np.empty(4, np.uint8) if extra else None
            if trailer is not None:
                bufs.append(trailer)
            args = (self.fd, info.byte_offset, bufs, head, tail if extra else None, trailer, spill)
            job = [None, args, path, sub, c]
            if info.size >= _POOL_BYTES and _WORKERS > 1:
                self.add_job(job)  # read by the worker thread, or by wait()
            else:  # now, on this thread
                self._run([job])
                if job[5]:
                    raise self.fail(f"cannot read dataset {sub!r} ({job[5]} in chunk {c})", path)
        return buf.view(dt).reshape(shape)

    def read_direct(self, dsid, dt, shape, sub, path, infos, cb, extra, nbytes):
        """:meth:`read_chunks` from a file object: ``read_direct_chunk``, in order, each
        chunk in place (its checksum in the next chunk's first bytes, read after it is
        checked); the edge chunk, stored full size, through a copy."""
        buf = np.empty(nbytes + extra, np.uint8)
        for c, info in enumerate(infos):
            whole = (c + 1) * cb <= nbytes
            dst = buf[c * cb:(c + 1) * cb + extra] if whole else np.empty(cb + extra, np.uint8)
            mask, _ = dsid.read_direct_chunk(info.chunk_offset, out=dst)
            if mask:
                raise self.fail(f"chunk {c} of dataset {sub!r} was stored unfiltered", path)
            if extra and int(dst[cb:].view("<u4")[0]) != _fletcher32_cpu(dst[:cb]):
                raise self.fail(f"cannot read dataset {sub!r} (fletcher32 checksum mismatch in chunk {c})", path)
            if not whole:
                buf[c * cb:nbytes] = dst[:nbytes - c * cb]
        return buf[:nbytes].view(dt).reshape(shape)

    # ---- big chunks: read by a worker thread during the walk, and by both threads after it
    _CLAIM_BYTES = 16 << 20
    """After the walk, each thread claims at most this many bytes of chunks at a time."""

    def add_job(self, job):
        """Queue a big chunk's read (``job = [None, args, path, name, chunk index]``). The
        first one starts the worker thread, which reads batches of queued chunks while this
        thread walks on (:meth:`_drain`)."""
        self.jobs.append(job)
        with self.cond:
            self.pending.append(job)
            if self.worker is None:
                import threading
                self.worker = threading.Thread(target=self._drain, name="numbagrad-load", daemon=True)
                self.worker.start()
            self.cond.notify()

    def _claim(self, wait):
        """Take queued jobs off ``pending``: all of them while the walk goes on (the worker
        waits out a GIL switch interval per claim then), ``_CLAIM_BYTES`` worth after it.
        ``wait``: block until there is something or the walk is over. [] when done."""
        with self.cond:
            while wait and not self.pending and self.walking:
                self.cond.wait()
            if not self.walking:
                got, size = [], 0
                while self.pending and (not got or size < self._CLAIM_BYTES):
                    j = self.pending.pop()
                    got.append(j)
                    size += j[1][3].nbytes
                return got
            got, self.pending = self.pending, []
            return got

    def _drain(self):
        while True:
            batch = self._claim(wait=True)
            if not batch:
                return
            self._run(batch)

    @staticmethod
    def _run(batch):
        """Read and check ``batch`` (:func:`_chunks._read_jobs`: ``pread`` and the checksums in
        one ``nogil`` numba call); each job gets its verdict appended."""
        table = np.zeros((len(batch), _chunks._J_COLS), np.int64)
        fd = batch[0][1][0]
        for r, j in enumerate(batch):
            _, offset, bufs, head, tail, trailer, spill = j[1]
            row = table[r]
            row[_chunks._J_OFFSET] = offset
            row[_chunks._J_HEAD], row[_chunks._J_HEAD_LEN] = head.ctypes.data, head.size
            if len(bufs) > 1 and bufs[1] is not trailer:  # an edge chunk's scratch tail
                row[_chunks._J_TAIL], row[_chunks._J_TAIL_LEN] = bufs[1].ctypes.data, bufs[1].size
            if trailer is not None:
                row[_chunks._J_TRAILER] = trailer.ctypes.data
            if spill is not None:
                row[_chunks._J_SPILL], row[_chunks._J_SPILL_LEN] = spill[0].ctypes.data, spill[0].size
        status = np.full(len(batch), -1, np.int64)
        _chunks._read_jobs(fd, table, status, 0, len(batch), _PIECE)
        for j, v in zip(batch, status):
            j.append(_chunks.STATUS_TEXT.get(int(v), "no verdict") if v else None)

    def wait(self, jobs=None):
        """Finish the chunk reads :meth:`add_job` queued and raise for the first bad chunk
        among ``jobs`` (all by default). ``jobs=None`` ends the walk: this thread then reads
        queued chunks too, beside the worker, until none is left."""
        if jobs is None:
            with self.cond:
                self.walking = False
                self.cond.notify_all()
            while True:
                batch = self._claim(wait=False)
                if not batch:
                    break
                self._run(batch)
            self._join()
            jobs = self.jobs
        else:
            while any(len(j) == 5 for j in jobs):  # a group's placements wait for its own chunks
                mine = []
                with self.cond:
                    for j in jobs:
                        if j in self.pending:
                            self.pending.remove(j)
                            mine.append(j)
                if mine:
                    self._run(mine)
                elif any(len(j) == 5 for j in jobs):
                    import time
                    time.sleep(0.0005)  # the worker has them: let it finish
        bad = None
        for j in jobs:
            why = j[5]
            if why and bad is None:
                bad = self.fail(f"cannot read dataset {j[3]!r} ({why} in chunk {j[4]})", j[2])
        if bad is not None:
            raise bad

    def _join(self):
        if self.worker is not None:
            with self.cond:
                self.walking = False
                self.cond.notify_all()
            self.worker.join()  # it writes into memory the result owns: always wait for it
            self.worker = None

    def close(self):
        """Let every read in flight finish (even after an error: they write into memory
        the result would own, through a descriptor about to be closed)."""
        with self.cond:
            self.pending = []  # after an error: nothing new for the worker
        self._join()
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def device_for(self, saved, path):
        m = self.map_location
        if isinstance(m, dict):
            m = m.get(saved, saved)
        target = saved if m is None else str(m)
        if target.startswith("cuda"):
            from ..backend.dispatch import device_available
            if not device_available("cuda"):
                raise RuntimeError(
                    f"numbagrad.load({self.name!r}): the tensor at key {_fmt_path(path)} was saved on {saved} and "
                    "CUDA is not available here; pass map_location='cpu'")
        return "cpu" if target.startswith("cpu") else target


def _first_line(e):
    return str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__


def _read_attr(oid, name):
    """``attrs[name]`` of the HDF5 object ``oid`` as h5py returns it (a NumPy scalar,
    ``bytes`` for a fixed-length string, an array), with low-level ``h5a`` calls (~8 us where
    ``attrs[name]`` took ~40) and h5py's own path for anything unusual. KeyError when
    missing."""
    h5py = _h5()
    a = h5py.h5a.open(oid, name.encode("utf-8"))
    dt, shape = a.dtype, a.shape
    if (shape is None or dt.kind not in "biufcS" or set(dt.metadata or ()) - {"h5py_encoding"}
            or dt.fields is not None and dt.kind != "c"):
        return h5py.AttributeManager(_Parent(oid))[name]
    out = np.empty(shape, dt)
    a.read(out, mtype=a.get_type() if dt.kind == "S" else None)
    return out[()] if out.ndim == 0 else out


def _attr(obj, name):
    try:
        v = _read_attr(obj.id, name)
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
            if isinstance(src, str) and os.name == "posix" and h.driver == "sec2" and h.userblock_size == 0:
                # raw chunk reads through HDF5's own descriptor (dup'd): the very file it opened
                try:
                    reader.fd = os.dup(h.id.get_vfd_handle())
                    reader.fsize = os.fstat(reader.fd).st_size
                except (OSError, ValueError, TypeError):  # then read_direct_chunk, as from a file object
                    if reader.fd is not None:
                        os.close(reader.fd)
                    reader.fd = None
            try:
                obj = reader.container(h["/"], ())
                reader.wait()
            finally:
                reader.close()
            return obj
    except (CheckpointError, MemoryError, RuntimeError) as e:
        if isinstance(e, RuntimeError) and "CUDA is not available" not in str(e):
            raise CheckpointError(name, f"damaged file ({_first_line(e)})") from None
        raise
    except Exception as e:  # h5py raises OSError/KeyError/ValueError... on damaged files
        raise CheckpointError(name, f"damaged file ({type(e).__name__}: {_first_line(e)})") from None


__all__ = ["save", "load", "CheckpointError", "FORMAT", "FORMAT_VERSION"]
