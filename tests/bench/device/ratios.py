"""Pairs longvk's benchmark figures with the PyTorch peer's and prints longvk / PyTorch ratios.

    python3 tests/bench/device/ratios.py DIR [--out ALL.json]

DIR holds the --json outputs device-run.sh writes: gemm_dit.json and gemm_4096.json
(`longvk bench gemm --shapes dit|4096 --json`), dit_480p.json and dit_720p.json (`longvk bench
dit --json`), vae_480p.json (`longvk bench vae --preset 480p --json`), peer_480p.json and
peer_720p.json (torch_peer.py --json), sp_480p.json (`longvk bench sp --json`), generate_480p.json
(`longvk bench generate --json`). A missing or unreadable file is reported and skipped.
Every ratio is a ratio of speeds, longvk over PyTorch: above 1, longvk is faster. --out
gathers every file's object into one JSON object keyed by the file's name (so that one file
comes back from the GPU machine).
"""
import argparse
import json
import os
import sys


def load(d, name):
    try:
        with open(os.path.join(d, name)) as f:
            return json.loads(f.read().strip().splitlines()[-1])
    except (OSError, ValueError, IndexError) as e:
        print(f"  ({name}: {e.__class__.__name__}: missing or unreadable)")
        return None


def pct(x):
    return "peak unknown" if x is None else f"{100 * x:.1f}%"


def gemm_table(lv, peer):
    if not lv:
        return
    cm = lv.get("coopmat")
    cm_text = "beside the cooperative-matrix kernel (f16 inputs, f32 accumulation)" if cm is True else f"cooperative matrix: {cm}"
    print(f"GEMM on {lv['device']} (longvk: {lv['variant']} kernel, fp32 compute, {cm_text})")
    pk = lv.get("peak")
    if pk:
        print(f"  peak: fp32 {pk['fp32_tflops']}, fp16/bf16 tensor {pk['half_tflops']} TFLOP/s ({pk['part']}, {pk['source']})")
    tp = {}
    for g in (peer or {}).get("gemm", []):
        tp[(g["M"], g["K"], g["N"], g["dtype"])] = g["tflops"]
    print(f"  {'M x K -> N':<22} {'longvk w':<8} {'TFLOP/s':>9} {'%fp32':>7} {'%half':>7} {'coopmat':>8} | "
          f"{'torch bf16':>10} {'torch f32':>10} | {'lv/f32':>7} {'cm/bf16':>8}")
    for c in lv["cases"]:
        key = (c["M"], c["K"], c["N"])
        tb, tf = tp.get(key + ("bf16",)), tp.get(key + ("f32",))
        shape = f"{c['M']} x {c['K']} -> {c['N']}"
        fp32 = pct(c["fraction_fp32_peak"]) if pk else "-"
        half = pct(c["fraction_half_peak"]) if pk else "-"
        ct = c.get("coopmat_tflops")
        cts = "-" if ct is None else f"{ct:.4g}"
        tbs = "-" if tb is None else f"{tb:.4g}"
        tfs = "-" if tf is None else f"{tf:.4g}"
        rf = "-" if not tf else f"{c['tflops'] / tf:.3f}"
        rc = "-" if not tb or ct is None else f"{ct / tb:.3f}"
        print(f"  {shape:<22} {c['w_dtype']:<8} {c['tflops']:>9.3f} {fp32:>7} {half:>7} {cts:>8} | {tbs:>10} {tfs:>10} | "
              f"{rf:>7} {rc:>8}")


