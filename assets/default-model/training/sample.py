"""LongSANA chunked sampling of the default model in PyTorch (the engine's `longvk generate`
does the same on Vulkan): chunks of block_frames frames, each denoised at the metadata's
sample_timesteps with re-noising, then committed by a t = 0 pass; the linear-attention
state carries the last cached_blocks chunks and the temporal conv the last Mix-FFN frame.
Frames stream to ffmpeg as they are made; memory does not grow with length.

    cd assets/default-model
    LD_LIBRARY_PATH=... nice -n 5 /usr/bin/python3 -m training.sample \\
        -p "two red balls bouncing on a blue background" --seconds 60 -o /tmp/out.mp4 --sheet /tmp/sheet.png
"""
import argparse
import json
import os
import subprocess
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before torch loads the BLAS
import numpy as np  # noqa: E402
import torch  # noqa: E402

from . import MODEL_DIR, data, st_io  # noqa: E402
from .model import SanaVideoDiT, CarriedState, chunk_pass, sample_chunk, flow_timesteps  # noqa: E402


def load_model(path, dtype=torch.float32):
    W, meta = st_io.load(path)
    cfg = json.loads(meta["config"])
    lv = json.loads(meta["longvk"])
    m = SanaVideoDiT(**cfg, vocab_size=len(lv["vocab"]))
    m.load_state_dict({k: torch.from_numpy(v) for k, v in W.items()}, strict=True)
    return m.to(dtype).eval(), cfg, lv


def encode_text(lv, prompt):
    """The tokenizer rule of the metadata, with the vocabulary of the file."""
    assert lv["vocab"] == data.VOCAB, "vocabulary of the file differs from data.py"
    ids, mask, unknown = data.tokenize(prompt, lv["text_len"])
    return torch.from_numpy(ids)[None], torch.from_numpy(mask)[None]


def to_u8(x):
    """[3, F, H, W] in [-1, 1] -> uint8 [F, H, W, 3]."""
    return (x.clamp(-1, 1) * 127.5 + 127.5).round().to(torch.uint8).permute(1, 2, 3, 0).numpy()


