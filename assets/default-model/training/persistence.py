"""How long the prompt's objects last, how many there are and how far they travel, over
several seeds: the measure behind the sampling recipe's choices (EXPERIMENTS.md, "How the sampling card was found").

Per seed: a chunked generation in PyTorch (the file's card, or the overrides below) of
--seconds, or a video the engine wrote (--videos: decoded by ffmpeg, at the model's
resolution, e.g. `longvk generate -s N --scale 1 --codec ffv1`). Per frame: the pixels within
RGB distance 0.35 of the object colour (data.OBJECT_COLOURS) and, every 8th frame, the number
of their 4-connected components of at least 4 pixels; per 5 s segment the mean area and the
median count.
- survives: until the first 5 s segment with a mean area below 20 pixels (of 1024);
- count kept: the fraction of 5 s segments whose count equals the first second's (the
  median over its frames: the first block decides what there is to keep);
- motion: the median per-frame shift of the coloured pixels' centroid (|dy| + |dx|, pixels;
  shape jitter counts too), how often it is below 0.05 (frozen), and the centroid's net
  travel over 1 s (the training clips move 0.35-1.3 px a frame, 6-21 px a second).

    cd assets/default-model
    LD_LIBRARY_PATH=... /usr/bin/python3 -m training.persistence [--weights F] [--seeds 1,2,...] \\
        [--steps 750,500,250] [--cfg 2] [--cfg-last-steps 1] [--warm 1] [--window 2] \\
        [--extrapolate 2] [--hist-match] [--history W]
    /usr/bin/python3 -m training.persistence --videos s1.mkv s2.mkv ...

--real-context N replaces the first block by N real frames (whole blocks) of a training scene
whose caption names the prompt's objects and whose first and N-th frames each show as many
components of the colour as the scene has objects of it (the k-th such scene, data.sample_scene
over seeds 1, 2, ..., for the k-th of --seeds; its own caption is the prompt): whether the
continuation keeps what a correct start gives it.

    /usr/bin/python3 -m training.persistence --real-context 8 --seeds 1,2,...,8 [--weights F]

--first-block measures the first block alone: per seed, the object components in its first
frame (the card's first-block sampler, or --first-steps N Euler steps with --first-cfg C),
beside the same count on the first frames of the training clips whose caption names the
prompt's objects (data.sample_scene over --data-scenes seeds): what the data itself shows.

    /usr/bin/python3 -m training.persistence --first-block --seeds 1,2,...,16 [--first-steps 20 --first-cfg 5]
"""
import argparse
import itertools
import os
import re
import subprocess
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before torch loads the BLAS
import numpy as np  # noqa: E402
import torch  # noqa: E402

from . import MODEL_DIR, data  # noqa: E402
from .model import CarriedState, chunk_pass, sample_chunk, still_state  # noqa: E402
from .sample import encode_text, load_model, match_histogram, to_u8  # noqa: E402


def components(mask, min_size=4):
    """Number of 4-connected components of at least min_size pixels."""
    H, W = mask.shape
    seen = np.zeros_like(mask, bool)
    n = 0
    for y0 in range(H):
        for x0 in range(W):
            if not mask[y0, x0] or seen[y0, x0]:
                continue
            stack, size = [(y0, x0)], 0
            seen[y0, x0] = True
            while stack:
                y, x = stack.pop()
                size += 1
                for yy, xx in ((y + 1, x), (y - 1, x), (y, x + 1), (y, x - 1)):
                    if 0 <= yy < H and 0 <= xx < W and mask[yy, xx] and not seen[yy, xx]:
                        seen[yy, xx] = True
                        stack.append((yy, xx))
            n += size >= min_size
    return n


def shifts(centroids, lag):
    """|dy| + |dx| between centroids lag frames apart, where both exist (None: no object)."""
    return [float(np.abs(a - b).sum()) for a, b in zip(centroids[lag:], centroids)
            if a is not None and b is not None]


def object_mask(frame, colour):
    """uint8 [H, W, 3] -> the pixels within RGB distance 0.35 of colour (in [0, 1])."""
    return np.linalg.norm(frame.astype(np.float32) / 255.0 - colour, axis=-1) < 0.35


