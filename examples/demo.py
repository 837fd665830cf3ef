"""The Python side of `make demo`: the same runtime from Python, MLX's way of writing it."""
import time

import kiln as mx


@mx.compile
def gelu(x):
    return x * (1 + mx.erf(x / 2**0.5)) / 2


x = mx.random.normal((256, 4096))
mx.eval(gelu(x))  # traces and compiles once
start = time.perf_counter()
for _ in range(20):
    y = gelu(x)
mx.eval(y)
per_call = (time.perf_counter() - start) / 20
print(f"kiln (Python): compiled gelu on {x.shape} float32: {per_call * 1e3:.2f} ms per call, "
      f"{gelu.cache_size} trace")

# One trace serves every stream: the compiled function follows the caller's.
for name in ("opencl", "vulkan"):
    try:
        device = mx.device(name)
    except mx.Error as e:
        print(f"kiln (Python): {name} not available: {e}")
        continue
    with mx.stream(mx.new_stream(device)):
        z = gelu(x)
    err = mx.max(mx.abs(z - y)).item()
    print(f"kiln (Python): the same gelu on {device}: max |difference| from cpu {err:.2e}, "
          f"{gelu.cache_size} trace")

loss = lambda w: mx.mean((x @ w) ** 2)
g = mx.grad(loss)(mx.ones((4096, 1)) * 1e-3)
print(f"kiln (Python): grad of a least-squares loss: shape {g.shape}, norm "
      f"{mx.sqrt(mx.sum(g * g)).item():.4f}")
