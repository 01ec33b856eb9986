"""Trains the default model block-causally, as LongSANA infers, with diffusion forcing.

Each step draws a batch of procedural clips (data.py) of `chunks` x `block_frames`
frames and runs two passes of the same DiT (model.py), both with gradients:

  1. the clean pass (t = 0) over the whole clip, block-causal: chunk c reads the
     linear-attention contributions of chunks c-K..c-1 (K = --window) plus its own, and its
     temporal conv starts from chunk c-1's last Mix-FFN frame. This is exactly the write
     pass of inference; it yields, per layer and chunk, the contribution (S, z) and the
     conv-cache frame.
  2. the noisy pass: every chunk gets its own noise level (diffusion forcing),
     x_t = (1 - s) x0 + s noise, s = t / 1000 with an integer t; chunk c reads the CLEAN
     contributions of chunks c-K..c-1 plus its own noisy one, and the clean pass's last
     frame of chunk c-1 in its temporal conv -- exactly what a read pass at inference sees.
     Loss: MSE between the predicted velocity and noise - x0 (flow matching).

Deterministic: the clips and the noise of step i depend only on (--seed, i), so a resumed
run draws exactly what an uninterrupted one would. Checkpoints (model, EMA, optimiser,
step) every --ckpt-minutes to --out/ckpt.pt; --resume continues from it. At the end the
EMA weights go to --out/default.safetensors with the metadata the engine reads.

One phase made default.safetensors (run T2, shipped 2026-11-27; the exact commands in RECIPE.md,
"Commands"): 1244 steps of 16 clips, 4-frame chunks, window 2, context degradation, perturbation and
fading, contexts with touching objects (--ctx-touch 0.5), the warm start trained, colliding objects, a
low final learning rate, text-only chunks on the first block's grid, seed 22, 81 minutes on both
cores. Run with OpenBLAS (RECIPE.md) and `nice -n 5`, from assets/default-model:

    /usr/bin/python3 -m training.train --out RUN ...

`--procs 2` runs one process per core on halves of every batch (the same steps, 1.8 times faster on
this idle machine). Only the options of the shipped run and of the models shipped before it are
here: the flags of runs not kept (critics, self-forcing, unrolled and rollout training, and the
rest EXPERIMENTS.md names) were removed on 2026-11-28 and are in git history before that commit.
"""
import argparse
import ctypes
import json
import math
import os
import signal
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before torch loads the BLAS
import numpy as np  # noqa: E402
import torch  # noqa: E402