def dit_pair(lv, peer, what):
    if not lv:
        return
    p = (peer or {}).get("dit")
    print(f"DiT chunk {what} on {lv['device']}: depth {lv['depth']}, {lv['frames']} latent frames, {lv['tokens']} tokens")
    print(f"  longvk : chunk {lv['chunk_s']:.3f} s, forward {lv['forward_s']:.3f} s (read {lv['read_pass_s']:.3f}, "
          f"write {lv['write_pass_s']:.3f}), {lv['frames_per_s']:.2f} frames/s, {lv['tflops']:.2f} TFLOP/s, "
          f"{pct(lv['fraction_fp32_peak'])} fp32 / {pct(lv['fraction_half_peak'])} half peak, "
          f"device memory {lv['device_memory_peak_bytes'] / 2**30:.2f} GiB")
    if not p:
        print("  PyTorch: no figures")
        return
    if (p["preset"], p["depth"], p["frames"], p["tokens"]) != (lv["preset"], lv["depth"], lv["frames"], lv["tokens"]):
        print(f"  PyTorch ran another shape ({p['preset']}, depth {p['depth']}, {p['frames']} frames, {p['tokens']} tokens): no ratio")
        return
    mem = p.get("device_memory_peak_bytes")
    print(f"  PyTorch: chunk {p['chunk_s']:.3f} s, forward {p['forward_s']:.3f} s (read {p['read_pass_s']:.3f}, "
          f"write {p['write_pass_s']:.3f}), {p['frames_per_s']:.2f} frames/s, {p['tflops']:.2f} TFLOP/s ({p['dtype']} "
          f"eager{'' if mem is None else f', memory {mem / 2**30:.2f} GiB'})")
    print(f"  longvk / PyTorch: {p['chunk_s'] / lv['chunk_s']:.3f} (goal >= 1)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir")
    ap.add_argument("--out")
    a = ap.parse_args()
    names = ["gemm_dit", "gemm_4096", "dit_480p", "dit_480p_f16", "dit_720p", "vae_480p", "vae_480p_f16", "peer_480p", "peer_720p",
             "sp_480p", "generate_480p"]
    got = {n: load(a.dir, n + ".json") for n in names}
    peer_gemm = got["peer_480p"]
    gemm_table(got["gemm_dit"], peer_gemm)
    gemm_table(got["gemm_4096"], peer_gemm)
    dit_pair(got["dit_480p"], got["peer_480p"], "480p")
    dit_pair(got["dit_480p_f16"], got["peer_480p"], "480p, --precision f16")
    dit_pair(got["dit_720p"], got["peer_720p"], "720p")
    for name in ["vae_480p", "vae_480p_f16"]:
        v = got[name]
        if v:
            print(f"VAE decode 480p on {v['device']}, precision {v.get('precision', 'f32')}: "
                  f"{v['ms_per_latent_frame']:.1f} ms a latent frame, {v['pixel_frames_per_s']:.2f} pixel frames/s, "
                  f"{v['gflops'] / 1e3:.2f} TFLOP/s, device memory {v['device_peak_bytes'] / 2**30:.2f} GiB")
    v = got["vae_480p_f16"] or got["vae_480p"]
    d = got["dit_480p_f16"] or got["dit_480p"]
    if d and v:  # DiT and VAE one after the other on one GPU, encoder not counted
        both = 1 / (1 / d["frames_per_s"] + 1 / v["pixel_frames_per_s"])
        print(f"DiT + VAE at 480p, one after the other: {both:.2f} frames/s (goal 27.5; the encoder not counted)")
    g = got["generate_480p"]
    if g:
        handed = "encoder" if g["codec"] != "none" else "frames discarded, the encoder not counted"
        print(f"generate at 480p on {g['device']}, depth {g['depth']}, precision {g.get('precision', 'f32')} "
              f"(DiT, VAE, {handed}; measured): "
              f"{g['block_s']:.2f} s a block, {g['frames_per_s']:.2f} frames/s end to end (goal 27.5)")
    sp = got["sp_480p"]
    if sp:  # issue 45: each rank measured alone, the network modelled
        print(f"sequence parallelism at 480p on {sp['device']}, depth {sp['depth']} (measured per rank; "
              f"speed-ups modelled): one rank {sp['one_rank_chunk_s']:.3f} s a chunk")
        for rc in sp["rank_counts"]:
            links = ", ".join(f"{m['link']} x{m['speedup']:.2f}" for m in rc["modelled"])
            print(f"  R = {rc['ranks']}: compute alone x{rc['speedup_compute_only']:.2f}, {links}")
            if "modelled_block" in rc:  # --vae: the chunk and its frames' decode
                links = ", ".join(f"{m['link']} x{m['speedup']:.2f}" for m in rc["modelled_block"])
                print(f"    the whole block (DiT chunk + VAE of width {sp['vae_dim']}): {links}")
    if a.out:
        with open(a.out, "w") as f:
            json.dump(got, f, indent=1)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
