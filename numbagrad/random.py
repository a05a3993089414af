"""Seeded random state: ``manual_seed``, ``Generator``, ``get_rng_state``/``set_rng_state``.

numbagrad's default generator feeds the creation functions (``rand``, ``randn``,
``randint``...), weight initialisation and dropout; ``manual_seed`` makes a run
reproducible. Dropout draws a 64-bit seed from it for its @njit kernel, so the mask
depends only on the generator state, not on the numba thread count.
"""
import numpy as np


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
        return self.numpy_rng.bit_generator.state

    def set_state(self, state):
        self.numpy_rng.bit_generator.state = state

    def next_seed(self):
        """A fresh 63-bit seed for a kernel's own RNG (dropout)."""
        return int(self.numpy_rng.integers(0, 1 << 63))


default_generator = Generator()


def manual_seed(seed):
    """Seed numbagrad's default generator (and return it), as ``torch.manual_seed``."""
    return default_generator.manual_seed(seed)


def seed():
    return default_generator.seed()


def initial_seed():
    return default_generator.initial_seed()


def get_rng_state():
    return default_generator.get_state()


def set_rng_state(state):
    default_generator.set_state(state)
