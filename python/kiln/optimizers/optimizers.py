"""The optimizers of mlx.optimizers, each an init_single / apply_single pair (optimizer.py)."""

import kiln as mx

from .optimizer import Optimizer


def _check_eps(name, eps):
    # The accumulators start at zero: eps <= 0 divides 0 by 0 for a zero gradient.
    if not eps > 0:
        raise mx.Error(f"optimizers.{name}: eps must be >0, got {eps}")


def _betas(name, betas):
    b1, b2 = betas
    if not (0 <= b1 < 1 and 0 <= b2 < 1):
        raise mx.Error(f"optimizers.{name}: betas must be in [0, 1), got {list(betas)}")
    return b1, b2


class SGD(Optimizer):
    """v = momentum v + (1 - dampening) g (g plus weight_decay p); p -= lr v (or, with
    nesterov, lr (g + momentum v)). Plain p -= lr g when momentum is 0."""

    def __init__(self, learning_rate, momentum=0.0, weight_decay=0.0, dampening=0.0,
                 nesterov=False):
        if nesterov and (momentum <= 0 or dampening != 0):
            raise mx.Error("optimizers.SGD: nesterov needs momentum > 0 and dampening 0")
        super().__init__()
        self._maybe_schedule("learning_rate", learning_rate)
        self.momentum, self.weight_decay = momentum, weight_decay
        self.dampening, self.nesterov = dampening, nesterov

    def init_single(self, parameter, state):
        state["v"] = mx.zeros_like(parameter)  # also without momentum, as MLX

    def apply_single(self, gradient, parameter, state):
        if self.weight_decay != 0:
            gradient = gradient + self.weight_decay * parameter
        lr = self._lr(gradient)
        if self.momentum <= 0:
            return parameter - lr * gradient
        v = self.momentum * state["v"]
        v = v + (1 - self.dampening) * gradient if self.dampening > 0 else v + gradient
        state["v"] = v
        update = gradient + self.momentum * v if self.nesterov else v
        return parameter - lr * update


class RMSprop(Optimizer):
    """v = alpha v + (1 - alpha) g^2; p -= lr g / (sqrt(v) + eps)."""

    def __init__(self, learning_rate, alpha=0.99, eps=1e-8):
        if alpha < 0:
            raise mx.Error(f"optimizers.RMSprop: alpha must be >= 0, got {alpha}")
        _check_eps("RMSprop", eps)
        super().__init__()
        self._maybe_schedule("learning_rate", learning_rate)
        self.alpha, self.eps = alpha, eps

    def init_single(self, parameter, state):
        state["v"] = mx.zeros_like(parameter)

    def apply_single(self, gradient, parameter, state):
        v = self.alpha * state["v"] + (1 - self.alpha) * mx.square(gradient)
        state["v"] = v
        return parameter - self._lr(gradient) * gradient / (mx.sqrt(v) + self.eps)


class Adagrad(Optimizer):
    """v += g^2; p -= lr g / (sqrt(v) + eps)."""

    def __init__(self, learning_rate, eps=1e-8):
        _check_eps("Adagrad", eps)
        super().__init__()
        self._maybe_schedule("learning_rate", learning_rate)
        self.eps = eps

    def init_single(self, parameter, state):
        state["v"] = mx.zeros_like(parameter)

    def apply_single(self, gradient, parameter, state):
        v = state["v"] + mx.square(gradient)
        state["v"] = v
        return parameter - self._lr(gradient) * gradient / (mx.sqrt(v) + self.eps)


