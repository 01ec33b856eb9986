"""What the carried state carries: how well the model predicts a training clip's next blocks from
its own one-step predictions, with either half of the carried state switched off.

Real chunks of 32 training clips (data.make_batch, seed 7) are committed as context; then each of
--blocks chunks is predicted in one step from noise at t = 1000 (x0 = x - v, no CFG) and committed
by a t = 0 pass, as the card commits a block. Per block it prints the object-weighted squared error
against the clip (weights as train.py's loss: 1 + 10 x the objects' coverage dilated by 3 px) and,
for scale, the error of repeating the last context frame. `--ablate attention` zeroes the linear
attention's carried (S, z) at every read, `--ablate conv` the temporal conv's cached frame, `--ablate
both` both (the blocks are then made from the text alone).

    cd assets/default-model
    /usr/bin/python3 -m training.context [--weights F] [--context 1] [--ablate attention|conv]
"""
import argparse
import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before torch loads the BLAS
import numpy as np  # noqa: E402
import torch  # noqa: E402

from . import MODEL_DIR, data, losses  # noqa: E402
from .model import CarriedState  # noqa: E402
from .sample import load_model  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--weights", default=os.path.join(MODEL_DIR, "default.safetensors"))
    ap.add_argument("--context", type=int, default=1, help="real chunks committed first")
    ap.add_argument("--blocks", type=int, default=6, help="chunks predicted in a row")
    ap.add_argument("--ablate", choices=["none", "attention", "conv", "both"], default="none")
    a = ap.parse_args()
    torch.set_num_threads(1)
    model, _, lv = load_model(a.weights)
    H, W = lv["resolution"]
    bf, K = lv["block_frames"], lv["cached_blocks"]
    P = (H // model.patch[1]) * (W // model.patch[2])
    err, copy = np.zeros(a.blocks), np.zeros(a.blocks)
    batches, B = 8, 4
    with torch.no_grad():
        for i in range(batches):
            rng = np.random.Generator(np.random.PCG64([7, i]))
            vid, ids, mask, _, cover = data.make_batch(rng, B, (a.context + a.blocks) * bf, H, W, coverage=True)
            x, ids, mask = torch.from_numpy(vid), torch.from_numpy(ids), torch.from_numpy(mask)
            w = losses.object_weights(cover, 10.0, 3)
            g = torch.Generator().manual_seed(i)
            state = CarriedState(model.depth, K)

            def read():
                ctx = state.context(model, B, P, x.dtype, x.device)
                for layer in ctx:
                    if a.ablate in ("attention", "both"):
                        layer["S"], layer["z"] = layer["S"] * 0, layer["z"] * 0
                    if a.ablate in ("conv", "both"):
                        layer["left"] = layer["left"] * 0
                return ctx

            def commit(chunk, c, ctx):
                _, contribs = model(chunk, 0.0, ids, mask, chunks=1, frame_offset=c * bf, context=ctx,
                                    return_contrib=True)
                state.commit(contribs)

            for c in range(a.context):
                commit(x[:, :, c * bf:(c + 1) * bf], c, state.context(model, B, P, x.dtype, x.device))
            last = x[:, :, a.context * bf - 1:a.context * bf]
            for j in range(a.blocks):
                c = a.context + j
                ctx = read()
                noise = torch.randn(B, 3, bf, H, W, generator=g)
                x0 = noise - model(noise, 1000.0, ids, mask, chunks=1, frame_offset=c * bf, context=ctx)
                commit(x0, c, ctx)
                real, ww = x[:, :, c * bf:(c + 1) * bf], w[:, :, c * bf:(c + 1) * bf]
                err[j] += float((ww * (x0 - real).pow(2)).mean() / ww.mean()) / batches
                copy[j] += float((ww * (last.expand_as(real) - real).pow(2)).mean() / ww.mean()) / batches
    print(f"{a.weights}, {a.context} real chunk(s) of context, ablate {a.ablate}")
    print("one-step predictions, error per block:", " ".join(f"{e:.3f}" for e in err))
    print("repeating the last context frame:     ", " ".join(f"{e:.3f}" for e in copy))


if __name__ == "__main__":
    main()
