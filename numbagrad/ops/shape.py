"""Shape ops (views where NumPy gives views), dtype casts and device moves."""
import numpy as np

from ..autograd.function import Function
from ..backend import backend_of, backend_for_device
from ..tensor import Tensor
from ._util import as_tensor_arg, broadcast_shape, norm_axis, wrap_dim


# ---- casts and devices ----------------------------------------------------------------------
class Cast(Function):
    takes_bfloat16 = True  # the backend casts bfloat16 <-> float32 by numbagrad's RNE kernels

    @staticmethod
    def forward(ctx, x, dtype):
        ctx.src = x.dtype
        return backend_of(x).astype(x, dtype)

    @staticmethod
    def backward(ctx, g):
        return backend_of(g).astype(g, ctx.src), None


def cast(input, dtype):
    """``input`` converted to ``dtype`` (differentiable between floating dtypes)."""
    if input.dtype == dtype:
        return input
    return Cast.apply(input, dtype)


class ToDevice(Function):
    takes_bfloat16 = True

    @staticmethod
    def forward(ctx, x, dev):
        src = backend_of(x)
        dst = backend_for_device(dev)
        ctx.src = src
        return dst.from_numpy(src.to_numpy(x)) if dst is not src else src.copy(x)

    @staticmethod
    def backward(ctx, g):
        return ctx.src.from_numpy(backend_of(g).to_numpy(g)), None


def to_device(input, dev):
    """A copy of ``input`` on device ``dev``; the gradient flows back to the source device."""
    return ToDevice.apply(input, dev)


# ---- reshape family ---------------------------------------------------------------------------
def _shape_arg(shape):
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        return tuple(shape[0])
    return tuple(shape)


class Reshape(Function):
    view_of = 0

    @staticmethod
    def forward(ctx, x, shape):
        ctx.in_shape = x.shape
        try:
            return x.reshape(shape)
        except ValueError:
            raise RuntimeError(f"reshape: shape {list(shape)} is invalid for input of shape "
                               f"{tuple(x.shape)} ({x.size} elements)") from None

    @staticmethod
    def backward(ctx, g):
        return g.reshape(ctx.in_shape), None


def reshape(input, *shape):
    """Same data with a new shape (a view when possible); one dimension may be -1."""
    shape = _shape_arg(shape)
    if tuple(input.shape) == shape:
        return input
    return Reshape.apply(input, shape)


