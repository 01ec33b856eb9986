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

One phase made default.safetensors (run R1; the exact commands in RECIPE.md, "Commands"):
1244 steps of 16 clips, 4-frame chunks, window 2, context degradation, perturbation and fading,
the warm start trained, colliding objects, a low final learning rate, text-only chunks on the
first block's grid, 93 minutes on both cores. Run with OpenBLAS
(RECIPE.md) and `nice -n 5`. `--procs 2` runs one process per core on halves of every batch
(the same steps, 1.8 times faster on this idle machine).
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

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import adversarial  # noqa: E402
import data  # noqa: E402
import losses  # noqa: E402
from model import SanaVideoDiT, context_from_clean  # noqa: E402
import self_forcing  # noqa: E402
import unroll  # noqa: E402
import st  # noqa: E402


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=HERE, help="directory for ckpt.pt, default.safetensors, the log")
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
    ap.add_argument("--rope-theta", type=float, default=10000.0,
                    help="RoPE base (SANA-Video's: 10000); on an 8 x 8 token grid 10000 leaves about two "
                         "frequencies per spatial axis that vary across the frame; written into the config when it differs, "
                         "and the engine reads it. Tried, not kept (EXPERIMENTS.md, \"What the carried state carries\")")
    ap.add_argument("--caption-channels", type=int, default=32)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--lr-floor", type=float, default=0.1,
                    help="the cosine schedule ends at this fraction of --lr (a lower floor spends the last "
                         "steps at a lower rate, as the 350-step fine-tune WSC did). The shipped run R1 used 0.02 "
                         "with --text-only-timesteps; R2, 0.02 alone, was not kept (EXPERIMENTS.md, \"Run R1 "
                         "again\" and \"The lower final learning rate alone\")")
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
                         "R1 used the first block's grid (EXPERIMENTS.md, \"The first block's count at t = 1000\" "
                         "and \"Run R1 again\")")
    ap.add_argument("--ctx-t-min", type=int, default=-1,
                    help="chunks that read a context draw their uniform timesteps from [ctx-t-min, 1000] instead "
                         "(the same draw mapped linearly; -1: --t-min): at high noise x_t shows little, so the "
                         "chunk must take what it draws from the context. Tried, not kept (EXPERIMENTS.md, \"What the carried state "
                         "carries\")")
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
    ap.add_argument("--motion-weight", type=float, default=0.0,
                    help="adds this weight to the pixels that change from the previous frame of the clip "
                         "(more than 0.1 in some channel, dilated by 1 pixel): where a moving object arrives and "
                         "leaves, about 7%% of a clip's pixels, which a model that copies its context gets "
                         "almost right. Tried, not kept (EXPERIMENTS.md, \"Weighting the moving pixels\")")
    ap.add_argument("--speed-min", type=float, default=0.35,
                    help="slowest object in the clips, pixels a frame at 32 x 32 (the fastest 1.3): lower covers "
                         "the slow objects of the model's own minutes (2 px a second, 0.125 a frame); run WSF "
                         "in EXPERIMENTS.md tried 0.1: not kept")
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
                         "the size and colour the text and data give it, where it would copy the drift. Tried with "
                         "blocks of 8 frames: the objects keep their size, not kept for the seams (EXPERIMENTS.md, "
                         "\"Drawing the context at the wrong size and colour\")")
    ap.add_argument("--ctx-size-range", type=float, default=0.25)
    ap.add_argument("--ctx-colour-range", type=float, default=0.12)
    ap.add_argument("--ctx-fade", type=float, default=0.0,
                    help="with --ctx-perturb: one object of a perturbed context is also drawn smaller and fainter "
                         "(size and opacity x U(1 - F, 1)), the target whole: the model learns to bring back an "
                         "object its own rollout was losing, which the data never shows (objects never vanish). "
                         "Runs WF and R1 (shipped) used 0.6 (EXPERIMENTS.md, \"Keeping the count while moving\" and run WF)")
    ap.add_argument("--ctx-spurious", type=float, default=0.0,
                    help="with --ctx-perturb: the probability that a perturbed context also has a faint copy of "
                         "one object on the mirror image of its path, which the target lacks: the model learns "
                         "to drop an object its own rollout is making up (the other half of --ctx-fade). "
                         "Tried in runs WFS and WG, not kept (EXPERIMENTS.md, \"Fading to nothing\" and run WG)")
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
                         "and predicts them there: they stop moving. Tried, not kept: it moves them but merges them "
                         "(EXPERIMENTS.md, \"Training the warm start\")")
    ap.add_argument("--rollout", type=float, default=0.0,
                    help="fraction of chunks whose clean-pass input (the context of the chunks after them) is the "
                         "model's own generation of that chunk from the real earlier chunks (see rollout_context). "
                         "Tried, not kept (EXPERIMENTS.md, \"Training on its own output\")")
    ap.add_argument("--rollout-steps", default="1000,500", help="timesteps of the sampler that makes them")
    ap.add_argument("--rollout-warm", action="store_true",
                    help="that sampler starts from the previous chunk's last frame (the card's warm start)")
    ap.add_argument("--warm-start-t", type=int, default=400, help="the card's first timestep of later blocks")
    ap.add_argument("--warm-start-second", type=float, default=0.0,
                    help="fraction of the warm-started chunks trained at the sampler's SECOND step instead: "
                         "the model's own first-step prediction (a no-grad pass) re-noised to --warm-start-t2 "
                         "with fresh noise, the target the chunk's x0. The first step hedges (a blurred object "
                         "where the displacement is uncertain); trained on data alone, the second step "
                         "trusts that blur and the objects grow (tried, not kept: EXPERIMENTS.md)")
    ap.add_argument("--warm-start-t2", type=int, default=200, help="the card's second timestep of later blocks")
    ap.add_argument("--adv-weight", type=float, default=0.0,
                    help="weight of an adversarial term on the warm-started chunks (needs --warm-start-train): a "
                         "critic (adversarial.py) tells the real chunk from the model's one-step prediction "
                         "x_t - s v given the chunk before, so an uncertain displacement is pushed towards one sharp "
                         "object instead of the mean-squared-error blur. Tried, not kept: the step then continues the "
                         "motion of real context, but on its own rollouts objects still merge and shrink (EXPERIMENTS.md, "
                         "\"An adversarial term\")")
    ap.add_argument("--adv-start", type=int, default=300, help="steps the critic trains alone before the "
                    "adversarial term reaches the model (a fresh critic learns slowly: its loss was still 1.95 of "
                    "chance's 2.0 after 300 steps)")
    ap.add_argument("--adv-warmup", type=int, default=300, help="steps over which --adv-weight then ramps in")
    ap.add_argument("--adv-lr", type=float, default=2e-4, help="the critic's learning rate (Adam, betas 0, 0.99)")
    ap.add_argument("--adv-width", type=int, default=48, help="the critic's first conv width")
    ap.add_argument("--adv-gain", type=float, default=1.0, help="scale of the critic's logits (adversarial.py)")
    ap.add_argument("--sf-weight", type=float, default=0.0,
                    help="weight of a self-forcing term (self_forcing.py): every step the model also generates "
                         "--sf-blocks chunks in a row from --sf-context real ones, with the card's later-block "
                         "sampler, and a critic that sees the last real chunk as an anchor judges each generated "
                         "chunk against the real clip's (the critic shares --adv-lr, --adv-width and --adv-gain; its "
                         "gradient is ~100x the diffusion loss's at weight 0.2 with gain 10). Tried, not kept "
                         "(EXPERIMENTS.md, \"Self-forcing\")")
    ap.add_argument("--sf-mse", type=float, default=0.0,
                    help="weight of the self-forcing rollout's object-weighted squared error against the real "
                         "clip (from step 0; it needs no critic): where the model is unsure, the optimum is a faded "
                         "object, and objects smeared into the background within 1 s (EXPERIMENTS.md, run X)")
    ap.add_argument("--sf-hist", type=float, default=0.0,
                    help="weight of the rollout's colour-histogram loss (self_forcing.colour_histogram_loss): how "
                         "much of each colour each generated frame has against the real frame, wherever it is")
    ap.add_argument("--sf-start", type=int, default=200, help="steps the self-forcing critic trains alone first")
    ap.add_argument("--sf-warmup", type=int, default=200, help="steps over which --sf-weight then ramps in")
    ap.add_argument("--sf-context", type=int, default=2, help="real chunks committed before the rollout")
    ap.add_argument("--sf-blocks", type=int, default=6, help="chunks the model generates in a row")
    ap.add_argument("--sf-window", type=int, default=2, help="the rollout's cached blocks (the card's)")
    ap.add_argument("--sf-steps", default="400,200", help="the rollout sampler's timesteps (the first is the "
                    "warm start's: x = (1 - s) last + s noise, as the card's)")
    ap.add_argument("--sf-cfg", type=float, default=2.0, help="the rollout's CFG, at its last step only (the card's)")
    ap.add_argument("--unroll-mse", type=float, default=0.0,
                    help="weight of the unrolled loss (unroll.py): every step the model also makes --unroll-blocks "
                         "chunks in a row from --unroll-context real ones with a sampler from noise (--unroll-steps), "
                         "and their object-weighted squared error against the real clip is back-propagated through "
                         "the whole rollout, the carried state included. Tried, not kept (EXPERIMENTS.md, \"What the carried state "
                         "carries\")")
    ap.add_argument("--unroll-blocks", type=int, default=6, help="chunks the unrolled loss generates in a row")
    ap.add_argument("--unroll-batch", type=int, default=0, help="clips of the unrolled loss per step (0: --batch; "
                    "a multiple of --batch / --procs)")
    ap.add_argument("--unroll-context", type=int, default=1, help="real chunks committed before the unrolled rollout")
    ap.add_argument("--unroll-steps", default="1000", help="the unrolled rollout's timesteps (from noise, re-noise "
                    "between steps, no CFG)")
    ap.add_argument("--export", default="", help="only write the EMA weights of --out/ckpt.pt to this path "
                    "(with the metadata of the current arguments, e.g. --sample-timesteps) and exit; with --init "
                    "F.safetensors the weights (and train_steps) of F instead: a new card for exported weights")
    ap.add_argument("--card-from", default="", help="with --export: copy the sampling card (block frames, window, "
                    "timesteps, CFG, warm start, first block) from this model file instead of building it from the "
                    "flags, e.g. --card-from default.safetensors to evaluate new weights with the shipped card")
    ap.add_argument("--max-minutes", type=float, default=0, help="stop (with a checkpoint) after this long; 0: no limit")
    ap.add_argument("--stop-at", type=int, default=0, help="stop (with a checkpoint) after this step, the learning "
                    "rate still scheduled for --steps: repeats exactly a run that --max-minutes stopped there")
    a = ap.parse_args(argv)
    if a.adv_weight > 0 and a.warm_start_train <= 0:
        ap.error("--adv-weight judges the warm-started chunks: it needs --warm-start-train P > 0")
    return a


