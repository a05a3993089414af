"""safetensors interchange: write and read flat ``state_dict`` s in the ``.safetensors``
format (Hugging Face's pickle-free tensor container), through the ``safetensors``
package's NumPy API.

``safetensors`` is an optional extra: numbagrad imports without it, and the two functions
here raise :class:`ImportError` with the pip command when it is missing.

What the format keeps and what it does not:

* Tensors are stored by name, each with its dtype and shape, plus an optional
  ``str -> str`` metadata table. Nothing else: no nesting, no Python objects.
* The order of the dict is not kept. The writer sorts tensors by dtype alignment
  (widest first) and then by name, and that order of the data is "the file's order"
  that :func:`load_safetensors` returns. ``Module.load_state_dict`` matches by name, so
  the order never matters to it.
* Storage sharing is not kept. The torch writer refuses tensors that share memory
  (tied weights); the NumPy one here writes each name's own copy, so tied weights come
  back as independent, equal tensors. Loading them into a model that ties them copies
  the same values into the one shared parameter, so the tie survives a round trip
  through ``load_state_dict``.
"""
import json
import os
from collections.abc import Mapping

import numpy as np

from .._dtype import bool_, float16, float32, float64, int8, int16, int32, int64, uint8
from ..tensor import Tensor
from ._atomic import atomic_path
from .errors import CheckpointError

__all__ = ["save_safetensors", "load_safetensors"]

_INSTALL_HINT = ('the safetensors format needs the optional package "safetensors": '
                 'pip install "numbagrad[safetensors]"  (or: pip install safetensors)')

# safetensors dtype tag <-> the numbagrad dtype it is read into / written from.
_DTYPE_OF_TAG = {
    "BOOL": bool_, "U8": uint8, "I8": int8, "I16": int16, "I32": int32, "I64": int64,
    "F16": float16, "F32": float32, "F64": float64,
}
_TAG_OF_DTYPE = {d: tag for tag, d in _DTYPE_OF_TAG.items()}

# The safetensors reader's own bound on the JSON header (100 MB): a bigger length
# prefix is a damaged file, not a header to allocate.
_MAX_HEADER = 100_000_000


def _safetensors():
    """The ``safetensors`` package with its NumPy API, or an ImportError that says how
    to install it."""
    try:
        import safetensors
        import safetensors.numpy  # noqa: F401 - binds safetensors.numpy
    except ImportError as ex:
        raise ImportError(_INSTALL_HINT) from ex
    return safetensors


# ---- writing ---------------------------------------------------------------------------
def _host_arrays(state_dict):
    """``{name: C-contiguous, native-order NumPy array}`` for a flat mapping of Tensors
    and arrays; anything else raises TypeError naming the key."""
    if not isinstance(state_dict, Mapping):
        raise TypeError(f"save_safetensors: state_dict must be a mapping of str to Tensor or "
                        f"NumPy array, got {type(state_dict).__name__}")
    arrays = {}
    for key, value in state_dict.items():
        if not isinstance(key, str):
            raise TypeError(f"save_safetensors: key {key!r} is a {type(key).__name__}; "
                            f"safetensors names tensors by str")
        if key == "__metadata__":
            # the header keeps the metadata table under this name: a tensor called so
            # would be read back as the metadata by every reader
            raise ValueError("save_safetensors: the key '__metadata__' is reserved by the "
                             "safetensors format; rename the tensor")
        if isinstance(value, Tensor):
            arr = value.detach().numpy()  # a CUDA tensor is copied to the host here
        elif isinstance(value, np.ndarray):
            arr = value
        else:
            raise TypeError(f"save_safetensors: the value at key {key!r} is a "
                            f"{type(value).__name__}; safetensors stores only tensors "
                            f"(a Tensor or a NumPy array) in a flat str -> tensor mapping")
        # dtype.type drops the byte order: a big-endian float32 array is still float32
        dtype = np.dtype(arr.dtype.type)
        if dtype not in _TAG_OF_DTYPE:
            raise TypeError(f"save_safetensors: the value at key {key!r} has dtype "
                            f"{arr.dtype}; supported: "
                            f"{', '.join(str(d) for d in _TAG_OF_DTYPE)}")
        # NOTE: the NumPy writer reads nbytes from the array's data pointer, so a strided
        # view would write the wrong bytes. np.ascontiguousarray is not used: it turns a
        # 0-d array into shape (1,).
        if arr.dtype != dtype or not arr.flags.c_contiguous:
            arr = np.array(arr, dtype=dtype, order="C")
        arrays[key] = arr
    return arrays


