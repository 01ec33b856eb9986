"""Writes the test vectors of the C engine (float32 safetensors, one file per config):

    assets/vectors/sana-video-tiny-hd32.safetensors
    assets/vectors/sana-video-hd112.safetensors
    assets/vectors/linear_attention.safetensors

    PYTHONPATH=assets/default-model /usr/bin/python3 tests/reference/make_vectors.py [--testdata DIR] [--out DIR]

Everything is computed in float64 by sana_video_ref.py / linear_attention_ref.py and
stored as float32. The inputs (x, y, mask, clean chunks) are those of the original module
outputs in assets/testdata/sana-video/, so the vectors also line up with them; the weights
are NOT copied: the C tests load <config>.weights.safetensors from
assets/testdata/sana-video/ (its SHA-256 is in the metadata). Every tensor's layout is in
the file's __metadata__ ("contents", JSON) and in tests/reference/README.md.

Before writing, the script checks that (1) the block-wise linear attention equals the
direct masked double sum, (2) chunk-by-chunk passes that commit at the same timestep equal
the one-shot block-causal forward, and (3) it records how far a float32 run of the same
reference lands from the float64 values (the floor an fp32 engine can expect)."""
import argparse
import hashlib
import json
import os

import numpy as np
import torch

import linear_attention_ref as la
import sana_video_ref as ref
from training import st_io

HERE = os.path.dirname(os.path.abspath(__file__))

STEPS = (1000, 960, 889, 727)
READ_T = 727      # LongSANA read pass timestep of the chunk vectors
BC_T = 727        # timestep of the one-shot block-causal forward
FWD_T = 500       # one-shot forward timestep
PER_FRAME_T = {6: [0, 0, 250, 250, 500, 500], 4: [0, 250, 500, 750]}
SEED = {"tiny-hd32": 1234, "hd112": 5678}


def f32(t):
    return np.ascontiguousarray(torch.as_tensor(t).detach().to(torch.float64).numpy().astype(np.float32))


def nmse(a, b):
    a, b = torch.as_tensor(a).double(), torch.as_tensor(b).double()
    return float(((a - b) ** 2).sum() / (b ** 2).sum())


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        h.update(f.read())
    return h.hexdigest()


def sinusoid_freqs():
    """The 128 float32 frequencies of the timestep sinusoid exactly as the original forms
    them (float32 chain: exp(-ln(10000) * i / 128)); see README (they matter at 1e-10)."""
    i = torch.arange(128, dtype=torch.float32)
    return torch.exp(-float(np.log(10000.0)) * i / 128)


def state_tensors(prefix, state, cfg):
    out = {}
    for b in range(cfg.depth):
        L = state.layer(b)
        out[f"{prefix}_layer{b}_S"] = f32(L["S"])
        out[f"{prefix}_layer{b}_z"] = f32(L["z"])
        out[f"{prefix}_layer{b}_conv_last"] = f32(L["conv_last"])
    return out