class Track:
    """The measures of one video, fed frame by frame (uint8 RGB [H, W, 3])."""

    def __init__(self, colour, fps):
        self.colour, self.fps = colour, int(fps)
        self.areas, self.counts, self.first_counts, self.centroids = [], [], [], []

    def add(self, frame):
        m = object_mask(frame, self.colour)
        self.areas.append(int(m.sum()))
        every_8th, first_second = len(self.areas) % 8 == 0, len(self.areas) <= self.fps
        n = components(m) if every_8th or first_second else None
        if every_8th:
            self.counts.append(n)
        if first_second:  # every frame of the first second
            self.first_counts.append(n)
        self.centroids.append(np.argwhere(m).mean(0) if m.sum() > 10 else None)

    def report(self, seconds, name):
        """Prints one line; returns (survives s, fraction of segments with 2, count kept)."""
        fps = self.fps
        seg = int(5 * fps)
        areas = np.array(self.areas[:int(round(seconds * fps))], np.float64)
        seg_area = [areas[i:i + seg].mean() for i in range(0, len(areas), seg)]
        seg_count = [int(np.median(self.counts[i:i + seg // 8])) for i in range(0, len(self.counts), seg // 8)]
        first = int(np.median(self.first_counts))
        s = next((i for i, v in enumerate(seg_area) if v < 20), len(seg_area)) * 5
        print(f"{name}: survives {s} s; area per 5 s {' '.join(f'{v:.0f}' for v in seg_area)}; "
              f"components {' '.join(map(str, seg_count))} (first second: {first})", flush=True)
        return (min(s, seconds), np.mean([n == 2 for n in seg_count]),
                np.mean([n == first for n in seg_count]))


def summarise(tracks, results, fps, seconds):
    mv = np.array([d for t in tracks for d in shifts(t.centroids, 1)] or [0.0])
    travel = np.array([d for t in tracks for d in shifts(t.centroids, int(fps))] or [0.0])
    survive, two, kept = zip(*results)
    print(f"motion: median centroid shift {np.median(mv):.2f} px/frame, {np.mean(mv < 0.05):.2f} of the frames "
          f"below 0.05; net travel over 1 s: median {np.median(travel):.2f} px")
    print(f"survives: median {np.median(survive):.0f} s, the whole {seconds:g} s for "
          f"{sum(x >= seconds for x in survive)} of {len(survive)}; segments with 2 components {np.mean(two):.2f}, "
          f"with the first second's count {np.mean(kept):.2f}")


def read_video(path, H, W):
    """Frames of a video file as uint8 [N, H, W, 3] (ffmpeg scales to H x W if needed)."""
    out = subprocess.run(["ffmpeg", "-nostdin", "-loglevel", "error", "-i", path, "-vf", f"scale={W}:{H}",
                          "-f", "rawvideo", "-pix_fmt", "rgb24", "-"], capture_output=True)
    if out.returncode != 0:
        sys.exit(f"persistence.py: cannot read {path}: {out.stderr.decode().strip()}")
    return np.frombuffer(out.stdout, np.uint8).reshape(-1, H, W, 3)


def object_phrase(text):
    """The words of a caption or prompt before its motion word, "circle(s)" read as "ball(s)":
    "Two red circles bouncing on ..." -> "two red balls"."""
    words = []
    for w in re.split("[^a-z]+", text.lower()):
        if w in data.MOTION_WORDS:
            break
        if w:
            words.append({"circle": "ball", "circles": "balls"}.get(w, w))
    return " ".join(words)


def count_histogram(counts):
    return ", ".join(f"{n}: {counts.count(n)}" for n in sorted(set(counts)))


def scenes_named(phrase, seeds, H, W):
    """(seed, scene, caption) for the training scenes (data.sample_scene) of these seeds whose caption
    names the objects `phrase` names (object_phrase)."""
    for seed in seeds:
        sc = data.sample_scene(np.random.default_rng(seed), H, W)
        caption = data.caption(sc)
        if object_phrase(caption) == phrase:
            yield seed, sc, caption


def real_starts(prompt, colour_name, frames, n, H, W):
    """The first n training scenes (seeds 1, 2, ...) whose caption names the prompt's objects and whose
    frames 0 and frames - 1 each show one component per object of the colour -> [(seed, caption, clip
    [3, frames, H, W], its frames as uint8 [frames, H, W, 3])]."""
    colour = np.array(data.OBJECT_COLOURS[colour_name], np.float32)
    out = []
    for seed, sc, caption in scenes_named(object_phrase(prompt), itertools.count(1), H, W):
        clip = data.render(sc, frames)
        u8 = to_u8(torch.from_numpy(clip))
        k = sum(o["colour"] == colour_name for o in sc["objects"])
        if all(components(object_mask(u8[i], colour)) == k for i in (0, frames - 1)):
            out.append((seed, caption, clip, u8))
            if len(out) == n:
                return out


def first_block_counts(a, model, lv, colour):
    """--first-block: components of the object colour in the first frame, the model's per seed and
    the training data's for the same objects."""
    fb = lv["first_block"]
    H, W = lv["resolution"]
    if a.first_steps > 0:
        steps, sampler = [1000.0 * (1 - i / a.first_steps) for i in range(a.first_steps)], "euler"
    else:
        steps, sampler = [float(t) for t in fb["timesteps"]], fb["sampler"]
    cfg = a.first_cfg if a.first_cfg >= 0 else float(fb["cfg_scale"])
    ids, mask = encode_text(lv, a.prompt)
    counts = []
    for seed in [int(s) for s in a.seeds.split(",")]:
        g = torch.Generator().manual_seed(seed)
        noise = torch.randn(1, 3, lv["block_frames"], H, W, generator=g)
        renoise = torch.randn(len(steps) - 1, 1, 3, lv["block_frames"], H, W, generator=g)
        with torch.no_grad():
            x0 = sample_chunk(model, CarriedState(model.depth, 1), noise, renoise, steps, ids, mask, 0,
                              sampler=sampler, cfg=cfg)
        counts.append(components(object_mask(to_u8(x0[0])[0], colour)))
    want = object_phrase(a.prompt)
    data_counts = [components(object_mask(to_u8(torch.from_numpy(data.render(sc, 1)))[0], colour))
                   for _, sc, _ in scenes_named(want, range(a.data_scenes), H, W)]
    print(f"first block ({len(steps)} {sampler} steps, CFG {cfg:g}), {a.colour} components per seed: {counts}; "
          f"how many seeds have each count: {count_histogram(counts)}")
    print(f"training data, first frames of the {len(data_counts)} of {a.data_scenes} scenes whose caption says "
          f"\"{want}\": {count_histogram(data_counts)}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--weights", default=os.path.join(MODEL_DIR, "default.safetensors"))
    ap.add_argument("-p", "--prompt", default="two red balls bouncing on a blue background")
    ap.add_argument("--colour", default="red", help="object colour to follow (data.OBJECT_COLOURS)")
    ap.add_argument("--seeds", default="1,2,3,4,5,6,7,8")
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--steps", default="", help="later blocks' timesteps (default: the file's)")
    ap.add_argument("--sampler", default="", help="later blocks: renoise or euler (default: the file's)")
    ap.add_argument("--cfg", type=float, default=-1, help="later blocks' CFG (default: the file's)")
    ap.add_argument("--cfg-last-steps", type=int, default=-1, help="(default: the file's)")
    ap.add_argument("--warm", type=int, default=-1, help="1 / 0: warm start on / off (default: the file's)")
    ap.add_argument("--window", type=int, default=-1, help="cached blocks (default: the file's)")
    ap.add_argument("--burn-in-blocks", type=int, default=-1, help="blocks made and not measured before the "
                    "first frame, as the engine does (default: the file's; none with --real-context)")
    ap.add_argument("--burn-in-steps", default="", help="timesteps of the later blocks within the burn-in "
                    "(default: --steps); tried, not kept (EXPERIMENTS.md, \"The first block's count at t = 1000\")")
    ap.add_argument("--extrapolate", type=float, default=0.0,
                    help="warm start from last + G (last - the frame before it), clamped to [-1, 1]")
    ap.add_argument("--ramp", action="store_true",
                    help="with --extrapolate: frame i of the block (0-based) starts from last + G (i + 1) "
                         "(last - the frame before it), so the warm start itself shows the motion")
    ap.add_argument("--hist-match", action="store_true",
                    help="the warm start reads the previous block's last frame with the first block's colour "
                         "histogram (sample.match_histogram): whether colour and size drift loses the objects")
    ap.add_argument("--videos", nargs="+", default=[],
                    help="measure these videos (the engine's output) instead of generating")
    ap.add_argument("--history", type=float, default=0.0,
                    help="history guidance W at every step of the later blocks (motion.py --history; two more "
                         "passes a step and one a block)")
    ap.add_argument("--real-context", type=int, default=0,
                    help="start from N real frames of a training scene with the prompt's objects (above)")
    ap.add_argument("--first-block", action="store_true",
                    help="measure the first block alone, beside the training data's first frames (above)")
    ap.add_argument("--first-steps", type=int, default=0,
                    help="--first-block: N Euler steps from t = 1000 (default: the card's first block)")
    ap.add_argument("--first-cfg", type=float, default=-1, help="--first-block: CFG (default: the card's)")
    ap.add_argument("--data-scenes", type=int, default=40000,
                    help="--first-block: training scenes searched for the prompt's objects")
    a = ap.parse_args()
    torch.set_num_threads(1)
    model, cfg, lv = load_model(a.weights)
    H, W = lv["resolution"]
    fps, bf = lv["fps"], lv["block_frames"]
    if a.extrapolate and bf < 2:
        sys.exit("--extrapolate needs blocks of at least 2 frames (the file has %d)" % bf)
    if a.ramp and not a.extrapolate:
        sys.exit("--ramp scales --extrapolate G per frame: give --extrapolate G as well")
    colour = np.array(data.OBJECT_COLOURS[a.colour], np.float32)
    tracks, results = [], []
    if a.videos:
        for path in a.videos:
            tracks.append(Track(colour, fps))
            for fr in read_video(path, H, W):
                tracks[-1].add(fr)
            results.append(tracks[-1].report(a.seconds, path))
        summarise(tracks, results, fps, a.seconds)
        return
    if a.first_block:
        first_block_counts(a, model, lv, colour)
        return
    K = lv["cached_blocks"] if a.window < 0 else a.window
    steps = [float(s) for s in (a.steps.split(",") if a.steps else lv["sample_timesteps"])]
    sampler = a.sampler or lv.get("sampler", "renoise")
    later_cfg = a.cfg if a.cfg >= 0 else float(lv.get("cfg_scale", 1.0))
    cfg_last = a.cfg_last_steps if a.cfg_last_steps >= 0 else int(lv.get("cfg_last_steps", 0))
    warm_start = bool(a.warm) if a.warm >= 0 else bool(lv.get("warm_start", False))
    fb = lv["first_block"]
    first_steps = [float(t) for t in fb["timesteps"]]
    ids, mask = encode_text(lv, a.prompt)
    frames = int(round(a.seconds * fps))
    t0 = time.time()
    seeds = [int(s) for s in a.seeds.split(",")]
    if a.real_context % bf:
        sys.exit(f"--real-context takes whole blocks of {bf} frames")
    if a.real_context and a.hist_match:
        sys.exit("--hist-match matches the first generated block's histogram: not with --real-context")
    starts = real_starts(a.prompt, a.colour, a.real_context, max(seeds), H, W) if a.real_context else None
    burn = 0 if starts else a.burn_in_blocks if a.burn_in_blocks >= 0 else int(lv.get("burn_in_blocks", 0))
    burn_steps = [float(t) for t in a.burn_in_steps.split(",")] if a.burn_in_steps else None
    for seed in seeds:
        g = torch.Generator().manual_seed(seed)
        state = CarriedState(model.depth, K)
        tracks.append(Track(colour, fps))
        last = before = None  # before: the state before the last block was committed (--history)
        name = f"seed {seed}"
        with torch.no_grad():
            if starts:
                scene, caption, clip, frames_u8 = starts[seed - 1]
                ids, mask = encode_text(lv, caption)
                name += f", scene {scene}: {caption!r}"
                x = torch.from_numpy(clip)[None]
                for c in range(a.real_context // bf):
                    before = state.copy() if a.history else None
                    chunk_pass(model, state, x[:, :, c * bf:(c + 1) * bf], 0.0, ids, mask, c * bf, commit=True)
                for fr in frames_u8:
                    tracks[-1].add(fr)
                last = held = x[:, :, -1:]
            for c in range(a.real_context // bf, burn + (frames + bf - 1) // bf):
                first = c == 0
                st_c = first_steps if first else burn_steps if c < burn and burn_steps else steps
                noise = torch.randn(1, 3, bf, H, W, generator=g)
                renoise = torch.randn(len(st_c) - 1, 1, 3, bf, H, W, generator=g)
                guide = None
                if a.history and not first:
                    guide = (still_state(model, before, held, bf, ids, mask, (c - 1) * bf), a.history)
                before = state.copy() if a.history else None
                x0 = sample_chunk(model, state, noise, renoise, st_c, ids, mask, c * bf,
                                  sampler=fb["sampler"] if first else sampler,
                                  cfg=float(fb["cfg_scale"]) if first else later_cfg,
                                  cfg_last_steps=0 if first else cfg_last,
                                  warm=last if warm_start and not first else None, history=guide)
                last = x0[:, :, -1:].clone()
                held = last  # the block's own last frame, before any change to the warm start below
                if first:
                    first_hist = last.flatten(3).sort(dim=-1).values
                elif a.hist_match:
                    last = match_histogram(last, first_hist)
                if a.extrapolate:
                    gain = a.extrapolate * (torch.arange(1, bf + 1).view(1, 1, bf, 1, 1) if a.ramp else 1)
                    last = (last + gain * (last - x0[:, :, -2:-1])).clamp(-1, 1)
                for fr in to_u8(x0[0]) if c >= burn else []:
                    tracks[-1].add(fr)
        results.append(tracks[-1].report(a.seconds, name))
    summarise(tracks, results, fps, a.seconds)
    print(f"later blocks {steps} ({sampler}, CFG {later_cfg} at the last {cfg_last or len(steps)}, "
          f"warm start {warm_start}), window {K}, burn-in {burn} blocks; {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
