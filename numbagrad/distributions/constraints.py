"""``torch.distributions.constraints``: the sets a parameter or a sample must lie in.

A constraint's ``check(value)`` returns a boolean Tensor over the batch (the last
``event_dim`` dimensions reduced), built from numbagrad's comparison ops so it runs on
any device. ``repr`` matches PyTorch's (``GreaterThan(lower_bound=0.0)``), which is what
the ``validate_args`` error messages print.
"""
from . import _ng as ng

__all__ = ["Constraint", "dependent", "dependent_property", "is_dependent", "real", "positive",
           "nonnegative", "greater_than", "less_than", "interval", "half_open_interval", "unit_interval",
           "integer_interval", "boolean", "simplex", "independent", "real_vector",
           "lower_cholesky", "positive_definite", "nonnegative_integer"]


def _and(*conds):
    # NOTE: a comparison of 0-d tensors holds a NumPy bool scalar, which ``&`` refuses to
    # combine with a 0-d array; going through 1-d views sidesteps it.
    shape = ng.broadcast_shapes(*[c.shape for c in conds])
    out = conds[0].reshape(-1) if conds[0].ndim == 0 else conds[0]
    for c in conds[1:]:
        out = out & (c.reshape(-1) if c.ndim == 0 else c)
    return out.reshape(tuple(shape))


class Constraint:
    """A region of a space: ``check(value)`` says, element by element, whether ``value``
    lies in it. ``is_discrete`` marks integer supports and ``event_dim`` the number of
    rightmost dimensions that make up one point."""
    is_discrete = False
    event_dim = 0

    def check(self, value):
        """A boolean Tensor: where ``value`` satisfies the constraint."""
        raise NotImplementedError(f"{type(self).__name__} does not implement check (a subclass of Constraint "
                                  "defines it)")

    def __repr__(self):
        return self.__class__.__name__[1:] + "()"


class _Dependent(Constraint):
    """A placeholder for a support that depends on other parameters (not checked)."""

    def __init__(self, *, is_discrete=False, event_dim=0):
        self.is_discrete, self.event_dim = is_discrete, event_dim

    def __call__(self, *, is_discrete=False, event_dim=0):
        return _Dependent(is_discrete=is_discrete, event_dim=event_dim)

    def check(self, value):
        raise ValueError("Cannot determine validity of dependent constraint")


def is_dependent(constraint):
    """Whether ``constraint`` is a dependent placeholder (so validation skips it)."""
    return isinstance(constraint, _Dependent)


class dependent_property(property):
    """A property that is also a (dependent) constraint, used for supports that depend on
    the parameters (``Uniform.support``)."""

    def __init__(self, fn=None, *, is_discrete=False, event_dim=0):
        super().__init__(fn)
        self.is_discrete, self.event_dim = is_discrete, event_dim

    def __call__(self, fn):
        # used as ``@dependent_property(is_discrete=..., event_dim=...)``
        return dependent_property(fn, is_discrete=self.is_discrete, event_dim=self.event_dim)


class _Real(Constraint):
    def check(self, value):
        return value == value  # False only at NaN


class _Boolean(Constraint):
    is_discrete = True

    def check(self, value):
        v = value.reshape(-1) if value.ndim == 0 else value
        return ((v == 0) | (v == 1)).reshape(tuple(value.shape))


def _fmt(bound):
    # a one-element tensor bound prints as its number, as PyTorch's reprs do
    if isinstance(bound, ng.Tensor) and bound.numel() == 1:
        return repr(bound.item())
    return str(bound)


class _GreaterThan(Constraint):
    def __init__(self, lower_bound):
        self.lower_bound = lower_bound

    def check(self, value):
        return self.lower_bound < value

    def __repr__(self):
        return f"GreaterThan(lower_bound={_fmt(self.lower_bound)})"


class _LessThan(Constraint):
    def __init__(self, upper_bound):
        self.upper_bound = upper_bound

    def check(self, value):
        return value < self.upper_bound

    def __repr__(self):
        return f"LessThan(upper_bound={_fmt(self.upper_bound)})"


class _GreaterThanEq(_GreaterThan):
    def check(self, value):
        return self.lower_bound <= value

    def __repr__(self):
        return f"GreaterThanEq(lower_bound={_fmt(self.lower_bound)})"