class AdaDelta(Optimizer):
    """v = rho v + (1 - rho) g^2; d = sqrt(u + eps) / sqrt(v + eps) g; u = rho u + (1 - rho)
    d^2; p -= lr d."""

    def __init__(self, learning_rate, rho=0.9, eps=1e-6):
        if rho < 0:
            raise mx.Error(f"optimizers.AdaDelta: rho must be >= 0, got {rho}")
        _check_eps("AdaDelta", eps)
        super().__init__()
        self._maybe_schedule("learning_rate", learning_rate)
        self.rho, self.eps = rho, eps

    def init_single(self, parameter, state):
        state["v"] = mx.zeros_like(parameter)
        state["u"] = mx.zeros_like(parameter)

    def apply_single(self, gradient, parameter, state):
        v = self.rho * state["v"] + (1 - self.rho) * mx.square(gradient)
        d = mx.sqrt(state["u"] + self.eps) / mx.sqrt(v + self.eps) * gradient
        state["u"] = self.rho * state["u"] + (1 - self.rho) * mx.square(d)
        state["v"] = v
        return parameter - self._lr(gradient) * d


class Adam(Optimizer):
    """m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2; p -= lr m / (sqrt(v) + eps). With
    ``bias_correction`` (off by default, as in MLX) m and v are divided by 1 - b^t."""

    def __init__(self, learning_rate, betas=(0.9, 0.999), eps=1e-8, bias_correction=False):
        super().__init__()
        self._maybe_schedule("learning_rate", learning_rate)
        self.betas, self.eps = _betas(type(self).__name__, betas), eps
        self.bias_correction = bias_correction

    def init_single(self, parameter, state):
        state["m"] = mx.zeros_like(parameter)
        state["v"] = mx.zeros_like(parameter)

    def apply_single(self, gradient, parameter, state):
        b1, b2 = self.betas
        lr = self._lr(gradient)
        m = b1 * state["m"] + (1 - b1) * gradient
        v = b2 * state["v"] + (1 - b2) * mx.square(gradient)
        state["m"], state["v"] = m, v
        if not self.bias_correction:
            return parameter - lr * m / (mx.sqrt(v) + self.eps)
        t = self.step.astype(mx.float32)
        c1 = (1 - mx.power(b1, t)).astype(gradient.dtype)
        c2 = mx.sqrt(1 - mx.power(b2, t)).astype(gradient.dtype)
        return parameter - (lr / c1) * m / (mx.sqrt(v) / c2 + self.eps)


class AdamW(Adam):
    """Adam with decoupled weight decay: p *= 1 - lr weight_decay before the Adam step."""

    def __init__(self, learning_rate, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01,
                 bias_correction=False):
        super().__init__(learning_rate, betas, eps, bias_correction)
        self.weight_decay = weight_decay

    def apply_single(self, gradient, parameter, state):
        decayed = parameter * (1 - self._lr(gradient) * self.weight_decay)
        return super().apply_single(gradient, decayed, state)


class Adamax(Adam):
    """m = b1 m + (1 - b1) g; v = max(b2 v, |g|); p -= lr m / (v + eps)."""

    def __init__(self, learning_rate, betas=(0.9, 0.999), eps=1e-8):
        super().__init__(learning_rate, betas, eps)

    def apply_single(self, gradient, parameter, state):
        b1, b2 = self.betas
        m = b1 * state["m"] + (1 - b1) * gradient
        v = mx.maximum(b2 * state["v"], mx.abs(gradient))
        state["m"], state["v"] = m, v
        return parameter - self._lr(gradient) * m / (v + self.eps)


class Lion(Optimizer):
    """c = b1 m + (1 - b1) g; p -= lr sign(c) (after p *= 1 - lr weight_decay);
    m = b2 m + (1 - b2) g."""

    def __init__(self, learning_rate, betas=(0.9, 0.99), weight_decay=0.0):
        super().__init__()
        self._maybe_schedule("learning_rate", learning_rate)
        self.betas, self.weight_decay = _betas("Lion", betas), weight_decay

    def init_single(self, parameter, state):
        state["m"] = mx.zeros_like(parameter)

    def apply_single(self, gradient, parameter, state):
        b1, b2 = self.betas
        lr = self._lr(gradient)
        c = b1 * state["m"] + (1 - b1) * gradient
        state["m"] = b2 * state["m"] + (1 - b2) * gradient
        if self.weight_decay > 0:
            parameter = parameter * (1 - lr * self.weight_decay)
        return parameter - lr * mx.sign(c)
