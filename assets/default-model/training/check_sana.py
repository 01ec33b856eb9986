"""Proof that model.py is SANA-Video: loads the ORIGINAL modules' random-weight outputs in
assets/testdata/sana-video/ (latent mode, in_channels 4 / 16) into model.SanaVideoDiT and
compares, in float64, every one-shot forward, every LongSANA chunk read pass and every
carried state tensor. NMSE = sum((ours - orig)^2) / sum(orig^2); bound 1e-10 (the
originals are fp32 outputs, so float64 cannot go below fp32 rounding, ~1e-14).

    cd assets/default-model
    /usr/bin/python3 -m training.check_sana [TESTDATA_DIR]
"""
import argparse
import json
import os
import sys

import torch

from . import MODEL_DIR
from .model import SanaVideoDiT, CarriedState, chunk_pass, context_from_clean
from .st_io import load

TESTDATA = os.path.normpath(os.path.join(MODEL_DIR, "..", "testdata", "sana-video"))

BOUND = 1e-10


def nmse(a, b):
    a = a.to(torch.float64)
    b = torch.as_tensor(b).to(torch.float64)
    assert a.shape == b.shape, (a.shape, b.shape)
    return float(((a - b) ** 2).sum() / (b ** 2).sum())


def load_model(path):
    W, meta = load(path)
    cfg = json.loads(meta["config"])
    m = SanaVideoDiT(**cfg).double()
    sd = {k: torch.from_numpy(v).double() for k, v in W.items()}
    missing, unexpected = m.load_state_dict(sd, strict=False)
    assert not missing and not unexpected, (missing, unexpected)
    return m


def check(testdata, name):
    m = load_model(os.path.join(testdata, f"{name}.weights.safetensors"))
    V, meta = load(os.path.join(testdata, f"{name}.vectors.safetensors"))
    V = {k: torch.from_numpy(v).double() for k, v in V.items()}
    nch, cf = int(meta["chunks"]), int(meta["chunk_frames"])
    x, y, mp = V["x"][None], V["y"][None], V["mask_part"][None]
    res = []
    with torch.no_grad():
        res.append(("out_t500_full_mask", nmse(m(x, 500, y)[0], V["out_t500_full_mask"])))
        res.append(("out_t500_part_mask", nmse(m(x, 500, y, mp)[0], V["out_t500_part_mask"])))
        res.append(("out_t999p7_full_mask", nmse(m(x, 999.7, y)[0], V["out_t999p7_full_mask"])))
        # per-frame timesteps: a [B, F] tensor of equal values gives the same result
        tF = torch.full((1, x.shape[2]), 500.0, dtype=torch.float64)
        res.append(("out_t500_part_mask (t as [B,F])", nmse(m(x, tF, y, mp)[0], V["out_t500_part_mask"])))
        st = CarriedState(m.depth, 0)
        for c in range(nch):
            f0 = c * cf
            out = chunk_pass(m, st, x[:, :, f0 : f0 + cf], 727.0, y, mp, f0, commit=False)
            res.append((f"chunk{c}_out_t727", nmse(out[0], V[f"chunk{c}_out_t727"])))
            chunk_pass(m, st, V[f"chunk{c}_clean"][None], 0.0, y, mp, f0, commit=True)
            ctx = st.context(m, 1, 1, torch.float64, "cpu")
            for b in range(m.depth):
                res.append((f"chunk{c}_layer{b}_S", nmse(ctx[b]["S"][0, 0], V[f"chunk{c}_layer{b}_S"])))
                res.append((f"chunk{c}_layer{b}_z", nmse(ctx[b]["z"][0, 0], V[f"chunk{c}_layer{b}_z"])))
                ref = V[f"chunk{c}_layer{b}_conv_last"]  # [C, hp, wp]
                got = st.left[b][0, 0].t().reshape(ref.shape)
                res.append((f"chunk{c}_layer{b}_conv_last", nmse(got, ref)))
        # the same chunks in ONE block-causal pass (the training formulation): read passes
        # cannot be checked this way, but the t = 0 pass over all clean chunks must give the
        # committed states chunk by chunk
        clean = torch.cat([V[f"chunk{c}_clean"][None] for c in range(nch)], dim=2)
        _, contribs = m(clean, 0.0, y, mp, chunks=nch, return_contrib=True)
        for b in range(m.depth):
            S = contribs[b]["S"][0].cumsum(0)
            res.append((f"one-pass chunk{nch-1}_layer{b}_S", nmse(S[-1], V[f"chunk{nch-1}_layer{b}_S"])))
        # training formulation = inference: a clean block-causal pass over all chunks, then a
        # noisy pass with an independent timestep per chunk reading the clean prefix (window
        # K), must equal chunk-by-chunk LongSANA read passes with the carried state
        noisy = x
        tper = torch.tensor([727.0, 500.0, 960.0, 10.0][:nch], dtype=torch.float64)
        tF = tper.repeat_interleave(cf)[None]
        for K in (0, 1):
            _, contribs = m(clean, 0.0, y, mp, chunks=nch, window=K, return_contrib=True)
            vt = m(noisy, tF, y, mp, chunks=nch, context=context_from_clean(contribs, K))
            st = CarriedState(m.depth, K)
            for c in range(nch):
                f0 = c * cf
                out = chunk_pass(m, st, noisy[:, :, f0 : f0 + cf], float(tper[c]), y, mp, f0, commit=False)
                res.append((f"train-pass window {K} chunk{c}", nmse(vt[:, :, f0 : f0 + cf], out)))
                chunk_pass(m, st, clean[:, :, f0 : f0 + cf], 0.0, y, mp, f0, commit=True)
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("testdata", nargs="?", default=TESTDATA,
                    help="directory of <name>.weights.safetensors and <name>.vectors.safetensors (default: %(default)s)")
    testdata = ap.parse_args().testdata
    bad = 0
    for name in ("tiny-hd32", "hd112"):
        worst = 0.0
        for tn, e in check(testdata, name):
            ok = e < BOUND
            bad += not ok
            worst = max(worst, e)
            print(f"{name:10s} {tn:36s} nmse {e:.3e} {'ok' if ok else 'FAIL'}")
        print(f"worst {name}: {worst:.3e} (bound {BOUND:.0e})")
    print("FAILED" if bad else "all within bounds")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
