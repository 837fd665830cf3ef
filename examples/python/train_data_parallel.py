"""Data-parallel training, the Python twin of examples/train_data_parallel.cpp, written as MLX
code with ``import kiln as mx``: every rank holds the whole model, takes its shard of each global
batch and averages its gradients with the others (nn.average_gradients) inside one compiled
step. Every rank also trains a second copy on the whole global batch, the single-process run.
Exits nonzero unless, after 50 steps, every rank holds bitwise-identical parameters and the
loss at every step equals the single-process loss to 1e-5.

  mpiexec -n 2 python examples/python/train_data_parallel.py    (alone: a one-rank group)
"""
import math
import sys
from functools import partial

import numpy as np

import kiln as mx
import kiln.nn as nn
import kiln.optimizers as optim
from kiln.utils import tree_flatten

GLOBAL_BATCH, STEPS = 512, 50


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


def trainer(group):
    mx.random.seed(3)  # the same initial weights for both copies
    model = MLP([2, 32, 32, 2])
    optimizer = optim.SGD(learning_rate=0.1, momentum=0.9)
    optimizer.init(model.trainable_parameters())
    state = [model.state, optimizer.state]

    @partial(mx.compile, inputs=state, outputs=state)
    def step(x, y):
        loss, grads = nn.value_and_grad(model, loss_fn)(model, x, y)
        if group is not None:  # the mean over ranks of each rank's mean over its shard
            grads = nn.average_gradients(grads, group)
            loss = mx.distributed.all_sum(loss, group=group) / group.size()
        optimizer.update(model, grads)
        return loss

    return model, step


def main():
    world = mx.distributed.init()
    rank, size = world.rank(), world.size()
    part = GLOBAL_BATCH // size
    model, parallel = trainer(world)
    _, single = trainer(None)
    worst = 0.0
    for it in range(1, STEPS + 1):
        x, y = disc_and_ring(GLOBAL_BATCH, 100 + it)
        a = parallel(x[rank * part:(rank + 1) * part], y[rank * part:(rank + 1) * part]).item()
        b = single(x, y).item()
        worst = max(worst, abs(a - b) / max(1.0, abs(b)))
        if rank == 0 and it % 10 == 0:
            print(f"step {it:2d}  loss {a:.6f}  single process {b:.6f}")
    identical = True
    for _, p in tree_flatten(model.parameters()):
        flat = mx.reshape(p, (1, -1))
        every = np.asarray(mx.distributed.all_gather(flat, group=world))
        identical = identical and all(every[r].tobytes() == np.asarray(flat)[0].tobytes()
                                      for r in range(size))
    ok = identical and worst <= 1e-5 and parallel.cache_size == 1
    all_ok = mx.distributed.all_min(mx.array(int(ok)), group=world).item()
    if rank == 0:
        print(f"{size} ranks: parameters bitwise identical on every rank: "
              f"{'yes' if identical else 'no'}; largest loss difference from the single "
              f"process: {worst:.2e}; traces of the step: {parallel.cache_size}")
        if not all_ok:
            print("FAIL on some rank")
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