def _checked_metadata(metadata):
    if metadata is None:
        return None
    if not isinstance(metadata, Mapping):
        raise TypeError(f"save_safetensors: metadata must be a dict of str to str, got "
                        f"{type(metadata).__name__}")
    for key, value in metadata.items():
        if not isinstance(key, str):
            raise TypeError(f"save_safetensors: metadata key {key!r} is a "
                            f"{type(key).__name__}; safetensors metadata is str -> str")
        if not isinstance(value, str):
            raise TypeError(f"save_safetensors: metadata value at key {key!r} is a "
                            f"{type(value).__name__}; safetensors metadata is str -> str")
    return dict(metadata)


def save_safetensors(state_dict, path, metadata=None):
    """Write a flat ``state_dict`` to ``path`` in the safetensors format, crash-safely.

    Parameters
    ----------
    state_dict : Mapping[str, Tensor or numpy.ndarray]
        What ``Module.state_dict()`` returns, or any flat mapping of names to tensors.
        dtypes: bool, uint8, int8, int16, int32, int64, float16, float32, float64.
        CUDA tensors are copied to the host; strided views are written contiguous.
        Tensors that share memory (tied weights) are each written as their own copy.
    path : str or os.PathLike
        The file to write. It is replaced atomically: a crash or an error during the
        write leaves the previous file (or none) at ``path``, never a partial one.
    metadata : dict[str, str], optional
        Free-form text stored in the header (``safe_open(path, "np").metadata()``).

    Raises
    ------
    TypeError
        A non-str key, a value that is not a Tensor or array (nested dicts, scalars,
        strings), an unsupported dtype (object, complex, uint16...), or metadata that is
        not str -> str. The message names the key. Nothing is written.
    ImportError
        ``safetensors`` is not installed.

    Example
    -------
    >>> model = ng.nn.Linear(4, 2)  # doctest: +SKIP
    >>> save_safetensors(model.state_dict(), "model.safetensors", {"format": "pt"})  # doctest: +SKIP
    """
    st = _safetensors()
    arrays = _host_arrays(state_dict)
    metadata = _checked_metadata(metadata)
    with atomic_path(path) as tmp:
        # save_file streams each array to the file: no second copy of the model in memory
        st.numpy.save_file(arrays, tmp, metadata=metadata)


# ---- reading ---------------------------------------------------------------------------
def _read_header(fh, path):
    """The JSON header of the safetensors file open as ``fh`` (without the metadata
    entry) and the offset where the data begins."""
    prefix = fh.read(8)
    if len(prefix) < 8:
        raise CheckpointError(path, "truncated: shorter than the 8-byte header length")
    n = int.from_bytes(prefix, "little")
    if n > _MAX_HEADER:
        raise CheckpointError(path, f"not a safetensors file: header length {n} is implausible")
    raw = fh.read(n)
    if len(raw) < n:
        raise CheckpointError(path, "truncated inside the header")
    try:
        header = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as ex:
        raise CheckpointError(path, f"not a safetensors file: the header is not JSON ({ex})") from None
    if not isinstance(header, dict):
        raise CheckpointError(path, "not a safetensors file: the header is not a JSON object")
    header.pop("__metadata__", None)
    return header, 8 + n


