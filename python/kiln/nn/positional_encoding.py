"""Positional encodings with mlx.nn's names, arguments and defaults: RoPE (rotary, over
kiln.fast.rope), SinusoidalPositionalEncoding and ALiBi (linear attention biases)."""

import math
from typing import Optional

import kiln as mx

from .module import Module


class RoPE(Module):
    """Rotary positional encoding of the first ``dims`` features of (..., sequence, features)
    inputs; see kiln.fast.rope for ``traditional``, ``base`` and ``scale``. The call's
    ``offset`` is the position of the first row (a key/value cache's length)."""

    def __init__(self, dims: int, traditional: bool = False, base: float = 10000,
                 scale: float = 1.0):
        super().__init__()
        self.dims, self.traditional, self.base, self.scale = dims, traditional, base, scale

    def _extra_repr(self):
        return f"{self.dims}, traditional={self.traditional}"

    def __call__(self, x, offset: int = 0):
        return mx.fast.rope(x, self.dims, traditional=self.traditional, base=self.base,
                            scale=self.scale, offset=offset)


class SinusoidalPositionalEncoding(Module):
    """Encodes positions (an array of any shape) as ``dims`` features: the sines, then the
    cosines (``cos_first`` swaps them), of position times dims / 2 frequencies spaced
    evenly in log scale from ``max_freq`` down to ``min_freq``, all times ``scale``
    (sqrt(2 / dims) by default, which gives each encoding unit length). ``full_turns``
    measures the frequencies in turns rather than radians (multiplies them by 2 pi)."""

    def __init__(self, dims: int, min_freq: float = 0.0001, max_freq: float = 1,
                 scale: Optional[float] = None, cos_first: bool = False,
                 full_turns: bool = False):
        super().__init__()
        if dims <= 0 or dims % 2:
            raise ValueError(f"nn.SinusoidalPositionalEncoding: dims must be even and "
                             f"positive, got {dims}")
        self.dims = dims
        self.scale = math.sqrt(2 / dims) if scale is None else scale
        self.cos_first = cos_first
        self._frequencies = self._spaced(dims // 2, min_freq, max_freq, full_turns)

    @staticmethod
    def _spaced(count, low, high, full_turns):
        # From high down to low, evenly in log; one frequency is the highest.
        step = (math.log(high) - math.log(low)) / max(count - 1, 1)
        logs = math.log(high) - mx.arange(count, dtype=mx.float32) * step
        freqs = mx.exp(logs)
        return freqs * (2 * math.pi) if full_turns else freqs

    def __call__(self, x):
        if x.dtype not in (mx.float16, mx.bfloat16, mx.float32, mx.float64):
            x = x.astype(mx.float32)  # integer positions would promote to float64
        angles = mx.expand_dims(x, -1) * self._frequencies
        waves = [mx.sin(angles), mx.cos(angles)]
        if self.cos_first:
            waves.reverse()
        return mx.concatenate(waves, axis=-1) * self.scale


class ALiBi(Module):
    """Attention with linear biases: adds -slope(head) * |query position - key position| to
    (batch, heads, queries, keys) attention scores, so each head attends less the further a
    key is, at its own rate. ``offset`` is the first query's position; ``mask`` (additive)
    is added as well."""

    @staticmethod
    def create_alibi_slope(num_heads, dtype):
        """Head h's slope, 2^(-8 (h + 1) / num_heads): a geometric series from 2^(-8/H)
        down to 2^-8, shaped (heads, 1, 1)."""
        heads = mx.arange(1, num_heads + 1, dtype=mx.float32)
        slopes = mx.power(mx.array(2.0), -8.0 * heads / num_heads)
        return mx.reshape(slopes, (num_heads, 1, 1)).astype(dtype)

    @staticmethod
    def create_alibi_matrix(q_sequence_length: int, k_sequence_length: int, num_heads: int,
                            offset: int, dtype=mx.float32):
        """The (1, heads, queries, keys) bias for queries at positions offset, offset + 1, ..."""
        queries = mx.arange(offset, offset + q_sequence_length, dtype=mx.float32)
        keys = mx.arange(k_sequence_length, dtype=mx.float32)
        distance = mx.abs(queries[:, None] - keys[None, :])
        bias = -distance * ALiBi.create_alibi_slope(num_heads, mx.float32)
        return mx.expand_dims(bias, 0).astype(dtype)

    def __call__(self, attention_scores, offset=0, mask=None):
        _, heads, q_len, k_len = attention_scores.shape
        bias = self.create_alibi_matrix(q_len, k_len, heads, offset, attention_scores.dtype)
        if mask is not None:
            bias = bias + mask
        return (attention_scores + bias).astype(attention_scores.dtype)
