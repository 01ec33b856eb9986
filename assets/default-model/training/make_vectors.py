"""Test vectors for the engine's run of the default model (assets/default-model/vectors.safetensors).

With the trained weights (default.safetensors, f32), computed in float64 by model.py: a
fixed prompt, fixed noise tensors (stored), and a generation of CHUNKS = 8 blocks exactly as
the file's metadata prescribes (longvk.first_block for block 0, sample_timesteps / sampler
for the others, window cached_blocks: with K = 2, blocks 3 to 7 no longer
read block 0).

Tensors (batch dimension dropped; video layout [3, F, H, W], RGB in [-1, 1]):
  ids [L] (I32), mask [L]           the prompt through the tokenizer (pads: id 0, mask 0)
  y [L, caption_channels]           the raw caption embeddings from the text encoder (model.py
                                    text_encode: word + previous-word + next-word tables; pads 0)
  first_chunk_v_t1000 [3, bf, H, W] one-shot forward of chunk0_noise at t = 1000, empty state
  chunkC_noise [3, bf, H, W]        initial noise of block C
  chunkC_renoise [S-1, 3, bf, H, W] fresh noise before steps 1..S-1 (only for blocks sampled
                                    with the "renoise" sampler; "euler" draws none)
  chunkC_stepK_v [3, bf, H, W]      velocity (after CFG if any) of read pass K, blocks 0 and 1,
                                    K < 4
  chunkC_out [3, bf, H, W]          the block's output x0 (what is encoded and committed)
  final_layerB_S [heads, D, D], final_layerB_z [heads, D], final_layerB_conv_last [C, H/p, W/p]
                                    carried state after the last block's write pass (S, z: sums
                                    over the window's blocks)
Sampler, block C at frame offset C * bf, timesteps t_0.. (s_k = t_k / 1000): x = noise, or
  with the card's warm_start (blocks after the first) x = (1 - s_0) last + s_0 noise, last =
  the previous block's last output frame; v = DiT(x, t_k) (CFG when cfg != 1, at the last
  cfg_last_steps steps or every step: v_empty + cfg (v - v_empty), empty = all-zero mask);
  x0 = x - s_k v; if k is not the last: x = (1 - s_{k+1}) x0 + s_{k+1} n, n = renoise[k]
  ("renoise") or x + (1 - s_k) v ("euler"). Output: the last x0; then a t = 0 pass over it
  with the prompt commits the block.
__metadata__: prompt, chunks, block_frames, cached_blocks, timesteps, sampler, first_block,
tokenizer_cases (text -> ids and unknown words, for the C tokenizer).

    cd assets/default-model
    /usr/bin/python3 -m training.make_vectors [--weights default.safetensors] [--out vectors.safetensors]
"""
import argparse
import json
import os

import numpy as np
import torch

from . import MODEL_DIR, data, st_io
from .model import CarriedState, chunk_pass
from .sample import load_model