def match_histogram(frame, ref_sorted):
    """Each channel of frame [1, 3, 1, H, W] given the values ref_sorted [1, 3, 1, H*W] (sorted), in the
    frame's own order: its colour histogram becomes the reference's exactly, wherever things are.
    A diagnostic of colour and size drift (--hist-match), not part of the card."""
    flat = frame.flatten(3)
    out = torch.empty_like(flat)
    out.scatter_(-1, flat.argsort(dim=-1), ref_sorted)
    return out.reshape(frame.shape)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--weights", default=os.path.join(MODEL_DIR, "default.safetensors"))
    ap.add_argument("-p", "--prompt", default="two red balls bouncing on a blue background")
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--frames", type=int, default=0)
    ap.add_argument("-s", "--seed", type=int, default=1)
    ap.add_argument("--steps", default="", help="timesteps, comma separated (default: the file's)")
    ap.add_argument("--sampler", default="", help="renoise (LongSANA) or euler for the blocks after the "
                    "first (default: the file's)")
    ap.add_argument("--cfg", type=float, default=-1, help="CFG of the blocks after the first (default: the file's)")
    ap.add_argument("--cfg-last-steps", type=int, default=-1, help="CFG at the last N steps only, 0: every step "
                    "(default: the file's)")
    ap.add_argument("--warm", type=int, default=-1, help="1: blocks after the first start from the previous "
                    "block's last frame noised to the first timestep, 0: from noise (default: the file's)")
    ap.add_argument("--first-steps", default="", help="first block: timesteps, comma separated, or a count N "
                    "(flow_timesteps(N, --first-shift)) (default: the file's first_block)")
    ap.add_argument("--first-shift", type=float, default=1.0)
    ap.add_argument("--first-sampler", default="")
    ap.add_argument("--first-cfg", type=float, default=-1)
    ap.add_argument("--cached-blocks", type=int, default=-1, help="window K (default: the file's)")
    ap.add_argument("--burn-in-blocks", type=int, default=-1, help="blocks made and not written before the first "
                    "frame, as the engine does (default: the file's)")
    ap.add_argument("--no-state", action="store_true", help="forget the carried state after every block "
                    "(each block made from the text alone): what the state buys")
    ap.add_argument("--prime-seed", type=int, default=-1, help="diagnostic: the first block is the training "
                    "clip of this data seed (its caption replaces --prompt); the model continues it")
    ap.add_argument("--hist-match", action="store_true", help="diagnostic: the warm start of every later "
                    "block starts from the previous block's last frame with the first block's colour histogram "
                    "(match_histogram): whether colour and size drift is what loses the objects")
    ap.add_argument("--block-frames", type=int, default=0, help="frames per block (default: the file's)")
    ap.add_argument("--scale", type=int, default=8)
    ap.add_argument("-o", "--output", default="")
    ap.add_argument("--sheet", default="", help="PNG contact sheet: one frame every --sheet-every frames")
    ap.add_argument("--sheet-every", type=int, default=48)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--track", default="", help="object colours (e.g. red,green): print the area (pixels per frame "
                    "within 0.2 RGB distance of data.OBJECT_COLOURS) every --sheet-every frames")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)

    model, cfg, lv = load_model(a.weights)
    H, W = lv["resolution"]
    fps = lv["fps"]
    bf = a.block_frames or lv["block_frames"]
    K = lv["cached_blocks"] if a.cached_blocks < 0 else a.cached_blocks
    steps = [float(s) for s in a.steps.split(",")] if a.steps else [float(s) for s in lv["sample_timesteps"]]
    sampler = a.sampler or lv.get("sampler", "renoise")
    later_cfg = a.cfg if a.cfg >= 0 else float(lv.get("cfg_scale", 1.0))
    cfg_last = a.cfg_last_steps if a.cfg_last_steps >= 0 else int(lv.get("cfg_last_steps", 0))
    warm_start = bool(a.warm) if a.warm >= 0 else bool(lv.get("warm_start", False))
    fb = lv.get("first_block", {})
    if a.first_steps:
        first_steps = ([float(x) for x in a.first_steps.split(",")] if "," in a.first_steps
                       else flow_timesteps(int(a.first_steps), a.first_shift))
    else:
        first_steps = [float(x) for x in fb.get("timesteps", steps)]
    first_sampler = a.first_sampler or fb.get("sampler", sampler)
    first_cfg = a.first_cfg if a.first_cfg >= 0 else float(fb.get("cfg_scale", 1.0))
    frames = a.frames or int(round(a.seconds * fps))
    nchunks = (frames + bf - 1) // bf
    burn = 0 if a.no_state else a.burn_in_blocks if a.burn_in_blocks >= 0 else int(lv.get("burn_in_blocks", 0))
    prime = None
    if a.prime_seed >= 0:
        pv, a.prompt = data.make_clip(a.prime_seed, bf, H, W)
        prime = torch.from_numpy(pv)[None]
    ids, mask = encode_text(lv, a.prompt)
    g = torch.Generator().manual_seed(a.seed)

    enc = None
    if a.output:
        enc = subprocess.Popen(["ffmpeg", "-loglevel", "error", "-y", "-f", "rawvideo", "-pix_fmt", "rgb24",
                                "-s", f"{W}x{H}", "-r", str(fps), "-i", "-",
                                "-vf", f"scale=iw*{a.scale}:ih*{a.scale}:flags=bicubic",
                                "-c:v", "libx264", "-pix_fmt", "yuv420p", "-crf", "18", a.output],
                               stdin=subprocess.PIPE)
    state = CarriedState(model.depth, K)
    sheet = []
    done = 0
    t0 = time.time()
    hist0 = None
    track = [c for c in a.track.split(",") if c]
    areas = {c: [] for c in track}
    prev_last = None
    with torch.no_grad():
        for c in range(burn + nchunks):
            first = c == 0 or a.no_state
            st_c = first_steps if first else steps
            noise = torch.randn(1, 3, bf, H, W, generator=g)
            renoise = torch.randn(len(st_c) - 1, 1, 3, bf, H, W, generator=g)
            if a.no_state:
                state = CarriedState(model.depth, K)
            if c == 0 and prime is not None:
                x0 = prime
                chunk_pass(model, state, x0, 0.0, ids, mask, 0, commit=True)
            else:
                x0 = sample_chunk(model, state, noise, renoise, st_c, ids, mask, c * bf,
                                  sampler=first_sampler if first else sampler,
                                  cfg=first_cfg if first else later_cfg,
                                  cfg_last_steps=0 if first else cfg_last,
                                  warm=prev_last if warm_start and not first else None)
            prev_last = x0[:, :, -1:].clone()
            if c == 0:
                first_hist = prev_last.flatten(3).sort(dim=-1).values
            elif a.hist_match:
                prev_last = match_histogram(prev_last, first_hist)
            if c < burn:
                continue
            u8 = to_u8(x0[0])[: frames - done]
            if enc:
                enc.stdin.write(u8.tobytes())
            for i in range(len(u8)):
                if (done + i) % a.sheet_every == 0:
                    sheet.append(u8[i])
            # colour histogram (8 bins per channel) of the chunk vs the first chunk: drift measure
            h = np.stack([np.histogram(u8[..., ch], bins=8, range=(0, 256))[0] for ch in range(3)]).astype(np.float64)
            h /= h.sum(axis=1, keepdims=True)
            if hist0 is None:
                hist0 = h
            rgb = u8.astype(np.float32) / 255.0
            for cname in track:
                d = np.linalg.norm(rgb - np.array(data.OBJECT_COLOURS[cname], np.float32), axis=-1)
                areas[cname].extend((d < 0.2).sum(axis=(1, 2)).tolist())
            done += len(u8)
            if c % 20 == 0 or c == burn + nchunks - 1:
                el = time.time() - t0
                print(f"chunk {c + 1}/{burn + nchunks} frames {done} {done / el:.1f} frames/s "
                      f"hist-dist-to-first {0.5 * np.abs(h - hist0).sum(axis=1).mean():.3f}", file=sys.stderr)
    if enc:
        enc.stdin.close()
        enc.wait()
    if a.sheet and sheet:
        cols = 10
        while len(sheet) % cols:
            sheet.append(np.zeros_like(sheet[0]))
        rows = [np.concatenate(sheet[r * cols : (r + 1) * cols], axis=1) for r in range(len(sheet) // cols)]
        img = np.concatenate(rows, axis=0)
        subprocess.run(["ffmpeg", "-loglevel", "error", "-y", "-f", "rawvideo", "-pix_fmt", "rgb24",
                        "-s", f"{img.shape[1]}x{img.shape[0]}", "-i", "-",
                        "-vf", "scale=iw*4:ih*4:flags=neighbor", a.sheet], input=img.tobytes(), check=True)
    for cname in track:
        ar = np.array(areas[cname], np.float64)
        seg = [f"{ar[i:i + a.sheet_every].mean():.0f}" for i in range(0, len(ar), a.sheet_every)]
        print(f"{cname} area (pixels/frame, per {a.sheet_every} frames): {' '.join(seg)}", file=sys.stderr)
    print(f"{done} frames in {time.time() - t0:.1f} s; prompt {a.prompt!r} steps {steps} ({sampler}, cfg {later_cfg} "
          f"at the last {cfg_last or len(steps)}, warm start {warm_start}) window {K}; "
          f"first block {first_steps} ({first_sampler}, cfg {first_cfg}); burn-in {burn} blocks", file=sys.stderr)


if __name__ == "__main__":
    main()
