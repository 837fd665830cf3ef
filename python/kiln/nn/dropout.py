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
    """Drops whole channels: one keep-or-drop draw per sample and channel, shared by every
    spatial position, for channels-last inputs with ``spatial`` spatial axes, batched or
    not. Neighbouring positions of a feature map are correlated, so dropping them one by one
    regularises little; dropping the channel does."""

    spatial = 0

    def __init__(self, p: float = 0.5):
        super().__init__()
        if not 0 <= p < 1:
            raise ValueError(f"nn.{type(self).__name__}: p must be in [0, 1), got {p}")
        self.p = p

    def _extra_repr(self):
        return f"p={self.p}"

    def __call__(self, x):
        if x.ndim not in (self.spatial + 1, self.spatial + 2):
            raise ValueError(f"nn.{type(self).__name__}: expects (N, {self.spatial} spatial "
                             f"axes, C) or no N, got shape {tuple(x.shape)}")
        if not self.training or self.p == 0:
            return x
        keep = 1 - self.p
        # The mask's spatial axes have extent 1 and broadcast over the feature map.
        mask_shape = list(x.shape)
        for axis in range(x.ndim - 1 - self.spatial, x.ndim - 1):
            mask_shape[axis] = 1
        mask = mx.random.bernoulli(keep, mask_shape)
        return mx.where(mask, x * (1 / keep), 0).astype(x.dtype)


class Dropout2d(_ChannelDropout):
    """Channel dropout for (N, H, W, C) or (H, W, C) inputs."""

    spatial = 2


class Dropout3d(_ChannelDropout):
    """Channel dropout for (N, D, H, W, C) or (D, H, W, C) inputs."""

    spatial = 3
