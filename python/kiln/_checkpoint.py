"""Checkpoints of a training run: the model's parameters, the optimizer's state, kiln.random's
global key and the step, in one ``.safetensors`` file per rank (kiln.utils.save_checkpoint /
load_checkpoint).

The file is MLX's ``save_safetensors`` layout: one tensor per leaf under a dotted name,
``model.<path>`` (what ``model.parameters()`` flattens to, the names of ``save_weights``),
``optimizer.<path>`` (``optimizer.state`` flattened: ``step``, ``learning_rate`` and the
per-parameter buffers such as Adam's ``m`` and ``v``) and ``random.key`` (``kiln.random.state[0]``,
a 0-d uint64), plus string metadata: ``kiln.checkpoint`` (the format's version), ``step``,
``rank``, ``size`` and ``optimizer`` (its class name). Every value is stored with its exact bits,
so a run restarted from a checkpoint computes what the run that went on would have computed.

Loading writes into the existing model, optimizer state dict and ``kiln.random.state`` list in
place, so a compiled step that captured ``[model.state, optimizer.state, mx.random.state]``
before the load sees the loaded values.
"""

import os

FORMAT_VERSION = "1"


def _mx():
    import kiln  # kiln.utils is imported by kiln.nn while kiln loads: import on first use

    return kiln


def _group_rank_size(group):
    if group is None:
        return 0, 1
    return group.rank(), group.size()


def checkpoint_file(file, group=None):
    """The path of this rank's checkpoint for ``file``: ``.safetensors`` appended when missing,
    and in a group of more than one rank ``.rank<r>`` put before that suffix
    (``ckpt.safetensors`` -> ``ckpt.rank1.safetensors``)."""
    path = os.fspath(file)
    if path.endswith(".safetensors"):
        path = path[: -len(".safetensors")]
    rank, size = _group_rank_size(group)
    if size > 1:
        path += f".rank{rank}"
    return path + ".safetensors"


def save_checkpoint(file, model, optimizer=None, step=0, *, group=None, metadata=None):
    """Writes this rank's checkpoint (see ``checkpoint_file`` for its path, which is returned):
    ``model``'s parameters, ``optimizer``'s state (when given), ``kiln.random.state[0]`` and
    ``step`` (an int: the number of steps done, what ``load_checkpoint`` returns), with
    ``metadata`` (str to str) added to the file's. The file is written under a temporary name
    and renamed, so a process killed while saving leaves the previous checkpoint whole."""
    mx = _mx()
    from .utils import tree_flatten

    if not isinstance(step, int) or step < 0:
        raise mx.Error(f"save_checkpoint: step must be an int >= 0, got {step!r}")
    rank, size = _group_rank_size(group)
    arrays = {}
    for name, a in tree_flatten(model.parameters()):
        arrays["model." + name] = a
    if optimizer is not None:
        for name, a in tree_flatten(optimizer.state):
            if not isinstance(a, mx.array):
                raise mx.Error(f"save_checkpoint: optimizer state {name} is a "
                               f"{type(a).__name__}, not an array")
            arrays["optimizer." + name] = a
    arrays["random.key"] = mx.random.state[0]
    meta = dict(metadata or {})
    meta.update({"kiln.checkpoint": FORMAT_VERSION, "step": str(step), "rank": str(rank),
                 "size": str(size),
                 "optimizer": "" if optimizer is None else type(optimizer).__name__})
    mx.eval(list(arrays.values()))
    path = checkpoint_file(file, group)
    tmp = f"{path}.tmp{os.getpid()}"
    try:
        with open(tmp, "wb") as f:
            mx.save_safetensors(f, arrays, meta)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    return path


def _assign(dst, src):
    # src's leaves written into dst's containers in place (dicts by key, lists by index).
    if isinstance(dst, dict) and isinstance(src, dict):
        for k, v in src.items():
            if k in dst and isinstance(dst[k], (dict, list)) and isinstance(v, (dict, list)):
                _assign(dst[k], v)
            else:
                dst[k] = v
        return
    for i, v in enumerate(src):
        if i < len(dst):
            if isinstance(dst[i], (dict, list)) and isinstance(v, (dict, list)):
                _assign(dst[i], v)
            else:
                dst[i] = v
        else:
            dst.append(v)


def load_checkpoint(file, model, optimizer=None, *, group=None, strict=True,
                    return_metadata=False):
    """Restores what ``save_checkpoint`` wrote for this rank into ``model``, ``optimizer``
    (when given) and ``kiln.random.state``, in place; returns the saved step (and the file's
    metadata as well with ``return_metadata``). With ``strict``, the model's parameter names and
    shapes must be the file's, the optimizer's class the one saved, and the file must have been
    written by this rank of a group of this size."""
    mx = _mx()
    from .utils import tree_unflatten

    path = checkpoint_file(file, group)
    if not os.path.exists(path):
        raise mx.Error(f"load_checkpoint: no checkpoint {path}")
    arrays, meta = mx.load(path, return_metadata=True)
    if meta.get("kiln.checkpoint") != FORMAT_VERSION:
        raise mx.Error(f"load_checkpoint: {path} is not a Kiln checkpoint (version "
                       f"{FORMAT_VERSION}); its metadata: {meta}")
    rank, size = _group_rank_size(group)
    if strict and (meta["rank"], meta["size"]) != (str(rank), str(size)):
        raise mx.Error(f"load_checkpoint: {path} was saved by rank {meta['rank']} of "
                       f"{meta['size']}; this is rank {rank} of {size}")
    model_items, opt_items = [], []
    for name, a in arrays.items():
        if name.startswith("model."):
            model_items.append((name[len("model."):], a))
        elif name.startswith("optimizer."):
            opt_items.append((name[len("optimizer."):], a))
    if "random.key" not in arrays:
        raise mx.Error(f"load_checkpoint: {path} has no random.key")
    if optimizer is not None:
        if strict and meta.get("optimizer") != type(optimizer).__name__:
            raise mx.Error(f"load_checkpoint: {path} holds the state of a "
                           f"{meta.get('optimizer') or 'no optimizer'}; given a "
                           f"{type(optimizer).__name__}")
        if not opt_items:
            raise mx.Error(f"load_checkpoint: {path} holds no optimizer state")
    model.load_weights(model_items, strict=strict)
    if optimizer is not None:
        _assign(optimizer.state, tree_unflatten(opt_items))
    mx.random.state[0] = arrays["random.key"]
    step = int(meta["step"])
    return (step, meta) if return_metadata else step
