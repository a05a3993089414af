"""Optimizers (``torch.optim``): each update is one fused kernel per parameter group over
a flat parameter/gradient/state arena (see :mod:`numbagrad.optim.optimizer`)."""
from .optimizer import Optimizer  # noqa: F401
from .sgd import SGD  # noqa: F401
from .adam import Adam, AdamW  # noqa: F401