PROMPT = "two red balls bouncing on a blue background"
CHUNKS = 8
SEED = 1234
TOKENIZER_CASES = [
    "two red balls bouncing on a blue background",
    "Two RED balls, bouncing!! on a dark-blue background.",
    "a purple triangle and an orange square sliding on the vertical gray gradient background",
    "three zebras dancing on a blue background",
    "",
    "one one one one one one one one one one one one one one one one one one one one one one red",
]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--weights", default=os.path.join(MODEL_DIR, "default.safetensors"))
    ap.add_argument("--out", default=os.path.join(MODEL_DIR, "vectors.safetensors"))
    a = ap.parse_args()
    model, cfg, lv = load_model(a.weights, torch.float64)
    H, W = lv["resolution"]
    bf, K = lv["block_frames"], lv["cached_blocks"]
    steps = [float(s) for s in lv["sample_timesteps"]]
    ids, mask, _ = data.tokenize(PROMPT, lv["text_len"])
    tid, tmask = torch.from_numpy(ids)[None], torch.from_numpy(mask)[None].double()
    g = torch.Generator().manual_seed(SEED)
    out = {"ids": ids.astype(np.int32), "mask": mask,
           "y": model.text_encode(tid, tmask)[0].detach().numpy()}
    fb = lv["first_block"]
    empty = torch.zeros_like(tmask)
    with torch.no_grad():
        state = CarriedState(model.depth, K)
        for c in range(CHUNKS):
            st_c = [float(t) for t in (fb["timesteps"] if c == 0 else steps)]
            smp = fb["sampler"] if c == 0 else lv["sampler"]
            cfg_c = float(fb["cfg_scale"]) if c == 0 else float(lv.get("cfg_scale", 1.0))
            cfg_last = int(fb.get("cfg_last_steps", 0)) if c == 0 else int(lv.get("cfg_last_steps", 0))
            warm = c > 0 and bool(lv.get("warm_start", False))
            noise = torch.randn(1, 3, bf, H, W, generator=g, dtype=torch.float64).float().double()
            out[f"chunk{c}_noise"] = noise[0].numpy()
            ren = None
            if smp == "renoise":
                ren = torch.randn(len(st_c) - 1, 1, 3, bf, H, W, generator=g, dtype=torch.float64).float().double()
                out[f"chunk{c}_renoise"] = ren[:, 0].numpy()
            if c == 0:
                v = model(noise, 1000.0, tid, tmask)
                out["first_chunk_v_t1000"] = v[0].numpy()
            x = noise
            if warm:  # the previous block's last frame, noised to the first timestep
                s0 = st_c[0] / 1000.0
                x = (1 - s0) * x0[:, :, -1:] + s0 * noise
            for k, t in enumerate(st_c):
                s = t / 1000.0
                v = chunk_pass(model, state, x, t, tid, tmask, c * bf, commit=False)
                if cfg_c != 1.0 and (cfg_last <= 0 or k >= len(st_c) - cfg_last):
                    vu = chunk_pass(model, state, x, t, tid, empty, c * bf, commit=False)
                    v = vu + cfg_c * (v - vu)
                if c < 2 and k < 4:
                    out[f"chunk{c}_step{k}_v"] = v[0].numpy()
                x0 = x - s * v
                if k + 1 < len(st_c):
                    s2 = st_c[k + 1] / 1000.0
                    n = ren[k] if smp == "renoise" else x + (1.0 - s) * v
                    x = (1 - s2) * x0 + s2 * n
            out[f"chunk{c}_out"] = x0[0].numpy()
            chunk_pass(model, state, x0, 0.0, tid, tmask, c * bf, commit=True)
        ctx = state.context(model, 1, 1, torch.float64, "cpu")
        hp, wp = H // model.patch[1], W // model.patch[2]
        for b in range(model.depth):
            out[f"final_layer{b}_S"] = ctx[b]["S"][0, 0].numpy()
            out[f"final_layer{b}_z"] = ctx[b]["z"][0, 0].numpy()
            out[f"final_layer{b}_conv_last"] = state.left[b][0, 0].t().reshape(model.C, hp, wp).numpy()
    out = {k: (v.astype(np.float32) if v.dtype == np.float64 else v) for k, v in out.items()}
    cases = []
    for text in TOKENIZER_CASES:
        i, m, unk = data.tokenize(text, lv["text_len"], warn=False)
        cases.append({"text": text, "ids": i[: int(m.sum())].tolist(), "unknown": unk})
    meta = {"prompt": PROMPT, "chunks": CHUNKS, "block_frames": bf, "cached_blocks": K,
            "timesteps": json.dumps(steps), "sampler": lv["sampler"], "first_block": json.dumps(fb),
            "cfg_scale": str(lv.get("cfg_scale", 1.0)), "cfg_last_steps": str(lv.get("cfg_last_steps", 0)),
            "warm_start": str(bool(lv.get("warm_start", False))).lower(),
            "frame_offset": "chunk * block_frames",
            "computed": "float64 from the f32 weights of default.safetensors (model.py)",
            "tokenizer_cases": json.dumps(cases)}
    st_io.save(a.out, out, meta)
    n = sum(v.size for v in out.values())
    print(f"wrote {a.out}: {len(out)} tensors, {n} values, {os.path.getsize(a.out)} bytes")


if __name__ == "__main__":
    main()
