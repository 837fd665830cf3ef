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
    a = _k.asarray(a)
    if a.size == 0:  # min has no identity; all of nothing is True
        return _k.equal(_k.sum(_k.logical_not(a.astype(_k.bool_)).astype(_k.int32), axis,
                               keepdims), 0, stream=stream)
    return _k.min(a.astype(_k.bool_), axis, keepdims, stream=stream)


def any(a, axis=None, keepdims=False, *, stream=None):  # noqa: A001
    a = _k.asarray(a)
    if a.size == 0:  # any of nothing is False
        return _k.greater(_k.sum(a.astype(_k.int32), axis, keepdims), 0, stream=stream)
    return _k.max(a.astype(_k.bool_), axis, keepdims, stream=stream)


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


# ---- more of mlx.core's functions, composed the same way ----

import math as _math  # noqa: E402


def _arr(a):
    return _k.asarray(a)


def _is_float(dtype):
    return dtype.name.startswith(("float", "bfloat"))


def _axis(axis, ndim, fn):
    if not -ndim <= axis < ndim:
        raise _k.Error(f"[{fn}] axis {axis} is out of bounds for an array of {ndim} dimensions")
    return axis % ndim


class finfo:
    """Machine limits of a floating dtype, as mlx.core.finfo: ``min``, ``max``, ``eps``,
    ``smallest_normal``, ``bits``, ``dtype``."""

    _LIMITS = {  # max, eps, smallest normal
        "float16": (65504.0, 0.0009765625, 6.103515625e-05),
        "bfloat16": (3.3895313892515355e+38, 0.0078125, 1.1754943508222875e-38),
        "float32": (3.4028234663852886e+38, 1.1920928955078125e-07, 1.1754943508222875e-38),
        "float64": (1.7976931348623157e+308, 2.220446049250313e-16, 2.2250738585072014e-308),
    }

    def __init__(self, dtype):
        name = getattr(dtype, "name", str(dtype))
        if name not in self._LIMITS:
            raise _k.Error(f"[finfo] dtype {name} is not inexact")
        self.dtype = dtype
        self.max, self.eps, self.smallest_normal = self._LIMITS[name]
        self.min = -self.max
        self.bits = dtype.size * 8

    def __repr__(self):
        return f"finfo(min={self.min:g}, max={self.max:g}, dtype={self.dtype.name})"


class iinfo:
    """Limits of an integer dtype, as mlx.core.iinfo: ``min``, ``max``, ``bits``, ``dtype``."""

    def __init__(self, dtype):
        name = getattr(dtype, "name", str(dtype))
        if not name.startswith(("int", "uint")):
            raise _k.Error(f"[iinfo] dtype {name} is not integral")
        self.dtype = dtype
        self.bits = dtype.size * 8
        if name.startswith("u"):
            self.min, self.max = 0, 2 ** self.bits - 1
        else:
            self.min, self.max = -2 ** (self.bits - 1), 2 ** (self.bits - 1) - 1

    def __repr__(self):
        return f"iinfo(min={self.min}, max={self.max}, dtype={self.dtype.name})"


def zeros_like(a, dtype=None, *, stream=None):
    a = _arr(a)
    return _k.zeros(a.shape, dtype or a.dtype, stream=stream)


def ones_like(a, dtype=None, *, stream=None):
    a = _arr(a)
    return _k.ones(a.shape, dtype or a.dtype, stream=stream)


def empty(shape, dtype=None, *, stream=None):
    """zeros: Kiln has no uninitialised arrays."""
    return _k.zeros(shape, dtype or _k.float32, stream=stream)


def empty_like(a, dtype=None, *, stream=None):
    return zeros_like(a, dtype, stream=stream)


def tan(a, *, stream=None):
    a = _arr(a)
    return _k.divide(_k.sin(a, stream=stream), _k.cos(a, stream=stream), stream=stream)


def sinh(a, *, stream=None):
    a = _arr(a)
    return _k.multiply(_k.subtract(_k.exp(a), _k.exp(_k.negative(a))), 0.5, stream=stream)


def cosh(a, *, stream=None):
    a = _arr(a)
    return _k.multiply(_k.add(_k.exp(a), _k.exp(_k.negative(a))), 0.5, stream=stream)


