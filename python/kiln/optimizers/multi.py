"""MultiOptimizer: different optimizers for different parameters, as MLX's."""

import kiln as mx

from ..utils import tree_flatten, tree_unflatten
from .optimizer import Optimizer


class MultiOptimizer(Optimizer):
    """Each parameter goes to the first optimizer whose filter ``filter(path, gradient)`` holds
    (``path`` dotted, as tree_flatten gives), and to the last optimizer when none does: one
    filter fewer than optimizers. ``state["states"]`` holds each optimizer's state."""

    def __init__(self, optimizers, filters=()):
        if len(filters) != len(optimizers) - 1:
            raise mx.Error(f"optimizers.MultiOptimizer: {len(optimizers)} optimizers need "
                           f"{len(optimizers) - 1} filters, got {len(filters)}")
        super().__init__()
        self.optimizers, self.filters = list(optimizers), list(filters)
        self._state = {"states": [o.state for o in self.optimizers]}

    @property
    def state(self):
        return self._state

    @state.setter
    def state(self, state):
        self._state = state
        for o, s in zip(self.optimizers, state["states"]):
            o.state = s

    @property
    def learning_rate(self):
        return self.optimizers[0].learning_rate

    def _split(self, tree):
        parts = [[] for _ in self.optimizers]
        for path, leaf in tree_flatten(tree):
            chosen = next((i for i, f in enumerate(self.filters) if f(path, leaf)),
                          len(self.optimizers) - 1)
            parts[chosen].append((path, leaf))
        return parts

    def init(self, parameters):
        for o, part in zip(self.optimizers, self._split(parameters)):
            if part:
                o.init(tree_unflatten(part))
        self._initialized = True

    def apply_gradients(self, gradients, parameters):
        merged = []
        for o, part in zip(self.optimizers, self._split(gradients)):
            if part:
                merged += tree_flatten(o.apply_gradients(tree_unflatten(part), parameters))
        return tree_unflatten(merged)
