"""``python -m numbagrad``: the default training job (an MLP, or ``--model cnn``, on the
bundled digits, trained through :class:`numbagrad.train.Trainer`); see
:mod:`numbagrad.examples.train_digits` for its flags."""
from .examples.train_digits import main

if __name__ == "__main__":
    main()