def arcsinh(a, *, stream=None):
    # sign(x) log(|x| + sqrt(x^2 + 1)), in the log1p form near 0.
    a = _arr(a)
    ax = _k.abs(a)
    r = _k.log1p(_k.add(ax, _k.divide(_k.multiply(ax, ax),
                                        _k.add(1, _k.sqrt(_k.add(_k.multiply(ax, ax), 1))))))
    return _k.multiply(_k.sign(a), r, stream=stream)


def arccosh(a, *, stream=None):
    a = _arr(a)
    return _k.log(_k.add(a, _k.sqrt(_k.multiply(_k.subtract(a, 1), _k.add(a, 1)))),
                  stream=stream)


def arctanh(a, *, stream=None):
    a = _arr(a)
    return _k.multiply(_k.subtract(_k.log1p(a), _k.log1p(_k.negative(a))), 0.5, stream=stream)


_ARCTAN_TERMS = 12  # t^1 .. t^23: past float64's precision once |t| <= tan(pi/16)


def _arctan_series(t):
    """arctan(t) = t - t^3/3 + t^5/5 - ..., in Horner form in t^2; for |t| <= 0.2."""
    t2 = _k.multiply(t, t)
    acc = None
    for k in reversed(range(_ARCTAN_TERMS)):
        coefficient = (-1.0) ** k / (2 * k + 1)
        acc = coefficient if acc is None else _k.add(_k.multiply(acc, t2), coefficient)
    return _k.multiply(acc, t)


def _halve_angle(t):
    """tan(theta / 2) from t = tan(theta): t / (1 + sqrt(1 + t^2)), exact in form for |t| <= 1
    (no cancellation)."""
    return _k.divide(t, _k.add(_k.sqrt(_k.add(_k.multiply(t, t), 1.0)), 1.0))


def arctan(a, *, stream=None):
    """Inverse tangent, built from +, *, / and sqrt: |a| > 1 is folded onto 1/a (arctan(a) =
    +-pi/2 - arctan(1/a)), the angle is halved twice (to at most pi/16), and a short Taylor
    series finishes it. The form is odd and smooth, so its gradient is 1 / (1 + a^2)
    everywhere, 0 included."""
    a = _arr(a)
    dtype = a.dtype if _is_float(a.dtype) else _k.float32
    x = a.astype(_k.float64 if dtype == _k.float64 else _k.float32)
    folded = _k.greater(_k.abs(x), 1.0)
    # The unused branch divides by 1, not by x, so a zero x has no inf in its gradient.
    t = _k.where(folded, _k.divide(1.0, _k.where(folded, x, 1.0)), x)
    inner = _k.multiply(_arctan_series(_halve_angle(_halve_angle(t))), 4.0)
    outer = _k.subtract(_k.multiply(_k.sign(x), _math.pi / 2), inner)
    return _k.where(folded, outer, inner, stream=stream).astype(dtype)


def arcsin(a, *, stream=None):
    a = _arr(a)
    return arctan(_k.divide(a, _k.sqrt(_k.multiply(_k.subtract(1, a), _k.add(1, a)))),
                  stream=stream)


def arccos(a, *, stream=None):
    # 2 atan(sqrt((1 - x) / (1 + x))): exact at both ends.
    a = _arr(a)
    return _k.multiply(arctan(_k.sqrt(_k.divide(_k.subtract(1, a), _k.add(1, a)))), 2.0,
                       stream=stream)


def _signbit(v):
    # v < 0, counting -0.0 (1 / -0.0 is -inf).
    return _k.logical_or(_k.less(v, 0), _k.logical_and(_k.equal(v, 0),
                                                       _k.less(_k.divide(1.0, v), 0)))


def arctan2(a, b, *, stream=None):
    """The angle of (b, a), in [-pi, pi], with NumPy's results on the axes and signed zeros."""
    a, b = _arr(a), _arr(b)
    base = arctan(_k.divide(a, _k.where(_k.equal(b, 0), 1, b)))
    a_sign = _k.where(_signbit(a), -1.0, 1.0)
    out = _k.where(_k.less(b, 0), _k.add(base, _k.multiply(a_sign, _math.pi)), base)
    on_b_axis = _k.multiply(a_sign, _k.where(_signbit(b), _math.pi, 0.0))
    out = _k.where(_k.equal(b, 0), _k.where(_k.equal(a, 0), on_b_axis,
                                            _k.multiply(a_sign, _math.pi / 2)), out)
    return out.astype(base.dtype) if _is_float(base.dtype) else out


