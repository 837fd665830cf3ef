"""mlx.core.fast with MLX's names and arguments: rms_norm, layer_norm, rope and
scaled_dot_product_attention, written as compositions of Kiln's ops.

MLX has hand-written kernels for these; here they are ordinary lazy graphs, which Kiln's compile
fuses, and which differentiate, vmap and compile like any other ops (results agree with MLX's
reference formulas; the statistics are taken in float32 as MLX's kernels take them).
``metal_kernel`` and ``cuda_kernel`` raise: Kiln runs neither kind of source.
"""

import math

from . import _kiln as _k
from ._composites import broadcast_shapes as _broadcast_shapes
from ._composites import finfo as _finfo


def _is_float(dtype):
    return dtype.name.startswith(("float", "bfloat"))


def rms_norm(x, weight, eps, *, stream=None):
    """x / sqrt(mean(x^2) + eps) over the last axis (in float32), times ``weight`` (or not,
    for ``weight=None``), in x's dtype."""
    x = _k.asarray(x)
    if weight is not None and (weight.ndim != 1 or weight.shape[0] != x.shape[-1]):
        raise _k.Error(f"[rms_norm] weight must have shape ({x.shape[-1]},), got "
                       f"{tuple(weight.shape)}")
    dtype = x.dtype if _is_float(x.dtype) else _k.float32
    y = x.astype(_k.float32)
    y = _k.multiply(y, _k.rsqrt(_k.add(_k.mean(_k.multiply(y, y), -1, True), eps)))
    if weight is None:
        return y.astype(dtype)
    return _k.multiply(weight, y.astype(weight.dtype), stream=stream).astype(
        _k.add(_k.zeros((), dtype), _k.zeros((), weight.dtype)).dtype)


def layer_norm(x, weight, bias, eps, *, stream=None):
    """(x - mean) / sqrt(var + eps) over the last axis (in float32), then ``weight`` and
    ``bias`` where given."""
    x = _k.asarray(x)
    for name, p in (("weight", weight), ("bias", bias)):
        if p is not None and (p.ndim != 1 or p.shape[0] != x.shape[-1]):
            raise _k.Error(f"[layer_norm] {name} must have shape ({x.shape[-1]},), got "
                           f"{tuple(p.shape)}")
    dtype = x.dtype if _is_float(x.dtype) else _k.float32
    y = x.astype(_k.float32)
    mean = _k.mean(y, -1, True)
    var = _k.var(y, -1, True)
    y = _k.multiply(_k.subtract(y, mean), _k.rsqrt(_k.add(var, eps))).astype(dtype)
    if weight is not None:
        y = _k.multiply(y, weight)
    if bias is not None:
        y = _k.add(y, bias)
    return y


def rope(a, dims, *, traditional, base, scale, offset, freqs=None, stream=None):
    """Rotary positional encoding of the first ``dims`` features of the last axis, the
    positions ``offset + arange(a.shape[-2])`` (``offset`` an int, a scalar array, or one per
    batch entry), times ``scale``; frequencies base^(-2i/dims), or 1 / ``freqs``.
    ``traditional`` rotates consecutive pairs, otherwise the two halves."""
    a = _k.asarray(a)
    if a.ndim < 3:
        raise _k.Error(f"[rope] Input must have at least 3 dimensions, got {a.ndim}")
    if not _is_float(a.dtype):
        raise _k.Error(f"[rope] Input must be a floating type, got {a.dtype.name}")
    if dims <= 0 or dims % 2 or dims > a.shape[-1]:
        raise _k.Error(f"[rope] dims must be positive, even and at most the last axis "
                       f"({a.shape[-1]}), got {dims}")
    half = dims // 2
    n = a.shape[-2]
    positions = _k.arange(n, dtype=_k.float32)
    if isinstance(offset, _k.array) and offset.size > 1:
        if offset.ndim != 1 or offset.shape[0] != a.shape[0]:
            raise _k.Error(f"[rope] offset must be a scalar or have one entry per batch "
                           f"({a.shape[0]}), got shape {tuple(offset.shape)}")
        offset = _k.reshape(offset.astype(_k.float32), (a.shape[0],) + (1,) * (a.ndim - 2))
    elif isinstance(offset, _k.array):
        offset = _k.reshape(offset, ()).astype(_k.float32)
    positions = _k.multiply(_k.add(offset, positions), scale)
    if freqs is None:
        if base is None:
            raise _k.Error("[rope] give base or freqs")
        inv = _k.exp(_k.multiply(_k.arange(0.0, half, dtype=_k.float32),
                                 -math.log(base) / half))
    else:
        freqs = _k.asarray(freqs)
        if freqs.ndim != 1 or freqs.shape[0] != half:
            raise _k.Error(f"[rope] freqs must have shape ({half},), got "
                           f"{tuple(freqs.shape)}")
        inv = _k.divide(1.0, freqs.astype(_k.float32))
    theta = _k.multiply(_k.expand_dims(positions, -1), inv)
    cos, sin = _k.cos(theta), _k.sin(theta)
    dtype = a.dtype
    x = a.astype(_k.float32)
    if traditional:
        x1, x2 = x[..., 0:dims:2], x[..., 1:dims:2]
    else:
        x1, x2 = x[..., :half], x[..., half:dims]
    r1 = _k.subtract(_k.multiply(x1, cos), _k.multiply(x2, sin))
    r2 = _k.add(_k.multiply(x1, sin), _k.multiply(x2, cos))
    if traditional:
        rx = _k.stack([r1, r2], -1)
        rx = _k.reshape(rx, tuple(rx.shape[:-2]) + (dims,))
        parts = [rx]
    else:
        parts = [r1, r2]
    if dims < a.shape[-1]:
        parts.append(x[..., dims:])
    out = parts[0] if len(parts) == 1 else _k.concatenate(parts, -1)
    return out.astype(dtype)


