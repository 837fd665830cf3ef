"""JAX jit of the training step bench_train times in Kiln: a 2-layer MLP 1024 -> 4096 -> 1024
with exact gelu, batch 256, float32, mean squared error, one Adam step (lr 1e-3, betas 0.9 and
0.999, eps 1e-8) written in jax.numpy (no optax), value_and_grad and update in one jax.jit.

Protocol as benchmarks/jax_peer.h describes: prints `ready jax <version>`, then for each line
`N` runs N steps (each step's outputs feed the next) and prints `best_ms .. cpu_ms ..`.
"""
import jax
import jax.numpy as jnp
from peer_loop import serve


def gelu(x):
    return x * 0.5 * (1.0 + jax.lax.erf(x / jnp.float32(2.0**0.5)))


def loss_fn(params, x, y):
    w1, b1, w2, b2 = params
    h = gelu(x @ w1 + b1)
    d = h @ w2 + b2 - y
    return jnp.mean(d * d)


def step(params, m, v, t, x, y):
    loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
    t = t + 1.0
    lr, b1, b2, eps = 1e-3, 0.9, 0.999, 1e-8
    new_p, new_m, new_v = [], [], []
    for p, g, mi, vi in zip(params, grads, m, v):
        mi = b1 * mi + (1 - b1) * g
        vi = b2 * vi + (1 - b2) * g * g
        mh = mi / (1 - b1**t)
        vh = vi / (1 - b2**t)
        new_p.append(p - lr * mh / (jnp.sqrt(vh) + eps))
        new_m.append(mi)
        new_v.append(vi)
    return tuple(new_p), tuple(new_m), tuple(new_v), t, loss


def main():
    k = jax.random.split(jax.random.PRNGKey(0), 6)
    params = (
        jax.random.uniform(k[0], (1024, 4096), jnp.float32, -1 / 32, 1 / 32),
        jax.random.uniform(k[1], (4096,), jnp.float32, -1 / 32, 1 / 32),
        jax.random.uniform(k[2], (4096, 1024), jnp.float32, -1 / 64, 1 / 64),
        jax.random.uniform(k[3], (1024,), jnp.float32, -1 / 64, 1 / 64),
    )
    x = jax.random.normal(k[4], (256, 1024), jnp.float32)
    y = jax.random.normal(k[5], (256, 1024), jnp.float32)
    m = tuple(jnp.zeros_like(p) for p in params)
    v = tuple(jnp.zeros_like(p) for p in params)
    t = jnp.float32(0)
    f = jax.jit(step)
    state = f(params, m, v, t, x, y)  # trace and compile outside the timing
    jax.block_until_ready(state)
    def run_once():
        nonlocal state
        state = f(state[0], state[1], state[2], state[3], x, y)
        jax.block_until_ready(state)

    serve(run_once)


if __name__ == "__main__":
    main()
