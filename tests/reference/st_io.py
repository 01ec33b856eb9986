"""Minimal safetensors reader and writer (json + struct + numpy only).

The `safetensors` package is not installed on every machine that regenerates the
test vectors, so the format is handled here directly:

    [u64 little-endian header length N][N bytes of JSON header][tensor data]

The header maps each tensor name to {"dtype", "shape", "data_offsets": [begin, end]}
(offsets relative to the start of the data section) and may hold a "__metadata__"
object whose values are strings.
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
    data = blob[8 + n :]
    meta = header.pop("__metadata__", {}) or {}
    tensors = {}
    for name, info in header.items():
        b, e = info["data_offsets"]
        if not (0 <= b <= e <= len(data)):
            raise ValueError(f"{path}: tensor {name} offsets {b}..{e} outside data ({len(data)} bytes)")
        tensors[name] = _decode(info["dtype"], data[b:e], info["shape"])
    return tensors, meta


def save(path, tensors, metadata=None):
    """Writes float32 tensors (anything else is refused) atomically (tmp + rename)."""
    header = {}
    chunks = []
    offset = 0
    for name in sorted(tensors):
        a = np.ascontiguousarray(tensors[name])
        if a.dtype != np.float32:
            raise ValueError(f"{name}: test vectors are float32 only, got {a.dtype}")
        raw = a.astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [offset, offset + len(raw)]}
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
