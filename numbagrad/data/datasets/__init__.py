"""Datasets; nothing is downloaded.

* :func:`load_digits` (scikit-learn's bundled 8x8 digits) and a seeded :func:`train_test_split`;
* :class:`MNIST` and :class:`FashionMNIST`, read from IDX files the user already has
  (raw or ``.gz``, torchvision's layout), and :func:`read_idx`;
* generated sequence tasks: :class:`SyntheticSequences` (sequence to label) and
  :class:`SyntheticCTC` (digit strings as noisy frame sequences, for ``ctc_loss``).
"""
from .digits import load_digits, train_test_split  # noqa: F401
from .mnist import MNIST, FashionMNIST, read_idx  # noqa: F401
from .synthetic import SyntheticSequences, SyntheticCTC  # noqa: F401

__all__ = ["load_digits", "train_test_split", "MNIST", "FashionMNIST", "read_idx", "SyntheticSequences",
           "SyntheticCTC"]
