"""Writes the image-to-video vectors of the C chunk sampler (lv_longsana_chunk with
lv_chunk_options.cond_frames / cond):

    assets/testdata/sana-video/tiny-hd32-diffusers-i2v.safetensors

    PYTHONPATH=assets/default-model /usr/bin/python3 tests/reference/make_i2v_vectors.py [--out FILE]

The model is the tiny diffusers-layout pipeline's transformer (assets/fixtures/tiny-hd32-diffusers,
made by make_diffusers_fixture.py), read under its diffusers names and mapped back to the
original names that sana_video_ref.py takes (the mapping of make_diffusers_fixture.py, inverted;
checked to give the tiny-hd32 weights bit for bit).

Chunk 0 is run the way diffusers' SanaImageToVideoPipeline runs its denoising loop:
- latents = noise with latent frame 0 replaced by the image latent (`latents[:, :, 0:1] =
  image_latents`; the latent is given here as floats: the VAE encoder and the latents_mean /
  latents_std normalisation are upstream of what is checked);
- conditioning_mask [B, 1, F, H/2, W/2] = 1 on frame 0's tokens, doubled for CFG;
- every step: the transformer gets cat([latents] * 2) (negative prompt first, as the pipeline
  concatenates them) and timestep = t.expand(mask.shape) * (1 - mask): per token, 0 on frame 0;
  guidance noise_pred = uncond + g (text - uncond);
- the scheduler steps frames 1.. only (`noise_pred[:, :, 1:]`, `latents[:, :, 1:]`) and frame 0 is
  put back in front (`torch.cat([latents[:, :, :1], pred_latents], dim=2)`).
The scheduler here is LongSANA's chunk step (what lv_longsana_chunk does): x0 = x - (t/1000) v;
then x = (1 - s) x0 + s n with s = t_next/1000 and n the given re-noise draw, or x0 after the last
step. The finished chunk is committed by a t = 0 write pass (LongSANA), then chunk 1 is made as
usual (no conditioning) over the carried state, to show what the image leaves in it.

The transformer takes a per-token timestep [B, 1, F, H', W']; sana_video_ref.forward takes one per
frame. The conditioning mask is constant over each frame's tokens (asserted), so each frame's
tokens share one timestep and the per-frame call is the same computation.

The same conditioning over a single clip (lv_sample_clip), which is what the pipeline itself
runs: every latent frame at once, no carried state, its DPM-Solver++ 2M (the original's
flow_dpm-solver, sana_video_ref.sample_clip's formulas) as a scheduler object that keeps its
own history of the latents it is given (frames 1..), CLIP_STEPS steps, shift CLIP_SHIFT,
guidance CLIP_GUIDANCE.

Checks (asserted): the pipeline-shaped loop == a LongSANA-shaped loop over all frames (timesteps
[0, t, t, ...], every frame stepped, then frame 0 restored from the image latent) to float64
rounding; frame 0 of the output is the image latent exactly; a float32 run of the same loop gives
the floor an fp32 engine can expect."""
import argparse
import hashlib
import json
import os

import numpy as np
import torch

import make_diffusers_fixture as dfx
import sana_video_ref as ref
from training import st_io

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
FIXTURE = os.path.join(ROOT, "assets", "fixtures", "tiny-hd32-diffusers")
ORIGINAL = os.path.join(ROOT, "assets", "testdata", "sana-video", "tiny-hd32.weights.safetensors")
TESTDATA = os.path.join(ROOT, "assets", "testdata", "sana-video", "tiny-hd32.vectors.safetensors")
OUT = os.path.join(ROOT, "assets", "testdata", "sana-video", "tiny-hd32-diffusers-i2v.safetensors")

SEED = 1357
STEPS = (1000, 960, 889, 727)  # LongSANA's chunk timesteps
GUIDANCE = 3.0
CHUNK_FRAMES = 3               # two chunks of the test data's 6 latent frames
CLIP_STEPS, CLIP_SHIFT, CLIP_GUIDANCE = 5, 8.0, 6.0  # the single clip (the clip vectors' dpmpp2m run)


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


