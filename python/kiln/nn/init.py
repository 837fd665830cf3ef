"""Parameter initialisers with mlx.nn.init's names: each call returns a function that takes an
array and returns a new one of its shape (and the initialiser's dtype)."""

import math

import kiln as mx


def constant(value, dtype=None):
    dtype = dtype or mx.float32
    return lambda a: mx.full(a.shape, value, dtype)


def normal(mean=0.0, std=1.0, dtype=None):
    dtype = dtype or mx.float32
    return lambda a: mx.random.normal(a.shape, dtype, loc=mean, scale=std)


def uniform(low=0.0, high=1.0, dtype=None):
    dtype = dtype or mx.float32
    return lambda a: mx.random.uniform(low, high, a.shape, dtype)


def identity(dtype=None):
    dtype = dtype or mx.float32

    def init(a):
        if a.ndim != 2 or a.shape[0] != a.shape[1]:
            raise mx.Error(f"init.identity: needs a square 2-d array, got shape {a.shape}")
        return mx.eye(a.shape[0], dtype=dtype)

    return init


def _fans(a):
    if a.ndim < 2:
        raise mx.Error(f"init: fan in and fan out need an array of 2 or more axes, got shape "
                       f"{a.shape}")
    receptive = math.prod(a.shape[1:-1])
    return a.shape[-1] * receptive, a.shape[0] * receptive


def glorot_normal(dtype=None):
    dtype = dtype or mx.float32

    def init(a, gain=1.0):
        fan_in, fan_out = _fans(a)
        return mx.random.normal(a.shape, dtype, scale=gain * math.sqrt(2.0 / (fan_in + fan_out)))

    return init


def glorot_uniform(dtype=None):
    dtype = dtype or mx.float32

    def init(a, gain=1.0):
        fan_in, fan_out = _fans(a)
        limit = gain * math.sqrt(6.0 / (fan_in + fan_out))
        return mx.random.uniform(-limit, limit, a.shape, dtype)

    return init


def _fan(a, mode):
    fan_in, fan_out = _fans(a)
    if mode not in ("fan_in", "fan_out"):
        raise mx.Error(f"init: mode is {mode!r}; valid: 'fan_in', 'fan_out'")
    return fan_in if mode == "fan_in" else fan_out


def he_normal(dtype=None):
    dtype = dtype or mx.float32

    def init(a, mode="fan_in", gain=1.0):
        return mx.random.normal(a.shape, dtype, scale=gain / math.sqrt(_fan(a, mode)))

    return init


def he_uniform(dtype=None):
    dtype = dtype or mx.float32

    def init(a, mode="fan_in", gain=1.0):
        limit = gain * math.sqrt(3.0 / _fan(a, mode))
        return mx.random.uniform(-limit, limit, a.shape, dtype)

    return init


def _needs_matrix(a, name):
    if a.ndim != 2:
        raise ValueError(f"init.{name}: needs a 2D array, got a {a.ndim}D array of shape "
                         f"{tuple(a.shape)}")


def sparse(sparsity, mean=0.0, std=1.0, dtype=None):
    """normal(mean, std) values with ceil(sparsity * columns) entries of every row set to 0;
    which columns is drawn independently for each row."""
    dtype = dtype or mx.float32

    def init(a):
        _needs_matrix(a, "sparse")
        rows, cols = a.shape
        zeros_per_row = math.ceil(sparsity * cols)
        # Each entry's rank among its row's random keys picks a uniform subset of columns.
        keys = mx.random.uniform(shape=(rows, cols))
        rank = mx.argsort(mx.argsort(keys, axis=1), axis=1)
        values = mx.random.normal((rows, cols), dtype, loc=mean, scale=std)
        return mx.where(rank < zeros_per_row, mx.zeros((), dtype), values)

    return init


def _orthonormal_columns(m, n):
    """An m x n (m >= n) float64 matrix with orthonormal columns, uniformly distributed:
    the columns of a Gaussian matrix made orthonormal one after another. Each column is
    projected off the finished ones twice (once is not enough in floating point when a
    column is nearly dependent on them) and then normalised."""
    columns = mx.random.normal((n, m), mx.float64)
    done = None  # (m, k): the finished columns
    for j in range(n):
        v = columns[j][:, None]
        if done is not None:
            for _ in range(2):
                v = v - done @ (done.T @ v)
        v = v / mx.sqrt(mx.sum(v * v))
        done = v if done is None else mx.concatenate([done, v], axis=1)
        mx.eval(done)  # keep the graph one column deep
    return done


def orthogonal(gain=1.0, dtype=None):
    """A random matrix with orthonormal rows or columns (whichever are fewer), times
    ``gain``. Kiln has no QR factorisation yet, so it is built by Gram-Schmidt in float64."""
    dtype = dtype or mx.float32

    def init(a):
        _needs_matrix(a, "orthogonal")
        rows, cols = a.shape
        q = _orthonormal_columns(max(rows, cols), min(rows, cols))
        q = q if rows >= cols else q.T
        return (gain * q).astype(dtype)

    return init
