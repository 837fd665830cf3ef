"""An MLP learns what a linear model cannot: points inside a disc (class 0) against points on a
ring around it (class 1), as examples/train_mlp.cpp, written as MLX code with
``import kiln as mx``. A user-defined nn.Module (2 -> 32 -> 32 -> 2, ReLU), cross-entropy, Adam;
the whole step (forward, backward, update) is one compiled function with the model and the
optimizer state captured. Prints a progress bar and the held-out accuracy; exits nonzero when
it is below 95% after 300 steps or the step was traced more than once.

  python examples/python/train_mlp.py [--steps 300] [--quiet]
"""
import argparse
import math
import sys
from functools import partial

import kiln as mx
import kiln.nn as nn
import kiln.optimizers as optim


def disc_and_ring(n, seed):
    k = mx.random.split(mx.random.key(seed), 4)
    is_ring = mx.random.uniform(shape=(n, 1), key=k[0]) < 0.5
    theta = mx.random.uniform(0, 2 * math.pi, (n, 1), key=k[1])
    r = mx.where(is_ring, mx.random.uniform(1.5, 2.5, (n, 1), key=k[2]),
                 mx.random.uniform(0, 1, (n, 1), key=k[3]))
    x = mx.concatenate([r * mx.cos(theta), r * mx.sin(theta)], axis=1)
    return x, is_ring.squeeze(1).astype(mx.int32)


class MLP(nn.Module):
    def __init__(self, dims):
        super().__init__()
        self.layers = [nn.Linear(a, b) for a, b in zip(dims[:-1], dims[1:])]

    def __call__(self, x):
        for layer in self.layers[:-1]:
            x = nn.relu(layer(x))
        return self.layers[-1](x)


def loss_fn(model, x, y):
    return nn.losses.cross_entropy(model(x), y, reduction="mean")


def accuracy(model, x, y):
    return mx.mean(mx.argmax(model(x), axis=-1) == y).item()


def progress(i, total, loss, width=30):
    done = width * (i + 1) // total
    bar = "#" * done + "." * (width - done)
    end = "\n" if i + 1 == total else ""
    print(f"\r[{bar}] step {i + 1:4d}/{total}  loss {loss:.4f}", end=end, flush=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    args = parser.parse_args()

    mx.random.seed(3)
    train_x, train_y = disc_and_ring(512, 1)
    test_x, test_y = disc_and_ring(512, 2)
    model = MLP([2, 32, 32, 2])
    optimizer = optim.Adam(learning_rate=0.01, bias_correction=True)
    optimizer.init(model.trainable_parameters())  # the state's shape is fixed: one trace
    state = [model.state, optimizer.state]

    @partial(mx.compile, inputs=state, outputs=state)
    def step(x, y):
        loss, grads = nn.value_and_grad(model, loss_fn)(model, x, y)
        optimizer.update(model, grads)
        return loss

    before = accuracy(model, test_x, test_y)
    for i in range(args.steps):
        loss = step(train_x, train_y)
        if not args.quiet and (i % 10 == 9 or i + 1 == args.steps):
            progress(i, args.steps, loss.item())
    after = accuracy(model, test_x, test_y)
    print(f"held-out accuracy: {before:.3f} before training, {after:.3f} after {args.steps} steps")
    print(f"traces of the compiled step: {step.cache_size}")
    ok = after >= 0.95 and step.cache_size == 1
    if not ok:
        print("FAIL: expected held-out accuracy >= 0.95 and one trace")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
