"""The checkpoint's HDF5 bytes built directly: :class:`FastWriter`, the writer ``save`` uses
for the common checkpoint (no compression; every dataset one chunk; attribute texts under
64 KB), falling back to h5py (:class:`._format._Writer`) for anything else.

Why: ``save`` through h5py costs ~60 us an HDF5 object (group, dataset, attribute) in the
library's calls, whatever the object's size. The digits main job's per-epoch run state
(29 groups, 30 datasets, ~160 attributes, 250 KB) took 10 ms of CPU to save that way, 60%
of its 16 ms epoch, so a checkpoint every epoch cost the job 6-15%. Built here, the same
file takes ~0.6 ms (perf/test_bench_checkpoint.py), and a save of the same structure
again (the next epoch's) ~0.1 ms: :class:`_Plan` keeps the first file's headers and
rewrites only the values that changed.

What it writes is the layout ``_format``'s docstring documents, in HDF5's file format
(the HDF5 File Format Specification, version 3), using only its newer structures, which
every HDF5 release since 1.10 reads:

* a version 2 superblock (the root group's address, the end-of-file address, a checksum);
* version 2 object headers ("OHDR"), one chunk each, each closed by its checksum (Bob
  Jenkins' lookup3 hash, as HDF5 computes it: :func:`lookup3`);
* groups in compact form: a Link Info message with no fractal heap, a Group Info
  message, one Link message per child, and every attribute as an Attribute message in
  the header, so all of a group's names and values are under the header's checksum
  (h5py moves a group's attributes past 8 into an unchecksummed fractal heap);
* datasets with a Dataspace, a Datatype, a Fill Value and a Data Layout message: chunked
  with the single-chunk index (layout version 4) and the fletcher32 filter (a Filter
  Pipeline message), or, with no data, contiguous with no storage, as h5py makes them;
  each chunk's bytes are the array's own, followed by their fletcher32;
* attribute datatypes as h5py writes them: little-endian integers and IEEE floats,
  fixed-length UTF-8 strings (null-terminated), and bool as h5py's enum of int8
  (``FALSE`` = 0, ``TRUE`` = 1).

tests/io/test_h5write.py holds it to h5py: every value reads back through plain h5py with
the same datatype (``H5Tequal``) and value as the h5py writer's file, and ``load`` returns
equal objects from both.
"""
import os
import struct

import numpy as np

from ..kernels._jit import exact_jit, gil_copy
from ._chunks import _fletcher32_cpu

_fletcher32 = gil_copy(_fletcher32_cpu, "held")
"""The chunks' fletcher32, keeping the GIL: a saver thread builds a file in one hold of
the GIL instead of handing it to the training thread at each dataset."""

_SIGNATURE = b"\x89HDF\r\n\x1a\n"
_UNDEF = b"\xff" * 8
_SUPERBLOCK = 48
"""Bytes of a version 2 superblock; the first object follows it."""
_MESSAGE_MAX = 0xFFFF
"""An object header message's size field is 2 bytes."""

# object header message types
_DATASPACE, _LINK_INFO, _DATATYPE, _FILL, _LINK, _LAYOUT, _GROUP_INFO, _FILTERS, _ATTRIBUTE = \
    0x01, 0x02, 0x03, 0x05, 0x06, 0x08, 0x0A, 0x0B, 0x0C
_CONSTANT = 0x01
"""Message flag: the message's value never changes (HDF5 sets it on datatypes)."""


class Unsupported(Exception):
    """Raised while building when the object needs what this writer does not make (a
    compressed or many-chunk dataset, a complex value, an attribute of 64 KB or more, an
    empty byte string): ``save`` then writes the file with h5py."""


@exact_jit
def _word(data, i, n):
    """The little-endian 32-bit word at byte ``i`` of ``data``, bytes at ``n`` and past as 0."""
    w = 0
    for j in range(4):
        if i + j < n:
            w |= np.int64(data[i + j]) << (8 * j)
    return w


@exact_jit
def _rot(x, k):
    return ((x << k) | (x >> (32 - k))) & 0xFFFFFFFF


