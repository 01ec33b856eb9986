"""Procedural training clips for the default model, and its tokenizer.

A clip: one to three coloured shapes (balls, squares, triangles) moving with constant
velocity and bouncing off the walls (with collide, also off each other: first tried in
EXPERIMENTS.md "Short clips, many scenes", trained on since run WF, and by the shipped run T2),
on a plain or a vertical/horizontal gradient background, rendered anti-aliased (signed
distance, 1-pixel ramp) at H x W, RGB in [-1, 1], layout [3, F, H, W]. The caption is made from the same parameters, e.g.
"two red balls bouncing on a blue background". Everything is a pure function of the
seed (numpy PCG64).

Tokenizer (re-implemented in C by the engine; keep it trivial):
  1. lowercase ASCII A-Z to a-z;
  2. split on every byte that is not a-z (digits, punctuation, spaces, non-ASCII bytes);
     empty pieces are skipped;
  3. look each piece up in VOCAB (exact match; token id = index in VOCAB); a piece not
     in VOCAB is dropped with a warning naming it;
  4. keep the first TEXT_LEN ids; mask = 1 for them, then pad with id 0 and mask 0.
  No valid token (empty prompt): every mask entry is 0 and the cross-attention adds only
  its output projection's bias (this is the unconditional input used for CFG).

    cd assets/default-model
    /usr/bin/python3 -m training.data --seed 1 --frames 64 --png /tmp/clip   # look at one clip
"""
import argparse
import re
import sys

import numpy as np

TEXT_LEN = 20

# colour name -> RGB in [0, 1]
OBJECT_COLOURS = {
    "red": (0.92, 0.12, 0.10),
    "green": (0.15, 0.80, 0.20),
    "blue": (0.15, 0.35, 1.00),
    "yellow": (1.00, 0.90, 0.10),
    "white": (0.97, 0.97, 0.97),
    "orange": (1.00, 0.52, 0.05),
    "purple": (0.62, 0.22, 0.90),
    "cyan": (0.10, 0.88, 0.92),
    "pink": (1.00, 0.50, 0.75),
}
# background colour name -> mid RGB (muted so that objects stand out)
BACKGROUND_COLOURS = {
    "black": (0.03, 0.03, 0.03),
    "gray": (0.45, 0.45, 0.45),
    "white": (0.92, 0.92, 0.92),
    "blue": (0.10, 0.16, 0.50),
    "green": (0.08, 0.36, 0.12),
    "red": (0.50, 0.08, 0.08),
    "purple": (0.32, 0.10, 0.42),
    "brown": (0.40, 0.25, 0.12),
}
SHAPES = {"ball": "balls", "square": "squares", "triangle": "triangles"}
SHAPE_SYNONYMS = {"circle": "ball"}  # caption word -> shape (used sometimes for balls)
COUNT_WORDS = ["a", "an", "one", "two", "three"]
MOTION_WORDS = ["bouncing", "moving", "sliding"]
OTHER_WORDS = ["and", "on", "the", "background", "gradient", "plain", "dark", "light",
               "vertical", "horizontal"]

VOCAB = (COUNT_WORDS + OTHER_WORDS + MOTION_WORDS
         + sorted(set(OBJECT_COLOURS) | set(BACKGROUND_COLOURS))
         + [w for s, p in SHAPES.items() for w in (s, p)]
         + [w for s in SHAPE_SYNONYMS for w in (s, s + "s")])
assert len(VOCAB) == len(set(VOCAB))
WORD_ID = {w: i for i, w in enumerate(VOCAB)}
TOKENIZER_RULE = ("lowercase ASCII A-Z; split on every byte not in a-z (empty pieces skipped); "
                  "look each piece up in vocab (exact match, id = index); unknown pieces are dropped "
                  "with a warning; keep the first text_len ids with mask 1, pad with id 0 and mask 0; "
                  "no valid token: the cross-attention adds only its proj bias")


def tokenize(text, L=TEXT_LEN, warn=True):
    """-> (ids int64 [L], mask float32 [L], unknown words)."""
    pieces = [p for p in re.split(r"[^a-z]+", text.lower()) if p]
    ids, unknown = [], []
    for p in pieces:
        if p in WORD_ID:
            ids.append(WORD_ID[p])
        else:
            unknown.append(p)
    if unknown and warn:
        print(f"warning: unknown words ignored: {' '.join(unknown)}", file=sys.stderr)
    ids = ids[:L]
    mask = np.zeros(L, np.float32)
    mask[: len(ids)] = 1
    return np.array(ids + [0] * (L - len(ids)), np.int64), mask, unknown


