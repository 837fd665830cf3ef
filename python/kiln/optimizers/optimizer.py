"""The optimizer base, as mlx.optimizers.Optimizer: every value carried between steps (the step
count, the learning rate, per-parameter buffers) lives in the dict ``state``.

That makes ``state`` a pytree a compiled training step captures (``inputs``/``outputs``), so
momentum survives across calls and a new learning rate is a new array in it, not a retrace.
Per-parameter state is made on the first update (or by ``init``), mirroring the gradients'
tree.
"""

import kiln as mx

from ..utils import tree_map


class Optimizer:
    """Subclasses define ``init_single(parameter, state)`` (fill a parameter's state dict) and
    ``apply_single(gradient, parameter, state)`` (return the new parameter)."""

    def __init__(self, schedulers=None):
        self._initialized = False
        self._state = {"step": mx.array(0, mx.uint64)}
        self._schedulers = dict(schedulers or {})

    # ---- state ----

    @property
    def state(self):
        """The pytree of everything the optimizer carries between steps."""
        return self._state

    @state.setter
    def state(self, state):
        self._initialized = False
        self._state = state

    @property
    def step(self):
        return self._state["step"]

    @property
    def learning_rate(self):
        return self._state["learning_rate"]

    @learning_rate.setter
    def learning_rate(self, value):
        # Replaced in place in the captured dict: a compiled step sees it without retracing.
        self._state["learning_rate"] = mx.array(value, mx.float32)

    def _maybe_schedule(self, name, value):
        # A number becomes a float32 array in state; a callable is a schedule of the step.
        if callable(value):
            self._schedulers[name] = value
            value = value(self.step)
        self._state[name] = mx.array(value, mx.float32) if isinstance(value, (int, float)) \
            else mx.asarray(value)

    # ---- steps ----

    def init(self, parameters):
        """Makes the per-parameter state for ``parameters`` (a tree like the gradients) where
        there is none yet; optional, as the first update does it."""
        _init_tree(self, parameters, self._state, "parameters")
        self._initialized = True

    def apply_gradients(self, gradients, parameters):
        """The updated parameters, a tree like ``gradients``, from one step."""
        if not self._initialized:
            self.init(gradients)
        for name, schedule in self._schedulers.items():
            self._state[name] = mx.asarray(schedule(self.step)).astype(mx.float32)
        self._state["step"] = self.step + 1
        return tree_map(self.apply_single, gradients, parameters, self._state)

    def update(self, model, gradients):
        """One step: ``model.update(apply_gradients(gradients, model))``."""
        model.update(self.apply_gradients(gradients, model))

    def init_single(self, parameter, state):
        raise NotImplementedError

    def apply_single(self, gradient, parameter, state):
        raise NotImplementedError

    def _lr(self, like):
        # The learning rate in the gradient's dtype, so a float16 model stays float16.
        return self.learning_rate.astype(like.dtype)


def _init_tree(opt, params, state, where):
    # state mirrors params: a dict per array leaf, made by init_single when absent.
    if isinstance(params, dict):
        for k, p in params.items():
            if isinstance(p, mx.array):
                if k not in state:
                    state[k] = {}
                    opt.init_single(p, state[k])
            else:
                if k not in state:
                    state[k] = [] if isinstance(p, (list, tuple)) else {}
                _init_tree(opt, p, state[k], f"{where}.{k}")
    elif isinstance(params, (list, tuple)):
        while len(state) < len(params):
            state.append({})
        for i, p in enumerate(params):
            if isinstance(p, mx.array):
                if not state[i]:
                    opt.init_single(p, state[i])
            else:
                if isinstance(p, (list, tuple)) and not isinstance(state[i], list):
                    state[i] = []
                _init_tree(opt, p, state[i], f"{where}.{i}")
    else:
        raise mx.Error(f"optimizer.init: {where} is a {type(params).__name__}; expected a tree "
                       f"of arrays")


def clip_grad_norm(grads, max_norm):
    """``(grads scaled so their global L2 norm is at most max_norm, the norm before)``."""
    if not max_norm >= 0:
        raise mx.Error(f"optimizers.clip_grad_norm: max_norm must be >= 0, got {max_norm}")
    leaves = []
    tree_map(leaves.append, grads)
    total = mx.sqrt(sum((mx.sum(mx.square(g)) for g in leaves), mx.array(0.0)))
    scale = mx.minimum(max_norm / (total + 1e-6), 1.0)
    return tree_map(lambda g: g * (scale.astype(g.dtype) if _is_float(g) else scale), grads), total


def _is_float(a):
    return a.dtype.name.startswith(("float", "bfloat"))
