"""Loss functions with mlx.nn.losses' names, arguments and defaults (reductions included: most
default to "none" and a few to "mean", as in MLX)."""

import math

import kiln as mx

_REDUCTIONS = ("none", "mean", "sum")


def _reduce(loss, reduction):
    if reduction == "mean":
        return mx.mean(loss)
    if reduction == "sum":
        return mx.sum(loss)
    if reduction == "none":
        return loss
    raise mx.Error(f"losses: reduction is {reduction!r}; valid: {list(_REDUCTIONS)}")


def _same_shape(name, a, b):
    if a.shape != b.shape:
        raise mx.Error(f"losses.{name}: predictions have shape {a.shape} and targets "
                       f"{b.shape}; they must match")


def _weighted(name, loss, weights):
    if weights is None:
        return loss
    if weights.shape != loss.shape:
        raise mx.Error(f"losses.{name}: weights have shape {weights.shape}, the loss "
                       f"{loss.shape}; they must match")
    return loss * weights


def _targets_like(targets, inputs):
    # Integer or bool targets take the predictions' float dtype, so the loss is float32 for
    # float32 predictions as in MLX (Kiln alone would promote int32 with float32 to float64).
    targets = mx.asarray(targets)
    if not targets.dtype.name.startswith(("float", "bfloat")) and \
            inputs.dtype.name.startswith(("float", "bfloat")):
        return targets.astype(inputs.dtype)
    return targets


def _is_integer(a):
    return a.dtype.name.startswith(("int", "uint"))


def cross_entropy(logits, targets, weights=None, axis=-1, label_smoothing=0.0,
                  reduction="none"):
    """Softmax cross entropy from ``logits``; ``targets`` are class indices (the logits' shape
    without ``axis``) or class probabilities (the logits' shape)."""
    logits, targets = mx.asarray(logits), mx.asarray(targets)
    # Shifted by the max (the loss is unchanged): no cancellation between two large terms.
    logits = logits - mx.max(logits, axis=axis, keepdims=True)
    if not 0 <= label_smoothing < 1:
        raise mx.Error(f"losses.cross_entropy: label_smoothing must be in [0, 1), got "
                       f"{label_smoothing}")
    if _is_integer(targets) and targets.ndim == logits.ndim - 1:
        picked = mx.take_along_axis(logits, mx.expand_dims(targets, axis), axis=axis)
        score = mx.squeeze(picked, axis)
    elif targets.shape == logits.shape:
        score = mx.sum(logits * _targets_like(targets, logits), axis=axis)
    else:
        raise mx.Error(f"losses.cross_entropy: targets of shape {targets.shape} are neither "
                       f"class indices (integers of shape without axis {axis}) nor "
                       f"probabilities of the logits' shape {logits.shape}")
    lse = mx.logsumexp(logits, axis=axis)
    if label_smoothing > 0:
        loss = lse - (1 - label_smoothing) * score - label_smoothing * mx.mean(logits, axis=axis)
    else:
        loss = lse - score
    return _reduce(_weighted("cross_entropy", loss, weights), reduction)


def binary_cross_entropy(inputs, targets, weights=None, with_logits=True, reduction="mean"):
    """Binary cross entropy of ``inputs`` (logits by default, probabilities when
    ``with_logits=False``) against ``targets`` in [0, 1]."""
    inputs = mx.asarray(inputs)
    targets = _targets_like(targets, inputs)
    _same_shape("binary_cross_entropy", inputs, targets)
    if with_logits:
        # log(1 + e^x) - x t, stable for large |x|.
        loss = mx.maximum(inputs, 0) + mx.log1p(mx.exp(-mx.abs(inputs))) - inputs * targets
    else:
        log_p = mx.maximum(mx.log(inputs), -100)
        log_q = mx.maximum(mx.log(1 - inputs), -100)
        loss = -(targets * log_p + (1 - targets) * log_q)
    return _reduce(_weighted("binary_cross_entropy", loss, weights), reduction)


def l1_loss(predictions, targets, reduction="mean"):
    targets = _targets_like(targets, predictions)
    _same_shape("l1_loss", predictions, targets)
    return _reduce(mx.abs(predictions - targets), reduction)


def mse_loss(predictions, targets, reduction="mean"):
    targets = _targets_like(targets, predictions)
    _same_shape("mse_loss", predictions, targets)
    return _reduce(mx.square(predictions - targets), reduction)


def nll_loss(inputs, targets, axis=-1, reduction="none"):
    """Negative log likelihood of class indices ``targets`` given log probabilities."""
    picked = mx.take_along_axis(inputs, mx.expand_dims(targets, axis), axis=axis)
    return _reduce(-mx.squeeze(picked, axis), reduction)


def kl_div_loss(inputs, targets, axis=-1, reduction="none"):
    """KL divergence of the distributions given as log probabilities, sum(e^t (t - x))."""
    return _reduce(mx.sum(mx.exp(targets) * (targets - inputs), axis=axis), reduction)


def smooth_l1_loss(predictions, targets, beta=1.0, reduction="mean"):
    targets = _targets_like(targets, predictions)
    _same_shape("smooth_l1_loss", predictions, targets)
    d = mx.abs(predictions - targets)
    return _reduce(mx.where(d < beta, 0.5 * mx.square(d) / beta, d - 0.5 * beta), reduction)


def huber_loss(inputs, targets, delta=1.0, reduction="none"):
    d = mx.abs(inputs - targets)
    return _reduce(mx.where(d <= delta, 0.5 * mx.square(d), delta * (d - 0.5 * delta)),
                   reduction)


def log_cosh_loss(inputs, targets, reduction="none"):
    # log(cosh(d)) = d + softplus(-2d) - log 2, stable for large |d|.
    d = inputs - targets
    sp = mx.maximum(-2 * d, 0) + mx.log1p(mx.exp(-mx.abs(2 * d)))
    return _reduce(d + sp - math.log(2), reduction)


def hinge_loss(inputs, targets, reduction="none"):
    return _reduce(mx.maximum(1 - inputs * targets, 0), reduction)


def cosine_similarity_loss(x1, x2, axis=1, eps=1e-8, reduction="none"):
    dot = mx.sum(x1 * x2, axis=axis)
    n1 = mx.sqrt(mx.sum(mx.square(x1), axis=axis))
    n2 = mx.sqrt(mx.sum(mx.square(x2), axis=axis))
    return _reduce(dot / mx.maximum(n1 * n2, eps), reduction)


def margin_ranking_loss(inputs1, inputs2, targets, margin=0.0, reduction="none"):
    return _reduce(mx.maximum(-targets * (inputs1 - inputs2) + margin, 0), reduction)


def gaussian_nll_loss(inputs, targets, vars, full=False, eps=1e-6, reduction="mean"):
    v = mx.maximum(vars, eps)
    loss = 0.5 * (mx.log(v) + mx.square(targets - inputs) / v)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _reduce(loss, reduction)


def triplet_loss(anchors, positives, negatives, axis=-1, p=2, margin=1.0, eps=1e-6,
                 reduction="none"):
    def dist(a, b):
        return mx.power(mx.sum(mx.power(mx.abs(a - b), p), axis=axis) + eps, 1.0 / p)

    return _reduce(mx.maximum(dist(anchors, positives) - dist(anchors, negatives) + margin, 0),
                   reduction)
