"""``torch.nn.modules.activation``: numbagrad.nn's classes at PyTorch's path (see :mod:`._mirror`)."""
from ._mirror import mirror

__all__ = mirror(globals(), "Threshold ReLU RReLU Hardtanh ReLU6 Sigmoid Hardsigmoid Tanh SiLU Mish Hardswish "
                            "ELU CELU SELU GLU GELU Hardshrink LeakyReLU LogSigmoid Softplus Softshrink "
                            "MultiheadAttention PReLU Softsign Tanhshrink Softmin Softmax Softmax2d LogSoftmax")
