"""Kiln: array functions compiled into fused kernels, run as task graphs on CPUs and GPUs.

The API mirrors ``mlx.core`` (``import kiln as mx`` runs MLX code that uses features Kiln has);
devices by name, ``compute_on`` and ahead-of-time lowering follow JAX. See README.md's Python
section and docs/python.md for the differences.
"""

import atexit as _atexit
import builtins as _builtins
import contextlib as _contextlib
import functools as _functools
import os as _os
import weakref as _weakref

from . import _kiln
from ._kiln import *  # noqa: F401,F403  (the C++ bindings: array, ops, devices, eval, ...)
from ._kiln import Error, array
from . import _composites

# Registered first, so it runs last of kiln's atexit hooks: device work nobody waited for (a
# compiled call's outputs dropped unread) ends while the interpreter is whole, before its
# finalisation frees what that work uses (graph/at_exit.h).
_atexit.register(_kiln._finish_device_work)

# The dtypes as module attributes, as mlx.core has them.
bool_ = _kiln.bool_
int8, int32, int64 = _kiln.int8, _kiln.int32, _kiln.int64
uint8, uint32, uint64 = _kiln.uint8, _kiln.uint32, _kiln.uint64
float16, bfloat16, float32, float64 = (_kiln.float16, _kiln.bfloat16, _kiln.float32,
                                       _kiln.float64)

from ._composites import (addmm, all, allclose, any, array_equal, broadcast_arrays,  # noqa: E402,A004
                          degrees, eye, identity, isclose, isfinite, isinf, isnan, log2, log10,
                          logaddexp, radians, reciprocal, square, unflatten)

for _name in _composites.NAMES:
    globals()[_name] = getattr(_composites, _name)

for _name in _composites.METHODS:  # as array methods too, like the C++ ones
    setattr(array, _name, getattr(_composites, _name))

_getitem = array.__getitem__
_eq, _ne = array.__eq__, array.__ne__


def _expand_none(a, index):
    # a[..., None, :] as NumPy: each None a new axis of size 1 where it stands. The array is
    # reshaped to hold those axes and each None becomes a full slice.
    if not isinstance(index, tuple):
        index = (index,)
    consumed = _builtins.sum(1 for i in index if i is not None and i is not Ellipsis)
    shape, new_index, at = [], [], 0
    for i in index:
        if i is None:
            shape.append(1)
            new_index.append(slice(None))
        elif i is Ellipsis:
            span = a.ndim - consumed
            shape.extend(a.shape[at:at + span])
            new_index.extend([slice(None)] * span)
            at += span
        else:
            shape.append(a.shape[at])
            new_index.append(i)
            at += 1
    shape.extend(a.shape[at:])
    return _kiln.reshape(a, shape), tuple(new_index)


def _is_index_array(i):
    return not isinstance(i, (int, slice, type(Ellipsis), type(None))) and hasattr(
        i, "__len__" if isinstance(i, list) else "shape")


def _broadcast_index(a, index):
    # NumPy's rule for several index arrays that broadcast to more than one axis (the C++
    # indexing orders those axes wrongly): the indexed axes moved to the front and flattened,
    # one take of the flat positions, and the broadcast axes put where the first index array
    # stood when the index arrays (and ints) are adjacent, else first.
    entries = []
    for i in index:
        if i is Ellipsis:
            entries.extend([slice(None)] * (a.ndim - (len(index) - 1)))
        else:
            entries.append(i)
    entries += [slice(None)] * (a.ndim - len(entries))
    adv = [k for k, e in enumerate(entries) if not isinstance(e, slice)]
    a = _getitem(a, tuple(e if isinstance(e, slice) else slice(None) for e in entries))
    idx = [_kiln.asarray(entries[k]).astype(int32) for k in adv]
    idx = [_kiln.where(_kiln.less(i, 0), _kiln.add(i, a.shape[k]), i) for i, k in zip(idx, adv)]
    rest = [k for k in range(a.ndim) if k not in adv]
    flat, stride = None, 1
    for i, k in reversed(list(zip(idx, adv))):
        term = _kiln.multiply(i, stride) if stride != 1 else i
        flat = term if flat is None else _kiln.add(flat, term)
        stride *= a.shape[k]
    t = _kiln.reshape(_kiln.transpose(a, adv + rest), [stride] + [a.shape[k] for k in rest])
    out = _kiln.take(t, flat, axis=0)
    if adv == list(range(adv[0], adv[-1] + 1)) and adv[0] > 0:
        nb = flat.ndim
        order = list(range(nb, nb + adv[0])) + list(range(nb)) + list(
            range(nb + adv[0], out.ndim))
        out = _kiln.transpose(out, order)
    return out


