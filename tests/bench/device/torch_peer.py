"""The PyTorch peer of `longvk bench dit` and `longvk bench gemm --shapes dit|4096`.

Runs the project's reference DiT (tests/reference/sana_video_ref.py, shown to match the
original SANA-Video modules) eagerly in bf16 on the same preset shape and depth as
`longvk bench dit`: one warm-up LongSANA chunk, then --runs chunks, each 4 read passes at
t = 1000, 960, 889, 727 and the write pass that commits the chunk to the carried state (the
same passes as lv_longsana_chunk); and torch.matmul (x @ w.T, as nn.Linear) in bf16 and
fp32 (TF32 off) at the GEMM shapes of `bench gemm --shapes dit` and 4096^3. Times are CUDA
events on a GPU (perf_counter on a CPU), medians after warm-up.

The weights are random (uniform in [-0.02, 0.02], norm weights 1 plus that, as
pipelines/bench/bench_dit_model.c makes longvk's), drawn on the device by torch: the same
distribution as longvk's, not the same bits. Dense kernels take the same time whatever the
values, and both DiTs check nothing that depends on them.

FLOPs are counted with the same formula as pipelines/bench/bench_dit.c, so TFLOP/s of the two
are comparable and their ratio is the ratio of times.

    PYTHONPATH=tests/reference:assets/default-model python3 tests/bench/device/torch_peer.py \\
        --preset sana-video-2b-480p [--depth 20] [--frames 10] [--runs 3] [--json OUT.json]
    # on a CPU, to check it runs:
    PYTHONPATH=tests/reference:assets/default-model /usr/bin/python3 tests/bench/device/torch_peer.py \\
        --device cpu --depth 1 --tiny

Prints one line per figure, "peer <what> key=value ...", and with --json one JSON object
(what tests/bench/device/ratios.py pairs with longvk's --json output).
"""
import argparse
import json
import statistics
import sys
import time

import torch

try:
    import sana_video_ref as ref
except ImportError as e:  # the reference and its st_io need both folders on the path
    sys.exit(f"torch_peer.py: {e}: run with PYTHONPATH=tests/reference:assets/default-model")

STEPS = (1000, 960, 889, 727)

# preset: config, latent grid of a frame, pixel frames per latent frame (bench_dit.c's table)
PRESETS = {
    "sana-video-2b-480p": (dict(hidden_size=2240, depth=20, num_heads=20, head_dim=112, patch_size=[1, 2, 2],
                                in_channels=16, out_channels=16, caption_channels=2304, mlp_ratio=3.0), (60, 104), 4),
    "sana-video-2b-720p": (dict(hidden_size=2240, depth=20, num_heads=20, head_dim=112, patch_size=[1, 1, 1],
                                in_channels=128, out_channels=128, caption_channels=2304, mlp_ratio=3.0), (22, 40), 8),
}
# --tiny: a few-channel model and small products, for a CPU
TINY = (dict(hidden_size=64, depth=1, num_heads=2, head_dim=32, patch_size=[1, 2, 2], in_channels=4,
             out_channels=4, caption_channels=32, mlp_ratio=3.0), (4, 6), 4)
DIT_GEMMS = [(15600, 2240, 6720), (15600, 2240, 13440), (15600, 6720, 2240)]  # M, K, N
TINY_GEMMS = [(64, 32, 96), (64, 96, 32)]


def tensor_shapes(cfg):
    """Every tensor the reference reads, with its shape (pipelines/sana/sana_names.c's list)."""
    C, Fh, cap = cfg.hidden, cfg.ffn_hidden, cfg.cap_ch
    pt, ph, pw = cfg.patch
    s = {
        "x_embedder.proj.weight": (C, cfg.in_ch, pt, ph, pw), "x_embedder.proj.bias": (C,),
        "t_embedder.mlp.0.weight": (C, 256), "t_embedder.mlp.0.bias": (C,),
        "t_embedder.mlp.2.weight": (C, C), "t_embedder.mlp.2.bias": (C,),
        "t_block.1.weight": (6 * C, C), "t_block.1.bias": (6 * C,),
        "y_embedder.y_proj.fc1.weight": (C, cap), "y_embedder.y_proj.fc1.bias": (C,),
        "y_embedder.y_proj.fc2.weight": (C, C), "y_embedder.y_proj.fc2.bias": (C,),
        "attention_y_norm.weight": (C,),
        "final_layer.linear.weight": (pt * ph * pw * cfg.out_ch, C), "final_layer.linear.bias": (pt * ph * pw * cfg.out_ch,),
        "final_layer.scale_shift_table": (2, C),
    }
    for b in range(cfg.depth):
        p = f"blocks.{b}."
        s.update({
            p + "scale_shift_table": (6, C), p + "attn.qkv.weight": (3 * C, C),
            p + "attn.q_norm.weight": (C,), p + "attn.k_norm.weight": (C,),
            p + "attn.proj.weight": (C, C), p + "attn.proj.bias": (C,),
            p + "cross_attn.q_linear.weight": (C, C), p + "cross_attn.q_linear.bias": (C,),
            p + "cross_attn.kv_linear.weight": (2 * C, C), p + "cross_attn.kv_linear.bias": (2 * C,),
            p + "cross_attn.proj.weight": (C, C), p + "cross_attn.proj.bias": (C,),
            p + "cross_attn.q_norm.weight": (C,), p + "cross_attn.k_norm.weight": (C,),
            p + "mlp.inverted_conv.conv.weight": (2 * Fh, C, 1, 1), p + "mlp.inverted_conv.conv.bias": (2 * Fh,),
            p + "mlp.depth_conv.conv.weight": (2 * Fh, 1, 3, 3), p + "mlp.depth_conv.conv.bias": (2 * Fh,),
            p + "mlp.point_conv.conv.weight": (C, Fh, 1, 1), p + "mlp.t_conv.weight": (C, C, 3, 1),
        })
    return s


