"""Optimizers with mlx.optimizers' names: ``import kiln.optimizers as optim``.

Every optimizer keeps its whole state (step, learning rate, per-parameter buffers) in the dict
``optimizer.state``, which a compiled training step captures beside ``model.state``.
"""

from .multi import MultiOptimizer
from .optimizer import Optimizer, clip_grad_norm
from .optimizers import SGD, AdaDelta, Adagrad, Adam, Adamax, AdamW, Lion, RMSprop
from .schedulers import (cosine_decay, exponential_decay, join_schedules, linear_schedule,
                         step_decay)