from . import MODEL_DIR, data, losses, st_io  # noqa: E402
from .model import SanaVideoDiT, context_from_clean  # noqa: E402


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=MODEL_DIR, help="directory for ckpt.pt, default.safetensors, the log")
    ap.add_argument("--seed", type=int, default=20251122)
    ap.add_argument("--steps", type=int, default=3400)
    ap.add_argument("--batch", type=int, default=2, help="clips per step")
    ap.add_argument("--chunks", type=int, default=8, help="chunks per training clip")
    ap.add_argument("--block-frames", type=int, default=4)
    ap.add_argument("--window", type=int, default=3, help="cached blocks K (0: all earlier chunks)")
    ap.add_argument("--res", type=int, default=32)
    ap.add_argument("--hidden", type=int, default=96)
    ap.add_argument("--depth", type=int, default=4)
    ap.add_argument("--heads", type=int, default=2)
    ap.add_argument("--patch", type=int, default=4)
    ap.add_argument("--mlp-ratio", type=float, default=3.0)
    ap.add_argument("--caption-channels", type=int, default=32)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--lr-floor", type=float, default=0.1,
                    help="the cosine schedule ends at this fraction of --lr (a lower floor spends the last "
                         "steps at a lower rate, as the 350-step fine-tune WSC did). The shipped run T2 uses 0.02 "
                         "with --text-only-timesteps, as R1 (shipped before it) did; R2, 0.02 alone, was not kept "
                         "(EXPERIMENTS.md, \"Run R1 again\" and \"The lower final learning rate alone\")")
    ap.add_argument("--wd", type=float, default=0.01)
    ap.add_argument("--ema", type=float, default=0.995)
    ap.add_argument("--p-uncond", type=float, default=0.05, help="fraction of clips trained with no text")
    ap.add_argument("--p-ctx-drop", type=float, default=0.35,
                    help="fraction of chunks (after the first) whose noisy pass sees no context, as a first chunk does")
    ap.add_argument("--p-sample-t", type=float, default=0.4,
                    help="fraction of chunks whose t is one of --sample-timesteps exactly")
    ap.add_argument("--sample-timesteps", default="1000,750,500,250")
    ap.add_argument("--text-only-timesteps", default="",
                    help="chunks made from the text alone (chunk 0 and context-dropped ones) draw their "
                         "timestep from these, e.g. the first block's sampler grid (uniform draws put "
                         "few of them near t = 1000, where the first block's layout is decided). The shipped run "
                         "T2 uses the first block's grid, as R1 did (EXPERIMENTS.md, \"The first block's count at "
                         "t = 1000\" and \"Run R1 again\")")
    ap.add_argument("--t-min", type=int, default=0,
                    help="uniform timesteps are drawn from [t-min, 1000]: the sampler never evaluates below its "
                         "last timestep, and below it the loss is mostly unlearnable pixel noise")
    ap.add_argument("--obj-weight", type=float, default=0.0,
                    help="loss weight of a pixel = 1 + obj-weight * (object coverage dilated by --obj-dilate): objects "
                         "are 2-9%% of the pixels, and an unweighted loss is spent almost all on backgrounds")
    ap.add_argument("--obj-dilate", type=int, default=3,
                    help="pixels: the weighted region covers the object and this much background around it, so "
                         "that both sides of an uncertain edge weigh the same (weighting only the object's own "
                         "pixels biases the optimum towards the object's colour: objects grew block after block)")
    ap.add_argument("--collide", action="store_true",
                    help="objects also bounce off each other (data.py): two objects never overlap, so the "
                         "context always shows them apart")
    ap.add_argument("--sampler", default="renoise", help="metadata only: renoise (LongSANA) or euler")
    ap.add_argument("--cfg-scale", type=float, default=1.0, help="metadata only: CFG of the blocks after the first")
    ap.add_argument("--cfg-last-steps", type=int, default=0, help="metadata only: CFG at the last N steps of the "
                    "blocks after the first (0: every step)")
    ap.add_argument("--warm-start", action="store_true", help="metadata only: blocks after the first start from "
                    "the previous block's last frame noised to their first timestep")
    ap.add_argument("--first-block-timesteps", default="", help="metadata only: timesteps of the first block "
                    "(default: --sample-timesteps)")
    ap.add_argument("--first-block-sampler", default="", help="metadata only (default: --sampler)")
    ap.add_argument("--first-block-cfg", type=float, default=1.0, help="metadata only")
    ap.add_argument("--burn-in-blocks", type=int, default=0, help="metadata only: blocks the engine makes and "
                    "drops before the first written frame (the first block, from the text alone, is the weakest; "
                    "the blocks that continue it settle it: EXPERIMENTS.md, \"A burn-in\")")
    ap.add_argument("--procs", type=int, default=1,
                    help="processes (one per core), each computing its share of every step's batch; the "
                         "gradients are averaged, so the step is the same as one process's")
    ap.add_argument("--threads", type=int, default=1,
                    help="torch threads; 1 is ~5x faster than 2 when other jobs share the 2 cores")
    ap.add_argument("--ckpt-minutes", type=float, default=5.0)
    ap.add_argument("--log-every", type=int, default=20)
    ap.add_argument("--resume", action="store_true")
    ap.add_argument("--init", default="", help="start from the model and EMA weights of this checkpoint "
                    "(fresh optimiser, step 0): a second training phase with other chunking")
    ap.add_argument("--ctx-degrade", type=float, default=0.0,
                    help="fraction of chunks whose CLEAN-pass input (the context of later chunks) is degraded "
                         "(blur, faded contrast, noise) while the targets stay clean: teaches the model to "
                         "restore, not copy, the imperfections of its own generated context")
    ap.add_argument("--ctx-perturb", type=float, default=0.0,
                    help="fraction of clips whose CLEAN-pass input (the context) is drawn with every object's "
                         "size scaled by exp(U(-r, r)), r = --ctx-size-range, and its colour offset by "
                         "U(-c, c) per channel, c = --ctx-colour-range (data.perturb_scene; same paths), while "
                         "the targets keep the true ones: the model learns to pull a drifted object back to "
                         "the size and colour the text and data give it, where it would copy the drift. 0.5 since run "
                         "B4 (shipped 2026-11-25), and in the shipped run T2 (EXPERIMENTS.md, \"Drawing the context "
                         "at the wrong size and colour\" and \"Blocks of 4 frames with the context perturbation\")")
    ap.add_argument("--ctx-size-range", type=float, default=0.25)
    ap.add_argument("--ctx-colour-range", type=float, default=0.12)
    ap.add_argument("--ctx-fade", type=float, default=0.0,
                    help="with --ctx-perturb: one object of a perturbed context is also drawn smaller and fainter "
                         "(size and opacity x U(1 - F, 1)), the target whole: the model learns to bring back an "
                         "object its own rollout was losing, which the data never shows (objects never vanish). "
                         "0.6 since run WF, and in the shipped run T2 (EXPERIMENTS.md, \"Keeping the count while moving\" "
                         "and run WF)")
    ap.add_argument("--ctx-touch", type=float, default=0.0,
                    help="with --ctx-perturb: the probability that a perturbed context draws two of its objects "
                         "closer, by U(0, 1) of the gap between them (1: touching), the target apart: the model "
                         "learns to part objects its own rollout is joining (the chain of runs R5 and R6). "
                         "0.5 in the shipped weights' command (run T2, RECIPE.md); EXPERIMENTS.md, \"Contexts "
                         "with touching objects\" and \"Run T2\"")
    ap.add_argument("--warm-start-train", type=float, default=0.0,
                    help="fraction of chunks (with context) whose noisy input is built as inference's warm start "
                         "builds it, from the previous chunk's last (clean-pass) frame instead of from the chunk "
                         "itself: x_t = (1 - s) last + s noise at t = --warm-start-t, the target still the chunk's "
                         "x0. Without it the warm start's first step sees a noised copy of where the objects were "
                         "and predicts them there: they stop moving. 0.5 at --warm-start-t 600 since run WF, and in "
                         "the shipped run T2 (EXPERIMENTS.md, \"Training the warm start\", where it merged the "
                         "objects of the 2-frame model, and run WF)")
    ap.add_argument("--warm-start-t", type=int, default=400, help="the card's first timestep of later blocks")
    ap.add_argument("--export", default="", help="only write the EMA weights of --out/ckpt.pt to this path "
                    "(with the metadata of the current arguments, e.g. --sample-timesteps) and exit; with --init "
                    "F.safetensors the weights (and train_steps) of F instead: a new card for exported weights")
    ap.add_argument("--card-from", default="", help="with --export: copy the sampling card (block frames, window, "
                    "timesteps, CFG, warm start, first block) from this model file instead of building it from the "
                    "flags, e.g. --card-from default.safetensors to evaluate new weights with the shipped card")
    ap.add_argument("--max-minutes", type=float, default=0, help="stop (with a checkpoint) after this long; 0: no limit")
    ap.add_argument("--stop-at", type=int, default=0, help="stop (with a checkpoint) after this step, the learning "
                    "rate still scheduled for --steps: repeats exactly a run that --max-minutes stopped there")
    return ap.parse_args(argv)


