"""Writes the single-clip (base model) sampling vectors of the C sampler (lv_sample_clip):

    assets/vectors/sana-video-tiny-hd32-clip.safetensors

    PYTHONPATH=assets/default-model /usr/bin/python3 tests/reference/make_clip_vectors.py [--testdata DIR] [--out DIR]

The sampler is sana_video_ref.sample_clip (float64, stored float32) on the tiny-hd32
weights (assets/testdata/sana-video/, not copied: the SHA-256 is in the metadata) and the
latent shape of that model's test x ([4, 6, 8, 8]). The prompt is (y, mask_part) of the
test data (text slot 0), the negative prompt the same y with every token valid (slot 1).

Before writing, every run is repeated by an independent plain loop written the way the
original code is organised (grid from torch float32 tensor ops and diffusers' 1000-entry
training table; DPM-Solver++ as a noise-prediction model with guidance on the "noise",
x0 = (x - sigma noise) / alpha, lambda from logs with lambda(0) = +inf, the multistep
order-2 loop with lower_order_final); the two must agree to float64 rounding. A float32 run
of the same reference gives the floor an fp32 engine can expect."""
import argparse
import hashlib
import json
import os

import numpy as np
import torch

import sana_video_ref as ref
from training import st_io

HERE = os.path.dirname(os.path.abspath(__file__))

NAME = "tiny-hd32"
SEED = 2468
RUNS = (("euler", 4, 8.0, 6.0), ("dpmpp2m", 5, 8.0, 6.0), ("dpmpp2m", 3, 1.0, 1.0))
# An extra run that is NOT the original: Euler on the DPM-Solver grid (what a sampler that
# shares one grid between both solvers computes), so such a C sampler can be checked too.
EXTRA_EULER_ON_DPM_GRID = ("euler", 4, 8.0, 6.0)


def run_name(solver, steps, shift, guidance):
    return f"clip_{solver}_n{steps}_shift{shift:g}_cfg{guidance:g}"


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


# ----------------------------------------------------------------------------- independent plain loop


def plain_dpm_grid(steps, shift):
    """The original's float32 tensor ops (torch.linspace on the CPU, then float32 arithmetic)."""
    b = torch.linspace(1.0, 0.001, steps + 1)
    s = 1.0 - b
    return (shift * s / (1 + (shift - 1) * s)).flip(dims=[0]).double()


def plain_euler_grid(steps, shift):
    """diffusers' FlowMatchEulerDiscreteScheduler: a 1000-entry training table (float32), then
    set_timesteps over [sigma_max, sigma_min] of that table (numpy float64), shifted, + 0."""
    table = torch.from_numpy(np.linspace(1, 1000, 1000, dtype=np.float32)[::-1].copy()) / 1000
    table = shift * table / (1 + (shift - 1) * table)
    smax, smin = table[0].item(), table[-1].item()
    t = np.linspace(smax * 1000, smin * 1000, steps) / 1000
    s = torch.from_numpy(shift * t / (1 + (shift - 1) * t)).to(torch.float32)
    return torch.cat([s, torch.zeros(1)]).double()


def plain_sample(W, cfg, noise, cond, uncond, solver, steps, shift, guidance):
    x = noise.double()
    grid = plain_euler_grid(steps, shift) if solver == "euler" else plain_dpm_grid(steps, shift)
    t_in = (grid.float() * 1000).long()  # what the model truncates to

    def model(x, i):
        t = float(t_in[i])
        if guidance == 1.0:
            return ref.forward(W, cfg, x, t, cond[0], cond[1])[0]
        vu = ref.forward(W, cfg, x, t, uncond[0], uncond[1])[0]
        vc = ref.forward(W, cfg, x, t, cond[0], cond[1])[0]
        return vu + guidance * (vc - vu)

    if solver == "euler":
        for i in range(steps):
            x = x + (grid[i + 1] - grid[i]) * model(x, i)
        return x, grid

    # DPM-Solver++ (data prediction) over a "flow" model, organised as the original does.
    def noise_pred(x, i):
        s = grid[i]
        guided_noise = (1 - s) * model(x, i) + x  # guidance on the noise is guidance on v
        return guided_noise

    def data_pred(x, i):
        s = grid[i]
        return (x - s * noise_pred(x, i)) / (1 - s)

    def lam(s):
        return torch.log(1 - s) - torch.log(s)  # +inf at s = 0

    def first(x, i, j, m):
        h = lam(grid[j]) - lam(grid[i])
        phi = torch.expm1(-h)
        return grid[j] / grid[i] * x - (1 - grid[j]) * phi * m

    def second(x, i1, i0, j, m1, m0):
        h0 = lam(grid[i0]) - lam(grid[i1])
        h = lam(grid[j]) - lam(grid[i0])
        phi = torch.expm1(-h)
        d1 = (h / h0) * (m0 - m1)
        return grid[j] / grid[i0] * x - (1 - grid[j]) * phi * m0 - 0.5 * (1 - grid[j]) * phi * d1

    hist = [(0, data_pred(x, 0))]
    x = first(x, 0, 1, hist[-1][1])
    hist.append((1, data_pred(x, 1)))
    for j in range(2, steps + 1):
        order = min(2, steps + 1 - j)  # lower_order_final
        if order == 1:
            x = first(x, hist[-1][0], j, hist[-1][1])
        else:
            x = second(x, hist[-2][0], hist[-1][0], j, hist[-2][1], hist[-1][1])
        if j < steps:
            hist = [hist[-1], (j, data_pred(x, j))]
    return x, grid