def conjugate(a, *, stream=None):
    """The identity on Kiln's real dtypes."""
    return _arr(a)


conj = conjugate


def trunc(a, *, stream=None):
    a = _arr(a)
    if not _is_float(a.dtype):
        return a
    return _k.where(_k.less(a, 0), _k.ceil(a), _k.floor(a), stream=stream)


def logical_xor(a, b, *, stream=None):
    return _k.not_equal(_arr(a).astype(_k.bool_), _arr(b).astype(_k.bool_), stream=stream)


def isposinf(a, *, stream=None):
    a = _arr(a)
    if not _is_float(a.dtype):
        return _k.zeros(a.shape, _k.bool_)
    return _k.equal(a, float("inf"), stream=stream)


def isneginf(a, *, stream=None):
    a = _arr(a)
    if not _is_float(a.dtype):
        return _k.zeros(a.shape, _k.bool_)
    return _k.equal(a, float("-inf"), stream=stream)


def nan_to_num(a, nan=0.0, posinf=None, neginf=None, *, stream=None):
    a = _arr(a)
    if not _is_float(a.dtype):
        return a
    big = finfo(a.dtype).max
    posinf = big if posinf is None else posinf
    neginf = -big if neginf is None else neginf
    out = _k.where(isnan(a), nan, a)
    out = _k.where(_k.equal(a, float("inf")), posinf, out)
    return _k.where(_k.equal(a, float("-inf")), neginf, out, stream=stream).astype(a.dtype)


def count_nonzero(a, axis=None, keepdims=False, *, stream=None):
    a = _arr(a)
    return _k.sum(_k.not_equal(a, 0).astype(_k.int32), axis, keepdims, stream=stream)


def atleast_1d(*arrays, stream=None):
    out = [_k.reshape(a, (1,)) if a.ndim == 0 else a for a in map(_arr, arrays)]
    return out[0] if len(out) == 1 else out


def atleast_2d(*arrays, stream=None):
    out = []
    for a in map(_arr, arrays):
        out.append(_k.reshape(a, (1,) * (2 - a.ndim) + tuple(a.shape)) if a.ndim < 2 else a)
    return out[0] if len(out) == 1 else out


def atleast_3d(*arrays, stream=None):
    out = []
    for a in map(_arr, arrays):
        if a.ndim == 0:
            a = _k.reshape(a, (1, 1, 1))
        elif a.ndim == 1:
            a = _k.reshape(a, (1, a.shape[0], 1))
        elif a.ndim == 2:
            a = _k.reshape(a, tuple(a.shape) + (1,))
        out.append(a)
    return out[0] if len(out) == 1 else out


def broadcast_shapes(*shapes):
    """The shape ``shapes`` broadcast to (NumPy's rules); ValueError if they do not."""
    if not shapes:
        raise _k.Error("[broadcast_shapes] No input shapes provided")
    ndim = max(len(s) for s in shapes)
    out = []
    for i in range(ndim):
        d = 1
        for s in shapes:
            j = i - (ndim - len(s))
            if j < 0 or s[j] == 1:
                continue
            if d != 1 and s[j] != d:
                raise _k.Error(f"[broadcast_shapes] Shapes {tuple(shapes[0])} and "
                               f"{tuple(s)} cannot be broadcast")
            d = s[j]
        out.append(d)
    return tuple(out)


def flip(a, axis=None, *, stream=None):
    a = _arr(a)
    axes = range(a.ndim) if axis is None else ([axis] if isinstance(axis, int) else axis)
    index = [slice(None)] * a.ndim
    for ax in axes:
        index[_axis(ax, a.ndim, "flip")] = slice(None, None, -1)
    return a[tuple(index)] if a.ndim else a