def build_model(a):
    return SanaVideoDiT(hidden_size=a.hidden, depth=a.depth, num_heads=a.heads, head_dim=a.hidden // a.heads,
                        patch_size=(1, a.patch, a.patch), in_channels=3, out_channels=3,
                        caption_channels=a.caption_channels, mlp_ratio=a.mlp_ratio, vocab_size=len(data.VOCAB),
                        rope_theta=a.rope_theta)


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
    W, md = st.load(path)
    return {k: torch.from_numpy(v) for k, v in W.items()}, json.loads(md.get("longvk", "{}"))


def save_weights(path, model, meta):
    sd = {k: v.detach().to(torch.float32).numpy() for k, v in model.state_dict().items()}
    st.save(path, sd, meta)


def draw_timesteps(g, n, sample_ts, p_sample, t_min=0):
    """n integer timesteps in [t_min, 1000]: with probability p_sample one of the sampler's
    timesteps, else uniform."""
    u = torch.randint(t_min, 1001, (n,), generator=g)
    pick = torch.tensor(sample_ts)[torch.randint(0, len(sample_ts), (n,), generator=g)]
    use = torch.rand(n, generator=g) < p_sample
    return torch.where(use, pick, u).to(torch.float32)


# the extra losses' logged digits
EXTRA_DIGITS = {"critic": 3, "adv": 3, "sf-critic": 3, "sf": 3, "sf-hist": 4, "sf-mse": 4, "unroll": 4}