def view(input, *shape):
    """Like :func:`reshape` but refuses to copy a non-contiguous tensor, as in PyTorch."""
    shape = _shape_arg(shape)
    if len(shape) == 1 and not isinstance(shape[0], (int, np.integer)):  # view(dtype) is unsupported
        raise TypeError(f"view: expected a shape, got {shape[0]!r}")
    data = input.array
    if not data.flags.c_contiguous and data.size > 1:
        n = data.size
        if shape.count(-1) == 1:
            known = int(np.prod([s for s in shape if s != -1]))
            shape = tuple(n // known if s == -1 and known else s for s in shape)
        it = data.dtype.itemsize
        if int(np.prod(shape)) != n or not _view_ok(data.shape, tuple(s // it for s in data.strides), shape):
            raise RuntimeError(f"view: size {list(shape)} is not compatible with the input tensor's "
                               f"size {tuple(input.shape)} and stride (non-contiguous); use "
                               ".reshape(...) instead")
    return reshape(input, shape)


def _view_ok(shape, strides, new):
    """Whether an array of ``shape``/``strides`` (in elements) can be viewed as ``new``
    without a copy (PyTorch's rule: each run of new dims must tile one run of old dims
    that is contiguous within itself)."""
    old = [(n, s) for n, s in zip(shape, strides) if n != 1]
    new = [n for n in new if n != 1]
    i = j = 0
    while i < len(old) and j < len(new):
        # take the smallest runs of old and new dims with equal products
        po, pn = old[i][0], new[j]
        i0 = i
        i += 1
        j += 1
        while po != pn:
            if po < pn:
                if i >= len(old):
                    return False
                po *= old[i][0]
                i += 1
            else:
                if j >= len(new):
                    return False
                pn *= new[j]
                j += 1
        for k in range(i0, i - 1):  # the old run must be contiguous within itself
            if old[k][1] != old[k + 1][1] * old[k + 1][0]:
                return False
    return i == len(old) and j == len(new)


def view_as(input, other):
    """``input.view(other.shape)``."""
    return view(input, tuple(other.shape))


def reshape_as(input, other):
    """``input.reshape(other.shape)``."""
    return reshape(input, tuple(other.shape))


def flatten(input, start_dim=0, end_dim=-1):
    """Merge dimensions ``start_dim`` to ``end_dim`` into one."""
    nd = input.ndim
    s = wrap_dim(start_dim, nd, "flatten", "start_dim")
    e = wrap_dim(end_dim, nd, "flatten", "end_dim")
    if nd == 0:
        return reshape(input, 1)
    if s > e:
        raise RuntimeError(f"flatten: start_dim cannot come after end_dim (start_dim {start_dim}, "
                           f"end_dim {end_dim}, tensor of shape {tuple(input.shape)})")
    shp = tuple(input.shape)
    return reshape(input, shp[:s] + (int(np.prod(shp[s:e + 1])),) + shp[e + 1:])


def unflatten(input, dim, sizes):
    """Split dimension ``dim`` into ``sizes`` (one entry may be -1)."""
    shp = tuple(input.shape)
    dim = wrap_dim(dim, len(shp), "unflatten", scalar_ok=False)
    sizes = tuple(sizes)
    known = int(np.prod([s for s in sizes if s != -1]))
    if sizes.count(-1) > 1 or (shp[dim] != known if -1 not in sizes else known == 0 or shp[dim] % known):
        raise RuntimeError(f"unflatten: Provided sizes {list(sizes)} don't multiply up to the size of dim {dim} "
                           f"({shp[dim]}) in the input tensor of shape {shp}")
    return reshape(input, shp[:dim] + tuple(sizes) + shp[dim + 1:])


def squeeze(input, dim=None):
    """Remove dimensions of size 1 (only ``dim``'s, when given)."""
    shp = tuple(input.shape)
    if dim is None:
        new = tuple(s for s in shp if s != 1)
    else:
        axes = norm_axis(dim, len(shp), "squeeze")
        new = tuple(s for i, s in enumerate(shp) if not (i in axes and s == 1))
    return reshape(input, new)


def unsqueeze(input, dim):
    """Insert a dimension of size 1 at position ``dim``."""
    shp = list(input.shape)
    shp.insert(wrap_dim(dim, len(shp) + 1, "unsqueeze"), 1)
    return reshape(input, tuple(shp))


class Permute(Function):
    view_of = 0

    @staticmethod
    def forward(ctx, x, axes):
        ctx.axes = axes
        return x.transpose(axes)

    @staticmethod
    def backward(ctx, g):
        axes = ctx.axes
        return g.transpose(tuple(sorted(range(len(axes)), key=axes.__getitem__))), None  # the inverse


def permute(input, *dims):
    """Reorder the dimensions as ``dims`` says (a view)."""
    dims = _shape_arg(dims)
    nd = input.ndim
    if len(dims) != nd:
        raise RuntimeError(f"permute: number of dims don't match in permute: the tensor has {nd} "
                           f"dimensions but dims {list(dims)} has {len(dims)}")
    axes = tuple(wrap_dim(d, nd, "permute", "dims") for d in dims)
    if len(set(axes)) != nd:
        raise RuntimeError(f"permute: duplicate dims are not allowed (dims {list(dims)})")
    if axes == tuple(range(nd)):
        return input
    return Permute.apply(input, axes)


def transpose(input, dim0, dim1):
    """Swap dimensions ``dim0`` and ``dim1`` (a view)."""
    nd = input.ndim
    d0 = wrap_dim(dim0, nd, "transpose", "dim0")
    d1 = wrap_dim(dim1, nd, "transpose", "dim1")
    if nd < 2:
        return input
    axes = list(range(nd))
    axes[d0], axes[d1] = axes[d1], axes[d0]
    return permute(input, *axes)


swapaxes = transpose


def t(input):
    """Transpose a tensor of at most 2 dimensions (``torch.t``)."""
    if input.ndim > 2:
        raise RuntimeError(f"t: expects a tensor with <= 2 dimensions, got {input.ndim}")
    return transpose(input, 0, 1) if input.ndim == 2 else input


def movedim(input, source, destination):
    """Move dimensions ``source`` to positions ``destination``, keeping the others in order."""
    nd = input.ndim
    src = [source] if isinstance(source, (int, np.integer)) else list(source)
    dst = [destination] if isinstance(destination, (int, np.integer)) else list(destination)
    if len(src) != len(dst):
        raise RuntimeError(f"movedim: Invalid source or destination dims: source ({src} dims) should "
                           f"contain the same number of dims as destination ({dst} dims)")
    src = [wrap_dim(x, nd, "movedim", "source") for x in src]
    dst = [wrap_dim(x, nd, "movedim", "destination") for x in dst]
    for name, ds in (("source", src), ("destination", dst)):
        if len(set(ds)) != len(ds):
            raise RuntimeError(f"movedim: repeated dim in `{name}` ({ds})")
    if nd == 0:
        return input
    order = [i for i in range(nd) if i not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return permute(input, *order)


class Expand(Function):
    view_of = 0

    @staticmethod
    def forward(ctx, x, shape):
        ctx.in_shape = x.shape
        return backend_of(x).broadcast_to(x, shape)

    @staticmethod
    def backward(ctx, g):
        return backend_of(g).sum_to_shape(g, ctx.in_shape), None


def expand(input, *sizes):
    """Broadcast to ``sizes`` without copying (-1 keeps a dimension)."""
    sizes = _shape_arg(sizes)
    shp = tuple(input.shape)
    lead = len(sizes) - len(shp)
    if lead < 0:
        raise RuntimeError(f"expand: the number of sizes ({len(sizes)}) must be >= the tensor's "
                           f"dimensions ({len(shp)})")
    out = tuple(shp[i - lead] if s == -1 else s for i, s in enumerate(sizes))
    for i, s in enumerate(shp):
        if s != 1 and s != out[i + lead]:
            raise RuntimeError(f"expand: the expanded size ({out[i + lead]}) must match the existing "
                               f"size ({s}) at non-singleton dimension {i}; target {list(sizes)}, "
                               f"tensor {list(shp)}")
    if out == shp:
        return input
    return Expand.apply(input, out)


def expand_as(input, other):
    """``input.expand(other.shape)``: a broadcast view."""
    return expand(input, tuple(other.shape))


def broadcast_to(input, shape):
    """``input`` broadcast to ``shape`` (a view, as ``input.expand``)."""
    return expand(input, tuple(shape))


def broadcast_tensors(*tensors):
    """The tensors broadcast against each other to one shape, as a tuple."""
    shape = broadcast_shape("broadcast_tensors", *(tuple(t.shape) for t in tensors))
    return tuple(expand(t, shape) for t in tensors)


class _Copy(Function):
    """``x`` through the backend's ``_copy`` primitive; the gradient passes through."""
    _copy = None

    @staticmethod
    def forward(ctx, x):
        return getattr(backend_of(x), ctx._copy)(x)

    @staticmethod
    def backward(ctx, g):
        return g


class Contiguous(_Copy):
    _copy = "contiguous"


def contiguous(input):
    """``input`` itself when its array is C-contiguous, else a C-contiguous copy (gradient passes through)."""
    if input.array.flags.c_contiguous:
        return input
    return Contiguous.apply(input)


class Clone(_Copy):
    _copy = "copy"


def clone(input):
    """A copy that stays in the graph (gradients flow back to ``input``)."""
    return Clone.apply(input)


# ---- joining and splitting ------------------------------------------------------------------
class Cat(Function):
    @staticmethod
    def forward(ctx, axis, *xs):
        ctx.axis = axis
        ctx.sizes = [x.shape[axis] for x in xs]
        return backend_of(xs[0]).concatenate(xs, axis=axis)

    @staticmethod
    def backward(ctx, g):
        idx = np.cumsum(ctx.sizes)[:-1]
        parts = np.split(g, idx, axis=ctx.axis)
        return (None,) + tuple(p if n else None for p, n in zip(parts, ctx.needs_input_grad[1:]))


def _check_join(tensors, opname):
    if len(tensors) == 0:
        raise ValueError(f"{opname}: expected a non-empty sequence of tensors")
    tensors = [as_tensor_arg(t, opname) for t in tensors]
    types = {type(t.array) for t in tensors}
    if len(types) > 1:
        raise RuntimeError(f"{opname}: expected all tensors to be on the same device, got "
                           + ", ".join(str(t.device) for t in tensors))
    from .. import _dtype
    d = tensors[0].dtype
    for t in tensors[1:]:
        d = _dtype.promote(d, t.dtype)
    return [cast(t, d) for t in tensors]


def cat(tensors, dim=0):
    """Concatenate along an existing dimension."""
    tensors = _check_join(tensors, "cat")
    for i, t in enumerate(tensors):
        if t.ndim == 0:
            raise RuntimeError(f"cat: zero-dimensional tensor (at position {i}) cannot be concatenated")
    nd = tensors[0].ndim
    axis = wrap_dim(dim, nd, "cat")
    ref = tensors[0].shape
    for t in tensors[1:]:
        if t.ndim != nd or any(a != b for i, (a, b) in enumerate(zip(ref, t.shape)) if i != axis):
            raise RuntimeError(f"cat: sizes of tensors must match except in dimension {dim}; got "
                               + ", ".join(str(tuple(x.shape)) for x in tensors))
    return Cat.apply(axis, *tensors)


concatenate = concat = cat


def stack(tensors, dim=0):
    """Join along a new dimension."""
    tensors = _check_join(tensors, "stack")
    ref = tuple(tensors[0].shape)
    for t in tensors[1:]:
        if tuple(t.shape) != ref:
            raise RuntimeError("stack: expects each tensor to be equal size, got "
                               + ", ".join(str(tuple(x.shape)) for x in tensors))
    axis = wrap_dim(dim, len(ref) + 1, "stack")
    return cat([unsqueeze(t, axis) for t in tensors], dim=axis)


def hstack(tensors):
    """Concatenate along dimension 1 (dimension 0 for 1-D tensors), as ``torch.hstack``."""
    return cat(tensors, dim=0 if tensors[0].ndim == 1 else 1)


def vstack(tensors):
    """Stack row-wise: 1-D tensors become rows, then concatenate along dimension 0."""
    return cat([t if t.ndim > 1 else unsqueeze(t, 0) for t in tensors], dim=0)


class Slice(Function):
    """Basic slicing along one axis (the building block of split/chunk/narrow)."""
    view_of = 0

    @staticmethod
    def forward(ctx, x, axis, start, stop):
        ctx.meta = (x.shape, x.dtype, axis, start, stop)
        idx = [slice(None)] * x.ndim
        idx[axis] = slice(start, stop)
        return x[tuple(idx)]

    @staticmethod
    def backward(ctx, g):
        shape, dtype, axis, start, stop = ctx.meta
        be = backend_of(g)
        out = be.zeros(shape, dtype)
        idx = [slice(None)] * len(shape)
        idx[axis] = slice(start, stop)
        out[tuple(idx)] = g
        return out, None, None, None


def narrow(input, dim, start, length):
    """The slice ``start:start + length`` of dimension ``dim`` (a view)."""
    if input.ndim == 0:
        raise RuntimeError("narrow: narrow() cannot be applied to a 0-dim tensor.")
    axis = wrap_dim(dim, input.ndim, "narrow")
    n = input.shape[axis]
    start, length = int(start), int(length)
    if not -n <= start <= n:
        raise IndexError(f"narrow: start out of range (expected to be in range of [{-n}, {n}], but got "
                         f"{start}) for dimension {dim} of a tensor of shape {tuple(input.shape)}")
    if start < 0:
        start += n
    if length < 0:
        raise RuntimeError(f"narrow: length must be non-negative, got {length}")
    if start + length > n:
        raise RuntimeError(f"narrow: start ({start}) + length ({length}) exceeds dimension size ({n}) "
                           f"of dimension {dim} of a tensor of shape {tuple(input.shape)}")
    return Slice.apply(input, axis, start, start + length)


def split(tensor, split_size_or_sections, dim=0):
    """Split into chunks of ``split_size`` (the last may be smaller) or of the given sizes."""
    axis = wrap_dim(dim, tensor.ndim, "split", scalar_ok=False)
    n = tensor.shape[axis]
    if isinstance(split_size_or_sections, (int, np.integer)):
        if split_size_or_sections < 0 or (split_size_or_sections == 0 and n != 0):
            raise RuntimeError(f"split: split_size must be positive (or 0 for a dimension of size 0), got "
                               f"{split_size_or_sections} for dimension {dim} of size {n}")
        if split_size_or_sections == 0:
            return (Slice.apply(tensor, axis, 0, 0),)
        sizes = [split_size_or_sections] * (n // split_size_or_sections)
        if n % split_size_or_sections:
            sizes.append(n % split_size_or_sections)
    else:
        sizes = list(split_size_or_sections)
        if any(s < 0 for s in sizes):
            raise RuntimeError(f"split: split_with_sizes expects split_sizes have only non-negative entries, "
                               f"but got split_sizes={sizes}")
        if sum(sizes) != n:
            raise RuntimeError(f"split: split sizes {sizes} do not sum to the size {n} of dimension {dim}")
    out, start = [], 0
    for s in sizes:
        out.append(Slice.apply(tensor, axis, start, start + s))
        start += s
    return tuple(out)


def chunk(input, chunks, dim=0):
    """Split into ``chunks`` pieces along ``dim``, each ``ceil(size / chunks)`` long (the last may be shorter)."""
    if not isinstance(chunks, (int, np.integer)) or chunks <= 0:
        raise RuntimeError(f"chunk: expects `chunks` to be greater than 0, got: {chunks!r}")
    n = input.shape[wrap_dim(dim, input.ndim, "chunk", scalar_ok=False)]
    size = -(-n // chunks)
    return split(input, max(size, 1), dim)


def unbind(input, dim=0):
    """The slices along ``dim`` as a tuple, with that dimension removed."""
    wrap_dim(dim, input.ndim, "unbind", scalar_ok=False)
    return tuple(squeeze(p, dim) for p in split(input, 1, dim))


# ---- padding, flipping, repeating -------------------------------------------------------------
class Pad(Function):
    @staticmethod
    def forward(ctx, x, widths, mode, value):
        ctx.widths = widths
        ctx.mode = mode
        ctx.in_shape = x.shape
        if mode == "constant":
            return np.pad(x, widths, mode="constant", constant_values=value)
        return np.pad(x, widths, mode={"reflect": "reflect", "replicate": "edge", "circular": "wrap"}[mode])

    @staticmethod
    def backward(ctx, g):
        widths = ctx.widths
        if ctx.mode == "constant":
            idx = tuple(slice(lo, g.shape[i] - hi) for i, (lo, hi) in enumerate(widths))
            return g[idx], None, None, None
        # Non-constant modes read input elements several times: scatter the gradient back
        # by padding an index map the same way (a host array; np.add.at moves it to g's device).
        n = int(np.prod(ctx.in_shape))
        ids = np.arange(n).reshape(ctx.in_shape)
        mode = {"reflect": "reflect", "replicate": "edge", "circular": "wrap"}[ctx.mode]
        ids = np.pad(ids, widths, mode=mode)
        out = backend_of(g).zeros(n, g.dtype)
        np.add.at(out, ids.reshape(-1), g.reshape(-1))
        return out.reshape(ctx.in_shape), None, None, None


def _shuffle_factor(opname, input, factor):
    input = as_tensor_arg(input, opname)
    if not isinstance(factor, (int, np.integer)) or isinstance(factor, bool) or factor < 1:
        raise RuntimeError(f"{opname}: the factor must be a positive int, got {factor!r}")
    if input.ndim < 3:
        raise RuntimeError(f"{opname}: expected an input of at least 3 dimensions (*, C, H, W), "
                           f"got shape {tuple(input.shape)}")
    return input, int(factor)


def pixel_shuffle(input, upscale_factor):
    """``(*, C*r*r, H, W) -> (*, C, H*r, W*r)``: channel blocks become ``r x r`` pixel
    blocks (``torch.nn.functional.pixel_shuffle``, sub-pixel convolution). A reshape, a
    permutation and a reshape, so gradients flow through those ops."""
    input, r = _shuffle_factor("pixel_shuffle", input, upscale_factor)
    *batch, c, h, w = input.shape
    if c % (r * r):
        raise RuntimeError(f"pixel_shuffle: the channels ({c}, shape {tuple(input.shape)}) must be divisible "
                           f"by upscale_factor**2 = {r * r}")
    n = len(batch)
    x = reshape(input, *batch, c // (r * r), r, r, h, w)
    x = permute(x, *range(n), n, n + 3, n + 1, n + 4, n + 2)          # (*, C, H, r, W, r)
    return reshape(x, *batch, c // (r * r), h * r, w * r)


def pixel_unshuffle(input, downscale_factor):
    """The inverse of :func:`pixel_shuffle`: ``(*, C, H*r, W*r) -> (*, C*r*r, H, W)``."""
    input, r = _shuffle_factor("pixel_unshuffle", input, downscale_factor)
    *batch, c, h, w = input.shape
    if h % r or w % r:
        raise RuntimeError(f"pixel_unshuffle: height and width (shape {tuple(input.shape)}) must be divisible "
                           f"by downscale_factor = {r}")
    n = len(batch)
    x = reshape(input, *batch, c, h // r, r, w // r, r)
    x = permute(x, *range(n), n, n + 2, n + 4, n + 1, n + 3)          # (*, C, r, r, H, W)
    return reshape(x, *batch, c * r * r, h // r, w // r)


def _out_sizes(opname, input, size, scale_factor):
    """Output spatial sizes and the source-per-destination scale of each spatial dim, as
    PyTorch computes them (a given ``scale_factor`` is used as ``1/scale`` directly)."""
    spatial = input.shape[2:]
    k = len(spatial)
    if (size is None) == (scale_factor is None):
        raise ValueError(f"{opname}: give exactly one of size and scale_factor")
    if size is not None:
        out = [int(size)] * k if isinstance(size, (int, np.integer)) else [int(v) for v in size]
        if len(out) != k:
            raise ValueError(f"{opname}: size {size!r} does not match the {k} spatial dims of shape {tuple(input.shape)}")
        return out, [i / o for i, o in zip(spatial, out)]
    sf = [float(scale_factor)] * k if isinstance(scale_factor, (int, float)) else [float(v) for v in scale_factor]
    if len(sf) != k or min(sf) <= 0:
        raise ValueError(f"{opname}: scale_factor {scale_factor!r} must be positive, one per spatial dim of "
                         f"shape {tuple(input.shape)}")
    return [int(np.floor(i * f)) for i, f in zip(spatial, sf)], [1.0 / f for f in sf]


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None):
    """Resize the spatial dims of a ``(N, C, *spatial)`` tensor
    (``torch.nn.functional.interpolate``): ``mode='nearest'`` (1-3 spatial dims; source
    index ``floor(dst * in/out)``) or ``'bilinear'`` (2 spatial dims; with or without
    ``align_corners``). Built from indexing and arithmetic, so it is differentiable and runs
    on every device."""
    input = as_tensor_arg(input, "interpolate")
    if input.ndim not in (3, 4, 5):
        raise ValueError(f"interpolate: expected a 3-D, 4-D or 5-D input (N, C, *spatial), got shape "
                         f"{tuple(input.shape)}")
    out, scale = _out_sizes("interpolate", input, size, scale_factor)
    if mode == "nearest":
        if align_corners is not None:
            raise ValueError("interpolate: align_corners only has an effect with linear modes; leave it None")
        x = input
        for d, (n_in, n_out, sc) in enumerate(zip(input.shape[2:], out, scale)):
            src = np.minimum(np.floor(np.arange(n_out) * sc).astype(np.int64), n_in - 1)
            x = x[(slice(None),) * (2 + d) + (src,)]
        return x
    if mode == "bilinear":
        if input.ndim != 4:
            raise ValueError(f"interpolate: mode 'bilinear' expects a 4-D input, got shape {tuple(input.shape)}")
        from . import elementwise as ew
        x = input
        for d, (n_in, n_out, sc) in enumerate(zip(input.shape[2:], out, scale)):
            if align_corners:
                pos = np.arange(n_out) * ((n_in - 1) / (n_out - 1) if n_out > 1 else 0.0)
            else:
                pos = np.maximum((np.arange(n_out) + 0.5) * sc - 0.5, 0.0)
            i0 = np.minimum(np.floor(pos).astype(np.int64), n_in - 1)
            i1 = np.minimum(i0 + 1, n_in - 1)
            shape = [1] * 4
            shape[2 + d] = n_out
            w = (pos - i0).astype(input.dtype).reshape(shape)
            wt = Tensor._from_array(backend_of(input.array).asarray(w))
            lead = (slice(None),) * (2 + d)
            lo, hi = x[lead + (i0,)], x[lead + (i1,)]
            x = ew.add(lo, ew.mul(ew.sub(hi, lo), wt))
        return x
    raise NotImplementedError(f"interpolate: mode {mode!r} is not implemented (numbagrad has 'nearest' and "
                              f"'bilinear')")


def pad(input, pad, mode="constant", value=0.0):
    """Pad the last ``len(pad)//2`` dimensions: ``pad = (left_last, right_last, left_prev, ...)``,
    as ``torch.nn.functional.pad``. Modes: constant, reflect, replicate, circular."""
    if len(pad) % 2:
        raise ValueError(f"pad: padding length must be even, got {len(pad)}")
    nd = input.ndim
    k = len(pad) // 2
    if k > nd:
        raise ValueError(f"pad: padding {tuple(pad)} covers {k} dimensions but input has {nd}")
    if mode not in ("constant", "reflect", "replicate", "circular"):
        raise ValueError(f"pad: unknown mode {mode!r}")
    widths = [(0, 0)] * nd
    for i in range(k):
        widths[nd - 1 - i] = (int(pad[2 * i]), int(pad[2 * i + 1]))
    if any(lo < 0 or hi < 0 for lo, hi in widths):
        raise ValueError("pad: negative padding is not supported")
    for d, (lo, hi) in enumerate(widths):  # PyTorch's limits: one reflection, one wrap
        n = input.shape[d]
        if mode == "reflect" and (lo or hi) and max(lo, hi) >= n:
            raise ValueError(f"pad: Padding size should be less than the corresponding input dimension, but got: "
                             f"padding ({lo}, {hi}) at dimension {d} of input of shape {tuple(input.shape)}")
        if mode == "circular" and max(lo, hi) > n:
            raise ValueError(f"pad: Padding value causes wrapping around more than once: padding ({lo}, {hi}) "
                             f"at dimension {d} of input of shape {tuple(input.shape)}")
        if mode in ("replicate", "circular", "reflect") and (lo or hi) and n == 0:
            raise ValueError(f"pad: cannot {mode}-pad dimension {d} of size 0 (input of shape "
                             f"{tuple(input.shape)})")
    return Pad.apply(input, tuple(widths), mode, input.dtype.type(value))


class Flip(Function):
    view_of = 0

    @staticmethod
    def forward(ctx, x, axes):
        ctx.axes = axes
        return np.flip(x, axes)

    @staticmethod
    def backward(ctx, g):
        return np.flip(g, ctx.axes), None


def flip(input, dims):
    """Reverse the order of the elements along ``dims`` (a copy)."""
    return Flip.apply(input, norm_axis(dims, input.ndim, "flip"))


class Roll(Function):
    @staticmethod
    def forward(ctx, x, shifts, axes):
        ctx.args = (shifts, axes)
        return np.roll(x, shifts, axes)

    @staticmethod
    def backward(ctx, g):
        shifts, axes = ctx.args
        neg = tuple(-s for s in shifts) if isinstance(shifts, tuple) else -shifts
        return np.roll(g, neg, axes), None, None


def roll(input, shifts, dims=None):
    """Shift the elements by ``shifts`` along ``dims``, wrapping around (the flattened tensor when ``dims`` is None)."""
    if dims is not None:
        sh = tuple(shifts) if isinstance(shifts, (list, tuple)) else (shifts,)
        ds = tuple(dims) if isinstance(dims, (list, tuple)) else (dims,)
        if len(sh) != len(ds):
            raise RuntimeError(f"roll: shifts and dimensions must align. shifts: {len(sh)}, dims: {len(ds)}")
        dims = tuple(wrap_dim(d, input.ndim, "roll", "dims", scalar_ok=False) for d in ds)
        shifts = sh
    elif isinstance(shifts, (list, tuple)) and len(shifts) != 1:
        raise RuntimeError(f"roll: shifts and dimensions must align. shifts: {len(shifts)}, dims: 0")
    elif isinstance(shifts, (list, tuple)):
        shifts = shifts[0]
    return Roll.apply(input, shifts, dims)


def repeat(input, *sizes):
    """Tile the tensor (``Tensor.repeat``), built from expand + reshape so it is differentiable."""
    sizes = _shape_arg(sizes)
    if len(sizes) < input.ndim:
        raise RuntimeError(f"repeat: Number of dimensions of repeat dims ({len(sizes)}) can not be smaller than "
                           f"number of dimensions of tensor ({input.ndim})")
    if any(r < 0 for r in sizes):
        raise RuntimeError(f"repeat: repeats must be non-negative, got {list(sizes)}")
    shp = (1,) * (len(sizes) - input.ndim) + tuple(input.shape)
    x = reshape(input, shp)
    # interleave a new axis of size r before each dim, expand, then merge
    inter = []
    for s in shp:
        inter += [1, s]
    x = reshape(x, tuple(inter))
    target = []
    for r, s in zip(sizes, shp):
        target += [r, s]
    x = expand(x, tuple(target))
    return reshape(contiguous(x), tuple(r * s for r, s in zip(sizes, shp)))


def tile(input, dims):
    """Repeat ``input`` ``dims`` times along each dimension (leading ones prepended as needed)."""
    return repeat(input, *((1,) * (input.ndim - len(dims)) + tuple(dims)))


def ravel(input):
    """``input`` flattened to 1-D (a view where it is contiguous)."""
    return reshape(input, -1)


swapdims = swapaxes
moveaxis = movedim
