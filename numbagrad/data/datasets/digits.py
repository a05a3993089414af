"""The bundled digits (no downloads) and a seeded train/test split."""
import gzip
import importlib.util
import os

import numpy as np

from ...tensor import Tensor

__all__ = ["load_digits", "train_test_split"]


def load_digits(as_numpy=False):
    """The 1,797 8x8 handwritten digits bundled with scikit-learn.

    Returns ``(X, y)``: ``X`` float32 of shape ``(1797, 64)`` scaled to [0, 1] (the raw
    pixels are 0..16), ``y`` int64 class labels 0..9. Tensors by default, NumPy arrays
    with ``as_numpy=True``.
    """
    data, target = _digits_arrays()
    X = (np.asarray(data, dtype=np.float32) / np.float32(16.0))
    y = np.asarray(target, dtype=np.int64)
    if as_numpy:
        return X, y
    return Tensor._from_array(X), Tensor._from_array(y)


_SKLEARN_FILE = ("datasets", "data", "digits.csv.gz")
"""Where scikit-learn keeps the digits, inside its package."""


def _digits_arrays():
    """``(data, target)`` of scikit-learn's digits: its bundled ``digits.csv.gz`` read
    directly (~0.07 s), without importing scikit-learn (~0.7 s of the main job's start:
    SciPy and the rest come with it). Where that file is not as expected (another layout
    in another scikit-learn), ``sklearn.datasets.load_digits()`` gives them."""
    try:
        spec = importlib.util.find_spec("sklearn")  # finds the package without importing it
        path = os.path.join(os.path.dirname(spec.origin), *_SKLEARN_FILE)
        with gzip.open(path, "rt") as fh:
            a = np.loadtxt(fh, delimiter=",")
        data, target = a[:, :-1], a[:, -1]
        if (a.shape == (1797, 65) and np.array_equal(a, np.round(a)) and data.min() >= 0 and data.max() <= 16
                and set(np.unique(target).tolist()) == set(range(10))):
            return data, target.astype(np.int64)
    except (AttributeError, TypeError, OSError, ValueError, EOFError):
        pass
    from sklearn.datasets import load_digits as _load
    d = _load()
    return d.data, d.target


def train_test_split(*arrays, test_size=0.2, seed=0, shuffle=True, stratify=None):
    """Split arrays/tensors (same first dimension) into train and test parts.

    Returns ``[a_train, a_test, b_train, b_test, ...]`` of the input types (as
    scikit-learn's ``train_test_split``). ``test_size`` is a fraction or a count;
    ``seed`` fixes the shuffle; ``stratify`` (labels) keeps class proportions.
    """
    if not arrays:
        raise ValueError("train_test_split: at least one array required")
    n = arrays[0].shape[0]
    for a in arrays:
        if a.shape[0] != n:
            raise ValueError(f"train_test_split: inconsistent lengths {[a.shape[0] for a in arrays]}")
    n_test = int(np.ceil(test_size * n)) if isinstance(test_size, float) else int(test_size)
    if not 0 < n_test < n:
        raise ValueError(f"train_test_split: test_size={test_size} leaves an empty train or test set (n={n})")
    rng = np.random.default_rng(seed)
    if stratify is not None:
        labels = stratify.array if isinstance(stratify, Tensor) else np.asarray(stratify)
        test_idx = []
        classes, counts = np.unique(labels, return_counts=True)
        share = counts / n * n_test
        take = np.floor(share).astype(int)
        for k in np.argsort(-(share - take))[: n_test - take.sum()]:
            take[k] += 1
        for c, k in zip(classes, take):
            members = np.flatnonzero(labels == c)
            test_idx.append(rng.permutation(members)[:k] if shuffle else members[:k])
        test_idx = np.sort(np.concatenate(test_idx))
        mask = np.ones(n, bool)
        mask[test_idx] = False
        train_idx = np.flatnonzero(mask)
        if shuffle:
            train_idx = rng.permutation(train_idx)
            test_idx = rng.permutation(test_idx)
    else:
        order = rng.permutation(n) if shuffle else np.arange(n)
        train_idx, test_idx = order[: n - n_test], order[n - n_test:]
    out = []
    for a in arrays:
        if isinstance(a, Tensor):
            out += [Tensor._from_array(a.array[train_idx]), Tensor._from_array(a.array[test_idx])]
        else:
            a = np.asarray(a)
            out += [a[train_idx], a[test_idx]]
    return out