def roll(a, shift, axis=None, *, stream=None):
    a = _arr(a)
    if axis is None:
        total = sum(shift) if isinstance(shift, (tuple, list)) else shift
        return _k.reshape(roll(_k.reshape(a, (-1,)), total, 0), a.shape, stream=stream)
    shifts = list(shift) if isinstance(shift, (tuple, list)) else [shift]
    axes = list(axis) if isinstance(axis, (tuple, list)) else [axis]
    if len(shifts) == 1:
        shifts = shifts * len(axes)
    if len(axes) == 1:
        axes = axes * len(shifts)
    if len(shifts) != len(axes):
        raise _k.Error(f"[roll] {len(shifts)} shifts and {len(axes)} axes")
    per_axis = {}
    for s, ax in zip(shifts, axes):
        ax = _axis(ax, a.ndim, "roll")
        per_axis[ax] = per_axis.get(ax, 0) + s
    for ax, s in per_axis.items():
        n = a.shape[ax]
        if n == 0 or s % n == 0:
            continue
        s %= n
        lo = [slice(None)] * a.ndim
        hi = [slice(None)] * a.ndim
        lo[ax], hi[ax] = slice(n - s, None), slice(None, n - s)
        a = _k.concatenate([a[tuple(lo)], a[tuple(hi)]], ax, stream=stream)
    return a


def repeat(array, repeats, axis=None, *, stream=None):
    a = _arr(array)
    if axis is None:
        a, axis = _k.reshape(a, (-1,)), 0
    axis = _axis(axis, a.ndim, "repeat")
    shape = list(a.shape)
    x = _k.expand_dims(a, axis + 1)
    x = _k.broadcast_to(x, shape[:axis + 1] + [repeats] + shape[axis + 1:])
    shape[axis] *= repeats
    return _k.reshape(x, shape, stream=stream)


def tile(a, reps, *, stream=None):
    a = _arr(a)
    reps = [reps] if isinstance(reps, int) else list(reps)
    ndim = max(a.ndim, len(reps))
    shape = [1] * (ndim - a.ndim) + list(a.shape)
    reps = [1] * (ndim - len(reps)) + reps
    x = _k.reshape(a, [v for s in shape for v in (1, s)])
    x = _k.broadcast_to(x, [v for r, s in zip(reps, shape) for v in (r, s)])
    return _k.reshape(x, [r * s for r, s in zip(reps, shape)], stream=stream)


def diagonal(a, offset=0, axis1=0, axis2=1, *, stream=None):
    """The diagonal ``offset`` above the main one of the (axis1, axis2) planes, as the last
    axis."""
    a = _arr(a)
    ax1, ax2 = _axis(axis1, a.ndim, "diagonal"), _axis(axis2, a.ndim, "diagonal")
    if ax1 == ax2:
        raise _k.Error("[diagonal] axis1 and axis2 cannot be the same axis")
    rest = [i for i in range(a.ndim) if i not in (ax1, ax2)]
    x = _k.transpose(a, rest + [ax1, ax2])
    n, m = a.shape[ax1], a.shape[ax2]
    length = max(0, min(n, m - offset) if offset >= 0 else min(n + offset, m))
    lead = [a.shape[i] for i in rest]
    if length == 0:
        return _k.zeros(lead + [0], a.dtype)
    start = offset if offset >= 0 else -offset * m
    flat = _k.reshape(x, lead + [n * m])
    idx = _k.add(_k.multiply(_k.arange(length), m + 1), start)
    return _k.take(flat, idx, axis=len(lead), stream=stream)


def diag(a, k=0, *, stream=None):
    a = _arr(a)
    if a.ndim == 1:
        # out[i, i + k] = a[i] for k >= 0 (by row), out[j - k, j] = a[j] for k < 0 (by column).
        n = a.shape[0] + abs(k)
        rows = _k.reshape(_k.arange(n), (n, 1))
        mask = _k.equal(_k.add(rows, k), _k.arange(n))
        src = _k.pad(a, [(0, abs(k))])
        src = _k.reshape(src, (n, 1) if k >= 0 else (1, n))
        return _k.where(mask, src, _k.zeros((), a.dtype), stream=stream)
    if a.ndim == 2:
        return diagonal(a, k, 0, 1, stream=stream)
    raise _k.Error("[diag] array must be 1-D or 2-D")


def trace(a, offset=0, axis1=0, axis2=1, dtype=None, *, stream=None):
    d = diagonal(a, offset, axis1, axis2)
    if dtype is not None:
        d = d.astype(dtype)
    return _k.sum(d, -1, stream=stream)


