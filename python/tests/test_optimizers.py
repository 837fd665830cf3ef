"""kiln.optimizers: each update rule against the same rule written in NumPy over several
steps, schedules against their formulas, state captured by compile (no retrace when the
learning rate changes), clip_grad_norm, and bad arguments."""
import math
from functools import partial

import numpy as np
import pytest

import kiln as mx
import kiln.nn as nn
import kiln.optimizers as optim
from kiln.utils import tree_flatten

RNG = np.random.default_rng(0)
P0 = {"w": RNG.standard_normal((3, 4)), "b": [RNG.standard_normal(4)]}
GRADS = [{"w": RNG.standard_normal((3, 4)), "b": [RNG.standard_normal(4)]} for _ in range(4)]


def np_sgd(lr, momentum=0.0, weight_decay=0.0, dampening=0.0, nesterov=False):
    def step(p, g, s, t):
        g = g + weight_decay * p
        if momentum <= 0:
            return p - lr * g
        v = momentum * s.get("v", 0) + (1 - dampening) * g
        s["v"] = v
        return p - lr * (g + momentum * v if nesterov else v)
    return step


def np_adam(lr, b1=0.9, b2=0.999, eps=1e-8, bias_correction=False, wd=0.0):
    def step(p, g, s, t):
        p = p * (1 - lr * wd)
        m = b1 * s.get("m", 0) + (1 - b1) * g
        v = b2 * s.get("v", 0) + (1 - b2) * g * g
        s["m"], s["v"] = m, v
        if bias_correction:
            return p - lr * (m / (1 - b1**t)) / (np.sqrt(v / (1 - b2**t)) + eps)
        return p - lr * m / (np.sqrt(v) + eps)
    return step


def np_rmsprop(lr, alpha=0.99, eps=1e-8):
    def step(p, g, s, t):
        s["v"] = alpha * s.get("v", 0) + (1 - alpha) * g * g
        return p - lr * g / (np.sqrt(s["v"]) + eps)
    return step


def np_adagrad(lr, eps=1e-8):
    def step(p, g, s, t):
        s["v"] = s.get("v", 0) + g * g
        return p - lr * g / (np.sqrt(s["v"]) + eps)
    return step


def np_adadelta(lr, rho=0.9, eps=1e-6):
    def step(p, g, s, t):
        v = rho * s.get("v", 0) + (1 - rho) * g * g
        d = np.sqrt(s.get("u", 0) + eps) / np.sqrt(v + eps) * g
        s["u"] = rho * s.get("u", 0) + (1 - rho) * d * d
        s["v"] = v
        return p - lr * d
    return step


def np_adamax(lr, b1=0.9, b2=0.999, eps=1e-8):
    def step(p, g, s, t):
        s["m"] = b1 * s.get("m", 0) + (1 - b1) * g
        s["v"] = np.maximum(b2 * s.get("v", 0), np.abs(g))
        return p - lr * s["m"] / (s["v"] + eps)
    return step


def np_lion(lr, b1=0.9, b2=0.99, wd=0.0):
    def step(p, g, s, t):
        c = b1 * s.get("m", 0) + (1 - b1) * g
        s["m"] = b2 * s.get("m", 0) + (1 - b2) * g
        return p * (1 - lr * wd) - lr * np.sign(c)
    return step


CASES = [
    (lambda: optim.SGD(0.1), np_sgd(0.1)),
    (lambda: optim.SGD(0.1, momentum=0.8), np_sgd(0.1, 0.8)),
    (lambda: optim.SGD(0.05, momentum=0.9, weight_decay=0.01, dampening=0.1),
     np_sgd(0.05, 0.9, 0.01, 0.1)),
    (lambda: optim.SGD(0.05, momentum=0.9, nesterov=True), np_sgd(0.05, 0.9, nesterov=True)),
    (lambda: optim.Adam(0.01), np_adam(0.01)),
    (lambda: optim.Adam(0.01, betas=(0.8, 0.99), bias_correction=True),
     np_adam(0.01, 0.8, 0.99, bias_correction=True)),
    (lambda: optim.AdamW(0.01), np_adam(0.01, wd=0.01)),
    (lambda: optim.RMSprop(0.01), np_rmsprop(0.01)),
    (lambda: optim.Adagrad(0.1), np_adagrad(0.1)),
    (lambda: optim.AdaDelta(1.0), np_adadelta(1.0)),
    (lambda: optim.Adamax(0.01), np_adamax(0.01)),
    (lambda: optim.Lion(0.01, weight_decay=0.1), np_lion(0.01, wd=0.1)),
]


@pytest.mark.parametrize("make,reference", CASES)
def test_update_rules_match_numpy(make, reference):
    opt = make()
    model = nn.Module()
    model.w = mx.array(P0["w"].astype(np.float32))
    model.b = [mx.array(P0["b"][0].astype(np.float32))]
    want = {"w": P0["w"].copy(), "b": P0["b"][0].copy()}
    states = {"w": {}, "b": {}}
    for t, g in enumerate(GRADS, start=1):
        opt.update(model, {"w": mx.array(g["w"].astype(np.float32)),
                           "b": [mx.array(g["b"][0].astype(np.float32))]})
        want["w"] = reference(want["w"], g["w"], states["w"], t)
        want["b"] = reference(want["b"], g["b"][0], states["b"], t)
    np.testing.assert_allclose(np.array(model.w), want["w"], rtol=2e-4, atol=2e-5)
    np.testing.assert_allclose(np.array(model.b[0]), want["b"], rtol=2e-4, atol=2e-5)
    assert opt.step.item() == len(GRADS) and opt.state["step"].dtype == mx.uint64


