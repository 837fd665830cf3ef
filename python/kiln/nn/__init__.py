"""Neural networks with mlx.nn's names: ``import kiln.nn as nn`` runs MLX model code.

Modules are dicts of arrays and submodules (module.py), so compile, grad and kiln.optimizers
see a model as a pytree. Layers, activations, losses and initialisers are compositions of
kiln ops, written for Kiln from mlx.nn's documented names, arguments and defaults. There
is no Conv1d: Kiln has no convolution op (kiln.h) to build it on.
"""

from . import init, losses
from .activations import (CELU, ELU, GELU, GLU, SELU, HardShrink, Hardswish, HardTanh,
                          LeakyReLU, LogSigmoid, LogSoftmax, Mish, PReLU, ReLU, ReLU6,
                          ReLUSquared, SiLU, Sigmoid, Softmax, Softmin, Softplus, Softshrink,
                          Softsign, Step, Tanh, celu, elu, gelu, gelu_approx, gelu_fast_approx,
                          glu, hard_shrink, hard_tanh, hardswish, leaky_relu, log_sigmoid,
                          log_softmax, mish, prelu, relu, relu6, relu_squared, selu, sigmoid,
                          silu, softmax, softmin, softplus, softshrink, softsign, step, tanh)
from .attention import MultiHeadAttention
from .containers import Sequential
from .dropout import Dropout, Dropout2d, Dropout3d
from .embedding import Embedding
from .linear import Bilinear, Identity, Linear
from .module import Module
from .normalization import BatchNorm, GroupNorm, InstanceNorm, LayerNorm, RMSNorm
from .pooling import (AvgPool1d, AvgPool2d, AvgPool3d, MaxPool1d, MaxPool2d, MaxPool3d)
from .positional_encoding import ALiBi, RoPE, SinusoidalPositionalEncoding
from .recurrent import GRU, LSTM, RNN
from .transformer import (Transformer, TransformerDecoder, TransformerDecoderLayer,
                          TransformerEncoder, TransformerEncoderLayer)
from .upsample import Upsample
from .utils import average_gradients, checkpoint
from .value_and_grad import value_and_grad
