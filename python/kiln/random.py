"""Counter-based random numbers with mlx.core.random's API.

Element i of a draw is a pure function of (key, i), the same on every backend. Without a key,
a draw splits the global key in ``state[0]``: list ``state`` as a compiled function's captured
``inputs`` and ``outputs`` and it advances between calls.
"""

import math as _math

from . import _kiln

_r = _kiln._random

state = [_r.key(0)]


def seed(seed):
    """Restarts the global key sequence."""
    state[0] = _r.key(seed)


def key(seed):
    """A key (a uint64 array) derived from ``seed``."""
    return _r.key(seed)


def split(key, num=2):
    """``num`` new keys from ``key`` (an array of shape (num,))."""
    return _r.split(key, num)


def _next(key):
    if key is not None:
        return key
    k, sub = split(state[0])
    state[0] = k
    return sub


def _shape(shape):
    return [shape] if isinstance(shape, int) else list(shape)


def uniform(low=0.0, high=1.0, shape=(), dtype=None, key=None, stream=None):
    """Uniform in [low, high)."""
    dtype = dtype or _kiln.float32
    return _r.uniform(float(low), float(high), _shape(shape), dtype, _next(key), stream)


def normal(shape=(), dtype=None, loc=0.0, scale=1.0, key=None, stream=None):
    """Normal with mean ``loc`` and standard deviation ``scale``."""
    dtype = dtype or _kiln.float32
    return _r.normal(_shape(shape), dtype, float(loc), float(scale), _next(key), stream)
