"""nn.value_and_grad: the gradient of a loss with respect to a model's trainable parameters."""

import functools

import kiln as mx


def value_and_grad(model, fn):
    """A function taking ``fn``'s arguments and returning ``(fn(*args), gradients)``, the
    gradients a tree like ``model.trainable_parameters()``. The model's arrays are put back as
    they were after each call (during it they are the transform's arrays)."""

    def with_parameters(params, *args, **kwargs):
        model.update(params)
        return fn(*args, **kwargs)

    vg = mx.value_and_grad(with_parameters)

    @functools.wraps(fn)
    def call(*args, **kwargs):
        params = model.trainable_parameters()
        try:
            return vg(params, *args, **kwargs)
        finally:
            model.update(params)

    return call
