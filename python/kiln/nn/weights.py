"""Weight files as NumPy ``.npz``: a zip of ``.npy`` files, one per dotted parameter name.

Chosen because any NumPy user reads it back (``numpy.load``) and it needs nothing but the
standard library here: the arrays' bytes come from kiln's buffer protocol and go back in through
``memoryview``. bfloat16 has no ``.npy`` type and raises; cast such a model to float32 first.
"""

import ast
import os
import struct
import sys
import zipfile

import kiln as mx

# kiln dtype name -> (.npy descr without byte order, struct format for memoryview.cast)
_FORMATS = {
    "bool": ("b1", "?"), "int8": ("i1", "b"), "uint8": ("u1", "B"),
    "int32": ("i4", "i"), "uint32": ("u4", "I"), "int64": ("i8", "q"), "uint64": ("u8", "Q"),
    "float16": ("f2", "e"), "float32": ("f4", "f"), "float64": ("f8", "d"),
}
_BY_DESCR = {descr: (name, fmt) for name, (descr, fmt) in _FORMATS.items()}
_ORDER = "<" if sys.byteorder == "little" else ">"


def _npy_bytes(name, a):
    if a.dtype.name not in _FORMATS:
        raise mx.Error(f"save_weights: {name} is {a.dtype.name}, which .npy cannot hold; "
                       f"valid: {sorted(_FORMATS)} (cast with astype(kiln.float32))")
    descr = _FORMATS[a.dtype.name][0]
    descr = ("|" if descr[1] == "1" else _ORDER) + descr
    header = f"{{'descr': '{descr}', 'fortran_order': False, 'shape': {tuple(a.shape)}, }}"
    # Version 1.0: magic, version, little-endian u16 header length; data aligned to 64 bytes.
    pad = 64 - (10 + len(header) + 1) % 64
    header = header + " " * pad + "\n"
    mx.eval(a)
    data = bytes(memoryview(a)) if a.size else b""
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + data


def save_npz(file, arrays):
    """Writes ``{name: array}`` to ``file`` (``.npz`` appended when missing)."""
    path = os.fspath(file)
    if path.endswith(".safetensors"):
        raise mx.Error("save_weights: Kiln writes .npz only (numpy.load reads it); got " + path)
    if not path.endswith(".npz"):
        path += ".npz"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        for name, a in arrays.items():
            z.writestr(name + ".npy", _npy_bytes(name, a))


def _parse_npy(name, raw):
    if raw[:6] != b"\x93NUMPY":
        raise mx.Error(f"load_weights: {name} is not a .npy entry")
    major = raw[6]
    if major == 1:
        hlen, start = struct.unpack("<H", raw[8:10])[0], 10
    else:
        hlen, start = struct.unpack("<I", raw[8:12])[0], 12
    header = ast.literal_eval(raw[start:start + hlen].decode("latin1"))
    descr = header["descr"]
    if descr[0] not in "<|=" and not (descr[0] == ">" and _ORDER == ">"):
        raise mx.Error(f"load_weights: {name} is big-endian ({descr}); Kiln reads native order")
    kind = descr[1:]
    if kind not in _BY_DESCR:
        raise mx.Error(f"load_weights: {name} has type {descr}; Kiln reads "
                       f"{sorted(_BY_DESCR)}")
    shape = tuple(header["shape"])
    if header["fortran_order"]:  # NumPy's layout for a transposed array: read, transpose back
        header["fortran_order"] = False
        header["shape"] = shape[::-1]
        text = repr(header).encode("latin1")
        text += b" " * (hlen - len(text)) if len(text) <= hlen else b""
        if len(text) == hlen:
            c = _parse_npy(name, raw[:start] + text + raw[start + hlen:])
            return mx.transpose(c, list(range(len(shape)))[::-1]) if shape else c
        raise mx.Error(f"load_weights: {name}: cannot re-read its Fortran-order header")
    data = memoryview(raw)[start + hlen:]
    dtype_name, fmt = _BY_DESCR[kind]
    dtype = getattr(mx, "bool_" if dtype_name == "bool" else dtype_name)
    count = 1
    for s in shape:
        count *= s
    if count == 0:
        return mx.zeros(shape, dtype)
    if fmt == "e":  # memoryview cannot cast to half floats; float16 values are exact as floats
        values = struct.unpack(f"{_ORDER}{count}e", data[:2 * count])
        a = mx.array(list(values), dtype).reshape(shape or (1,))
    else:
        a = mx.array(data.cast("B").cast(fmt, shape or (1,)), dtype)
    return a if shape else a.reshape(())


def load_npz(file):
    """``{name: array}`` from an ``.npz`` file (what numpy.savez and save_npz write)."""
    path = os.fspath(file)
    if not path.endswith(".npz"):
        raise mx.Error(f"load_weights: {path} is not an .npz file; Kiln's weight files are .npz")
    out = {}
    with zipfile.ZipFile(path) as z:
        for entry in z.namelist():
            name = entry[:-4] if entry.endswith(".npy") else entry
            out[name] = _parse_npy(name, z.read(entry))
    return out
