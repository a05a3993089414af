"""``torch.nn.modules.rnn``: numbagrad.nn's classes at PyTorch's path (see :mod:`._mirror`)."""
from ._mirror import mirror

__all__ = mirror(globals(), "RNNBase RNN LSTM GRU RNNCellBase RNNCell LSTMCell GRUCell")
