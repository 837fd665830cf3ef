"""Transformer layers with mlx.nn's names, arguments, defaults and parameter names:
TransformerEncoderLayer, TransformerEncoder, TransformerDecoderLayer, TransformerDecoder and
Transformer.

Every sub-block (attention, cross-attention, feed-forward) is wrapped the same way by
``_residual``: pre-norm (``norm_first``, the default) normalises the block's input and adds
the block's output back; post-norm adds first and normalises the sum. The stacks end with a
LayerNorm of their own. ``checkpoint`` is accepted; Kiln has no rematerialisation, so
nothing is recomputed (nn.utils.checkpoint)."""

from typing import Any, Callable, Optional

from .activations import relu
from .attention import MultiHeadAttention
from .dropout import Dropout
from .linear import Linear
from .module import Module
from .normalization import LayerNorm
from .utils import checkpoint as _checkpoint


def _residual(x, block, norm, dropout, norm_first):
    if norm_first:
        return x + dropout(block(norm(x)))
    return norm(x + dropout(block(x)))


class _FeedForward:
    """The position-wise MLP, linear2(dropout(activation(linear1(x)))), over a layer's own
    linear1/linear2 (kept on the layer, where MLX's parameter names put them)."""

    def __init__(self, layer, dropout):
        self.layer, self.dropout = layer, dropout

    def __call__(self, x):
        layer = self.layer
        return layer.linear2(self.dropout(layer.activation(layer.linear1(x))))


class TransformerEncoderLayer(Module):
    """Self-attention then a feed-forward block (``mlp_dims`` wide, 4 * dims by default),
    each residual and layer-normalised."""

    def __init__(self, dims: int, num_heads: int, mlp_dims: Optional[int] = None,
                 dropout: float = 0.0, activation: Callable[[Any], Any] = relu,
                 norm_first: bool = True):
        super().__init__()
        self.attention = MultiHeadAttention(dims, num_heads)
        self.ln1, self.ln2 = LayerNorm(dims), LayerNorm(dims)
        self.linear1 = Linear(dims, mlp_dims or 4 * dims)
        self.linear2 = Linear(mlp_dims or 4 * dims, dims)
        self.dropout1, self.dropout2 = Dropout(dropout), Dropout(dropout)
        self.activation, self.norm_first = activation, norm_first

    def __call__(self, x, mask):
        attend = lambda y: self.attention(y, y, y, mask)  # noqa: E731
        x = _residual(x, attend, self.ln1, self.dropout1, self.norm_first)
        mlp = _FeedForward(self, self.dropout2)
        return _residual(x, mlp, self.ln2, self.dropout2, self.norm_first)


class TransformerDecoderLayer(Module):
    """Masked self-attention, attention over the encoder's ``memory``, then a feed-forward
    block, each residual and layer-normalised."""

    def __init__(self, dims: int, num_heads: int, mlp_dims: Optional[int] = None,
                 dropout: float = 0.0, activation: Callable[[Any], Any] = relu,
                 norm_first: bool = True):
        super().__init__()
        self.self_attention = MultiHeadAttention(dims, num_heads)
        self.cross_attention = MultiHeadAttention(dims, num_heads)
        self.ln1, self.ln2, self.ln3 = LayerNorm(dims), LayerNorm(dims), LayerNorm(dims)
        self.linear1 = Linear(dims, mlp_dims or 4 * dims)
        self.linear2 = Linear(mlp_dims or 4 * dims, dims)
        self.dropout1, self.dropout2 = Dropout(dropout), Dropout(dropout)
        self.dropout3 = Dropout(dropout)
        self.activation, self.norm_first = activation, norm_first

    def __call__(self, x, memory, x_mask, memory_mask):
        own = lambda y: self.self_attention(y, y, y, x_mask)  # noqa: E731
        x = _residual(x, own, self.ln1, self.dropout1, self.norm_first)
        recall = lambda y: self.cross_attention(y, memory, memory, memory_mask)  # noqa: E731
        x = _residual(x, recall, self.ln2, self.dropout2, self.norm_first)
        mlp = _FeedForward(self, self.dropout3)
        return _residual(x, mlp, self.ln3, self.dropout3, self.norm_first)


class _Stack(Module):
    """``num_layers`` layers applied in turn, then a final LayerNorm."""

    def __init__(self, layer_type, num_layers, dims, num_heads, mlp_dims, dropout, activation,
                 norm_first, checkpoint):
        super().__init__()
        self.layers = [layer_type(dims, num_heads, mlp_dims, dropout, activation, norm_first)
                       for _ in range(num_layers)]
        self.ln = LayerNorm(dims)
        self.checkpoint = checkpoint

    def _run(self, x, *args):
        for layer in self.layers:
            call = _checkpoint(layer) if self.checkpoint else layer
            x = call(x, *args)
        return self.ln(x)


class TransformerEncoder(_Stack):
    """``num_layers`` TransformerEncoderLayers and a final LayerNorm."""

    def __init__(self, num_layers: int, dims: int, num_heads: int,
                 mlp_dims: Optional[int] = None, dropout: float = 0.0, activation=relu,
                 norm_first: bool = True, checkpoint: bool = False):
        super().__init__(TransformerEncoderLayer, num_layers, dims, num_heads, mlp_dims,
                         dropout, activation, norm_first, checkpoint)

    def __call__(self, x, mask):
        return self._run(x, mask)


class TransformerDecoder(_Stack):
    """``num_layers`` TransformerDecoderLayers and a final LayerNorm."""

    def __init__(self, num_layers: int, dims: int, num_heads: int,
                 mlp_dims: Optional[int] = None, dropout: float = 0.0, activation=relu,
                 norm_first: bool = True, checkpoint: bool = False):
        super().__init__(TransformerDecoderLayer, num_layers, dims, num_heads, mlp_dims,
                         dropout, activation, norm_first, checkpoint)

    def __call__(self, x, memory, x_mask, memory_mask):
        return self._run(x, memory, x_mask, memory_mask)


class Transformer(Module):
    """An encoder over ``src`` and a decoder over ``tgt`` attending to the encoder's output
    (the architecture of "Attention Is All You Need"). ``custom_encoder`` and
    ``custom_decoder`` replace the default stacks; they are called as
    ``encoder(src, src_mask)`` and ``decoder(tgt, memory, tgt_mask, memory_mask)``."""

    def __init__(self, dims: int = 512, num_heads: int = 8, num_encoder_layers: int = 6,
                 num_decoder_layers: int = 6, mlp_dims: Optional[int] = None,
                 dropout: float = 0.0, activation: Callable[[Any], Any] = relu,
                 custom_encoder: Optional[Any] = None, custom_decoder: Optional[Any] = None,
                 norm_first: bool = True, checkpoint: bool = False):
        super().__init__()
        shared = (dims, num_heads, mlp_dims, dropout, activation, norm_first, checkpoint)
        self.encoder = (custom_encoder if custom_encoder is not None
                        else TransformerEncoder(num_encoder_layers, *shared))
        self.decoder = (custom_decoder if custom_decoder is not None
                        else TransformerDecoder(num_decoder_layers, *shared))

    def __call__(self, src, tgt, src_mask, tgt_mask, memory_mask):
        memory = self.encoder(src, src_mask)
        return self.decoder(tgt, memory, tgt_mask, memory_mask)
