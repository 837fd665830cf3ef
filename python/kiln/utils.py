"""Pytree helpers with mlx.utils' names: map, flatten to dotted keys, rebuild, reduce.

A tree is nested lists, tuples and dicts (kiln.nn.Module is a dict); everything else is a leaf.
kiln.nn and kiln.optimizers walk parameters, gradients and optimizer state with these.
Also save_checkpoint / load_checkpoint (kiln/_checkpoint.py): a training run's state in one
``.safetensors`` file per rank.
"""

from collections.abc import Callable


def _is_container(x):
    return isinstance(x, (list, tuple, dict))


def _like(seq, items):
    # A list or tuple holding `items`, of seq's kind (named tuples rebuilt as themselves).
    if isinstance(seq, list):
        return items
    if hasattr(seq, "_fields"):
        return type(seq)(*items)
    return tuple(items) if type(seq) is tuple else type(seq)(items)


def tree_map(fn: Callable, tree, *rest, is_leaf: Callable = None):
    """``fn`` applied to every leaf of ``tree`` (and the matching leaves of ``rest``, which must
    have at least ``tree``'s structure). Lists and tuples stay lists and tuples; dicts (modules
    included) become plain dicts."""
    if is_leaf is not None and is_leaf(tree):
        return fn(tree, *rest)
    if isinstance(tree, (list, tuple)):
        out = [tree_map(fn, child, *[r[i] for r in rest], is_leaf=is_leaf)
               for i, child in enumerate(tree)]
        return _like(tree, out)
    if isinstance(tree, dict):
        return {k: tree_map(fn, child, *[r[k] for r in rest], is_leaf=is_leaf)
                for k, child in tree.items()}
    return fn(tree, *rest)


def tree_map_with_path(fn: Callable, tree, *rest, is_leaf: Callable = None, path: str = None):
    """As tree_map, with ``fn(path, leaf, *rest)`` given the leaf's dotted path."""
    if is_leaf is not None and is_leaf(tree):
        return fn(path, tree, *rest)

    def sub(key):
        return str(key) if path is None else f"{path}.{key}"

    if isinstance(tree, (list, tuple)):
        out = [tree_map_with_path(fn, child, *[r[i] for r in rest], is_leaf=is_leaf, path=sub(i))
               for i, child in enumerate(tree)]
        return _like(tree, out)
    if isinstance(tree, dict):
        return {k: tree_map_with_path(fn, child, *[r[k] for r in rest], is_leaf=is_leaf,
                                      path=sub(k))
                for k, child in tree.items()}
    return fn(path, tree, *rest)


def tree_flatten(tree, prefix: str = "", is_leaf: Callable = None, destination=None):
    """The leaves as ``[("a.0.b", leaf), ...]`` (dotted paths: dict keys and list indices), or
    into ``destination`` (a dict) when one is given. Empty containers leave nothing."""
    out = [] if destination is None else destination
    add = out.__setitem__ if isinstance(out, dict) else (lambda k, v: out.append((k, v)))
    _flatten_into(tree, prefix[1:] if prefix.startswith(".") else prefix, is_leaf, add)
    return out


def _flatten_into(x, path, is_leaf, add):
    # A module-level function, not a closure that calls itself: such a closure is a reference
    # cycle that would keep the flattened arrays alive until the garbage collector runs, and a
    # compiled step could not reuse their memory meanwhile.
    if (is_leaf is None or not is_leaf(x)) and _is_container(x):
        items = x.items() if isinstance(x, dict) else enumerate(x)
        for k, child in items:
            _flatten_into(child, f"{path}.{k}" if path else str(k), is_leaf, add)
    else:
        add(path, x)


def tree_unflatten(tree):
    """The nested tree of ``tree_flatten``'s output (a list of pairs or a dict): path parts that
    are all integers at one level make a list, the others a dict."""
    items = list(tree.items()) if isinstance(tree, dict) else list(tree)
    if not items:
        return {}
    if len(items) == 1 and items[0][0] == "":
        return items[0][1]
    children = {}
    for path, value in items:
        head, _, tail = path.partition(".")
        children.setdefault(head, []).append((tail, value))
    if all(k.isdigit() and str(int(k)) == k for k in children):  # "01" stays a dict key
        ordered = sorted(children.items(), key=lambda kv: int(kv[0]))
        out = []
        for k, sub in ordered:
            while len(out) < int(k):
                out.append({})  # a hole: an index with no leaves (a layer without parameters)
            out.append(tree_unflatten(sub))
        return out
    return {k: tree_unflatten(sub) for k, sub in children.items()}


def tree_reduce(fn: Callable, tree, initializer=None, is_leaf: Callable = None):
    """``fn(accumulated, leaf)`` over the leaves in flatten order, starting from
    ``initializer`` (the first leaf when it is None)."""
    acc = initializer
    started = initializer is not None
    for _, leaf in tree_flatten(tree, is_leaf=is_leaf):
        if started:
            acc = fn(acc, leaf)
        else:
            acc, started = leaf, True
    return acc


def tree_merge(tree_a, tree_b, merge_fn=None):
    """One tree from two: containers are merged key by key (lists index by index); where both
    have a leaf, ``merge_fn(a, b)`` decides, and without one that raises kiln.Error. An empty
    container or None on one side gives the other side."""

    from . import Error

    def kind(t):
        return dict if isinstance(t, dict) else list if _is_container(t) else None

    for a, b in ((tree_a, tree_b), (tree_b, tree_a)):
        if a is None or (_is_container(a) and len(a) == 0):
            if a is not None and _is_container(b) and kind(a) != kind(b):
                raise Error(f"tree_merge: cannot merge a {type(a).__name__} with a "
                            f"{type(b).__name__}")
            return tree_a if b is None or (_is_container(b) and len(b) == 0) else b
    if isinstance(tree_a, dict) and isinstance(tree_b, dict):
        keys = list(tree_a) + [k for k in tree_b if k not in tree_a]
        return {k: tree_merge(tree_a.get(k), tree_b.get(k), merge_fn) for k in keys}
    if isinstance(tree_a, (list, tuple)) and isinstance(tree_b, (list, tuple)):
        n = max(len(tree_a), len(tree_b))
        items = [tree_merge(tree_a[i] if i < len(tree_a) else None,
                            tree_b[i] if i < len(tree_b) else None, merge_fn) for i in range(n)]
        return _like(tree_a, items)
    if merge_fn is None:
        raise Error(f"tree_merge: both trees have a value here ({type(tree_a).__name__} and "
                    f"{type(tree_b).__name__}); pass merge_fn to combine them")
    return merge_fn(tree_a, tree_b)


# Checkpoints of a training run (model, optimizer state, random key, step): kiln/_checkpoint.py.
from ._checkpoint import checkpoint_file, load_checkpoint, save_checkpoint  # noqa: E402,F401
