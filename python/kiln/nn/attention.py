"""Multi-head scaled dot-product attention, as mlx.nn.MultiHeadAttention."""

import math

import kiln as mx

from .linear import Linear
from .module import Module


# Finite in each dtype (float16 cannot hold -1e9, and 0 * -inf would be NaN).
_LARGE_NEGATIVE = {"float16": -6e4, "bfloat16": -1e9, "float32": -1e9, "float64": -1e9}


class MultiHeadAttention(Module):
    """Projects queries, keys and values to ``dims`` (values to ``value_dims``), splits them
    into ``num_heads`` heads, attends with softmax(q k^T / sqrt(head dims) + mask), and
    projects the joined heads to ``value_output_dims``. The mask is added to the scores (an
    additive mask) or, if boolean, keeps the scores where it is True."""

    def __init__(self, dims: int, num_heads: int, query_input_dims=None, key_input_dims=None,
                 value_input_dims=None, value_dims=None, value_output_dims=None,
                 bias: bool = False):
        super().__init__()
        if dims % num_heads != 0:
            raise mx.Error(f"nn.MultiHeadAttention: dims ({dims}) must be divisible by "
                           f"num_heads ({num_heads})")
        query_input_dims = query_input_dims or dims
        key_input_dims = key_input_dims or dims
        value_input_dims = value_input_dims or key_input_dims
        value_dims = value_dims or dims
        value_output_dims = value_output_dims or dims
        self.num_heads = num_heads
        self.query_proj = Linear(query_input_dims, dims, bias=bias)
        self.key_proj = Linear(key_input_dims, dims, bias=bias)
        self.value_proj = Linear(value_input_dims, value_dims, bias=bias)
        self.out_proj = Linear(value_dims, value_output_dims, bias=bias)

    def _heads(self, x):
        # (B, L, D) -> (B, heads, L, D / heads)
        *lead, length, dims = x.shape
        x = x.reshape(*lead, length, self.num_heads, dims // self.num_heads)
        return mx.swapaxes(x, -2, -3)

    def __call__(self, queries, keys, values, mask=None):
        q = self._heads(self.query_proj(queries))
        k = self._heads(self.key_proj(keys))
        v = self._heads(self.value_proj(values))
        scale = 1 / math.sqrt(q.shape[-1])
        scores = mx.matmul(q * scale, mx.swapaxes(k, -1, -2))
        if mask is not None:
            if mask.dtype == mx.bool_:
                scores = mx.where(mask, scores, -math.inf)
            else:
                scores = scores + mask.astype(scores.dtype)
        out = mx.matmul(mx.softmax(scores, axis=-1), v)
        out = mx.swapaxes(out, -2, -3)
        return self.out_proj(out.reshape(*out.shape[:-2], -1))

    @staticmethod
    def create_additive_causal_mask(N: int, dtype=None):
        """An (N, N) mask that is 0 on and below the diagonal and a large negative value above
        it (position i attends to positions <= i)."""
        dtype = dtype or mx.float32
        idx = mx.arange(N)
        above = mx.less(mx.expand_dims(idx, 1), mx.expand_dims(idx, 0))
        return mx.where(above, _LARGE_NEGATIVE.get(dtype.name, -1e9), 0).astype(dtype)
