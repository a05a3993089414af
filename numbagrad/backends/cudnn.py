"""``torch.backends.cudnn``. numbagrad has no cuDNN: its CUDA convolutions are its own
kernels. The switches below exist so that programs which set them run; numbagrad reads
none of them (its convolutions have one algorithm each, and they are deterministic).
They keep PyTorch's defaults and whatever value is set."""

enabled = True          #: ignored by numbagrad
benchmark = False       #: ignored by numbagrad (no algorithm search to run)
deterministic = False   #: ignored by numbagrad
allow_tf32 = True       #: ignored by numbagrad (no TF32 anywhere)
benchmark_limit = 10    #: ignored by numbagrad


def is_available():
    """False: numbagrad does not use cuDNN."""
    return False


def version():
    """None: numbagrad is not linked against cuDNN."""
    return None


__all__ = ["enabled", "benchmark", "deterministic", "allow_tf32", "benchmark_limit", "is_available", "version"]
