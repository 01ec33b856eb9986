"""Does the model carry on the motion it sees? The question behind "the objects barely move"
(RECIPE.md, "What the model does").

For --clips training clips (data.make_clip, seeds 1000, 1001, ...): the first --context
frames of the real clip are committed to the carried state (t = 0 write passes, as finished
blocks are at inference), then the model generates the next blocks with the later-block
sampler (re-noise steps at T and T/2, CFG 2 at the last; warm start from the last real
frame when T < 1000, else 4 steps from noise). An object pixel differs from the frame's
median colour by more than 0.3 (RGB L2, [0, 1]); positions are the object pixels'
centroid (|dy| + |dx|, pixels).

- next block: the centroid error of the first generated block against the real clip's
  frames at the same times, next to the error of simply repeating the last real frame (the
  median over the block's frames, then per frame of the block);
- 5 s: the net travel over 1 s of the generated continuation against the real clip's.

`--probe N` asks instead whether the velocity is there to be used: for N one-object training clips
(seeds 5001, ...) three chunks are committed (a t = 0 pass, window as the card's), and a ridge
regression from the last frame's cached temporal-conv features (per layer: their mean over the
object's tokens and over all tokens) to the object's velocity (vx, vy, px a frame) is fitted on
three quarters of the clips; it prints the R^2 on the other quarter (1: the velocity is read off
the features exactly, 0: no better than its mean).

`--history W` guides every step of the generated blocks by their context against the same context
with its last block held still (its last frame repeated): v = v_still + W (v - v_still), which
amplifies whatever the context's motion changes in the prediction (history guidance; two more passes
a step and one a block: an experiment, not in the card).

    cd assets/default-model
    LD_LIBRARY_PATH=... /usr/bin/python3 -m training.motion [--weights F] [--t 400,750,1000] [--history W] \\
        [--probe 600]
"""
import argparse
import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before torch loads the BLAS
import numpy as np  # noqa: E402
import torch  # noqa: E402

from . import MODEL_DIR, data  # noqa: E402
from .model import CarriedState, chunk_pass, sample_chunk, still_state  # noqa: E402
from .persistence import shifts  # noqa: E402
from .sample import encode_text, load_model  # noqa: E402


def centroid(frame):
    """frame [3, H, W] in [-1, 1] -> the object pixels' centroid, or None (4 pixels or fewer)."""
    f = (frame.transpose(1, 2, 0) + 1) / 2
    m = np.linalg.norm(f - np.median(f.reshape(-1, 3), 0), axis=-1) > 0.3
    return np.argwhere(m).mean(0) if m.sum() > 4 else None


def distance(a, b):
    return None if a is None or b is None else float(np.abs(a - b).sum())


def median_all(errs):
    """Per-frame lists of errors -> the median of all of them."""
    return float(np.median(sum(errs, [])))


def per_frame(errs):
    return " ".join(f"{np.median(e):.2f}" for e in errs)


def travel(video, lag):
    """Net centroid travel over lag frames, every frame with an object at both ends."""
    return shifts([centroid(video[:, i]) for i in range(video.shape[1])], lag)


