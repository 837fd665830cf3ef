"""JAX jit of the MLP block bench_matmul times in Kiln: gelu(x @ W1 + b1) @ W2 + b2, float32,
x 256x1024, W1 1024x4096, W2 4096x1024, gelu x * (1 + erf(x / sqrt(2))) / 2 as Kiln writes it.

bench_matmul runs this only when a Python with jax is present (~/peers or --python); JAX is never
a build or test dependency. It talks over stdin/stdout so that Kiln's and JAX's timings can
alternate within one run (the machine is shared; alternating lets both see the same load):
  prints `ready jax <version>` once compiled, then for each line `N` on stdin runs N calls and
  prints `best_ms <fastest call in ms> cpu_ms <process CPU time per call, all threads>`; exits at
  end of input.
"""
import jax
import jax.numpy as jnp
from peer_loop import serve


def mlp(x, w1, b1, w2, b2):
    h = x @ w1 + b1
    h = h * (1.0 + jax.lax.erf(h / jnp.float32(2.0**0.5))) / 2.0
    return h @ w2 + b2


def main():
    k = jax.random.split(jax.random.PRNGKey(0), 5)
    args = (
        jax.random.normal(k[0], (256, 1024), jnp.float32),
        jax.random.normal(k[1], (1024, 4096), jnp.float32) * 0.03,
        jax.random.normal(k[2], (4096,), jnp.float32),
        jax.random.normal(k[3], (4096, 1024), jnp.float32) * 0.015,
        jax.random.normal(k[4], (1024,), jnp.float32),
    )
    f = jax.jit(mlp)
    f(*args).block_until_ready()  # trace and compile outside the timing
    serve(lambda: f(*args).block_until_ready())


if __name__ == "__main__":
    main()