def tri(n, m=None, k=0, dtype=None, *, stream=None):
    m = n if m is None else m
    rows = _k.reshape(_k.arange(n), (n, 1))
    return _k.less_equal(_k.arange(m), _k.add(rows, k), stream=stream).astype(
        dtype or _k.float32)


def outer(a, b, *, stream=None):
    a, b = _arr(a), _arr(b)
    return _k.multiply(_k.reshape(a, (-1, 1)), _k.reshape(b, (1, -1)), stream=stream)


def tensordot(a, b, axes=2, *, stream=None):
    a, b = _arr(a), _arr(b)
    if isinstance(axes, int):
        if axes < 0:
            raise _k.Error("[tensordot] axes must be a non-negative integer")
        ax_a = list(range(a.ndim - axes, a.ndim))
        ax_b = list(range(axes))
    else:
        ax_a, ax_b = ([x] if isinstance(x, int) else list(x) for x in axes)
    if len(ax_a) != len(ax_b):
        raise _k.Error("[tensordot] axes must have the same number of dimensions")
    ax_a = [_axis(x, a.ndim, "tensordot") for x in ax_a]
    ax_b = [_axis(x, b.ndim, "tensordot") for x in ax_b]
    for x, y in zip(ax_a, ax_b):
        if a.shape[x] != b.shape[y]:
            raise _k.Error(f"[tensordot] axis {x} of a ({a.shape[x]}) and axis {y} of b "
                           f"({b.shape[y]}) differ")
    free_a = [i for i in range(a.ndim) if i not in ax_a]
    free_b = [i for i in range(b.ndim) if i not in ax_b]
    k = _math.prod(a.shape[i] for i in ax_a)
    at = _k.reshape(_k.transpose(a, free_a + ax_a), (-1, k))
    bt = _k.reshape(_k.transpose(b, ax_b + free_b), (k, -1))
    return _k.reshape(_k.matmul(at, bt), [a.shape[i] for i in free_a] +
                      [b.shape[i] for i in free_b], stream=stream)


def inner(a, b, *, stream=None):
    a, b = _arr(a), _arr(b)
    if a.ndim == 0 or b.ndim == 0:
        return _k.multiply(a, b, stream=stream)
    return tensordot(a, b, ([a.ndim - 1], [b.ndim - 1]), stream=stream)


def vecdot(a, b, axis=-1, *, stream=None):
    a, b = _arr(a), _arr(b)
    if a.ndim == 0 or b.ndim == 0:
        raise _k.Error("[vecdot] inputs must have at least one dimension")
    shape = broadcast_shapes(a.shape, b.shape)
    _axis(axis, len(shape), "vecdot")
    if a.shape[axis] != b.shape[axis]:
        raise _k.Error(f"[vecdot] the sizes on axis {axis} differ: {a.shape[axis]} and "
                       f"{b.shape[axis]}")
    return _k.sum(_k.multiply(a, b), axis, stream=stream)


def kron(a, b, *, stream=None):
    a, b = _arr(a), _arr(b)
    if a.size == 0 or b.size == 0:
        raise _k.Error("[kron] Input arrays cannot be empty.")
    ndim = max(a.ndim, b.ndim)
    sa = [1] * (ndim - a.ndim) + list(a.shape)
    sb = [1] * (ndim - b.ndim) + list(b.shape)
    x = _k.reshape(a, [v for s in sa for v in (s, 1)])
    y = _k.reshape(b, [v for s in sb for v in (1, s)])
    return _k.reshape(_k.multiply(x, y), [p * q for p, q in zip(sa, sb)], stream=stream)


def linspace(start, stop, num=50, endpoint=True, dtype=None, *, stream=None):
    """``num`` evenly spaced values from ``start`` to ``stop`` (included with ``endpoint``).
    Computed in float64 and rounded once to ``dtype`` (float32 by default; integer dtypes
    truncate), with the last value set to ``stop`` itself so both ends are exact."""
    if num < 0:
        raise _k.Error(f"[linspace] number of samples, {num}, must be non-negative.")
    dtype = dtype or _k.float32
    intervals = (num - 1 if endpoint else num) or 1
    step = (stop - start) / intervals
    index = _k.arange(0, num, dtype=_k.float64)
    values = _k.add(_k.multiply(index, step), float(start))
    if endpoint and num > 1:
        values = _k.where(_k.equal(index, num - 1), float(stop), values)
    return values.astype(dtype)


