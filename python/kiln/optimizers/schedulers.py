"""Learning-rate schedules with mlx.optimizers' names: functions of the step (an array, so
they run inside a compiled step) to pass as an optimizer's ``learning_rate``."""

import math

import kiln as mx


def _float_step(step):
    return mx.asarray(step).astype(mx.float32)


def exponential_decay(init, decay_rate):
    """init * decay_rate^step."""
    return lambda step: init * mx.power(decay_rate, _float_step(step))


def step_decay(init, decay_rate, step_size):
    """init * decay_rate^(step // step_size)."""
    return lambda step: init * mx.power(decay_rate, mx.floor(_float_step(step) / step_size))


def cosine_decay(init, decay_steps, end=0.0):
    """From init to end over decay_steps along half a cosine, then end."""
    if decay_steps <= 0:
        raise mx.Error(f"optimizers.cosine_decay: decay_steps must be > 0, got {decay_steps}")

    def schedule(step):
        s = mx.minimum(_float_step(step), decay_steps)
        return end + (init - end) * 0.5 * (1 + mx.cos(s * (math.pi / decay_steps)))

    return schedule


def linear_schedule(init, end, steps):
    """From init to end linearly over ``steps`` steps, then end."""
    if steps < 1:
        raise mx.Error(f"optimizers.linear_schedule: steps must be >= 1, got {steps}")

    def schedule(step):
        s = mx.minimum(_float_step(step), steps)
        return init + s * ((end - init) / steps)

    return schedule


def join_schedules(schedules, boundaries):
    """``schedules[0]`` until ``boundaries[0]``, then ``schedules[1]`` counted from that step,
    and so on (one boundary fewer than schedules)."""
    if not schedules:
        raise mx.Error("optimizers.join_schedules: no schedules")
    if len(boundaries) != len(schedules) - 1:
        raise mx.Error(f"optimizers.join_schedules: {len(schedules)} schedules need "
                       f"{len(schedules) - 1} boundaries, got {len(boundaries)}")

    def schedule(step):
        s = _float_step(step)
        out = mx.asarray(schedules[0](s)).astype(mx.float32)
        for boundary, later in zip(boundaries, schedules[1:]):
            out = mx.where(s < boundary, out, later(s - boundary))
        return out

    return schedule