def scaled_dot_product_attention(q, k, v, *, scale, mask=None, sinks=None, stream=None):
    """softmax(q k^T scale + mask) v over (B, heads, L, D) arrays, with grouped-query heads
    (k and v may have fewer heads, dividing q's), ``mask`` additive, boolean (False is
    masked) or "causal", and ``sinks`` one extra logit per head, as MLX's."""
    q, k, v = _k.asarray(q), _k.asarray(k), _k.asarray(v)
    if q.ndim != 4 or k.ndim != 4 or v.ndim != 4:
        raise _k.Error("[scaled_dot_product_attention] queries, keys and values must be "
                       "4-D (batch, heads, sequence, dims)")
    n_q, n_kv = q.shape[-3], k.shape[-3]
    if n_q % n_kv:
        raise _k.Error(f"[scaled_dot_product_attention] {n_q} query heads are not a "
                       f"multiple of {n_kv} key/value heads")
    reps = n_q // n_kv
    b, length, kl = q.shape[0], q.shape[2], k.shape[2]
    q = _k.multiply(q, _k.array(scale, q.dtype))
    if reps > 1:
        q = _k.reshape(q, (b, n_kv, reps, length, -1))
        k, v = _k.expand_dims(k, 2), _k.expand_dims(v, 2)
    scores = _k.matmul(q, _k.swapaxes(k, -1, -2))
    if sinks is not None:
        sinks = _k.asarray(sinks)
        if sinks.ndim != 1 or sinks.shape[0] != n_q:
            raise _k.Error(f"[scaled_dot_product_attention] sinks must have shape ({n_q},), "
                           f"got {tuple(sinks.shape)}")
        if _k.add(_k.zeros((), q.dtype), _k.zeros((), sinks.dtype)).dtype != q.dtype:
            raise _k.Error(f"[scaled_dot_product_attention] sinks of type {sinks.dtype.name} "
                           f"would promote the {q.dtype.name} output")
    if isinstance(mask, _k.array):
        try:
            fits = _broadcast_shapes(tuple(mask.shape), (b, n_q, length, kl)) == (
                b, n_q, length, kl)
        except _k.Error:
            fits = False
        if not fits:
            raise _k.Error(f"[scaled_dot_product_attention] mask of shape "
                           f"{tuple(mask.shape)} does not broadcast to the scores' shape "
                           f"{(b, n_q, length, kl)}")
    if mask is not None:
        if isinstance(mask, str):
            if mask != "causal":
                raise _k.Error(f"[scaled_dot_product_attention] mask {mask!r}: the only "
                               "string mask is 'causal'")
            mask = _k.greater_equal(_k.expand_dims(_k.add(_k.arange(length), kl - length), 1),
                                    _k.expand_dims(_k.arange(kl), 0))
        mask = _k.asarray(mask)
        if reps > 1 and mask.ndim >= 3:
            if mask.shape[-3] == 1:
                mask = _k.expand_dims(mask, -3)
            else:
                mask = _k.reshape(mask, tuple(mask.shape[:-3]) + (n_kv, reps) +
                                  tuple(mask.shape[-2:]))
        if mask.dtype == _k.bool_:
            scores = _k.where(mask, scores, _finfo(scores.dtype).min)
        else:
            scores = _k.add(scores, mask.astype(scores.dtype))
    if sinks is not None:
        s = _k.reshape(_k.asarray(sinks), (1, n_q, 1, 1))
        if reps > 1:
            s = _k.reshape(s, (1, n_kv, reps, 1, 1))
        shape = list(scores.shape)
        shape[-1] = 1
        scores = _k.concatenate([_k.broadcast_to(s.astype(scores.dtype), shape), scores], -1)
    dtype = scores.dtype
    probs = _k.softmax(scores.astype(_k.float32), -1).astype(dtype)
    if sinks is not None:
        probs = probs[..., 1:]
    out = _k.matmul(probs, v)
    if reps > 1:
        out = _k.reshape(out, (b, n_q, length, -1))
    return out


def metal_kernel(*args, **kwargs):
    raise _k.Error("fast.metal_kernel: Kiln runs no Metal source (its GPUs are OpenCL and "
                   "Vulkan devices)")


def cuda_kernel(*args, **kwargs):
    raise _k.Error("fast.cuda_kernel: Kiln runs no CUDA source (its GPUs are OpenCL and "
                   "Vulkan devices)")
