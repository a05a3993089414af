"""Bad-input rows (``tests/test_bad_input.py``) for ``numbagrad/ops/linalg_ops.py``: the
top-level matrix functions with a non-square or 1-D matrix, an integer dtype, mismatched
shapes or dtypes, and the singular / not positive-definite cases (``LinAlgError``, a
``RuntimeError``). None of these Tensor methods takes a dimension, so no ``dim_rows``."""


def add(row, dim_rows, f32, i64):
    """Add this family's rows (see tests/bad_input_linalg.py for the helpers)."""
    sq = "A must be batches of square matrices, but they are 2 by 3 matrices"
    for name in ("det", "logdet", "inverse", "matrix_exp"):
        row(name, lambda t, n=name: getattr(t, n)(f32(t, 2, 3)), RuntimeError, sq)
        row(name, lambda t, n=name: getattr(t, n)(f32(t, 3)), RuntimeError,
            "The input tensor A must have at least 2 dimensions")
        row(name, lambda t, n=name: getattr(t, n)(i64(t, 1, 0, 0, 1, shape=(2, 2))), RuntimeError,
            "Expected a floating point or complex tensor as input. Got Long")
        row(name, lambda t, n=name: getattr(t, n)(f32(t, 0, 0)), None)  # an empty matrix
        row("Tensor." + name, lambda t, n=name: getattr(f32(t, 2, 2, 3), n)(), RuntimeError, sq)
    row("slogdet", lambda t: t.slogdet(f32(t, 2, 3)), RuntimeError, "linalg.slogdet: " + sq)
    row("slogdet", lambda t: t.slogdet(f32(t, 2, 2, fill=0.0)), None)  # singular: (0, -inf)
    row("det", lambda t: t.det(f32(t, 3, 3, fill=1.0)), None)  # singular: 0
    row("inverse", lambda t: t.inverse(f32(t, 2, 2, fill=1.0)), RuntimeError,
        "linalg.inv: The diagonal element 2 is zero, the inversion could not be completed because the input "
        "matrix is singular.")
    row("matrix_power", lambda t: t.matrix_power(f32(t, 2, 3), 2), RuntimeError, "linalg.matrix_power: " + sq)
    row("matrix_power", lambda t: t.matrix_power(f32(t, 2, 2, fill=1.0), -1), RuntimeError,
        "The diagonal element 2 is zero")
    row("matrix_power", lambda t: t.matrix_power(f32(t, 2, 2), 1.5), TypeError, "argument 'n' must be int")
    row("matrix_power", lambda t: t.matrix_power(f32(t, 3, 3), 0), None)
    row("pinverse", lambda t: t.pinverse(f32(t, 3)), RuntimeError, "must have at least 2 dimensions")
    row("pinverse", lambda t: t.pinverse(f32(t, 2, 3)), None)  # any shape
    row("pinverse", lambda t: t.pinverse(i64(t, 1, 2, shape=(1, 2))), RuntimeError, "Expected a floating point")
    # cholesky: -I is not positive-definite (the leading minor of order 1)
    row("cholesky", lambda t: t.cholesky(-t.eye(3)), RuntimeError,
        "linalg.cholesky: The factorization could not be completed because the input is not positive-definite "
        "(the leading minor of order 1 is not positive-definite).")
    row("cholesky", lambda t: t.cholesky(f32(t, 2, 3)), RuntimeError, sq)
    row("cholesky", lambda t: t.cholesky(i64(t, 1, 0, 0, 1, shape=(2, 2))), RuntimeError, "Got Long")
    row("Tensor.cholesky", lambda t: t.eye(2).cholesky(upper=True), None)
    row("cholesky_solve", lambda t: t.cholesky_solve(f32(t, 3, 2), t.eye(2)), RuntimeError,
        "Incompatible matrix sizes for cholesky_solve")
    row("cholesky_solve", lambda t: t.cholesky_solve(f32(t, 3), t.eye(3)), RuntimeError,
        "b should have at least 2 dimensions")
    row("cholesky_solve", lambda t: t.cholesky_solve(f32(t, 3, 1).double(), t.eye(3)), RuntimeError,
        "Expected b and A to have the same dtype")
    row("cholesky_solve", lambda t: t.cholesky_solve(f32(t, 2, 3, 1), t.eye(3)), None)  # batch broadcast
    row("cholesky_inverse", lambda t: t.cholesky_inverse(f32(t, 2, 3)), RuntimeError, "must be batches of square")
    row("cholesky_inverse", lambda t: t.cholesky_inverse(f32(t, 3)), RuntimeError, "at least 2 dimensions")
    row("svd", lambda t: t.svd(f32(t, 3)), RuntimeError, "The input tensor A must have at least 2 dimensions")
    row("svd", lambda t: t.svd(i64(t, 1, 2, shape=(1, 2))), RuntimeError, "Expected a floating point")
    row("svd", lambda t: t.svd(f32(t, 2, 0)), None)
    row("Tensor.svd", lambda t: f32(t, 3, 2).svd(some=False, compute_uv=False), None)
    row("qr", lambda t: t.qr(f32(t, 3)), RuntimeError, "The input tensor A must have at least 2 dimensions")
    row("qr", lambda t: t.qr(f32(t, 2, 3), some=False), None)
    row("triangular_solve", lambda t: t.triangular_solve(f32(t, 3, 2), f32(t, 2, 3)), RuntimeError,
        "A must be batches of square matrices")
    row("triangular_solve", lambda t: t.triangular_solve(f32(t, 3), t.eye(3)), RuntimeError,
        "must have at least 2 dimensions")
    row("triangular_solve", lambda t: t.triangular_solve(f32(t, 2, 2, 1), t.eye(2)), None)