@exact_jit
def _lookup3(data):
    """``H5_checksum_lookup3(data, len, 0)``: Bob Jenkins' lookup3 ``hashlittle`` over the
    bytes of ``data`` (1-D uint8), the checksum of HDF5's superblock and object headers.
    32-bit arithmetic kept in int64 and masked."""
    m = 0xFFFFFFFF
    n = data.size
    a = (0xDEADBEEF + n) & m
    b = a
    c = a
    i = 0
    while n - i > 12:                       # mix(a, b, c) after each 12 bytes but the last
        a = (a + _word(data, i, n)) & m
        b = (b + _word(data, i + 4, n)) & m
        c = (c + _word(data, i + 8, n)) & m
        for k in (4, 6, 8, 16, 19, 4):      # a -= c; a ^= rot(c, k); c += b; then b, c, a take the roles
            a = ((a - c) & m) ^ _rot(c, k)
            c = (c + b) & m
            a, b, c = b, c, a
        i += 12
    if n == i:
        return c
    a = (a + _word(data, i, n)) & m        # the last 1-12 bytes, zero-padded
    b = (b + _word(data, i + 4, n)) & m
    c = (c + _word(data, i + 8, n)) & m
    x, y, z = c, b, a                       # final(a, b, c): c ^= b; c -= rot(b, k); then a, c, b ...
    for k in (14, 11, 25, 16, 4, 14, 24):
        x = ((x ^ y) - _rot(y, k)) & m
        x, y, z = z, x, y
    return y                                # c, last updated by the 7th step


def lookup3(buf):
    """HDF5's metadata checksum of the bytes ``buf``."""
    return int(_lookup3(np.frombuffer(buf, np.uint8)))


# ---- datatypes (the Datatype message's bytes) --------------------------------------------------
def _int_type(size, signed):
    return struct.pack("<B3BIHH", 0x10, 0x08 if signed else 0, 0, 0, size, 0, 8 * size)


_FLOAT_LAYOUT = {2: (15, 10, 5, 10, 15), 4: (31, 23, 8, 23, 127), 8: (63, 52, 11, 52, 1023)}
"""itemsize: (sign bit, exponent position, exponent bits, mantissa bits, exponent bias)."""


def _float_type(size):
    sign, epos, esize, msize, bias = _FLOAT_LAYOUT[size]
    # class 1 version 1; mantissa normalisation "implied" (bits 4-5 = 2); sign location
    return struct.pack("<B3BIHHBBBBI", 0x11, 0x20, sign, 0, size, 0, 8 * size, epos, esize, 0, msize, bias)


def _bool_type():
    # h5py's bool: an enum (class 8, version 3) of int8 with FALSE = 0 and TRUE = 1
    return struct.pack("<B3BI", 0x38, 2, 0, 0, 1) + _int_type(1, True) + b"FALSE\x00TRUE\x00" + b"\x00\x01"


def _str_type(n):
    # class 3 version 1: null-terminated padding (0), UTF-8 (charset 1)
    return struct.pack("<B3BI", 0x13, 0x10, 0, 0, n)


def _numeric_types():
    out = {np.dtype(np.bool_): _bool_type()}
    for t in (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64):
        d = np.dtype(t)
        out[d] = _int_type(d.itemsize, d.kind == "i")
    for t in (np.float16, np.float32, np.float64):
        out[np.dtype(t)] = _float_type(np.dtype(t).itemsize)
    return out


_TYPES = _numeric_types()
"""The Datatype message of every NumPy dtype this writer stores (native little-endian)."""


def _datatype(dtype):
    t = _TYPES.get(dtype)
    if t is None or not dtype.isnative:
        raise Unsupported(f"dtype {dtype}")
    return t


def _dataspace(shape):
    """A version 2 Dataspace message: scalar for ``()``, else simple with these dims."""
    if not shape:
        return b"\x02\x00\x00\x00"
    return struct.pack(f"<4B{len(shape)}Q", 2, len(shape), 0, 1, *shape)