def build_model(a):
    return SanaVideoDiT(hidden_size=a.hidden, depth=a.depth, num_heads=a.heads, head_dim=a.hidden // a.heads,
                        patch_size=(1, a.patch, a.patch), in_channels=3, out_channels=3,
                        caption_channels=a.caption_channels, mlp_ratio=a.mlp_ratio, vocab_size=len(data.VOCAB))


# the metadata keys that say how to sample (the "card"); the rest describe the model
CARD_KEYS = ("block_frames", "cached_blocks", "sample_timesteps", "sampler", "cfg_scale", "cfg_last_steps",
             "warm_start", "first_block", "burn_in_blocks")


def metadata(a, model, extra=None):
    lv = {
        "kind": "pixel",
        "resolution": [a.res, a.res],
        "fps": 16,
        "block_frames": a.block_frames,
        "cached_blocks": a.window,
        "sample_timesteps": [int(s) for s in a.sample_timesteps.split(",")],
        "sampler": a.sampler,
        "cfg_scale": a.cfg_scale,
        "cfg_last_steps": a.cfg_last_steps,
        "warm_start": a.warm_start,
        "first_block": {
            "timesteps": [int(s) for s in (a.first_block_timesteps or a.sample_timesteps).split(",")],
            "sampler": a.first_block_sampler or a.sampler,
            "cfg_scale": a.first_block_cfg,
        },
        "burn_in_blocks": a.burn_in_blocks,
        "text_len": data.TEXT_LEN,
        "vocab": data.VOCAB,
        "tokenizer": data.TOKENIZER_RULE,
        "text_encoder": ("n valid ids (mask 1, first n slots): y[i] = text_embedding.weight[id[i]] "
                         "+ (i > 0 ? text_prev_embedding.weight[id[i-1]] : 0) "
                         "+ (i < n-1 ? text_next_embedding.weight[id[i+1]] : 0); y[i] = 0 for i >= n; "
                         "y [text_len, caption_channels] then goes to y_embedder as the big model's Gemma output"),
        "sampler_rule": ("blocks of block_frames frames, block b at RoPE frame offset b*block_frames; the first block "
                         "uses first_block (timesteps, sampler, cfg_scale), the others sample_timesteps / sampler / cfg_scale "
                         "at their last cfg_last_steps steps (0: every step). x = noise, or with warm_start (later blocks) "
                         "x = (1 - s_0) last + s_0 noise, last = the previous block's last frame; for each t_k "
                         "(s_k = t_k/1000): v = DiT(x, t_k) (CFG: v = v_empty + cfg (v_prompt - "
                         "v_empty), empty = all-zero mask); x0 = x - s_k v; if not the last step: x = (1 - s_{k+1}) x0 + "
                         "s_{k+1} n with n = fresh noise (renoise, LongSANA) or n = x + (1 - s_k) v (euler); the output is "
                         "the last x0; then one t = 0 pass over it (prompt, no CFG) commits the block; the state keeps the "
                         "last cached_blocks blocks; the first burn_in_blocks blocks are made so and not written"),
        "pixel_range": [-1, 1],
    }
    if extra:
        lv.update(extra)
    return {"config": json.dumps(model.cfg), "longvk": json.dumps(lv)}


