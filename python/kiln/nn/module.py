"""nn.Module: a dict of parameters (arrays) and submodules, as mlx.nn.Module.

Being a dict is what lets compile, grad and the optimizers see a model: a Module is a pytree
whose leaves are its arrays, so ``inputs=[model.state]`` captures it and compile writes new
arrays back into the same Module objects in place. Plain attributes (ints, flags) live outside
the dict and are not parameters.
"""

import kiln as mx

from ..utils import tree_flatten, tree_unflatten
from . import weights as _weights


def _is_parameter_value(key, value):
    # What parameters() descends into: arrays and containers, never private ("_") keys.
    return isinstance(value, (mx.array, dict, list)) and not str(key).startswith("_")


_FLOATING = object()  # set_dtype's default predicate


class MissingKeyError(mx.Error, KeyError):
    """A key named to freeze/unfreeze that no module has (a KeyError, as in MLX)."""


def _holds_module(v):
    if isinstance(v, Module):
        return True
    if isinstance(v, dict):
        return any(_holds_module(c) for c in v.values())
    if isinstance(v, (list, tuple)):
        return any(_holds_module(c) for c in v)
    return False


class Module(dict):
    """The base of every layer. Subclasses set arrays and submodules as attributes in
    ``__init__`` (after ``super().__init__()``) and define ``__call__``."""

    _training = True
    _no_grad = frozenset()

    def __init__(self):
        super().__init__()
        object.__setattr__(self, "_no_grad", set())
        object.__setattr__(self, "_training", True)

    # ---- attributes: arrays, containers and modules go into the dict ----

    def __getattr__(self, key):
        if key in self:
            return self[key]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {key!r}")

    def __setattr__(self, key, value):
        if isinstance(value, (mx.array, dict, list, tuple)):
            self.__dict__.pop(key, None)
            self[key] = value
        else:
            if key in self:
                del self[key]
            object.__setattr__(self, key, value)

    def __delattr__(self, key):
        if key in self:
            del self[key]
        else:
            object.__delattr__(self, key)

    # dict's equality would compare parameters elementwise; modules are compared by identity.
    __eq__ = object.__eq__
    __ne__ = object.__ne__
    __hash__ = object.__hash__

    def __repr__(self):
        extra = self._extra_repr()
        children = [(k, v) for k, v in self.items() if _holds_module(v)]
        if not children:
            return f"{type(self).__name__}({extra})"
        lines = [f"{type(self).__name__}({extra}"]
        for k, v in children:
            lines.append(f"  ({k}): " + repr(v).replace("\n", "\n  "))
        return "\n".join(lines) + "\n)"

    def _extra_repr(self):
        return ""

    # ---- training mode ----

    @property
    def training(self):
        """Whether the module is in training mode (Dropout drops only then)."""
        return self._training

    @property
    def state(self):
        """The module itself: the pytree to capture in compile's ``inputs``/``outputs``."""
        return self

    def train(self, mode: bool = True):
        """Sets training mode on this module and every submodule; returns self."""
        for _, m in self.named_modules():
            object.__setattr__(m, "_training", mode)
        return self

    def eval(self):
        """Evaluation mode (``train(False)``); returns self."""
        return self.train(False)

    # ---- the parameter tree ----

    def filter_and_map(self, filter_fn, map_fn=None, is_leaf_fn=None):
        """A tree of this module's values for which ``filter_fn(module, key, value)`` holds, its
        array leaves passed through ``map_fn``; submodules are descended into."""
        map_fn = map_fn or (lambda x: x)
        is_leaf_fn = is_leaf_fn or (lambda m, k, v: isinstance(v, mx.array))

        def walk(owner, key, value):
            if is_leaf_fn(owner, key, value):
                return map_fn(value)
            if isinstance(value, Module):
                return {k: walk(value, k, v) for k, v in value.items()
                        if filter_fn(value, k, v)}
            if isinstance(value, dict):
                return {k: walk(owner, f"{key}.{k}", v) for k, v in value.items()
                        if filter_fn(owner, f"{key}.{k}", v)}
            if isinstance(value, list):
                return [walk(owner, f"{key}.{i}", v) if filter_fn(owner, f"{key}.{i}", v) else {}
                        for i, v in enumerate(value)]
            raise mx.Error(f"nn.Module: cannot walk {key!r} of type {type(value).__name__}")

        return {k: walk(self, k, v) for k, v in self.items() if filter_fn(self, k, v)}

    def parameters(self):
        """Every array of the module and its submodules, as a nested dict (lists for lists)."""
        return self.filter_and_map(lambda m, k, v: _is_parameter_value(k, v))

    def trainable_parameters(self):
        """parameters() without the frozen ones: what nn.value_and_grad differentiates."""
        return self.filter_and_map(
            lambda m, k, v: _is_parameter_value(k, v) and str(k).split(".")[0] not in m._no_grad)

    @staticmethod
    def is_module(value):
        return isinstance(value, Module)

    def children(self):
        """The direct submodules (in lists and dicts too), keyed as the attributes hold them;
        in a list, an entry that is no module is ``{}`` so positions line up."""

        def modules_in(v):
            if isinstance(v, Module):
                return v
            if isinstance(v, dict):
                return {k: modules_in(c) for k, c in v.items() if _holds_module(c)}
            return [modules_in(c) if _holds_module(c) else {} for c in v]

        return {k: modules_in(v) for k, v in self.items() if _holds_module(v)}

    def named_modules(self):
        """``(dotted name, module)`` for every module below this one, then this one as ``""``
        (deepest first, as MLX orders them)."""
        out = []

        def walk(prefix, v):
            if isinstance(v, Module):
                for k, c in v.items():
                    walk(f"{prefix}.{k}" if prefix else k, c)
                out.append((prefix, v))
            elif isinstance(v, dict):
                for k, c in v.items():
                    walk(f"{prefix}.{k}", c)
            elif isinstance(v, (list, tuple)):
                for i, c in enumerate(v):
                    walk(f"{prefix}.{i}", c)

        walk("", self)
        return out

    def modules(self):
        """Every module below this one and this one (named_modules without names)."""
        return [m for _, m in self.named_modules()]

    def leaf_modules(self):
        """The submodules that hold no submodules, in children()'s shape."""

        def leaves(v):
            if isinstance(v, Module):
                c = v.children()
                return v if not c else leaves(c)
            if isinstance(v, dict):
                return {k: leaves(c) for k, c in v.items()}
            if isinstance(v, list):
                return [leaves(c) for c in v]
            return v

        return {k: leaves(v) for k, v in self.children().items()}

    def update(self, parameters, strict: bool = True):
        """Replaces arrays with those in ``parameters`` (a tree like parameters()'s, possibly
        partial). With ``strict``, a key the module lacks, or a non-array where it holds an
        array, raises kiln.Error. Returns self."""
        _update_tree(self, parameters, strict, type(self).__name__, lambda v: isinstance(
            v, mx.array))
        return self

    def update_modules(self, modules, strict: bool = True):
        """Replaces submodules with those in ``modules`` (children()'s shape). Returns self."""
        _update_tree(self, modules, strict, type(self).__name__, _is_module)
        return self

    def apply(self, map_fn, filter_fn=None):
        """Maps every parameter (those ``filter_fn(module, key, value)`` admits) through
        ``map_fn``, in place; returns self."""
        filter_fn = filter_fn or (lambda m, k, v: _is_parameter_value(k, v))
        return self.update(self.filter_and_map(filter_fn, map_fn))

    def apply_to_modules(self, fn):
        """Calls ``fn(name, module)`` for every module, this one included as ``""``; returns
        self."""
        for name, m in self.named_modules():
            fn(name, m)
        return self

    def set_dtype(self, dtype, predicate=_FLOATING):
        """Casts the parameters whose dtype ``predicate(dtype)`` accepts to ``dtype``: by
        default the floating ones; ``predicate=None`` casts every one."""
        if predicate is None:
            predicate = lambda d: True  # noqa: E731
        elif predicate is _FLOATING:
            predicate = lambda d: d.name.startswith(("float", "bfloat"))  # noqa: E731
        return self.apply(lambda x: x.astype(dtype) if predicate(x.dtype) else x)

    # ---- freezing ----

    def _local_keys(self):
        # The module's own parameters: containers that hold submodules belong to those.
        return [k for k, v in self.items() if _is_parameter_value(k, v) and not _holds_module(v)]

    def freeze(self, *, recurse: bool = True, keys=None, strict: bool = False):
        """Excludes parameters from trainable_parameters(): ``keys`` (names of this module's
        own parameters; all of them by default), in every submodule too with ``recurse``."""
        self._set_frozen(True, recurse, keys, strict)
        return self

    def unfreeze(self, *, recurse: bool = True, keys=None, strict: bool = False):
        """Undoes freeze() for ``keys`` (all by default)."""
        self._set_frozen(False, recurse, keys, strict)
        return self

    def _set_frozen(self, frozen, recurse, keys, strict):
        keys = [keys] if isinstance(keys, str) else keys
        targets = self.modules() if recurse else [self]
        if strict and keys is not None:
            have = {k for m in targets for k in m._local_keys()}
            missing = [k for k in keys if k not in have]
            if missing:
                raise MissingKeyError(f"{type(self).__name__}.freeze: no parameters named "
                                      f"{missing}; the modules have {sorted(have)}")
        for m in targets:
            names = m._local_keys() if keys is None else [k for k in keys if k in m]
            no_grad = set(m._no_grad)
            (no_grad.update if frozen else no_grad.difference_update)(names)
            object.__setattr__(m, "_no_grad", no_grad)

    # ---- weight files ----

    def save_weights(self, file: str):
        """Writes every parameter to ``file`` as a NumPy ``.npz`` (keys are dotted paths such as
        ``layers.0.weight``; ``numpy.load`` reads it back), or as ``.safetensors`` when the
        name ends so."""
        if str(file).endswith(".safetensors"):
            mx.save_safetensors(str(file), dict(tree_flatten(self.parameters())))
            return
        _weights.save_npz(file, dict(tree_flatten(self.parameters())))

    def load_weights(self, file_or_weights, strict: bool = True):
        """Loads parameters from an ``.npz`` or ``.safetensors`` file or a list of
        ``(dotted path, array)`` pairs.
        With ``strict``, the names and shapes must be exactly the module's. Returns self."""
        if isinstance(file_or_weights, (list, tuple)):
            weights = list(file_or_weights)
        else:
            weights = list(mx.load(str(file_or_weights)).items()) if str(
                file_or_weights).endswith(".safetensors") else list(
                _weights.load_npz(file_or_weights).items())
        if strict:
            have = dict(tree_flatten(self.parameters()))
            given = dict(weights)
            missing = sorted(set(have) - set(given))
            extra = sorted(set(given) - set(have))
            if missing or extra:
                raise mx.Error(f"load_weights: missing {missing}, unexpected {extra}")
            for k, v in weights:
                if not isinstance(v, mx.array):
                    raise mx.Error(f"load_weights: {k} is a {type(v).__name__}, not an array")
                if v.shape != have[k].shape:
                    raise mx.Error(f"load_weights: {k} has shape {v.shape}; the module's is "
                                   f"{have[k].shape}")
        self.update(tree_unflatten(weights), strict=strict)
        return self


