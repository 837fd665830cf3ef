"""kiln.fast: the fused operations mlx.core.fast names (rms_norm, layer_norm, rope,
scaled_dot_product_attention), with the same names and arguments.

Kiln has no hand-written kernels for them: each is a short graph of ordinary ops, which compile
fuses and which differentiate and vmap like any other graph. Statistics, angles and softmax
are taken in float32 whatever the input's precision, then the result is cast back.
``metal_kernel`` and ``cuda_kernel`` raise: Kiln runs neither kind of source.
"""

import math

from . import _kiln as _k
from ._composites import broadcast_shapes as _broadcast_shapes
from ._composites import finfo as _finfo

_F32 = _k.float32


def _floating(dtype):
    return dtype in (_k.float16, _k.bfloat16, _k.float32, _k.float64)


def _wide(x):
    """``x`` in at least float32, where sums of squares and angles keep their precision."""
    return x if x.dtype in (_F32, _k.float64) else x.astype(_F32)


def _check_feature_param(param, x, name, fn):
    """weight and bias are vectors as long as the last axis they scale."""
    if param is None:
        return
    if param.ndim != 1 or param.shape[0] != x.shape[-1]:
        raise ValueError(f"[{fn}] {name} of shape {tuple(param.shape)} does not match the "
                         f"last axis of an input of shape {tuple(x.shape)}.")


def _result_dtype(x):
    # Integer inputs are normalised as float32; floating inputs keep their type.
    return x.dtype if _floating(x.dtype) else _F32


def rms_norm(x, weight, eps, *, stream=None):
    """``x / sqrt(mean(x**2) + eps)`` over the last axis, times ``weight`` when given."""
    x = _k.asarray(x)
    if weight is not None:
        weight = _k.asarray(weight)
    _check_feature_param(weight, x, "weight", "rms_norm")
    wide = _wide(x)
    mean_square = _k.mean(wide * wide, -1, keepdims=True)
    out = (wide * _k.rsqrt(mean_square + eps)).astype(_result_dtype(x))
    return out if weight is None else out * weight


def layer_norm(x, weight, bias, eps, *, stream=None):
    """``(x - mean) / sqrt(var + eps)`` over the last axis, then ``* weight + bias`` for the
    ones given."""
    x = _k.asarray(x)
    weight = None if weight is None else _k.asarray(weight)
    bias = None if bias is None else _k.asarray(bias)
    _check_feature_param(weight, x, "weight", "layer_norm")
    _check_feature_param(bias, x, "bias", "layer_norm")
    wide = _wide(x)
    centred = wide - _k.mean(wide, -1, keepdims=True)
    variance = _k.mean(centred * centred, -1, keepdims=True)
    out = (centred * _k.rsqrt(variance + eps)).astype(_result_dtype(x))
    if weight is not None:
        out = out * weight
    if bias is not None:
        out = out + bias
    return out


# ---- rope ----------------------------------------------------------------------------------

