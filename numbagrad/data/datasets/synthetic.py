"""Generated sequence tasks (nothing downloaded), deterministic per ``seed``.

* :class:`SyntheticSequences`: sequence-to-label classification.
* :class:`SyntheticCTC`: digit strings rendered as noisy frame sequences, with a
  ``collate`` that returns exactly what :func:`numbagrad.nn.functional.ctc_loss` takes.
"""
import numbers

import numpy as np

from ...tensor import Tensor
from ..dataset import Dataset

__all__ = ["SyntheticSequences", "SyntheticCTC"]


def _pos_int(value, name, who, lo=1):
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{who}: {name} must be an int, got {type(value).__name__} {value!r}")
    if value < lo:
        raise ValueError(f"{who}: {name} must be >= {lo}, got {value}")
    return int(value)


def _seed(seed, who):
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise TypeError(f"{who}: seed must be a non-negative int, got {type(seed).__name__} {seed!r}")
    return int(seed)


class SyntheticSequences(Dataset):
    """A sequence-to-label task: ``n`` sequences of ``length`` steps of ``features``
    standard-normal values, each labelled by a fixed rule.

    The rule: with a fixed matrix ``weight`` ``(features, num_classes)`` (drawn from the
    seed, standard normal) and time weights ``w_t = (t + 1) / length``, the label is::

        label = argmax_c  sum_t  w_t * (x[t] @ weight)[c]

    a linear readout of a time-weighted sum, so later steps count more; an RNN (or a
    linear model on the flattened sequence) can learn it exactly, a model that ignores
    the order cannot fully.

    ``ds[i]`` is ``(x, label)``: float32 Tensor ``(length, features)`` and an int.
    :meth:`get_batch` returns ``(x, labels)`` batch-first ``(B, length, features)`` and int64
    ``(B,)``. ``data`` / ``targets`` hold everything (NumPy arrays).
    """

    def __init__(self, n, length=16, num_classes=4, features=8, seed=0):
        who = "SyntheticSequences"
        self.n = _pos_int(n, "n", who, lo=0)
        self.length = _pos_int(length, "length", who)
        self.num_classes = _pos_int(num_classes, "num_classes", who, lo=2)
        self.features = _pos_int(features, "features", who)
        self.seed = _seed(seed, who)
        rng = np.random.default_rng(self.seed)
        self.weight = rng.standard_normal((self.features, self.num_classes))
        self.data = rng.standard_normal((self.n, self.length, self.features)).astype(np.float32)
        tw = (np.arange(self.length) + 1.0) / self.length
        scores = np.einsum("t,ntf,fc->nc", tw, self.data.astype(np.float64), self.weight)
        self.targets = scores.argmax(axis=1).astype(np.int64)

    def __len__(self):
        return self.n

    def __getitem__(self, index):
        return Tensor._from_array(self.data[index].copy()), int(self.targets[index])

    def get_batch(self, indices):
        idx = np.asarray(indices, dtype=np.int64)
        return Tensor._from_array(self.data[idx]), Tensor._from_array(self.targets[idx])


