"""Max and average pooling over 1, 2 or 3 spatial axes, with mlx.nn's names, arguments and
defaults: channels-last inputs (N, *spatial, C), ``stride`` defaulting to the kernel size,
``padding`` added on both sides of each spatial axis (-inf, or the integer minimum, for max
pooling; zeros, which count in the average, for average pooling).

Kiln has no strided window view (as_strided), so a pool is a running reduction over the
kernel's offsets: for each offset, the strided slice of the input holding that element of
every window is folded into the result (maximum or sum). A k x k pool is k*k slices.
"""

import itertools
import math
from typing import Optional, Tuple, Union

import kiln as mx

from .module import Module


def _per_axis(value, count, what, cls):
    """An int or a tuple of ``count`` ints, as a tuple."""
    if isinstance(value, int):
        return (value,) * count
    value = tuple(value)
    if len(value) != count or not all(isinstance(v, int) for v in value):
        raise ValueError(f"nn.{cls}: {what} must be an int or {count} ints, got {value}")
    return value


def _is_float(dtype):
    return dtype in (mx.float16, mx.bfloat16, mx.float32, mx.float64)


def _lowest(dtype):
    """The pad value no element beats in a maximum."""
    return -math.inf if _is_float(dtype) else mx.iinfo(dtype).min


class _Pool(Module):
    """The shared machinery; subclasses fix the number of spatial axes and the reduction."""

    spatial = 1

    def __init__(self, kernel_size, stride, padding):
        super().__init__()
        name = type(self).__name__
        self._kernel_size = _per_axis(kernel_size, self.spatial, "kernel_size", name)
        self._stride = _per_axis(kernel_size if stride is None else stride, self.spatial,
                                 "stride", name)
        self._padding = _per_axis(padding or 0, self.spatial, "padding", name)
        if min(self._kernel_size) < 1 or min(self._stride) < 1 or min(self._padding) < 0:
            raise ValueError(f"nn.{name}: kernel_size and stride must be positive and "
                             f"padding non-negative")

    def _extra_repr(self):
        return (f"kernel_size={self._kernel_size}, stride={self._stride}, "
                f"padding={self._padding}")

    # What subclasses provide: the pad value, and how to fold one slice into the result.
    def _pad_value(self, dtype):
        raise NotImplementedError

    def _fold(self, acc, piece):
        raise NotImplementedError

    def _finish(self, acc):
        return acc

    def _prepare(self, x):
        return x

    def _output_extents(self, x):
        name = type(self).__name__
        if x.ndim != self.spatial + 2:
            raise ValueError(f"nn.{name}: expects (N, {self.spatial} spatial axes, C), got "
                             f"shape {tuple(x.shape)}")
        extents = []
        for size, k, s, p in zip(x.shape[1:-1], self._kernel_size, self._stride,
                                 self._padding):
            n = (size + 2 * p - k) // s + 1
            if n < 1:
                raise ValueError(f"nn.{name}: a kernel of {k} does not fit an axis of {size} "
                                 f"(padded by {p})")
            extents.append(n)
        return extents

    def __call__(self, x):
        extents = self._output_extents(x)
        x = self._prepare(x)
        if any(self._padding):
            widths = [(0, 0)] + [(p, p) for p in self._padding] + [(0, 0)]
            x = mx.pad(x, widths, constant_values=self._pad_value(x.dtype))
        acc = None
        for offsets in itertools.product(*(range(k) for k in self._kernel_size)):
            # Element `offsets` of every window: start there, step by the stride.
            index = [slice(None)]
            for o, s, n in zip(offsets, self._stride, extents):
                index.append(slice(o, o + s * (n - 1) + 1, s))
            piece = x[tuple(index)]
            acc = piece if acc is None else self._fold(acc, piece)
        return self._finish(acc)


class _MaxPool(_Pool):
    def _pad_value(self, dtype):
        return _lowest(dtype)

    def _fold(self, acc, piece):
        return mx.maximum(acc, piece)


class _AvgPool(_Pool):
    def _prepare(self, x):
        # Averages of integers are fractions.
        return x if _is_float(x.dtype) else x.astype(mx.float32)

    def _pad_value(self, dtype):
        return 0

    def _fold(self, acc, piece):
        return acc + piece

    def _finish(self, acc):
        return acc / math.prod(self._kernel_size)


_Size1 = Union[int, Tuple[int]]
_Size2 = Union[int, Tuple[int, int]]
_Size3 = Union[int, Tuple[int, int, int]]


class MaxPool1d(_MaxPool):
    """Maximum over windows of (N, L, C) inputs."""

    spatial = 1

    def __init__(self, kernel_size: _Size1, stride: Optional[_Size1] = None,
                 padding: _Size1 = 0):
        super().__init__(kernel_size, stride, padding)


class AvgPool1d(_AvgPool):
    """Mean over windows of (N, L, C) inputs."""

    spatial = 1

    def __init__(self, kernel_size: _Size1, stride: Optional[_Size1] = None,
                 padding: _Size1 = 0):
        super().__init__(kernel_size, stride, padding)


class MaxPool2d(_MaxPool):
    """Maximum over windows of (N, H, W, C) inputs."""

    spatial = 2

    def __init__(self, kernel_size: _Size2, stride: Optional[_Size2] = None,
                 padding: Optional[_Size2] = 0):
        super().__init__(kernel_size, stride, padding)


class AvgPool2d(_AvgPool):
    """Mean over windows of (N, H, W, C) inputs."""

    spatial = 2

    def __init__(self, kernel_size: _Size2, stride: Optional[_Size2] = None,
                 padding: Optional[_Size2] = 0):
        super().__init__(kernel_size, stride, padding)


class MaxPool3d(_MaxPool):
    """Maximum over windows of (N, D, H, W, C) inputs."""

    spatial = 3

    def __init__(self, kernel_size: _Size3, stride: Optional[_Size3] = None,
                 padding: Optional[_Size3] = 0):
        super().__init__(kernel_size, stride, padding)


class AvgPool3d(_AvgPool):
    """Mean over windows of (N, D, H, W, C) inputs."""

    spatial = 3

    def __init__(self, kernel_size: _Size3, stride: Optional[_Size3] = None,
                 padding: Optional[_Size3] = 0):
        super().__init__(kernel_size, stride, padding)
