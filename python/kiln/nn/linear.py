"""Linear and Identity layers, as mlx.nn's.

Linear stores its weight as (output_dims, input_dims), MLX's and PyTorch's layout, so weight
files and code that reads ``layer.weight`` carry over; the forward pass multiplies by its
transpose.
"""

import math

import kiln as mx

from .module import Module


class Identity(Module):
    """Returns its input (accepts and ignores any constructor arguments)."""

    def __init__(self, *args, **kwargs):
        super().__init__()

    def __call__(self, x):
        return x


class Linear(Module):
    """y = x W^T + b with W of shape (output_dims, input_dims) and b (output_dims), both drawn
    from U(-1/sqrt(input_dims), 1/sqrt(input_dims))."""

    def __init__(self, input_dims: int, output_dims: int, bias: bool = True):
        super().__init__()
        if input_dims <= 0 or output_dims <= 0:
            raise mx.Error(f"nn.Linear: sizes must be positive, got input_dims={input_dims}, "
                           f"output_dims={output_dims}")
        scale = math.sqrt(1.0 / input_dims)
        self.weight = mx.random.uniform(-scale, scale, (output_dims, input_dims))
        if bias:
            self.bias = mx.random.uniform(-scale, scale, (output_dims,))

    def _extra_repr(self):
        out, inp = self.weight.shape
        return f"input_dims={inp}, output_dims={out}, bias={'bias' in self}"

    def __call__(self, x):
        y = mx.matmul(x, self.weight.T)
        return y + self.bias if "bias" in self else y


class Bilinear(Module):
    """y = x1^T W x2 + b per output: W of shape (output_dims, input1_dims, input2_dims)."""

    def __init__(self, input1_dims: int, input2_dims: int, output_dims: int, bias: bool = True):
        super().__init__()
        scale = math.sqrt(1.0 / input1_dims)
        self.weight = mx.random.uniform(-scale, scale, (output_dims, input2_dims, input1_dims))
        if bias:
            self.bias = mx.random.uniform(-scale, scale, (output_dims,))

    def __call__(self, x1, x2):
        out, in2, in1 = self.weight.shape
        lead = x1.shape[:-1]
        x1 = x1.reshape(-1, in1)
        x2 = x2.reshape(-1, 1, in2)
        w = self.weight.reshape(out * in2, in1)
        y = mx.matmul(x1, w.T).reshape(-1, out, in2)   # (N, out, in2)
        y = mx.matmul(y, x2.swapaxes(-1, -2)).squeeze(-1)  # (N, out)
        if "bias" in self:
            y = y + self.bias
        return y.reshape(*lead, out)
