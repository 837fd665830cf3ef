"""Sequential: modules (or plain callables) applied in order, as mlx.nn.Sequential."""

from .module import Module


class Sequential(Module):
    """Calls ``layers[0]``, then ``layers[1]`` on its result, and so on. The layers are held in
    the list ``self.layers``, so their parameters are named ``layers.<i>.<name>``."""

    def __init__(self, *modules):
        super().__init__()
        self.layers = list(modules)

    def __call__(self, x):
        for layer in self.layers:
            x = layer(x)
        return x