def _array_getitem(self, index):
    if index is None or (type(index) is tuple and _builtins.any(i is None for i in index)):
        self, index = _expand_none(self, index)
    if type(index) is tuple:
        arrays = [i for i in index if _is_index_array(i)]
        if len(arrays) > 1 and _builtins.any(
                len(getattr(i, "shape", (0,))) > 1 or (isinstance(i, list) and i and
                                                      isinstance(i[0], list)) for i in arrays):
            return _broadcast_index(self, index)
    return _getitem(self, index)


def _array_eq(self, other):
    # array == "causal" is False (no element type to compare with), as in MLX.
    return NotImplemented if isinstance(other, str) else _eq(self, other)


def _array_ne(self, other):
    return NotImplemented if isinstance(other, str) else _ne(self, other)


array.__getitem__ = _array_getitem
array.__eq__ = _array_eq
array.__ne__ = _array_ne

cpu = _kiln.device("cpu")

# mlx.core's constants.
pi = 3.141592653589793
e = 2.718281828459045
euler_gamma = 0.5772156649015329
inf = float("inf")
nan = float("nan")
newaxis = None

if _os.environ.get("KILN_DISABLE_COMPILE", "") not in ("", "0"):
    _kiln.disable_compile()


def __getattr__(name):
    # kiln.gpu: the first available OpenCL or Vulkan device that is a GPU, looked up on use;
    # without one, a stand-in that is_available() calls unavailable (MLX's mx.gpu on a machine
    # without a GPU) and that raises kiln.Error, saying why, wherever a device is used.
    if name == "gpu":
        for info in _kiln.devices():
            d = info["device"]
            if d.type in ("opencl", "vulkan") and info["available"] and _is_gpu(info):
                return d
        return _NoGpu()
    raise AttributeError(f"module 'kiln' has no attribute '{name}'")


def _no_gpu_message():
    return ("kiln.gpu: no OpenCL or Vulkan GPU device is available (found: " +
            ", ".join(f"{i['device']} ({i['description'] or i['reason']})"
                      for i in _kiln.devices()) + "); name a device instead, e.g. "
            "kiln.device('opencl')")


class _NoGpu(str):
    """``kiln.gpu`` where the machine has no GPU: ``is_available(kiln.gpu)`` is False, and
    using it as a device raises kiln.Error with the devices there are (it is the device name
    "gpu", which no backend has, so every function taking a device refuses it)."""

    def __new__(cls):
        return super().__new__(cls, "gpu")

    type = "gpu"
    index = 0

    def __repr__(self):
        return "Device(gpu, 0)"

    def __eq__(self, other):
        return isinstance(other, _NoGpu)

    __hash__ = str.__hash__


def is_available(device):
    """Whether ``device`` (a kiln.Device, a device name, or ``kiln.gpu``/``kiln.cpu``) exists
    on this machine and can run work, as mlx.core.is_available."""
    if isinstance(device, _NoGpu):
        return False
    try:
        d = device if isinstance(device, Device) else _kiln.device(str(device))
    except Error:
        return False
    return _builtins.any(i["device"] == d and i["available"] for i in _kiln.devices())


class _Backend:
    """mlx.core.metal / mlx.core.cuda: Kiln runs on neither, so is_available() is False, as
    MLX's are on a machine without them."""

    def __init__(self, name):
        self._name = name

    def is_available(self):
        return False

    def device_info(self):
        raise Error(f"kiln.{self._name}: Kiln has no {self._name} backend (its GPUs are "
                    "OpenCL and Vulkan devices: kiln.devices())")

    def __repr__(self):
        return f"<kiln.{self._name}: not available>"


