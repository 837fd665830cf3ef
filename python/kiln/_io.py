"""mlx.core's file functions: save/load of ``.npy`` (paths through the C++ reader and writer,
open files here), ``savez``/``savez_compressed``/``load`` of ``.npz``, and
``save_safetensors``/``load`` of ``.safetensors`` (an 8-byte little-endian header length, a JSON
header naming each tensor's dtype, shape and byte range, then the raw bytes), and
``save_gguf``/``load`` of unquantized GGUF v3. Written in Python over the buffer protocol: the
bytes of an array come from ``memoryview`` and go back in through it (float16 and bfloat16,
which ``memoryview`` cannot cast to, through NumPy when it is installed or ``struct``).
"""

import io
import json
import os
import struct
import sys
import zipfile

from . import _kiln as _k

_LITTLE = sys.byteorder == "little"

# kiln dtype name -> (safetensors name, memoryview format)
_ST = {"bool": ("BOOL", "?"), "uint8": ("U8", "B"), "int8": ("I8", "b"),
       "uint32": ("U32", "I"), "int32": ("I32", "i"), "uint64": ("U64", "Q"),
       "int64": ("I64", "q"), "float16": ("F16", "e"), "bfloat16": ("BF16", None),
       "float32": ("F32", "f"), "float64": ("F64", "d")}
_ST_BY_NAME = {v[0]: k for k, v in _ST.items()}


def _weights():
    from .nn import weights  # kiln.nn imports kiln: loaded on first use
    return weights


def _dtype(name):
    return _k.bool_ if name == "bool" else getattr(_k, name)


def _path(file):
    return None if hasattr(file, "read") or hasattr(file, "write") else os.fspath(file)


def _raw(a):
    """The C-order bytes of ``a`` in its dtype."""
    a = _k.asarray(a)
    if a.size == 0:
        return b""
    if a.dtype == _k.bfloat16:  # the high half of each float32 (exact)
        wide = _k.reshape(a.astype(_k.float32), (-1,))
        _k.eval(wide)
        wide = bytes(memoryview(wide))
        out = bytearray(2 * a.size)
        out[0::2], out[1::2] = wide[2::4], wide[3::4]
        return bytes(out)
    # A contiguous copy: transposed or broadcast arrays are written in C order.
    flat = _k.reshape(_contiguous(a), (-1,))
    _k.eval(flat)
    return bytes(memoryview(flat))


def _from_raw(data, dtype_name, shape):
    """An array of ``shape`` and dtype from its C-order bytes."""
    dtype = _dtype(dtype_name)
    count = 1
    for s in shape:
        count *= s
    if count == 0:
        return _k.zeros(shape, dtype)
    data = memoryview(data)
    if dtype_name == "bfloat16":
        wide = bytearray(4 * count)
        wide[2::4], wide[3::4] = data[0:2 * count:2], data[1:2 * count:2]
        return _k.reshape(_k.array(memoryview(wide).cast("f"), _k.float32).astype(dtype), shape)
    if dtype_name == "float16":
        try:
            import numpy as np
            return _k.array(np.frombuffer(data, np.float16, count).reshape(shape))
        except ImportError:
            values = struct.unpack(f"<{count}e", data[:2 * count])
            return _k.reshape(_k.array(list(values), dtype), shape)
    fmt = _ST[dtype_name][1]
    flat = _k.array(data[:count * dtype.size].cast("B").cast(fmt), dtype)
    return _k.reshape(flat, shape)


# ---- .npy ----

def save(file, arr, *, stream=None):
    """Saves ``arr`` as ``.npy`` (the suffix added to a path without it); ``file`` may be a
    path or a file opened for binary writing."""
    path = _path(file)
    if path is not None:
        return _k.save(path, arr)
    a = _k.asarray(arr)
    file.write(_npy_bytes(a))


def _npy_bytes(a):
    if a.dtype == _k.bfloat16:  # '<V2', as MLX writes it and Kiln's C++ reader reads it
        header = f"{{'descr': '<V2', 'fortran_order': False, 'shape': {tuple(a.shape)}, }}"
        pad = 64 - (10 + len(header) + 1) % 64
        header = header + " " * pad + "\n"
        return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + _raw(a)
    return _weights()._npy_bytes("array", _contiguous(a))


