"""Image transforms (``torchvision.transforms`` names), per sample or per batch.

Every transform takes a single image ``(H, W)`` or ``(C, H, W)``, or a batch
``(N, C, H, W)``, as a :class:`~numbagrad.Tensor` or a NumPy array, and returns the same
kind, shape layout and dtype (``Normalize`` needs a floating input). A 3-D input is
always one ``(C, H, W)`` image. On a batch each sample gets its own random draw, and the
work is vectorised over the batch (NumPy fancy indexing, no Python loop per sample).

Random transforms draw from ``generator=`` (a :class:`numbagrad.Generator`) or else from
numbagrad's default generator at call time, so ``numbagrad.manual_seed`` makes them
reproducible. Each has ``sample_params(n, shape)`` (the draws for ``n`` images) and
``apply(x, params)``; ``t(x)`` is ``t.apply(x, t.sample_params(N, x.shape))``, so the
batch path and the per-sample path give the same images for the same draws.

``batched = True`` marks these transforms as batch-capable; :class:`~numbagrad.data.
datasets.MNIST`'s ``get_batch`` then applies them once per batch.
"""
import math
import numbers

import numpy as np

from .. import random as _random
from ..tensor import Tensor

__all__ = ["Compose", "Normalize", "RandomCrop", "RandomHorizontalFlip", "RandomAffine"]


def _as_batch(x, who):
    """``(array (N, C, H, W), restore)``: ``restore(out)`` gives the input's kind and layout."""
    is_tensor = isinstance(x, Tensor)
    a = x.array if is_tensor else x
    if not isinstance(a, np.ndarray):
        raise TypeError(f"{who}: expected a Tensor or a NumPy array, got {type(x).__name__}")
    nd = a.ndim
    if nd not in (2, 3, 4):
        raise ValueError(f"{who}: expected an image (H, W) or (C, H, W) or a batch (N, C, H, W), got shape "
                         f"{a.shape}")
    b = a.reshape((1,) * (4 - nd) + a.shape)

    def restore(out):
        out = out.reshape(out.shape[4 - nd:]) if nd < 4 else out
        return Tensor._from_array(out) if is_tensor else out
    return b, restore


def _rng(generator):
    return (generator if generator is not None else _random.default_generator).numpy_rng


def _check_generator(generator, who):
    if generator is not None and not isinstance(generator, _random.Generator):
        raise TypeError(f"{who}: generator must be a numbagrad.Generator or None, got {type(generator).__name__}")
    return generator


def _pair(value, name, who):
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        return (value, value)
    try:
        a, b = value
    except (TypeError, ValueError):
        raise TypeError(f"{who}: {name} must be a number or a pair, got {value!r}") from None
    return (a, b)


def _cast_like(out, dtype):
    if dtype.kind in "iub":
        info = np.iinfo(dtype) if dtype.kind != "b" else None
        out = np.rint(out)
        if info is not None:
            out = np.clip(out, info.min, info.max)
    return out.astype(dtype, copy=False)


class Compose:
    """Apply ``transforms`` in order (``torchvision.transforms.Compose``)."""

    def __init__(self, transforms):
        self.transforms = list(transforms)
        for t in self.transforms:
            if not callable(t):
                raise TypeError(f"Compose: every transform must be callable, got {type(t).__name__} {t!r}")

    @property
    def batched(self):
        return all(getattr(t, "batched", False) for t in self.transforms)

    def __call__(self, x):
        for t in self.transforms:
            x = t(x)
        return x

    def __repr__(self):
        inner = "".join(f"\n    {t!r}" for t in self.transforms)
        return f"Compose({inner}\n)"