metal = _Backend("metal")
cuda = _Backend("cuda")


def _is_gpu(info):
    # PoCL names itself "Portable Computing Language" in the platform part of the description.
    desc = info["description"].lower()
    return not _builtins.any(cpu_word in desc for cpu_word in (
        "pocl", "portable computing language", "llvmpipe", "lavapipe", "cpu"))


class CompiledFunction(_kiln.CompiledFunction):
    """A function compiled by kiln.compile; carries the wrapped function's name and docs."""


def compile(fun=None, inputs=None, outputs=None, shapeless=False):
    """Compiles ``fun``: traced once per signature, fused, run as one plan per call.

    Usable as ``@kiln.compile`` and ``@partial(kiln.compile, inputs=state, outputs=state)``.
    Non-array arguments are part of the cache key; ``inputs``/``outputs`` are pytrees of
    captured state read before and written back after every call.
    """
    if fun is None:
        return _functools.partial(compile, inputs=inputs, outputs=outputs, shapeless=shapeless)
    c = CompiledFunction(fun, inputs, outputs, shapeless)
    _functools.update_wrapper(c, fun)
    return c


class compute_on(_contextlib.ContextDecorator):
    """Pins the ops created inside to ``device`` (JAX's compute_on), as a decorator or a
    context manager. A compiled function keeps the pin on every call."""

    def __init__(self, device):
        self._device = device
        self._scopes = []

    def __enter__(self):
        scope = _kiln._placement(self._device)
        scope.__enter__()
        self._scopes.append(scope)
        return self

    def __exit__(self, *exc):
        self._scopes.pop().__exit__(*exc)
        return False


def grad(fun, argnums=None, argnames=()):
    """The gradient of ``fun``'s (scalar) result with respect to its ``argnums`` arguments
    (pytrees of arrays; argument 0 unless ``argnames`` names keyword arguments): one tree for
    one argument, a tuple for several; with ``argnames``, ``(positional, {name: gradient})``."""

    @_functools.wraps(fun)
    def grad_fn(*args, **kwargs):
        return _kiln._value_and_grad_call(fun, argnums, argnames, False, args, kwargs)

    return grad_fn


def value_and_grad(fun, argnums=None, argnames=()):
    """As grad, returning ``(fun's result, the gradient)``; ``fun`` may return
    ``(loss, auxiliary...)``, differentiating the first element."""

    @_functools.wraps(fun)
    def value_and_grad_fn(*args, **kwargs):
        return _kiln._value_and_grad_call(fun, argnums, argnames, True, args, kwargs)

    return value_and_grad_fn


def vmap(fun, in_axes=0, out_axes=0):
    """``fun`` mapped over axis ``in_axes`` of its arguments (an int or None for all, or one per
    argument), the results stacked on ``out_axes``."""

    @_functools.wraps(fun)
    def vmap_fn(*args):
        return _kiln._vmap_call(fun, in_axes, out_axes, args)

    return vmap_fn


@_contextlib.contextmanager
def profile():
    """Records the tasks the runtime runs inside the block: ``p.events``,
    ``p.write_chrome_trace(path)``."""
    p = _kiln.Profile()
    with p:
        yield p


from . import random  # noqa: E402  (needs the names above)
from ._einsum import einsum, einsum_path  # noqa: E402
from . import fast  # noqa: E402
from ._io import load, save, save_gguf, save_safetensors, savez, savez_compressed  # noqa: E402


# Schedulers still open at exit finish their jobs while the interpreter can still run them (their
# workers take the GIL; past atexit they no longer could).
_open_schedulers = _weakref.WeakSet()


class Scheduler(_kiln.Scheduler):
    __doc__ = _kiln.Scheduler.__doc__

    def __init__(self, capacity=1024, workers=0):
        super().__init__(capacity, workers)
        _open_schedulers.add(self)


@_atexit.register
def _close_schedulers():
    for s in list(_open_schedulers):
        s.close()