def load_diffusers_transformer(folder, dtype):
    """The fixture's weights under the original names, and sana_video_ref's config."""
    arrays, _ = st_io.load(os.path.join(folder, "diffusion_pytorch_model.safetensors"))
    with open(os.path.join(folder, "config.json")) as f:
        dc = json.load(f)
    top = {v: k for k, v in dfx.TOP.items()}
    block = {v: k for k, v in dfx.BLOCK.items()}
    W = {}
    for name, a in arrays.items():
        if name in top:
            W[top[name]] = a
            continue
        assert name.startswith("transformer_blocks."), name
        _, n, rest = name.split(".", 2)
        if rest in block:
            W[f"blocks.{n}.{block[rest]}"] = a
    for orig, parts in dfx.SPLIT.items():  # to_q/to_k/to_v rows back into one qkv, ...
        for n in range(dc["num_layers"]):
            W[f"blocks.{n}.{orig}"] = np.concatenate([arrays[f"transformer_blocks.{n}.{p}"] for p in parts], axis=0)
    cfg = ref.Config({"hidden_size": dc["num_attention_heads"] * dc["attention_head_dim"], "depth": dc["num_layers"],
                      "num_heads": dc["num_attention_heads"], "head_dim": dc["attention_head_dim"],
                      "patch_size": dc["patch_size"], "in_channels": dc["in_channels"],
                      "out_channels": dc["out_channels"], "caption_channels": dc["caption_channels"],
                      "mlp_ratio": dc["mlp_ratio"]})
    return cfg, {k: torch.from_numpy(np.array(v)).to(dtype) for k, v in W.items()}


class Transformer:
    """SanaVideoTransformer3DModel's call as the pipeline makes it, over sana_video_ref, with
    the carried state of the chunks committed before (LongSANA)."""

    def __init__(self, W, cfg, state, frame_offset):
        self.W, self.cfg, self.state, self.frame_offset = W, cfg, state, frame_offset

    def __call__(self, hidden_states, encoder_hidden_states, encoder_attention_mask, timestep):
        out = []
        for b in range(hidden_states.shape[0]):
            per_token = timestep[b, 0]  # [F, H', W']
            per_frame = per_token.flatten(1)[:, 0]
            assert torch.equal(per_token, per_frame[:, None, None].expand_as(per_token)), "one timestep per frame"
            v, _ = ref.forward(self.W, self.cfg, hidden_states[b], per_frame, encoder_hidden_states[b],
                               encoder_attention_mask[b], frame_offset=self.frame_offset,
                               state=self.state.as_list())
            out.append(v)
        return torch.stack(out)


def longsana_step(noise_pred, t, latents, k, renoise_k):
    """The scheduler: LongSANA's chunk step on the latents it is given."""
    x0 = latents - (t / 1000.0) * noise_pred
    if k + 1 == len(STEPS):
        return x0
    s = STEPS[k + 1] / 1000.0
    return (1.0 - s) * x0 + s * renoise_k


