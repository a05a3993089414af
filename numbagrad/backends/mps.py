"""``torch.backends.mps``: Apple's Metal backend. numbagrad has none."""


def is_available():
    """False: numbagrad has no MPS backend."""
    return False


def is_built():
    """False: numbagrad has no MPS backend."""
    return False


__all__ = ["is_available", "is_built"]
