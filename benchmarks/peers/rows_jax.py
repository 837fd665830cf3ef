"""JAX jit of the row reductions bench_rows times in Kiln, over the last axis of a float32 array
of the given shape: softmax, log_softmax, layer_norm and rms_norm written as Kiln's nn writes
them (layer_norm with weight and bias, rms_norm with weight).
  KILN_ROWS_PEER_CASE="OP D0 [D1 ...]" rows_jax.py   (bench_rows sets it; or the same as arguments)
Protocol: benchmarks/peers/peer_loop.py (one `ready jax <version>`, then `best_ms ... cpu_ms ...`
per request line)."""
import os
import sys

import jax
import jax.numpy as jnp
from peer_loop import serve


def layer_norm(x, w, b):
    xc = x - jnp.mean(x, axis=-1, keepdims=True)
    return xc * jax.lax.rsqrt(jnp.mean(xc * xc, axis=-1, keepdims=True) + 1e-5) * w + b


def rms_norm(x, w, b):
    return x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-6) * w


OPS = {
    "softmax": lambda x, w, b: jax.nn.softmax(x, axis=-1),
    "log_softmax": lambda x, w, b: jax.nn.log_softmax(x, axis=-1),
    "layer_norm": layer_norm,
    "rms_norm": rms_norm,
}


def main():
    spec = sys.argv[1:] or os.environ["KILN_ROWS_PEER_CASE"].split()
    op, shape = spec[0], tuple(int(d) for d in spec[1:])
    k = jax.random.split(jax.random.PRNGKey(0), 3)
    x = jax.random.normal(k[0], shape, jnp.float32)
    w = jax.random.normal(k[1], shape[-1:], jnp.float32)
    b = jax.random.normal(k[2], shape[-1:], jnp.float32)
    f = jax.jit(OPS[op])
    f(x, w, b).block_until_ready()  # trace and compile outside the timing
    serve(lambda: f(x, w, b).block_until_ready())


if __name__ == "__main__":
    main()
