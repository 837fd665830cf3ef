"""mlx.core functions that are compositions of Kiln's ops, written once here in Python.

Each builds the same lazy graph a user would write by hand, so it fuses and differentiates
like any other op.
"""

from . import _kiln as _k


def square(a, *, stream=None):
    a = _k.asarray(a)
    return _k.multiply(a, a, stream=stream)


def reciprocal(a, *, stream=None):
    return _k.divide(1, a, stream=stream)


def isnan(a, *, stream=None):
    a = _k.asarray(a)
    return _k.not_equal(a, a, stream=stream)


def isinf(a, *, stream=None):
    a = _k.asarray(a)
    if not a.dtype.name.startswith(("float", "bfloat")):
        return _k.zeros_like(a, stream=stream).astype(_k.bool_)
    return _k.equal(_k.abs(a, stream=stream), float("inf"), stream=stream)


def isfinite(a, *, stream=None):
    a = _k.asarray(a)
    return _k.logical_not(_k.logical_or(isnan(a, stream=stream), isinf(a, stream=stream)),
                          stream=stream)


def all(a, axis=None, keepdims=False, *, stream=None):  # noqa: A001  (mlx.core's name)
    return _k.min(_k.asarray(a).astype(_k.bool_), axis, keepdims, stream=stream)


def any(a, axis=None, keepdims=False, *, stream=None):  # noqa: A001
    return _k.max(_k.asarray(a).astype(_k.bool_), axis, keepdims, stream=stream)


def isclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False, *, stream=None):
    a, b = _k.asarray(a), _k.asarray(b)
    close = _k.less_equal(_k.abs(_k.subtract(a, b)), atol + rtol * _k.abs(b), stream=stream)
    same = _k.equal(a, b, stream=stream)  # infinities of one sign
    out = _k.logical_or(close, same, stream=stream)
    if equal_nan:
        out = _k.logical_or(out, _k.logical_and(isnan(a), isnan(b)), stream=stream)
    return out


def allclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False, *, stream=None):
    return all(isclose(a, b, rtol, atol, equal_nan, stream=stream), stream=stream)


def array_equal(a, b, equal_nan=False, *, stream=None):
    a, b = _k.asarray(a), _k.asarray(b)
    if a.shape != b.shape:
        return _k.asarray(False)
    eq = _k.equal(a, b, stream=stream)
    if equal_nan:
        eq = _k.logical_or(eq, _k.logical_and(isnan(a), isnan(b)), stream=stream)
    return all(eq, stream=stream)


def broadcast_arrays(*arrays, stream=None):
    arrays = [_k.asarray(a) for a in arrays]
    shape = _k.add(*[_k.zeros(a.shape, _k.bool_) for a in arrays[:2]]).shape if arrays else ()
    for a in arrays[2:]:
        shape = _k.add(_k.zeros(shape, _k.bool_), _k.zeros(a.shape, _k.bool_)).shape
    return [_k.broadcast_to(a, shape, stream=stream) for a in arrays]


def addmm(c, a, b, alpha=1.0, beta=1.0, *, stream=None):
    return _k.add(_k.multiply(_k.matmul(a, b, stream=stream), alpha),
                  _k.multiply(c, beta), stream=stream)


def identity(n, dtype=None, *, stream=None):
    return eye(n, dtype=dtype, stream=stream)


def eye(n, m=None, k=0, dtype=None, *, stream=None):
    m = n if m is None else m
    rows = _k.reshape(_k.arange(n, stream=stream), (n, 1))
    cols = _k.arange(m, stream=stream)
    return _k.equal(_k.add(rows, k), cols, stream=stream).astype(dtype or _k.float32)


def log2(a, *, stream=None):
    return _k.divide(_k.log(a, stream=stream), 0.6931471805599453, stream=stream)


def log10(a, *, stream=None):
    return _k.divide(_k.log(a, stream=stream), 2.302585092994046, stream=stream)


def logaddexp(a, b, *, stream=None):
    # log(e^a + e^b) = max + log1p(e^-|a - b|): no overflow for large a or b. Equal infinities
    # give that infinity (not inf - inf).
    a, b = _k.asarray(a), _k.asarray(b)
    hi = _k.maximum(a, b, stream=stream)
    gap = _k.abs(_k.subtract(a, b, stream=stream), stream=stream)
    gap = _k.where(_k.equal(a, b, stream=stream), 0, gap, stream=stream)
    return _k.add(hi, _k.log1p(_k.exp(_k.negative(gap), stream=stream), stream=stream),
                  stream=stream)


def degrees(a, *, stream=None):
    return _k.multiply(a, 57.29577951308232, stream=stream)


def radians(a, *, stream=None):
    return _k.multiply(a, 0.017453292519943295, stream=stream)


def unflatten(a, axis, shape, *, stream=None):
    a = _k.asarray(a)
    axis = axis % a.ndim
    return _k.reshape(a, a.shape[:axis] + tuple(shape) + a.shape[axis + 1:], stream=stream)


METHODS = ("square", "reciprocal", "all", "any")
