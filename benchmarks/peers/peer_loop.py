"""The request loop every JAX peer runs (benchmarks/jax_peer.h): prints `ready jax <version>`,
then for each line `N` on stdin calls `run_once` N times and prints the fastest call and the
process CPU time per call."""
import sys
import time

import jax


def serve(run_once):
    print(f"ready jax {jax.__version__}", flush=True)
    for line in sys.stdin:
        reps = max(1, int(line))
        best = float("inf")
        cpu0 = time.process_time()
        for _ in range(reps):
            t = time.perf_counter()
            run_once()
            best = min(best, time.perf_counter() - t)
        cpu = (time.process_time() - cpu0) / reps
        print(f"best_ms {best * 1e3:.4f} cpu_ms {cpu * 1e3:.4f}", flush=True)