def _contiguous(a):
    return _k.add(a, _k.zeros((), a.dtype)) if a.dtype != _k.bool_ else _k.logical_or(a, False)


def _parse_npy(name, raw):
    header_start = 10 if raw[6] == 1 else 12
    hlen = struct.unpack("<H" if raw[6] == 1 else "<I", raw[8:header_start])[0]
    if b"'<V2'" in raw[header_start:header_start + hlen]:
        import ast
        header = ast.literal_eval(raw[header_start:header_start + hlen].decode("latin1"))
        return _from_raw(raw[header_start + hlen:], "bfloat16", tuple(header["shape"]))
    return _weights()._parse_npy(name, raw)


# ---- .npz ----

def _savez(file, args, kwargs, compression):
    arrays = dict(kwargs)
    for i, a in enumerate(args):
        if f"arr_{i}" in arrays:
            raise _k.Error(f"savez: arr_{i} is given both by position and by name")
        arrays[f"arr_{i}"] = a
    path = _path(file)
    if path is not None and not path.endswith(".npz"):
        path += ".npz"
    with zipfile.ZipFile(path if path is not None else file, "w", compression) as z:
        for name, a in arrays.items():
            z.writestr(name + ".npy", _npy_bytes(_k.asarray(a)))


def savez(file, *args, **kwargs):
    """Saves arrays to an uncompressed ``.npz``: positional ones as ``arr_0``, ``arr_1``...,
    keyword ones under their names (numpy.load reads it)."""
    _savez(file, args, kwargs, zipfile.ZIP_STORED)


def savez_compressed(file, *args, **kwargs):
    """As savez, deflate-compressed."""
    _savez(file, args, kwargs, zipfile.ZIP_DEFLATED)


def _load_npz(f):
    out = {}
    with zipfile.ZipFile(f) as z:
        for entry in z.namelist():
            name = entry[:-4] if entry.endswith(".npy") else entry
            out[name] = _parse_npy(name, z.read(entry))
    return out


# ---- .safetensors ----

def save_safetensors(file, arrays, metadata=None):
    """Saves ``{name: array}`` as ``.safetensors`` (the suffix added to a path without it);
    ``metadata`` is a dict of strings kept in the header's ``__metadata__``."""
    if metadata is not None:
        for k, v in metadata.items():
            if not isinstance(k, str) or not isinstance(v, str):
                raise _k.Error(f"save_safetensors: metadata must map str to str; {k!r} is "
                               f"{type(v).__name__}")
    header, blobs, at = {}, [], 0
    if metadata:
        header["__metadata__"] = dict(metadata)
    for name, a in arrays.items():
        a = _k.asarray(a)
        if a.dtype.name not in _ST:
            raise _k.Error(f"save_safetensors: {name} has dtype {a.dtype.name}, which has no "
                           "safetensors type here")
        blob = _raw(a)
        header[name] = {"dtype": _ST[a.dtype.name][0], "shape": list(a.shape),
                        "data_offsets": [at, at + len(blob)]}
        blobs.append(blob)
        at += len(blob)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    path = _path(file)
    if path is not None and not path.endswith(".safetensors"):
        path += ".safetensors"
    f = open(path, "wb") if path is not None else file
    try:
        f.write(struct.pack("<Q", len(text)) + text)
        for blob in blobs:
            f.write(blob)
    finally:
        if path is not None:
            f.close()


def _load_safetensors(raw):
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    metadata = header.pop("__metadata__", {}) or {}
    base = 8 + n
    out = {}
    for name, info in header.items():
        st = info["dtype"]
        if st not in _ST_BY_NAME:
            raise _k.Error(f"load: {name} has safetensors dtype {st}; Kiln reads "
                           f"{sorted(_ST_BY_NAME)}")
        lo, hi = info["data_offsets"]
        out[name] = _from_raw(raw[base + lo:base + hi], _ST_BY_NAME[st], tuple(info["shape"]))
    return out, metadata