def read_exported(path):
    """An exported model file (save_weights): its weights as a state dict, and its "longvk" metadata."""
    W, md = st_io.load(path)
    return {k: torch.from_numpy(v) for k, v in W.items()}, json.loads(md.get("longvk", "{}"))


def save_weights(path, model, meta):
    sd = {k: v.detach().to(torch.float32).numpy() for k, v in model.state_dict().items()}
    st_io.save(path, sd, meta)


def draw_timesteps(g, n, sample_ts, p_sample, t_min=0):
    """n integer timesteps in [t_min, 1000]: with probability p_sample one of the sampler's
    timesteps, else uniform."""
    u = torch.randint(t_min, 1001, (n,), generator=g)
    pick = torch.tensor(sample_ts)[torch.randint(0, len(sample_ts), (n,), generator=g)]
    use = torch.rand(n, generator=g) < p_sample
    return torch.where(use, pick, u).to(torch.float32)


def lr_at(a, step):
    if step < a.warmup:
        return a.lr * (step + 1) / a.warmup
    p = (step - a.warmup) / max(1, a.steps - a.warmup)
    return a.lr * (a.lr_floor + (1 - a.lr_floor) * 0.5 * (1 + math.cos(math.pi * min(1.0, p))))


def degrade(x0, g, p, bf):
    """x0 [B, 3, F, H, W] -> a copy where each chunk of bf frames is, with probability p,
    blurred (mixed with a 3x3 binomial blur by a ~ U(0, 1)), faded towards its per-frame mean
    colour (factor U(0.6, 1)) and noised (sigma U(0, 0.06)): what a generated chunk looks
    like when the model hedges."""
    B, C, F, H, W = x0.shape
    nc = F // bf
    sel = (torch.rand(B, 1, nc, 1, 1, 1, generator=g) < p).float()
    k1 = torch.tensor([1.0, 2.0, 1.0]) / 4
    k = (k1[:, None] * k1[None, :]).expand(C, 1, 3, 3)
    fr = x0.permute(0, 2, 1, 3, 4).reshape(B * F, C, H, W)
    blur = torch.nn.functional.conv2d(torch.nn.functional.pad(fr, (1, 1, 1, 1), mode="replicate"), k, groups=C)
    blur = blur.reshape(B, F, C, H, W).permute(0, 2, 1, 3, 4).reshape(B, C, nc, bf, H, W)
    x = x0.reshape(B, C, nc, bf, H, W)
    a = torch.rand(B, 1, nc, 1, 1, 1, generator=g)
    x = x + a * (blur - x)
    mean = x.mean(dim=(4, 5), keepdim=True)
    f = 0.6 + 0.4 * torch.rand(B, 1, nc, 1, 1, 1, generator=g)
    x = mean + (x - mean) * f
    x = x + 0.06 * torch.rand(B, 1, nc, 1, 1, 1, generator=g) * torch.randn(x.shape, generator=g)
    out = sel * x + (1 - sel) * x0.reshape(B, C, nc, bf, H, W)
    return out.reshape(B, C, F, H, W)


