"""Activation functions with mlx.nn's names, and a Module class for each.

Each is a composition of kiln ops, so it fuses into the surrounding kernel and differentiates.
"""

import math

import kiln as mx

from .module import Module


def sigmoid(x):
    return mx.sigmoid(x)


def tanh(x):
    return mx.tanh(x)


def relu(x):
    return mx.maximum(x, 0)


def relu6(x):
    return mx.minimum(mx.maximum(x, 0), 6)


def relu_squared(x):
    return mx.square(relu(x))


def leaky_relu(x, negative_slope=0.01):
    return mx.maximum(x * negative_slope, x)


def elu(x, alpha=1.0):
    return mx.where(x > 0, x, mx.expm1(x) * alpha)


def celu(x, alpha=1.0):
    return mx.maximum(x, 0) + mx.expm1(mx.minimum(x, 0) / alpha) * alpha


def selu(x):
    return elu(x, 1.67326) * 1.0507


def softplus(x):
    # log(1 + e^x) without overflow: max(x, 0) + log1p(e^-|x|).
    return mx.maximum(x, 0) + mx.log1p(mx.exp(-mx.abs(x)))


def log_sigmoid(x):
    return -softplus(-x)


def silu(x):
    return x * mx.sigmoid(x)


def mish(x):
    return x * mx.tanh(softplus(x))


def gelu(x):
    """Exact: x/2 (1 + erf(x / sqrt 2))."""
    return x * (1 + mx.erf(x / math.sqrt(2))) / 2


def gelu_approx(x):
    """The tanh approximation."""
    return 0.5 * x * (1 + mx.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x * x * x)))


def gelu_fast_approx(x):
    """The sigmoid approximation x sigmoid(1.702 x)."""
    return x * mx.sigmoid(1.702 * x)


def hardswish(x):
    return x * mx.minimum(mx.maximum(x + 3, 0), 6) / 6


def hard_tanh(x, min_val=-1.0, max_val=1.0):
    return mx.minimum(mx.maximum(x, min_val), max_val)


def hard_shrink(x, lambd=0.5):
    return mx.where(mx.abs(x) > lambd, x, 0)


def softshrink(x, lambd=0.5):
    return mx.where(mx.abs(x) > lambd, x - mx.sign(x) * lambd, 0)


def softsign(x):
    return x / (1 + mx.abs(x))


def softmin(x, axis=-1):
    return mx.softmax(-x, axis=axis)


def step(x, threshold=0.0):
    """1 where x >= threshold, else 0."""
    return mx.where(x >= threshold, 1, 0)


def softmax(x, axis=-1):
    return mx.softmax(x, axis=axis)


def log_softmax(x, axis=-1):
    # Shifted by the max first, so equal large logits still give log(1/n).
    shifted = x - mx.max(x, axis=axis, keepdims=True)
    return shifted - mx.logsumexp(shifted, axis=axis, keepdims=True)


def glu(x, axis=-1):
    """The first half of ``x`` along ``axis`` gated by the sigmoid of the second."""
    a, b = mx.split(x, 2, axis=axis)
    return a * mx.sigmoid(b)


def prelu(x, alpha):
    return mx.maximum(x, 0) + alpha * mx.minimum(x, 0)


def _module(name, fn, doc, **defaults):
    # A Module whose __call__ applies `fn` with the constructor's keyword arguments.
    def __init__(self, *args, **kwargs):
        Module.__init__(self)
        params = dict(defaults)
        params.update(zip(defaults, args))
        for k in kwargs:
            if k not in defaults:
                raise mx.Error(f"nn.{name}: unknown argument {k!r} (takes {list(defaults)})")
        params.update(kwargs)
        object.__setattr__(self, "_args", params)

    def __call__(self, x):
        return fn(x, **self._args)

    def _extra_repr(self):
        return ", ".join(f"{k}={v}" for k, v in self._args.items())

    return type(name, (Module,), {"__init__": __init__, "__call__": __call__,
                                  "_extra_repr": _extra_repr, "__doc__": doc})


Sigmoid = _module("Sigmoid", sigmoid, "sigmoid as a module")
Tanh = _module("Tanh", tanh, "tanh as a module")
ReLU = _module("ReLU", relu, "relu as a module")
ReLU6 = _module("ReLU6", relu6, "relu6 as a module")
ReLUSquared = _module("ReLUSquared", relu_squared, "relu_squared as a module")
LeakyReLU = _module("LeakyReLU", leaky_relu, "leaky_relu as a module", negative_slope=0.01)
ELU = _module("ELU", elu, "elu as a module", alpha=1.0)
CELU = _module("CELU", celu, "celu as a module", alpha=1.0)
SELU = _module("SELU", selu, "selu as a module")
Softplus = _module("Softplus", softplus, "softplus as a module")
LogSigmoid = _module("LogSigmoid", log_sigmoid, "log_sigmoid as a module")
SiLU = _module("SiLU", silu, "silu as a module")
Mish = _module("Mish", mish, "mish as a module")
Hardswish = _module("Hardswish", hardswish, "hardswish as a module")
HardTanh = _module("HardTanh", hard_tanh, "hard_tanh as a module", min_val=-1.0, max_val=1.0)
HardShrink = _module("HardShrink", hard_shrink, "hard_shrink as a module", lambd=0.5)
Softshrink = _module("Softshrink", softshrink, "softshrink as a module", lambd=0.5)
Softsign = _module("Softsign", softsign, "softsign as a module")
Softmin = _module("Softmin", softmin, "softmin as a module", axis=-1)
Step = _module("Step", step, "step as a module", threshold=0.0)
Softmax = _module("Softmax", softmax, "softmax as a module", axis=-1)
LogSoftmax = _module("LogSoftmax", log_softmax, "log_softmax as a module", axis=-1)
GLU = _module("GLU", glu, "glu as a module", axis=-1)

_GELU_FORMS = {"none": gelu, "precise": gelu_approx, "tanh": gelu_approx,
               "fast": gelu_fast_approx}


class GELU(Module):
    """gelu as a module: ``approx`` is "none" (exact), "precise" or "tanh" (the tanh form), or
    "fast" (the sigmoid form)."""

    def __init__(self, approx="none"):
        super().__init__()
        if approx not in _GELU_FORMS:
            raise mx.Error(f"nn.GELU: approx is {approx!r}; valid: {sorted(_GELU_FORMS)}")
        self.approx = approx

    def __call__(self, x):
        return _GELU_FORMS[self.approx](x)

    def _extra_repr(self):
        return f"approx={self.approx!r}"


class PReLU(Module):
    """prelu with a learned slope per channel (``num_parameters``, the last axis) or one."""

    def __init__(self, num_parameters=1, init=0.25):
        super().__init__()
        self.weight = mx.full((num_parameters,), init)

    def __call__(self, x):
        return prelu(x, self.weight)