# ----------------------------------------------------------------------------- vectors


def clip_vectors(testdata):
    wpath = os.path.join(testdata, f"{NAME}.weights.safetensors")
    cfg, W = ref.load_model(wpath, torch.float64)
    _, W32 = ref.load_model(wpath, torch.float32)
    V, _ = st_io.load(os.path.join(testdata, f"{NAME}.vectors.safetensors"))
    y = torch.from_numpy(V["y"]).double()
    mask = torch.from_numpy(V["mask_part"]).double()
    ones = torch.ones_like(mask)
    C, F, H, Wd = V["x"].shape
    g = torch.Generator().manual_seed(SEED)
    noise = torch.from_numpy(f32(torch.randn(C, F, H, Wd, generator=g, dtype=torch.float64))).double()
    cond, uncond = (y, mask), (y, ones)
    cond32, uncond32 = (y.float(), mask.float()), (y.float(), ones.float())

    out = {"clip_noise": f32(noise), "clip_y": f32(y), "clip_mask": f32(mask), "clip_neg_mask": f32(ones)}
    checks, figures = {}, {}
    for solver, steps, shift, guidance in RUNS:
        name = run_name(solver, steps, shift, guidance)
        trace = {}
        x, sig, ts = ref.sample_clip(W, cfg, noise, cond, uncond, solver, steps, shift, guidance, trace=trace)
        out[f"{name}_sigmas"] = f32(sig)
        out[f"{name}_timesteps"] = f32(ts)
        out[f"{name}_step_x"] = f32(trace["step_x"])
        out[f"{name}_out"] = f32(x)
        px, pgrid = plain_sample(W, cfg, noise, cond, uncond, solver, steps, shift, guidance)
        assert torch.equal(pgrid, sig), (name, pgrid, sig)
        checks[f"{name}_plain_loop_vs_ref"] = nmse(px, x)
        x32, _, _ = ref.sample_clip(W32, cfg, noise.float(), cond32, uncond32, solver, steps, shift, guidance)
        checks[f"{name}_fp32_reference_vs_fp64"] = nmse(x32, x)
        figures[name] = {"sigmas": [float(f"{v:.9g}") for v in f32(sig).tolist()],
                         "timesteps": [int(v) for v in ts.tolist()],
                         "out_rms": float(f"{float(x.pow(2).mean().sqrt()):.6g}"),
                         "out_absmax": float(f"{float(x.abs().max()):.6g}")}

    # the extra run: Euler on the DPM-Solver grid (not the original's Euler grid)
    solver, steps, shift, guidance = EXTRA_EULER_ON_DPM_GRID
    name = run_name("euler_dpmgrid", steps, shift, guidance)
    sig = ref.dpm_flow_sigmas(steps, shift)
    ts = [ref.model_timestep(s) for s in sig[:-1].tolist()]
    x = noise.clone()
    xp = noise.clone()
    for i in range(steps):
        x = x + float(sig[i + 1] - sig[i]) * ref.guided_velocity(W, cfg, x, ts[i], cond, uncond, guidance)
        # plain: written out pass by pass
        vu = ref.forward(W, cfg, xp, ts[i], y, ones)[0]
        vc = ref.forward(W, cfg, xp, ts[i], y, mask)[0]
        xp = xp + (sig[i + 1] - sig[i]) * (vu + guidance * (vc - vu))
    out[f"{name}_sigmas"] = f32(sig)
    out[f"{name}_timesteps"] = f32(torch.tensor(ts, dtype=torch.float64))
    out[f"{name}_out"] = f32(x)
    checks[f"{name}_plain_loop_vs_ref"] = nmse(xp, x)
    figures[name] = {"sigmas": [float(f"{v:.9g}") for v in f32(sig).tolist()], "timesteps": ts,
                     "out_rms": float(f"{float(x.pow(2).mean().sqrt()):.6g}")}

    for k, v in checks.items():
        bound = 1e-9 if "fp32" in k else 1e-24
        assert v < bound, (k, v)

    meta = {
        "config": json.dumps(cfg.as_dict()),
        "weights": f"assets/testdata/sana-video/{NAME}.weights.safetensors",
        "weights_sha256": sha256(wpath),
        "generator": "tests/reference/make_clip_vectors.py (sana_video_ref.sample_clip, float64, stored float32)",
        "noise_seed": str(SEED),
        "text": "slot 0 (prompt) = (clip_y, clip_mask = the test data's mask_part); "
                "slot 1 (negative) = (clip_y, clip_neg_mask = all ones)",
        "runs": json.dumps([run_name(*r) for r in RUNS] + [run_name("euler_dpmgrid", *EXTRA_EULER_ON_DPM_GRID[1:])]),
        "checks_nmse": json.dumps({k: float(f"{v:.3e}") for k, v in checks.items()}),
        "figures": json.dumps(figures),
        "contents": json.dumps(contents_doc(C, F, H, Wd, len(y), cfg.cap_ch)),
    }
    return out, meta, checks, figures


