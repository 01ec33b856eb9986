#!/usr/bin/python3
"""Test vectors for the Wan2.1 VAE encoder, from the ORIGINAL module (Wan-Video/Wan2.1
`wan/modules/vae.py`), for tests/models/test_vae_encoder.c:

    PYTHONPATH=assets/default-model /usr/bin/python3 tests/reference/make_wan_vae_encoder_vectors.py \
        --wan /path/to/Wan2.1 [--out assets/testdata/wan-vae]

`--wan` (or the environment variable WAN21_DIR) is a checkout of Wan-Video/Wan2.1 that the
user fetched; only its `wan/modules/vae.py` is loaded (as a single file, so the package's
other imports are not needed), and nothing of it is committed here. Without `einops`
installed, the two `rearrange` patterns that file uses are supplied by a small stand-in, and
on PyTorch < 2.0 (Debian 12's 1.13) `F.scaled_dot_product_attention` by its definition.

The tiny configuration is the decoder vectors' (dim 8, z 4, dim_mult [1, 2, 4, 4], 2 residual
blocks, temperal_downsample [False, True, True]): `WanVAE_` is built with it, its decoder
half takes the committed decoder weights (wan-vae-tiny.weights.safetensors, unchanged) and
its encoder half (`encoder.*`, `conv1.*`) fresh random weights under the same rule (gamma
1 + 0.1 N(0,1), biases 0.1 N(0,1), conv weights N(0,1) / sqrt(fan_in); nothing is zero, the
attention's zero-initialised proj included). Writes, next to the decoder's files:

- wan-vae-tiny-full.weights.safetensors: both halves (194 - 108 + 108 tensors: every name of
  the state dict), the decoder file's metadata (config, latents_mean, latents_std).
- wan-vae-tiny-encoder.vectors.safetensors:
  video [3, 9, 32, 48] uniform in [-1, 1]; mean_T{1,5,7,9}: `WanVAE_.encode(video[:, :T],
  scale)` (normalised means; T = 7 is not 1 + 4k: the original drops the last 2 frames);
  tap.* (T = 9): the outputs of encoder.downsamples.{2,5,8}, encoder.middle.2 and
  encoder.head (its conv, 2z channels), per chunk, concatenated over time; smooth_video [3, 9, 32, 48] (moving
  blobs), smooth_mean its encoding and smooth_recon `decode(smooth_mean)` (unclamped):
  the original's round trip.
"""
import argparse
import importlib.util
import json
import math
import os
import sys
import types

import numpy as np
import torch

from training import st_io

CONFIG = dict(dim=8, z_dim=4, dim_mult=[1, 2, 4, 4], num_res_blocks=2, attn_scales=[],
              temperal_downsample=[False, True, True], dropout=0.0)
H, W, T_MAX = 32, 48, 9


def einops_stand_in():
    """rearrange for the patterns vae.py uses: 'b c t h w -> (b t) c h w' and back."""
    def rearrange(x, pattern, **sizes):
        src, dst = [s.replace(" ", "") for s in pattern.split("->")]
        if src == "bcthw" and dst == "(bt)chw":
            b, c, t, h, w = x.shape
            return x.permute(0, 2, 1, 3, 4).reshape(b * t, c, h, w)
        if src == "(bt)chw" and dst == "bcthw":
            bt, c, h, w = x.shape
            t = sizes["t"]
            return x.reshape(bt // t, t, c, h, w).permute(0, 2, 1, 3, 4)
        raise ValueError("einops stand-in: pattern %r" % pattern)
    m = types.ModuleType("einops")
    m.rearrange = rearrange
    return m


def sdpa_stand_in(q, k, v):
    """F.scaled_dot_product_attention's definition (PyTorch >= 2.0) with no mask and no
    dropout, for Debian's torch 1.13: softmax(q k^T / sqrt(d)) v."""
    return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1) @ v