class Normalize:
    """``(x - mean[c]) / std[c]`` per channel (``torchvision.transforms.Normalize``).

    ``mean`` and ``std`` are numbers or sequences of one value per channel (dimension
    ``-3``; an ``(H, W)`` image has one channel). The input must be floating point; the
    result keeps its dtype.
    """

    batched = True

    def __init__(self, mean, std, inplace=False):
        self.mean = np.atleast_1d(np.asarray(mean, dtype=np.float64))
        self.std = np.atleast_1d(np.asarray(std, dtype=np.float64))
        if self.mean.ndim != 1 or self.std.ndim != 1:
            raise ValueError(f"Normalize: mean and std must be numbers or 1-D sequences, got {mean!r}, {std!r}")
        if np.any(self.std == 0):
            raise ValueError(f"Normalize: std evaluated to zero after conversion to float64, leading to division "
                             f"by zero (std={std!r})")
        self.inplace = inplace

    def __call__(self, x):
        who = "Normalize"
        b, restore = _as_batch(x, who)
        if b.dtype.kind != "f":
            raise TypeError(f"{who}: input must be floating point, got dtype {b.dtype}")
        C = b.shape[1]
        for name, v in (("mean", self.mean), ("std", self.std)):
            if v.size not in (1, C):
                raise ValueError(f"{who}: {name} has {v.size} values but the input has {C} channels "
                                 f"(shape {tuple(np.shape(x.array if isinstance(x, Tensor) else x))})")
        m = self.mean.astype(b.dtype).reshape(1, -1, 1, 1)
        s = self.std.astype(b.dtype).reshape(1, -1, 1, 1)
        if self.inplace:
            np.subtract(b, m, out=b)
            np.divide(b, s, out=b)
            return x
        return restore((b - m) / s)

    def __repr__(self):
        return f"Normalize(mean={self.mean.tolist()}, std={self.std.tolist()})"


class RandomCrop:
    """A random ``size`` window, after optional ``padding`` (``torchvision.transforms.
    RandomCrop``).

    Parameters
    ----------
    size : int or (h, w)
    padding : int, (left/right, top/bottom) or (left, top, right, bottom), optional
    pad_if_needed : bool, pad an image smaller than ``size`` up to it
    fill : number, the constant of ``padding_mode='constant'``
    padding_mode : 'constant', 'edge', 'reflect' or 'symmetric' (``np.pad``'s modes)

    A batch is padded once, and each sample's window (its own offset) is gathered with
    one fancy index over a sliding-window view.
    """

    batched = True
    _MODES = ("constant", "edge", "reflect", "symmetric")

    def __init__(self, size, padding=None, pad_if_needed=False, fill=0, padding_mode="constant", generator=None):
        who = "RandomCrop"
        h, w = _pair(size, "size", who)
        if not all(isinstance(v, numbers.Integral) and v > 0 for v in (h, w)):
            raise ValueError(f"{who}: size must be positive ints, got {size!r}")
        self.size = (int(h), int(w))
        if padding is None:
            pad = (0, 0, 0, 0)
        elif isinstance(padding, numbers.Integral):
            pad = (padding,) * 4
        elif len(padding) == 2:
            pad = (padding[0], padding[1], padding[0], padding[1])
        elif len(padding) == 4:
            pad = tuple(padding)
        else:
            raise ValueError(f"{who}: padding must be an int or a sequence of 2 or 4 ints, got {padding!r}")
        if not all(isinstance(p, numbers.Integral) and p >= 0 for p in pad):
            raise ValueError(f"{who}: padding must be non-negative ints, got {padding!r}")
        self.padding = tuple(int(p) for p in pad)  # left, top, right, bottom
        if padding_mode not in self._MODES:
            raise ValueError(f"{who}: padding_mode must be one of {self._MODES}, got {padding_mode!r}")
        self.padding_mode = padding_mode
        self.pad_if_needed = bool(pad_if_needed)
        self.fill = fill
        self.generator = _check_generator(generator, who)

    def _pads(self, H, W):
        left, top, right, bottom = self.padding
        h, w = self.size
        if self.pad_if_needed:
            if H + top + bottom < h:
                extra = h - (H + top + bottom)
                top, bottom = top + extra, bottom + extra
            if W + left + right < w:
                extra = w - (W + left + right)
                left, right = left + extra, right + extra
        Hp, Wp = H + top + bottom, W + left + right
        if Hp < h or Wp < w:
            raise ValueError(f"RandomCrop: crop size {self.size} is larger than the padded image ({Hp}, {Wp}) "
                             f"(input {H}x{W}, padding {self.padding}); pass pad_if_needed=True to pad it")
        return (top, bottom), (left, right), Hp, Wp

    def sample_params(self, n, shape):
        """``(top, left)`` int64 arrays ``(n,)``: window offsets in the padded image."""
        H, W = shape[-2:]
        _, _, Hp, Wp = self._pads(H, W)
        h, w = self.size
        off = _rng(self.generator).integers(0, [Hp - h + 1, Wp - w + 1], size=(n, 2))
        return off[:, 0].astype(np.int64), off[:, 1].astype(np.int64)

    def apply(self, x, params):
        b, restore = _as_batch(x, "RandomCrop")
        N, C, H, W = b.shape
        top, left = params
        if len(top) != N:
            raise ValueError(f"RandomCrop.apply: params are for {len(top)} images, the input has {N}")
        pv, ph, Hp, Wp = self._pads(H, W)
        h, w = self.size
        if np.any(top < 0) or np.any(top > Hp - h) or np.any(left < 0) or np.any(left > Wp - w):
            raise ValueError(f"RandomCrop.apply: offsets outside [0, {Hp - h}] x [0, {Wp - w}]")
        widths = ((0, 0), (0, 0), pv, ph)
        if self.padding_mode == "constant":
            xp = np.pad(b, widths, mode="constant", constant_values=self.fill)
        else:
            xp = np.pad(b, widths, mode=self.padding_mode)
        win = np.lib.stride_tricks.sliding_window_view(xp, (h, w), axis=(2, 3))  # (N, C, Hp-h+1, Wp-w+1, h, w)
        out = win[np.arange(N), :, top, left]                                      # (N, C, h, w)
        return restore(np.ascontiguousarray(out))

    def __call__(self, x):
        shape = (x.array if isinstance(x, Tensor) else np.asarray(x)).shape
        n = shape[0] if len(shape) == 4 else 1
        return self.apply(x, self.sample_params(n, shape))

    def __repr__(self):
        return f"RandomCrop(size={self.size}, padding={self.padding}, padding_mode={self.padding_mode!r})"