def context_perturbation(a, step):
    """data.make_batch's `perturb` for step `step` (None without --ctx-perturb). Its own generator:
    the clips and every other draw of the step stay as without it."""
    if a.ctx_perturb <= 0:
        return None
    return (a.ctx_perturb, a.ctx_size_range, a.ctx_colour_range,
            np.random.Generator(np.random.PCG64([a.seed, step, 1])), a.ctx_fade, a.ctx_touch)


def train_step(a, model, step, part=None):
    """Loss of step `step` (its data and noise depend only on (seed, step)). part = (lo, hi): the
    loss of clips lo..hi-1 of the step's batch alone (one process's share with --procs); every
    random draw is still made for the whole batch, so the shares add up to the whole step."""
    rng = np.random.Generator(np.random.PCG64([a.seed, step]))
    g = torch.Generator().manual_seed(a.seed * 1_000_003 + step)
    F = a.chunks * a.block_frames
    perturb = context_perturbation(a, step)
    batch = data.make_batch(rng, a.batch, F, a.res, a.res, coverage=True, collide=a.collide, perturb=perturb)
    vid, ids, mask, _, cover = batch[:5]
    x0 = torch.from_numpy(vid)
    xp = torch.from_numpy(batch[5]) if perturb is not None else x0
    ids = torch.from_numpy(ids)
    mask = torch.from_numpy(mask)
    drop = torch.rand(a.batch, generator=g) < a.p_uncond
    mask = mask * (~drop)[:, None].float()
    offset = torch.randint(0, 900, (a.batch,), generator=g)  # absolute RoPE frame position

    xc = degrade(xp, g, a.ctx_degrade, a.block_frames) if a.ctx_degrade > 0 else xp
    lo, hi = part or (0, a.batch)
    _, contribs = model(xc[lo:hi], torch.zeros(hi - lo, F), ids[lo:hi], mask[lo:hi], chunks=a.chunks,
                        frame_offset=offset[lo:hi], window=a.window, return_contrib=True)
    ctx = context_from_clean(contribs, a.window)
    # context dropout: such a chunk is generated from the text alone, exactly as chunk 0 is
    # (RoPE only sees time differences, so its frame offset does not matter). Chunk 0 is
    # otherwise 1/chunks of the data and the only place where the text alone must decide.
    keep = (torch.rand(a.batch, a.chunks, generator=g) >= a.p_ctx_drop).float()
    for c in ctx:
        c["S"] = c["S"] * keep[lo:hi, :, None, None, None]
        c["z"] = c["z"] * keep[lo:hi, :, None, None]
        c["left"] = c["left"] * keep[lo:hi, :, None, None]
    nocontext = keep == 0
    nocontext[:, 0] = True  # chunk 0 never has context

    sample_ts = [int(s) for s in a.sample_timesteps.split(",")]
    tc = draw_timesteps(g, a.batch * a.chunks, sample_ts, a.p_sample_t, a.t_min).reshape(a.batch, a.chunks)
    if a.text_only_timesteps:
        grid = torch.tensor([float(t) for t in a.text_only_timesteps.split(",")])
        tc = torch.where(nocontext, grid[torch.randint(0, len(grid), tc.shape, generator=g)], tc)
    tF = tc.repeat_interleave(a.block_frames, dim=1)  # [B, F]
    base = x0  # what x_t is noised from: the chunk itself, or (warm start) the previous chunk's last frame
    if a.warm_start_train > 0:
        ws = (torch.rand(a.batch, a.chunks, generator=g) < a.warm_start_train) & (keep > 0)
        ws[:, 0] = False  # the first chunk has no previous frame (and inference makes it from noise)
        tc = torch.where(ws, torch.full_like(tc, float(a.warm_start_t)), tc)
        tF = tc.repeat_interleave(a.block_frames, dim=1)
        last = xc[:, :, a.block_frames - 1::a.block_frames]  # [B, C, chunks, H, W]
        prev_last = torch.cat([last[:, :, :1], last[:, :, :-1]], dim=2).repeat_interleave(a.block_frames, dim=2)
        wsF = ws.repeat_interleave(a.block_frames, dim=1)[:, None, :, None, None]
        base = torch.where(wsF, prev_last, x0)
    s = (tF / 1000.0)[:, None, :, None, None]
    noise = torch.randn(x0.shape, generator=g)
    xt = (1 - s) * base + s * noise
    # this process's share of the batch (every draw above was made for the whole batch)
    x0, xt, base, noise, s, tF = (u[lo:hi] for u in (x0, xt, base, noise, s, tF))
    ids, mask, offset, cover = ids[lo:hi], mask[lo:hi], offset[lo:hi], cover[lo:hi]
    if a.warm_start_train > 0:
        wsF = wsF[lo:hi]
    v = model(xt, tF, ids, mask, chunks=a.chunks, frame_offset=offset, context=ctx)
    # the sampler reads x0 = x_t - s v, so the target velocity is (x_t - x0) / s: noise - x0 when x_t was
    # noised from x0 itself, plus (1 - s) / s (last - x0) for a warm-started chunk
    target = noise - x0
    if a.warm_start_train > 0:
        target = target + torch.where(wsF, (1 - s) / s.clamp(min=1e-3) * (base - x0), torch.zeros(()))
    w = losses.object_weights(cover, a.obj_weight, a.obj_dilate)  # [B, 1, F, H, W]
    err = (w * (v - target).pow(2)).mean(dim=(1, 3, 4)) / w.mean(dim=(1, 3, 4))  # [B, F]
    loss = err.mean()
    per_chunk = err.reshape(hi - lo, a.chunks, -1).mean(-1)[nocontext[lo:hi]]  # chunks made from text alone
    return loss, (float(per_chunk.sum()), per_chunk.numel())


