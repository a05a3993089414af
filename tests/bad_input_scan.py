"""Bad-input rows (``tests/test_bad_input.py``) for ``numbagrad/ops/scan.py``."""


def add(row, dim_rows, f32, i64):
    """Add this family's rows: ``row(covers, call, exc, fragment, torch=True)`` and
    ``dim_rows(name, call, scalar=None, op=None)`` as documented in test_bad_input.py;
    ``f32(lib, *shape)`` / ``i64(lib, *values, shape=None)`` make inputs."""
    # Tensor methods that take a dim: 5 and -3 raise, -1 returns, a 0-d tensor's dim 0 returns
    dim_rows("cumprod", lambda t, x, d: x.cumprod(d))
    dim_rows("cummax", lambda t, x, d: x.cummax(d))
    dim_rows("cummin", lambda t, x, d: x.cummin(d))
    dim_rows("logcumsumexp", lambda t, x, d: x.logcumsumexp(d))
    dim_rows("nansum", lambda t, x, d: x.nansum(d))
    dim_rows("nanmean", lambda t, x, d: x.nanmean(d))
    dim_rows("count_nonzero", lambda t, x, d: x.count_nonzero(d))
    dim_rows("median", lambda t, x, d: x.median(d))
    dim_rows("aminmax", lambda t, x, d: x.aminmax(dim=d))
    dim_rows("repeat_interleave", lambda t, x, d: x.repeat_interleave(2, d), scalar=IndexError)

    two = lambda t: f32(t, 2, 3)  # noqa: E731
    d5 = "Dimension out of range (expected to be in range of [-2, 1], but got 5)"
    # diff and tensor_split refuse a 0-d tensor whatever the dim
    for name, call in (("diff", lambda t, x, d: x.diff(dim=d)),
                       ("tensor_split", lambda t, x, d: x.tensor_split(2, d))):
        row("Tensor." + name, lambda t, c=call: c(t, two(t), 5), IndexError, f"{name}: " + d5)
        row("Tensor." + name, lambda t, c=call: c(t, two(t), -3), IndexError, "but got -3")
        row("Tensor." + name, lambda t, c=call: c(t, two(t), -1), None)
    row("Tensor.diff", lambda t: f32(t).diff(), RuntimeError, "diff expects input to be at least one-dimensional")
    row("Tensor.diff", lambda t: two(t).diff(n=-1), RuntimeError, "order must be non-negative but got -1")
    row("Tensor.diff", lambda t: two(t).diff(n=7), None)
    row("Tensor.diff", lambda t: two(t).diff(prepend=f32(t, 3)), RuntimeError, "same dimension as input")
    row("Tensor.diff", lambda t: two(t).diff(append=f32(t, 3, 1)), RuntimeError,
        "input.size(0) = 2, but got tensor.size(0) = 3")
    row("Tensor.diff", lambda t: two(t).diff(prepend=1.0), TypeError, "argument 'prepend' must be Tensor")
    row("Tensor.tensor_split", lambda t: f32(t).tensor_split(2), RuntimeError, "at least a 1-dimensional tensor")
    row("Tensor.tensor_split", lambda t: two(t).tensor_split(0, 1), RuntimeError,
        "number of sections must be larger than 0, got 0")
    row("Tensor.tensor_split", lambda t: two(t).tensor_split(-2, 1), RuntimeError, "must be larger than 0")
    row("Tensor.tensor_split", lambda t: two(t).tensor_split([2, 1, 9, -7], 1), None)  # out of order / range
    row("Tensor.tensor_split", lambda t: two(t).tensor_split(i64(t, 1, 2, shape=(1, 2)), 1), RuntimeError,
        "zero-dimensional or one-dimensional tensor")
    row("Tensor.tensor_split", lambda t: two(t).tensor_split(f32(t, 2), 1), RuntimeError, "dtype of long")
    row("Tensor.tensor_split", lambda t: two(t).tensor_split(2.0), TypeError, "")
    row("Tensor.hsplit", lambda t: two(t).hsplit(2), RuntimeError, "not divisible by the split_size 2")
    row("Tensor.hsplit", lambda t: two(t).hsplit(0), RuntimeError, "not divisible by the split_size 0")
    row("Tensor.hsplit", lambda t: f32(t).hsplit(1), RuntimeError, "at least 1 dimension")
    row("Tensor.hsplit", lambda t: two(t).hsplit([1, 2]), None)
    row("Tensor.vsplit", lambda t: f32(t, 6).vsplit(2), RuntimeError, "at least 2 dimension")
    row("Tensor.dsplit", lambda t: two(t).dsplit(1), RuntimeError, "at least 3 dimension")
    # repeat_interleave: negative repeats, wrong sizes and dtypes never reach index_select
    row("Tensor.repeat_interleave", lambda t: two(t).repeat_interleave(-1), RuntimeError,
        "Repeats must be non-negative")
    row("Tensor.repeat_interleave", lambda t: two(t).repeat_interleave(i64(t, 1, -1, 2), 1), RuntimeError,
        "repeats can not be negative")
    row("Tensor.repeat_interleave", lambda t: two(t).repeat_interleave(i64(t, 1, 2), 1), RuntimeError,
        "repeats must have the same size as input along dim")
    row("Tensor.repeat_interleave", lambda t: two(t).repeat_interleave(i64(t, 1, 2, shape=(1, 2)), 1),
        RuntimeError, "repeats must be 0-dim or 1-dim tensor")
    row("Tensor.repeat_interleave", lambda t: two(t).repeat_interleave(f32(t, 3), 1), NotImplementedError, "")
    row("Tensor.repeat_interleave", lambda t: two(t).repeat_interleave(2, 1, output_size=5), RuntimeError,
        "Invalid output_size, expected 6 but got 5")
    row("Tensor.repeat_interleave", lambda t: two(t).repeat_interleave(i64(t, 2), 0), None)
    row("Tensor.repeat_interleave", lambda t: two(t).repeat_interleave(2.0), TypeError, "")
    row("repeat_interleave", lambda t: t.repeat_interleave(i64(t, 1, 2, shape=(2, 1))), RuntimeError,
        "only accept 1D vector as repeat")
    row("repeat_interleave", lambda t: t.repeat_interleave(i64(t, 1, -2)), RuntimeError, "can not be negative")
    # rot90: its dims pair is checked for length, distinctness and range
    row("Tensor.rot90", lambda t: two(t).rot90(1, (0, 5)), IndexError, "rot90: " + d5)
    row("Tensor.rot90", lambda t: two(t).rot90(1, (-3, 0)), IndexError, "but got -3")
    row("Tensor.rot90", lambda t: two(t).rot90(1, (-1, 0)), None)
    row("Tensor.rot90", lambda t: two(t).rot90(1, (0,)), RuntimeError, "expected total rotation dims == 2")
    row("Tensor.rot90", lambda t: two(t).rot90(1, (0, 0)), RuntimeError, "expected rotation dims to be different")
    row("Tensor.rot90", lambda t: two(t).rot90(1, (0, -2)), RuntimeError, "expected rotation dims to be different")
    row("Tensor.rot90", lambda t: f32(t, 3).rot90(), RuntimeError, "expected total dims >= 2")
    row("Tensor.rot90", lambda t: two(t).rot90(1.0), TypeError, "")
    row("Tensor.fliplr", lambda t: f32(t, 3).fliplr(), RuntimeError, "Input must be >= 2-d")
    row("Tensor.flipud", lambda t: f32(t).flipud(), RuntimeError, "Input must be >= 1-d")
    # reductions: empty inputs, dtypes, tuple dims
    row("Tensor.aminmax", lambda t: f32(t, 0, 3).aminmax(), RuntimeError, "cannot compute aminmax over an empty")
    row("Tensor.aminmax", lambda t: f32(t, 0, 3).aminmax(dim=0), IndexError,
        "Expected reduction dim 0 to have non-zero size")
    row("Tensor.aminmax", lambda t: f32(t, 0, 3).aminmax(dim=1), None)
    row("Tensor.aminmax", lambda t: two(t).aminmax(dim=(0, 1)), TypeError, "must be int")
    row("Tensor.median", lambda t: f32(t, 2, 0).median(1), IndexError, "Expected reduction dim 1 to have non-zero")
    row("Tensor.median", lambda t: f32(t, 0, 3).median(1), None)
    row("Tensor.median", lambda t: f32(t, 0).median(), None)
    row("Tensor.median", lambda t: (two(t) > 0).median(), NotImplementedError, "")
    row("Tensor.nanmean", lambda t: i64(t, 1, 2).nanmean(), RuntimeError,
        "expected input to have floating point or complex dtype")
    row("Tensor.nansum", lambda t: two(t).nansum((0, 0)), RuntimeError, "appears multiple times")
    row("Tensor.count_nonzero", lambda t: two(t).count_nonzero((0, 0)), RuntimeError, "appears multiple times")
    row("Tensor.count_nonzero", lambda t: two(t).count_nonzero((0, 5)), IndexError, "but got 5")
    row("Tensor.logcumsumexp", lambda t: i64(t, 1, 2).logcumsumexp(0), NotImplementedError, "")
    row("Tensor.cummax", lambda t: f32(t, 0, 3).cummax(0), None)
    row("Tensor.cumprod", lambda t: f32(t, 0, 3).cumprod(1), None)
    row("Tensor.msort", lambda t: f32(t).msort(), None)
