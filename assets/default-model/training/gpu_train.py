"""Run B4's training step (train.py, the options of the weights shipped on 2026-11-25) on a CUDA
GPU with a larger batch: the experiment that asks whether more compute, or training the warm start, teaches the model its
context's motion (EXPERIMENTS.md, "More compute, on a GPU"). Not how the shipped weights were made.

What differs from train.py: the clips, context degradation and perturbation, dropout and timesteps
are drawn by train.py's own helpers, but on CPU worker processes (--workers) and in another order
(the step's noise before the warm-start draws), so a run here matches a train.py run in
distribution, not draw for draw; the EMA starts from --init's model weights; one process. The
checkpoint (--out/ckpt.pt, written every minute and at the end) has train.py's keys, so
`python3 -m training.train --out DIR --export F --card-from default.safetensors` exports it.

From assets/default-model (the runs of EXPERIMENTS.md, "More compute, on a GPU"):

    python3 -m training.gpu_train --out G32 --batch 32 --steps 4385 --fixed         # 8 min on an H100
    python3 -m training.gpu_train --out WS --batch 32 --steps 2000 --lr 3e-4 --fixed --init G32/ckpt.pt \\
        --warm-start-train 0.5
    python3 -m training.gpu_train --out R16 --batch 16 --steps 1250 --lr 2e-3 --fixed   # 20,000 clips:
                                                                                 # what 2 h on 2 cores train
"""
import argparse
import os
import time

import numpy as np
import torch

from . import data, losses, train
from .model import context_from_clean


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--batch", type=int, default=16, help="clips per step")
    ap.add_argument("--steps", type=int, default=10000, help="the learning-rate schedule's length")
    ap.add_argument("--fixed", action="store_true",
                    help="keep --steps; without it the schedule is re-planned at step 60 to end after --minutes")
    ap.add_argument("--minutes", type=float, default=8.0, help="stop after this long (plus 30 s) in any case")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--block-frames", type=int, default=4)
    ap.add_argument("--chunks", type=int, default=8)
    ap.add_argument("--window", type=int, default=2)
    ap.add_argument("--workers", type=int, default=12, help="CPU processes making the clips")
    ap.add_argument("--init", default="", help="start from this checkpoint's model weights")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--warm-start-train", type=float, default=0.0,
                    help="fraction of the chunks with context started from the previous chunk's last frame at "
                         "t = --warm-start-t, as the card's later blocks are (train.py's option of the same name)")
    ap.add_argument("--warm-start-t", type=int, default=600)
    ap.add_argument("--collide", action="store_true", help="objects bounce off each other (data.py)")
    ap.add_argument("--ctx-fade", type=float, default=0.0, help="train.py's option of the same name")
    ap.add_argument("--seed", default="20251122")
    g = ap.parse_args()
    # run B4's options, read by train.py's own parser
    a = train.parse_args(["--out", g.out, "--block-frames", str(g.block_frames), "--chunks", str(g.chunks),
                          "--batch", str(g.batch), "--window", str(g.window), "--lr", str(g.lr), "--warmup", "100",
                          "--t-min", "100", "--obj-weight", "10", "--obj-dilate", "3", "--ctx-degrade", "0.5",
                          "--p-ctx-drop", "0.2", "--ctx-perturb", "0.5", "--sample-timesteps", "600,300",
                          "--ctx-fade", str(g.ctx_fade), "--steps", str(g.steps), "--seed", g.seed]
                         + (["--collide"] if g.collide else []))
    return g, a


def make_step(g_a, a, step):
    """Everything step `step` draws (CPU tensors), from (seed, step) alone."""
    rng = np.random.Generator(np.random.PCG64([a.seed, step]))
    g = torch.Generator().manual_seed(a.seed * 1_000_003 + step)
    F = a.chunks * a.block_frames
    vid, ids, mask, _, cover, pv = data.make_batch(rng, a.batch, F, a.res, a.res, coverage=True, collide=a.collide,
                                                   perturb=train.context_perturbation(a, step))
    x0 = torch.from_numpy(vid)
    ids, mask = torch.from_numpy(ids), torch.from_numpy(mask)
    drop = torch.rand(a.batch, generator=g) < a.p_uncond
    mask = mask * (~drop)[:, None].float()
    offset = torch.randint(0, 900, (a.batch,), generator=g)
    xc = train.degrade(torch.from_numpy(pv), g, a.ctx_degrade, a.block_frames)
    keep = (torch.rand(a.batch, a.chunks, generator=g) >= a.p_ctx_drop).float()
    sample_ts = [int(s) for s in a.sample_timesteps.split(",")]
    tc = train.draw_timesteps(g, a.batch * a.chunks, sample_ts, a.p_sample_t, a.t_min).reshape(a.batch, a.chunks)
    noise = torch.randn(x0.shape, generator=g)
    w = losses.object_weights(cover, a.obj_weight, a.obj_dilate)
    # warm start: x_t of such a chunk is noised from the previous chunk's last (context) frame
    ws = (torch.rand(a.batch, a.chunks, generator=g) < g_a.warm_start_train) & (keep > 0)
    ws[:, 0] = False
    tc = torch.where(ws, torch.full_like(tc, float(g_a.warm_start_t)), tc)
    last = xc[:, :, a.block_frames - 1::a.block_frames]
    prev_last = torch.cat([last[:, :, :1], last[:, :, :-1]], dim=2).repeat_interleave(a.block_frames, dim=2)
    wsF = ws.repeat_interleave(a.block_frames, dim=1)[:, None, :, None, None]
    base = torch.where(wsF, prev_last, x0)
    return step, x0, xc, ids, mask, offset, keep, tc, noise, w, base, wsF