def dit_vectors(name, testdata):
    wpath = os.path.join(testdata, f"{name}.weights.safetensors")
    cfg, W = ref.load_model(wpath, torch.float64)
    _, W32 = ref.load_model(wpath, torch.float32)
    V, vmeta = st_io.load(os.path.join(testdata, f"{name}.vectors.safetensors"))
    V = {k: torch.from_numpy(v) for k, v in V.items()}
    x, y, mask = V["x"].double(), V["y"].double(), V["mask_part"].double()
    C, F, H, Wd = x.shape
    cf = int(vmeta["chunk_frames"])
    nchunks = int(vmeta["chunks"])
    assert nchunks * cf == F
    hp, wp = H // cfg.patch[1], Wd // cfg.patch[2]
    P = hp * wp
    out = {}
    checks = {}
    g = torch.Generator().manual_seed(SEED[name])

    # ---- inputs
    out["x"], out["y"], out["mask"] = f32(x), f32(y), f32(mask)
    out["t_freqs"] = f32(sinusoid_freqs())

    # ---- one-shot forward, t = 500, part mask, with intermediates
    taps = {}
    o, _ = ref.forward(W, cfg, x, FWD_T, y, mask, taps=taps)
    out["fwd_timesteps"] = f32(torch.full((F,), float(FWD_T)))
    for k, v in taps.items():
        out[f"fwd_{k}"] = f32(v)
    o32, _ = ref.forward(W32, cfg, x.float(), FWD_T, y.float(), mask.float())
    checks["fp32_reference_vs_fp64_fwd_out"] = nmse(o32, o)
    checks["orig_vs_ref_fwd_out"] = nmse(o, V["out_t500_part_mask"])

    # extra one-shot outputs: all text valid; t = 999.7 (the model sees 999)
    out["fwd_fullmask_out"] = f32(ref.forward(W, cfg, x, FWD_T, y, None)[0])
    out["fwd_t999p7_out"] = f32(ref.forward(W, cfg, x, 999.7, y, mask)[0])

    # ---- per-frame timesteps (one-shot, bidirectional, part mask)
    pft = torch.tensor(PER_FRAME_T[F], dtype=torch.float64)
    taps = {}
    o, _ = ref.forward(W, cfg, x, pft, y, mask, taps=taps)
    out["pf_timesteps"] = f32(pft)
    out["pf_temb"], out["pf_t0"], out["pf_out"] = f32(taps["temb"]), f32(taps["t0"]), f32(o)

    # ---- LongSANA chunks: read pass at t = 727 on x's chunk, write pass at t = 0 on the clean chunk
    state = ref.CarriedState(cfg)
    for c in range(nchunks):
        f0 = c * cf
        r = ref.chunk_pass(W, cfg, state, x[:, f0 : f0 + cf], READ_T, y, mask, f0, commit=False)
        out[f"ls_chunk{c}_out_t{READ_T}"] = f32(r)
        checks[f"orig_vs_ref_ls_chunk{c}_out"] = nmse(r, V[f"chunk{c}_out_t727"])
        clean = V[f"chunk{c}_clean"].double()
        out[f"ls_chunk{c}_clean"] = f32(clean)
        wout = ref.chunk_pass(W, cfg, state, clean, 0, y, mask, f0, commit=True)
        out[f"ls_chunk{c}_out_t0"] = f32(wout)
        out.update(state_tensors(f"ls_chunk{c}", state, cfg))
        for b in range(cfg.depth):
            checks[f"orig_vs_ref_ls_chunk{c}_layer{b}_S"] = nmse(state.layer(b)["S"], V[f"chunk{c}_layer{b}_S"])

    # ---- one-shot block-causal forward over all frames (same t, same input) ...
    bc_out, contribs = ref.forward(W, cfg, x, BC_T, y, mask, chunk_frames=[cf] * nchunks)
    out["bc_out"] = f32(bc_out)
    # ... its carried state after each chunk, and the chunk-by-chunk equivalent
    bc_state = ref.CarriedState(cfg)
    chunked = []
    for c in range(nchunks):
        f0 = c * cf
        chunked.append(ref.chunk_pass(W, cfg, bc_state, x[:, f0 : f0 + cf], BC_T, y, mask, f0, commit=True))
        out.update(state_tensors(f"bc_chunk{c}", bc_state, cfg))
        for b in range(cfg.depth):  # the one-shot pass's own cumulative sums agree
            S_one = sum(contribs[b]["chunks"][i][0] for i in range(c + 1))
            checks[f"bc_state_oneshot_vs_chunked_c{c}_l{b}"] = nmse(S_one, bc_state.layer(b)["S"])
            checks[f"bc_conv_oneshot_vs_chunked_c{c}_l{b}"] = nmse(contribs[b]["conv_last"][c],
                                                                  bc_state.layer(b)["conv_last"])
    checks["bc_oneshot_vs_chunked_out"] = nmse(torch.cat(chunked, dim=1), bc_out)
    ref.DIRECT_BLOCK_CAUSAL = True  # independent formulas: masked double sum, boundary-corrected conv
    try:
        checks["bc_oneshot_vs_direct_masked_out"] = nmse(
            ref.forward(W, cfg, x, BC_T, y, mask, chunk_frames=[cf] * nchunks)[0], bc_out)
        checks["full_vs_direct_masked_out"] = nmse(
            ref.forward(W, cfg, x, FWD_T, y, mask)[0], V["out_t500_part_mask"].double())
    finally:
        ref.DIRECT_BLOCK_CAUSAL = False

    # ---- full 4-step LongSANA sampling from given noise
    noise = torch.randn(C, F, H, Wd, generator=g, dtype=torch.float64)
    renoise = torch.randn(len(STEPS) - 1, C, F, H, Wd, generator=g, dtype=torch.float64)
    trace = {}
    samp, samp_state = ref.longsana_sample(W, cfg, noise, y, mask, cf, STEPS, renoise, trace=trace)
    out["samp_steps"] = f32(torch.tensor(STEPS, dtype=torch.float64))
    out["samp_noise"], out["samp_renoise"], out["samp_out"] = f32(noise), f32(renoise), f32(samp)
    for k, v in trace.items():
        out[f"samp_{k}"] = f32(v)
    out.update(state_tensors("samp_final", samp_state, cfg))

    for k, v in checks.items():
        bound = 1e-12 if k.startswith("orig_") else (1e-9 if k.startswith("fp32_") else 1e-26)
        if k.startswith("bc_"):
            bound = 1e-24
        if k.startswith("full_vs_direct"):
            bound = 1e-12  # against the original's fp32 output
        assert v < bound, (name, k, v)

    meta = {
        "config": json.dumps(cfg.as_dict()),
        "weights": f"assets/testdata/sana-video/{name}.weights.safetensors",
        "weights_sha256": sha256(wpath),
        "generator": "tests/reference/make_vectors.py (float64 reference, stored float32)",
        "chunk_frames": str(cf),
        "chunks": str(nchunks),
        "rope_split_t_h_w": f"{cfg.rope_t},{cfg.rope_h},{cfg.rope_w}",
        "checks_nmse": json.dumps({k: float(f"{v:.3e}") for k, v in checks.items()}),
        "contents": json.dumps(contents_doc(cfg, C, F, H, Wd, P, nchunks, cf, len(y))),
    }
    return out, meta, checks


