"""Embedding: a lookup table of vectors indexed by integer ids, as mlx.nn.Embedding."""

import math

import kiln as mx

from .module import Module


class Embedding(Module):
    """``weight`` of shape (num_embeddings, dims), drawn from N(0, 1/dims); calling it with an
    integer array of any shape gives that shape plus (dims,)."""

    def __init__(self, num_embeddings: int, dims: int):
        super().__init__()
        scale = math.sqrt(1 / dims)
        self.weight = mx.random.normal((num_embeddings, dims), scale=scale)

    def _extra_repr(self):
        return f"{self.weight.shape[0]}, {self.weight.shape[1]}"

    def __call__(self, x):
        return mx.take(self.weight, x, axis=0)

    def as_linear(self, x):
        """The embedding used as an output layer (weights tied): x @ weight^T."""
        return mx.matmul(x, self.weight.T)
