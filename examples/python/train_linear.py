"""MLX's compile documentation ends with a compiled training step; this is that program with
``import kiln as mx``. A Linear(10, 1) model on 4 x 10 inputs, binary cross-entropy, SGD with
momentum 0.8 and learning rate 0.1, the step compiled with the model and the optimizer state
captured. It starts from the C++ example's weights (examples/train_linear.cpp), runs ten steps
compiled and ten uncompiled, and prints both losses (they agree to 1e-6) and the trace count.

  python examples/python/train_linear.py [--compare build/kiln_train_linear]

With --compare, also runs the C++ example and checks that its losses are these.
"""
import argparse
import math
import subprocess
import sys
from functools import partial

import kiln as mx
import kiln.nn as nn
import kiln.optimizers as optim


def loss_fn(model, x, y):
    logits = model(x).squeeze()
    return nn.losses.binary_cross_entropy(logits, y)


def train(compiled):
    x = mx.random.uniform(shape=(4, 10), key=mx.random.key(0))
    y = mx.array([0, 1, 0, 1])
    model = nn.Linear(10, 1)
    # The C++ example's initial weights: it stores W as (in, out), MLX and kiln.nn as (out, in).
    keys = mx.random.split(mx.random.key(1), 2)
    bound = 1 / math.sqrt(10)
    model.update({"weight": mx.random.uniform(-bound, bound, (10, 1), key=keys[0]).T,
                  "bias": mx.random.uniform(-bound, bound, (1,), key=keys[1])})
    optimizer = optim.SGD(learning_rate=0.1, momentum=0.8)
    # The momentum buffers exist before the first call, so the captured state keeps one shape
    # and the step is traced once (without this, the first call adds them and a second trace
    # follows).
    optimizer.init(model.trainable_parameters())

    state = [model.state, optimizer.state]

    def step(x, y):
        loss_and_grad_fn = nn.value_and_grad(model, loss_fn)
        loss, grads = loss_and_grad_fn(model, x, y)
        optimizer.update(model, grads)
        return loss

    if compiled:
        step = partial(mx.compile, inputs=state, outputs=state)(step)
    losses = []
    for _ in range(10):
        loss = step(x, y)
        mx.eval(state)
        losses.append(loss.item())
    return losses, step.cache_size if compiled else 0


def cpp_losses(binary):
    out = subprocess.run([binary], capture_output=True, text=True, check=True).stdout
    rows = [line.split() for line in out.splitlines()]
    return [float(r[1]) for r in rows if len(r) == 3 and r[0].isdigit()]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--compare", help="the C++ example (kiln_train_linear) to check against")
    args = parser.parse_args()
    compiled, traces = train(True)
    eager, _ = train(False)
    print("step  compiled loss  uncompiled loss")
    for i, (c, e) in enumerate(zip(compiled, eager)):
        print(f"{i:4d}  {c:13.6f}  {e:15.6f}")
    print(f"traces of the compiled step: {traces}")
    failures = []
    if any(abs(c - e) > 1e-6 for c, e in zip(compiled, eager)):
        failures.append("compiled and uncompiled losses differ by more than 1e-6")
    if not compiled[-1] < compiled[0]:
        failures.append("the loss did not fall")
    if traces != 1:
        failures.append(f"the step was traced {traces} times, expected once")
    if args.compare:
        cpp = cpp_losses(args.compare)
        worst = max(abs(a - b) for a, b in zip(compiled, cpp)) if cpp else math.inf
        print(f"C++ example's losses: largest difference {worst:.2e}")
        if len(cpp) != len(compiled) or worst > 1e-6 + 5e-7:  # C++ prints 6 decimals
            failures.append(f"the C++ example's losses differ (got {cpp})")
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
