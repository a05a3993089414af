"""``torch.backends.cuda``: whether numbagrad's CUDA backend is built (numba-cuda
importable), and PyTorch's matmul precision switches, which numbagrad keeps but ignores
(its CUDA GEMM never uses TF32, and float16 products accumulate in float32:
``kernels/cuda/matmul.py``)."""


class _MatmulFlags:
    """``torch.backends.cuda.matmul``: settable flags with PyTorch's defaults, ignored by
    numbagrad."""

    def __init__(self):
        self.allow_tf32 = False
        self.allow_fp16_reduced_precision_reduction = True
        self.allow_bf16_reduced_precision_reduction = True

    def __repr__(self):
        return (f"matmul(allow_tf32={self.allow_tf32}, allow_fp16_reduced_precision_reduction="
                f"{self.allow_fp16_reduced_precision_reduction}, allow_bf16_reduced_precision_reduction="
                f"{self.allow_bf16_reduced_precision_reduction})")


matmul = _MatmulFlags()


def is_built():
    """True when numba's CUDA target (numba-cuda) is importable, so numbagrad can build its
    CUDA backend. A GPU is another question: :func:`numbagrad.cuda.is_available`."""
    from ..backend import cuda as _cb
    return _cb._load() is not None


__all__ = ["matmul", "is_built"]
