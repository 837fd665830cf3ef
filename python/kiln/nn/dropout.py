"""Dropout: zeroes elements with probability p while training, as mlx.nn.Dropout."""

import kiln as mx

from .module import Module


class Dropout(Module):
    """In training mode keeps each element with probability 1 - p and scales the kept ones by
    1 / (1 - p); in eval mode returns its input. Draws from kiln.random's global key, so list
    ``kiln.random.state`` in a compiled step's captured state to get new masks each call."""

    def __init__(self, p: float = 0.5):
        super().__init__()
        if not 0 <= p < 1:
            raise mx.Error(f"nn.Dropout: p must be in [0, 1), got {p}")
        self.p = p

    def _extra_repr(self):
        return f"p={self.p}"

    def __call__(self, x):
        if not self.training or self.p == 0:
            return x
        keep = 1 - self.p
        mask = mx.random.bernoulli(keep, x.shape)
        return mx.where(mask, x * (1 / keep), 0).astype(x.dtype)
