"""Recurrent modules: ``RNN``, ``LSTM``, ``GRU`` and their single-step cells
(``torch.nn.RNN`` & co.: the same constructor arguments, parameter names, shapes,
initialisation and return values, so ``state_dict()`` s are interchangeable with PyTorch's).

Parameters per layer ``k`` and direction (suffix ``_reverse`` for the backward one):
``weight_ih_l{k}`` ``(G*H, in)``, ``weight_hh_l{k}`` ``(G*H, H)``, ``bias_ih_l{k}``,
``bias_hh_l{k}`` ``(G*H,)`` with G = 4 (LSTM, gates i, f, g, o), 3 (GRU, gates r, z, n)
or 1 (RNN), all drawn from U(-1/sqrt(H), 1/sqrt(H)). The sequence work is in
:mod:`numbagrad.ops.rnn`: each layer and direction is one autograd node over the whole
sequence (one GEMM for the input projection, a Python time loop of one GEMM plus one
fused cell kernel per step). LSTM ``proj_size > 0`` adds ``weight_hr_l{k}``
``(proj_size, H)`` after the biases, and ``weight_hh_l{k}`` becomes ``(4H, proj_size)``.
"""
import math
import numbers
import warnings

from .. import _autocast_state
from ..ops import rnn as _F
from . import init
from .module import Module, _changed_options
from .parameter import empty_parameter, factory_dtype, reset_and_place

__all__ = ["RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell"]

_GATES = {"LSTM": 4, "GRU": 3, "RNN_TANH": 1, "RNN_RELU": 1}


def _autocast_on(input):
    """Whether an autocast region for ``input``'s device is open: then the LSTM and RNN
    sequence ops cast input and weights to one dtype themselves (``ops/_autocast.py``)."""
    return _autocast_state.is_autocast_enabled(input.device.type)