class RandomHorizontalFlip:
    """Mirror the image left-right with probability ``p``
    (``torchvision.transforms.RandomHorizontalFlip``)."""

    batched = True

    def __init__(self, p=0.5, generator=None):
        if not isinstance(p, numbers.Real) or not 0 <= p <= 1:
            raise ValueError(f"RandomHorizontalFlip: p must be a probability in [0, 1], got {p!r}")
        self.p = float(p)
        self.generator = _check_generator(generator, "RandomHorizontalFlip")

    def sample_params(self, n, shape=None):
        """A bool array ``(n,)``: which images are flipped."""
        return _rng(self.generator).random(n) < self.p

    def apply(self, x, flip):
        b, restore = _as_batch(x, "RandomHorizontalFlip")
        flip = np.asarray(flip, dtype=bool)
        if flip.shape != (b.shape[0],):
            raise ValueError(f"RandomHorizontalFlip.apply: params are for {flip.shape} images, the input has "
                             f"{b.shape[0]}")
        out = np.where(flip[:, None, None, None], b[..., ::-1], b)
        return restore(out)

    def __call__(self, x):
        shape = (x.array if isinstance(x, Tensor) else np.asarray(x)).shape
        return self.apply(x, self.sample_params(shape[0] if len(shape) == 4 else 1))

    def __repr__(self):
        return f"RandomHorizontalFlip(p={self.p})"


