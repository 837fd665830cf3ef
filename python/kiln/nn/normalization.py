"""LayerNorm and RMSNorm over the last axis, as mlx.nn's."""

import kiln as mx

from .module import Module


def _check_eps(name, eps):
    # eps is what keeps rsqrt finite for a constant row; 0 or less gives inf or NaN.
    if not eps > 0:
        raise mx.Error(f"nn.{name}: eps must be positive, got {eps}")


class LayerNorm(Module):
    """(x - mean) / sqrt(var + eps) over the last axis, then ``weight`` and ``bias`` (learned,
    of shape (dims,)) when ``affine``."""

    def __init__(self, dims: int, eps: float = 1e-5, affine: bool = True, bias: bool = True):
        super().__init__()
        _check_eps("LayerNorm", eps)
        self.dims, self.eps = dims, eps
        if affine:
            self.weight = mx.ones((dims,))
            if bias:
                self.bias = mx.zeros((dims,))

    def _extra_repr(self):
        return f"{self.dims}, eps={self.eps}, affine={'weight' in self}"

    def __call__(self, x):
        mean = mx.mean(x, axis=-1, keepdims=True)
        var = mx.var(x, axis=-1, keepdims=True)
        y = (x - mean) * mx.rsqrt(var + self.eps)
        if "weight" in self:
            y = y * self.weight
        if "bias" in self:
            y = y + self.bias
        return y


class RMSNorm(Module):
    """x / sqrt(mean(x^2) + eps) over the last axis, times a learned ``weight`` (dims,)."""

    def __init__(self, dims: int, eps: float = 1e-5):
        super().__init__()
        _check_eps("RMSNorm", eps)
        self.eps = eps
        self.weight = mx.ones((dims,))

    def _extra_repr(self):
        return f"{self.weight.shape[0]}, eps={self.eps}"

    def __call__(self, x):
        return x * mx.rsqrt(mx.mean(mx.square(x), axis=-1, keepdims=True) + self.eps) * self.weight