class RNNBase(Module):
    """Base of :class:`RNN`, :class:`LSTM` and :class:`GRU` (``torch.nn.RNNBase``)."""

    def __init__(self, mode, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, proj_size=0, device=None, dtype=None):
        super().__init__()
        if mode not in _GATES:
            raise ValueError("Unrecognized RNN mode: " + str(mode))
        if not isinstance(dropout, numbers.Number) or isinstance(dropout, bool) or not 0 <= dropout <= 1:
            raise ValueError("dropout should be a number in range [0, 1] representing the probability of an "
                             "element being zeroed")
        if dropout > 0 and num_layers == 1:
            warnings.warn("dropout option adds dropout after all but last recurrent layer, so non-zero "
                          "dropout expects num_layers greater than 1, but got dropout={dropout} and "
                          f"num_layers={num_layers}", stacklevel=2)
        if not isinstance(bias, bool):
            raise TypeError(f"bias should be of type bool, got: {type(bias).__name__}")
        if not isinstance(batch_first, bool):
            raise TypeError(f"batch_first should be of type bool, got: {type(batch_first).__name__}")
        if not isinstance(input_size, int):
            raise TypeError(f"input_size should be of type int, got: {type(input_size).__name__}")
        if input_size <= 0:
            raise ValueError("input_size must be greater than zero")
        if not isinstance(hidden_size, int):
            raise TypeError(f"hidden_size should be of type int, got: {type(hidden_size).__name__}")
        if hidden_size <= 0:
            raise ValueError("hidden_size must be greater than zero")
        if num_layers <= 0:
            raise ValueError("num_layers must be greater than zero")
        if proj_size < 0:
            raise ValueError("proj_size should be a positive integer or zero to disable projections")
        if proj_size >= hidden_size:
            raise ValueError("proj_size has to be smaller than hidden_size")
        if proj_size > 0 and mode != "LSTM":
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        dt = factory_dtype(device, dtype)
        self.mode = mode
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.bias = bias
        self.batch_first = batch_first
        self.dropout = float(dropout)
        self.bidirectional = bidirectional
        self.proj_size = proj_size
        D = 2 if bidirectional else 1
        gate = _GATES[mode] * hidden_size
        self._flat_weights_names = []
        self._all_weights = []
        real_hidden = proj_size if proj_size > 0 else hidden_size
        for layer in range(num_layers):
            for d in range(D):
                n_in = input_size if layer == 0 else real_hidden * D
                sfx = "_reverse" if d == 1 else ""
                names = [f"weight_ih_l{layer}{sfx}", f"weight_hh_l{layer}{sfx}"]
                shapes = [(gate, n_in), (gate, real_hidden)]
                if bias:
                    names += [f"bias_ih_l{layer}{sfx}", f"bias_hh_l{layer}{sfx}"]
                    shapes += [(gate,), (gate,)]
                if proj_size > 0:
                    names.append(f"weight_hr_l{layer}{sfx}")
                    shapes.append((proj_size, hidden_size))
                for name, shape in zip(names, shapes):
                    setattr(self, name, empty_parameter(self, shape, dt))
                self._flat_weights_names.extend(names)
                self._all_weights.append(names)
        reset_and_place(self, device)

    @property
    def _flat_weights(self):
        return [getattr(self, n) for n in self._flat_weights_names]

    @property
    def all_weights(self):
        """The parameters per layer and direction, ``[[w_ih, w_hh, b_ih, b_hh], ...]``."""
        return [[getattr(self, n) for n in names] for names in self._all_weights]

    def flatten_parameters(self):
        """A no-op (PyTorch compacts cuDNN weights here; numbagrad needs no such layout)."""

    def reset_parameters(self):
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for w in self.parameters():
            init.uniform_(w, -stdv, stdv)

    # ---- forward ---------------------------------------------------------------------------------
    def _prepare(self, input, hx, n_states):
        """Validate; unbatched inputs get a batch axis. Returns (input, hx tuple, batched)."""
        name = {"LSTM": "LSTM", "GRU": "GRU"}.get(self.mode, "RNN")
        if input.ndim not in (2, 3):
            raise ValueError(f"{name}: Expected input to be 2D or 3D, got {input.ndim}D tensor instead "
                             f"(input {tuple(input.shape)} {input.dtype})")
        w0 = self._parameters[self._flat_weights_names[0]]
        if input.dtype != w0.dtype and not (self.mode != "GRU" and _autocast_on(input)):
            raise ValueError(f"RNN input dtype ({input.dtype}) does not match weight dtype ({w0.dtype}). "
                             f"Convert input: input.to({w0.dtype}), or convert model: "
                             f"model.to({input.dtype})")
        if input.shape[-1] != self.input_size:
            raise RuntimeError(f"{name}: input.size(-1) must be equal to input_size. Expected "
                               f"{self.input_size}, got {input.shape[-1]} (input {tuple(input.shape)} "
                               f"{input.dtype})")
        batched = input.ndim == 3
        hs = (None,) * n_states if hx is None else ((hx,) if n_states == 1 else tuple(hx))
        if len(hs) != n_states:
            raise RuntimeError(f"{name}: expected hx to be a tuple of {n_states} tensors, got {len(hs)}")
        want = 3 if batched else 2
        for h in hs:
            if h is not None and h.ndim != want:
                kind = "batched 3-D" if batched else "unbatched 2-D"
                raise RuntimeError(f"For {kind} input, hx should also be {want}-D but got {h.ndim}-D tensor")
        if not batched:
            input = input.unsqueeze(0 if self.batch_first else 1)
            hs = tuple(None if h is None else h.unsqueeze(1) for h in hs)
        B = input.shape[0 if self.batch_first else 1]
        D = 2 if self.bidirectional else 1
        for i, h in enumerate(hs):
            size = self.proj_size if (i == 0 and self.proj_size > 0) else self.hidden_size
            expected = (self.num_layers * D, B, size)
            if h is not None and tuple(h.shape) != expected:
                what = "hidden size" if n_states == 1 else f"hidden[{i}] size"
                raise RuntimeError(f"Expected {what} {expected}, got {list(h.shape)}")
        return input, hs, batched

    def _finish(self, out, h, batched):
        if not batched:
            out = out.squeeze(0 if self.batch_first else 1)
            h = h.squeeze(1)
        return out, h

    def forward(self, input, hx=None):
        input, hs, batched = self._prepare(input, hx, 1)
        fn = {"GRU": _F.gru, "RNN_TANH": _F.rnn_tanh, "RNN_RELU": _F.rnn_relu}[self.mode]
        out, h = fn(input, hs[0], self._flat_weights, self.bias, self.num_layers, self.dropout, self.training,
                    self.bidirectional, self.batch_first)
        return self._finish(out, h, batched)

    def extra_repr(self):
        return f"{self.input_size}, {self.hidden_size}" + _changed_options(
            self, (("proj_size", 0), ("num_layers", 1), ("bias", True), ("batch_first", False), ("dropout", 0),
                   ("bidirectional", False)))


class RNN(RNNBase):
    """Elman RNN ``h_t = tanh(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh)`` (``torch.nn.RNN``);
    ``nonlinearity='relu'`` uses relu.

    ``RNN(input_size, hidden_size, num_layers=1, nonlinearity='tanh', bias=True,
    batch_first=False, dropout=0.0, bidirectional=False, device=None, dtype=None)``;
    ``forward(input, hx=None) -> (output, h_n)``.
    """

    def __init__(self, *args, **kwargs):
        if "proj_size" in kwargs:
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        if len(args) > 3:
            self_nl = args[3]
            args = args[:3] + args[4:]
        else:
            self_nl = kwargs.pop("nonlinearity", "tanh")
        if self_nl == "tanh":
            mode = "RNN_TANH"
        elif self_nl == "relu":
            mode = "RNN_RELU"
        else:
            raise ValueError(f"Unknown nonlinearity '{self_nl}'. Select from 'tanh' or 'relu'.")
        super().__init__(mode, *args, **kwargs)
        self.nonlinearity = self_nl