def meshgrid(*arrays, sparse=False, indexing="xy", stream=None):
    if indexing not in ("xy", "ij"):
        raise _k.Error(f"[meshgrid] indexing must be 'xy' or 'ij', got {indexing!r}")
    arrays = [_k.reshape(_arr(a), (-1,)) for a in arrays]
    n = len(arrays)
    shapes = []
    for i, a in enumerate(arrays):
        shape = [1] * n
        shape[i] = a.shape[0]
        shapes.append(shape)
    if indexing == "xy" and n > 1:
        for s in shapes:
            s[0], s[1] = s[1], s[0]
    out = [_k.reshape(a, s) for a, s in zip(arrays, shapes)]
    if not sparse:
        full = broadcast_shapes(*[tuple(s) for s in shapes]) if out else ()
        out = [_k.broadcast_to(o, full, stream=stream) for o in out]
    return tuple(out)


def diff(a, n=1, axis=-1, *, stream=None):
    a = _arr(a)
    if n < 0:
        raise _k.Error(f"[diff] order must be non-negative, got {n}")
    ax = _axis(axis, a.ndim, "diff")
    for _ in range(n):
        hi = [slice(None)] * a.ndim
        lo = [slice(None)] * a.ndim
        hi[ax], lo[ax] = slice(1, None), slice(None, -1)
        a = _k.subtract(a[tuple(hi)], a[tuple(lo)], stream=stream)
    return a


def unstack(x, axis=0, *, stream=None):
    x = _arr(x)
    ax = _axis(axis, x.ndim, "unstack")
    return [_k.squeeze(p, ax) for p in _k.split(x, x.shape[ax], ax)] if x.shape[ax] else []


def _window(M, fn):
    if M < 1:
        return _k.zeros((0,), _k.float32)
    if M == 1:
        return _k.ones((1,), _k.float32)
    n = _k.arange(M, dtype=_k.float32)
    return fn(n, M - 1)


def hanning(M, *, stream=None):
    return _window(M, lambda n, d: _k.subtract(0.5, _k.multiply(
        _k.cos(_k.multiply(n, 2 * _math.pi / d)), 0.5)))


def hamming(M, *, stream=None):
    return _window(M, lambda n, d: _k.subtract(0.54, _k.multiply(
        _k.cos(_k.multiply(n, 2 * _math.pi / d)), 0.46)))


def blackman(M, *, stream=None):
    return _window(M, lambda n, d: _k.add(_k.subtract(0.42, _k.multiply(
        _k.cos(_k.multiply(n, 2 * _math.pi / d)), 0.5)), _k.multiply(
        _k.cos(_k.multiply(n, 4 * _math.pi / d)), 0.08)))


def bartlett(M, *, stream=None):
    return _window(M, lambda n, d: _k.subtract(1, _k.abs(_k.divide(
        _k.subtract(_k.multiply(n, 2.0), d), float(d)))))


_ERFINV_REFINEMENTS = 4  # Halley steps: the error cubes each time


def _erfinv_guess(y):
    """sign(y) sqrt(-log(1 - y^2)): 1 - erf(x)^2 behaves like exp(-x^2), so this lands
    within 13% above the root for every |y| < 1 (the ratio tends to 2/sqrt(pi) at 0)."""
    spread = _k.multiply(_k.subtract(1.0, y), _k.add(1.0, y))
    return _k.multiply(_k.sign(y), _k.sqrt(_k.negative(_k.log(spread))))


