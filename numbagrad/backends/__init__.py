"""``torch.backends``: what numbagrad runs on, reported truthfully, and PyTorch's backend
switches.

Programs set ``torch.backends.cudnn.benchmark = True`` or
``torch.backends.cuda.matmul.allow_tf32 = True`` at the top. Those attributes exist and keep
the value set, but numbagrad ignores them: it has no cuDNN, and its GEMMs never use TF32 or
reduced-precision reductions. The ``is_available()`` / ``is_built()`` functions answer for
numbagrad (MKL: whether numbagrad's own GEMMs are bound to MKL; CUDA: whether numba-cuda is
importable), not for whatever torch would report.
"""
from . import cpu, cuda, cudnn, mkl, mps, openmp  # noqa: F401

__all__ = ["cpu", "cuda", "cudnn", "mkl", "mps", "openmp"]