def _bf16_as_float32(fh, path, key, entry, data_start):
    """A BF16 tensor widened to float32, read straight from the file: NumPy has no
    bfloat16 dtype, so the NumPy reader of safetensors cannot return it. bfloat16 is the
    upper half of a float32, so the widening is exact (NaN payloads included)."""
    begin, end = entry["data_offsets"]
    shape = tuple(entry["shape"])
    fh.seek(data_start + begin)
    raw = fh.read(end - begin)
    if len(raw) != end - begin or len(raw) != 2 * int(np.prod(shape, dtype=np.int64)):
        raise CheckpointError(path, "truncated or inconsistent BF16 data", key=key)
    bits = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
    return bits.view(np.float32).reshape(shape)


def load_safetensors(path, device="cpu"):
    """Read a safetensors file into a dict of numbagrad tensors.

    Parameters
    ----------
    path : str or os.PathLike
        A ``.safetensors`` file, from numbagrad, ``safetensors.torch``, ``safetensors.numpy``
        or any other writer.
    device : str or numbagrad.device, default "cpu"
        Where the tensors are put.

    Returns
    -------
    dict[str, Tensor]
        In the file's order (by dtype alignment, then name: see the module docstring);
        tensors do not require grad and own their memory. Pass it straight to
        ``Module.load_state_dict``.

    Notes
    -----
    bfloat16 (``BF16``) tensors are widened to float32, exactly: numbagrad has no
    bfloat16 dtype (and NumPy none at all), and every bfloat16 value is a float32 value.
    Saving the result again writes float32. Other dtypes numbagrad lacks (float8,
    uint16/32/64, complex) raise :class:`CheckpointError` naming the tensor and dtype.

    Raises
    ------
    CheckpointError
        The file is not a safetensors file, is truncated or corrupted, or holds a
        tensor of a dtype numbagrad lacks. The error names the file (and the tensor).
    FileNotFoundError
        ``path`` does not exist.
    ImportError
        ``safetensors`` is not installed.

    Example
    -------
    >>> model.load_state_dict(load_safetensors("model.safetensors"))  # doctest: +SKIP
    """
    st = _safetensors()
    path = os.fspath(path)
    out = {}
    with open(path, "rb") as fh:
        # safe_open validates the file as a whole (header, offsets covering the data
        # exactly, sizes matching dtype x shape); the header is then read here too, for
        # the order of the data and the BF16 offsets that the NumPy API does not give.
        try:
            reader = st.safe_open(path, framework="np")
        except st.SafetensorError as ex:
            raise CheckpointError(path, f"not a safetensors file, or damaged: {ex}") from None
        with reader as f:
            header, data_start = _read_header(fh, path)
            if set(header) != set(f.keys()):
                raise CheckpointError(path, "the file changed while it was being read")
            entries = sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0])
            for key, entry in entries:
                tag = entry["dtype"]
                if tag == "BF16":
                    arr = _bf16_as_float32(fh, path, key, entry, data_start)
                elif tag in _DTYPE_OF_TAG:
                    try:
                        arr = f.get_tensor(key)
                    except st.SafetensorError as ex:
                        raise CheckpointError(path, f"cannot read the tensor: {ex}", key=key) from None
                    if arr.dtype != _DTYPE_OF_TAG[tag] or arr.shape != tuple(entry["shape"]):
                        raise CheckpointError(path, "the file changed while it was being read", key=key)
                else:
                    raise CheckpointError(
                        path, f"dtype {tag} has no numbagrad dtype (readable: "
                              f"{', '.join(_DTYPE_OF_TAG)}, BF16 as float32)", key=key)
                # The reader returns arrays over its own private buffer; one that is not
                # writable (a view of the read-only mapping) is copied so the tensor owns
                # memory that outlives the file.
                if not arr.flags.writeable or not arr.flags.c_contiguous:
                    arr = np.array(arr, order="C")
                out[key] = arr
    return {key: Tensor._from_array(arr).to(device=device) for key, arr in out.items()}
