"""Upsample with mlx.nn's names, arguments and defaults: nearest, linear and cubic resizing
of channels-last inputs (N, *spatial, C) by a scale factor per spatial axis, with
``align_corners`` and ``antialias`` meaning what they mean in PyTorch's interpolate.

Resizing is separable, one spatial axis after another. Nearest picks source rows with a
gather (exact for any dtype). Linear and cubic build, on the host, the (out, in) matrix of
interpolation weights for the axis and apply it as a matmul along that axis: one code path
for plain and antialiased resizing, which differ only in the weights.
"""

import math
from typing import Literal, Tuple, Union

import kiln as mx

from .module import Module

_MODES = ("nearest", "linear", "cubic")


# ---- where each output sample reads from ---------------------------------------------------

def _source_position(dst, n_in, n_out, scale, align_corners):
    """The input coordinate output sample ``dst`` is centred on."""
    if align_corners:
        # The first and last samples of input and output coincide.
        return dst * (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
    # Sample centres (i + 0.5) scale by 1 / scale.
    return (dst + 0.5) / scale - 0.5


def _input_step(n_in, n_out, scale, align_corners):
    """Input samples per output sample: how far apart consecutive outputs read."""
    if align_corners:
        return (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
    return 1.0 / scale


# ---- interpolation kernels -----------------------------------------------------------------

def _triangle(t):
    return max(0.0, 1.0 - abs(t))


def _keys_cubic(a):
    """Keys' cubic convolution kernel with parameter ``a`` (-0.75 plain, -0.5 antialiased,
    as PyTorch uses)."""
    def kernel(t):
        t = abs(t)
        if t <= 1:
            return ((a + 2) * t - (a + 3)) * t * t + 1
        if t < 2:
            return ((a * t - 5 * a) * t + 8 * a) * t - 4 * a
        return 0.0
    return kernel


# ---- one axis's weight matrix --------------------------------------------------------------

def _linear_row(src, n_in):
    # Negative positions read the first sample (the edge is held, not extrapolated).
    src = max(src, 0.0)
    left = min(int(math.floor(src)), n_in - 1)
    right = min(left + 1, n_in - 1)
    if right == left:  # past the last sample: hold it
        return {left: 1.0}
    frac = src - left
    return {left: 1.0 - frac, right: frac}


def _cubic_row(src, n_in):
    kernel = _keys_cubic(-0.75)
    base = int(math.floor(src))
    frac = src - base
    row = {}
    for tap in range(-1, 3):
        # Taps past the edges read the edge sample.
        j = min(max(base + tap, 0), n_in - 1)
        row[j] = row.get(j, 0.0) + kernel(tap - frac)
    return row


def _antialiased_row(dst, n_in, step, kernel, radius):
    """Weights of the kernel stretched to cover ``step`` input samples when shrinking
    (so every input sample contributes), normalised to sum to 1."""
    stretch = max(step, 1.0)
    centre = step * (dst + 0.5)
    support = radius * stretch
    lo = max(int(centre - support + 0.5), 0)
    hi = min(int(centre + support + 0.5), n_in)
    row = {j: kernel((j - centre + 0.5) / stretch) for j in range(lo, hi)}
    total = sum(row.values())
    return {j: w / total for j, w in row.items()} if total else row


def _weights(n_in, n_out, scale, mode, align_corners, antialias):
    """The (n_out, n_in) interpolation matrix of one axis, as nested lists."""
    rows = []
    step = _input_step(n_in, n_out, scale, align_corners)
    for dst in range(n_out):
        if antialias:
            kernel, radius = ((_triangle, 1.0) if mode == "linear"
                              else (_keys_cubic(-0.5), 2.0))
            row = _antialiased_row(dst, n_in, step, kernel, radius)
        else:
            src = _source_position(dst, n_in, n_out, scale, align_corners)
            row = _linear_row(src, n_in) if mode == "linear" else _cubic_row(src, n_in)
        dense = [0.0] * n_in
        for j, w in row.items():
            dense[j] += w
        rows.append(dense)
    return rows


# ---- resizing ------------------------------------------------------------------------------

def _output_sizes(x, scale_factor):
    spatial = x.ndim - 2
    if len(scale_factor) != spatial:
        raise ValueError(f"nn.Upsample: {len(scale_factor)} scale factors for an input with "
                         f"{spatial} spatial axes, shape {tuple(x.shape)}")
    return [int(math.floor(n * s)) for n, s in zip(x.shape[1:-1], scale_factor)]


def _along_axis(x, axis, matrix):
    """Applies ``matrix`` (out, in) to axis ``axis`` of x."""
    moved = mx.moveaxis(x, axis, -1)
    return mx.moveaxis(mx.matmul(moved, matrix.T), -1, axis)


def upsample_nearest(x: mx.array, scale_factor: Tuple):
    """Each output sample copies the input sample floor(dst / scale) along every axis."""
    for axis, (n_out, scale) in enumerate(zip(_output_sizes(x, scale_factor), scale_factor),
                                          start=1):
        n_in = x.shape[axis]
        picks = [min(int(math.floor(dst / scale)), n_in - 1) for dst in range(n_out)]
        x = mx.take(x, mx.array(picks, dtype=mx.int32), axis=axis)
    return x


def _interpolate(x, scale_factor, mode, align_corners, antialias):
    out_dtype = x.dtype if x.dtype in (mx.float16, mx.bfloat16, mx.float64) else mx.float32
    y = x.astype(mx.float64 if x.dtype == mx.float64 else mx.float32)
    for axis, (n_out, scale) in enumerate(zip(_output_sizes(x, scale_factor), scale_factor),
                                          start=1):
        n_in = y.shape[axis]
        # Antialiasing only changes anything when shrinking, except cubic's kernel shape.
        smooth = antialias and (scale < 1 or mode == "cubic")
        matrix = mx.array(_weights(n_in, n_out, scale, mode, align_corners, smooth),
                          dtype=y.dtype)
        y = _along_axis(y, axis, matrix)
    return y.astype(out_dtype)


def upsample_linear(x: mx.array, scale_factor: Tuple, align_corners: bool = False,
                    antialias: bool = False):
    """Linear interpolation along every spatial axis (bilinear for 2, trilinear for 3)."""
    return _interpolate(x, scale_factor, "linear", align_corners, antialias)


def upsample_cubic(x: mx.array, scale_factor: Tuple, align_corners: bool = False,
                   antialias: bool = False):
    """Cubic convolution along every spatial axis (bicubic for 2)."""
    return _interpolate(x, scale_factor, "cubic", align_corners, antialias)


class Upsample(Module):
    """Resizes (N, *spatial, C) inputs by ``scale_factor`` (one for all spatial axes, or
    one each); the output extent of an axis is floor(extent * factor). ``mode`` is
    "nearest", "linear" or "cubic"; ``align_corners`` maps the first and last samples onto
    each other instead of the sample centres (linear and cubic); ``antialias`` widens the
    interpolation kernel when shrinking so every input sample contributes (linear and
    cubic)."""

    def __init__(self, scale_factor: Union[float, Tuple],
                 mode: Literal["nearest", "linear", "cubic"] = "nearest",
                 align_corners: bool = False, antialias: bool = False):
        super().__init__()
        if mode not in _MODES:
            raise ValueError(f"nn.Upsample: mode must be one of {_MODES}, got {mode!r}")
        if antialias and mode == "nearest":
            raise ValueError("nn.Upsample: antialias applies to 'linear' and 'cubic' modes")
        if isinstance(scale_factor, (list, tuple)):
            self.scale_factor = tuple(float(s) for s in scale_factor)
        else:
            self.scale_factor = float(scale_factor)
        self.mode, self.align_corners, self.antialias = mode, align_corners, antialias

    def _extra_repr(self) -> str:
        text = (f"scale_factor={self.scale_factor}, mode={self.mode!r}, "
                f"align_corners={self.align_corners}")
        return text + (", antialias=True" if self.antialias else "")

    def __call__(self, x: mx.array) -> mx.array:
        factors = self.scale_factor
        if not isinstance(factors, tuple):
            factors = (factors,) * (x.ndim - 2)
        if self.mode == "nearest":
            return upsample_nearest(x, factors)
        return _interpolate(x, factors, self.mode, self.align_corners, self.antialias)
