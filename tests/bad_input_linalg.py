"""Bad-input rows (``tests/test_bad_input.py``) for ``numbagrad/ops/linalg_basic.py``."""


def add(row, dim_rows, f32, i64):
    """Add this family's rows: ``row(covers, call, exc, fragment, torch=True)`` and
    ``dim_rows(name, call, scalar=None, op=None)`` as documented in test_bad_input.py;
    ``f32(lib, *shape)`` / ``i64(lib, *values, shape=None)`` make inputs."""
    # -- the methods that take a dimension
    # diagonal: by hand, as dim_rows' 0-d case does not fit (torch refuses dim2=1 of a 0-d tensor)
    row("Tensor.diagonal", lambda t: f32(t, 2, 3).diagonal(0, 5, 0), IndexError,
        "diagonal: Dimension out of range (expected to be in range of [-2, 1], but got 5)")
    row("Tensor.diagonal", lambda t: f32(t, 2, 3).diagonal(0, -3, 0), IndexError,
        "diagonal: Dimension out of range (expected to be in range of [-2, 1], but got -3)")
    row("Tensor.diagonal", lambda t: f32(t, 2, 3).diagonal(0, -1, 0), None)
    row("Tensor.diagonal", lambda t: f32(t).diagonal(), IndexError,
        "diagonal: Dimension out of range (expected to be in range of [-1, 0], but got 1)")
    row("Tensor.diagonal", lambda t: f32(t, 2, 3).diagonal(0, 0, 0), RuntimeError,
        "diagonal: diagonal dimensions cannot be identical 0, 0")
    row("Tensor.diagonal", lambda t: f32(t, 2, 3).diagonal(0, 1, -1), RuntimeError,
        "diagonal dimensions cannot be identical 1, -1")
    row("Tensor.diagonal", lambda t: f32(t, 2, 3).diagonal(0, 0, 5), IndexError,
        "Dimension out of range (expected to be in range of [-2, 1], but got 5)")
    row("Tensor.diagonal", lambda t: f32(t, 2, 3).diagonal(7), None)  # an empty diagonal
    row("Tensor.diagonal", lambda t: f32(t, 3).diagonal(), IndexError,
        "Dimension out of range (expected to be in range of [-1, 0], but got 1)")
    # diag_embed's result has one dimension more: (2, 3) -> 3-d, so 5 and -4 are out of range
    row("Tensor.diag_embed", lambda t: f32(t, 2, 3).diag_embed(0, 5, 0), IndexError,
        "diag_embed: Dimension out of range (expected to be in range of [-3, 2], but got 5)")
    row("Tensor.diag_embed", lambda t: f32(t, 2, 3).diag_embed(0, -4, 0), IndexError,
        "Dimension out of range (expected to be in range of [-3, 2], but got -4)")
    row("Tensor.diag_embed", lambda t: f32(t, 2, 3).diag_embed(0, 0, -3), RuntimeError,
        "diag_embed: diagonal dimensions cannot be identical 0, -3")
    row("Tensor.diag_embed", lambda t: f32(t, 2, 3).diag_embed(1, -1, 0), None)
    row("Tensor.diag_embed", lambda t: f32(t).diag_embed(), IndexError,
        "Dimension out of range (expected to be in range of [-1, 0], but got -2)")
    # cross of (2, 3) tensors; the 0-d case becomes two 3-vectors (dim 0 is then valid)
    dim_rows("cross", lambda t, x, d: (x if x.ndim else f32(t, 3)).cross(x if x.ndim else f32(t, 3), dim=d))
    row("Tensor.cross", lambda t: f32(t, 2, 3).cross(f32(t, 2, 3), dim=0), RuntimeError,
        "cross: linalg.cross: inputs dimension 0 must have length 3. Got 2 and 2")
    row("Tensor.cross", lambda t: f32(t, 2, 3).cross(f32(t, 3), dim=1), RuntimeError,
        "inputs must have the same number of dimensions")
    row("Tensor.cross", lambda t: f32(t, 2, 3).cross(f32(t, 4, 3), dim=1), RuntimeError,
        "cross: The size of tensor a (2) must match the size of tensor b (4) at non-singleton dimension 0")
    row("Tensor.cross", lambda t: f32(t, 2, 4).cross(f32(t, 2, 4)), RuntimeError, "no dimension of size 3 in input")
    row("Tensor.cross", lambda t: f32(t, 2, 3).cross(f32(t, 2, 3).double(), dim=1), RuntimeError,
        "cross: expected both")
    row("Tensor.cross", lambda t: f32(t, 0, 3).cross(f32(t, 0, 3), dim=1), None)  # empty
    # -- shape, dtype and rank mismatches of the products
    row("addmm", lambda t: t.addmm(f32(t, 2, 3), f32(t, 2, 4), f32(t, 3, 3)), RuntimeError,
        "addmm: mat1 and mat2 shapes cannot be multiplied (2x4 and 3x3)")
    row("addmm", lambda t: t.addmm(f32(t, 4), f32(t, 2, 3), f32(t, 3, 3)), RuntimeError,
        "addmm: The expanded size of the tensor (3) must match the existing size (4) at non-singleton dimension 1")
    row("addmm", lambda t: t.addmm(f32(t, 1, 2, 3), f32(t, 2, 3), f32(t, 3, 3)), RuntimeError,
        "the number of sizes provided (2) must be greater or equal to the number of dimensions in the tensor (3)")
    row("addmm", lambda t: t.addmm(f32(t, 2, 3), f32(t, 3), f32(t, 3, 3)), RuntimeError,
        "addmm: mat1 must be a matrix, got 1-D tensor")
    row("addmm", lambda t: t.addmm(f32(t, 2, 3), f32(t, 2, 3).double(), f32(t, 3, 3)), RuntimeError,
        "addmm: mat1 and mat2 must have the same dtype, but got Double and Float")
    row("addmm", lambda t: t.addmm(f32(t, 2, 3).double(), f32(t, 2, 3), f32(t, 3, 3)), RuntimeError,
        "addmm: self and mat2 must have the same dtype, but got Double and Float")
    row("addmm", lambda t: t.addmm(f32(t), f32(t, 2, 0), f32(t, 0, 3)), None)  # empty inner dimension
    row("addmm", lambda t: t.addmm(f32(t, 2, 3, fill=float("nan")), f32(t, 2, 3), f32(t, 3, 3), beta=0), None)
    row("Tensor.addmm_", lambda t: f32(t, 3).addmm_(f32(t, 2, 3), f32(t, 3, 3)), RuntimeError,
        "addmm_: Bad in-place call: input tensor size [3] and output tensor size [2, 3] should match")
    row("mv", lambda t: t.mv(f32(t, 2, 3), f32(t, 4)), RuntimeError,
        "mv: size mismatch, got input (2), mat (2x3), vec (4)")
    row("mv", lambda t: t.mv(f32(t, 3), f32(t, 3)), RuntimeError, "mv: vector + matrix @ vector expected")
    row("mv", lambda t: t.mv(f32(t, 2, 3), f32(t, 3, 1)), RuntimeError,
        "vector + matrix @ vector expected, got 1, 2, 2")
    row("mv", lambda t: t.mv(f32(t, 2, 3), f32(t, 3).double()), RuntimeError, "same dtype")
    row("mv", lambda t: t.mv(f32(t, 0, 3), f32(t, 3)), None)
    row("addmv", lambda t: t.addmv(f32(t, 3), f32(t, 2, 3), f32(t, 3)), RuntimeError,
        "addmv: size mismatch, got input (3), mat (2x3), vec (3)")
    row("addmv", lambda t: t.addmv(f32(t, 1, 2), f32(t, 2, 3), f32(t, 3)), RuntimeError,
        "vector + matrix @ vector expected, got 2, 2, 1")
    row("addr", lambda t: t.addr(f32(t, 2, 3), f32(t, 2, 1), f32(t, 3)), RuntimeError,
        "addr: Expected 1-D argument vec1, but got 2-D")
    row("addr", lambda t: t.addr(f32(t, 4), f32(t, 2), f32(t, 3)), RuntimeError,
        "addr: The expanded size of the tensor (3) must match the existing size (4)")
    row("addr", lambda t: t.addr(i64(t, 1, 2), i64(t, 1, 2), i64(t, 3, 4), beta=0.5), RuntimeError,
        "For integral input tensors, argument beta must not be a floating point number")
    row("baddbmm", lambda t: t.baddbmm(f32(t, 2, 2, 3), f32(t, 2, 2, 4), f32(t, 3, 4, 3)), RuntimeError,
        "baddbmm: Expected size for first two dimensions of batch2 tensor to be: [2, 4] but got: [3, 4]")
    row("baddbmm", lambda t: t.baddbmm(f32(t, 2, 2, 3), f32(t, 2, 2, 4), f32(t, 2, 5, 3)), RuntimeError,
        "Expected size for first two dimensions of batch2 tensor to be: [2, 4] but got: [2, 5]")
    row("baddbmm", lambda t: t.baddbmm(f32(t, 3, 2, 3), f32(t, 2, 2, 4), f32(t, 2, 4, 3)), RuntimeError,
        "baddbmm: The expanded size of the tensor (2) must match the existing size (3) at non-singleton dimension 0")
    row("baddbmm", lambda t: t.baddbmm(f32(t, 2, 3), f32(t, 2, 4), f32(t, 2, 4, 3)), RuntimeError,
        "baddbmm: batch1 must be a 3D tensor")
    row("addbmm", lambda t: t.addbmm(f32(t, 2, 3), f32(t, 2, 2, 4), f32(t, 3, 4, 3)), RuntimeError,
        "addbmm: batch1 and batch2 must have same number of batches, got 2 and 3")
    row("addbmm", lambda t: t.addbmm(f32(t, 2, 3), f32(t, 2, 2, 4), f32(t, 2, 5, 3)), RuntimeError,
        "addbmm: Incompatible matrix sizes for bmm (2x4 and 5x3)")
    row("addbmm", lambda t: t.addbmm(f32(t, 2, 3), f32(t, 0, 2, 4), f32(t, 0, 4, 3)), None)  # an empty batch
    # -- the other products
    row("inner", lambda t: t.inner(f32(t, 2, 3), f32(t, 4, 2)), RuntimeError,
        "inner() the last dimension must match on both input tensors but got shapes [2, 3] and [4, 2]")
    row("vdot", lambda t: t.vdot(f32(t, 3), f32(t, 4)), RuntimeError, "vdot: inconsistent tensor size")
    row("vdot", lambda t: t.vdot(f32(t, 3, 1), f32(t, 3)), RuntimeError,
        "1D tensors expected, but got 2D and 1D tensors")
    row("vdot", lambda t: t.vdot(f32(t, 3), f32(t, 3).double()), RuntimeError, "same dtype")
    row("tensordot", lambda t: t.tensordot(f32(t, 2, 3, 4), f32(t, 3, 4, 5), dims=-1), RuntimeError,
        "tensordot expects dims >= 0, but got dims=-1")
    row("tensordot", lambda t: t.tensordot(f32(t, 2, 3, 4), f32(t, 3, 4, 5), dims=4), RuntimeError,
        "tensordot expects dims < ndim_a or ndim_b, but got dims=4")
    row("tensordot", lambda t: t.tensordot(f32(t, 2, 3, 4), f32(t, 4, 4, 5), dims=2), RuntimeError,
        "contracted dimensions need to match, but first has size 3 in dim -2 and second has size 4 in dim 0")
    row("tensordot", lambda t: t.tensordot(f32(t, 2, 3, 4), f32(t, 3, 4, 5), dims=([1], [0, 1])), RuntimeError,
        "both dimension lists should have same length")
    row("tensordot", lambda t: t.tensordot(f32(t, 2, 3, 4), f32(t, 3, 4, 5), dims=([5], [0])), IndexError,
        "tensordot: Dimension out of range (expected to be in range of [-3, 2], but got 5)")
    row("tensordot", lambda t: t.tensordot(f32(t, 2, 3), f32(t, 3, 4), dims=([1, 1], [0, 0])), RuntimeError,
        "dim 1 appears multiple times in the list of dims")
    row("tensordot", lambda t: t.tensordot(f32(t, 2, 3), f32(t, 3, 4), dims=1.5), RuntimeError,
        "tensordot expects dims to be int or tuple[list[int], list[int]]")
    row("tensordot", lambda t: t.tensordot(f32(t, 2, 3, 4), f32(t, 3, 4, 5), dims=(1, 0)), TypeError,
        "argument 'dims_self' must be a tuple of ints")
    row("tensordot", lambda t: t.tensordot(f32(t, 2, 3), f32(t, 3, 4).double(), dims=1), RuntimeError,
        "both inputs should have same dtype")
    row("tensordot", lambda t: t.tensordot(f32(t, 2, 1), f32(t, 3, 4), dims=1), None)  # size 1 broadcasts
    # -- diagonals, distances, blocks
    row("diag", lambda t: t.diag(f32(t, 2, 3, 4)), RuntimeError, "diag(): Supports 1D or 2D tensors. Got 3D")
    row("diag", lambda t: t.diag(f32(t)), RuntimeError, "diag(): Supports 1D or 2D tensors. Got 0D")
    row("diag", lambda t: t.diag(f32(t, 3, 4), 5), None)  # an empty diagonal
    row("diagflat", lambda t: t.diagflat(f32(t), 2), None)
    row("cdist", lambda t: t.cdist(f32(t, 2, 3), f32(t, 4, 2)), RuntimeError,
        "cdist: X1 and X2 must have the same number of columns. X1: 3 X2: 2")
    row("cdist", lambda t: t.cdist(f32(t, 3), f32(t, 4, 3)), RuntimeError,
        "cdist only supports at least 2D tensors, X1 got: 1D")
    row("cdist", lambda t: t.cdist(f32(t, 2, 3), f32(t, 4, 3), p=-1.0), RuntimeError,
        "cdist only supports non-negative p values")
    row("cdist", lambda t: t.cdist(f32(t, 2, 3), f32(t, 4, 3), compute_mode="x"), ValueError,
        "x is not a valid value for compute_mode")
    row("cdist", lambda t: t.cdist(i64(t, 1, 2, shape=(1, 2)), i64(t, 1, 2, shape=(1, 2))), RuntimeError,
        "cdist only supports floating-point dtypes, X1 got: Long")
    row("cdist", lambda t: t.cdist(f32(t, 2, 3), f32(t, 4, 3).double()), RuntimeError, "cdist: X1 and X2")
    row("cdist", lambda t: t.cdist(f32(t, 2, 2, 3), f32(t, 3, 4, 3)), RuntimeError,
        "cdist: The size of tensor a (2) must match the size of tensor b (3) at non-singleton dimension 0")
    row("cdist", lambda t: t.cdist(f32(t, 0, 3), f32(t, 4, 3)), None)
    row("cdist", lambda t: t.cdist(f32(t, 2, 0), f32(t, 4, 0), p=float("inf")), None)
    row("block_diag", lambda t: t.block_diag(f32(t, 2, 3, 4)), RuntimeError,
        "Input tensors must have 2 or fewer dimensions. Input 0 has 3 dimensions")
    row("block_diag", lambda t: t.block_diag(), None)
    row("block_diag", lambda t: t.block_diag(f32(t, 0, 3), f32(t, 2, 0)), None)
    row("cartesian_prod", lambda t: t.cartesian_prod(), RuntimeError, "meshgrid expects a non-empty TensorList")
    row("cartesian_prod", lambda t: t.cartesian_prod(f32(t, 2, 2)), RuntimeError,
        "Expect a 1D vector, but got shape [2, 2]")
    row("cartesian_prod", lambda t: t.cartesian_prod(f32(t, 2), f32(t, 3).double()), RuntimeError,
        "meshgrid expects all tensors to have the same dtype")
