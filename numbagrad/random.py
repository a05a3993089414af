"""Seeded random state: ``manual_seed``, ``Generator``, ``get_rng_state``/``set_rng_state``.

numbagrad's default generator feeds the creation functions (``rand``, ``randn``,
``randint``...), weight initialisation, shuffling (``RandomSampler``, ``random_split``),
``rrelu`` and dropout; ``manual_seed`` makes a run reproducible. Dropout (and attention
dropout) draws a 64-bit seed from it for its @njit / CUDA kernel, whose counter-based
hash holds no state of its own, so the mask depends only on the generator state, not on
the numba thread count. The default generator is therefore numbagrad's whole global
random state: ``get_rng_state()`` / ``set_rng_state()`` save and restore all of it, which
is what an exact resume of training needs (besides the states of any ``generator=``
objects, e.g. a ``DataLoader``'s, which ``DataLoader.state_dict()`` includes).

A state is NumPy's PCG64 state as plain Python types (a fresh deep copy)::

    {"bit_generator": "PCG64", "state": {"state": int, "inc": int},
     "has_uint32": int, "uinteger": int}

(the two 128-bit integers are Python ints), so it can be written by ``numbagrad.save``.
``torch.get_rng_state()`` returns a ``ByteTensor`` instead; code that only passes the
state back (``set_rng_state(get_rng_state())``) works unchanged.
"""
import copy
import numbers

import numpy as np

_STATE_KEYS = ("bit_generator", "state", "has_uint32", "uinteger")
_PCG64_KEYS = ("state", "inc")


def _as_int(value, where, who, lo, hi):
    """``value`` as a Python int in ``[lo, hi)``; a TypeError/ValueError naming ``where``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{who}: {where} must be an int, got {type(value).__name__} {value!r}")
    v = int(value)
    if not lo <= v < hi:
        raise ValueError(f"{who}: {where} must be in [{lo}, {hi}), got {v}")
    return v


def _check_keys(d, expected, what, who):
    missing = [k for k in expected if k not in d]
    unknown = [k for k in d if k not in expected]
    if missing or unknown:
        raise ValueError(f"{who}: {what} is not a PCG64 generator state: it must have exactly the keys "
                         f"{list(expected)}; " + ", ".join(([f"missing {missing}"] if missing else [])
                                                           + ([f"unknown {unknown}"] if unknown else [])))


def _check_state(state, who):
    """Validate a PCG64 state (as :meth:`Generator.get_state` returns) and return it as a
    fresh dict of plain Python types; raise a TypeError/ValueError saying what is wrong."""
    if not isinstance(state, dict):
        raise TypeError(f"{who}: state must be a dict as returned by get_state() / get_rng_state(), "
                        f"got {type(state).__name__}")
    _check_keys(state, _STATE_KEYS, "state", who)
    bg = state["bit_generator"]
    if bg != "PCG64":
        raise ValueError(f"{who}: state['bit_generator'] is {bg!r}, but numbagrad generators are PCG64; "
                         "pass a state from numbagrad.get_rng_state() or Generator.get_state()")
    inner = state["state"]
    if not isinstance(inner, dict):
        raise TypeError(f"{who}: state['state'] must be a dict with the keys {list(_PCG64_KEYS)}, "
                        f"got {type(inner).__name__}")
    _check_keys(inner, _PCG64_KEYS, "state['state']", who)
    return {"bit_generator": "PCG64",
            "state": {k: _as_int(inner[k], f"state['state'][{k!r}]", who, 0, 1 << 128) for k in _PCG64_KEYS},
            "has_uint32": _as_int(state["has_uint32"], "state['has_uint32']", who, 0, 2),
            "uinteger": _as_int(state["uinteger"], "state['uinteger']", who, 0, 1 << 32)}


class Generator:
    """A random stream (``torch.Generator``) backed by NumPy's PCG64."""

    def __init__(self, device="cpu"):
        self.device = device
        self._seed = 0
        self.numpy_rng = np.random.default_rng(0)

    def manual_seed(self, seed):
        self._seed = int(seed)
        self.numpy_rng = np.random.default_rng(self._seed)
        return self

    def initial_seed(self):
        return self._seed

    def seed(self):
        s = int(np.random.SeedSequence().entropy % (1 << 63))
        self.manual_seed(s)
        return s

    def get_state(self):
        """The PCG64 state as a fresh dict of plain Python types (see the module docstring)."""
        return copy.deepcopy(self.numpy_rng.bit_generator.state)

    def set_state(self, state):
        """Restore a state from :meth:`get_state`. Raises ``TypeError``/``ValueError`` naming
        the bad entry (e.g. a state of another bit generator, or a missing key); the
        generator is unchanged then. Returns ``self`` (as ``torch.Generator.set_state``)."""
        self.numpy_rng.bit_generator.state = _check_state(state, "Generator.set_state")
        return self

    def next_seed(self):
        """A fresh 63-bit seed for a kernel's own RNG (dropout)."""
        return int(self.numpy_rng.integers(0, 1 << 63))


default_generator = Generator()


def manual_seed(seed):
    """Seed numbagrad's default generator (and return it), as ``torch.manual_seed``."""
    return default_generator.manual_seed(seed)


def seed():
    """Seed the default generator with a non-deterministic random number, and return that seed."""
    return default_generator.seed()


def initial_seed():
    """The seed the default generator was last seeded with."""
    return default_generator.initial_seed()


def get_rng_state():
    """The default generator's state: all of numbagrad's global random state (a fresh
    dict of plain types, see the module docstring)."""
    return default_generator.get_state()


def set_rng_state(state):
    """Restore the default generator from :func:`get_rng_state`'s state; ``TypeError`` /
    ``ValueError`` naming the bad entry, the generator unchanged, if ``state`` is not one."""
    default_generator.numpy_rng.bit_generator.state = _check_state(state, "numbagrad.set_rng_state")