def contents_doc(cfg, C, F, H, Wd, P, nchunks, cf, L):
    T = F * P
    D = cfg.head_dim
    return {
        "layout": "latents [C,F,H,W]; tokens [T,C] frame-major then row then column, T=F*(H/2)*(W/2), "
                  f"P=(H/2)*(W/2)={P} tokens per frame; S [heads,D,D] row=value dim col=key dim; "
                  "z [heads,D]; conv_last [P,C] token-major (Mix-FFN features of the last latent frame "
                  "just before the temporal conv)",
        "x": f"[{C},{F},{H},{Wd}] latents (the original test data's x)",
        "y": f"[{L},{cfg.cap_ch}] raw caption embeddings", "mask": f"[{L}] 1=valid text token",
        "t_freqs": "[128] float32 sinusoid frequencies as the original forms them; arguments t*f_i in float32",
        "fwd_*": f"one-shot bidirectional forward of x at t={FWD_T}, mask: fwd_timesteps [F]; "
                 "fwd_t_sinusoid [F,256] (cos first); fwd_temb [F,C]; fwd_t0 [F,6C]; fwd_patch_embed [T,C]; "
                 "fwd_caption [L,C] (after RMSNorm); fwd_block{B}_attn_out [T,C] (linear attention after proj, "
                 "before the gate); fwd_block{B}_after_attn, _after_cross [T,C]; fwd_block{B}_ffn_out [T,C] "
                 "(Mix-FFN incl. temporal conv, before the gate); fwd_block{B}_after_ffn [T,C]; "
                 f"fwd_final_tokens [T,{4 * cfg.out_ch}] (feature ((o*2+p)*2+q)*Cout+c); fwd_out [C,F,H,W]",
        "fwd_fullmask_out": "same forward with every text token valid",
        "fwd_t999p7_out": "same forward at t=999.7 (the model truncates to 999), mask",
        "pf_*": "one-shot forward with per-frame timesteps pf_timesteps [F], mask: pf_temb [F,C], pf_t0 [F,6C], "
                "pf_out [C,F,H,W]",
        "ls_chunk{K}_*": f"LongSANA, {nchunks} chunks x {cf} frames, mask: out_t{READ_T} = read pass of "
                         f"x[:,K*{cf}:(K+1)*{cf}] at t={READ_T} (RoPE time positions K*{cf}.., carried state "
                         "of chunks <K); clean = latents of chunk K's write pass; out_t0 = that write pass's "
                         "output (t=0); layer{B}_S/_z/_conv_last = carried state after chunk K's write pass "
                         "(S, z summed over chunks <=K)",
        "bc_out": f"one-shot block-causal forward of all of x at t={BC_T}, mask: chunks of {cf} frames, "
                  "attention of chunk c reads chunks <=c, temporal conv of chunk c gets chunk c-1's last "
                  "frame on its left and zeros on its right; equals running the chunks one by one with "
                  "a write pass at the same t on the same input",
        "bc_chunk{K}_layer{B}_*": "carried state after chunk K in that chunk-by-chunk run",
        "samp_*": f"LongSANA sampling, {nchunks} chunks x {cf} frames, mask: samp_noise [C,F,H,W] start; "
                  f"samp_renoise [{len(STEPS) - 1},C,F,H,W] (noise k used before step k+1); samp_steps "
                  f"{list(STEPS)}; per step v=model(x,int(t)), x0=x-(t/1000)v, x=(1-s)x0+s*noise_k with "
                  "s=t_next/1000; chunk output = last x0; then a t=0 write pass on it. "
                  "samp_chunk{c}_step{k}_x/_v [C,cf,H,W] model input and output; samp_out [C,F,H,W]; "
                  "samp_final_layer{B}_* state after the last chunk",
    }