def _check_rope(a, dims, freqs):
    if not _floating(a.dtype):
        raise ValueError(f"[rope] needs a floating-point input, got {a.dtype}.")
    if a.ndim < 2:
        raise ValueError("[rope] needs an input of at least 2 dimensions (..., sequence, "
                         "features).")
    if dims <= 0 or dims % 2 or dims > a.shape[-1]:
        raise ValueError(f"[rope] dims must be even, positive and at most the feature size "
                         f"{a.shape[-1]}; got {dims}.")
    if freqs is not None and (freqs.ndim != 1 or freqs.shape[0] != dims // 2):
        raise ValueError(f"[rope] freqs must be a vector of dims / 2 = {dims // 2} "
                         f"frequencies, got shape {tuple(freqs.shape)}.")


def _inverse_wavelengths(dims, base, freqs):
    """Radians per position for each rotated pair: base^(-2i/dims), or 1/freqs."""
    if freqs is not None:
        return 1.0 / freqs.astype(_F32)
    half = dims // 2
    exponents = _k.arange(0, half, dtype=_F32) * (-math.log(base) / half)
    return _k.exp(exponents)


def _positions(a, offset, scale):
    """Each row's position times ``scale``, shaped to broadcast against (..., seq, 1).
    An offset with one entry per batch element shifts that element's rows."""
    seq = a.shape[-2]
    steps = _k.arange(0, seq, dtype=_F32)
    offset = offset if isinstance(offset, _k.array) else _k.array(offset)
    offset = offset.astype(_F32)
    if offset.size == 1:
        return ((_k.reshape(offset, ()) + steps) * scale)[:, None]
    if offset.ndim != 1 or offset.shape[0] != a.shape[0]:
        raise ValueError(f"[rope] an offset array needs one entry per batch element "
                         f"({a.shape[0]}), got shape {tuple(offset.shape)}.")
    per_batch = _k.reshape(offset, [a.shape[0]] + [1] * (a.ndim - 2))
    return ((per_batch + steps) * scale)[..., None]


def _rotate(x1, x2, cos, sin):
    return x1 * cos - x2 * sin, x1 * sin + x2 * cos


def rope(a, dims, *, traditional, base, scale, offset, freqs=None, stream=None):
    """Rotary position embedding of the first ``dims`` features of ``a`` (..., seq, features):
    feature pairs turn by position * scale * a frequency per pair. ``traditional`` pairs
    neighbours (0,1), (2,3), ...; otherwise feature i pairs with i + dims/2."""
    a = _k.asarray(a)
    freqs = None if freqs is None else _k.asarray(freqs)
    _check_rope(a, dims, freqs)
    angles = _positions(a, offset, scale) * _inverse_wavelengths(dims, base, freqs)
    cos, sin = _k.cos(angles), _k.sin(angles)
    head = _wide(a[..., :dims])
    half = dims // 2
    if traditional:
        pairs = _k.reshape(head, list(head.shape[:-1]) + [half, 2])
        r1, r2 = _rotate(pairs[..., 0], pairs[..., 1], cos, sin)
        turned = _k.reshape(_k.stack([r1, r2], -1), list(r1.shape[:-1]) + [dims])
    else:
        r1, r2 = _rotate(head[..., :half], head[..., half:], cos, sin)
        turned = _k.concatenate([r1, r2], -1)
    turned = turned.astype(a.dtype)
    if dims == a.shape[-1]:
        return turned
    return _k.concatenate([turned, a[..., dims:]], -1)


# ---- attention -----------------------------------------------------------------------------

def _check_attention(q, k, v):
    if q.ndim != 4 or k.ndim != 4 or v.ndim != 4:
        raise ValueError("[scaled_dot_product_attention] q, k and v must be 4-D "
                         "(batch, heads, sequence, features).")
    if k.shape[1] != v.shape[1] or k.shape[2] != v.shape[2]:
        raise ValueError("[scaled_dot_product_attention] k and v need the same heads and "
                         "sequence length.")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError("[scaled_dot_product_attention] q and k need the same feature size.")
    if q.shape[1] % k.shape[1]:
        raise ValueError(f"[scaled_dot_product_attention] {q.shape[1]} query heads cannot be "
                         f"shared evenly among {k.shape[1]} key/value heads.")


def _check_sinks(sinks, q):
    """One logit per query head, in a type no wider than q's (the result keeps q's type)."""
    widths = {_k.float16: 16, _k.bfloat16: 16, _F32: 32, _k.float64: 64}
    if sinks.ndim != 1 or sinks.shape[0] != q.shape[1]:
        raise ValueError(f"[scaled_dot_product_attention] sinks need one logit per query "
                         f"head ({q.shape[1]}), got shape {tuple(sinks.shape)}.")
    if widths.get(sinks.dtype, 99) > widths.get(q.dtype, 0):
        raise ValueError(f"[scaled_dot_product_attention] sinks of {sinks.dtype} would widen "
                         f"queries of {q.dtype}.")


def _causal(q_len, k_len):
    """Query row i (the last q_len of k_len positions) sees keys up to its own position."""
    rows = _k.arange(k_len - q_len, k_len)[:, None]
    return rows >= _k.arange(0, k_len)[None, :]


def _apply_mask(scores, mask):
    """Scores (B, Hq, L, S) in float32 with ``mask`` applied: a boolean mask (or "causal")
    keeps where True, an additive one is added."""
    if mask is None:
        return scores
    if isinstance(mask, str):
        if mask != "causal":
            raise ValueError(f"[scaled_dot_product_attention] unknown mask '{mask}'.")
        mask = _causal(scores.shape[-2], scores.shape[-1])
    mask = _k.asarray(mask)
    try:
        _broadcast_shapes(tuple(mask.shape), tuple(scores.shape))
    except Exception:
        raise ValueError(f"[scaled_dot_product_attention] a mask of shape {tuple(mask.shape)} "
                         f"does not broadcast to the scores' {tuple(scores.shape)}.") from None
    if mask.dtype == _k.bool_:
        # The most negative finite value, not -inf, so a fully masked row stays finite.
        return _k.where(mask, scores, _finfo(_F32).min)
    return scores + mask.astype(_F32)


def _softmax_with_sinks(scores, sinks):
    """Softmax over the last axis where each head's ``sinks`` logit also competes for the
    mass but has no value: it only adds to the denominator."""
    if sinks is None:
        return _k.softmax(scores, -1)
    sink = _k.reshape(sinks.astype(_F32), (1, -1, 1, 1))
    top = _k.maximum(_k.max(scores, -1, keepdims=True), sink)
    weights = _k.exp(scores - top)
    return weights / (_k.sum(weights, -1, keepdims=True) + _k.exp(sink - top))


def scaled_dot_product_attention(q, k, v, *, scale, mask=None, sinks=None, stream=None):
    """``softmax(q @ k^T * scale + mask) @ v`` for q (B, Hq, L, D) and k, v (B, Hk, S, ·).
    With fewer key/value heads than query heads, each serves Hq / Hk consecutive query
    heads."""
    q, k, v = _k.asarray(q), _k.asarray(k), _k.asarray(v)
    _check_attention(q, k, v)
    if sinks is not None:
        sinks = _k.asarray(sinks)
        _check_sinks(sinks, q)
    batch, q_heads, q_len, depth = q.shape
    kv_heads, k_len = k.shape[1], k.shape[2]
    # Consecutive query heads share a key/value head, so the group's queries stack as one
    # longer sequence of that head: a plain matmul, no copies of k or v.
    grouped = _k.reshape(q * scale, (batch, kv_heads, -1, depth))
    scores = _k.matmul(grouped, _k.swapaxes(k, -1, -2))
    scores = _k.reshape(scores, (batch, q_heads, q_len, k_len)).astype(_F32)
    probs = _softmax_with_sinks(_apply_mask(scores, mask), sinks).astype(v.dtype)
    out = _k.matmul(_k.reshape(probs, (batch, kv_heads, -1, k_len)), v)
    return _k.reshape(out, (batch, q_heads, q_len, v.shape[-1]))


def metal_kernel(*args, **kwargs):
    raise _k.Error("fast.metal_kernel: Kiln runs no Metal source (its GPUs are OpenCL and "
                   "Vulkan devices)")


def cuda_kernel(*args, **kwargs):
    raise _k.Error("fast.cuda_kernel: Kiln runs no CUDA source (its GPUs are OpenCL and "
                   "Vulkan devices)")
