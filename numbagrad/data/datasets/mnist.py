"""MNIST and Fashion-MNIST from IDX files already on disk (nothing is downloaded).

IDX format (LeCun's): a 4-byte magic number ``0x00 0x00 <type> <ndim>``, then ``ndim``
big-endian uint32 sizes, then the data, big-endian, C order. Types: ``0x08`` uint8,
``0x09`` int8, ``0x0B`` int16, ``0x0C`` int32, ``0x0D`` float32, ``0x0E`` float64.
"""
import gzip
import os
import zlib

import numpy as np

from ...tensor import Tensor
from ..dataset import Dataset

__all__ = ["read_idx", "MNIST", "FashionMNIST"]

_IDX_TYPES = {0x08: np.dtype("u1"), 0x09: np.dtype("i1"), 0x0B: np.dtype(">i2"), 0x0C: np.dtype(">i4"),
              0x0D: np.dtype(">f4"), 0x0E: np.dtype(">f8")}


def read_idx(path):
    """Read an IDX file (raw, or gzip-compressed when the name ends in ``.gz``) into a
    NumPy array of native byte order.

    Raises ``ValueError`` naming the file when it is not an IDX file (bad magic number,
    unknown type code), when its size does not match the header (truncated or trailing
    bytes), or when a ``.gz`` file is corrupt; ``FileNotFoundError`` when it is missing.
    """
    path = os.fspath(path)
    try:
        if path.endswith(".gz"):
            with gzip.open(path, "rb") as f:
                raw = f.read()
        else:
            with open(path, "rb") as f:
                raw = f.read()
    except (OSError, EOFError, zlib.error) as e:
        if isinstance(e, FileNotFoundError):
            raise
        raise ValueError(f"read_idx: cannot read {path!r}: {e} (a corrupt or truncated gzip file?)") from e
    if len(raw) < 4:
        raise ValueError(f"read_idx: {path!r} is not an IDX file: {len(raw)} bytes, shorter than the 4-byte "
                         "magic number")
    zero0, zero1, code, ndim = raw[0], raw[1], raw[2], raw[3]
    if zero0 != 0 or zero1 != 0 or code not in _IDX_TYPES:
        raise ValueError(f"read_idx: {path!r} is not an IDX file: magic number 0x{raw[:4].hex()} (expected "
                         f"0x0000 followed by a type code in {[hex(c) for c in _IDX_TYPES]} and the number of "
                         "dimensions); a truncated download or a file of another format?")
    if ndim == 0:
        raise ValueError(f"read_idx: {path!r}: the header declares 0 dimensions")
    header = 4 + 4 * ndim
    if len(raw) < header:
        raise ValueError(f"read_idx: {path!r} is truncated: its header declares {ndim} dimensions "
                         f"({header} header bytes), but the file has {len(raw)} bytes")
    shape = tuple(int(d) for d in np.frombuffer(raw, dtype=">u4", count=ndim, offset=4))
    dtype = _IDX_TYPES[code]
    expect = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    found = len(raw) - header
    if found != expect:
        what = "truncated" if found < expect else "longer than its header says"
        raise ValueError(f"read_idx: {path!r} is {what}: the header declares shape {shape} of "
                         f"{dtype.newbyteorder('=').name} ({expect} data bytes), but the file holds {found}")
    return np.frombuffer(raw, dtype=dtype, offset=header).reshape(shape).astype(dtype.newbyteorder("="))