# ----------------------------------------------------------------------------- scene


def _tri_wave(u, length):
    """Position in [0, length] of a point moving freely by u along a segment with
    reflecting ends (closed form, exact for every frame)."""
    if length <= 0:
        return np.zeros_like(u)
    m = np.mod(u, 2 * length)
    return np.where(m <= length, m, 2 * length - m)


def _shape_extent(shape, size):
    """Half width, half height of the shape's bounding box (size = radius / half side)."""
    if shape == "triangle":
        return size, size * 0.9
    return size, size


def _collision_radius(shape, size):
    """Objects collide as circles of this radius (a square's is between its inner and outer
    circle's)."""
    return size * (1.2 if shape == "square" else 1.0)


def _simulate(sc, frames, substeps=4):
    """Centres [n, frames] x, y of objects that bounce off the walls and, as equal-mass
    discs, elastically off each other: the velocities' components along the line of centres
    are exchanged when two objects touch while approaching. Frame 0 is the drawn start."""
    H, W = sc["H"], sc["W"]
    obs = sc["objects"]
    n = len(obs)
    pos = np.array([[o["x0"], o["y0"]] for o in obs], np.float64)
    vel = np.array([[o["vx"], o["vy"]] for o in obs], np.float64)
    ext = np.array([_shape_extent(o["shape"], o["size"]) for o in obs], np.float64)
    rad = np.array([_collision_radius(o["shape"], o["size"]) for o in obs])
    lo, hi = ext, np.array([W, H], np.float64) - ext
    out = np.zeros((n, 2, frames))
    for f in range(frames):
        out[:, :, f] = pos
        for _ in range(substeps):
            pos += vel / substeps
            for k in range(2):  # walls
                under, over = pos[:, k] < lo[:, k], pos[:, k] > hi[:, k]
                pos[:, k] = np.where(under, 2 * lo[:, k] - pos[:, k], np.where(over, 2 * hi[:, k] - pos[:, k], pos[:, k]))
                vel[:, k] = np.where(under | over, -vel[:, k], vel[:, k])
            for i in range(n):
                for j in range(i + 1, n):
                    d = pos[j] - pos[i]
                    dist = float(np.hypot(*d))
                    if dist >= rad[i] + rad[j] or dist == 0:
                        continue
                    u = d / dist
                    rel = float(np.dot(vel[j] - vel[i], u))
                    if rel < 0:  # approaching: swap the normal components
                        vel[i] += rel * u
                        vel[j] -= rel * u
    return out[:, 0], out[:, 1]


def _centres(sc, frames, start):
    """Object centres x, y [n, frames] for frames start .. start+frames-1: closed form without
    collisions; with them simulated from the drawn start (start does not matter then)."""
    if sc.get("collide"):
        return _simulate(sc, frames)
    H, W = sc["H"], sc["W"]
    t = np.arange(start, start + frames, dtype=np.float64)
    xs, ys = [], []
    for o in sc["objects"]:
        ex, ey = _shape_extent(o["shape"], o["size"])
        xs.append(ex + _tri_wave(o["x0"] - ex + o["vx"] * t, W - 2 * ex))
        ys.append(ey + _tri_wave(o["y0"] - ey + o["vy"] * t, H - 2 * ey))
    return xs, ys


def _sdf(shape, size, px, py, cx, cy):
    """Signed distance in pixels (negative inside) on pixel centres px, py [H, W] for
    objects centred at cx, cy [F] -> [F, H, W]."""
    dx = px[None] - cx[:, None, None]
    dy = py[None] - cy[:, None, None]
    if shape == "ball":
        return np.sqrt(dx * dx + dy * dy) - size
    if shape == "square":
        return np.maximum(np.abs(dx), np.abs(dy)) - size
    # isosceles triangle pointing up: apex (0, -h), base y = +h from x = -s to s
    s, h = _shape_extent("triangle", size)
    base = dy - h
    # edge normals (outward) of the two slanted sides, normalised
    nx, ny = 2 * h, s
    n = np.hypot(nx, ny)
    left = (-nx * dx - ny * (dy + h)) / n
    right = (nx * dx - ny * (dy + h)) / n
    return np.maximum(base, np.maximum(left, right))


