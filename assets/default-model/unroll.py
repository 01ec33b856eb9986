"""Unrolled training of the later blocks, for train.py (--unroll-mse): the model makes several blocks
in a row from its own output with a short deterministic sampler (the card's later-block sampler when
it starts from noise, e.g. one step at t = 1000), and the error of every generated block against the
real clip is back-propagated through the whole rollout: through each block's own passes, the write
passes that commit it, and the carried state (S, z and the conv-cache frame) that the next blocks
read.

Why: the clips are deterministic given their first frames (constant velocity, exact reflections), so
the real continuation is the right answer for a later block, and a sampler that starts from noise
leaves no last-frame copy to pin the objects (the warm start's trade, EXPERIMENTS.md "How much of the last
frame to keep"). The diffusion loss only ever shows the model real context; here it also learns what
to write into the state from its own blocks so that the blocks after them stay right. Unlike
self_forcing.py, where the rollout runs without gradient and only each chunk's last sampler steps
learn, nothing is detached here.

Per step, for this process's share of the batch (clips and noise depend only on (seed, step)):
  1. commit --unroll-context real chunks with t = 0 passes (the first block at inference);
  2. for each of --unroll-blocks chunks: x0 = the sampler's output from noise (--unroll-steps,
     re-noise between steps, no CFG) reading the carried state (window --sf-window), then a t = 0 pass
     over x0 commits it; the loss is the object-weighted squared error of x0 against the real chunk,
     weighted as train_step weights its loss.
"""
import numpy as np
import torch

import data
import losses
from model import CarriedState
from self_forcing import _chunk


def unrolled_loss(a, model, step, part=None):
    """The object-weighted mean squared error of --unroll-blocks generated chunks (see above)."""
    bf, nctx, nblk = a.block_frames, a.unroll_context, a.unroll_blocks
    steps = [float(t) for t in a.unroll_steps.split(",")]
    rng = np.random.Generator(np.random.PCG64([a.seed, step, 2]))  # other clips than train_step's
    g = torch.Generator().manual_seed(a.seed * 1_000_003 + step + 700_000_000)
    frames = (nctx + nblk) * bf
    n = a.unroll_batch or a.batch
    vid, ids, mask, _, cover = data.make_batch(rng, n, frames, a.res, a.res, coverage=True, collide=a.collide)
    offset = torch.randint(0, 900, (n,), generator=g)
    noise = torch.randn((nblk, len(steps), n, 3, bf, a.res, a.res), generator=g)
    lo, hi = (0, n) if part is None else (part[0] * n // a.batch, part[1] * n // a.batch)
    x_real = torch.from_numpy(vid)[lo:hi]
    ids, mask, offset = torch.from_numpy(ids)[lo:hi], torch.from_numpy(mask)[lo:hi], offset[lo:hi]
    b, _, _, H, W = x_real.shape
    P = (H // model.patch[1]) * (W // model.patch[2])
    state = CarriedState(model.depth, a.sf_window)

    def commit(x, fo, ctx):
        _, contribs = model(x, 0.0, ids, mask, chunks=1, frame_offset=fo, context=ctx, return_contrib=True)
        state.commit(contribs)

    for c in range(nctx):
        commit(_chunk(x_real, c, bf), offset + c * bf, state.context(model, b, P, x_real.dtype, x_real.device))
    fakes = []
    for j in range(nblk):
        c = nctx + j
        fo = offset + c * bf
        ctx = state.context(model, b, P, x_real.dtype, x_real.device)
        x = noise[j, 0, lo:hi]
        for k, t in enumerate(steps):
            s = t / 1000.0
            x0 = x - s * model(x, t, ids, mask, chunks=1, frame_offset=fo, context=ctx)
            if k + 1 < len(steps):
                s2 = steps[k + 1] / 1000.0
                x = (1 - s2) * x0 + s2 * noise[j, k + 1, lo:hi]
        commit(x0, fo, ctx)
        fakes.append(x0)
    fake = torch.cat(fakes, dim=2)
    real = x_real[:, :, nctx * bf:]
    w = losses.object_weights(cover[lo:hi, nctx * bf:], a.obj_weight, a.obj_dilate)
    return (w * (fake - real).pow(2)).mean() / w.mean()