def _message(mtype, body, flags=0):
    if len(body) > _MESSAGE_MAX:
        raise Unsupported(f"a {len(body)}-byte header message")
    return struct.pack("<BHB", mtype, len(body), flags) + body


def _attribute(name, dtype_msg, space, data):
    nb = name.encode("utf-8") + b"\x00"
    cset = 0 if nb.isascii() else 1
    return _message(_ATTRIBUTE, struct.pack("<BBHHHB", 3, 0, len(nb), len(dtype_msg), len(space), cset)
                    + nb + dtype_msg + space + data)


def _link(name, addr):
    nb = name.encode("utf-8")
    n = len(nb)
    size_code, fmt = (0, "<B") if n < 0x100 else (1, "<H") if n < 0x10000 else (2, "<I")
    # version 1; flags: size of the name-length field, charset present (UTF-8); a hard link
    return _message(_LINK, struct.pack("<BBB", 1, 0x10 | size_code, 1) + struct.pack(fmt, n) + nb
                    + struct.pack("<Q", addr))


_GROUP_MESSAGES = (_message(_LINK_INFO, b"\x00\x00" + _UNDEF + _UNDEF)   # compact links: no heap, no index
                   + _message(_GROUP_INFO, b"\x00\x00", _CONSTANT))      # default phase-change values
_FILL_CHUNKED = _message(_FILL, b"\x03\x0b", _CONSTANT)     # allocation incremental, fill value if set
_FILL_EMPTY = _message(_FILL, b"\x03\x0a", _CONSTANT)       # allocation late
_FLETCHER32 = _message(_FILTERS, struct.pack("<BBHHH", 2, 1, 3, 0, 0), _CONSTANT)  # version 2: one filter, id 3


class _Header:
    """An object header being built: its messages' bytes, in order; once written, the index
    of its part in the file and where each message starts in that part."""
    __slots__ = ("msgs", "part", "starts")

    def __init__(self, first=b""):
        self.msgs = [first] if first else []
        self.part = None
        self.starts = None


