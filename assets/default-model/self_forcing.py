"""Self-forcing with a critic, for train.py (--sf-weight): the model generates several blocks in a
row from its own output, exactly as the card samples them, and a critic that also sees the real
chunk from before the rollout judges every generated chunk against the real clip's.

Why: the pair critic (adversarial.PairCritic, --adv-weight) fixed the one-step continuation on real
context, but on the model's own rollouts the objects still merge and shrink, about 1% a block
(EXPERIMENTS.md, "An adversarial term"): a (previous chunk, chunk) pair cannot see that. Here the critic's
input carries an anchor, the last real chunk before the rollout, so a merged or shrunken object
several blocks later is a visible difference from real clips, and the model is trained on what it
meets at inference, its own blocks as context.

Per step, for this process's share of the batch:
  1. commit --sf-context real chunks to a carried state (window --sf-window, as the card's);
  2. make --sf-blocks chunks with the card's later-block sampler (warm start from the previous
     chunk's last frame at the first of --sf-steps, re-noise, CFG --sf-cfg at the last step), no
     gradient, each committed with a t = 0 pass; keep each chunk's context and noises;
  3. redo the sampler's steps for all generated chunks in one batched pass per step, with gradients
     (each chunk reads its stored context: the same values the rollout computed), so every step of
     every generated chunk learns; the context itself is not differentiated.
Besides the critic (--sf-weight), the generated chunks can be compared with the real clip's by their
colour histograms (--sf-hist) and pixel by pixel (--sf-mse). The critic is training-only, never
exported. Its gradient is far larger than the diffusion loss's (with --adv-gain 10 and weight 0.2,
a norm of 30-75 against 0.2-0.3; train.py clips the sum to 1): choose its weight against that.
Tried, not kept (EXPERIMENTS.md, "Self-forcing")."""
import numpy as np
import torch

import adversarial
import data
import losses
from model import CarriedState


def _chunk(x, c, bf):
    return x[:, :, c * bf:(c + 1) * bf]