def sample_scene(rng, H=32, W=32, collide=False):
    """Draws the parameters of one clip (a dict; render() and caption() use it). With collide,
    objects start apart and bounce off each other too (render() simulates them). Speeds are
    uniform in [0.35, 1.3] pixels a frame at 32 x 32."""
    n_obj = int(rng.choice([1, 2, 3], p=[0.4, 0.35, 0.25]))
    bg_name = str(rng.choice(sorted(BACKGROUND_COLOURS)))
    bg_kind = str(rng.choice(["plain", "vertical", "horizontal"], p=[0.5, 0.25, 0.25]))
    shade = "normal"
    if bg_kind == "plain" and bg_name not in ("black", "white"):
        shade = str(rng.choice(["normal", "dark", "light"], p=[0.6, 0.2, 0.2]))
    bg_rgb = np.array(BACKGROUND_COLOURS[bg_name])
    # colours that stand out from the background
    allowed = [c for c in sorted(OBJECT_COLOURS)
               if c != bg_name and np.abs(np.array(OBJECT_COLOURS[c]) - bg_rgb).sum() > 0.6]
    motion = str(rng.choice(MOTION_WORDS, p=[0.45, 0.35, 0.2]))
    objects = []
    proto = None
    for i in range(n_obj):
        if proto is not None and rng.random() < 0.45:
            colour, shape = proto  # same kind as the first: "two red balls"
        else:
            colour, shape = str(rng.choice(allowed)), str(rng.choice(sorted(SHAPES)))
        if proto is None:
            proto = (colour, shape)
        size = float(rng.uniform(2.6, 5.5)) * (H / 32.0)
        ex, ey = _shape_extent(shape, size)
        speed = float(rng.uniform(0.35, 1.3)) * (H / 32.0)
        if motion == "sliding":  # along one axis
            ang = float(rng.choice([0.0, 0.5, 1.0, 1.5])) * np.pi
        else:
            ang = float(rng.uniform(0.15, 0.35) + rng.integers(4) * 0.5) * np.pi
        x0, y0 = float(rng.uniform(ex, W - ex)), float(rng.uniform(ey, H - ey))
        for _ in range(50 if collide else 0):  # start apart: a drawn overlap would never separate
            if all(np.hypot(x0 - o["x0"], y0 - o["y0"]) > _collision_radius(shape, size)
                   + _collision_radius(o["shape"], o["size"]) for o in objects):
                break
            x0, y0 = float(rng.uniform(ex, W - ex)), float(rng.uniform(ey, H - ey))
        objects.append(dict(colour=colour, shape=shape, size=size, x0=x0, y0=y0,
                            vx=speed * np.cos(ang), vy=speed * np.sin(ang)))
    return dict(H=H, W=W, bg_name=bg_name, bg_kind=bg_kind, shade=shade, collide=collide,
                bg_flip=bool(rng.random() < 0.5), motion=motion, objects=objects,
                style=dict(plain_word=bool(rng.random() < 0.3), the=bool(rng.random() < 0.2),
                           no_bg=bool(rng.random() < 0.08), grad_colour=bool(rng.random() < 0.75),
                           grad_dir=bool(rng.random() < 0.5), one=bool(rng.random() < 0.15),
                           circle=bool(rng.random() < 0.25)))


def _background(sc):
    H, W = sc["H"], sc["W"]
    c = np.array(BACKGROUND_COLOURS[sc["bg_name"]])
    if sc["shade"] == "dark":
        c = c * 0.45
    elif sc["shade"] == "light":
        c = c + (1 - c) * 0.35
    if sc["bg_kind"] == "plain":
        return np.broadcast_to(c[:, None, None], (3, H, W)).copy()
    lo, hi = c * 0.35, c + (1 - c) * 0.3
    n = H if sc["bg_kind"] == "vertical" else W
    ramp = (np.arange(n) + 0.5) / n
    if sc["bg_flip"]:
        ramp = ramp[::-1]
    col = lo[:, None] + (hi - lo)[:, None] * ramp[None]  # [3, n]
    if sc["bg_kind"] == "vertical":  # varies down the rows
        return np.broadcast_to(col[:, :, None], (3, H, W)).copy()
    return np.broadcast_to(col[:, None, :], (3, H, W)).copy()


