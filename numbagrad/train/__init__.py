"""``numbagrad.train``: a training loop with callbacks, history and observation.

* :class:`Trainer` (``trainer.py``): ``fit`` / ``evaluate`` / ``predict``, gradient
  accumulation, clipping, autocast and ``GradScaler``, LR schedules per epoch or step,
  metrics, exact save/resume (``save`` / ``load`` / ``fit(resume_from=...)``),
  ``record`` / ``observe``; :class:`StopTraining` ends ``fit`` cleanly from anywhere.
* Callbacks (``callbacks.py``): :class:`EarlyStopping`, :class:`ModelCheckpoint`,
  :class:`CSVLogger`, :class:`TensorBoardLogger` (``tensorboardX``, an optional extra),
  :class:`ProgressBar`, :class:`LearningRateMonitor`, :class:`TerminateOnNaN`,
  :class:`LambdaCallback`, :class:`GradientMonitor`.
* :class:`History` (``history.py``): per-epoch and per-step series, ``to_dict`` /
  ``to_csv`` / ``plot``.

Example
-------
>>> import numbagrad as ng
>>> from numbagrad import nn, optim
>>> from numbagrad.train import Trainer
>>> model = nn.Linear(4, 3)
>>> data = [(ng.randn(8, 4), ng.randint(0, 3, (8,))) for _ in range(4)]
>>> trainer = Trainer(model, optim.SGD(model.parameters(), lr=0.1), nn.CrossEntropyLoss(),
...                   max_epochs=2, metrics=["accuracy"], progress=False)
>>> sorted(trainer.fit(data, val_data=data).keys())
['accuracy', 'loss', 'val_accuracy', 'val_loss']
"""
from .trainer import Trainer, StopTraining
from .callbacks import (Callback, EarlyStopping, ModelCheckpoint, CSVLogger, TensorBoardLogger, ProgressBar,
                        LearningRateMonitor, TerminateOnNaN, LambdaCallback, GradientMonitor)
from .history import History

__all__ = ["Trainer", "StopTraining", "History", "Callback", "EarlyStopping", "ModelCheckpoint", "CSVLogger",
           "TensorBoardLogger", "ProgressBar", "LearningRateMonitor", "TerminateOnNaN", "LambdaCallback",
           "GradientMonitor"]
