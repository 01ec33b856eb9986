"""Safetensors read/write with numpy only (the `safetensors` package is not installed here).

File: [u64 little-endian N][N bytes JSON header][data]. The header maps each name to
{"dtype", "shape", "data_offsets": [begin, end]} (relative to the data section) and may
hold "__metadata__": {str: str}. Read: F32, F64, I32, I64, BF16 (widened to f32). Write:
F32 and I32 tensors, written atomically (tmp + rename).
"""
import json
import os
import struct

import numpy as np

_DT = {"F32": "<f4", "F64": "<f8", "I32": "<i4", "I64": "<i8", "U8": "u1"}
_WRITE = {np.dtype("<f4"): "F32", np.dtype("<i4"): "I32"}


def load(path):
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8 : 8 + n])
    meta = header.pop("__metadata__", None) or {}
    data = memoryview(blob)[8 + n :]
    out = {}
    for name, info in header.items():
        b, e = info["data_offsets"]
        raw = data[b:e]
        if info["dtype"] == "BF16":
            a = (np.frombuffer(raw, "<u2").astype(np.uint32) << 16).view(np.float32)
        else:
            a = np.frombuffer(raw, _DT[info["dtype"]]).copy()
        out[name] = a.reshape(info["shape"])
    return out, meta


def save(path, tensors, metadata=None):
    header, chunks, off = {}, [], 0
    for name in sorted(tensors):
        a = np.ascontiguousarray(tensors[name])
        if a.dtype == np.float64:
            a = a.astype("<f4")
        if a.dtype == np.int64:
            a = a.astype("<i4")
        if a.dtype not in _WRITE:
            raise ValueError(f"{name}: cannot write dtype {a.dtype}")
        raw = a.tobytes()
        header[name] = {"dtype": _WRITE[a.dtype], "shape": list(a.shape), "data_offsets": [off, off + len(raw)]}
        chunks.append(raw)
        off += len(raw)
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for c in chunks:
            f.write(c)
    os.replace(tmp, path)