class Steps(torch.utils.data.IterableDataset):
    """Worker k of n makes steps k, k + n, ...; the loader hands them out in step order."""

    def __init__(self, g_a, a):
        self.g_a, self.a = g_a, a

    def __iter__(self):
        torch.set_num_threads(1)
        wi = torch.utils.data.get_worker_info()
        step, n = (wi.id, wi.num_workers) if wi else (0, 1)
        while True:
            yield make_step(self.g_a, self.a, step)
            step += n


def loss_of(model, a, batch, dev):
    """train.train_step's loss (the clean pass, then the noisy pass reading its context)."""
    step, x0, xc, ids, mask, offset, keep, tc, noise, w, base, wsF = batch
    F = a.chunks * a.block_frames
    _, contribs = model(xc, torch.zeros(a.batch, F, device=dev), ids, mask, chunks=a.chunks,
                        frame_offset=offset, window=a.window, return_contrib=True)
    ctx = context_from_clean(contribs, a.window)
    for c in ctx:
        c["S"] = c["S"] * keep[:, :, None, None, None]
        c["z"] = c["z"] * keep[:, :, None, None]
        c["left"] = c["left"] * keep[:, :, None, None]
    tF = tc.repeat_interleave(a.block_frames, dim=1)
    s = (tF / 1000.0)[:, None, :, None, None]
    xt = (1 - s) * base + s * noise
    v = model(xt, tF, ids, mask, chunks=a.chunks, frame_offset=offset, context=ctx)
    # a warm-started chunk's x0 = x_t - s v holds when v = noise - x0 + (1 - s) / s (base - x0)
    target = noise - x0 + torch.where(wsF, (1 - s) / s.clamp(min=1e-3) * (base - x0), torch.zeros((), device=dev))
    err = (w * (v - target).pow(2)).mean(dim=(1, 3, 4)) / w.mean(dim=(1, 3, 4))
    return err.mean()


def main():
    g_a, a = parse_args()
    dev = g_a.device
    torch.manual_seed(a.seed)
    model = train.build_model(a).to(dev)
    ema = train.build_model(a).to(dev)
    if g_a.init:
        model.load_state_dict(torch.load(g_a.init, map_location=dev)["model"])
    ema.load_state_dict(model.state_dict())
    for p in ema.parameters():
        p.requires_grad_(False)
    decay, no_decay = [], []
    for n, p in model.named_parameters():
        (decay if p.dim() >= 2 and "embedding" not in n else no_decay).append(p)
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": a.wd}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, 0.99))
    loader = torch.utils.data.DataLoader(Steps(g_a, a), batch_size=None, num_workers=g_a.workers, prefetch_factor=4)
    os.makedirs(a.out, exist_ok=True)

    def save(step):
        torch.save({"model": {k: v.cpu() for k, v in model.state_dict().items()},
                    "ema": {k: v.cpu() for k, v in ema.state_dict().items()},
                    "step": step, "elapsed": time.time() - t0, "args": vars(a)}, os.path.join(a.out, "ckpt.pt"))

    t0 = last_save = time.time()
    logged = []
    for batch in loader:
        batch = [b.to(dev, non_blocking=True) if torch.is_tensor(b) else b for b in batch]
        step = batch[0]
        for group in opt.param_groups:
            group["lr"] = train.lr_at(a, step)
        loss = loss_of(model, a, batch, dev)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        with torch.no_grad():
            for pe, pm in zip(ema.parameters(), model.parameters()):
                pe.lerp_(pm, 1 - a.ema)
        if step == 20:
            t20 = time.time()
        if step == 60 and not g_a.fixed:  # the cosine schedule ends with the time budget
            rate = (time.time() - t20) / 40
            a.steps = int(g_a.minutes * 60 / rate)
            print(f"{rate * 1000:.1f} ms a step: {a.steps} steps", flush=True)
        if step % 50 == 0:
            logged.append(loss.item())
        if step % 500 == 0:
            print(f"step {step} loss {np.mean(logged[-10:]):.4f} {time.time() - t0:.0f} s", flush=True)
        now = time.time()
        if now - last_save > 60:
            save(step)
            last_save = now
        if step + 1 >= a.steps or now - t0 > g_a.minutes * 60 + 30:
            break
    save(step)
    print(f"done step {step} {time.time() - t0:.0f} s", flush=True)


if __name__ == "__main__":
    main()