def ramp(step, start, warmup):
    """0 before step `start`, then rising linearly to 1 over `warmup` steps: how a critic's term comes in."""
    return min(1.0, max(0.0, (step - start) / max(1, warmup)))


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


def rollout_context(a, model, g, x0, xc, ids, mask, offset, lo, hi):
    """The clean pass's input with a fraction --rollout of the chunks replaced by the model's own
    generation of them (no gradient): each chunk made by the later-block sampler (--rollout-steps,
    re-noised, no CFG; with --rollout-warm from the previous chunk's last real frame) while reading
    the real clip's earlier chunks, as a block is made at inference. The chunks after it then learn
    to continue from what the model really makes (blurred, slowed, a little off) towards the real
    clip: without this the model only ever sees perfect context and its own blocks derail the next.
    Returns the whole batch (rows outside lo..hi unchanged)."""
    B, C, F, H, W = x0.shape
    bf, nc = a.block_frames, a.chunks
    steps = [float(t) for t in a.rollout_steps.split(",")]
    sel = torch.rand(B, nc, generator=g) < a.rollout
    noise = torch.randn((len(steps),) + x0.shape, generator=g)
    was_training = model.training
    model.eval()
    with torch.no_grad():
        xs = x0[lo:hi]
        _, contribs = model(xs, torch.zeros(hi - lo, F), ids[lo:hi], mask[lo:hi], chunks=nc,
                            frame_offset=offset[lo:hi], window=a.window, return_contrib=True)
        ctx = context_from_clean(contribs, a.window)
        x = noise[0, lo:hi]
        if a.rollout_warm:
            last = xs[:, :, bf - 1::bf]
            prev_last = torch.cat([last[:, :, :1], last[:, :, :-1]], dim=2).repeat_interleave(bf, dim=2)
            s0 = steps[0] / 1000.0
            x = (1 - s0) * prev_last + s0 * x
        for k, t in enumerate(steps):
            s = t / 1000.0
            x0h = x - s * model(x, torch.full((hi - lo, F), t), ids[lo:hi], mask[lo:hi], chunks=nc,
                                frame_offset=offset[lo:hi], context=ctx)
            if k + 1 < len(steps):
                s2 = steps[k + 1] / 1000.0
                x = (1 - s2) * x0h + s2 * noise[k + 1, lo:hi]
    model.train(was_training)
    out = xc.clone()
    selF = sel[lo:hi].repeat_interleave(bf, dim=1)[:, None, :, None, None]
    out[lo:hi] = torch.where(selF, x0h.clamp(-1, 1), xc[lo:hi])
    return out