class MNIST(Dataset):
    """The MNIST handwritten digits from IDX files you already have (no download).

    Parameters
    ----------
    root : str or path
        Folder holding the files in torchvision's layout, ``root/MNIST/raw/<file>``, or
        the files directly in ``root``; each may be raw or ``.gz``. The files are
        ``train-images-idx3-ubyte``, ``train-labels-idx1-ubyte`` (``train=True``) and
        ``t10k-images-idx3-ubyte``, ``t10k-labels-idx1-ubyte`` (``train=False``).
    train : bool, default True
    transform : callable, optional
        Applied to each image. Unlike torchvision, which hands a PIL image to ``transform``,
        numbagrad gives a float32 Tensor ``(1, H, W)`` scaled to [0, 1] (what
        ``ToTensor()`` would make), so no ``ToTensor`` is needed. The transforms of
        :mod:`numbagrad.data.transforms` also work on whole batches, and
        :meth:`get_batch` applies them once per batch.
    target_transform : callable, optional
        Applied to each label (a Python int).

    ``ds[i]`` is ``(image, label)``: image a float32 Tensor ``(1, 28, 28)`` in [0, 1] (the
    transform's output if given), label an int. Attributes as torchvision's: ``data`` (a
    uint8 Tensor ``(N, 28, 28)``), ``targets`` (int64 ``(N,)``), ``classes``.
    :meth:`get_batch` gathers a batch at once (the DataLoader uses it).
    """

    resources_url = "https://ossci-datasets.s3.amazonaws.com/mnist/ (or http://yann.lecun.com/exdb/mnist/)"
    classes = ["0 - zero", "1 - one", "2 - two", "3 - three", "4 - four", "5 - five", "6 - six", "7 - seven",
               "8 - eight", "9 - nine"]

    def __init__(self, root, train=True, transform=None, target_transform=None):
        self.root = os.fspath(root)
        self.train = bool(train)
        self.transform = transform
        self.target_transform = target_transform
        prefix = "train" if self.train else "t10k"
        name = type(self).__name__
        img_path = self._find(f"{prefix}-images-idx3-ubyte")
        lbl_path = self._find(f"{prefix}-labels-idx1-ubyte")
        images = read_idx(img_path)
        labels = read_idx(lbl_path)
        if images.ndim != 3 or images.dtype != np.uint8:
            raise ValueError(f"{name}: {img_path!r} holds {images.dtype} of shape {images.shape}; expected uint8 "
                             "images (N, H, W)")
        if labels.ndim != 1 or labels.dtype != np.uint8:
            raise ValueError(f"{name}: {lbl_path!r} holds {labels.dtype} of shape {labels.shape}; expected uint8 "
                             "labels (N,)")
        if labels.shape[0] != images.shape[0]:
            raise ValueError(f"{name}: {img_path!r} holds {images.shape[0]} images but {lbl_path!r} holds "
                             f"{labels.shape[0]} labels")
        if labels.size and labels.max() >= len(self.classes):
            raise ValueError(f"{name}: {lbl_path!r} holds label {int(labels.max())}, outside "
                             f"[0, {len(self.classes)})")
        self._images = images
        self._labels = labels.astype(np.int64)
        self.data = Tensor._from_array(images)
        self.targets = Tensor._from_array(self._labels)

    @property
    def class_to_idx(self):
        return {c: i for i, c in enumerate(self.classes)}

    def _folders(self):
        return [os.path.join(self.root, type(self).__name__, "raw"), self.root]

    def _find(self, fname):
        for folder in self._folders():
            for cand in (fname, fname + ".gz"):
                p = os.path.join(folder, cand)
                if os.path.isfile(p):
                    return p
        looked = " and ".join(repr(f) for f in self._folders())
        raise FileNotFoundError(
            f"{type(self).__name__}: file {fname!r} (or {fname + '.gz'!r}) not found in {looked}. numbagrad "
            f"downloads nothing: get it from {self.resources_url} and put it in {self._folders()[0]!r}")

    def __len__(self):
        return self._images.shape[0]

    def __getitem__(self, index):
        img = Tensor._from_array(self._images[index][None].astype(np.float32) / np.float32(255.0))
        target = int(self._labels[index])
        if self.transform is not None:
            img = self.transform(img)
        if self.target_transform is not None:
            target = self.target_transform(target)
        return img, target

    def get_batch(self, indices):
        """``(images, labels)`` at ``indices`` (1-D ints): float32 ``(B, 1, H, W)`` in [0, 1]
        and int64 ``(B,)`` Tensors. A ``transform`` of :mod:`numbagrad.data.transforms`
        (``batched = True``) runs once on the whole batch; any other transform, and
        ``target_transform``, run per sample (and the results are stacked)."""
        idx = np.asarray(indices, dtype=np.int64)
        n = len(self)
        if idx.size and (idx.min() < -n or idx.max() >= n):
            raise IndexError(f"{type(self).__name__}.get_batch: indices in [{int(idx.min())}, {int(idx.max())}] "
                             f"are out of range for {n} samples")
        imgs = self._images[idx][:, None].astype(np.float32) / np.float32(255.0)
        x = Tensor._from_array(imgs)
        if self.transform is not None:
            if getattr(self.transform, "batched", False):
                x = self.transform(x)
            else:
                x = Tensor._from_array(np.stack([_array(self.transform(Tensor._from_array(im))) for im in imgs]))
        labels = self._labels[idx]
        if self.target_transform is not None:
            from ..dataloader import default_collate
            return x, default_collate([self.target_transform(int(t)) for t in labels])
        return x, Tensor._from_array(labels)

    def __repr__(self):
        return (f"Dataset {type(self).__name__}\n    Number of datapoints: {len(self)}\n    Root location: "
                f"{self.root}\n    Split: {'Train' if self.train else 'Test'}")


def _array(x):
    return x.array if isinstance(x, Tensor) else np.asarray(x)


class FashionMNIST(MNIST):
    """Fashion-MNIST (Zalando's clothing images, MNIST's file names and format) from IDX
    files you already have: ``root/FashionMNIST/raw/<file>`` or ``root/<file>``, raw or
    ``.gz``. Everything else is as :class:`MNIST`."""

    resources_url = ("http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/ "
                     "(see https://github.com/zalandoresearch/fashion-mnist)")
    classes = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag",
               "Ankle boot"]