def render(sc, frames, start=0, coverage=False, paths_of=None):
    """Frames start .. start+frames-1 of the scene -> float32 [3, F, H, W] in [-1, 1]; with
    coverage also float32 [F, H, W]: the fraction of each pixel covered by objects. paths_of: the
    scene whose object paths to follow (default sc; see perturb_scene)."""
    H, W = sc["H"], sc["W"]
    py, px = np.meshgrid(np.arange(H) + 0.5, np.arange(W) + 0.5, indexing="ij")
    img = np.broadcast_to(_background(sc)[:, None], (3, frames, H, W)).copy()
    cover = np.zeros((frames, H, W))
    xs, ys = _centres(paths_of or sc, frames, start)
    for i, o in enumerate(sc["objects"]):
        cx, cy = xs[i], ys[i]
        if "pull" in o:  # drawn closer to object k (perturb_scene's touch): half the gap times u
            k, u = o["pull"]
            q = sc["objects"][k]
            dx, dy = xs[k] - cx, ys[k] - cy
            dist = np.maximum(np.hypot(dx, dy), 1e-6)
            gap = np.maximum(dist - _collision_radius(o["shape"], o["size"]) - _collision_radius(q["shape"], q["size"]), 0)
            cx, cy = cx + 0.5 * u * gap * dx / dist, cy + 0.5 * u * gap * dy / dist
        alpha = np.clip(0.5 - _sdf(o["shape"], o["size"], px, py, cx, cy), 0.0, 1.0) * o.get("fade", 1.0)
        col = np.array(o.get("rgb", OBJECT_COLOURS[o["colour"]]))[:, None, None, None]
        img = img * (1 - alpha[None]) + col * alpha[None]
        cover = np.maximum(cover, alpha)
    img = (img * 2 - 1).astype(np.float32)
    return (img, cover.astype(np.float32)) if coverage else img


def caption(sc):
    st = sc["style"]
    groups = []  # (colour, shape, count) in order of first appearance
    for o in sc["objects"]:
        for g in groups:
            if g[0] == o["colour"] and g[1] == o["shape"]:
                g[2] += 1
                break
        else:
            groups.append([o["colour"], o["shape"], 1])
    parts = []
    for colour, shape, n in groups:
        word = "circle" if (shape == "ball" and st["circle"]) else shape
        if n == 1:
            count = "one" if st["one"] else ("an" if colour[0] in "aeiou" else "a")
            parts.append(f"{count} {colour} {word}")
        else:
            parts.append(f"{['', '', 'two', 'three'][n]} {colour} {word}s")
    text = " and ".join(parts) + " " + sc["motion"]
    if st["no_bg"]:
        return text
    art = "the" if st["the"] else "a"
    if sc["bg_kind"] == "plain":
        words = (["plain"] if st["plain_word"] else []) + ([sc["shade"]] if sc["shade"] != "normal" else [])
        bg = " ".join(words + [sc["bg_name"], "background"])
    else:
        words = ([sc["bg_kind"]] if st["grad_dir"] else []) + ([sc["bg_name"]] if st["grad_colour"] else [])
        bg = " ".join(words + ["gradient", "background"])
    if art == "a" and bg[0] in "aeiou":
        art = "an"
    return f"{text} on {art} {bg}"


def make_clip(seed, frames, H=32, W=32, start=None, collide=False):
    """-> (video float32 [3, frames, H, W] in [-1, 1], caption). Deterministic in seed."""
    rng = np.random.Generator(np.random.PCG64(seed))
    sc = sample_scene(rng, H, W, collide)
    if start is None:
        start = int(rng.integers(0, 1000))
    return render(sc, frames, start), caption(sc)


