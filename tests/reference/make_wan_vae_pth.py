#!/usr/bin/python3
"""Writes the tiny Wan VAE decoder weights as a PyTorch checkpoint, the way Wan2.1_VAE.pth
is saved (torch.save of a plain state dict), for tests/models/test_vae.c:

    PYTHONPATH=assets/default-model /usr/bin/python3 tests/reference/make_wan_vae_pth.py [assets/testdata/wan-vae]

Reads wan-vae-tiny.weights.safetensors from that directory and writes
wan-vae-tiny.weights.pth beside it: the same 108 tensors, same names, same values, in the
safetensors file's order. A checkpoint has no metadata, so the tiny config's 4-entry
de-normalisation tables stay in the safetensors file (the test sets them).
"""
import collections
import os
import sys

import torch

from training import st_io


def main():
    d = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "..", "assets", "testdata", "wan-vae")
    tensors, _ = st_io.load(os.path.join(d, "wan-vae-tiny.weights.safetensors"))
    sd = collections.OrderedDict((k, torch.from_numpy(v.copy())) for k, v in tensors.items())
    out = os.path.join(d, "wan-vae-tiny.weights.pth")
    torch.save(sd, out)
    print("wrote %s: %d tensors" % (out, len(sd)))


if __name__ == "__main__":
    main()
