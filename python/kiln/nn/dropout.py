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


class _ChannelDropout(Module):
    # Zeroes whole channels (the last axis) with probability p, the same for every position
    # of the `spatial` axes before it; MLX's Dropout2d (spatial 2) and Dropout3d (spatial 3).
    _spatial = 2

    def __init__(self, p: float = 0.5):
        super().__init__()
        if p < 0 or p >= 1:
            raise mx.Error(f"The dropout probability {p} is not in [0, 1)")
        self._p_1 = 1 - p

    def _extra_repr(self):
        return f"p={1 - self._p_1}"

    def __call__(self, x):
        dims = (self._spatial + 1, self._spatial + 2)
        if x.ndim not in dims:
            raise mx.Error(f"Received input with {x.ndim} dimensions. Expected {dims[0]} or "
                           f"{dims[1]} dimensions.")
        if self._p_1 == 1 or not self.training:
            return x
        mask_shape = list(x.shape)
        for i in range(2, self._spatial + 2):
            mask_shape[-i] = 1
        mask = mx.random.bernoulli(self._p_1, mask_shape)
        return (mask * x) * (1 / self._p_1)


class Dropout2d(_ChannelDropout):
    """Channel dropout for NHWC or HWC inputs, as mlx.nn.Dropout2d."""
    _spatial = 2


class Dropout3d(_ChannelDropout):
    """Channel dropout for NDHWC or DHWC inputs, as mlx.nn.Dropout3d."""
    _spatial = 3