def random_weights(cfg, dtype, device, gen):
    W = {}
    for name, shape in tensor_shapes(cfg).items():
        t = torch.empty(shape, dtype=torch.float32, device=device).uniform_(-0.02, 0.02, generator=gen)
        if name.endswith("norm.weight"):
            t += 1
        W[name] = t.to(dtype)
    return W


def dit_flops(cfg, T, L):
    """(per token per block, read pass, write pass): pipelines/bench/bench_dit.c's count."""
    C, F, d = cfg.hidden, cfg.ffn_hidden, cfg.head_dim
    P = cfg.patch[0] * cfg.patch[1] * cfg.patch[2]
    products = 2 * C * 3 * C + 2 * C * C + 2 * C * C + 2 * C * C + 2 * C * 2 * F + 2 * F * C + 2 * 3 * C * C
    layer = products + 4 * C * d + 4 * L * C + 2 * 9 * 2 * F
    write = T * (cfg.depth * layer + 2 * cfg.in_ch * P * C)
    return layer, write + T * 2 * C * cfg.out_ch * P, write


class Timer:
    """CUDA events on a GPU (the time the GPU spent between them), perf_counter on a CPU."""

    def __init__(self, device):
        self.cuda = device.type == "cuda"

    def mark(self):
        if self.cuda:
            e = torch.cuda.Event(enable_timing=True)
            e.record()
            return e
        return time.perf_counter()

    def seconds(self, a, b):
        if self.cuda:
            b.synchronize()
            return a.elapsed_time(b) / 1e3
        return b - a


def run_gemms(shapes, runs, device, timer, gen):
    out = []
    for M, K, N in shapes:
        for dtype, name in ((torch.bfloat16, "bf16"), (torch.float32, "f32")):
            x = torch.empty(M, K, device=device).uniform_(-1, 1, generator=gen).to(dtype)
            w = torch.empty(N, K, device=device).uniform_(-1, 1, generator=gen).to(dtype)
            for _ in range(3):  # warm-up: cuBLAS heuristics, clocks
                torch.matmul(x, w.t())
            times = []
            for _ in range(runs):
                a = timer.mark()
                torch.matmul(x, w.t())
                b = timer.mark()
                times.append(timer.seconds(a, b))
            ms = 1e3 * statistics.median(times)
            out.append(dict(M=M, K=K, N=N, dtype=name, ms=ms, tflops=2 * M * N * K / (ms * 1e9)))
            del x, w
    return out


