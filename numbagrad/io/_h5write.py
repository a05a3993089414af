"""The checkpoint's HDF5 bytes built directly: :class:`FastWriter`, the writer ``save`` uses
for the common checkpoint (no compression; every dataset one chunk; attribute texts under
64 KB), falling back to h5py (:class:`._format._Writer`) for anything else.

Why: ``save`` through h5py costs ~60 us an HDF5 object (group, dataset, attribute) in the
library's calls, whatever the object's size. The digits main job's per-epoch run state
(29 groups, 30 datasets, ~160 attributes, 250 KB) took 10 ms of CPU to save that way, 60%
of its 16 ms epoch, so a checkpoint every epoch cost the job 6-15%. Built here, the same
file takes ~0.6 ms (perf/test_bench_checkpoint.py), and a save of the same structure
again (the next epoch's) ~0.1 ms: each container's run of bytes is kept as a
:class:`_Template`, and a later save of an equal subtree rewrites only what changed.

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
    """HDF5's metadata checksum of the bytes ``buf`` (through :func:`_lookup3_each`, the
    kernel that checks many headers at once: one kernel to load from numba's cache, not
    two, ~3 ms less in a fresh process's first save). ``bytes``: the read-only array type of
    the batched calls, so a bytearray header compiles no second variant."""
    out = np.empty(1, np.int64)
    _lookup3_each(np.frombuffer(bytes(buf), np.uint8), np.array([len(buf) + 4], np.int64), out)
    return int(out[0])


@exact_jit
def _lookup3_each(data, ends, out):
    """``out[k]`` = :func:`_lookup3` of ``data[ends[k-1]:ends[k] - 4]``: the checksums of
    many headers (each with its 4 checksum bytes at its end) in one call."""
    start = 0
    for k in range(ends.size):
        out[k] = _lookup3(data[start:ends[k] - 4])
        start = ends[k]


def _close_headers(parts, dirty):
    """Put each rewritten header of ``dirty`` (part -> bytearray) into ``parts`` with its
    lookup3 recomputed, all in one kernel call."""
    keys = list(dirty)
    bufs = [dirty[q] for q in keys]
    ends = np.cumsum([len(b) for b in bufs])
    sums = np.empty(len(bufs), np.int64)
    _lookup3_each(np.frombuffer(b"".join(bufs), np.uint8), ends, sums)
    for q, buf, c in zip(keys, bufs, sums.tolist()):
        buf[-4:] = struct.pack("<I", c)
        parts[q] = bytes(buf)


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


_STR_PREFIX = {}
_VALUE_PREFIX = {}
_PY_PREFIX = {}
"""An attribute message's bytes before its value, by (name, byte length) for strings and
(name, dtype, shape) for values: the rest of the message does not depend on the value."""


def _prefix(table, key, msg, n):
    pre = msg[:len(msg) - n]
    if len(table) < 8192:
        table[key] = pre
    return pre


class _Header:
    """An object header being built: its messages' bytes, in order, and the fields a
    template rewrites (``(message index, offset in the message, what)``: ``("addr",)`` an
    8-byte file address, ``("value", leaf)`` a patchable scalar's bytes, ``("crc", i)``
    the container's ``ng_crc32``)."""
    __slots__ = ("msgs", "fields")

    def __init__(self, first=b""):
        self.msgs = [first] if first else []
        self.fields = []


class FastWriter:
    """Builds a checkpoint file's bytes (``parts``, in order, from offset 0) through the
    hooks ``_format._Walk`` calls. Nothing is written until :meth:`write_to`, so an
    :class:`Unsupported` on the way costs only the walk.

    It also records where each address, leaf and checksum sits, so that a container's
    run of parts can be kept as a :class:`_Template` and put into a later file of an
    equal subtree (:func:`_reuse`) instead of being walked again."""

    def __init__(self, checksum):
        self.checksum = checksum
        self.parts = [None]     # the superblock, last
        self.pos = _SUPERBLOCK
        self.addrs = {}         # header part -> offsets of its 8-byte addresses
        self.slots = []         # per leaf (walk order): ("array", data part, checksum part or -1),
        #                         ("value", kind, part, offset, bytes) or None
        self.crcs = []          # per container: [part, offset, CRC of its type and text, items, base]
        #                         items: (leaf - base, kind) of a patchable item, else (None, its digest)
        self.lens = {}          # leaf (a 1-D array) -> [(part, offset, width, "len" or "fsize")]
        self._last = None       # (header, message index, bytes) of the last attribute value written
        self._data = None       # the leaf slot of the last dataset

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
        addr = self._end(obj)
        self.link(parent, name, addr)
        return addr

    def close_root(self, root):
        return self._end(root)

    def link(self, parent, name, addr):
        msg = _link(name, addr)
        parent.fields.append((len(parent.msgs), len(msg) - 8, ("addr",)))
        parent.msgs.append(msg)

    def put_str(self, obj, name, s):
        b = s.encode("utf-8") or b"\x00"
        key = (name, len(b))
        pre = _STR_PREFIX.get(key)
        if pre is None:
            pre = _prefix(_STR_PREFIX, key, _attribute(name, _str_type(len(b)), _dataspace(()), bytes(len(b))), len(b))
        obj.msgs.append(pre + b)
        self._last = (obj, len(obj.msgs) - 1, len(b))

    def put_value(self, obj, name, v):
        a = np.asarray(v)
        key = (name, a.dtype, a.shape)
        pre = _VALUE_PREFIX.get(key)
        if pre is None:
            if a.size == 0:
                raise Unsupported("an empty attribute")
            pre = _prefix(_VALUE_PREFIX, key, _attribute(name, _datatype(a.dtype), _dataspace(a.shape),
                                                         bytes(a.nbytes)), a.nbytes)
        obj.msgs.append(pre + a.tobytes())
        self._last = (obj, len(obj.msgs) - 1, a.nbytes)

    def put_scalar(self, obj, name, kind, v):
        """A Python bool, int (within 64 bits) or float ``v``: as ``put_value`` of its
        NumPy scalar (``_format._PY_SCALARS``), without NumPy."""
        key = (name, kind)
        pre = _PY_PREFIX.get(key)
        if pre is None:
            from ._format import _PY_SCALARS
            a = np.asarray(_PY_SCALARS[kind](v))
            pre = _prefix(_PY_PREFIX, key, _attribute(name, _datatype(a.dtype), _dataspace(()), bytes(a.nbytes)),
                          a.nbytes)
        data = _value_bytes(kind, v)
        obj.msgs.append(pre + data)
        self._last = (obj, len(obj.msgs) - 1, len(data))

    def leaf(self, kind, patchable):
        """The walk wrote a leaf item of ``kind`` (its attribute, the last one written, is
        ``patchable``: see ``_format.signature``)."""
        if kind in ("tensor", "parameter", "ndarray"):
            self.slots.append(self._data)
            self._data = None
        elif patchable:
            head, mi, n = self._last
            head.fields.append((mi, len(head.msgs[mi]) - n, ("value", len(self.slots))))
            self.slots.append(("value", kind, None, None, n))
        else:
            self.slots.append(None)

    def crc(self, g, t, text, digests, ids):
        """The walk wrote the container ``g``'s ``ng_crc32`` (the last attribute);
        ``ids``: the leaf of each patchable item, else None."""
        import zlib
        head, mi, n = self._last
        head.fields.append((mi, len(head.msgs[mi]) - 8, ("crc", len(self.crcs))))
        items = [(None, d) if j is None else (j, self.slots[j][1]) for d, j in zip(digests, ids)]
        self.crcs.append([None, None, zlib.crc32(f"{t}\n{text}".encode("utf-8")), items, 0])

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
        self._data = ("array", len(self.parts), len(self.parts) + 1 if self.checksum else -1)
        addr = self._add(data)
        dims = a.shape + (a.itemsize,)
        enc = _dim_width(*dims)
        layout = struct.pack("<5B", 4, 2, 0x02 if self.checksum else 0, len(dims), enc)
        layout += b"".join(d.to_bytes(enc, "little") for d in dims) + b"\x01"       # single-chunk index
        if self.checksum:
            self._add(struct.pack("<I", int(_fletcher32(data))))
            layout += struct.pack("<QI", data.nbytes + 4, 0)                        # filtered size, mask
        layout += struct.pack("<Q", addr)
        space_dt = _message(_DATASPACE, _dataspace(a.shape)) + _message(_DATATYPE, dt, _CONSTANT) + _FILL_CHUNKED
        msgs = space_dt + _message(_LAYOUT, layout)
        head = _Header(msgs + _FLETCHER32 if self.checksum else msgs)
        head.fields.append((0, len(msgs) - 8, ("addr",)))
        if a.ndim == 1:  # where its length is, for a template of another length (_reuse)
            leaf = len(self.slots)
            at = len(space_dt) + 4 + 5                          # the layout's first dimension
            head.fields.append((0, 8, ("len", leaf, 8)))        # the dataspace's
            head.fields.append((0, at, ("len", leaf, enc)))
            if self.checksum:
                head.fields.append((0, at + 2 * enc + 1, ("fsize", leaf, 8)))
        return head

    # ---- the file ----
    def _end(self, obj):
        """Append the object header of ``obj``; its address."""
        body = b"".join(obj.msgs)
        head = b"OHDR\x02\x02" + struct.pack("<I", len(body)) + body    # version 2; chunk size in 4 bytes
        part = len(self.parts)
        if obj.fields:
            starts = []
            at = 10
            for m in obj.msgs:
                starts.append(at)
                at += len(m)
            for mi, off, what in obj.fields:
                off += starts[mi]
                if what[0] == "addr":
                    self.addrs.setdefault(part, []).append(off)
                elif what[0] == "value":
                    slot = self.slots[what[1]]
                    self.slots[what[1]] = ("value", slot[1], part, off, slot[4])
                elif what[0] in ("len", "fsize"):
                    self.lens.setdefault(what[1], []).append((part, off, what[2], what[0]))
                else:
                    self.crcs[what[1]][:2] = part, off
        return self._add(head + struct.pack("<I", lookup3(head)))

    def finish(self, root_addr):
        """Put the superblock in front (the root group's header is written)."""
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


# ---- subtrees kept and put into later files ---------------------------------------------------------
def _value_bytes(kind, v):
    """The attribute bytes ``_Walk`` stores for a patchable scalar item of ``kind``."""
    if kind == "float":
        return struct.pack("<d", v)
    if kind == "int":
        return struct.pack("<q", v)
    if kind == "bool":
        return b"\x01" if v else b"\x00"
    if kind == "str":
        return v.encode("utf-8") or b"\x00"
    if kind == "bigint":
        return str(v).encode()
    return np.asarray(v).tobytes()


def _dim_width(*dims):
    """Bytes a dataset's layout message stores each dimension in (the widest one's)."""
    return max(1, (max(dims).bit_length() + 7) // 8)


def _part_size(p):
    return p.nbytes if isinstance(p, (memoryview, np.ndarray)) else len(p)


def _mark(w):
    """Where ``w`` is: (parts, leaves, containers, file position)."""
    return len(w.parts), len(w.slots), len(w.crcs), w.pos


class _Template:
    """A container's run of parts in a file :class:`FastWriter` built (its subtree: the
    data and headers of its items, then its own header), with where each address, leaf
    value and ``ng_crc32`` sits in them. :func:`_reuse` puts it into a later
    file for a subtree of the same ``_format.signature``: only array values, the lengths
    of 1-D arrays (within the byte width their length is stored with), patchable scalar
    values (int, float, bool, NumPy scalars; str and big ints of the same length) and the
    run's position may differ, and none changes a header's size, so :func:`_reuse`
    rewrites the fields that changed: the new arrays and their fletcher32, a 1-D array's
    length and chunk size, the scalars that differ, the ``ng_crc32`` of the containers
    holding them, every address if parts moved, and those headers' lookup3.
    The result is byte for byte the walk's (tests/io/test_h5write.py). Holds no array."""
    __slots__ = ("start", "size", "head", "parts", "addrs", "slots", "values", "crcs", "owner", "lens", "sizes",
                 "part_at")

    def __init__(self, w, mark, head_addr):
        p0, l0, c0, start = mark
        self.start, self.size, self.head = start, w.pos - start, head_addr - start
        parts = w.parts[p0:]
        self.sizes = [_part_size(p) for p in parts]
        self.part_at = {}   # relative start -> part
        at = 0
        for k, n in enumerate(self.sizes):
            self.part_at[at] = k
            at += n
        self.lens = {j - l0: [(q - p0,) + tuple(rest) for q, *rest in v]
                     for j, v in w.lens.items() if j >= l0}
        self.addrs = {q - p0: w.addrs[q] for q in range(p0, len(w.parts)) if q in w.addrs}
        self.slots = []     # per leaf, relative: ("array", data part, checksum part or -1), ("value", ...) or None
        self.values = []    # (leaf, kind, part, offset, the bytes written)
        for j in range(l0, len(w.slots)):
            slot = w.slots[j]
            if slot is not None and slot[0] == "array":
                slot = ("array", slot[1] - p0, slot[2] - p0 if slot[2] >= 0 else -1)
                parts[slot[1]] = None
                if slot[2] >= 0:
                    parts[slot[2]] = None
            elif slot is not None:
                _, kind, q, off, n = slot
                slot = ("value", kind, q - p0, off, n)
                self.values.append((j - l0, kind, q - p0, off, bytes(w.parts[q][off:off + n])))
            self.slots.append(slot)
        self.crcs = []
        self.owner = {}     # leaf -> its container's index in crcs
        for k in range(c0, len(w.crcs)):
            q, off, crc, items, base = w.crcs[k]
            if base != l0:
                items = [(None, x) if j is None else (j + base - l0, x) for j, x in items]
            for j, _ in items:
                if j is not None:
                    self.owner[j] = len(self.crcs)
            self.crcs.append((q - p0, off, crc, items))
        self.parts = parts


def _reuse(w, tpl, leaves):
    """Append ``tpl`` to ``w`` for the subtree whose leaves are ``leaves``; its header's
    address."""
    import zlib
    from ._format import _digest
    p0, l0, _, start = _mark(w)
    delta = start - tpl.start
    parts = list(tpl.parts)
    slots = []
    sizes = None     # the parts' sizes where a 1-D array's length changed
    dirty = {}
    for j, slot in enumerate(tpl.slots):
        if slot is None:
            slots.append(None)
        elif slot[0] == "array":
            data = leaves[j].reshape(-1).view(np.uint8)
            if data.nbytes != tpl.sizes[slot[1]]:   # a 1-D array of another length (its token's width)
                if sizes is None:
                    sizes = list(tpl.sizes)
                sizes[slot[1]] = data.nbytes
                for q, off, width, what in tpl.lens[j]:
                    buf = dirty.get(q)
                    if buf is None:
                        buf = dirty[q] = bytearray(parts[q])
                    v = leaves[j].shape[0] if what == "len" else data.nbytes + 4
                    buf[off:off + width] = v.to_bytes(width, "little")
            parts[slot[1]] = data
            if slot[2] >= 0:
                parts[slot[2]] = struct.pack("<I", int(_fletcher32(data)))
                slots.append(("array", slot[1] + p0, slot[2] + p0))
            else:
                slots.append(("array", slot[1] + p0, -1))
        else:
            slots.append(("value", slot[1], slot[2] + p0, slot[3], slot[4]))
    size, head = tpl.size, start + tpl.head
    if sizes is not None:    # parts moved by different amounts: each address to its part's new start
        new = []
        at = start
        for n in sizes:
            new.append(at)
            at += n
        size, head = at - start, new[tpl.part_at[tpl.head]]
        for q, offs in tpl.addrs.items():
            buf = dirty.get(q)
            if buf is None:
                buf = dirty[q] = bytearray(parts[q])
            for off in offs:
                old = struct.unpack_from("<Q", buf, off)[0]
                buf[off:off + 8] = struct.pack("<Q", new[tpl.part_at[old - tpl.start]])
    elif delta:
        for q, offs in tpl.addrs.items():
            buf = dirty.get(q)
            if buf is None:
                buf = dirty[q] = bytearray(parts[q])
            for off in offs:
                buf[off:off + 8] = struct.pack("<Q", struct.unpack_from("<Q", buf, off)[0] + delta)
    changed = set()
    for j, kind, q, off, old in tpl.values:
        new = _value_bytes(kind, leaves[j])
        if new != old:
            buf = dirty.get(q)
            if buf is None:
                buf = dirty[q] = bytearray(parts[q])
            buf[off:off + len(new)] = new
            changed.add(tpl.owner[j])
    for k in changed:
        q, off, crc, items = tpl.crcs[k]
        for j, d in items:
            if j is not None:
                d = _digest(d, leaves[j])
            crc = zlib.crc32(d, zlib.crc32(struct.pack("<Q", len(d)), crc))
        buf = dirty.get(q)
        if buf is None:
            buf = dirty[q] = bytearray(parts[q])
        buf[off:off + 8] = struct.pack("<q", crc)
    if dirty:
        _close_headers(parts, dirty)
    w.parts.extend(parts)
    w.pos += size
    for q, offs in tpl.addrs.items():
        w.addrs[q + p0] = offs
    for j, v in tpl.lens.items():
        w.lens[j + l0] = [(q + p0,) + tuple(rest) for q, *rest in v]
    w.slots.extend(slots)
    for q, off, crc, items in tpl.crcs:
        w.crcs.append([q + p0, off, crc, items, l0])
    return head
