"""The normalization layers of mlx.nn, with its names, arguments and defaults: LayerNorm and
RMSNorm over the last axis, InstanceNorm over the spatial axes, GroupNorm over groups of
channels, and BatchNorm over the batch with running statistics."""

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


def _standardize(x, axes, eps):
    """(x - mean) / sqrt(var + eps) over ``axes``. Half-precision inputs are reduced in
    float32 (a float16 variance overflows past 65504) and the result cast back."""
    wide = x.astype(mx.float32) if x.dtype in (mx.float16, mx.bfloat16) else x
    centred = wide - mx.mean(wide, axis=axes, keepdims=True)
    variance = mx.mean(mx.square(centred), axis=axes, keepdims=True)
    return (centred * mx.rsqrt(variance + eps)).astype(x.dtype)


def _scale_and_shift(module, y):
    return y * module.weight + module.bias if "weight" in module else y


class InstanceNorm(Module):
    """Normalises each sample's channels separately over its spatial axes: an input
    (N, ..., C) is standardised over every axis but the first and last. ``affine`` adds a
    learned per-channel ``weight`` and ``bias``."""

    def __init__(self, dims: int, eps: float = 1e-5, affine: bool = False):
        super().__init__()
        _check_eps("InstanceNorm", eps)
        self.dims, self.eps = dims, eps
        if affine:
            self.weight = mx.ones((dims,))
            self.bias = mx.zeros((dims,))

    def _extra_repr(self):
        return f"{self.dims}, eps={self.eps}, affine={'weight' in self}"

    def __call__(self, x: mx.array) -> mx.array:
        if x.ndim < 3:
            raise ValueError(f"nn.InstanceNorm: the input needs spatial axes between batch "
                             f"and channels, (N, ..., C); got shape {tuple(x.shape)}")
        return _scale_and_shift(self, _standardize(x, tuple(range(1, x.ndim - 1)), self.eps))


class GroupNorm(Module):
    """Splits the ``dims`` channels of an input (N, ..., C) into ``num_groups`` groups and
    standardises each sample's group over its channels and spatial positions.

    By default channel c belongs to group c % num_groups (MLX's layout); with
    ``pytorch_compatible`` the groups are contiguous blocks, c // (dims / num_groups)."""

    def __init__(self, num_groups: int, dims: int, eps: float = 1e-5, affine: bool = True,
                 pytorch_compatible: bool = False):
        super().__init__()
        _check_eps("GroupNorm", eps)
        if num_groups <= 0 or dims <= 0 or dims % num_groups:
            raise ValueError(f"nn.GroupNorm: {dims} channels cannot form {num_groups} equal "
                             f"groups")
        self.num_groups, self.dims, self.eps = num_groups, dims, eps
        self.pytorch_compatible = pytorch_compatible
        if affine:
            self.weight = mx.ones((dims,))
            self.bias = mx.zeros((dims,))

    def _extra_repr(self):
        return (f"{self.num_groups}, {self.dims}, eps={self.eps}, affine={'weight' in self}, "
                f"pytorch_compatible={self.pytorch_compatible}")

    def __call__(self, x):
        batch, groups = x.shape[0], self.num_groups
        if self.pytorch_compatible:
            # (N, positions, group, channel-in-group): reduce positions and channel-in-group.
            grouped = mx.reshape(x, (batch, -1, groups, self.dims // groups))
            axes = (1, 3)
        else:
            # (N, positions x channel-blocks, group): the group is the fastest-varying index.
            grouped = mx.reshape(x, (batch, -1, groups))
            axes = (1,)
        y = mx.reshape(_standardize(grouped, axes, self.eps), x.shape)
        return _scale_and_shift(self, y)


class BatchNorm(Module):
    """Standardises each channel of an input (N, C), (N, L, C) or (N, H, W, C) over all the
    other axes. In training it uses the batch's statistics and, with
    ``track_running_stats``, folds them into ``running_mean`` and ``running_var`` by
    ``momentum`` (the variance unbiased); in evaluation it uses those running values."""

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float = 0.1,
                 affine: bool = True, track_running_stats: bool = True):
        super().__init__()
        _check_eps("BatchNorm", eps)
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.track_running_stats = track_running_stats
        if affine:
            self.weight = mx.ones((num_features,))
            self.bias = mx.zeros((num_features,))
        if track_running_stats:
            self.running_mean = mx.zeros((num_features,))
            self.running_var = mx.ones((num_features,))
            self.freeze(recurse=False, keys=["running_mean", "running_var"])

    def unfreeze(self, *args, **kwargs):
        # The running statistics are state, never parameters to train.
        super().unfreeze(*args, **kwargs)
        if self.track_running_stats:
            self.freeze(recurse=False, keys=["running_mean", "running_var"])
        return self

    def _extra_repr(self):
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={'weight' in self}, track_running_stats={self.track_running_stats}")

    def _batch_statistics(self, x):
        axes = tuple(range(x.ndim - 1))
        count = x.size // x.shape[-1]
        if count < 2:
            raise ValueError(f"nn.BatchNorm: training needs more than one value per channel, "
                             f"got an input of shape {tuple(x.shape)}")
        mean = mx.mean(x, axis=axes)
        variance = mx.mean(mx.square(x - mean), axis=axes)
        if self.track_running_stats:
            keep = 1 - self.momentum
            unbiased = variance * (count / (count - 1))
            self.running_mean = keep * self.running_mean + self.momentum * mean
            self.running_var = keep * self.running_var + self.momentum * unbiased
        return mean, variance

    def __call__(self, x: mx.array) -> mx.array:
        if not 2 <= x.ndim <= 4:
            raise ValueError(f"nn.BatchNorm: expects (N, C), (N, L, C) or (N, H, W, C), got "
                             f"shape {tuple(x.shape)}")
        if self.training or not self.track_running_stats:
            mean, variance = self._batch_statistics(x)
        else:
            mean, variance = self.running_mean, self.running_var
        return _scale_and_shift(self, (x - mean) * mx.rsqrt(variance + self.eps))
