#!/usr/bin/python3
"""Writes the small PyTorch checkpoints that tests/formats/test_pth.c reads, each next to what it
must load to. Run with a Python that has torch (Debian's python3-torch):

    /usr/bin/python3 tests/reference/make_pth_fixture.py [assets/fixtures]

Files (all a few KB):
  pth-basic.pth          torch.save(OrderedDict) of f32 / f16 / bf16 / int32 tensors: a scalar,
                         a 5-D tensor, an empty tensor, views with a non-zero storage offset,
                         two tensors sharing one storage, a size-1 dimension with an odd stride
  pth-basic.safetensors  the same tensors, written here by hand (not by longvk)
  pth-generator.pth      {'generator': the same dict with 'model.' before every name,
                          'step': int, 'config': dict}: LongSANA's layout
  pth-state-dict.pth     {'state_dict': the same dict, 'epoch': int}: SANA-Video's layout
  pth-noncontig.pth      a transposed (non-contiguous) tensor: must be refused
  pth-int64.pth          an int64 tensor: must be refused as unsupported
Values are simple formulas of the element index so that the C test checks them independently:
  f32.matrix[i] = 0.25 i - 1, f16.vector[i] = 0.5 i - 1, bf16.matrix[i] = 0.125 i,
  f32.view_offset = base[4:12] and f32.shares_storage = base[0:4] with base[i] = i,
  f32.scalar = 3.5, f32.conv5d[i] = i / 8, f32.row_of_matrix[j] = 4 + j (row 1 of a 3 x 4 arange),
  f16.column = [0, 1, 2] as [3, 1], i32.index[i] = 7 i - 3, f32.empty has shape [0, 3].
"""
import collections
import json
import os
import struct
import sys

import torch


def basic_dict():
    base = torch.arange(20, dtype=torch.float32)
    m = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    column = torch.arange(3, dtype=torch.float16).unsqueeze(1)  # [3, 1], stride (1, 1)
    d = collections.OrderedDict()
    d["f32.matrix"] = torch.arange(12, dtype=torch.float32).reshape(3, 4) * 0.25 - 1
    d["f16.vector"] = (torch.arange(5, dtype=torch.float32) * 0.5 - 1).half()
    d["bf16.matrix"] = (torch.arange(6, dtype=torch.float32).reshape(2, 3) * 0.125).bfloat16()
    d["f32.view_offset"] = base[4:12].view(2, 4)  # storage offset 4 into a 20-element storage
    d["f32.shares_storage"] = base[0:4]           # same storage as f32.view_offset
    d["f32.scalar"] = torch.tensor(3.5)
    d["f32.conv5d"] = torch.arange(24, dtype=torch.float32).reshape(2, 3, 1, 2, 2) / 8
    d["f32.row_of_matrix"] = m[1]                 # offset 4 into m's storage (m itself not saved)
    d["f16.column"] = column
    d["i32.index"] = torch.arange(4, dtype=torch.int32) * 7 - 3
    d["f32.empty"] = torch.zeros(0, 3)
    assert d["f32.view_offset"].storage_offset() == 4 and d["f32.row_of_matrix"].storage_offset() == 4
    return d


def st_tag(t):
    return {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16", torch.int32: "I32"}[t.dtype]


def raw_bytes(t):
    t = t.contiguous()
    if t.dtype == torch.bfloat16:
        t = t.view(torch.int16)
    return t.numpy().tobytes()


def write_safetensors(path, tensors, metadata):
    """The safetensors layout, by hand: 4-byte types first so every tensor stays aligned."""
    names = sorted(tensors, key=lambda n: -tensors[n].element_size())
    header, blobs, at = {"__metadata__": metadata}, [], 0
    for n in names:
        b = raw_bytes(tensors[n])
        header[n] = {"dtype": st_tag(tensors[n]), "shape": list(tensors[n].shape), "data_offsets": [at, at + len(b)]}
        blobs.append(b)
        at += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - (8 + len(h)) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..", "assets", "fixtures")
    os.makedirs(out, exist_ok=True)
    d = basic_dict()
    torch.save(d, os.path.join(out, "pth-basic.pth"))
    write_safetensors(os.path.join(out, "pth-basic.safetensors"), d, {"source": "tests/reference/make_pth_fixture.py"})
    gen = collections.OrderedDict(("model." + k, v) for k, v in d.items())
    torch.save({"generator": gen, "step": 1000, "config": {"lr": 1e-4, "name": "longsana"}},
               os.path.join(out, "pth-generator.pth"))
    torch.save({"state_dict": d, "epoch": 3}, os.path.join(out, "pth-state-dict.pth"))
    torch.save({"weight": torch.arange(6, dtype=torch.float32).reshape(2, 3).t()},
               os.path.join(out, "pth-noncontig.pth"))
    torch.save({"steps": torch.arange(3)}, os.path.join(out, "pth-int64.pth"))


if __name__ == "__main__":
    main()
