"""Peers for `kiln bench --peers`: the suite's cases through NumPy, JAX and MLX, in the same run.

Reads the cases as JSON on stdin ({"seconds": s, "cases": [{"name", "shape", "dims"}]}), times
each case eagerly and, where the library has one, under its compiler (jax.jit, mx.compile), and
prints one JSON object on stdout: {"results": [...], "missing": ["jax: No module named 'jax'"]}.
A library that is not importable is reported missing, never installed. Kiln never depends on it.
"""
import importlib
import json
import math
import statistics
import sys
import time


def timed(call, sync, seconds):
    sync(call())  # warm: compile, allocate
    samples, end = [], time.perf_counter() + seconds
    while len(samples) < 3 or (time.perf_counter() < end and len(samples) < 1000):
        t0 = time.perf_counter()
        sync(call())
        samples.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(samples), min(samples), max(samples)


def numpy_cases(np):
    def normal(*shape):
        return np.random.default_rng(0).standard_normal(shape, dtype=np.float32)

    def norm(x, rms):
        if rms:
            return x / np.sqrt(np.mean(x * x, -1, keepdims=True) + 1e-6)
        xc = x - x.mean(-1, keepdims=True)
        return xc / np.sqrt(np.mean(xc * xc, -1, keepdims=True) + 1e-5)

    def softmax(x):
        e = np.exp(x - x.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)

    rng = np.random.default_rng(1)
    return {
        "softmax": lambda d: (softmax, [normal(*d)]),
        "layer norm": lambda d: (lambda x: norm(x, False), [normal(*d)]),
        "rms norm": lambda d: (lambda x: norm(x, True), [normal(*d)]),
        "column sum": lambda d: (lambda x: x.sum(0), [normal(*d)]),
        "row sum": lambda d: (lambda x: x.sum(1), [normal(*d)]),
        "full sum": lambda d: (lambda x: x.sum(), [normal(*d)]),
        "random normal": lambda d: (lambda: rng.standard_normal(d[0], dtype=np.float32), []),
        "attention": lambda d: (
            lambda q, k, v: softmax(q @ k.transpose(0, 2, 1) / math.sqrt(d[2])) @ v,
            [normal(*d), normal(*d), normal(*d)]),
    }


def array_cases(xp, erf, key_normal):
    def gelu(x):
        return x * (1.0 + erf(x / math.sqrt(2.0))) / 2.0

    def norm(x, rms):
        if rms:
            return x / xp.sqrt(xp.mean(x * x, -1, keepdims=True) + 1e-6)
        xc = x - xp.mean(x, -1, keepdims=True)
        return xc / xp.sqrt(xp.mean(xc * xc, -1, keepdims=True) + 1e-5)

    def softmax(x):
        e = xp.exp(x - xp.max(x, -1, keepdims=True))
        return e / xp.sum(e, -1, keepdims=True)

    def swap(k):
        return xp.swapaxes(k, 1, 2)

    n = key_normal
    return {
        "gelu": lambda d: (gelu, [n(d, 1)]),
        "softmax": lambda d: (softmax, [n(d, 1)]),
        "layer norm": lambda d: (lambda x: norm(x, False), [n(d, 1)]),
        "rms norm": lambda d: (lambda x: norm(x, True), [n(d, 1)]),
        "column sum": lambda d: (lambda x: xp.sum(x, 0), [n(d, 1)]),
        "row sum": lambda d: (lambda x: xp.sum(x, 1), [n(d, 1)]),
        "full sum": lambda d: (lambda x: xp.sum(x), [n(d, 1)]),
        "mlp block": lambda d: (
            lambda x, w1, b1, w2, b2: gelu(x @ w1 + b1) @ w2 + b2,
            [n([d[0], d[1]], 1), n([d[1], d[2]], 2) * 0.03, n([d[2]], 3),
             n([d[2], d[1]], 4) * 0.015, n([d[1]], 5)]),
        "attention": lambda d: (
            lambda q, k, v: softmax(q @ swap(k) / math.sqrt(d[2])) @ v,
            [n(d, 1), n(d, 2), n(d, 3)]),
    }


def run_library(name, cases, seconds, results, missing):
    try:
        if name == "numpy":
            np = importlib.import_module("numpy")
            table, modes, sync = numpy_cases(np), [("eager", None)], lambda r: r
        elif name == "jax":
            jax = importlib.import_module("jax")
            jnp = jax.numpy

            def jnormal(d, seed):
                return jax.random.normal(jax.random.PRNGKey(seed), tuple(d), jnp.float32)

            table = array_cases(jnp, jax.scipy.special.erf, jnormal)
            counter = [0]

            def jdraw(d):
                counter[0] += 1
                return lambda: jax.random.normal(jax.random.PRNGKey(counter[0]), (d[0],))

            table["random normal"] = lambda d: (jdraw(d), [])
            modes, sync = [("eager", None), ("jit", jax.jit)], lambda r: r.block_until_ready()
        else:
            mx = importlib.import_module("mlx.core")

            def mnormal(d, seed):
                return mx.random.normal(list(d), key=mx.random.key(seed))

            table = array_cases(mx, mx.erf, mnormal)
            table["random normal"] = lambda d: (lambda: mx.random.normal([d[0]]), [])
            modes, sync = [("eager", None), ("jit", mx.compile)], mx.eval
    except Exception as e:  # not importable: say so, never install
        missing.append(f"{name}: {e}")
        return
    for case in cases:
        if case["name"] not in table:
            continue
        fn, args = table[case["name"]](case["dims"])
        for mode, wrap in modes:
            if mode == "jit" and not args:
                continue  # a fresh random draw per call is an eager op
            rec = {"case": case["name"], "shape": case["shape"], "peer": name, "mode": mode}
            try:
                f = wrap(fn) if wrap else fn
                med, lo, hi = timed(lambda: f(*args), sync, seconds)
                rec.update(median_ms=med, min_ms=lo, max_ms=hi)
            except Exception as e:
                rec["error"] = f"{type(e).__name__}: {e}"
            results.append(rec)


def main():
    spec = json.load(sys.stdin)
    results, missing = [], []
    for lib in ("numpy", "jax", "mlx"):
        run_library(lib, spec["cases"], spec["seconds"], results, missing)
    json.dump({"results": results, "missing": missing}, sys.stdout)


if __name__ == "__main__":
    main()