# ---- GGUF (unquantized tensors and metadata) ----

_GGUF_TENSOR = {"float32": 0, "float16": 1, "int8": 24, "int32": 26, "int64": 27,
                "float64": 28, "bfloat16": 30}
_GGUF_TENSOR_BY_ID = {v: k for k, v in _GGUF_TENSOR.items()}
# metadata value types: (struct format, kiln dtype name)
_GGUF_VALUE = {0: ("B", "uint8"), 1: ("b", "int8"), 4: ("I", "uint32"), 5: ("i", "int32"),
               6: ("f", "float32"), 7: ("?", "bool"), 10: ("Q", "uint64"), 11: ("q", "int64"),
               12: ("d", "float64")}
_GGUF_VALUE_BY_DTYPE = {v[1]: k for k, v in _GGUF_VALUE.items()}
_GGUF_STRING, _GGUF_ARRAY = 8, 9
_GGUF_ALIGN = 32


def _gguf_str(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def _gguf_value(key, v):
    if isinstance(v, str):
        return struct.pack("<I", _GGUF_STRING) + _gguf_str(v)
    if isinstance(v, (list, tuple)) and all(isinstance(s, str) for s in v):
        return (struct.pack("<IIQ", _GGUF_ARRAY, _GGUF_STRING, len(v)) +
                b"".join(_gguf_str(s) for s in v))
    a = _k.asarray(v)
    if a.dtype.name not in _GGUF_VALUE_BY_DTYPE or a.ndim > 1:
        raise _k.Error(f"save_gguf: metadata {key!r} of dtype {a.dtype.name} and {a.ndim} "
                       f"dimensions: GGUF takes strings, lists of strings, and scalars or 1-D "
                       f"arrays of {sorted(_GGUF_VALUE_BY_DTYPE)}")
    t = _GGUF_VALUE_BY_DTYPE[a.dtype.name]
    if a.ndim == 0:
        return struct.pack("<I", t) + _raw(a)
    return struct.pack("<IIQ", _GGUF_ARRAY, t, a.shape[0]) + _raw(a)


def save_gguf(file, arrays, metadata=None):
    """Saves ``{name: array}`` (unquantized) and ``metadata`` (strings, lists of strings,
    scalar or 1-D arrays) as GGUF v3."""
    metadata = metadata or {}
    path = os.fspath(file)
    if not path.endswith(".gguf"):
        path += ".gguf"
    infos, blobs, at = [], [], 0
    for name, a in arrays.items():
        a = _k.asarray(a)
        if a.dtype.name not in _GGUF_TENSOR:
            raise _k.Error(f"save_gguf: {name} has dtype {a.dtype.name}; GGUF here takes "
                           f"{sorted(_GGUF_TENSOR)}")
        blob = _raw(a)
        dims = list(reversed(a.shape)) or [1]  # GGML order: the fastest axis first
        infos.append(_gguf_str(name) + struct.pack(f"<I{len(dims)}Q", len(dims), *dims) +
                     struct.pack("<IQ", _GGUF_TENSOR[a.dtype.name], at))
        blob += b"\0" * (-len(blob) % _GGUF_ALIGN)
        blobs.append(blob)
        at += len(blob)
    with open(path, "wb") as f:
        f.write(b"GGUF" + struct.pack("<IQQ", 3, len(infos), len(metadata)))
        for k, v in metadata.items():
            f.write(_gguf_str(k) + _gguf_value(k, v))
        for info in infos:
            f.write(info)
        f.write(b"\0" * (-f.tell() % _GGUF_ALIGN))
        for blob in blobs:
            f.write(blob)


def _load_gguf(raw):
    if raw[:4] != b"GGUF":
        raise _k.Error("load: not a GGUF file")
    version, n_tensors, n_kv = struct.unpack_from("<IQQ", raw, 4)
    if version < 2:
        raise _k.Error(f"load: GGUF version {version}; Kiln reads 2 and 3")
    at = 24

    def read(fmt):
        nonlocal at
        v = struct.unpack_from("<" + fmt, raw, at)
        at += struct.calcsize("<" + fmt)
        return v if len(v) > 1 else v[0]

    def read_str():
        nonlocal at
        n = read("Q")
        s = bytes(raw[at:at + n]).decode()
        at += n
        return s

    def read_value(t):
        nonlocal at
        if t == _GGUF_STRING:
            return read_str()
        if t == _GGUF_ARRAY:
            et, n = read("I"), read("Q")
            if et == _GGUF_STRING:
                return [read_str() for _ in range(n)]
            fmt, name = _GGUF_VALUE[et]
            size = struct.calcsize(fmt)
            a = _from_raw(raw[at:at + n * size], name, (n,))
            at += n * size
            return a
        fmt, name = _GGUF_VALUE[t]
        size = struct.calcsize(fmt)
        a = _from_raw(raw[at:at + size], name, ())
        at += size
        return a

    metadata = {}
    for _ in range(n_kv):
        key = read_str()
        metadata[key] = read_value(read("I"))
    align = int(metadata.get("general.alignment", _GGUF_ALIGN))
    tensors = []
    for _ in range(n_tensors):
        name = read_str()
        nd = read("I")
        dims = [read("Q") for _ in range(nd)]
        t, offset = read("I"), read("Q")
        tensors.append((name, dims, t, offset))
    base = at + (-at % align)
    out = {}
    for name, dims, t, offset in tensors:
        if t not in _GGUF_TENSOR_BY_ID:
            raise _k.Error(f"load: GGUF tensor {name} has type {t} (quantized); Kiln reads "
                           f"only unquantized tensors ({sorted(_GGUF_TENSOR)})")
        dtype = _GGUF_TENSOR_BY_ID[t]
        shape = tuple(reversed(dims))
        count = 1
        for d in shape:
            count *= d
        size = count * _dtype(dtype).size
        out[name] = _from_raw(raw[base + offset:base + offset + size], dtype, shape)
    return out, metadata


# ---- load ----

def _format_of(file, path, head):
    name = path if path is not None else getattr(file, "name", "")
    name = name if isinstance(name, str) else ""
    for ext in ("npy", "npz", "safetensors", "gguf"):
        if name.endswith("." + ext):
            return ext
    if head.startswith(b"\x93NUMPY"):
        return "npy"
    if head.startswith(b"PK"):
        return "npz"
    if head.startswith(b"GGUF"):
        return "gguf"
    return "safetensors"


def load(file, format=None, return_metadata=False, *, stream=None):
    """Loads ``.npy`` (an array), ``.npz`` or ``.safetensors`` or ``.gguf`` (a dict of
    arrays; with ``return_metadata``, ``(arrays, metadata)`` for the last two). ``format``
    overrides the file name's suffix; ``file`` is a path or a file opened for binary reading."""
    path = _path(file)
    if format is None:
        if path is not None:
            fmt = _format_of(file, path, b"")
            if fmt == "safetensors" and not path.endswith(".safetensors"):
                with open(path, "rb") as f:
                    fmt = _format_of(None, None, f.read(8))
        else:
            pos = file.tell()
            fmt = _format_of(file, None, file.read(8))
            file.seek(pos)
    else:
        fmt = format
    if fmt not in ("npy", "npz", "safetensors", "gguf"):
        raise _k.Error(f"load: format {fmt!r}; valid: npy, npz, safetensors, gguf")
    if return_metadata and fmt not in ("safetensors", "gguf"):
        raise _k.Error("load: metadata is only in .safetensors and .gguf files")
    if fmt == "npy":
        if path is not None:
            return _k.load(path)
        return _parse_npy("array", file.read())
    if fmt == "npz":
        return _load_npz(path if path is not None else io.BytesIO(file.read()))
    if path is not None:
        with open(path, "rb") as f:
            raw = f.read()
    else:
        raw = file.read()
    arrays, metadata = _load_safetensors(raw) if fmt == "safetensors" else _load_gguf(
        memoryview(raw))
    return (arrays, metadata) if return_metadata else arrays
