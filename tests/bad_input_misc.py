"""Bad-input rows (``tests/test_bad_input.py``) for ``numbagrad/ops/misc_ops.py`` and
``gumbel_softmax`` (``numbagrad/ops/nn_extra.py``)."""


def add(row, dim_rows, f32, i64):
    """Add this family's rows: ``row(covers, call, exc, fragment, torch=True)`` and
    ``dim_rows(name, call, scalar=None, op=None)`` as documented in test_bad_input.py;
    ``f32(lib, *shape)`` / ``i64(lib, *values, shape=None)`` make inputs."""
    # Tensor methods that take a dim: 5 and -3 raise, -1 returns, a 0-d tensor's dim 0 returns
    def src(x):  # index_copy's source: one slice along the last dim
        return x[..., :1] if x.ndim else x

    def zidx(t, x):
        return t.zeros(tuple(x.shape), dtype=t.int64)

    dim_rows("index_copy", lambda t, x, d: x.index_copy(d, i64(t, 0), src(x)))
    dim_rows("index_copy_", lambda t, x, d: x.clone().index_copy_(d, i64(t, 0), src(x)))
    dim_rows("index_fill", lambda t, x, d: x.index_fill(d, i64(t, 0), 2.0))
    dim_rows("index_fill_", lambda t, x, d: x.clone().index_fill_(d, i64(t, 0), 2.0))
    dim_rows("scatter_reduce", lambda t, x, d: x.scatter_reduce(d, zidx(t, x), x, "amax"))
    dim_rows("scatter_reduce_", lambda t, x, d: x.clone().scatter_reduce_(d, zidx(t, x), x, "mean"))
    dim_rows("nanmedian", lambda t, x, d: x.nanmedian(d))
    dim_rows("unique_consecutive", lambda t, x, d: x.unique_consecutive(dim=d), scalar=IndexError)

    two = lambda t: f32(t, 2, 3)  # noqa: E731
    # out-of-range, wrongly typed and wrongly shaped indices: checked before any kernel
    row("Tensor.index_copy", lambda t: two(t).index_copy(0, i64(t, 2), f32(t, 1, 3)), IndexError,
        "index 2 is out of bounds for dimension 0 with size 2")
    row("Tensor.index_copy", lambda t: two(t).index_copy(1, i64(t, -1), f32(t, 2, 1)), IndexError,
        "index -1 is out of bounds")
    row("Tensor.index_copy", lambda t: two(t).index_copy(0, t.tensor([0.0]), f32(t, 1, 3)), RuntimeError,
        "Expected a long tensor for index")
    row("Tensor.index_copy", lambda t: two(t).index_copy(0, i64(t, 0), f32(t, 2, 3)), IndexError,
        "Number of indices (1) should be equal to source.size(dim) (2)")
    row("Tensor.index_copy_", lambda t: two(t).index_copy_(0, i64(t, 5), f32(t, 1, 3)), IndexError,
        "index 5 is out of bounds")
    row("Tensor.index_fill", lambda t: two(t).index_fill(1, i64(t, 3), 1.0), IndexError,
        "index 3 is out of bounds for dimension 1 with size 3")
    row("Tensor.index_fill", lambda t: two(t).index_fill(1, i64(t, -4), 1.0), IndexError, "index -4 is out of bounds")
    row("Tensor.index_fill", lambda t: two(t).index_fill(1, i64(t, -3), 1.0), None)
    row("Tensor.index_fill", lambda t: two(t).index_fill(1, i64(t, 0, 1, shape=(1, 2)), 1.0), RuntimeError,
        "Index has to be a vector/scalar")
    row("Tensor.index_fill", lambda t: two(t).index_fill(1, i64(t, 0), f32(t, 2)), RuntimeError,
        "only supports a 0-dimensional value tensor")
    row("Tensor.index_fill_", lambda t: two(t).index_fill_(0, i64(t, 2), 1.0), IndexError, "index 2 is out of bounds")
    row("Tensor.scatter_reduce", lambda t: two(t).scatter_reduce(0, i64(t, 2, shape=(1, 1)), f32(t, 1, 1), "sum"),
        IndexError, "index 2 is out of bounds for dimension 0 with size 2",
        torch=False)  # torch raises RuntimeError for scatter's out-of-range index; numbagrad IndexError
    row("Tensor.scatter_reduce", lambda t: two(t).scatter_reduce(1, i64(t, -1, shape=(1, 1)), f32(t, 1, 1), "amin"),
        IndexError, "index -1 is out of bounds", torch=False)  # as above
    row("Tensor.scatter_reduce", lambda t: two(t).scatter_reduce(0, i64(t, 0, shape=(1, 1)), f32(t, 1, 1), "max"),
        RuntimeError, "reduce argument must be either sum, prod, mean, amax or amin",
        torch=False)  # torch's scatter_reduce takes 'max' silently as a legacy spelling
    row("Tensor.scatter_reduce", lambda t: two(t).scatter_reduce(0, i64(t, 0, 1, 0, 1, shape=(2, 2)),
                                                                 f32(t, 1, 2), "sum"), RuntimeError,
        "must be no larger than src")
    row("Tensor.scatter_reduce", lambda t: two(t).scatter_reduce(0, i64(t, 0, 1, shape=(2,)), f32(t, 2), "sum"),
        RuntimeError, "same number of dimensions")
    row("Tensor.scatter_reduce", lambda t: two(t).scatter_reduce(0, t.tensor([[0.0]]), f32(t, 1, 1), "sum"),
        RuntimeError, "integer")
    row("Tensor.scatter_reduce_", lambda t: two(t).scatter_reduce_(0, i64(t, 3, shape=(1, 1)), f32(t, 1, 1), "prod"),
        IndexError, "index 3 is out of bounds", torch=False)  # torch: RuntimeError, as above
    row("bincount", lambda t: t.bincount(i64(t, 1, -1, 2)), RuntimeError,
        "bincount only supports 1-d non-negative integral inputs")
    row("bincount", lambda t: t.bincount(i64(t, 1, 0, shape=(1, 2))), RuntimeError, "1-d non-negative")
    row("bincount", lambda t: t.bincount(f32(t, 3)), NotImplementedError, "bincount_cpu")
    row("bincount", lambda t: t.bincount(i64(t, 1, 2), minlength=-1), RuntimeError, "minlength should be >= 0")
    row("bincount", lambda t: t.bincount(i64(t, 1, 2), f32(t, 3)), RuntimeError,
        "weights should be 1-d and have the same length as input")
    row("bincount", lambda t: t.bincount(i64(t, shape=(0,))), None)
    row("histc", lambda t: t.histc(f32(t, 4), bins=0), RuntimeError, "bins must be > 0")
    row("histc", lambda t: t.histc(f32(t, 4), min=2, max=1), RuntimeError, "max must be larger than min")
    row("histc", lambda t: t.histc(i64(t, 1, 2)), NotImplementedError, "not implemented for")
    row("cov", lambda t: t.cov(f32(t, 2, 2, 2)), RuntimeError, "expected input to have two or fewer dimensions")
    row("cov", lambda t: t.cov(two(t), fweights=f32(t, 3)), RuntimeError, "expected fweights to have integral dtype")
    row("cov", lambda t: t.cov(two(t), fweights=i64(t, 1, -1, 1)), RuntimeError, "fweights cannot be negative")
    row("cov", lambda t: t.cov(two(t), aweights=f32(t, 2)), RuntimeError, "same numel as there are observations")
    row("trapezoid", lambda t: t.trapezoid(f32(t, 3), f32(t, 4)), RuntimeError,
        "There must be one `x` value for each sample point")
    row("trapezoid", lambda t: t.trapezoid(two(t), dim=5), IndexError, "trapezoid: " + "Dimension out of range")
    row("cumulative_trapezoid", lambda t: t.cumulative_trapezoid(f32(t, 3), f32(t, 4)), RuntimeError,
        "There must be one `x` value for each sample point")
    row("fmax", lambda t: t.fmax(two(t), 2.0), TypeError, "must be Tensor")
    row("fmin", lambda t: t.fmin(two(t), f32(t, 4)), RuntimeError, "fmin")
    row("column_stack", lambda t: t.column_stack([]), RuntimeError, "non-empty")
    row("dstack", lambda t: t.dstack([f32(t, 2, 3), f32(t, 3, 3)]), RuntimeError, "cat")

    # gumbel_softmax (nn.functional)
    row("gumbel_softmax", lambda t: t.nn.functional.gumbel_softmax(two(t), dim=5), IndexError,
        "gumbel_softmax: Dimension out of range (expected to be in range of [-2, 1], but got 5)")
    row("gumbel_softmax", lambda t: t.nn.functional.gumbel_softmax(two(t), hard=True, dim=0), None)
    row("gumbel_softmax", lambda t: t.nn.functional.gumbel_softmax(f32(t, 0, 3)), None)
    row("gumbel_softmax", lambda t: t.nn.functional.gumbel_softmax(f32(t), dim=0), None)