def continue_clip(model, lv, clip, caption, context, frames, T, seed, history=0.0):
    """Commits clip[:, :context], generates `frames` more; -> generated [3, frames, H, W]. history > 0:
    every step guided by the context against the same context held still (model.sample_chunk)."""
    bf, K = lv["block_frames"], lv["cached_blocks"]
    ids, mask = encode_text(lv, caption)
    x = torch.from_numpy(clip)[None]
    state = CarriedState(model.depth, K)
    g = torch.Generator().manual_seed(seed)
    steps = [T, T / 2] if T < 1000 else [1000.0, 750.0, 500.0, 250.0]
    out = []
    with torch.no_grad():
        for c in range(context // bf):
            before = state.copy()
            chunk_pass(model, state, x[:, :, c * bf:(c + 1) * bf], 0.0, ids, mask, c * bf, commit=True)
        last = x[:, :, context - 1:context]
        for c in range(context // bf, (context + frames) // bf):
            _, C, _, H, W = x.shape
            noise = torch.randn(1, C, bf, H, W, generator=g)
            renoise = torch.randn(len(steps) - 1, 1, C, bf, H, W, generator=g)
            guide = None
            if history > 0:
                guide = (still_state(model, before, last, bf, ids, mask, (c - 1) * bf), history)
                before = state.copy()
            x0 = sample_chunk(model, state, noise, renoise, steps, ids, mask, c * bf, cfg=2.0,
                              cfg_last_steps=1, warm=last if T < 1000 else None, history=guide)
            last = x0[:, :, -1:]
            out.append(x0[0])
    return torch.cat(out, 1).numpy()


def velocity_probe(model, lv, n):
    """-> [depth] held-out R^2 of (vx, vy) from each layer's cached conv features (see --probe)."""
    bf = lv["block_frames"]
    feats, vel, seed = [], [], 5000
    while len(vel) < n:
        seed += 1
        rng = np.random.Generator(np.random.PCG64(seed))
        sc = data.sample_scene(rng)
        if len(sc["objects"]) != 1:
            continue
        start, frames = int(rng.integers(0, 1000)), 3 * bf
        video, cover = data.render(sc, frames, start, coverage=True)
        xs, ys = data._centres(sc, frames + 1, start)
        vel.append([xs[0][frames] - xs[0][frames - 1], ys[0][frames] - ys[0][frames - 1]])
        ids, mask = encode_text(lv, data.caption(sc))
        with torch.no_grad():
            _, contribs = model(torch.from_numpy(video)[None], torch.zeros(1, frames), ids, mask, chunks=3,
                                window=lv["cached_blocks"], return_contrib=True)
        u = [c["u_last"][0, -1] for c in contribs]  # [P, C] per layer: the last frame's cached features
        hp = int(round(u[0].shape[0] ** 0.5))
        ph = video.shape[-1] // hp
        tok = cover[-1].reshape(hp, ph, hp, ph).mean((1, 3)).reshape(-1)
        w = torch.from_numpy(tok / (tok.sum() + 1e-6)).float()
        feats.append([torch.cat([w @ f, f.abs().mean(0)]).numpy() for f in u])
    vel = np.array(vel)
    return [ridge_r2(np.array([f[li] for f in feats]), vel, n * 3 // 4) for li in range(len(feats[0]))]


def ridge_r2(X, Y, cut):
    """Ridge regression of Y [n, k] on X [n, d] (standardised, lambda 0.01 per sample) fitted on the
    first `cut` rows -> R^2 [k] on the rest."""
    X = (X - X[:cut].mean(0)) / (X[:cut].std(0) + 1e-6)
    ym = Y[:cut].mean(0)
    A = X[:cut].T @ X[:cut] + 0.01 * cut * np.eye(X.shape[1])
    pred = X[cut:] @ np.linalg.solve(A, X[:cut].T @ (Y[:cut] - ym)) + ym
    return 1 - ((pred - Y[cut:]) ** 2).sum(0) / ((Y[cut:] - Y[cut:].mean(0)) ** 2).sum(0)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--weights", default=os.path.join(MODEL_DIR, "default.safetensors"))
    ap.add_argument("--t", default="400,750,1000", help="first timesteps T to compare")
    ap.add_argument("--clips", type=int, default=24)
    ap.add_argument("--context", type=int, default=8, help="real frames committed first")
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--probe", type=int, default=0, help="instead: the velocity probe on N one-object clips")
    ap.add_argument("--history", type=float, default=0.0,
                    help="history guidance W: every step v = v_still + W (v - v_still), v_still read from the "
                         "context with its last block held still (its last frame repeated)")
    a = ap.parse_args()
    torch.set_num_threads(1)
    model, cfg, lv = load_model(a.weights)
    if a.probe:
        for li, r2 in enumerate(velocity_probe(model, lv, a.probe)):
            print(f"layer {li}: velocity from the cached conv features, held-out R^2 vx {r2[0]:.2f}, vy {r2[1]:.2f}")
        return
    fps, bf = int(lv["fps"]), lv["block_frames"]
    frames = int(a.seconds * fps) // bf * bf
    for T in [float(t) for t in a.t.split(",")]:
        err_gen, err_copy, trav_gen, trav_real = [[] for _ in range(bf)], [[] for _ in range(bf)], [], []
        for i in range(a.clips):
            clip, caption = data.make_clip(1000 + i, a.context + frames)
            gen = continue_clip(model, lv, clip, caption, a.context, frames, T, i, a.history)
            real = clip[:, a.context:]
            last = centroid(clip[:, a.context - 1])
            for k in range(bf):
                r = centroid(real[:, k])
                eg, ec = distance(centroid(gen[:, k]), r), distance(last, r)
                if eg is not None and ec is not None:
                    err_gen[k].append(eg)
                    err_copy[k].append(ec)
            trav_gen += travel(gen, fps)
            trav_real += travel(real, fps)
        print(f"T = {T:g}: next block's centroid error {median_all(err_gen):.2f} px (repeating the last frame: "
              f"{median_all(err_copy):.2f}; per frame of the block {per_frame(err_gen)} / {per_frame(err_copy)}); "
              f"travel over 1 s {np.median(trav_gen):.2f} px (the clips: {np.median(trav_real):.2f}); "
              f"{a.clips} clips, {a.context} frames of context"
              + (f", history guidance {a.history:g}" if a.history else ""), flush=True)


if __name__ == "__main__":
    main()