def load_original(wan_dir):
    path = os.path.join(wan_dir, "wan", "modules", "vae.py")
    if not os.path.isfile(path):
        sys.exit("no %s: --wan (or WAN21_DIR) must name a Wan-Video/Wan2.1 checkout" % path)
    try:
        import einops  # noqa: F401
    except ImportError:
        sys.modules["einops"] = einops_stand_in()
    if not hasattr(torch.nn.functional, "scaled_dot_product_attention"):
        torch.nn.functional.scaled_dot_product_attention = sdpa_stand_in
    spec = importlib.util.spec_from_file_location("wan21_vae_original", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def fresh_encoder_weights(model, gen):
    """Random encoder.* and conv1.* (the decoder's rule of section 9 of the design note)."""
    sd = {}
    for name, p in model.state_dict().items():
        if not (name.startswith("encoder.") or name.startswith("conv1.")):
            continue
        if name.endswith(".gamma"):
            v = 1 + 0.1 * torch.randn(p.shape, generator=gen, dtype=torch.float64)
        elif name.endswith(".bias"):
            v = 0.1 * torch.randn(p.shape, generator=gen, dtype=torch.float64)
        else:
            fan_in = p[0].numel()
            v = torch.randn(p.shape, generator=gen, dtype=torch.float64) / math.sqrt(fan_in)
        sd[name] = v.float()
    return sd


def smooth_clip():
    """Three Gaussian blobs of different colours moving on a gradient, in [-1, 1]."""
    t = torch.arange(T_MAX, dtype=torch.float64).view(T_MAX, 1, 1)
    y = torch.linspace(0, 1, H, dtype=torch.float64).view(1, H, 1)
    x = torch.linspace(0, 1, W, dtype=torch.float64).view(1, 1, W)
    chans = []
    for c, (cy, cx, vy, vx) in enumerate([(0.3, 0.2, 0.03, 0.05), (0.6, 0.7, -0.02, -0.04), (0.5, 0.5, 0.04, -0.02)]):
        blob = torch.exp(-(((y - cy - vy * t) / 0.18) ** 2 + ((x - cx - vx * t) / 0.2) ** 2))
        chans.append(0.9 * (2 * blob - 1) * 0.8 + 0.1 * (x - 0.5 + 0.3 * c * (y - 0.5)))
    return torch.stack(chans).float().clamp(-1, 1)  # [3, T, H, W]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--wan", default=os.environ.get("WAN21_DIR"), help="Wan-Video/Wan2.1 checkout")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                                  "assets", "testdata", "wan-vae"))
    args = ap.parse_args()
    if not args.wan:
        sys.exit("--wan PATH (or WAN21_DIR): a Wan-Video/Wan2.1 checkout")
    vae = load_original(args.wan)
    torch.manual_seed(0)
    model = vae.WanVAE_(**CONFIG).eval()

    dec_tensors, dec_meta = st_io.load(os.path.join(args.out, "wan-vae-tiny.weights.safetensors"))
    gen = torch.Generator().manual_seed(55)
    sd = fresh_encoder_weights(model, gen)
    sd.update({k: torch.from_numpy(v.copy()) for k, v in dec_tensors.items()})
    model.load_state_dict(sd, strict=True)  # every name of the original's state dict, nothing else

    mean = torch.tensor(json.loads(dec_meta["latents_mean"]), dtype=torch.float32)
    std = torch.tensor(json.loads(dec_meta["latents_std"]), dtype=torch.float32)
    scale = [mean, 1.0 / std]  # as WanVAE builds it

    gen_v = torch.Generator().manual_seed(56)
    video = torch.rand((3, T_MAX, H, W), generator=gen_v, dtype=torch.float64).float() * 2 - 1
    vectors = {"video": video.numpy()}
    with torch.no_grad():
        for T in (1, 5, 7, 9):
            mu = model.encode(video[None, :, :T], scale)[0]
            vectors["mean_T%d" % T] = mu.numpy()
            print("T=%d -> mean %s" % (T, tuple(mu.shape)))

        taps = {}
        # the module each tap is read from: Encoder3d runs its head's layers one by one (the
        # Sequential itself is never called), so the head's tap is its conv's output
        names = {"encoder.downsamples.2": "encoder.downsamples.2", "encoder.downsamples.5": "encoder.downsamples.5",
                 "encoder.downsamples.8": "encoder.downsamples.8", "encoder.middle.2": "encoder.middle.2",
                 "encoder.head": "encoder.head.2"}
        hooks = []
        for n, module in names.items():
            def hook(_m, _i, out, n=n):
                taps.setdefault(n, []).append(out.detach().clone())
            hooks.append(model.get_submodule(module).register_forward_hook(hook))
        model.encode(video[None], scale)
        for h in hooks:
            h.remove()
        for n, parts in taps.items():
            vectors["tap." + n] = torch.cat(parts, 2)[0].numpy()

        smooth = smooth_clip()
        smu = model.encode(smooth[None], scale)
        rec = model.decode(smu, scale)
        vectors["smooth_video"] = smooth.numpy()
        vectors["smooth_mean"] = smu[0].numpy()
        vectors["smooth_recon"] = rec[0].numpy()
        err = ((rec[0] - smooth) ** 2).mean() / (smooth ** 2).mean()
        print("smooth round trip through the random VAE: nmse vs the clip %.3g" % err.item())

    meta = dict(dec_meta)
    meta["source"] = "Wan-Video/Wan2.1 wan/modules/vae.py (WanVAE_), fp32, CPU"
    meta["format"] = "original Wan2.1_VAE.pth names; both halves: conv1.*, encoder.*, conv2.*, decoder.*"
    meta["init"] = ("decoder: wan-vae-tiny.weights.safetensors; encoder.*, conv1.*: gamma 1+0.1N, "
                    "bias 0.1N, conv weight N/sqrt(fan_in), torch.Generator seed 55")
    full = {k: v.numpy() for k, v in model.state_dict().items()}
    st_io.save(os.path.join(args.out, "wan-vae-tiny-full.weights.safetensors"), full, meta)
    st_io.save(os.path.join(args.out, "wan-vae-tiny-encoder.vectors.safetensors"), vectors,
               {"source": meta["source"], "config": meta.get("config", json.dumps(CONFIG)),
                "video": "uniform [-1, 1], torch.Generator seed 56",
                "mean_T7": "7 frames: the original encodes 1 + 4 (7 - 1) // 4 = 2 chunks, frames 5 and 6 unused"})
    print("wrote %d weight tensors and %d vectors to %s" % (len(full), len(vectors), args.out))


if __name__ == "__main__":
    main()
