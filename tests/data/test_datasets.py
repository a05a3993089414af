"""numbagrad.data.datasets: the package's imports, IDX reading and MNIST/FashionMNIST on
tiny generated files, and the synthetic sequence tasks."""
import gzip
import os

import numpy as np
import pytest

import numbagrad as ng
from numbagrad.data import DataLoader
from numbagrad.data.datasets import MNIST, FashionMNIST, SyntheticCTC, SyntheticSequences, read_idx


def test_digits_importable_from_both_places():
    import numbagrad.data as d
    import numbagrad.data.datasets as ds
    assert d.load_digits is ds.load_digits and d.train_test_split is ds.train_test_split


def test_load_digits_is_scikit_learns_digits_read_without_importing_it():
    """``load_digits`` reads scikit-learn's bundled file itself; the values are
    ``sklearn.datasets.load_digits()``'s (scaled to [0, 1]) in a process that never
    imports scikit-learn for them."""
    import subprocess
    import sys
    code = ("import sys, numbagrad.data as d; X, y = d.load_digits(as_numpy=True); "
            "print(int('sklearn' in sys.modules), X.shape, X.dtype, y.dtype, float(X.sum()), int(y.sum()))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out[0] == "0", "scikit-learn was imported to load the digits"
    from sklearn.datasets import load_digits as sk_load
    ref = sk_load()
    X, y = ng.data.load_digits(as_numpy=True)
    np.testing.assert_array_equal(X, (ref.data / 16.0).astype(np.float32))
    np.testing.assert_array_equal(y, ref.target)
    assert X.dtype == np.float32 and y.dtype == np.int64 and X.shape == (1797, 64)
    assert float(out[-2]) == float(X.sum()) and int(out[-1]) == int(y.sum())


def test_load_digits_falls_back_to_scikit_learn_when_its_file_is_not_as_expected(monkeypatch):
    from numbagrad.data.datasets import digits
    monkeypatch.setattr(digits, "_SKLEARN_FILE", ("datasets", "data", "no-such-file.csv.gz"))
    from sklearn.datasets import load_digits as sk_load
    X, y = digits.load_digits(as_numpy=True)
    np.testing.assert_array_equal(y, sk_load().target)


# ---- IDX ------------------------------------------------------------------------------
_CODES = {np.dtype("u1"): 0x08, np.dtype("i1"): 0x09, np.dtype("i2"): 0x0B, np.dtype("i4"): 0x0C,
          np.dtype("f4"): 0x0D, np.dtype("f8"): 0x0E}


def _idx_bytes(a):
    """IDX written independently of the reader: magic, big-endian sizes, big-endian data."""
    a = np.asarray(a)
    head = bytes([0, 0, _CODES[a.dtype], a.ndim]) + np.array(a.shape, dtype=">u4").tobytes()
    return head + a.astype(a.dtype.newbyteorder(">")).tobytes()


def _write(path, a, gz=False):
    data = _idx_bytes(a)
    if gz:
        with gzip.open(path, "wb") as f:
            f.write(data)
    else:
        with open(path, "wb") as f:
            f.write(data)
    return path


@pytest.mark.parametrize("dtype", ["u1", "i1", "i2", "i4", "f4", "f8"])
@pytest.mark.parametrize("gz", [False, True])
def test_read_idx_round_trip(tmp_path, dtype, gz):
    a = (np.random.default_rng(0).standard_normal((3, 4, 5)) * 50).astype(dtype)
    p = _write(str(tmp_path / ("a.idx" + (".gz" if gz else ""))), a, gz)
    b = read_idx(p)
    assert b.dtype == np.dtype(dtype) and b.dtype.isnative
    np.testing.assert_array_equal(b, a)


def test_read_idx_rejects_corrupt_files(tmp_path):
    a = np.arange(24, dtype=np.uint8).reshape(2, 3, 4)
    good = _idx_bytes(a)
    cases = {"short": good[:3], "magic": b"\x01" + good[1:], "code": good[:2] + b"\x07" + good[3:],
             "header": good[:10], "truncated": good[:-1], "trailing": good + b"\x00"}
    msgs = {"short": "not an IDX file", "magic": "magic number", "code": "magic number", "header": "truncated",
            "truncated": r"truncated: the header declares shape \(2, 3, 4\) of uint8 \(24 data bytes\), but the "
                         r"file holds 23", "trailing": "longer than its header"}
    for name, data in cases.items():
        p = tmp_path / name
        p.write_bytes(data)
        with pytest.raises(ValueError, match=msgs[name]) as e:
            read_idx(p)
        assert str(p) in str(e.value)
    gzp = tmp_path / "bad.gz"
    gzp.write_bytes(gzip.compress(good)[:-12])
    with pytest.raises(ValueError, match="bad.gz"):
        read_idx(gzp)


# ---- MNIST ----------------------------------------------------------------------------
def _mnist_files(folder, prefix, n, gz, seed=0, hw=(28, 28)):
    rng = np.random.default_rng(seed)
    imgs = rng.integers(0, 256, size=(n,) + hw, dtype=np.uint8)
    labels = rng.integers(0, 10, size=n).astype(np.uint8)
    os.makedirs(folder, exist_ok=True)
    ext = ".gz" if gz else ""
    _write(os.path.join(folder, f"{prefix}-images-idx3-ubyte{ext}"), imgs, gz)
    _write(os.path.join(folder, f"{prefix}-labels-idx1-ubyte{ext}"), labels, gz)
    return imgs, labels


@pytest.mark.parametrize("gz", [False, True])
def test_mnist_torchvision_layout(tmp_path, gz):
    imgs, labels = _mnist_files(str(tmp_path / "MNIST" / "raw"), "train", 7, gz)
    timgs, tlabels = _mnist_files(str(tmp_path / "MNIST" / "raw"), "t10k", 3, gz, seed=1)
    ds = MNIST(tmp_path)
    assert len(ds) == 7 and len(MNIST(str(tmp_path), train=False)) == 3
    img, lab = ds[4]
    assert isinstance(img, ng.Tensor) and img.shape == (1, 28, 28) and img.dtype == np.float32
    np.testing.assert_allclose(img.numpy()[0], imgs[4] / 255.0, rtol=1e-6)
    assert lab == int(labels[4]) and isinstance(lab, int)
    assert ds.data.dtype == np.uint8 and ds.data.shape == (7, 28, 28) and ds.targets.dtype == np.int64
    np.testing.assert_array_equal(ds.targets.numpy(), labels)
    xb, yb = ds.get_batch(np.array([5, 0, 5]))
    assert xb.shape == (3, 1, 28, 28) and yb.tolist() == labels[[5, 0, 5]].tolist()
    np.testing.assert_allclose(xb.numpy()[:, 0], imgs[[5, 0, 5]] / 255.0, rtol=1e-6)
    # the DataLoader batches through get_batch: the same as the samples stacked
    xs, ys = next(iter(DataLoader(ds, batch_size=4)))
    np.testing.assert_array_equal(xs.numpy(), np.stack([ds[i][0].numpy() for i in range(4)]))
    test = MNIST(tmp_path, train=False)
    np.testing.assert_array_equal(test.data.numpy(), timgs)
    with pytest.raises(IndexError, match="out of range"):
        ds.get_batch(np.array([7]))


def test_mnist_files_in_root_transforms_and_fashion(tmp_path):
    imgs, labels = _mnist_files(str(tmp_path), "t10k", 5, gz=True, hw=(6, 6))
    seen = []

    def tf(x):
        seen.append(tuple(x.shape))
        return x * 2

    ds = MNIST(tmp_path, train=False, transform=tf, target_transform=lambda t: t + 100)
    img, lab = ds[1]
    np.testing.assert_allclose(img.numpy()[0], imgs[1] / 255.0 * 2, rtol=1e-6)
    assert lab == int(labels[1]) + 100 and seen == [(1, 6, 6)]
    xb, yb = ds.get_batch(np.arange(3))    # a plain callable runs per sample
    assert seen[1:] == [(1, 6, 6)] * 3 and yb.tolist() == (labels[:3] + 100).tolist()
    np.testing.assert_allclose(xb.numpy()[:, 0], imgs[:3] / 255.0 * 2, rtol=1e-6)
    from numbagrad.data.transforms import Normalize
    nd = MNIST(tmp_path, train=False, transform=Normalize(0.5, 0.25))   # batch-capable: once per batch
    np.testing.assert_allclose(nd.get_batch(np.arange(5))[0].numpy()[:, 0], (imgs / 255.0 - 0.5) / 0.25,
                               rtol=1e-5, atol=1e-6)
    os.makedirs(tmp_path / "FashionMNIST" / "raw")
    fimgs, _ = _mnist_files(str(tmp_path / "FashionMNIST" / "raw"), "train", 4, gz=False, seed=3)
    f = FashionMNIST(tmp_path)
    assert len(f) == 4 and f.classes[9] == "Ankle boot"
    np.testing.assert_array_equal(f.data.numpy(), fimgs)


def test_mnist_missing_and_mismatched_files(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"MNIST: file 'train-images-idx3-ubyte'.*not found.*"
                                                r"ossci-datasets") as e:
        MNIST(tmp_path)
    assert os.path.join(str(tmp_path), "MNIST", "raw") in str(e.value)
    with pytest.raises(FileNotFoundError, match="fashion-mnist"):
        FashionMNIST(tmp_path, train=False)
    _mnist_files(str(tmp_path), "train", 4, gz=False)
    _write(str(tmp_path / "train-labels-idx1-ubyte"), np.zeros(3, np.uint8))
    with pytest.raises(ValueError, match="4 images but .*train-labels-idx1-ubyte' holds 3 labels"):
        MNIST(tmp_path)
    (tmp_path / "train-labels-idx1-ubyte").write_bytes(_idx_bytes(np.zeros(4, np.uint8))[:-2])
    with pytest.raises(ValueError, match="train-labels-idx1-ubyte' is truncated"):
        MNIST(tmp_path)


# ---- synthetic sequences ------------------------------------------------------------------
def test_synthetic_sequences_label_rule():
    ds = SyntheticSequences(200, length=12, num_classes=5, features=6, seed=7)
    x = np.stack([ds[i][0].numpy() for i in range(len(ds))]).astype(np.float64)
    # the documented rule, written out with loops over time
    tw = [(t + 1) / 12 for t in range(12)]
    acc = np.zeros((200, 5))
    for t in range(12):
        acc += tw[t] * (x[:, t] @ ds.weight)
    np.testing.assert_array_equal([ds[i][1] for i in range(200)], acc.argmax(1))
    assert len(np.unique(ds.targets)) == 5                      # every class occurs
    xb, yb = ds.get_batch(np.array([3, 1]))
    assert xb.shape == (2, 12, 6) and xb.dtype == np.float32 and yb.tolist() == [ds[3][1], ds[1][1]]
    same = SyntheticSequences(200, length=12, num_classes=5, features=6, seed=7)
    np.testing.assert_array_equal(same.data, ds.data)
    assert not np.array_equal(SyntheticSequences(200, 12, 5, 6, seed=8).data, ds.data)
    with pytest.raises(ValueError, match="num_classes must be >= 2"):
        SyntheticSequences(10, num_classes=1)


def _greedy_decode(frames, glyphs):
    """Nearest of (blank = zero vector, glyphs) per frame, then CTC collapse."""
    cands = np.concatenate([np.zeros((1, glyphs.shape[1])), glyphs])
    cls = np.argmin(((frames[:, None, :] - cands[None]) ** 2).sum(-1), axis=1)
    out, prev = [], 0
    for c in cls:
        if c != prev and c != 0:
            out.append(int(c))
        prev = c
    return out


def test_synthetic_ctc_shapes_determinism_and_labels():
    ds = SyntheticCTC(30, min_len=2, max_len=6, frames_per_char=3, noise=0.0, seed=1, features=8)
    for i in range(30):
        x, lab = ds[i]
        L = lab.shape[0]
        assert 2 <= L <= 6 and x.shape == (1 + 4 * L, 8) and x.dtype == np.float32 and lab.dtype == np.int64
        assert lab.numpy().min() >= 1 and lab.numpy().max() <= 10
        assert _greedy_decode(x.numpy(), ds.glyphs) == lab.tolist()
    assert set(ds.target_lengths.tolist()) == {2, 3, 4, 5, 6}
    noisy = SyntheticCTC(30, 2, 6, 3, noise=0.3, seed=1, features=8)
    again = SyntheticCTC(30, 2, 6, 3, noise=0.3, seed=1, features=8)
    assert all(np.array_equal(a, b) for a, b in zip(noisy.frames, again.frames))
    assert [a.tolist() for a in noisy.labels] == [a.tolist() for a in ds.labels]   # noise after the labels
    assert not np.array_equal(noisy.frames[0], ds.frames[0])
    assert [a.tolist() for a in SyntheticCTC(30, 2, 6, 3, seed=2).labels] != [a.tolist() for a in ds.labels]
    # collate: time-major padded frames, blank-padded targets, lengths
    x, t, il, tl = ds.collate([ds[i] for i in (0, 1, 2)])
    T = max(ds.frames[i].shape[0] for i in range(3))
    assert x.shape == (T, 3, 8) and t.shape == (3, int(ds.target_lengths[:3].max()))
    for k in range(3):
        n = ds.frames[k].shape[0]
        np.testing.assert_array_equal(x.numpy()[:n, k], ds.frames[k])
        assert np.all(x.numpy()[n:, k] == 0)
        assert t.numpy()[k, :tl.numpy()[k]].tolist() == ds.labels[k].tolist()
        assert np.all(t.numpy()[k, tl.numpy()[k]:] == ds.blank)
    assert il.tolist() == ds.input_lengths[:3].tolist() and tl.dtype == np.int64
    bf = SyntheticCTC(5, 1, 3, 2, seed=0, batch_first=True)
    xb = next(iter(DataLoader(bf, batch_size=5)))[0]      # DataLoader uses get_batch = collate
    assert xb.shape == (5, int(bf.input_lengths.max()), 16)
    # ready for ctc_loss: finite loss for uniform log-probabilities
    logp = ng.nn.functional.log_softmax(ng.zeros(x.shape[0], 3, ds.num_classes), dim=-1)
    loss = ng.nn.functional.ctc_loss(logp, t, il, tl, blank=ds.blank, reduction="none")
    assert loss.shape == (3,) and np.all(np.isfinite(loss.numpy()))
    with pytest.raises(ValueError, match="max_len=1 is below min_len=2"):
        SyntheticCTC(3, min_len=2, max_len=1)