def check_blas():
    """Debian's default libblas3 is the netlib reference BLAS (~1-3 GFLOP/s here); OpenBLAS is
    ~20x faster (see RECIPE.md). Warn when matmuls are that slow."""
    a = torch.randn(512, 512)
    t = time.process_time()
    for _ in range(4):
        a @ a
    gf = 4 * 2 * 512 ** 3 / max(1e-9, time.process_time() - t) / 1e9
    if gf < 8:
        print(f"warning: matmul runs at {gf:.1f} GFLOP/s: torch uses a slow BLAS; run with OpenBLAS "
              "(LD_LIBRARY_PATH=.../openblas-pthread, see RECIPE.md)", file=sys.stderr, flush=True)
    return gf


def main(argv=None):
    a = parse_args(argv)
    if a.procs > 1 and not a.export:
        # one process per core, each with its share of every step's batch; gradients are
        # averaged (gloo on this machine), so every process takes the same optimiser step
        if a.batch % a.procs:
            sys.exit(f"train.py: --batch {a.batch} does not split into --procs {a.procs}")
        os.makedirs(a.out, exist_ok=True)
        rendezvous = os.path.join(os.path.abspath(a.out), ".rendezvous")
        if os.path.exists(rendezvous):
            os.remove(rendezvous)
        torch.multiprocessing.spawn(run, args=(a, rendezvous, os.getpid()), nprocs=a.procs)
        return
    run(0, a, None)