def erfinv(a, *, stream=None):
    """The inverse of erf on (-1, 1) (+-inf at +-1, NaN outside). Halley's iteration on
    erf(x) = a in float64, whose erf is exact to rounding, so the result holds float32
    accuracy up to 1 - 2^-24: with f = erf(x) - a, f' = 2/sqrt(pi) exp(-x^2) and
    f'' = -2x f', Halley's step is f / (f' + x f)."""
    a = _arr(a)
    dtype = a.dtype if _is_float(a.dtype) else _k.float32
    y = a.astype(_k.float64)
    inside = _k.less(_k.abs(y), 1.0)
    # Outside (-1, 1) iterate on 0 instead, so nothing there turns into NaN or inf.
    safe = _k.where(inside, y, 0.0)
    x = _erfinv_guess(safe)
    for _ in range(_ERFINV_REFINEMENTS):
        f = _k.subtract(_k.erf(x), safe)
        slope = _k.multiply(_k.exp(_k.negative(_k.multiply(x, x))), 2.0 / _math.sqrt(_math.pi))
        x = _k.subtract(x, _k.divide(f, _k.add(slope, _k.multiply(x, f))))
    edge = _k.where(_k.equal(_k.abs(y), 1.0), _k.multiply(_k.sign(y), _math.inf), _math.nan)
    return _k.where(inside, x, edge, stream=stream).astype(dtype)


def median(a, axis=None, keepdims=False, *, stream=None):
    """The middle value (the mean of the two middle ones for an even count) along ``axis``
    (all axes for None); NaN where the values hold a NaN."""
    a = _arr(a)
    if not _is_float(a.dtype):
        a = a.astype(_k.float32)
    if axis is None:
        x, ax = _k.reshape(a, (-1,)), 0
    else:
        axes = [axis] if isinstance(axis, int) else list(axis)
        axes = [_axis(x, a.ndim, "median") for x in axes]
        rest = [i for i in range(a.ndim) if i not in axes]
        x = _k.transpose(a, rest + axes)
        x = _k.reshape(x, [a.shape[i] for i in rest] + [-1])
        ax = x.ndim - 1
    n = x.shape[ax]
    s = _k.sort(x, ax)
    lo = _k.take(s, _k.array([(n - 1) // 2]), axis=ax)
    hi = _k.take(s, _k.array([n // 2]), axis=ax)
    mid = _k.squeeze(_k.multiply(_k.add(lo, hi), 0.5), ax)
    mid = _k.where(any(isnan(x), ax), float("nan"), mid).astype(a.dtype)
    if keepdims:
        shape = list(a.shape)
        for i in (range(a.ndim) if axis is None else axes):
            shape[i] = 1
        mid = _k.reshape(mid, shape)
    return mid


def put_along_axis(a, indices, values, axis=None, *, stream=None):
    """``a`` with ``values`` written at ``indices`` along ``axis`` (the flattened array for
    None), as NumPy's put_along_axis; where an index repeats, the values written there are
    summed (NumPy keeps one of them)."""
    a, indices = _arr(a), _arr(indices)
    if axis is None:
        flat = put_along_axis(_k.reshape(a, (-1,)), _k.reshape(indices, (-1,)),
                              _k.reshape(_arr(values), (-1,)) if _arr(values).ndim else values,
                              0, stream=stream)
        return _k.reshape(flat, a.shape)
    ax = _axis(axis, a.ndim, "put_along_axis")
    if a.size == 0 or indices.size == 0:
        return a
    indices = indices.astype(_k.int32)
    indices = _k.where(_k.less(indices, 0), _k.add(indices, a.shape[ax]), indices)
    values = _k.broadcast_to(_k.astype(_arr(values), a.dtype), indices.shape)
    hit = _k.scatter_add_along_axis(_k.zeros(a.shape, _k.int32), indices,
                                    _k.ones(indices.shape, _k.int32), ax)
    written = _k.scatter_add_along_axis(_k.zeros(a.shape, a.dtype), indices, values, ax)
    return _k.where(_k.greater(hit, 0), written, a, stream=stream)


NAMES = ("finfo", "iinfo", "zeros_like", "ones_like", "empty", "empty_like", "tan", "sinh",
         "cosh", "arcsinh", "arccosh", "arctanh", "arctan", "arcsin", "arccos", "arctan2",
         "conjugate", "conj", "trunc", "logical_xor", "isposinf", "isneginf", "nan_to_num",
         "count_nonzero", "atleast_1d", "atleast_2d", "atleast_3d", "broadcast_shapes", "flip",
         "roll", "repeat", "tile", "diagonal", "diag", "trace", "tri", "outer", "tensordot",
         "inner", "vecdot", "kron", "linspace", "meshgrid", "diff", "unstack", "hanning",
         "hamming", "blackman", "bartlett", "erfinv", "median", "put_along_axis")