def contents_doc(C, F, H, Wd, L, cap):
    return {
        "clip_noise": f"[{C},{F},{H},{Wd}] initial latents x at sigmas[0] (standard normal, seed {SEED})",
        "clip_y": f"[{L},{cap}] raw caption embeddings (prompt and negative)",
        "clip_mask": f"[{L}] prompt mask (1 = valid)", "clip_neg_mask": f"[{L}] negative prompt mask (all ones)",
        "clip_{solver}_n{N}_shift{s}_cfg{g}_*": "one run: _sigmas [N+1] the grid (float32 values the original "
            "uses; sigmas[N] = 0); _timesteps [N] the integer t the DiT receives at step i "
            "(trunc(float32(sigma_i) * 1000 in float32)); _step_x [N,C,F,H,W] input latents of step i "
            "(_step_x[0] = clip_noise); _out [C,F,H,W] final latents",
        "solvers": "euler: original flow_euler = diffusers FlowMatchEulerDiscreteScheduler(shift): "
            "N sigmas = shift'(linspace(1, shift'(0.001), N)) with shift'(s) = shift s / (1 + (shift-1) s) "
            "(applied twice to 0.001), then 0; x += (sigma_{i+1} - sigma_i) v. "
            "dpmpp2m: original flow_dpm-solver = multistep DPM-Solver++ order 2, time_uniform_flow grid "
            "shift'(1 - linspace(1, 0.001, N+1)) reversed; first step and last step (to 0: returns x0) first "
            "order. v = v_u + g (v_c - v_u) (one conditional pass when g = 1); bidirectional DiT, one "
            "timestep for all frames",
        "clip_euler_dpmgrid_*": "NOT the original: Euler on the dpmpp2m grid (_sigmas, _timesteps, _out)",
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--testdata", default=os.path.normpath(os.path.join(HERE, "..", "..", "assets", "testdata",
                                                                          "sana-video")))
    ap.add_argument("--out", default=os.path.normpath(os.path.join(HERE, "..", "..", "assets", "vectors")))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    tensors, meta, checks, figures = clip_vectors(args.testdata)
    path = os.path.join(args.out, f"sana-video-{NAME}-clip.safetensors")
    st_io.save(path, tensors, meta)
    print(f"{path}: {len(tensors)} tensors, {os.path.getsize(path)} bytes")
    for k, v in checks.items():
        print(f"  {k:55s} {v:.3e}")
    for k, v in figures.items():
        print(f"  {k}: {json.dumps(v)}")


if __name__ == "__main__":
    main()
