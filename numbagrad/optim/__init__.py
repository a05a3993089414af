"""Optimizers (``torch.optim``): each update is one fused kernel per parameter group over
a flat parameter/gradient/state arena (see :mod:`numbagrad.optim.optimizer`); LR
schedulers (:mod:`.lr_scheduler`), step functions (:mod:`.schedules`) and weight
averaging (:mod:`.swa_utils`)."""
from .optimizer import Optimizer  # noqa: F401
from .sgd import SGD  # noqa: F401
from .adam import Adam, AdamW  # noqa: F401
from .adamax import Adamax  # noqa: F401
from .radam import RAdam  # noqa: F401
from .nadam import NAdam  # noqa: F401
from .rmsprop import RMSprop  # noqa: F401
from .adagrad import Adagrad  # noqa: F401
from .adadelta import Adadelta  # noqa: F401
from .lamb import Lamb  # noqa: F401
from .lion import Lion  # noqa: F401
from .lbfgs import LBFGS  # noqa: F401
from . import lr_scheduler, schedules, swa_utils  # noqa: F401,E402
