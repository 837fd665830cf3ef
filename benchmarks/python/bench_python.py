"""What Kiln costs from Python, beside JAX and MLX in the same run (issue 19's four figures).

  PYTHONPATH=build/python .venv/bin/python benchmarks/python/bench_python.py [--peers ~/peers/bin/python]
      [--cpp build/benchmarks/bench_compile] [--quick]

1. a cached compiled call + eval on 0-d arrays, `exp(-x) + y`;
2. one eager op in a 1000-op chain (`z = z + 1.0` on a 0-d array, evaluated at the end: the
   chain bench_values times in C++);
3. np.asarray of an evaluated 256 MB cpu array (no copy), and kiln.array of a 256 MB NumPy
   array against np.copy of it;
4. compiled gelu on 32x1000x4096 float32 from Python against the same call from C++
   (bench_compile's compiled case, run as a child process between the Python rounds; the
   fastest call of each).
Peers run in child processes of the peers' interpreter (a venv with jax and mlx; never a
dependency of Kiln). Every figure is the median of several rounds; the table prints ratios.
"""
import argparse
import os
import platform
import re
import statistics
import subprocess
import sys
import time

import numpy as np

import kiln as mx

PEER_SCRIPT = r'''
import sys, time, statistics
which, case, reps, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
if which == "jax":
    import jax, jax.numpy as jnp
    f = jax.jit(lambda x, y: jnp.exp(-x) + y)
    x, y = jnp.array(1.0), jnp.array(2.0)
    def call(): f(x, y).block_until_ready()
    def chain():
        z = jnp.array(1.0)
        for _ in range(1000): z = z + 1.0
        z.block_until_ready()
    version = jax.__version__
else:
    import mlx.core as mx
    f = mx.compile(lambda x, y: mx.exp(-x) + y)
    x, y = mx.array(1.0), mx.array(2.0)
    def call(): mx.eval(f(x, y))
    def chain():
        z = mx.array(1.0)
        for _ in range(1000): z = z + 1.0
        mx.eval(z)
    version = mx.__version__
fn, per = (call, 1) if case == "call" else (chain, 1000)
fn()
out = []
for _ in range(rounds):
    t = time.perf_counter()
    for _ in range(reps): fn()
    out.append((time.perf_counter() - t) / reps / per)
print(version, statistics.median(out))
'''


def median_time(fn, reps, rounds, per=1):
    fn()
    out = []
    for _ in range(rounds):
        t = time.perf_counter()
        for _ in range(reps):
            fn()
        out.append((time.perf_counter() - t) / reps / per)
    return statistics.median(out)


def peer(python, which, case, reps, rounds):
    if not python:
        return None, None
    r = subprocess.run([python, "-c", PEER_SCRIPT, which, case, str(reps), str(rounds)],
                       capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        return None, r.stderr.strip().splitlines()[-1] if r.stderr else "failed"
    version, t = r.stdout.split()
    return float(t), version


def cpp_gelu(binary):
    """Seconds of bench_compile's fastest compiled gelu call on 32x1000x4096 (2 threads)."""
    if not binary or not os.path.exists(binary):
        return None
    r = subprocess.run([binary, "--benchmark_filter=BM_GeluCompiled/131072000/2/",
                        "--benchmark_min_time=0.5"], capture_output=True, text=True, timeout=600)
    m = re.search(r"n=131072000\s+2t: compiled\s+([0-9.]+) ms", r.stdout)
    return float(m.group(1)) * 1e-3 if m else None


def fastest_call(fn, calls):
    fn()
    best = float("inf")
    for _ in range(calls):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--peers", default=os.path.expanduser("~/peers/bin/python"))
    ap.add_argument("--cpp", default="build/benchmarks/bench_compile")
    ap.add_argument("--quick", action="store_true", help="fewer rounds, no 256 MB or gelu cases")
    args = ap.parse_args()
    peers = args.peers if os.path.exists(args.peers) else None
    rounds = 3 if args.quick else 7
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
                if l.startswith("model name")), platform.processor())
    print(f"kiln from Python, {time.strftime('%Y-%m-%d')}, {cpu}, {os.cpu_count()} cores, "
          f"Python {platform.python_version()}")
    rows = []

    f = mx.compile(lambda x, y: mx.exp(-x) + y)
    x, y = mx.array(1.0), mx.array(2.0)
    t = median_time(lambda: mx.eval(f(x, y)), 2000, rounds)
    rows.append(("cached compiled call + eval, 0-d", t, 3e-6,
                 {w: peer(peers, w, "call", 2000, rounds) for w in ("jax", "mlx")}))

    def chain():
        z = mx.array(1.0)
        for _ in range(1000):
            z = z + 1.0
        mx.eval(z)
    t = median_time(chain, 3, rounds, per=1000)
    rows.append(("one eager op in a 1000-op chain", t, 3e-6,
                 {w: peer(peers, w, "chain", 3, rounds) for w in ("jax", "mlx")}))

    for name, t, goal, ps in rows:
        peers_txt = "  ".join(f"{w} {p[0] * 1e6:.2f} us ({p[1]})" if p[0] else f"{w}: n/a"
                              for w, p in ps.items())
        print(f"{name:40s} kiln {t * 1e6:7.2f} us  (goal <= {goal * 1e6:.1f} us)  {peers_txt}")

    if args.quick:
        return
    big = np.random.default_rng(0).standard_normal(64 * 1024 * 1024).astype(np.float32)  # 256 MB
    a = mx.array(big) + 0
    mx.eval(a)
    t_view = median_time(lambda: np.asarray(a), 200, rounds)
    t_in = median_time(lambda: mx.eval(mx.array(big)), 3, rounds)
    t_copy = median_time(lambda: np.copy(big), 3, rounds)
    print(f"{'np.asarray of an evaluated 256 MB array':40s} kiln {t_view * 1e6:7.2f} us  "
          f"(goal <= 20 us; no copy)")
    print(f"{'kiln.array of a 256 MB NumPy array':40s} kiln {t_in * 1e3:7.2f} ms  np.copy "
          f"{t_copy * 1e3:.2f} ms  ratio {t_in / t_copy:.2f} (goal <= 1.3)")
    del a, big

    g = mx.compile(lambda x: x * (1 + mx.erf(x / 1.4142135623730951)) / 2)
    xg = mx.random.normal((32, 1000, 4096))
    mx.eval(xg)
    py, cc = [], []
    for _ in range(3):  # alternate, so both see the same machine
        py.append(fastest_call(lambda: mx.eval(g(xg)), 5))
        c = cpp_gelu(args.cpp)
        if c:
            cc.append(c)
    py_t = min(py)
    if cc:
        print(f"{'compiled gelu 32x1000x4096, Python/C++':40s} kiln {py_t * 1e3:7.2f} ms  C++ "
              f"{min(cc) * 1e3:.2f} ms  ratio {py_t / min(cc):.3f} (goal <= 1.02)")
    else:
        print(f"{'compiled gelu 32x1000x4096 from Python':40s} kiln {py_t * 1e3:7.2f} ms  "
              f"(C++ bench_compile not found at {args.cpp})")


if __name__ == "__main__":
    sys.exit(main())