def perturb_scene(sc, rng, size_range, colour_range, fade=0.0, touch=0.0):
    """A copy of the scene whose objects are drawn at a size scaled by exp(U(-size_range,
    size_range)) and in a colour offset by U(-colour_range, colour_range) per channel: what an
    object looks like after it has drifted in a model's own rollout. fade > 0: one object, drawn
    at random, also has its size and opacity scaled by U(1 - fade, 1): an object on its way out
    of a rollout. touch > 0: with that probability, two objects, drawn at random, are drawn
    closer by U(0, 1) of the gap between their edges (each moved half of it towards the other;
    1: touching): two objects a rollout is merging, which the target shows apart. Render it with paths_of=sc, so that the objects stay on the
    original paths (the size sets where they bounce)."""
    out = dict(sc, objects=[dict(o) for o in sc["objects"]])
    for o in out["objects"]:
        o["size"] = o["size"] * float(np.exp(rng.uniform(-size_range, size_range)))
        rgb = np.array(OBJECT_COLOURS[o["colour"]]) + rng.uniform(-colour_range, colour_range, 3)
        o["rgb"] = np.clip(rgb, 0.0, 1.0)
    if fade > 0:  # draws only when asked: the clips without it stay as they were
        o = out["objects"][int(rng.integers(len(out["objects"])))]
        u = float(rng.uniform(1.0 - fade, 1.0))
        o["size"], o["fade"] = o["size"] * u, u
    n = len(sc["objects"])
    if touch > 0 and n > 1 and rng.random() < touch:  # draws only when asked, after the fade's
        i, k = (int(v) for v in rng.choice(n, 2, replace=False))
        u = float(rng.uniform(0.0, 1.0))
        out["objects"][i]["pull"] = (k, u)
        out["objects"][k]["pull"] = (i, u)
    return out


def make_batch(rng, n, frames, H=32, W=32, coverage=False, collide=False, perturb=None):
    """n clips from seeds drawn by rng -> (video [n, 3, F, H, W], ids [n, L], mask [n, L], captions),
    with coverage also the objects' pixel coverage [n, F, H, W]. perturb = (p, size_range,
    colour_range, rng2, fade, touch): also returns, last, the clips with a fraction p drawn by perturb_scene
    (draws from rng2 only, so the clips themselves are the same with or without it)."""
    vids, ids, masks, caps, covers, pvids = [], [], [], [], [], []
    for _ in range(n):
        rs = np.random.Generator(np.random.PCG64(int(rng.integers(1 << 62))))
        sc = sample_scene(rs, H, W, collide)  # exactly make_clip's draws
        start = int(rs.integers(0, 1000))
        v, cov = render(sc, frames, start, coverage=True)
        if perturb is not None:
            p, size_range, colour_range, rng2, fade, touch = perturb
            take = rng2.random() < p
            pvids.append(render(perturb_scene(sc, rng2, size_range, colour_range, fade, touch), frames, start,
                                paths_of=sc)
                         if take else v)
        c = caption(sc)
        covers.append(cov)
        i, m, _ = tokenize(c, warn=False)
        vids.append(v)
        ids.append(i)
        masks.append(m)
        caps.append(c)
    out = (np.stack(vids), np.stack(ids), np.stack(masks), caps)
    out = out + (np.stack(covers),) if coverage else out
    return out + (np.stack(pvids),) if perturb is not None else out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--frames", type=int, default=32)
    ap.add_argument("--count", type=int, default=1)
    ap.add_argument("--png", help="write a contact sheet (every 4th frame) to this path prefix")
    ap.add_argument("--collide", action="store_true", help="objects bounce off each other too")
    a = ap.parse_args()
    print("vocab", len(VOCAB), VOCAB)
    for s in range(a.seed, a.seed + a.count):
        v, c = make_clip(s, a.frames, collide=a.collide)
        ids, mask, _ = tokenize(c)
        print(s, repr(c), ids[: int(mask.sum())].tolist())
        if a.png:
            import subprocess
            sheet = v[:, ::4]  # [3, n, H, W]
            sheet = np.concatenate(list(sheet.transpose(1, 0, 2, 3)), axis=2)  # [3, H, n*W]
            u8 = np.clip(sheet * 127.5 + 127.5, 0, 255).astype(np.uint8).transpose(1, 2, 0)
            h, w = u8.shape[:2]
            subprocess.run(["ffmpeg", "-loglevel", "error", "-y", "-f", "rawvideo", "-pix_fmt", "rgb24",
                            "-s", f"{w}x{h}", "-i", "-", "-vf", "scale=iw*4:ih*4:flags=neighbor",
                            f"{a.png}{s}.png"], input=u8.tobytes(), check=True)


if __name__ == "__main__":
    main()