def linattn_vectors():
    g = torch.Generator().manual_seed(42)
    H, N, D = 2, 11, 8
    q = torch.randn(H, N, D, generator=g, dtype=torch.float64)
    k = torch.randn(H, N, D, generator=g, dtype=torch.float64)
    v = torch.randn(H, N, D, generator=g, dtype=torch.float64)
    eps = 1e-8
    out = {"q": f32(q), "k": f32(k), "v": f32(v), "positions": f32(torch.arange(N, dtype=torch.float64))}
    worst = 0.0
    modes = {"full": la.mode_blocks("full", N), "causal": la.mode_blocks("causal", N),
             "block3": la.mode_blocks("block", N, 3)}
    for mname, sizes in modes.items():
        for feat in ("relu", "elu1", "identity"):
            for norm in (True, False):
                if feat == "identity" and norm:
                    continue  # the denominator can vanish: not a meaningful combination
                for rope in (True, False):
                    kw = dict(feature=feat, normalize=norm, positions=torch.arange(N) if rope else None,
                              block_sizes=sizes, eps=eps)
                    a, _ = la.blockwise(q, k, v, **kw)
                    worst = max(worst, nmse(la.direct(q, k, v, **kw), a))
                    out[f"out_{mname}_{feat}_{'norm' if norm else 'raw'}_{'rope' if rope else 'norope'}"] = f32(a)
    sizes = modes["block3"]
    runs = {"additive": {}, "window2": dict(rule="window", window=2), "decay09": dict(rule="decay", decay=0.9)}
    for rname, rk in runs.items():
        kw = dict(feature="relu", normalize=True, positions=torch.arange(N), block_sizes=sizes, eps=eps, **rk)
        a, states = la.blockwise(q, k, v, **kw)
        worst = max(worst, nmse(la.direct(q, k, v, **kw), a))
        out[f"rule_{rname}_out"] = f32(a)
        for b, (S, z) in enumerate(states):
            out[f"rule_{rname}_block{b}_S"] = f32(S)
            out[f"rule_{rname}_block{b}_z"] = f32(z)
    assert worst < 1e-26, worst
    meta = {
        "generator": "tests/reference/linear_attention_ref.py via make_vectors.py (float64, stored float32)",
        "heads": str(H), "tokens": str(N), "head_dim": str(D), "eps": str(eps),
        "blockwise_vs_direct_worst_nmse": f"{worst:.3e}",
        "contents": json.dumps({
            "q,k,v": f"[{H},{N},{D}] = [heads, tokens, dims] (the engine's [N, H*D] is q.permute(1,0,2))",
            "positions": f"[{N}] RoPE positions 0..{N - 1} (theta 10000, angle p*theta^(-2i/D), adjacent pairs)",
            "out_{mode}_{phi}_{norm|raw}_{rope|norope}": "[H,N,D]; mode full | causal | block3 (blocks 3,3,3,2); "
                "phi relu | elu1 | identity (identity only raw); norm: / (z.phi(q) + eps) with unrotated "
                "vectors; rope: rotation after phi, numerator only",
            "rule_{additive|window2|decay09}_out": "[H,N,D] block3, relu, norm, rope, with that carried-state rule",
            "rule_*_block{b}_S / _z": "[H,D,D] / [H,D] carried state after block b is committed "
                "(window2: sum of the last 2 blocks' contributions; a query in block b reads carried(b-1) + own, "
                "i.e. its own block and 2 before it; decay: carried(b) = 0.9 carried(b-1) + own, a query reads "
                "carried(b))",
        }),
    }
    return out, meta, worst


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--testdata", default=os.path.normpath(os.path.join(HERE, "..", "..", "assets", "testdata",
                                                                          "sana-video")))
    ap.add_argument("--out", default=os.path.normpath(os.path.join(HERE, "..", "..", "assets", "vectors")))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    total = 0
    for name in ("tiny-hd32", "hd112"):
        tensors, meta, checks = dit_vectors(name, args.testdata)
        path = os.path.join(args.out, f"sana-video-{name}.safetensors")
        st_io.save(path, tensors, meta)
        total += os.path.getsize(path)
        print(f"{path}: {len(tensors)} tensors, {os.path.getsize(path)} bytes")
        for k, v in checks.items():
            print(f"  {k:45s} {v:.3e}")
    tensors, meta, worst = linattn_vectors()
    path = os.path.join(args.out, "linear_attention.safetensors")
    st_io.save(path, tensors, meta)
    total += os.path.getsize(path)
    print(f"{path}: {len(tensors)} tensors, {os.path.getsize(path)} bytes; blockwise vs direct worst nmse {worst:.3e}")
    print(f"total {total} bytes")


if __name__ == "__main__":
    main()