def test_half_precision_parameters_stay_half():
    model = nn.Linear(4, 2)
    model.set_dtype(mx.float16)
    opt = optim.Adam(1e-3)
    grads = {k: mx.ones_like(v) for k, v in model.parameters().items()}
    opt.update(model, grads)
    assert model.weight.dtype == mx.float16 and opt.state["weight"]["m"].dtype == mx.float16


def schedule_values(schedule, n):
    return [schedule(mx.array(i, mx.uint64)).item() for i in range(n)]


def test_schedules_match_their_formulas():
    got = schedule_values(optim.cosine_decay(0.1, 10, end=0.01), 14)
    want = [0.01 + 0.09 * 0.5 * (1 + math.cos(math.pi * min(i, 10) / 10)) for i in range(14)]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)
    got = schedule_values(optim.linear_schedule(0.0, 1.0, 4), 6)
    np.testing.assert_allclose(got, [0, 0.25, 0.5, 0.75, 1, 1], atol=1e-7)
    got = schedule_values(optim.step_decay(1.0, 0.5, 3), 7)
    np.testing.assert_allclose(got, [1, 1, 1, 0.5, 0.5, 0.5, 0.25], atol=1e-7)
    got = schedule_values(optim.exponential_decay(1.0, 0.9), 3)
    np.testing.assert_allclose(got, [1, 0.9, 0.81], rtol=1e-6)
    joined = optim.join_schedules([optim.linear_schedule(0, 1.0, 2), optim.step_decay(1.0, 0.5, 1)],
                                  [2])
    np.testing.assert_allclose(schedule_values(joined, 5), [0, 0.5, 1, 0.5, 0.25], atol=1e-7)
    with pytest.raises(mx.Error, match="3 schedules need 2 boundaries"):
        optim.join_schedules([optim.exponential_decay(1, 1)] * 3, [1])
    with pytest.raises(mx.Error, match="steps must be >= 1"):
        optim.linear_schedule(0, 1, 0)


def test_a_schedule_drives_the_learning_rate():
    opt = optim.SGD(learning_rate=optim.linear_schedule(1.0, 0.0, 4))
    model = nn.Module()
    model.w = mx.zeros((1,))
    seen = []
    for _ in range(5):
        opt.update(model, {"w": mx.ones((1,))})
        seen.append(opt.learning_rate.item())
    # lr at each update is the schedule of the step before it: 1, .75, .5, .25, 0
    assert seen == [1.0, 0.75, 0.5, 0.25, 0.0]
    assert model.w.item() == pytest.approx(-2.5)


def test_compiled_step_captures_state_and_learning_rate_changes_without_retrace():
    model = nn.Linear(3, 1)
    opt = optim.SGD(learning_rate=0.1, momentum=0.5)
    x, y = mx.random.normal((8, 3)), mx.random.normal((8, 1))
    state = [model.state, opt.state]

    def loss_fn(m, x, y):
        return nn.losses.mse_loss(m(x), y)

    @partial(mx.compile, inputs=state, outputs=state)
    def step(x, y):
        loss, grads = nn.value_and_grad(model, loss_fn)(model, x, y)
        opt.update(model, grads)
        return loss

    step(x, y)  # the first call makes the momentum buffers: the state grows, so one retrace
    step(x, y)
    traces = step.cache_size
    assert traces == 2 and set(opt.state["weight"]) == {"v"}
    before = model.weight
    opt.learning_rate = 0.0
    step(x, y)
    assert step.cache_size == traces and mx.array_equal(model.weight, before).item()
    assert opt.state["step"].item() == 3
    opt.learning_rate = 0.1
    step(x, y)
    assert not mx.array_equal(model.weight, before).item() and step.cache_size == traces


def test_clip_grad_norm():
    g = {"a": mx.array([3.0, 0.0]), "b": [mx.array([[4.0]])]}
    clipped, norm = optim.clip_grad_norm(g, 1.0)
    assert norm.item() == pytest.approx(5.0)
    np.testing.assert_allclose(np.array(clipped["a"]), [0.6, 0.0], rtol=1e-5)
    np.testing.assert_allclose(np.array(clipped["b"][0]), [[0.8]], rtol=1e-5)
    same, _ = optim.clip_grad_norm(g, 10.0)
    assert same["a"].tolist() == [3.0, 0.0]


def test_bad_arguments_raise():
    with pytest.raises(mx.Error, match="nesterov needs momentum"):
        optim.SGD(0.1, nesterov=True)
    with pytest.raises(mx.Error, match=r"betas must be in \[0, 1\)"):
        optim.Adam(0.1, betas=(1.5, 0.9))
    with pytest.raises(mx.Error, match="expected a tree of arrays"):
        optim.Adam(0.1).init({"w": 3})


def test_optimizer_state_is_a_plain_pytree():
    model = nn.Sequential(nn.Linear(2, 2), nn.ReLU(), nn.Linear(2, 1))
    opt = optim.Adam(1e-3)
    opt.init(model.trainable_parameters())
    names = [k for k, _ in tree_flatten(opt.state)]
    assert names[:2] == ["step", "learning_rate"]
    assert "layers.0.weight.m" in names and "layers.2.bias.v" in names
    assert not any(k.startswith("layers.1.") for k in names)