class FastWriter:
    """Builds a checkpoint file's bytes (``parts``, in order, from offset 0) through the
    hooks ``_format._Walk`` calls. Nothing is written until :meth:`write_to`, so an
    :class:`Unsupported` on the way costs only the walk."""

    def __init__(self, checksum):
        self.checksum = checksum
        self.parts = [None]     # the superblock, last
        self.pos = _SUPERBLOCK
        # what a _Plan needs to rebuild the file for new leaf values
        self.slots = []         # per leaf (walk order): ("array", data part, checksum part or -1),
        #                         ("value", kind, header, message index, data bytes) or None
        self.crcs = []          # per container: (header, message index, t, text, digests, ids)
        self._value = None      # (header, message index, data bytes) of the last put_value
        self._data = None       # (data part, checksum part) of the last non-empty dataset

    @classmethod
    def from_parts(cls, checksum, parts):
        out = cls(checksum)
        out.parts = parts
        return out

    def _add(self, buf):
        addr = self.pos
        self.parts.append(buf)
        self.pos += buf.nbytes if isinstance(buf, (memoryview, np.ndarray)) else len(buf)
        return addr

    # ---- the hooks of _format._Walk ----
    def root(self):
        return _Header(_GROUP_MESSAGES)

    def group(self, parent, name):
        return _Header(_GROUP_MESSAGES)

    def close(self, parent, name, obj):
        parent.msgs.append(_link(name, self._end(obj)))

    def put_str(self, obj, name, s):
        b = s.encode("utf-8")
        obj.msgs.append(_attribute(name, _str_type(max(1, len(b))), _dataspace(()), b or b"\x00"))

    def put_value(self, obj, name, v):
        a = np.asarray(v)
        if a.size == 0:
            raise Unsupported("an empty attribute")
        obj.msgs.append(_attribute(name, _datatype(a.dtype), _dataspace(a.shape), a.tobytes()))
        self._value = (obj, len(obj.msgs) - 1, a.nbytes)

    def leaf(self, kind):
        """The walk wrote a leaf item of ``kind``: where its bytes are, for a _Plan."""
        from ._format import PATCHABLE
        if kind in ("tensor", "parameter", "ndarray"):
            self.slots.append(("array",) + self._data if self._data is not None else None)
            self._data = None
        elif kind in PATCHABLE:
            self.slots.append(("value", kind) + self._value)
        else:
            self.slots.append(None)

    def crc(self, g, t, text, digests, ids):
        """The walk wrote the container ``g``'s ``ng_crc32`` (the last ``put_value``)."""
        self.crcs.append(self._value[:2] + (t, text, digests, ids))

    def dataset(self, parent, name, a, chunk_bytes):
        """The dataset of the C-contiguous array ``a`` (a 0-d array already as ``(1,)``)."""
        dt = _datatype(a.dtype)
        if a.size == 0:
            layout = struct.pack("<BB", 3, 1) + _UNDEF + struct.pack("<Q", 0)   # contiguous, no storage
            return _Header(_message(_DATASPACE, _dataspace(a.shape)) + _message(_DATATYPE, dt, _CONSTANT)
                           + _FILL_EMPTY + _message(_LAYOUT, layout))
        if a.nbytes > chunk_bytes:
            raise Unsupported("a dataset of more than one chunk")
        data = a.reshape(-1).view(np.uint8)
        self._data = (len(self.parts), len(self.parts) + 1 if self.checksum else -1)
        addr = self._add(data)
        dims = a.shape + (a.itemsize,)
        enc = max(1, (max(dims).bit_length() + 7) // 8)
        layout = struct.pack("<5B", 4, 2, 0x02 if self.checksum else 0, len(dims), enc)
        layout += b"".join(d.to_bytes(enc, "little") for d in dims) + b"\x01"       # single-chunk index
        if self.checksum:
            self._add(struct.pack("<I", int(_fletcher32(data))))
            layout += struct.pack("<QI", data.nbytes + 4, 0)                        # filtered size, mask
        layout += struct.pack("<Q", addr)
        msgs = (_message(_DATASPACE, _dataspace(a.shape)) + _message(_DATATYPE, dt, _CONSTANT)
                + _FILL_CHUNKED + _message(_LAYOUT, layout))
        return _Header(msgs + _FLETCHER32 if self.checksum else msgs)

    # ---- the file ----
    def _end(self, obj):
        """Append the object header of ``obj``; its address."""
        body = b"".join(obj.msgs)
        head = b"OHDR\x02\x02" + struct.pack("<I", len(body)) + body    # version 2; chunk size in 4 bytes
        obj.part = len(self.parts)
        obj.starts = starts = []
        at = 10
        for m in obj.msgs:
            starts.append(at)
            at += len(m)
        return self._add(head + struct.pack("<I", lookup3(head)))

    def finish(self, root):
        """Close the root group and put the superblock in front."""
        root_addr = self._end(root)
        sb = _SIGNATURE + struct.pack("<4BQ", 2, 8, 8, 0, 0) + _UNDEF + struct.pack("<QQ", self.pos, root_addr)
        self.parts[0] = sb + struct.pack("<I", lookup3(sb))

    def write_to(self, fh):
        """Write the parts to the binary file ``fh``: to a real file with ``os.writev``, a
        few calls in all (each releases the GIL once), else with ``fh.write``."""
        try:
            fd = fh.fileno()
        except (AttributeError, OSError, ValueError):
            fd = None
        if fd is None:
            for p in self.parts:
                fh.write(p)
            return
        fh.flush()
        _writev_all(fd, [memoryview(p) for p in self.parts])


_IOV_MAX = 1024
"""Buffers per ``writev`` call (POSIX's minimum ``IOV_MAX``)."""


def _writev_all(fd, bufs):
    """Write every buffer of ``bufs`` (byte memoryviews) to ``fd`` in order, resuming
    after short writes."""
    i = 0
    while i < len(bufs):
        batch = bufs[i:i + _IOV_MAX]
        n = os.writev(fd, batch)
        for b in batch:
            if n < b.nbytes:
                bufs[i] = b[n:]
                break
            n -= b.nbytes
            i += 1


# ---- a file rebuilt for new values ----------------------------------------------------------------
def _value_bytes(kind, v):
    """The attribute bytes ``_Walk`` stores for a scalar item of the ``PATCHABLE`` ``kind``."""
    if kind == "float":
        return struct.pack("<d", v)
    if kind == "int":
        return struct.pack("<q", v)
    if kind == "bool":
        return b"\x01" if v else b"\x00"
    return np.asarray(v).tobytes()


class _Plan:
    """How to rebuild a file built by :class:`FastWriter` for an object of the same
    ``_format.signature`` (the same containers, keys, array kinds, dtypes and shapes, and
    scalars of the same kinds; only array values and int/float/bool/NumPy scalar values
    may differ): the file's headers, and where in them each leaf's bytes sit.

    :meth:`rebuild` copies the list of parts, puts the new arrays in (their fletcher32
    recomputed), rewrites each scalar that differs from the planned file's in its header,
    then the ``ng_crc32`` of each container holding one, then those headers' lookup3.
    Nothing moves: the file has the same size and every address is the same, so the
    result is byte for byte the file :class:`FastWriter` would build
    (tests/io/test_h5write.py). ~0.2 ms for the digits job's state, against ~1 ms for the
    walk. Holds no array of the planned object."""

    def __init__(self, w, leaves):
        import zlib
        self.checksum = w.checksum
        parts = list(w.parts)
        self.arrays = []    # (leaf, data part, checksum part or -1)
        self.values = []    # (leaf, kind, part, offset, the planned bytes)
        owner = {}          # leaf -> the index in self.crcs of its container
        for j, slot in enumerate(w.slots):
            if slot is None:
                continue
            if slot[0] == "array":
                self.arrays.append((j, slot[1], slot[2]))
                parts[slot[1]] = None
                if slot[2] >= 0:
                    parts[slot[2]] = None
            else:
                _, kind, head, mi, n = slot
                off = head.starts[mi] + len(head.msgs[mi]) - n
                self.values.append((j, kind, head.part, off, parts[head.part][off:off + n]))
        self.crcs = []      # (part, offset, crc of the group's text, [(leaf, kind) or (None, digest)])
        for head, mi, t, text, digests, ids in w.crcs:
            off = head.starts[mi] + len(head.msgs[mi]) - 8
            items = []
            for d, j in zip(digests, ids):
                if j is None:
                    items.append((None, d))
                else:
                    items.append((j, w.slots[j][1]))
                    owner[j] = len(self.crcs)
            self.crcs.append((head.part, off, zlib.crc32(f"{t}\n{text}".encode("utf-8")), items))
        self.owner = owner
        self.parts = parts

    def rebuild(self, leaves):
        """A :class:`FastWriter` holding the file's parts for ``leaves`` (the new object's,
        from ``_format.signature``)."""
        import zlib
        from ._format import _digest
        parts = list(self.parts)
        for j, dp, cp in self.arrays:
            data = leaves[j].reshape(-1).view(np.uint8)
            parts[dp] = data
            if cp >= 0:
                parts[cp] = struct.pack("<I", int(_fletcher32(data)))
        dirty = {}
        groups = set()
        for j, kind, part, off, old in self.values:
            new = _value_bytes(kind, leaves[j])
            if new != old:
                buf = dirty.get(part)
                if buf is None:
                    buf = dirty[part] = bytearray(parts[part])
                buf[off:off + len(new)] = new
                groups.add(self.owner[j])
        for g in groups:
            part, off, crc, items = self.crcs[g]
            for j, d in items:
                if j is not None:
                    d = _digest(d, leaves[j])
                crc = zlib.crc32(d, zlib.crc32(struct.pack("<Q", len(d)), crc))
            buf = dirty.get(part)
            if buf is None:
                buf = dirty[part] = bytearray(parts[part])
            buf[off:off + 8] = struct.pack("<q", crc)
        for part, buf in dirty.items():
            buf[-4:] = struct.pack("<I", lookup3(buf[:-4]))
            parts[part] = bytes(buf)
        return FastWriter.from_parts(self.checksum, parts)