class SyntheticCTC(Dataset):
    """Digit strings rendered as noisy frame sequences, for CTC training.

    Each sample is a random string of ``min_len..max_len`` digits. Every digit ``d`` has a
    fixed random *glyph*, a feature vector ``glyphs[d]`` of length ``features`` (unit
    norm times ``3``, drawn from the seed); a string is rendered as ``gap`` blank frames
    (zeros), then per digit ``frames_per_char`` copies of its glyph followed by ``gap``
    blank frames, and Gaussian noise of standard deviation ``noise`` is added to every
    frame. So ``T = gap + L * (frames_per_char + gap)`` frames for ``L`` digits, and a
    repeated digit is always separated by a blank, as CTC needs.

    CTC classes: ``blank = 0`` and digit ``d`` is class ``d + 1`` (``num_classes = 11``),
    so ``ctc_loss``'s default ``blank=0`` applies; labels hold the classes ``1..10``.

    ``ds[i]`` is ``(frames, label)``: float32 Tensor ``(T, features)`` and int64 Tensor
    ``(L,)``; ``input_lengths`` / ``target_lengths`` (int64 arrays) hold every sample's T
    and L. :meth:`collate` (also used by :meth:`get_batch`, so a plain ``DataLoader(ds,
    batch_size=...)`` works) pads a batch to ``(x, targets, input_lengths, target_lengths)``
    with ``x`` ``(T_max, B, F)`` (or ``(B, T_max, F)`` with ``batch_first=True``).
    """

    blank = 0
    num_classes = 11

    def __init__(self, n, min_len=1, max_len=5, frames_per_char=3, noise=0.1, seed=0, features=16, gap=1,
                 batch_first=False):
        who = "SyntheticCTC"
        self.n = _pos_int(n, "n", who, lo=0)
        self.min_len = _pos_int(min_len, "min_len", who)
        self.max_len = _pos_int(max_len, "max_len", who)
        if self.max_len < self.min_len:
            raise ValueError(f"{who}: max_len={max_len} is below min_len={min_len}")
        self.frames_per_char = _pos_int(frames_per_char, "frames_per_char", who)
        self.features = _pos_int(features, "features", who)
        self.gap = _pos_int(gap, "gap", who)
        if not isinstance(noise, numbers.Real) or not noise >= 0:
            raise ValueError(f"{who}: noise must be a non-negative number, got {noise!r}")
        self.noise = float(noise)
        self.seed = _seed(seed, who)
        self.batch_first = bool(batch_first)
        rng = np.random.default_rng(self.seed)
        g = rng.standard_normal((10, self.features))
        self.glyphs = (3.0 * g / np.linalg.norm(g, axis=1, keepdims=True)).astype(np.float32)
        self.target_lengths = rng.integers(self.min_len, self.max_len + 1, size=self.n).astype(np.int64)
        self.input_lengths = (self.gap + self.target_lengths * (self.frames_per_char + self.gap)).astype(np.int64)
        self.labels = [rng.integers(1, 11, size=int(L)).astype(np.int64) for L in self.target_lengths]
        self.frames = []
        for lab, T in zip(self.labels, self.input_lengths):
            x = self.render(lab)
            assert x.shape[0] == T
            if self.noise:
                x += (self.noise * rng.standard_normal(x.shape)).astype(np.float32)
            self.frames.append(x)

    def render(self, label):
        """The noiseless frames ``(T, features)`` float32 of a label (classes ``1..10``)."""
        label = np.asarray(label, dtype=np.int64)
        if label.ndim != 1 or (label.size and (label.min() < 1 or label.max() > 10)):
            raise ValueError(f"SyntheticCTC.render: label must be a 1-D array of classes 1..10, got {label!r}")
        step = self.frames_per_char + self.gap
        x = np.zeros((self.gap + len(label) * step, self.features), dtype=np.float32)
        for k, c in enumerate(label):
            s = self.gap + k * step
            x[s:s + self.frames_per_char] = self.glyphs[c - 1]
        return x

    def __len__(self):
        return self.n

    def __getitem__(self, index):
        return Tensor._from_array(self.frames[index].copy()), Tensor._from_array(self.labels[index].copy())

    def collate(self, batch):
        """Pad a list of ``(frames, label)`` samples: returns ``(x, targets, input_lengths,
        target_lengths)`` Tensors, ``x`` float32 ``(T_max, B, F)`` (``(B, T_max, F)`` when
        the dataset has ``batch_first=True``) zero-padded, ``targets`` int64 ``(B, L_max)``
        padded with the blank, lengths int64 ``(B,)``: the arguments of ``ctc_loss`` after
        the model maps ``x`` to log-probabilities."""
        if not batch:
            raise ValueError("SyntheticCTC.collate: empty batch")
        xs = [b[0].array if isinstance(b[0], Tensor) else np.asarray(b[0]) for b in batch]
        ys = [b[1].array if isinstance(b[1], Tensor) else np.asarray(b[1]) for b in batch]
        il = np.array([x.shape[0] for x in xs], dtype=np.int64)
        tl = np.array([y.shape[0] for y in ys], dtype=np.int64)
        x = np.zeros((len(xs), int(il.max()), xs[0].shape[1]), dtype=np.float32)
        t = np.full((len(ys), max(int(tl.max()), 1)), self.blank, dtype=np.int64)
        for k, (xi, yi) in enumerate(zip(xs, ys)):
            x[k, :xi.shape[0]] = xi
            t[k, :yi.shape[0]] = yi
        if not self.batch_first:
            x = np.ascontiguousarray(x.transpose(1, 0, 2))
        return (Tensor._from_array(x), Tensor._from_array(t), Tensor._from_array(il), Tensor._from_array(tl))

    def get_batch(self, indices):
        """:meth:`collate` of the samples at ``indices``."""
        return self.collate([self[int(i)] for i in np.asarray(indices, dtype=np.int64)])