class RandomAffine:
    """A random rotation, shift and scale about the image centre (the part of
    ``torchvision.transforms.RandomAffine`` that digit augmentation uses; no shear).

    Parameters
    ----------
    degrees : number or (min, max)
        Rotation angle range in degrees (a number ``d`` means ``(-d, d)``); positive is
        counter-clockwise as displayed (row 0 at the top), as torchvision.
    translate : (a, b), optional
        Maximum shift as fractions of the width and the height: the shifts are whole
        pixels, ``round(uniform(-a * W, a * W))`` and likewise for ``b * H``.
    scale : (lo, hi), optional
        Scale factor range.
    interpolation : 'nearest' (default, as torchvision) or 'bilinear'
    fill : number for pixels that map outside the input.

    Each output pixel ``p`` reads the input at ``A^-1 (p - c - t) + c`` (inverse mapping),
    ``c = ((W - 1) / 2, (H - 1) / 2)``; a batch is one vectorised gather over all samples'
    sampling grids. Parameters per image: ``(angle_deg, tx, ty, scale)`` arrays.
    """

    batched = True
    _INTERP = ("nearest", "bilinear")

    def __init__(self, degrees, translate=None, scale=None, interpolation="nearest", fill=0, generator=None):
        who = "RandomAffine"
        if isinstance(degrees, numbers.Real) and not isinstance(degrees, bool):
            if degrees < 0:
                raise ValueError(f"{who}: degrees as a single number must be non-negative, got {degrees}")
            degrees = (-degrees, degrees)
        lo, hi = _pair(degrees, "degrees", who)
        if lo > hi:
            raise ValueError(f"{who}: degrees range must be (min, max) with min <= max, got {degrees!r}")
        self.degrees = (float(lo), float(hi))
        if translate is not None:
            a, b = _pair(translate, "translate", who)
            if not (0 <= a <= 1 and 0 <= b <= 1):
                raise ValueError(f"{who}: translate values must be fractions in [0, 1], got {translate!r}")
            translate = (float(a), float(b))
        self.translate = translate
        if scale is not None:
            s0, s1 = _pair(scale, "scale", who)
            if not 0 < s0 <= s1:
                raise ValueError(f"{who}: scale must be (lo, hi) with 0 < lo <= hi, got {scale!r}")
            scale = (float(s0), float(s1))
        self.scale = scale
        if interpolation not in self._INTERP:
            raise ValueError(f"{who}: interpolation must be one of {self._INTERP}, got {interpolation!r}")
        self.interpolation = interpolation
        self.fill = float(fill)
        self.generator = _check_generator(generator, who)

    def sample_params(self, n, shape):
        """``(angle, tx, ty, scale)``: float64 arrays ``(n,)`` (angles in degrees, shifts in
        whole pixels)."""
        H, W = shape[-2:]
        rng = _rng(self.generator)
        angle = rng.uniform(self.degrees[0], self.degrees[1], size=n)
        if self.translate is not None:
            tx = np.rint(rng.uniform(-self.translate[0] * W, self.translate[0] * W, size=n))
            ty = np.rint(rng.uniform(-self.translate[1] * H, self.translate[1] * H, size=n))
        else:
            tx = ty = np.zeros(n)
        s = rng.uniform(self.scale[0], self.scale[1], size=n) if self.scale is not None else np.ones(n)
        return angle, tx, ty, s

    def apply(self, x, params):
        b, restore = _as_batch(x, "RandomAffine")
        N, C, H, W = b.shape
        angle, tx, ty, s = (np.asarray(p, dtype=np.float64).reshape(-1) for p in params)
        if not len(angle) == len(tx) == len(ty) == len(s) == N:
            raise ValueError(f"RandomAffine.apply: params are for {len(angle)} images, the input has {N}")
        if np.any(s <= 0):
            raise ValueError(f"RandomAffine.apply: scales must be positive, got {s}")
        th = np.deg2rad(angle)[:, None, None]
        cos, sin = np.cos(th), np.sin(th)
        cy, cx = (H - 1) / 2.0, (W - 1) / 2.0
        yy, xx = np.meshgrid(np.arange(H, dtype=np.float64), np.arange(W, dtype=np.float64), indexing="ij")
        dx = xx[None] - cx - tx[:, None, None]
        dy = yy[None] - cy - ty[:, None, None]
        inv = 1.0 / s[:, None, None]
        # inverse map: rotate by +angle in (x right, y down) coordinates, i.e. the forward
        # map turns the image counter-clockwise as displayed
        sx = (cos * dx - sin * dy) * inv + cx       # (N, H, W)
        sy = (sin * dx + cos * dy) * inv + cy
        n_idx = np.arange(N)[:, None, None]
        src = b.astype(np.float64) if b.dtype.kind != "f" else b
        if self.interpolation == "nearest":
            ix, iy = np.rint(sx).astype(np.int64), np.rint(sy).astype(np.int64)
            ok = (ix >= 0) & (ix < W) & (iy >= 0) & (iy < H)
            vals = src[n_idx, :, np.clip(iy, 0, H - 1), np.clip(ix, 0, W - 1)]      # (N, H, W, C)
            out = np.where(ok[..., None], vals, np.asarray(self.fill, dtype=src.dtype))
        else:
            x0, y0 = np.floor(sx), np.floor(sy)
            fx, fy = (sx - x0)[..., None], (sy - y0)[..., None]
            x0, y0 = x0.astype(np.int64), y0.astype(np.int64)
            out = 0.0
            for oy, wy in ((0, 1.0 - fy), (1, fy)):
                for ox, wx in ((0, 1.0 - fx), (1, fx)):
                    iy, ix = y0 + oy, x0 + ox
                    ok = (ix >= 0) & (ix < W) & (iy >= 0) & (iy < H)
                    v = src[n_idx, :, np.clip(iy, 0, H - 1), np.clip(ix, 0, W - 1)]
                    out = out + wy * wx * np.where(ok[..., None], v, self.fill)
        out = np.ascontiguousarray(np.moveaxis(out, -1, 1))
        return restore(_cast_like(out, b.dtype))

    def __call__(self, x):
        shape = (x.array if isinstance(x, Tensor) else np.asarray(x)).shape
        return self.apply(x, self.sample_params(shape[0] if len(shape) == 4 else 1, shape))

    def __repr__(self):
        return (f"RandomAffine(degrees={self.degrees}, translate={self.translate}, scale={self.scale}, "
                f"interpolation={self.interpolation!r}, fill={self.fill})")
