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
  frames at the same times, next to the error of simply repeating the last real frame;
- 5 s: the net travel over 1 s of the generated continuation against the real clip's.

    LD_LIBRARY_PATH=... /usr/bin/python3 motion.py [--weights F] [--t 400,750,1000]
"""
import argparse
import os
import sys

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before torch loads the BLAS
import numpy as np  # noqa: E402
import torch  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import data  # noqa: E402
from model import CarriedState, chunk_pass, sample_chunk  # noqa: E402
from persistence import shifts  # noqa: E402
from sample import encode_text, load_model  # noqa: E402


def centroid(frame):
    """frame [3, H, W] in [-1, 1] -> the object pixels' centroid, or None (4 pixels or fewer)."""
    f = (frame.transpose(1, 2, 0) + 1) / 2
    m = np.linalg.norm(f - np.median(f.reshape(-1, 3), 0), axis=-1) > 0.3
    return np.argwhere(m).mean(0) if m.sum() > 4 else None


def distance(a, b):
    return None if a is None or b is None else float(np.abs(a - b).sum())


def travel(video, lag):
    """Net centroid travel over lag frames, every frame with an object at both ends."""
    return shifts([centroid(video[:, i]) for i in range(video.shape[1])], lag)


def continue_clip(model, lv, clip, caption, context, frames, T, seed):
    """Commits clip[:, :context], generates `frames` more; -> generated [3, frames, H, W]."""
    bf, K = lv["block_frames"], lv["cached_blocks"]
    ids, mask = encode_text(lv, caption)
    x = torch.from_numpy(clip)[None]
    state = CarriedState(model.depth, K)
    g = torch.Generator().manual_seed(seed)
    steps = [T, T / 2] if T < 1000 else [1000.0, 750.0, 500.0, 250.0]
    out = []
    with torch.no_grad():
        for c in range(context // bf):
            chunk_pass(model, state, x[:, :, c * bf:(c + 1) * bf], 0.0, ids, mask, c * bf, commit=True)
        last = x[:, :, context - 1:context]
        for c in range(context // bf, (context + frames) // bf):
            _, C, _, H, W = x.shape
            noise = torch.randn(1, C, bf, H, W, generator=g)
            renoise = torch.randn(len(steps) - 1, 1, C, bf, H, W, generator=g)
            x0 = sample_chunk(model, state, noise, renoise, steps, ids, mask, c * bf, cfg=2.0,
                              cfg_last_steps=1, warm=last if T < 1000 else None)
            last = x0[:, :, -1:]
            out.append(x0[0])
    return torch.cat(out, 1).numpy()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--weights", default=os.path.join(HERE, "default.safetensors"))
    ap.add_argument("--t", default="400,750,1000", help="first timesteps T to compare")
    ap.add_argument("--clips", type=int, default=24)
    ap.add_argument("--context", type=int, default=8, help="real frames committed first")
    ap.add_argument("--seconds", type=float, default=5)
    a = ap.parse_args()
    torch.set_num_threads(1)
    model, cfg, lv = load_model(a.weights)
    fps, bf = int(lv["fps"]), lv["block_frames"]
    frames = int(a.seconds * fps) // bf * bf
    for T in [float(t) for t in a.t.split(",")]:
        err_gen, err_copy, trav_gen, trav_real = [], [], [], []
        for i in range(a.clips):
            clip, caption = data.make_clip(1000 + i, a.context + frames)
            gen = continue_clip(model, lv, clip, caption, a.context, frames, T, i)
            real = clip[:, a.context:]
            last = centroid(clip[:, a.context - 1])
            for k in range(bf):
                r = centroid(real[:, k])
                eg, ec = distance(centroid(gen[:, k]), r), distance(last, r)
                if eg is not None and ec is not None:
                    err_gen.append(eg)
                    err_copy.append(ec)
            trav_gen += travel(gen, fps)
            trav_real += travel(real, fps)
        print(f"T = {T:g}: next block's centroid error {np.median(err_gen):.2f} px (repeating the last frame: "
              f"{np.median(err_copy):.2f}); travel over 1 s {np.median(trav_gen):.2f} px (the clips: "
              f"{np.median(trav_real):.2f}); {a.clips} clips, {a.context} frames of context", flush=True)


if __name__ == "__main__":
    main()
