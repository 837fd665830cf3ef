"""The compiled training step of issue 21 from Python, beside the same step from C++ and JAX's
jit of it, measured alternately in one run.

  PYTHONPATH=build/python .venv/bin/python benchmarks/python/bench_train_python.py
      [--cpp build/benchmarks/bench_train] [--peers ~/peers/bin/python] [--rounds 5]

The step (bench_train's): an MLP 1024 -> 4096 -> 1024 with exact gelu, batch 256, float32,
mean squared error and one Adam step with bias correction (lr 1e-3), written with kiln.nn and
kiln.optimizers as MLX code and compiled with the model and optimizer state captured. The C++
step runs in `bench_train --serve` and JAX's in benchmarks/peers/train_jax.py, each a child
process answering `N` with the fastest of N steps; every round times the three in turn and the
fastest step of each over the rounds is reported. A fourth entry runs the Python step with the
weights stored (in, out), C++'s layout, instead of MLX's (out, in): it shows what the transposes
MLX's layout asks for cost (kiln's matmul reads a transposed operand in place, so about
nothing). Memory: the cpu buffer pool's peak during one
step less what the process held besides the step's arguments, in Python
(kiln.get_peak_memory) and in C++ (the same count, bench_train's "measured" figure).
"""
import argparse
import os
import platform
import subprocess
import sys
import time
from functools import partial

import kiln as mx
import kiln.nn as nn
import kiln.optimizers as optim
from kiln.utils import tree_flatten

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = [nn.Linear(1024, 4096), nn.Linear(4096, 1024)]

    def __call__(self, x):
        return self.layers[1](nn.gelu(self.layers[0](x)))


class LinearInOut(nn.Module):
    """nn.Linear with W stored (in, out), as kiln::nn::Linear in C++: x @ W, no transpose."""

    def __init__(self, input_dims, output_dims):
        super().__init__()
        scale = (1 / input_dims) ** 0.5
        self.weight = mx.random.uniform(-scale, scale, (input_dims, output_dims))
        self.bias = mx.random.uniform(-scale, scale, (output_dims,))

    def __call__(self, x):
        return mx.matmul(x, self.weight) + self.bias


class MLPInOut(MLP):
    def __init__(self):
        nn.Module.__init__(self)
        self.layers = [LinearInOut(1024, 4096), LinearInOut(4096, 1024)]


def loss_fn(model, x, y):
    return nn.losses.mse_loss(model(x), y)


class PythonStep:
    def __init__(self, model_class=MLP):
        mx.random.seed(0)
        self.model = model_class()
        self.optimizer = optim.Adam(learning_rate=1e-3, bias_correction=True)
        self.optimizer.init(self.model.trainable_parameters())
        self.x = mx.random.normal((256, 1024), key=mx.random.key(1))
        self.y = mx.random.normal((256, 1024), key=mx.random.key(2))
        self.state = [self.model.state, self.optimizer.state]
        mx.eval(self.state, self.x, self.y)

        @partial(mx.compile, inputs=self.state, outputs=self.state)
        def step(x, y):
            loss, grads = nn.value_and_grad(self.model, loss_fn)(self.model, x, y)
            self.optimizer.update(self.model, grads)
            return loss

        self.step = step

    def run(self):
        loss = self.step(self.x, self.y)
        mx.eval(self.state, loss)

    def best_of(self, reps):
        best = float("inf")
        cpu0 = time.process_time()
        for _ in range(reps):
            t = time.perf_counter()
            self.run()
            best = min(best, time.perf_counter() - t)
        return {"best_ms": best * 1e3, "cpu_ms": (time.process_time() - cpu0) / reps * 1e3}

    def peak_bytes(self):
        # bench_train's count: the pool's peak during one step, less what else is live
        # besides the step's arguments (parameters, optimizer state, x, y).
        args = sum(a.nbytes for _, a in tree_flatten(self.state)) + self.x.nbytes + self.y.nbytes
        before = mx.get_active_memory()
        mx.reset_peak_memory()
        self.run()
        return mx.get_peak_memory() - (before - args)


class Peer:
    """A child process speaking benchmarks/jax_peer.h's protocol."""

    def __init__(self, argv, ready):
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True, bufsize=1)
        line = self.proc.stdout.readline()
        while line and not line.startswith(ready):
            line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"{argv[0]} ended before printing '{ready}'")
        self.version = line[len(ready):].strip()

    def best_of(self, reps):
        self.proc.stdin.write(f"{reps}\n")
        words = self.proc.stdout.readline().split()
        return {k: float(v) for k, v in zip(words[::2], words[1::2])}

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


def cpu_model():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cpp", default=os.path.join(ROOT, "build/benchmarks/bench_train"))
    parser.add_argument("--peers", default=os.path.expanduser("~/peers/bin/python"))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--reps", type=int, default=4)
    args = parser.parse_args()

    py = PythonStep()
    py.run()  # trace and build the kernels outside the timing
    py_in_out = PythonStep(MLPInOut)
    py_in_out.run()
    peers = {"C++ (bench_train)": Peer([args.cpp, "--serve"], "ready kiln")}
    if os.path.exists(args.peers):
        script = os.path.join(ROOT, "benchmarks/peers/train_jax.py")
        try:
            peers["JAX jit"] = Peer([args.peers, script], "ready jax")
        except RuntimeError as e:
            print(f"JAX not measured: {e}")
    else:
        print(f"JAX not measured: no {args.peers}")

    best = {"Kiln from Python": {"best_ms": float("inf")},
            "  same, W stored (in, out)": {"best_ms": float("inf")}}
    best.update({name: {"best_ms": float("inf")} for name in peers})
    for _ in range(args.rounds):
        runs = [("Kiln from Python", py.best_of), ("  same, W stored (in, out)", py_in_out.best_of)]
        runs += [(n, p.best_of) for n, p in peers.items()]
        for name, fn in runs:
            r = fn(args.reps)
            if r["best_ms"] < best[name]["best_ms"]:
                best[name] = r
    py_peak = py.peak_bytes()
    del py_in_out
    for p in peers.values():
        p.close()

    print(f"== training step: MLP 1024->4096->1024 gelu, batch 256, mse, Adam (float32); "
          f"{args.rounds} alternating rounds, fastest of {args.reps} steps each")
    print(f"   CPU: {cpu_model()}, {os.cpu_count()} logical cores; kiln device "
          f"{mx.default_device()}")
    flops = 3 * 2.0 * 256 * (1024.0 * 4096 * 2)
    for name, r in best.items():
        print(f"  {name:24s} {r['best_ms']:9.2f} ms  (cpu {r.get('cpu_ms', 0):8.2f} ms)  "
              f"{flops / r['best_ms'] / 1e6:6.0f} GFLOP/s")
    py_ms = best["Kiln from Python"]["best_ms"]
    cpp = best["C++ (bench_train)"]
    print(f"  Python / C++ step time:   {py_ms / cpp['best_ms']:.3f}x (goal <= 1.05); with W "
          f"stored (in, out) {best['  same, W stored (in, out)']['best_ms'] / cpp['best_ms']:.3f}x")
    if "JAX jit" in best:
        print(f"  Python / JAX jit time:    {py_ms / best['JAX jit']['best_ms']:.3f}x "
              f"(goal <= 1.0)")
    print(f"  traces of the Python step: {py.step.cache_size}")
    print(f"  peak memory of one step: Python {py_peak / 1e6:.1f} MB, C++ {cpp['peak_mb']:.1f} MB"
          f"; Python / C++ = {py_peak / 1e6 / cpp['peak_mb']:.3f} (goal <= 1.1)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
