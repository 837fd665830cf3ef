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


def sparse(sparsity, mean=0.0, std=1.0, dtype=None):
    """A normal(mean, std) matrix with ceil(sparsity * columns) entries of each row set to 0,
    the zeroed columns drawn independently per row (mlx.nn.init.sparse)."""
    dtype = dtype or mx.float32

    def init(a):
        if a.ndim != 2:
            raise mx.Error("Only tensors with 2 dimensions are supported")
        rows, cols = a.shape
        num_zeros = int(math.ceil(sparsity * cols))
        # Each entry's rank within its row under a random order: the lowest num_zeros go.
        rank = mx.argsort(mx.argsort(mx.random.uniform(shape=a.shape), axis=1), axis=1)
        values = mx.random.normal(a.shape, dtype, loc=mean, scale=std)
        return mx.where(rank < num_zeros, mx.zeros((), dtype), values)

    return init


def orthogonal(gain=1.0, dtype=None):
    """A matrix with orthonormal rows or columns (whichever are fewer), times ``gain``: the Q
    of a random normal square matrix, by Gram-Schmidt run twice per column in float64 (Kiln has
    no QR yet; MLX takes linalg.qr's Q with R's diagonal made positive, the same
    distribution). Builds one step per column: meant for initialisation, not large n in a
    loop."""
    dtype = dtype or mx.float32

    def init(a):
        if a.ndim != 2:
            raise mx.Error("Orthogonal initialization requires a 2D array but got"
                           f" a {a.ndim}D array.")
        rows, cols = a.shape
        n = max(rows, cols)
        m = mx.random.normal((n, n)).astype(mx.float64)
        q = None
        for j in range(n):
            v = m[:, j:j + 1]
            if q is not None:
                for _ in range(2):
                    v = v - mx.matmul(q, mx.matmul(q.T, v))
            v = v / mx.sqrt(mx.sum(v * v))
            q = v if q is None else mx.concatenate([q, v], axis=1)
            if j % 32 == 31:
                mx.eval(q)
        return (q[:rows, :cols] * gain).astype(dtype)

    return init
