"""Ahead of time from Python: lower a function whose heavy part is pinned to a device, print its
text form and analyses, compile it, save the artifact, then load and run it in another process
with the pinned device remapped. Exits nonzero if any result differs.

    python examples/python/aot.py            (PYTHONPATH=build/python in a checkout)
"""
import os
import subprocess
import sys
import tempfile

import numpy as np

import kiln as mx


def available(name):
    return any(i["device"].type == name and i["available"] for i in mx.devices())


# The pinned part goes to OpenCL when this machine has it; the loading process moves it to the
# CPU with a remap, as a machine without that device would have to.
PIN = "opencl:0" if available("opencl") else "reference:0"
TARGET = "cpu:0" if available("cpu") else "reference:0"


def step(x):
    with mx.compute_on(mx.device(PIN)):
        h = mx.exp(x) * 2.0
    return mx.sum(h, axis=-1, keepdims=True) + x


def devices_run(call):
    with mx.profile() as p:
        out = call()
        mx.eval(out)
    return out, sorted({str(e["device"]) for e in p.events})


def load_and_run(folder):
    """The second process: no Python function, only the artifact."""
    exe = mx.Executable.load(os.path.join(folder, "step.kiln"), remap={PIN: TARGET})
    x = mx.load(os.path.join(folder, "x.npy"))
    (y,), ran_on = devices_run(lambda: exe(x))
    mx.save(os.path.join(folder, "y.npy"), y)
    print(f"process {os.getpid()}: loaded step.kiln with {PIN} remapped to {TARGET}; "
          f"tasks ran on {', '.join(ran_on)}")


def main():
    f = mx.compile(step)
    x = mx.random.normal((4, 8), key=mx.random.key(0))

    lowered = f.lower(x)  # traces and lowers; runs nothing
    print(lowered.as_text())
    print("cost analysis:")
    print(lowered.cost_analysis())
    exe = lowered.compile()  # builds the kernels
    print("memory analysis:")
    print(exe.memory_analysis())

    direct, direct_on = devices_run(lambda: f(x))
    aot, aot_on = devices_run(lambda: exe(x))
    same = np.array_equal(np.array(direct), np.array(aot)) and direct_on == aot_on
    print(f"direct call and executable: same results and devices ({', '.join(aot_on)}): "
          f"{'yes' if same else 'NO'}")

    with tempfile.TemporaryDirectory() as folder:
        exe.save(os.path.join(folder, "step.kiln"))
        mx.save(os.path.join(folder, "x.npy"), x)
        subprocess.run([sys.executable, __file__, "--load", folder], check=True)
        y = np.load(os.path.join(folder, "y.npy"))
    agree = np.allclose(y, np.array(aot), rtol=1e-5, atol=1e-6)
    print(f"the other process's result agrees with this one's: {'yes' if agree else 'NO'}")
    return 0 if same and agree else 1


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--load":
        load_and_run(sys.argv[2])
    else:
        sys.exit(main())
