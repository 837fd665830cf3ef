"""Recurrent layers with mlx.nn's names, arguments, defaults and parameter names: RNN, GRU
and LSTM over (batch, sequence, features) or unbatched (sequence, features) inputs.

Each layer projects the whole input sequence at once (one matmul), then steps through time
with only the hidden-state matmul inside the loop; the per-step states are stacked on the
sequence axis. Weights start uniform in +-1/sqrt(hidden_size).
"""

import math
from typing import Callable, Optional

import kiln as mx

from .module import Module


def _uniform(shape, hidden_size):
    bound = 1.0 / math.sqrt(hidden_size)
    return mx.random.uniform(-bound, bound, shape)


def _steps(projected):
    """The per-time-step slices of a (..., sequence, features) array."""
    return [projected[..., t, :] for t in range(projected.shape[-2])]


def _stack_time(states):
    return mx.stack(states, axis=-2)


def _split(a, parts):
    return mx.split(a, parts, axis=-1)


class RNN(Module):
    """Elman RNN: h_t = nonlinearity(x_t Wxh^T + h_{t-1} Whh^T + bias), tanh by default.
    Returns every step's hidden state, (..., sequence, hidden_size)."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True,
                 nonlinearity: Optional[Callable] = None):
        super().__init__()
        if nonlinearity is not None and not callable(nonlinearity):
            raise ValueError(f"nn.RNN: nonlinearity must be callable, got {nonlinearity!r}")
        self.input_size, self.hidden_size = input_size, hidden_size
        self.nonlinearity = nonlinearity or mx.tanh
        self.Wxh = _uniform((hidden_size, input_size), hidden_size)
        self.Whh = _uniform((hidden_size, hidden_size), hidden_size)
        if bias:
            self.bias = _uniform((hidden_size,), hidden_size)

    def _extra_repr(self):
        return (f"input_size={self.input_size}, hidden_size={self.hidden_size}, "
                f"nonlinearity={getattr(self.nonlinearity, '__name__', self.nonlinearity)}, "
                f"bias={'bias' in self}")

    def __call__(self, x, hidden=None):
        projected = x @ self.Wxh.T
        if "bias" in self:
            projected = projected + self.bias
        states = []
        for step in _steps(projected):
            pre = step if hidden is None else step + hidden @ self.Whh.T
            hidden = self.nonlinearity(pre)
            states.append(hidden)
        return _stack_time(states)


class GRU(Module):
    """Gated recurrent unit. With r (reset), z (update) and n (candidate) gates:
    r, z = sigmoid(x Wx_{r,z} + b_{r,z} + h Wh_{r,z}), n = tanh(x Wx_n + b_n + r * (h Wh_n +
    bhn)), h' = (1 - z) * n + z * h. ``Wx``, ``Wh`` and ``b`` hold the three gates stacked
    in the order r, z, n. Returns every step's hidden state."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True):
        super().__init__()
        self.input_size, self.hidden_size = input_size, hidden_size
        self.Wx = _uniform((3 * hidden_size, input_size), hidden_size)
        self.Wh = _uniform((3 * hidden_size, hidden_size), hidden_size)
        if bias:
            self.b = _uniform((3 * hidden_size,), hidden_size)
            self.bhn = _uniform((hidden_size,), hidden_size)

    def _extra_repr(self):
        return (f"input_size={self.input_size}, hidden_size={self.hidden_size}, "
                f"bias={'b' in self}")

    def _step(self, x_gates, hidden):
        x_r, x_z, x_n = _split(x_gates, 3)
        if hidden is None:
            # A zero state: its matmul is zero, only bhn reaches the candidate.
            h_r = h_z = h_n = None
        else:
            h_r, h_z, h_n = _split(hidden @ self.Wh.T, 3)
        reset = mx.sigmoid(x_r if h_r is None else x_r + h_r)
        update = mx.sigmoid(x_z if h_z is None else x_z + h_z)
        recalled = h_n
        if "bhn" in self:
            recalled = self.bhn if recalled is None else recalled + self.bhn
        candidate = mx.tanh(x_n if recalled is None else x_n + reset * recalled)
        if hidden is None:
            return (1 - update) * candidate
        return (1 - update) * candidate + update * hidden

    def __call__(self, x, hidden=None):
        projected = x @ self.Wx.T
        if "b" in self:
            projected = projected + self.b
        states = []
        for step in _steps(projected):
            hidden = self._step(step, hidden)
            states.append(hidden)
        return _stack_time(states)


class LSTM(Module):
    """Long short-term memory. Gates i (input), f (forget), g (cell candidate), o (output),
    stacked in that order in ``Wx``, ``Wh`` and ``bias``: c' = sigmoid(f) * c +
    sigmoid(i) * tanh(g), h' = sigmoid(o) * tanh(c'). Returns (hidden states, cell states),
    each (..., sequence, hidden_size)."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True):
        super().__init__()
        self.input_size, self.hidden_size = input_size, hidden_size
        self.Wx = _uniform((4 * hidden_size, input_size), hidden_size)
        self.Wh = _uniform((4 * hidden_size, hidden_size), hidden_size)
        if bias:
            self.bias = _uniform((4 * hidden_size,), hidden_size)

    def _extra_repr(self):
        return (f"input_size={self.input_size}, hidden_size={self.hidden_size}, "
                f"bias={'bias' in self}")

    def __call__(self, x, hidden=None, cell=None):
        projected = x @ self.Wx.T
        if "bias" in self:
            projected = projected + self.bias
        hiddens, cells = [], []
        for step in _steps(projected):
            gates = step if hidden is None else step + hidden @ self.Wh.T
            i, f, g, o = _split(gates, 4)
            fresh = mx.sigmoid(i) * mx.tanh(g)
            cell = fresh if cell is None else mx.sigmoid(f) * cell + fresh
            hidden = mx.sigmoid(o) * mx.tanh(cell)
            hiddens.append(hidden)
            cells.append(cell)
        return _stack_time(hiddens), _stack_time(cells)
