"""The training run of test_checkpoint.py: an MLP with dropout trained on a fixed sequence of
batches, checkpointed every 2 steps with kiln.utils.save_checkpoint; run in the test's process
(one rank) or as a script under mpiexec (data parallel: each rank takes its shard of the global
batch and the gradients are all-summed, as examples/python/train_data_parallel.py does).

  python checkpoint_train.py DIR PHASE OPTIMIZER MODE     (PHASE: reference, interrupted, resumed;
                                                          MODE: eager or compiled)

writes DIR/<phase>.rank<r>.json: ``{step: loss as float32 bits in hex}`` for the steps it ran.
"""
import json
import os
import struct
import sys
from functools import partial

import kiln as mx
import kiln.nn as nn
import kiln.optimizers as optim
from kiln.utils import load_checkpoint, save_checkpoint

GLOBAL_BATCH, STEPS, EVERY, STOP_AT = 64, 10, 2, 5


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = [nn.Linear(4, 32), nn.Dropout(0.25), nn.Linear(32, 32), nn.Dropout(0.25),
                       nn.Linear(32, 3)]

    def __call__(self, x):
        for layer in self.layers[:-1]:
            x = nn.relu(layer(x)) if isinstance(layer, nn.Linear) else layer(x)
        return self.layers[-1](x)


def batch(step):
    # The global batch of a step: a function of the step alone, never of the global key.
    k = mx.random.split(mx.random.key(1000 + step), 2)
    x = mx.random.normal((GLOBAL_BATCH, 4), key=k[0])
    y = mx.random.randint(0, 3, (GLOBAL_BATCH,), key=k[1])
    return x, y


def loss_fn(model, x, y):
    return nn.losses.cross_entropy(model(x), y, reduction="mean")


def bits(loss):
    return struct.pack("<f", loss.item()).hex()


def make_optimizer(name):
    if name == "adam":
        return optim.Adam(learning_rate=1e-2, bias_correction=True)
    if name == "sgd":
        return optim.SGD(learning_rate=0.1, momentum=0.9)
    raise ValueError(name)


def run(ckpt, phase, optimizer_name="adam", mode="eager", group=None):
    """Trains from step 0 (``reference``: all STEPS, no checkpoints; ``interrupted``: stops after
    STOP_AT, checkpointing every EVERY steps) or from ckpt's checkpoint (``resumed``: to STEPS).
    Returns ``{step: loss bits}`` of the steps run (1-based)."""
    rank = 0 if group is None else group.rank()
    size = 1 if group is None else group.size()
    # Fresh state for every phase: the resumed run starts from other weights and another key,
    # so whatever it gets right comes from the checkpoint.
    mx.random.seed(3 if phase != "resumed" else 77)
    model = MLP()
    model.train()
    optimizer = make_optimizer(optimizer_name)
    mx.random.seed(100 + rank)  # each rank's own dropout masks
    first = 1
    if phase == "resumed":
        first = load_checkpoint(ckpt, model, optimizer, group=group) + 1

    def step_fn(x, y):
        loss, grads = nn.value_and_grad(model, loss_fn)(model, x, y)
        if group is not None and size > 1:
            grads = nn.average_gradients(grads, group)
            loss = mx.distributed.all_sum(loss, group=group) / size
        optimizer.update(model, grads)
        return loss

    if mode == "compiled":
        optimizer.init(model.trainable_parameters())
        state = [model.state, optimizer.state, mx.random.state]
        step_fn = partial(mx.compile, inputs=state, outputs=state)(step_fn)

    part = GLOBAL_BATCH // size
    last = STOP_AT if phase == "interrupted" else STEPS
    losses = {}
    for step in range(first, last + 1):
        x, y = batch(step)
        loss = step_fn(x[rank * part:(rank + 1) * part], y[rank * part:(rank + 1) * part])
        mx.eval(loss, model.parameters(), optimizer.state)
        losses[step] = bits(loss)
        if phase == "interrupted" and step % EVERY == 0:
            save_checkpoint(ckpt, model, optimizer, step, group=group)
    return losses


def main():
    directory, phase, optimizer_name, mode = sys.argv[1:5]
    group = mx.distributed.init()
    losses = run(os.path.join(directory, "ckpt"), phase, optimizer_name, mode, group)
    with open(os.path.join(directory, f"{phase}.rank{group.rank()}.json"), "w") as f:
        json.dump(losses, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