def i2v_chunk_pipeline(W, cfg, state, noise, image_latent, renoise, prompt, negative, trace):
    """Chunk 0 as SanaImageToVideoPipeline's loop runs it (batch 1; CFG doubles it)."""
    dtype = noise.dtype
    latents = noise[None].clone()                       # [1, C, F, H, W]
    latents[:, :, 0:1] = image_latent[None]
    _, C, F, H, Wd = latents.shape
    mask = latents.new_zeros(1, 1, F, H // cfg.patch[1], Wd // cfg.patch[2])
    mask[:, :, 0] = 1.0
    mask = torch.cat([mask, mask])
    y = torch.stack([negative[0], prompt[0]]).to(dtype)
    ymask = torch.stack([negative[1], prompt[1]]).to(dtype)
    transformer = Transformer(W, cfg, state, 0)
    for k, t in enumerate(STEPS):
        latent_model_input = torch.cat([latents] * 2)
        timestep = torch.tensor(float(t), dtype=dtype).expand(mask.shape) * (1 - mask)
        noise_pred = transformer(latent_model_input, y, ymask, timestep)
        noise_pred_uncond, noise_pred_text = noise_pred.chunk(2)
        if k == 0:
            trace["first_pass_uncond"], trace["first_pass_cond"] = noise_pred_uncond[0], noise_pred_text[0]
        noise_pred = noise_pred_uncond + GUIDANCE * (noise_pred_text - noise_pred_uncond)
        noise_pred = noise_pred[:, :, 1:]
        noise_latents = latents[:, :, 1:]
        pred_latents = longsana_step(noise_pred, t, noise_latents, k,
                                     renoise[k][None, :, 1:] if k + 1 < len(STEPS) else None)
        latents = torch.cat([latents[:, :, :1], pred_latents], dim=2)
    return latents[0]


def i2v_chunk_longsana(W, cfg, state, noise, image_latent, renoise, prompt, negative):
    """The same chunk organised as lv_longsana_chunk is: every frame stepped, per-frame
    timesteps [0, t, ...], frame 0 restored from the image latent after each update."""
    x = noise.clone()
    x[:, 0:1] = image_latent
    F = x.shape[1]
    for k, t in enumerate(STEPS):
        ts = torch.tensor([0.0] + [float(t)] * (F - 1), dtype=x.dtype)
        vu = ref.forward(W, cfg, x, ts, negative[0], negative[1], state=state.as_list())[0]
        vc = ref.forward(W, cfg, x, ts, prompt[0], prompt[1], state=state.as_list())[0]
        v = vu + GUIDANCE * (vc - vu)
        x0 = x - (t / 1000.0) * v
        x0[:, 0:1] = image_latent
        if k + 1 < len(STEPS):
            s = STEPS[k + 1] / 1000.0
            x = (1.0 - s) * x0 + s * renoise[k]
            x[:, 0:1] = image_latent
    return x0


def plain_chunk(W, cfg, state, x, renoise, prompt, negative, frame_offset):
    """A chunk without conditioning (LongSANA with CFG at every step)."""
    for k, t in enumerate(STEPS):
        vu = ref.forward(W, cfg, x, t, negative[0], negative[1], frame_offset=frame_offset, state=state.as_list())[0]
        vc = ref.forward(W, cfg, x, t, prompt[0], prompt[1], frame_offset=frame_offset, state=state.as_list())[0]
        v = vu + GUIDANCE * (vc - vu)
        x0 = x - (t / 1000.0) * v
        if k + 1 < len(STEPS):
            s = STEPS[k + 1] / 1000.0
            x = (1.0 - s) * x0 + s * renoise[k]
    return x0


class DPMSolver2M:
    """The pipeline's scheduler for the single clip: multistep DPM-Solver++ 2M in data
    prediction on the flow grid (sana_video_ref.sample_clip's update), stepping the latents it
    is handed and remembering their x0 for the second-order term."""

    def __init__(self, sigmas):
        self.sig, self.i, self.x0_prev, self.h_prev = sigmas, 0, None, None

    def step(self, v, sample):
        s, s_next = float(self.sig[self.i]), float(self.sig[self.i + 1])
        self.i += 1
        x0 = sample - s * v
        if s_next == 0.0:
            return x0
        h = np.log((1.0 - s_next) / s_next) - np.log((1.0 - s) / s)
        coef = (1.0 - s_next) * -np.expm1(-h)
        d = x0 if self.x0_prev is None else (1.0 + 0.5 / (self.h_prev / h)) * x0 - (0.5 / (self.h_prev / h)) * self.x0_prev
        self.x0_prev, self.h_prev = x0, h
        return (s_next / s) * sample + coef * d


def i2v_clip_pipeline(W, cfg, noise, image_latent, prompt, negative):
    """The single clip as SanaImageToVideoPipeline's loop runs it."""
    dtype = noise.dtype
    sig = ref.dpm_flow_sigmas(CLIP_STEPS, CLIP_SHIFT)
    timesteps = [ref.model_timestep(v) for v in sig[:-1].tolist()]
    scheduler = DPMSolver2M(sig)
    latents = noise[None].clone()
    latents[:, :, 0:1] = image_latent[None]
    _, C, F, H, Wd = latents.shape
    mask = latents.new_zeros(1, 1, F, H // cfg.patch[1], Wd // cfg.patch[2])
    mask[:, :, 0] = 1.0
    mask = torch.cat([mask, mask])
    y = torch.stack([negative[0], prompt[0]]).to(dtype)
    ymask = torch.stack([negative[1], prompt[1]]).to(dtype)
    transformer = Transformer(W, cfg, ref.CarriedState(cfg, 0), 0)
    for t in timesteps:
        timestep = torch.tensor(float(t), dtype=dtype).expand(mask.shape) * (1 - mask)
        noise_pred = transformer(torch.cat([latents] * 2), y, ymask, timestep)
        noise_pred_uncond, noise_pred_text = noise_pred.chunk(2)
        noise_pred = noise_pred_uncond + CLIP_GUIDANCE * (noise_pred_text - noise_pred_uncond)
        pred_latents = scheduler.step(noise_pred[:, :, 1:], latents[:, :, 1:])
        latents = torch.cat([latents[:, :, :1], pred_latents], dim=2)
    return latents[0], sig, timesteps


def i2v_clip_longsana_shaped(W, cfg, noise, image_latent, prompt, negative):
    """The same organised as lv_sample_clip is: every frame stepped with per-frame timesteps
    [0, t, ...], frame 0 restored after each update."""
    sig = ref.dpm_flow_sigmas(CLIP_STEPS, CLIP_SHIFT)
    scheduler = DPMSolver2M(sig)
    x = noise.clone()
    x[:, 0:1] = image_latent
    F = x.shape[1]
    for i in range(CLIP_STEPS):
        t = float(ref.model_timestep(float(sig[i])))
        ts = torch.tensor([0.0] + [t] * (F - 1), dtype=x.dtype)
        vu = ref.forward(W, cfg, x, ts, negative[0], negative[1])[0]
        vc = ref.forward(W, cfg, x, ts, prompt[0], prompt[1])[0]
        x = scheduler.step(vu + CLIP_GUIDANCE * (vc - vu), x)
        x[:, 0:1] = image_latent
    return x


def run(dtype, noise, image_latent, renoise, y, mask, ones, shaped_as="pipeline"):
    cfg, W = load_diffusers_transformer(FIXTURE, dtype)
    prompt, negative = (y.to(dtype), mask.to(dtype)), (y.to(dtype), ones.to(dtype))
    noise, image_latent, renoise = noise.to(dtype), image_latent.to(dtype), renoise.to(dtype)
    state = ref.CarriedState(cfg, 0)
    cf = CHUNK_FRAMES
    trace = {}
    if shaped_as == "pipeline":
        out0 = i2v_chunk_pipeline(W, cfg, state, noise[:, :cf], image_latent, renoise[:, :, :cf], prompt, negative,
                                  trace)
    else:
        out0 = i2v_chunk_longsana(W, cfg, state, noise[:, :cf], image_latent, renoise[:, :, :cf], prompt, negative)
    ref.chunk_pass(W, cfg, state, out0, 0, prompt[0], prompt[1], 0, commit=True)
    state0 = [{k: v.clone() if v is not None else None for k, v in state.layer(b).items()} for b in range(cfg.depth)]
    out1 = plain_chunk(W, cfg, state, noise[:, cf:], renoise[:, :, cf:], prompt, negative, cf)
    ref.chunk_pass(W, cfg, state, out1, 0, prompt[0], prompt[1], cf, commit=True)
    state1 = [state.layer(b) for b in range(cfg.depth)]
    if shaped_as == "pipeline":
        trace["clip"], trace["clip_sigmas"], trace["clip_timesteps"] = i2v_clip_pipeline(W, cfg, noise, image_latent,
                                                                                         prompt, negative)
    else:
        trace["clip"] = i2v_clip_longsana_shaped(W, cfg, noise, image_latent, prompt, negative)
    return cfg, out0, out1, state0, state1, trace


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=OUT)
    args = ap.parse_args()

    cfg64, W64 = load_diffusers_transformer(FIXTURE, torch.float64)
    _, Worig = ref.load_model(ORIGINAL, torch.float64)
    assert set(W64) == set(Worig) and all(torch.equal(W64[k], Worig[k]) for k in Worig), \
        "the diffusers fixture maps back to the tiny-hd32 weights"

    V, _ = st_io.load(TESTDATA)
    y = torch.from_numpy(V["y"]).double()
    mask = torch.from_numpy(V["mask_part"]).double()
    ones = torch.ones_like(mask)
    C, F, H, Wd = V["x"].shape
    g = torch.Generator().manual_seed(SEED)
    # float32-representable inputs, so that the C side gets exactly what the reference used
    noise = torch.from_numpy(f32(torch.randn(C, F, H, Wd, generator=g, dtype=torch.float64))).double()
    image_latent = torch.from_numpy(f32(torch.randn(C, 1, H, Wd, generator=g, dtype=torch.float64))).double()
    renoise = torch.from_numpy(f32(torch.randn(len(STEPS) - 1, C, F, H, Wd, generator=g,
                                               dtype=torch.float64))).double()

    cfg, out0, out1, state0, state1, trace = run(torch.float64, noise, image_latent, renoise, y, mask, ones)
    _, l_out0, l_out1, _, _, l_trace = run(torch.float64, noise, image_latent, renoise, y, mask, ones, "longsana")
    _, s_out0, s_out1, _, _, s_trace = run(torch.float32, noise, image_latent, renoise, y, mask, ones)
    checks = {
        "chunk0_pipeline_loop_vs_longsana_loop": nmse(l_out0, out0),
        "chunk1_pipeline_loop_vs_longsana_loop": nmse(l_out1, out1),
        "chunk0_fp32_reference_vs_fp64": nmse(s_out0, out0),
        "chunk1_fp32_reference_vs_fp64": nmse(s_out1, out1),
        "clip_pipeline_loop_vs_longsana_loop": nmse(l_trace["clip"], trace["clip"]),
        "clip_fp32_reference_vs_fp64": nmse(s_trace["clip"], trace["clip"]),
    }
    assert torch.equal(out0[:, 0:1], image_latent), "frame 0 is the image latent"
    assert torch.equal(trace["clip"][:, 0:1], image_latent), "the clip's frame 0 is the image latent"
    for k, v in checks.items():
        assert v < (1e-9 if "fp32" in k else 1e-24), (k, v)
    # the image matters: chunk 0's other frames differ from an unconditioned chunk's
    checks["chunk0_frames1_vs_unconditioned"] = nmse(
        out0[:, 1:], plain_chunk(W64, cfg64, ref.CarriedState(cfg64, 0), noise[:, :CHUNK_FRAMES],
                                 renoise[:, :, :CHUNK_FRAMES], (y, mask), (y, ones), 0)[:, 1:])

    tensors = {"image_latent": f32(image_latent), "noise": f32(noise), "renoise": f32(renoise),
               "steps": f32(torch.tensor(STEPS, dtype=torch.float64)), "y": f32(y), "mask": f32(mask),
               "neg_mask": f32(ones), "chunk0_out": f32(out0), "chunk1_out": f32(out1),
               "first_pass_cond": f32(trace["first_pass_cond"]), "first_pass_uncond": f32(trace["first_pass_uncond"]),
               "clip_out": f32(trace["clip"]), "clip_sigmas": f32(trace["clip_sigmas"]),
               "clip_timesteps": f32(torch.tensor(trace["clip_timesteps"], dtype=torch.float64))}
    for c, st in ((0, state0), (1, state1)):
        for b in range(cfg.depth):
            for k in ("S", "z", "conv_last"):
                tensors[f"chunk{c}_layer{b}_{k}"] = f32(st[b][k])
    meta = {
        "config": json.dumps(cfg.as_dict()),
        "weights": "assets/fixtures/tiny-hd32-diffusers/diffusion_pytorch_model.safetensors",
        "weights_sha256": sha256(os.path.join(FIXTURE, "diffusion_pytorch_model.safetensors")),
        "generator": "tests/reference/make_i2v_vectors.py (SanaImageToVideoPipeline's loop over sana_video_ref, "
                     "float64, stored float32)",
        "seed": str(SEED), "guidance": str(GUIDANCE), "clip_steps": str(CLIP_STEPS), "clip_shift": str(CLIP_SHIFT),
        "clip_guidance": str(CLIP_GUIDANCE), "chunk_frames": str(CHUNK_FRAMES), "cond_frames": "1",
        "text": "slot 0 (prompt) = (y, mask = the test data's mask_part); slot 1 (negative) = (y, neg_mask = ones)",
        "checks_nmse": json.dumps({k: float(f"{v:.3e}") for k, v in checks.items()}),
        "contents": json.dumps({
            "image_latent": f"[{C},1,{H},{Wd}] the conditioning latent (latent frame 0 of chunk 0)",
            "noise": f"[{C},{F},{H},{Wd}] initial noise of both chunks (chunk 0's frame 0 replaced by image_latent)",
            "renoise": f"[{len(STEPS) - 1},{C},{F},{H},{Wd}] the draw used before step k+1",
            "steps": "the chunk timesteps", "y, mask, neg_mask": "text of slots 0 and 1",
            "first_pass_cond, first_pass_uncond": f"[{C},{CHUNK_FRAMES},{H},{Wd}] chunk 0's first transformer "
                "call, its two CFG branches (timesteps 0 on frame 0, 1000 on the others)",
            "chunk0_out": f"[{C},{CHUNK_FRAMES},{H},{Wd}] chunk 0 (frames 0-2) with the image in frame 0",
            "chunk1_out": f"[{C},{F - CHUNK_FRAMES},{H},{Wd}] chunk 1 (frames 3-5), no conditioning, over the state",
            "clip_out": f"[{C},{F},{H},{Wd}] the single clip (dpmpp2m, {CLIP_STEPS} steps, shift {CLIP_SHIFT:g}, "
                f"guidance {CLIP_GUIDANCE:g}) from noise with image_latent in frame 0",
            "clip_sigmas, clip_timesteps": "its grid and the integer timesteps of frames 1.. (frame 0: 0)",
            "chunk{K}_layer{B}_S/_z/_conv_last": "carried state after chunk K's t = 0 write pass ([heads,D,D], "
                "[heads,D], [P,C] token-major)"}),
    }
    st_io.save(args.out, tensors, meta)
    print(f"{args.out}: {len(tensors)} tensors, {os.path.getsize(args.out)} bytes")
    for k, v in checks.items():
        print(f"  {k:45s} {v:.3e}")


if __name__ == "__main__":
    main()