def context_perturbation(a, step):
    """data.make_batch's `perturb` for step `step` (None without --ctx-perturb). Its own generator:
    the clips and every other draw of the step stay as without it."""
    if a.ctx_perturb <= 0:
        return None
    return (a.ctx_perturb, a.ctx_size_range, a.ctx_colour_range,
            np.random.Generator(np.random.PCG64([a.seed, step, 1])), a.ctx_fade, a.ctx_spurious, a.ctx_touch)


def train_step(a, model, step, part=None, critic=None):
    """Loss of step `step` (its data and noise depend only on (seed, step)). part = (lo, hi): the
    loss of clips lo..hi-1 of the step's batch alone (one process's share with --procs); every
    random draw is still made for the whole batch, so the shares add up to the whole step."""
    rng = np.random.Generator(np.random.PCG64([a.seed, step]))
    g = torch.Generator().manual_seed(a.seed * 1_000_003 + step)
    F = a.chunks * a.block_frames
    perturb = context_perturbation(a, step)
    batch = data.make_batch(rng, a.batch, F, a.res, a.res, coverage=True, collide=a.collide, perturb=perturb,
                            speed_min=a.speed_min)
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
    if a.rollout > 0:
        xc = rollout_context(a, model, g, x0, xc, ids, mask, offset, lo, hi)
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
    if a.ctx_t_min >= 0:
        hi_t = a.ctx_t_min + (tc - a.t_min) * (1000 - a.ctx_t_min) / (1000 - a.t_min)
        tc = torch.where(~nocontext & ~torch.isin(tc, torch.tensor(sample_ts, dtype=tc.dtype)), hi_t.round(), tc)
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
    x0, xt, base, noise, s, tF, tc, keep = (u[lo:hi] for u in (x0, xt, base, noise, s, tF, tc, keep))
    ids, mask, offset, cover = ids[lo:hi], mask[lo:hi], offset[lo:hi], cover[lo:hi]
    if a.warm_start_train > 0:
        ws, wsF = ws[lo:hi], wsF[lo:hi]
    if a.warm_start_train > 0 and a.warm_start_second > 0:
        second = ws & (torch.rand(a.batch, a.chunks, generator=g) < a.warm_start_second)[lo:hi]
        with torch.no_grad():
            first_x0 = xt - s * model(xt, tF, ids, mask, chunks=a.chunks, frame_offset=offset, context=ctx)
        secondF = second.repeat_interleave(a.block_frames, dim=1)[:, None, :, None, None]
        tc = torch.where(second, torch.full_like(tc, float(a.warm_start_t2)), tc)
        tF = tc.repeat_interleave(a.block_frames, dim=1)
        s = (tF / 1000.0)[:, None, :, None, None]
        base = torch.where(secondF, first_x0, base)
        fresh = torch.randn((a.batch,) + x0.shape[1:], generator=g)[lo:hi]
        noise = torch.where(secondF, fresh, noise)  # re-noise: fresh noise
        xt = (1 - s) * base + s * noise
    v = model(xt, tF, ids, mask, chunks=a.chunks, frame_offset=offset, context=ctx)
    # the sampler reads x0 = x_t - s v, so the target velocity is (x_t - x0) / s: noise - x0 when x_t was
    # noised from x0 itself, plus (1 - s) / s (last - x0) for a warm-started chunk
    target = noise - x0
    if a.warm_start_train > 0:
        target = target + torch.where(wsF, (1 - s) / s.clamp(min=1e-3) * (base - x0), torch.zeros(()))
    w = losses.object_weights(cover, a.obj_weight, a.obj_dilate)  # [B, 1, F, H, W]
    if a.motion_weight > 0:
        step_diff = (x0[:, :, 1:] - x0[:, :, :-1]).abs().amax(dim=1) > 0.1  # [B, F-1, H, W]
        moved = torch.cat([torch.zeros_like(step_diff[:, :1]), step_diff], dim=1).float()
        moved = torch.nn.functional.max_pool2d(moved, 3, stride=1, padding=1)
        w = w + a.motion_weight * moved[:, None]
    err = (w * (v - target).pow(2)).mean(dim=(1, 3, 4)) / w.mean(dim=(1, 3, 4))  # [B, F]
    loss = err.mean()
    adv = None
    if critic is not None and bool(ws.any()):
        # the sampler's first step of a later block reads x0 = x_t - s v; the critic judges it against
        # the real chunk, both after the chunk the model read as context (xc: degraded like its own output)
        fake = xt - s * v
        prev = adversarial.select_chunks(xc[lo:hi], a.block_frames, ws, previous=True)
        real = adversarial.select_chunks(x0, a.block_frames, ws)
        fake = adversarial.select_chunks(fake, a.block_frames, ws)
        g_adv = adversarial.generator_loss(critic, (prev, fake))
        d_loss = adversarial.critic_loss(critic, (prev, real), (prev, fake.detach()))
        loss = loss + a.adv_weight * ramp(step, a.adv_start, a.adv_warmup) * g_adv
        adv = (d_loss, float(g_adv))
    per_chunk = err.reshape(hi - lo, a.chunks, -1).mean(-1)[nocontext[lo:hi]]  # chunks made from text alone
    return loss, (float(per_chunk.sum()), per_chunk.numel()), adv


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
    # the training-only critics: (checkpoint key, its optimiser's key, critic, optimiser)
    critics = []
    for key, opt_key, weight, kind in (("critic", "critic_opt", a.adv_weight, adversarial.PairCritic),
                                       ("sf_critic", "sf_opt", a.sf_weight, adversarial.AnchoredCritic)):
        if weight > 0 and not a.export:
            c = kind(a.block_frames, a.adv_width, a.adv_gain)
            critics.append((key, opt_key, c, torch.optim.Adam(c.parameters(), lr=a.adv_lr, betas=(0.0, 0.99))))
    critic = next((c for key, _, c, _ in critics if key == "critic"), None)
    sf_critic = next((c for key, _, c, _ in critics if key == "sf_critic"), None)
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
        for key, _, c, _ in critics:
            if key in ck:  # go on with a trained critic (its optimiser starts afresh)
                c.load_state_dict(ck[key])
                log(f"the {key} too", flush=True)
        log(f"initialised from {a.init} (its step {ck['step']}, {ck['elapsed'] / 60:.1f} min)", flush=True)
    if a.resume and os.path.exists(ckpt_path):
        ck = torch.load(ckpt_path)
        model.load_state_dict(ck["model"])
        ema.load_state_dict(ck["ema"])
        opt.load_state_dict(ck["opt"])
        for key, opt_key, c, o in critics:
            c.load_state_dict(ck[key])
            o.load_state_dict(ck[opt_key])
        step, elapsed = ck["step"], ck["elapsed"]
        log(f"resumed from {ckpt_path} at step {step} ({elapsed / 60:.1f} min done)", flush=True)
    log(f"params {nparams} ({nparams * 4 / 1e6:.2f} MB f32); config {json.dumps(model.cfg)}; args {vars(a)}",
        flush=True)
    params = list(model.parameters()) + [p for _, _, c, _ in critics for p in c.parameters()]
    # the extra losses logged beside the diffusion loss (means over the log interval); the same names in
    # every process, a process without a term's chunks this step adding 0
    extra_names = ((["critic", "adv"] if critic else []) + (["sf-critic", "sf"] if sf_critic else [])
                   + (["sf-hist"] if a.sf_hist > 0 else []) + (["sf-mse"] if a.sf_mse > 0 else [])
                   + (["unroll"] if a.unroll_mse > 0 else []))
    share = a.batch // a.procs
    part = (rank * share, (rank + 1) * share) if dist else None

    def checkpoint():
        torch.save({"model": model.state_dict(), "ema": ema.state_dict(), "opt": opt.state_dict(),
                    "step": step, "elapsed": elapsed + time.time() - t_start, "args": vars(a),
                    **{k: v for key, opt_key, c, o in critics
                       for k, v in ((key, c.state_dict()), (opt_key, o.state_dict()))}},
                   ckpt_path + ".tmp")
        os.replace(ckpt_path + ".tmp", ckpt_path)

    t_start = time.time()
    last_ckpt = t_start
    acc, acc_first, acc_n = 0.0, 0.0, 0
    acc_extra = dict.fromkeys(extra_names, 0.0)
    while step < a.steps:
        for gr in opt.param_groups:
            gr["lr"] = lr_at(a, step)
        loss, (first_sum, first_n), adv = train_step(a, model, step, part, critic)
        extra = dict.fromkeys(extra_names, 0.0)
        if a.sf_weight > 0 or a.sf_hist > 0 or a.sf_mse > 0:
            sf_g, sf_d, sf_hist, sf_mse = self_forcing.step_losses(a, model, sf_critic, step, part)
            loss = (loss + a.sf_weight * ramp(step, a.sf_start, a.sf_warmup) * sf_g + a.sf_hist * sf_hist
                    + a.sf_mse * sf_mse)
            extra.update({"sf-critic": float(sf_d), "sf": float(sf_g), "sf-hist": float(sf_hist),
                          "sf-mse": float(sf_mse)})
        if a.unroll_mse > 0:
            un = unroll.unrolled_loss(a, model, step, part)
            loss = loss + a.unroll_mse * un
            extra["unroll"] = float(un)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        for _, _, c, o in critics:
            o.zero_grad(set_to_none=True)  # drop what the generator's terms put there
        if adv is not None:
            adv[0].backward()
            extra.update({"critic": float(adv[0]), "adv": adv[1]})
        if sf_critic is not None:
            sf_d.backward()
        over_time = bool(a.max_minutes and elapsed + time.time() - t_start > a.max_minutes * 60)
        if dist:
            # one all-reduce a step: the gradients, the logged losses and the lead's stop decision
            # (a process with no warm-started chunk this step contributes zero critic gradients)
            flat = torch.cat([p.grad.reshape(-1) if p.grad is not None else torch.zeros(p.numel()) for p in params]
                             + [torch.tensor([float(loss), first_sum, first_n, *(extra[n] for n in extra_names),
                                              float(over_time and lead)])])
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
            scalars = flat[-(len(extra_names) + 4):].tolist()
            loss_v, first_v, over_time = scalars[0], scalars[1] / scalars[2], scalars[-1] > 0
            extra = dict(zip(extra_names, scalars[3:-1]))
        else:
            loss_v, first_v = float(loss), first_sum / first_n
        gnorm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        for _, _, c, o in critics:
            o.step()
        for n in extra_names:
            acc_extra[n] += extra[n]
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
                f"lr {lr_at(a, step - 1):.2e} {tot / 60:.1f} min ({tot / step:.2f} s/step)"
                + "".join(f" {n} {v / acc_n:.{EXTRA_DIGITS[n]}f}" for n, v in acc_extra.items()), flush=True)
            acc, acc_first, acc_n = 0.0, 0.0, 0
            acc_extra = dict.fromkeys(extra_names, 0.0)
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
