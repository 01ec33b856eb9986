"""Safetensors reader and writer with json + struct + numpy only (the `safetensors` package is
not installed on every machine that trains the default model or regenerates the test vectors).
The one copy shared by this package and tests/reference/ (which imports it as training.st_io,
with PYTHONPATH=assets/default-model: tests/reference/README.md).

File: [u64 little-endian N][N bytes JSON header][data]. The header maps each name to
{"dtype", "shape", "data_offsets": [begin, end]} (relative to the data section) and may hold
"__metadata__": {str: str}. Read: F64, F32, F16, BF16 (widened to F32), I64, I32, I16, I8, U8,
BOOL. Write: F32 and I32 tensors (F64 is stored as F32, I64 as I32), sorted by name, the header
padded with spaces to keep the data 8-byte aligned, atomically (tmp + rename).
"""
import json
import os
import struct

import numpy as np

_NUMPY_DTYPES = {
    "F64": np.dtype("<f8"),
    "F32": np.dtype("<f4"),
    "F16": np.dtype("<f2"),
    "I64": np.dtype("<i8"),
    "I32": np.dtype("<i4"),
    "I16": np.dtype("<i2"),
    "I8": np.dtype("i1"),
    "U8": np.dtype("u1"),
    "BOOL": np.dtype("?"),
}
_WRITE = {np.dtype("<f4"): "F32", np.dtype("<i4"): "I32"}


def _decode(dtype, raw, shape):
    if dtype == "BF16":
        # bf16 is the upper half of an f32: widen the 16-bit words into the top bits.
        words = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
        return words.view(np.float32).reshape(shape)
    if dtype not in _NUMPY_DTYPES:
        raise ValueError(f"unsupported safetensors dtype {dtype}")
    return np.frombuffer(raw, dtype=_NUMPY_DTYPES[dtype]).reshape(shape).copy()


def load(path):
    """Returns (tensors: dict name -> numpy array, metadata: dict of strings)."""
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 8:
        raise ValueError(f"{path}: too short for a safetensors header")
    (n,) = struct.unpack("<Q", blob[:8])
    if 8 + n > len(blob):
        raise ValueError(f"{path}: header length {n} past the end of the file")
    header = json.loads(blob[8 : 8 + n].decode("utf-8"))
    data = memoryview(blob)[8 + n :]
    meta = header.pop("__metadata__", {}) or {}
    tensors = {}
    for name, info in header.items():
        b, e = info["data_offsets"]
        if not (0 <= b <= e <= len(data)):
            raise ValueError(f"{path}: tensor {name} offsets {b}..{e} outside data ({len(data)} bytes)")
        tensors[name] = _decode(info["dtype"], data[b:e], info["shape"])
    return tensors, meta


def save(path, tensors, metadata=None):
    """Writes the tensors (F32 or I32; float64 and int64 arrays are narrowed, anything else is
    refused) and the metadata (values turned into strings) to path, atomically."""
    header, chunks, offset = {}, [], 0
    for name in sorted(tensors):
        a = np.ascontiguousarray(tensors[name])
        if a.dtype == np.float64:
            a = a.astype("<f4")
        if a.dtype == np.int64:
            a = a.astype("<i4")
        if a.dtype not in _WRITE:
            raise ValueError(f"{name}: cannot write dtype {a.dtype}")
        raw = a.tobytes()
        header[name] = {"dtype": _WRITE[a.dtype], "shape": list(a.shape), "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    hjson = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hjson += b" " * ((8 - len(hjson) % 8) % 8)  # keep the data section 8-byte aligned
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(hjson)))
        f.write(hjson)
        for c in chunks:
            f.write(c)
    os.replace(tmp, path)