def die_with_parent(parent_pid):
    """A --procs worker ends when the process that started it does. Killing that process alone (kill,
    pkill; Ctrl-C reaches the whole group anyway) used to leave its workers training on, unseen, still
    writing checkpoints and taking the cores from the next run."""
    PR_SET_PDEATHSIG = 1  # linux/prctl.h
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent_pid:  # it died before prctl took effect
        os._exit(1)


def run(rank, a, rendezvous, parent_pid=None):
    dist = None
    if rendezvous:
        die_with_parent(parent_pid)
        import torch.distributed as dist
        dist.init_process_group("gloo", init_method="file://" + rendezvous, rank=rank, world_size=a.procs)
    lead = rank == 0
    log = print if lead else (lambda *args, **kw: None)
    torch.set_num_threads(a.threads)
    log(f"matmul {check_blas():.1f} GFLOP/s", flush=True)
    torch.manual_seed(a.seed)
    os.makedirs(a.out, exist_ok=True)
    model = build_model(a)
    ema = build_model(a)
    ema.load_state_dict(model.state_dict())
    for p in ema.parameters():
        p.requires_grad_(False)
    nparams = sum(p.numel() for p in model.parameters())
    decay, no_decay = [], []
    for n, p in model.named_parameters():
        (decay if p.dim() >= 2 and "embedding" not in n else no_decay).append(p)
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": a.wd}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, 0.99))
    ckpt_path = os.path.join(a.out, "ckpt.pt")
    step, elapsed = 0, 0.0
    if a.export:
        if a.init.endswith(".safetensors"):  # a new card for exported weights
            weights, lv = read_exported(a.init)
            steps_done = lv["train_steps"]
        else:
            ck = torch.load(ckpt_path)
            weights, steps_done = ck["ema"], ck["step"]
        ema.load_state_dict(weights)
        card = {}
        if a.card_from:
            card = {k: v for k, v in read_exported(a.card_from)[1].items() if k in CARD_KEYS}
        meta = metadata(a, ema, {"train_steps": steps_done, **card})
        save_weights(a.export, ema, meta)
        lv = json.loads(meta["longvk"])
        # the card decides what the file generates: say which one was written (a forgotten
        # first-block flag gives a first block without CFG, i.e. background only)
        print(f"wrote {a.export} (EMA weights at step {steps_done}); card: "
              + json.dumps({k: lv[k] for k in CARD_KEYS}))
        return
    if a.init.endswith(".safetensors"):  # exported weights (EMA): the model and its EMA start from them
        model.load_state_dict(read_exported(a.init)[0])
        ema.load_state_dict(model.state_dict())
        log(f"initialised from {a.init}", flush=True)
    elif a.init:
        ck = torch.load(a.init)
        model.load_state_dict(ck["model"])
        ema.load_state_dict(ck["ema"])
        log(f"initialised from {a.init} (its step {ck['step']}, {ck['elapsed'] / 60:.1f} min)", flush=True)
    if a.resume and os.path.exists(ckpt_path):
        ck = torch.load(ckpt_path)
        model.load_state_dict(ck["model"])
        ema.load_state_dict(ck["ema"])
        opt.load_state_dict(ck["opt"])
        step, elapsed = ck["step"], ck["elapsed"]
        log(f"resumed from {ckpt_path} at step {step} ({elapsed / 60:.1f} min done)", flush=True)
    log(f"params {nparams} ({nparams * 4 / 1e6:.2f} MB f32); config {json.dumps(model.cfg)}; args {vars(a)}",
        flush=True)
    params = list(model.parameters())
    share = a.batch // a.procs
    part = (rank * share, (rank + 1) * share) if dist else None

    def checkpoint():
        torch.save({"model": model.state_dict(), "ema": ema.state_dict(), "opt": opt.state_dict(),
                    "step": step, "elapsed": elapsed + time.time() - t_start, "args": vars(a)},
                   ckpt_path + ".tmp")
        os.replace(ckpt_path + ".tmp", ckpt_path)

    t_start = time.time()
    last_ckpt = t_start
    acc, acc_first, acc_n = 0.0, 0.0, 0
    while step < a.steps:
        for gr in opt.param_groups:
            gr["lr"] = lr_at(a, step)
        loss, (first_sum, first_n) = train_step(a, model, step, part)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        over_time = bool(a.max_minutes and elapsed + time.time() - t_start > a.max_minutes * 60)
        if dist:
            # one all-reduce a step: the gradients, the logged losses and the lead's stop decision
            flat = torch.cat([p.grad.reshape(-1) if p.grad is not None else torch.zeros(p.numel()) for p in params]
                             + [torch.tensor([float(loss), first_sum, first_n, float(over_time and lead)])])
            dist.all_reduce(flat)
            flat /= a.procs
            o = 0
            for p in params:
                g_all = flat[o:o + p.numel()].view_as(p)
                o += p.numel()
                if p.grad is None:
                    if not bool(g_all.any()):
                        continue  # no process had a gradient for it: leave it out of the step, as one process would
                    p.grad = torch.zeros_like(p)
                p.grad.copy_(g_all)
            # the no-context loss is a mean over chunks that the processes hold in unequal numbers
            scalars = flat[-4:].tolist()
            loss_v, first_v, over_time = scalars[0], scalars[1] / scalars[2], scalars[-1] > 0
        else:
            loss_v, first_v = float(loss), first_sum / first_n
        gnorm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        with torch.no_grad():
            d = min(a.ema, (1 + step) / (10 + step))
            for pe, pm in zip(ema.parameters(), model.parameters()):
                pe.mul_(d).add_(pm, alpha=1 - d)
        step += 1
        acc += loss_v
        acc_first += first_v
        acc_n += 1
        now = time.time()
        if step % a.log_every == 0 or step == a.steps:
            tot = elapsed + now - t_start
            log(f"step {step} loss {acc / acc_n:.4f} no-context {acc_first / acc_n:.4f} gnorm {float(gnorm):.2f} "
                f"lr {lr_at(a, step - 1):.2e} {tot / 60:.1f} min ({tot / step:.2f} s/step)", flush=True)
            acc, acc_first, acc_n = 0.0, 0.0, 0
        if lead and (now - last_ckpt > a.ckpt_minutes * 60 or step == a.steps):
            checkpoint()
            save_weights(os.path.join(a.out, "default.safetensors"), ema,
                         metadata(a, ema, {"train_steps": step}))
            last_ckpt = now
        if over_time or (a.stop_at and step >= a.stop_at):
            if lead:
                checkpoint()
            log(f"stopping at step {step} ({'--max-minutes' if over_time else '--stop-at'})", flush=True)
            break
    log(f"done: step {step}, {(elapsed + time.time() - t_start) / 60:.1f} min", flush=True)
    if dist:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
