"""Bad-input rows (``tests/test_bad_input.py``) for ``numbagrad/ops/special_fns.py``:
``polygamma``'s order ``n`` and ``mvlgamma``'s dimension ``p`` (type and range), the domain
PyTorch no longer checks, integer targets of the in-place forms, empty, 0-d and NaN inputs.
No Tensor method here takes a ``dim``, so no ``dim_rows``."""

NAN = float("nan")


def add(row, dim_rows, f32, i64):
    """Add this family's rows: ``row(covers, call, exc, fragment, torch=True)`` and
    ``dim_rows(name, call, scalar=None, op=None)`` as documented in test_bad_input.py;
    ``f32(lib, *shape)`` / ``i64(lib, *values, shape=None)`` make inputs."""
    neg_n = "polygamma(n, x) does not support negative n."
    # polygamma: the order
    row("polygamma", lambda t: t.polygamma(-1, f32(t, 2, 3)), RuntimeError, neg_n)
    row("polygamma", lambda t: t.polygamma(1.5, f32(t, 3)), TypeError, "argument 'n' (position 1) must be int")
    row("polygamma", lambda t: t.polygamma(True, f32(t, 3)), TypeError, "must be int, not bool")
    row("polygamma", lambda t: t.polygamma(i64(t, 1, 2), f32(t, 2)), TypeError, "must be int, not Tensor")
    row("polygamma", lambda t: t.polygamma(i64(t, 1, shape=()), f32(t, 2)), None)  # a 0-d integer tensor is an int
    row("polygamma", lambda t: t.polygamma(2, i64(t, 1, 2)), None)  # integer input: a float result
    row("polygamma", lambda t: t.polygamma(3, f32(t, 0, 2)), None)
    row("polygamma", lambda t: t.polygamma(1, f32(t)), None)
    row("polygamma", lambda t: t.polygamma(1, f32(t, 2, fill=NAN)), None)
    row("Tensor.polygamma", lambda t: f32(t, 2).polygamma(-2), RuntimeError, neg_n)
    row("Tensor.polygamma", lambda t: f32(t, 2).polygamma(2), None)
    row("Tensor.polygamma_", lambda t: f32(t, 2).polygamma_(-1), RuntimeError, neg_n)
    row("Tensor.polygamma_", lambda t: i64(t, 1, 2).polygamma_(1), RuntimeError,
        "result type Float can't be cast to the desired output type Long")
    # mvlgamma: the dimension, and the domain x > (p - 1) / 2 that torch 2 no longer checks
    p_small = "p has to be greater than or equal to 1"
    row("mvlgamma", lambda t: t.mvlgamma(f32(t, 3), 0), RuntimeError, p_small)
    row("mvlgamma", lambda t: t.mvlgamma(f32(t, 3), -2), RuntimeError, p_small)
    row("mvlgamma", lambda t: t.mvlgamma(f32(t, 3), 2.0), TypeError, "argument 'p' (position 2) must be int")
    row("mvlgamma", lambda t: t.mvlgamma(f32(t, 3, fill=0.2), 3), None)  # below (p-1)/2: log|Gamma| terms
    row("mvlgamma", lambda t: t.mvlgamma(f32(t, 0, 3), 2), None)
    row("mvlgamma", lambda t: t.mvlgamma(i64(t, 2, 3), 2), None)
    row("Tensor.mvlgamma", lambda t: f32(t, 3).mvlgamma(p=0), RuntimeError, p_small)
    row("Tensor.mvlgamma_", lambda t: f32(t, 3, fill=2.0).mvlgamma_(2), None)
    row("Tensor.mvlgamma_", lambda t: i64(t, 2, 3).mvlgamma_(2), RuntimeError,
        "result type Float can't be cast to the desired output type Long")
    # i0, sinc
    for name in ("i0", "sinc"):
        row(name, lambda t, n=name: getattr(t, n)(f32(t, 0)), None)
        row(name, lambda t, n=name: getattr(t, n)(f32(t)), None)
        row(name, lambda t, n=name: getattr(t, n)(f32(t, 3, fill=NAN)), None)
        row(name, lambda t, n=name: getattr(t, n)(i64(t, 0, 3)), None)  # integer input: a float result
        row(f"Tensor.{name}_", lambda t, n=name: getattr(i64(t, 1, 2), n + "_")(), RuntimeError,
            "result type Float can't be cast to the desired output type Long")
        row(f"{name}_", lambda t, n=name: getattr(t, n + "_")(f32(t, 2, 3)), None)
