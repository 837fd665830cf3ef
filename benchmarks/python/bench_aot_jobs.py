"""What the ahead-of-time and job paths cost from Python, against a direct compiled call, in one
run (taking turns): per call of a small function (the overhead, not the work) and for a gelu on 1M floats (the
work), through kiln.compile, its Executable, an Executable loaded from its artifact, and a
kiln.Scheduler job (submit and outputs(): the round trip through a worker thread).

  PYTHONPATH=build/python .venv/bin/python benchmarks/python/bench_aot_jobs.py [--rounds 7]
"""
import argparse
import os
import platform
import statistics
import tempfile
import time

import kiln as mx


def per_call(fns, calls, rounds):
    """For each function, the median over rounds of the mean time of one call, in seconds. The
    functions take turns within each round, so that all of them see the same machine."""
    for fn in fns:
        fn()
    out = [[] for _ in fns]
    for _ in range(rounds):
        for i, fn in enumerate(fns):
            t = time.perf_counter()
            for _ in range(calls):
                fn()
            out[i].append((time.perf_counter() - t) / calls)
    return [statistics.median(o) for o in out]


def paths(f, x, folder, sched):
    exe = f.lower(x).compile()
    path = os.path.join(folder, "f.kiln")
    exe.save(path)
    loaded = mx.Executable.load(path)
    return [("compiled f(x)", lambda: mx.eval(f(x))),
            ("executable exe(x)", lambda: mx.eval(exe(x))),
            ("loaded executable", lambda: mx.eval(loaded(x))),
            ("job: submit(f) + outputs()", lambda: sched.submit(f, (x,)).outputs())]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
                if l.startswith("model name")), platform.processor())
    print(f"kiln AOT and jobs from Python, {time.strftime('%Y-%m-%d')}, {cpu}, "
          f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}, Python {platform.python_version()}")
    cases = [("x * 2 + 1 on 16 floats", mx.compile(lambda x: x * 2.0 + 1.0), mx.ones((16,)), 2000),
             ("gelu on 1M floats", mx.compile(lambda x: x * (1 + mx.erf(x / 2**0.5)) / 2),
              mx.random.normal((1024, 1024)), 50)]
    with tempfile.TemporaryDirectory() as folder, mx.Scheduler(workers=1) as sched:
        for name, f, x, calls in cases:
            mx.eval(x)
            labels, fns = zip(*paths(f, x, folder, sched))
            times = list(zip(labels, per_call(fns, calls, args.rounds)))
            base = times[0][1]
            print(name)
            for label, t in times:
                print(f"  {label:30s} {t * 1e6:10.2f} us  {t / base:5.2f}x")


if __name__ == "__main__":
    main()