def run_dit(cfg, W, latent, frames, L, runs, device, timer, gen, dtype):
    lh, lw = latent
    _, ph, pw = cfg.patch
    T = frames * (lh // ph) * (lw // pw)
    y = torch.empty(L, cfg.cap_ch, device=device).uniform_(-1, 1, generator=gen).to(dtype)
    mask = torch.ones(L, dtype=dtype, device=device)
    state = ref.CarriedState(cfg, 0)  # every committed chunk is read (longvk: LV_CACHED_ALL)
    chunk_s, read_s, write_s = [], [], []
    with torch.no_grad():
        for c in range(runs + 1):  # chunk 0 is the warm-up
            f0 = c * frames
            x = torch.randn(cfg.in_ch, frames, lh, lw, device=device, generator=gen).to(dtype)
            marks = [timer.mark()]
            for k, t in enumerate(STEPS):
                # the timestep as a tensor on the device: every tensor the reference makes from it
                # stays there (no host-device copy, whatever the default device)
                tt = torch.tensor(float(t), device=device)
                v = ref.chunk_pass(W, cfg, state, x, tt, y, mask, f0, commit=False)
                x0 = x - (t / 1000.0) * v
                if k + 1 < len(STEPS):
                    s = STEPS[k + 1] / 1000.0
                    x = (1.0 - s) * x0 + s * torch.randn(x.shape, device=device, generator=gen).to(dtype)
                marks.append(timer.mark())
            ref.chunk_pass(W, cfg, state, x0, torch.tensor(0.0, device=device), y, mask, f0, commit=True)
            marks.append(timer.mark())
            if c == 0:
                warm = timer.seconds(marks[0], marks[-1])
                continue
            chunk_s.append(timer.seconds(marks[0], marks[-1]))
            read_s += [timer.seconds(marks[k], marks[k + 1]) for k in range(len(STEPS))]
            write_s.append(timer.seconds(marks[-2], marks[-1]))
    layer, rp, wp = dit_flops(cfg, T, L)
    chunk = statistics.median(chunk_s)
    flop = len(STEPS) * rp + wp
    return dict(tokens=T, warmup_chunk_s=warm, chunk_s=chunk, forward_s=chunk / (len(STEPS) + 1),
                read_pass_s=statistics.median(read_s), write_pass_s=statistics.median(write_s),
                gflop_per_token_forward=rp / T / 1e9, tflop_per_chunk=flop / 1e12, tflops=flop / chunk / 1e12)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--preset", choices=sorted(PRESETS), default="sana-video-2b-480p")
    ap.add_argument("--tiny", action="store_true", help="a tiny model and tiny products (to test on a CPU)")
    ap.add_argument("--depth", type=int, help="DiT blocks (default: the preset's, 20)")
    ap.add_argument("--frames", type=int, default=10, help="latent frames in the chunk (default 10)")
    ap.add_argument("--latent", help="HxW latent grid of a frame (default: the preset's)")
    ap.add_argument("--text-tokens", type=int, default=300)
    ap.add_argument("--runs", type=int, default=3, help="timed chunks after the warm-up one (default 3)")
    ap.add_argument("--gemm-runs", type=int, default=10)
    ap.add_argument("--gemm", choices=["dit", "4096", "both", "none"], default="both",
                    help="which products (default both: M = 15600 with the DiT's K x N, and 4096^3)")
    ap.add_argument("--gemm-tokens", type=int, default=15600, help="M of the DiT's products (default 15600)")
    ap.add_argument("--no-dit", action="store_true")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--dtype", choices=["bf16", "f32"], default="bf16", help="the DiT's dtype (default bf16)")
    ap.add_argument("--json", help="also write the figures to this file as one JSON object")
    a = ap.parse_args()

    device = torch.device(a.device)
    if device.type == "cuda":
        torch.set_float32_matmul_precision("highest")  # fp32 products in fp32 (no TF32), as longvk's
        # the reference makes its index, zero and RoPE tensors with factory calls that name no
        # device: make them on the GPU (torch >= 2.0)
        torch.set_default_device(device)
    gen = torch.Generator(device=device)
    gen.manual_seed(42)
    timer = Timer(device)
    dtype = torch.bfloat16 if a.dtype == "bf16" else torch.float32
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    res = {"bench": "torch_peer", "device": name, "torch": torch.__version__}
    print(f"peer device={name!r} torch={torch.__version__}", flush=True)

    shapes = []
    if a.gemm in ("dit", "both"):
        shapes += TINY_GEMMS if a.tiny else [(a.gemm_tokens, k, n) for _, k, n in DIT_GEMMS]
    if a.gemm in ("4096", "both"):
        shapes += [(128, 128, 128)] if a.tiny else [(4096, 4096, 4096)]
    res["gemm"] = run_gemms(shapes, a.gemm_runs, device, timer, gen)
    for g in res["gemm"]:
        print(f"peer gemm M={g['M']} K={g['K']} N={g['N']} dtype={g['dtype']} ms={g['ms']:.3f} "
              f"tflops={g['tflops']:.3f}", flush=True)

    if not a.no_dit:
        base, latent, per_latent = TINY if a.tiny else PRESETS[a.preset]
        cfgd = dict(base)
        if a.depth:
            cfgd["depth"] = a.depth
        cfg = ref.Config(cfgd)
        if a.latent:
            latent = tuple(int(v) for v in a.latent.lower().split("x"))
        frames = 2 if a.tiny and a.frames == 10 else a.frames
        L = 8 if a.tiny and a.text_tokens == 300 else a.text_tokens
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
        W = random_weights(cfg, dtype, device, gen)
        d = run_dit(cfg, W, latent, frames, L, a.runs, device, timer, gen, dtype)
        d.update(preset="tiny" if a.tiny else a.preset, depth=cfg.depth, frames=frames, latent=list(latent),
                 text_tokens=L, dtype=a.dtype, runs=a.runs, pixel_frames=frames * per_latent)
        d["frames_per_s"] = d["pixel_frames"] / d["chunk_s"]
        if device.type == "cuda":
            d["device_memory_peak_bytes"] = torch.cuda.max_memory_allocated(device)
        res["dit"] = d
        print("peer dit " + " ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                                     for k, v in d.items() if k != "latent") + f" latent={latent[0]}x{latent[1]}",
              flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f)
            f.write("\n")


if __name__ == "__main__":
    main()