class _Interval(Constraint):
    def __init__(self, lower_bound, upper_bound):
        self.lower_bound, self.upper_bound = lower_bound, upper_bound

    def check(self, value):
        return _and(self.lower_bound <= value, value <= self.upper_bound)

    def __repr__(self):
        return f"Interval(lower_bound={_fmt(self.lower_bound)}, upper_bound={_fmt(self.upper_bound)})"


class _HalfOpenInterval(_Interval):
    def check(self, value):
        return _and(self.lower_bound <= value, value < self.upper_bound)

    def __repr__(self):
        return f"HalfOpenInterval(lower_bound={_fmt(self.lower_bound)}, upper_bound={_fmt(self.upper_bound)})"


class _IntegerInterval(Constraint):
    is_discrete = True

    def __init__(self, lower_bound, upper_bound):
        self.lower_bound, self.upper_bound = lower_bound, upper_bound

    def check(self, value):
        return _and(value % 1 == 0, self.lower_bound <= value, value <= self.upper_bound)

    def __repr__(self):
        return f"IntegerInterval(lower_bound={self.lower_bound}, upper_bound={self.upper_bound})"


class _IntegerGreaterThan(Constraint):
    is_discrete = True

    def __init__(self, lower_bound):
        self.lower_bound = lower_bound

    def check(self, value):
        return _and(value % 1 == 0, value >= self.lower_bound)

    def __repr__(self):
        return f"IntegerGreaterThan(lower_bound={self.lower_bound})"


class _Simplex(Constraint):
    event_dim = 1

    def check(self, value):
        return _and(ng.all(value >= 0, dim=-1), (value.sum(-1) - 1).abs() < 1e-6)


class _LowerCholesky(Constraint):
    event_dim = 2

    def check(self, value):
        lower = (value.tril() == value).reshape(tuple(value.shape[:-2]) + (-1,)).all(-1)
        return _and(lower, (value.diagonal(dim1=-2, dim2=-1) > 0).all(-1))


class _PositiveDefinite(Constraint):
    event_dim = 2

    def check(self, value):
        sym = ((value - value.mT).abs() < 1e-6).reshape(tuple(value.shape[:-2]) + (-1,)).all(-1)
        return _and(sym, (ng.linalg.eigvalsh(value) > 0).all(-1))


class _IndependentConstraint(Constraint):
    def __init__(self, base_constraint, reinterpreted_batch_ndims):
        self.base_constraint = base_constraint
        self.reinterpreted_batch_ndims = reinterpreted_batch_ndims
        self.is_discrete = base_constraint.is_discrete
        self.event_dim = base_constraint.event_dim + reinterpreted_batch_ndims

    def check(self, value):
        result = self.base_constraint.check(value)
        n = self.reinterpreted_batch_ndims
        if n:
            result = result.reshape(tuple(result.shape[:result.ndim - n]) + (-1,)).all(-1)
        return result

    def __repr__(self):
        return f"IndependentConstraint({self.base_constraint!r}, {self.reinterpreted_batch_ndims})"


dependent = _Dependent()
real = _Real()
boolean = _Boolean()
positive = _GreaterThan(0.0)
nonnegative = _GreaterThanEq(0.0)
unit_interval = _Interval(0.0, 1.0)
simplex = _Simplex()
nonnegative_integer = _IntegerGreaterThan(0)
lower_cholesky = _LowerCholesky()
positive_definite = _PositiveDefinite()
real_vector = _IndependentConstraint(real, 1)


def greater_than(lower_bound):
    """The constraint ``value > lower_bound``."""
    return _GreaterThan(lower_bound)


def less_than(upper_bound):
    """The constraint ``value < upper_bound``."""
    return _LessThan(upper_bound)


def interval(lower_bound, upper_bound):
    """The closed interval ``[lower_bound, upper_bound]``."""
    return _Interval(lower_bound, upper_bound)


def half_open_interval(lower_bound, upper_bound):
    """The interval ``[lower_bound, upper_bound)``."""
    return _HalfOpenInterval(lower_bound, upper_bound)


def integer_interval(lower_bound, upper_bound):
    """The integers in ``[lower_bound, upper_bound]``."""
    return _IntegerInterval(lower_bound, upper_bound)


def independent(base_constraint, reinterpreted_batch_ndims):
    """``base_constraint`` with ``reinterpreted_batch_ndims`` more dimensions in one event."""
    return _IndependentConstraint(base_constraint, reinterpreted_batch_ndims)