class GRU(RNNBase):
    """Gated recurrent unit (``torch.nn.GRU``): gates r, z, n,
    ``n = tanh(W_in x + b_in + r * (W_hn h + b_hn))``, ``h' = (1 - z) n + z h``.

    ``forward(input, hx=None) -> (output, h_n)``.
    """

    def __init__(self, *args, **kwargs):
        if "proj_size" in kwargs:
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        super().__init__("GRU", *args, **kwargs)


class LSTM(RNNBase):
    """Long short-term memory (``torch.nn.LSTM``): gates i, f, g, o,
    ``c' = f c + i g``, ``h' = o tanh(c')`` (``h' = (o tanh(c')) W_hr^T`` with
    ``proj_size > 0``).

    ``forward(input, hx=None) -> (output, (h_n, c_n))`` with ``hx = (h_0, c_0)``.
    """

    def __init__(self, *args, **kwargs):
        super().__init__("LSTM", *args, **kwargs)

    def forward(self, input, hx=None):
        input, hs, batched = self._prepare(input, hx, 2)
        out, h, c = _F.lstm(input, hs, self._flat_weights, self.bias, self.num_layers, self.dropout,
                            self.training, self.bidirectional, self.batch_first)
        out, h = self._finish(out, h, batched)
        if not batched:
            c = c.squeeze(1)
        return out, (h, c)


# ---- cells ------------------------------------------------------------------------------------------
class RNNCellBase(Module):
    """Base of the single-step cells (``torch.nn.RNNCellBase``): ``weight_ih``
    ``(chunks*H, in)``, ``weight_hh`` ``(chunks*H, H)``, ``bias_ih``/``bias_hh``
    ``(chunks*H,)``, all U(-1/sqrt(H), 1/sqrt(H))."""

    def __init__(self, input_size, hidden_size, bias, num_chunks, device=None, dtype=None):
        super().__init__()
        dt = factory_dtype(device, dtype)
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.bias = bias
        self.weight_ih = empty_parameter(self, (num_chunks * hidden_size, input_size), dt)
        self.weight_hh = empty_parameter(self, (num_chunks * hidden_size, hidden_size), dt)
        if bias:
            self.bias_ih = empty_parameter(self, (num_chunks * hidden_size,), dt)
            self.bias_hh = empty_parameter(self, (num_chunks * hidden_size,), dt)
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        reset_and_place(self, device)

    def reset_parameters(self):
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for w in self.parameters():
            init.uniform_(w, -stdv, stdv)

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        nl = self.__dict__.get("nonlinearity")
        if nl is not None and nl != "tanh":
            s += f", nonlinearity={nl}"
        return s

    def _check(self, name, input, hx):
        if input.ndim not in (1, 2):
            raise ValueError(f"{name}: Expected input to be 1D or 2D, got {input.ndim}D instead "
                             f"(input {tuple(input.shape)} {input.dtype})")
        for h in hx:
            if h is not None and h.ndim not in (1, 2):
                raise ValueError(f"{name}: Expected hidden to be 1D or 2D, got {h.ndim}D instead")


class RNNCell(RNNCellBase):
    """One Elman step (``torch.nn.RNNCell``): ``RNNCell(input_size, hidden_size, bias=True,
    nonlinearity='tanh', device=None, dtype=None)``; ``forward(input, hx=None) -> h'``."""

    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, num_chunks=1, device=device, dtype=dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input, hx=None):
        self._check("RNNCell", input, (hx,))
        p = self._parameters
        if self.nonlinearity == "tanh":
            fn = _F.rnn_tanh_cell
        elif self.nonlinearity == "relu":
            fn = _F.rnn_relu_cell
        else:
            raise RuntimeError(f"Unknown nonlinearity: {self.nonlinearity}")
        return fn(input, hx, p["weight_ih"], p["weight_hh"], p["bias_ih"], p["bias_hh"])


class LSTMCell(RNNCellBase):
    """One LSTM step (``torch.nn.LSTMCell``); ``forward(input, hx=None) -> (h', c')`` with
    ``hx = (h, c)``."""

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, num_chunks=4, device=device, dtype=dtype)

    def forward(self, input, hx=None):
        self._check("LSTMCell", input, hx if hx is not None else ())
        p = self._parameters
        return _F.lstm_cell(input, hx, p["weight_ih"], p["weight_hh"], p["bias_ih"], p["bias_hh"])


class GRUCell(RNNCellBase):
    """One GRU step (``torch.nn.GRUCell``); ``forward(input, hx=None) -> h'``."""

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, num_chunks=3, device=device, dtype=dtype)

    def forward(self, input, hx=None):
        self._check("GRUCell", input, (hx,))
        p = self._parameters
        return _F.gru_cell(input, hx, p["weight_ih"], p["weight_hh"], p["bias_ih"], p["bias_hh"])
