"""NumPy's side of bench_native: the same cases on the same sizes, the fastest of `reps` calls
each, printed as `<case> best_ms <ms>` lines, after `ready numpy <version>`. Arguments: n reps."""
import sys
import time

import numpy as np


def best(f, reps):
    b = float("inf")
    for _ in range(reps):
        t = time.perf_counter()
        f()
        b = min(b, time.perf_counter() - t)
    return b * 1e3


def main():
    n, reps = int(sys.argv[1]), int(sys.argv[2])
    rng = np.random.default_rng(0)
    x = rng.standard_normal(n).astype(np.float32)
    idx = rng.integers(0, n, n)
    print(f"ready numpy {np.__version__}", flush=True)
    cases = {
        "sort": lambda: np.sort(x),
        "argsort": lambda: np.argsort(x),
        "argsort_stable": lambda: np.argsort(x, kind="stable"),
        "cumsum": lambda: np.cumsum(x),
        "take": lambda: np.take(x, idx),
        "scatter_add": lambda: np.bincount(idx, weights=x, minlength=n),
        "copy": lambda: x.copy(),
    }
    for name, f in cases.items():
        f()
        print(f"{name} best_ms {best(f, reps):.4f}", flush=True)


main()
