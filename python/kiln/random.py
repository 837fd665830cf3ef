"""Counter-based random numbers with mlx.core.random's API.

Element i of a draw is a pure function of (key, i), the same on every backend. A key is a 0-d
uint64 array. Without a key, a draw splits the global key in ``state[0]``: list ``state`` as a
compiled function's captured ``inputs`` and ``outputs`` and the draws inside advance it at
every call, as in MLX.
"""

from . import _kiln

_r = _kiln._random

state = [_r.key(0)]


def seed(seed):
    """Restarts the global key sequence (``state[0]``)."""
    _r.seed(seed)
    state[0] = _r.key(seed)


def key(seed):
    """A key (a 0-d uint64 array) derived from ``seed``."""
    return _r.key(seed)


def split(key, num=2, stream=None):
    """``num`` new keys from ``key``: an array of shape (num,); index it for one key."""
    return _r.split(key, num, stream=stream)


def _next(key):
    if key is not None:
        return key
    state[0], sub = _r.next(state[0])
    return sub


def _shape(shape):
    return [shape] if isinstance(shape, int) else list(shape)


def _is_number(x):
    return isinstance(x, (int, float))


def bits(shape=(), width=4, key=None, stream=None):
    """Raw random bits: uint8, uint32 or uint64 for width 1, 4 or 8."""
    return _r.bits(_shape(shape), width, _next(key), stream)


def uniform(low=0.0, high=1.0, shape=(), dtype=None, key=None, stream=None):
    """Uniform in [low, high); low and high may be arrays that broadcast to ``shape``."""
    dtype = dtype or _kiln.float32
    if _is_number(low) and _is_number(high):
        return _r.uniform(float(low), float(high), _shape(shape), dtype, _next(key), stream)
    u = _r.uniform(0.0, 1.0, _shape(shape), dtype, _next(key), stream)
    return _kiln.add(low, _kiln.multiply(_kiln.subtract(high, low), u), stream=stream)


def normal(shape=(), dtype=None, loc=0.0, scale=1.0, key=None, stream=None):
    """Normal with mean ``loc`` and standard deviation ``scale``."""
    dtype = dtype or _kiln.float32
    if _is_number(loc) and _is_number(scale):
        return _r.normal(_shape(shape), dtype, float(loc), float(scale), _next(key), stream)
    n = _r.normal(_shape(shape), dtype, 0.0, 1.0, _next(key), stream)
    return _kiln.add(loc, _kiln.multiply(scale, n), stream=stream)


def randint(low, high, shape=(), dtype=None, key=None, stream=None):
    """Integers uniform in [low, high) (int32 unless ``dtype`` says otherwise)."""
    return _r.randint(low, high, _shape(shape), dtype, _next(key), stream)


def bernoulli(p=0.5, shape=None, key=None, stream=None):
    """True with probability ``p`` (an array or a number, broadcast to ``shape``)."""
    return _r.bernoulli(p, None if shape is None else _shape(shape), _next(key), stream)


def truncated_normal(lower, upper, shape=None, dtype=None, key=None, stream=None):
    """Standard normal values truncated to [lower, upper]."""
    return _r.truncated_normal(lower, upper, None if shape is None else _shape(shape), dtype,
                               _next(key), stream)


def categorical(logits, axis=-1, shape=None, num_samples=None, key=None, stream=None):
    """Indices sampled from the categorical distribution of ``logits`` along ``axis``."""
    return _r.categorical(logits, axis, None if shape is None else _shape(shape), num_samples,
                          _next(key), stream)


def _float_dtype(dtype, name):
    dtype = dtype or _kiln.float32
    if not dtype.name.startswith(("float", "bfloat")):
        raise _kiln.Error(f"random.{name}: dtype must be a floating type, got {dtype.name}")
    return dtype


def laplace(shape=(), dtype=None, loc=0.0, scale=1.0, key=None, stream=None):
    """Laplace with location ``loc`` and scale ``scale``: loc - scale sign(u) log1p(-|u|) for u
    uniform in (-1, 1), computed in float32 and cast (no infinities in half precision)."""
    dtype = _float_dtype(dtype, "laplace")
    u = _r.uniform(-1.0, 1.0, _shape(shape), _kiln.float32, _next(key), stream)
    # u = -1 exactly would give log1p(-1) = -inf: keep |u| below 1.
    u = _kiln.clip(u, -0.99999994, 0.99999994, stream=stream)
    x = _kiln.multiply(_kiln.negative(_kiln.sign(u, stream=stream), stream=stream),
                       _kiln.log1p(_kiln.negative(_kiln.abs(u, stream=stream), stream=stream),
                                   stream=stream), stream=stream)
    x = x.astype(dtype)
    if _is_number(loc) and _is_number(scale):
        if scale != 1.0:
            x = _kiln.multiply(x, scale, stream=stream)
        return _kiln.add(x, loc, stream=stream) if loc != 0.0 else x
    return _kiln.add(loc, _kiln.multiply(scale, x, stream=stream), stream=stream)


def gumbel(shape=(), dtype=None, key=None, stream=None):
    """Standard Gumbel: -log(-log(u)) for u uniform in (0, 1)."""
    dtype = _float_dtype(dtype, "gumbel")
    u = _r.uniform(0.0, 1.0, _shape(shape), _kiln.float32, _next(key), stream)
    u = _kiln.clip(u, 1.1754944e-38, 0.99999994, stream=stream)  # log(0) would be -inf
    g = _kiln.negative(_kiln.log(_kiln.negative(_kiln.log(u, stream=stream), stream=stream),
                                 stream=stream), stream=stream)
    return g.astype(dtype)


def permutation(x, axis=0, key=None, stream=None):
    """A random permutation of ``arange(x)`` for an int ``x``, else ``x`` shuffled along
    ``axis``: the order that sorts one random 32-bit word per position."""
    if isinstance(x, int):
        x = _kiln.arange(x, stream=stream)
    x = _kiln.asarray(x)
    n = x.shape[axis]
    order = _kiln.argsort(_r.bits([n], 4, _next(key), stream), stream=stream)
    return _kiln.take(x, order, axis=axis, stream=stream)