def _is_module(v):
    return isinstance(v, Module)


def _update_tree(dst, src, strict, where, is_value):
    # Writes src's values into dst's containers (in place), descending where dst holds
    # containers; is_value says which of dst's entries are replaced whole. An empty dict or
    # list updates nothing, whatever dst is: parameters() gives {} for a list's non-array
    # entries (a layer's input_shape list of ints), as MLX does, and update takes it back.
    if isinstance(src, (dict, list, tuple)) and not src:
        return
    if isinstance(src, dict):
        if not isinstance(dst, dict):
            raise mx.Error(f"update: {where} is a {type(dst).__name__}, given a dict")
        for k, v in src.items():
            if k not in dst:
                if strict:
                    raise mx.Error(f"update: {where} has no entry {k!r} (has {list(dst)})")
                continue
            _update_entry(dst, k, v, strict, f"{where}.{k}", is_value)
    elif isinstance(src, (list, tuple)):
        if not isinstance(dst, list):
            raise mx.Error(f"update: {where} is a {type(dst).__name__}, given a list")
        if strict and len(src) > len(dst):
            raise mx.Error(f"update: {where} has {len(dst)} entries, given {len(src)}")
        for i, v in enumerate(src[:len(dst)]):
            _update_entry(dst, i, v, strict, f"{where}.{i}", is_value)
    elif strict:
        raise mx.Error(f"update: {where} given a {type(src).__name__}; expected a dict or list")


def _update_entry(dst, k, v, strict, where, is_value):
    current = dst[k]
    if is_value is _is_module and type(v) is dict and not v and (
            isinstance(current, Module) or not isinstance(current, (dict, list))):
        return  # update_modules: {} marks a position left as it is (children()'s filler)
    if is_value(current) or (not isinstance(current, (dict, list)) and is_value(v)):
        if strict and not is_value(v):
            raise mx.Error(f"update: {where} given a {type(v).__name__}")
        dst[k] = v
    else:
        _update_tree(current, v, strict, where, is_value)
