"""Checks sana_video_ref.py against the ORIGINAL SANA-Video / LongSANA module outputs in
assets/testdata/sana-video/ (one-shot forwards and the LongSANA chunks with their carried
state) and prints the normalised MSE of every tensor, in float64 and in float32.

    PYTHONPATH=assets/default-model /usr/bin/python3 tests/reference/check_against_original.py [TESTDATA_DIR]

NMSE = sum((ref - orig)^2) / sum(orig^2). Bounds: 1e-12 (float64), 1e-10 (float32); the
original outputs are themselves fp32, so float64 cannot reach below fp32 rounding (~1e-14).
Exit status 1 if any tensor is over its bound."""
import os
import sys

import torch

import sana_video_ref as ref
from training.st_io import load as st_load

BOUND = {torch.float64: 1e-12, torch.float32: 1e-10}


def nmse(a, b):
    a = a.to(torch.float64)
    b = torch.as_tensor(b).to(torch.float64)
    assert a.shape == b.shape, (a.shape, b.shape)
    return float(((a - b) ** 2).sum() / (b ** 2).sum())


def check_model(testdata, name, dtype):
    cfg, W = ref.load_model(os.path.join(testdata, f"{name}.weights.safetensors"), dtype)
    V, meta = st_load(os.path.join(testdata, f"{name}.vectors.safetensors"))
    V = {k: torch.from_numpy(v) for k, v in V.items()}
    nchunks, cf = int(meta["chunks"]), int(meta["chunk_frames"])
    x, y, mpart = V["x"], V["y"], V["mask_part"]
    results = []

    def rec(tensor_name, got):
        results.append((tensor_name, nmse(got, V[tensor_name])))

    rec("out_t500_full_mask", ref.forward(W, cfg, x, 500, y, None)[0])
    rec("out_t500_part_mask", ref.forward(W, cfg, x, 500, y, mpart)[0])
    rec("out_t999p7_full_mask", ref.forward(W, cfg, x, 999.7, y, None)[0])

    state = ref.CarriedState(cfg)
    P = (x.shape[2] // cfg.patch[1]) * (x.shape[3] // cfg.patch[2])
    for c in range(nchunks):
        f0 = c * cf
        out = ref.chunk_pass(W, cfg, state, x[:, f0 : f0 + cf], 727, y, mpart, f0, commit=False)
        rec(f"chunk{c}_out_t727", out)
        ref.chunk_pass(W, cfg, state, V[f"chunk{c}_clean"], 0, y, mpart, f0, commit=True)
        for b in range(cfg.depth):
            L = state.layer(b)
            rec(f"chunk{c}_layer{b}_S", L["S"])
            rec(f"chunk{c}_layer{b}_z", L["z"])
            # the original stores it as [C, H/2, W/2]; the reference keeps [P, C]
            conv = L["conv_last"].t().reshape(cfg.hidden, *V[f"chunk{c}_layer{b}_conv_last"].shape[1:])
            assert L["conv_last"].shape == (P, cfg.hidden)
            rec(f"chunk{c}_layer{b}_conv_last", conv)
    return results


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    testdata = sys.argv[1] if len(sys.argv) > 1 else os.path.normpath(
        os.path.join(here, "..", "..", "assets", "testdata", "sana-video"))
    failed = 0
    worst = {}
    for name in ("tiny-hd32", "hd112"):
        for dtype in (torch.float64, torch.float32):
            for tname, e in check_model(testdata, name, dtype):
                ok = e < BOUND[dtype]
                failed += not ok
                key = (name, str(dtype).replace("torch.", ""))
                worst[key] = max(worst.get(key, 0.0), e)
                print(f"{name:10s} {key[1]:8s} {tname:28s} nmse {e:.3e} {'ok' if ok else 'FAIL'}")
    for (name, dt), e in worst.items():
        print(f"worst {name} {dt}: {e:.3e} (bound {BOUND[getattr(torch, dt)]:.0e})")
    print("FAILED" if failed else "all within bounds")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