def rollout(a, model, x_real, ids, mask, offset, noise):
    """Steps 1-3 above. x_real [b, 3, (context + blocks) * bf, H, W], noise [blocks, len(steps), b, 3, bf,
    H, W]. Returns (fake [b, 3, blocks * bf, H, W] with gradients, anchor [b, 3, bf, H, W] = the last real
    context chunk)."""
    bf, nctx, nblk = a.block_frames, a.sf_context, a.sf_blocks
    steps = [float(t) for t in a.sf_steps.split(",")]
    b, C, _, H, W = x_real.shape
    empty = torch.zeros_like(mask)
    P = (H // model.patch[1]) * (W // model.patch[2])

    def velocity(x, t, ctx, fo, cfg, chunks=1):
        v = model(x, t, ids, mask, chunks=chunks, frame_offset=fo, context=ctx)
        if cfg != 1.0:
            vu = model(x, t, ids, empty, chunks=chunks, frame_offset=fo, context=ctx)
            v = vu + cfg * (v - vu)
        return v

    def sample(x_warm, ctx, fo, n, chunks=1):
        """The card's later-block sampler from the warm-start frames; n [len(steps), ...] noises."""
        s0 = steps[0] / 1000.0
        x = (1 - s0) * x_warm + s0 * n[0]
        for k, t in enumerate(steps):
            s = t / 1000.0
            cfg = a.sf_cfg if k == len(steps) - 1 else 1.0
            x0 = x - s * velocity(x, t, ctx, fo, cfg, chunks)
            if k + 1 < len(steps):
                s2 = steps[k + 1] / 1000.0
                x = (1 - s2) * x0 + s2 * n[k + 1]
        return x0

    state = CarriedState(model.depth, a.sf_window)
    ctxs, warms = [], []
    was_training = model.training
    model.eval()
    with torch.no_grad():
        for c in range(nctx):
            out_ctx = state.context(model, b, P, x_real.dtype, x_real.device)
            _, contribs = model(_chunk(x_real, c, bf), 0.0, ids, mask, chunks=1, frame_offset=offset + c * bf,
                                context=out_ctx, return_contrib=True)
            state.commit(contribs)
        prev = _chunk(x_real, nctx - 1, bf)
        for j in range(nblk):
            c = nctx + j
            ctx = state.context(model, b, P, x_real.dtype, x_real.device)
            warm = prev[:, :, -1:].expand(-1, -1, bf, -1, -1)
            x0 = sample(warm, ctx, offset + c * bf, noise[j])
            _, contribs = model(x0, 0.0, ids, mask, chunks=1, frame_offset=offset + c * bf, context=ctx,
                                return_contrib=True)
            state.commit(contribs)
            ctxs.append(ctx)
            warms.append(warm)
            prev = x0
    model.train(was_training)
    # all generated chunks at once: chunk j reads ctxs[j] (the model's forward takes one context per chunk)
    ctx_all = [{key: torch.cat([ctx[li][key] for ctx in ctxs], dim=1) for key in ("S", "z", "left")}
               for li in range(model.depth)]
    warm_all = torch.cat(warms, dim=2)
    n_all = torch.cat([noise[j] for j in range(nblk)], dim=-3)  # [len(steps), b, C, nblk * bf, H, W]
    fake = sample(warm_all, ctx_all, offset + nctx * bf, n_all, chunks=nblk)
    return fake, _chunk(x_real, nctx - 1, bf)


def critic_inputs(anchor, clip, nblk, bf):
    """(anchor, previous chunk, chunk) for each of the nblk chunks of clip [b, 3, nblk * bf, H, W],
    stacked on the batch dimension; the chunk before the first is the anchor."""
    chunks = [_chunk(clip, j, bf) for j in range(nblk)]
    prevs = [anchor] + chunks[:-1]
    return (torch.cat([anchor] * nblk, 0), torch.cat(prevs, 0), torch.cat(chunks, 0))


def colour_histogram_loss(fake, real):
    """Mean squared difference of each frame's sorted pixel values, per channel: the 1-D Wasserstein
    distance of the two frames' colour distributions. Blind to where things are (an object at another
    place costs nothing), it sees how much of each colour there is and how sharp it is: an object that
    shrinks, fades or changes colour, grain, blur. fake, real [b, 3, F, H, W]."""
    f = fake.flatten(3).sort(dim=-1).values
    r = real.flatten(3).sort(dim=-1).values
    return (f - r).pow(2).mean()


def step_losses(a, model, critic, step, part=None):
    """Step `step`'s four terms on the generated chunks, each against the real clip's:
    (critic's generator loss, with gradients into the model; the critic's own hinge loss, with
    gradients into the critic only, zero without a critic; colour_histogram_loss; the object-weighted
    squared error, as train_step weights its loss: the clips are deterministic given their first
    frames, so the real continuation is the right answer, but where the model is unsure of it the
    optimum is the mean over places, a faded object). The clips and noise depend only on (seed,
    step) and are drawn for the whole batch; part = (lo, hi) computes clips lo..hi-1 alone (one
    process's share with --procs), as train_step does."""
    bf, nctx, nblk = a.block_frames, a.sf_context, a.sf_blocks
    rng = np.random.Generator(np.random.PCG64([a.seed, step, 1]))  # other clips than train_step's
    g = torch.Generator().manual_seed(a.seed * 1_000_003 + step + 500_000_000)
    vid, ids, mask, _, cover = data.make_batch(rng, a.batch, (nctx + nblk) * bf, a.res, a.res, coverage=True,
                                               collide=a.collide)
    offset = torch.randint(0, 900, (a.batch,), generator=g)
    noise = torch.randn((nblk, len(a.sf_steps.split(",")), a.batch, 3, bf, a.res, a.res), generator=g)
    lo, hi = part or (0, a.batch)
    x_real = torch.from_numpy(vid)[lo:hi]
    ids, mask = torch.from_numpy(ids)[lo:hi], torch.from_numpy(mask)[lo:hi]
    fake, anchor = rollout(a, model, x_real, ids, mask, offset[lo:hi], noise[:, :, lo:hi])
    real = x_real[:, :, nctx * bf:]
    g_loss = d_loss = torch.zeros(())
    if critic is not None:
        g_loss = adversarial.generator_loss(critic, critic_inputs(anchor, fake, nblk, bf))
        d_loss = adversarial.critic_loss(critic, critic_inputs(anchor, real, nblk, bf),
                                         critic_inputs(anchor, fake.detach(), nblk, bf))
    w = losses.object_weights(cover[lo:hi, nctx * bf:], a.obj_weight, a.obj_dilate)  # as train_step's loss weights
    mse = (w * (fake - real).pow(2)).mean() / w.mean()
    return g_loss, d_loss, colour_histogram_loss(fake, real), mse
