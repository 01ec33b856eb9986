#!/usr/bin/env python3
"""The figures of a prompt switch in a video of the default model (32 x 32, blocks of 4 frames),
as pipelines/generate/README.md's "Transitions" gives them (issue 54). Not part of longvk (which
never needs Python) nor of the tests: a bench helper, standard library and ffmpeg only.

    switch_measure.py VIDEO A_VIDEO B_VIDEO SWITCH_FRAME TRANSITION_FRAMES

VIDEO has the switch from prompt A to prompt B at SWITCH_FRAME (a block's first frame) with a
transition of TRANSITION_FRAMES; A_VIDEO and B_VIDEO are each prompt's own video with the same
seed and length. Prints:
- the seams: RGB MAE of the frame pair across each block boundary (as `longvk metrics` and
  tests/cli/test_schedule_cli.c), their median, the seam at the switch and the largest over the
  transition (boundaries SWITCH_FRAME .. SWITCH_FRAME + TRANSITION_FRAMES, as
  `longvk metrics --switches`), each over the median;
- per block from the switch, the chi-square distance of the RGB histograms (32 bins a channel,
  codec/metrics' histogram distance) to the same block of B_VIDEO and of A_VIDEO;
- "holds from": the first block from which every later block is within 0.1 of B_VIDEO, and how
  many blocks after the transition's last block (the switch block without a transition)."""
import subprocess
import sys

FRAME = 32 * 32 * 3


def frames(path):
    raw = subprocess.run(["ffmpeg", "-v", "error", "-i", path, "-f", "rawvideo", "-pix_fmt", "rgb24", "-"],
                         check=True, capture_output=True).stdout
    if len(raw) % FRAME:
        sys.exit(f"{path}: not 32 x 32 frames")
    return [raw[i:i + FRAME] for i in range(0, len(raw), FRAME)]


def mae(a, b):
    return sum(abs(x - y) for x, y in zip(a, b)) / FRAME


def histogram(block):
    h = [0.0] * 96
    for f in block:
        for c in range(3):
            for v in f[c::3]:
                h[c * 32 + v // 8] += 1
    total = len(block) * FRAME / 3
    return [x / total for x in h]


def chi2(a, b):
    ha, hb = histogram(a), histogram(b)
    return sum(0.5 * (x - y) ** 2 / (x + y) for x, y in zip(ha, hb) if x + y > 0) / 3


def main():
    if len(sys.argv) != 6:
        sys.exit(__doc__)
    v, a, b = frames(sys.argv[1]), frames(sys.argv[2]), frames(sys.argv[3])
    s, t = int(sys.argv[4]), int(sys.argv[5])
    n = len(v)
    if len(a) != n or len(b) != n or s % 4 or not 0 < s < n:
        sys.exit("the three videos must have the same frames, the switch at a block's first frame")
    seam = {f: mae(v[f - 1], v[f]) for f in range(4, n, 4)}
    ordered = sorted(seam.values())
    k = len(ordered)
    median = ordered[k // 2] if k % 2 else 0.5 * (ordered[k // 2 - 1] + ordered[k // 2])
    span = range(s, min(n, s + t + 1), 4)
    most = max(span, key=lambda f: seam[f])
    print(f"median seam {median:.3f}; at the switch {seam[s]:.3f} = {seam[s] / median:.2f}x; largest over the "
          f"transition {seam[most]:.3f} = {seam[most] / median:.2f}x (frame {most})")
    print("seam / median at frames:", " ".join(f"{f}:{seam[f] / median:.2f}" for f in range(s, min(n, s + t + 28), 4)))
    blocks, first = n // 4, s // 4
    to_b = [chi2(v[4 * i:4 * i + 4], b[4 * i:4 * i + 4]) for i in range(blocks)]
    to_a = [chi2(v[4 * i:4 * i + 4], a[4 * i:4 * i + 4]) for i in range(blocks)]
    shown = range(first, min(blocks, first + 12))
    print("to B by block:", " ".join(f"{i + 1}:{to_b[i]:.3f}" for i in shown))
    print("to A by block:", " ".join(f"{i + 1}:{to_a[i]:.3f}" for i in shown))
    last = (s + t + 3) // 4 - 1 if t else first  # the transition's last block (0-based)
    hold = next((i for i in range(first, blocks) if all(d < 0.1 for d in to_b[i:])), None)
    if hold is None:
        print("holds: never within 0.1 of B to the end")
    else:
        print(f"holds from block {hold + 1}: {hold - last} blocks after block {last + 1}, the "
              f"{'transition' if t else 'switch block'}'s last")


if __name__ == "__main__":
    main()
