"""mlx.nn.utils: the data-parallel helper average_gradients, and checkpoint."""

import kiln as mx
from kiln.utils import tree_map

__all__ = ["average_gradients", "checkpoint"]


def checkpoint(module, fn=None):
    """mlx.nn.utils.checkpoint's signature; Kiln has no rematerialisation (mx.checkpoint), so
    the function runs as it is and its gradient keeps the forward pass's intermediates (the
    same values, more memory)."""
    return module if fn is None else fn


def average_gradients(gradients, group=None, all_reduce_size=32 * 1024**2,
                      communication_type=None):
    """The mean of every gradient in the tree over the group's ranks, as mlx.nn.average_gradients.

    Gradients are flattened and concatenated into buckets of at most ``all_reduce_size`` bytes
    (per dtype; 0 or less: one all_sum per gradient), one all_sum each. ``communication_type``
    casts each bucket to that dtype for the all_sum and back. A one-rank group returns
    ``gradients`` unchanged."""
    group = group if group is not None else mx.distributed.init()
    n = group.size()
    if n == 1:
        return gradients
    leaves = []
    tree_map(lambda g: leaves.append(g), gradients)

    def average(bucket):
        flat = mx.concatenate([mx.reshape(g, (-1,)) for g in bucket]) if len(bucket) > 1 \
            else mx.reshape(bucket[0], (-1,))
        dtype = flat.dtype
        if communication_type is not None:
            flat = flat.astype(communication_type)
        mean = (mx.distributed.all_sum(flat, group=group) / n).astype(dtype)
        out, at = [], 0
        for g in bucket:
            out.append(mx.reshape(mean[at:at + g.size], g.shape))
            at += g.size
        return out

    averaged = {}
    buckets = {}  # dtype -> (leaves, bytes)
    for g in leaves:
        items, size = buckets.get(g.dtype, ([], 0))
        if items and (all_reduce_size <= 0 or size + g.nbytes > all_reduce_size):
            for x, m in zip(items, average(items)):
                averaged[id(x)] = m
            items, size = [], 0
        buckets[g.dtype] = (items + [g], size + g.nbytes)
    for items, _ in buckets.values():
        for x, m in zip(items, average(items)):
            averaged[id(x)] = m
    return tree_map(lambda g: averaged[id(g)], gradients)
