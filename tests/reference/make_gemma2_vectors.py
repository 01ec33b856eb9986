"""Writes assets/vectors/gemma2-tiny-bf16w.safetensors: the tiny Gemma-2 of
assets/testdata/gemma2/ with every parameter rounded to bf16 (as torch_dtype=bfloat16 holds
them) and everything else in fp32, which is what longvk computes for a bf16 checkpoint
(lv_gemma2 with bf16 weights: fp32 activations). transformers has no such mode (its bf16 run
rounds the activations too), so the reference is assets/testdata/gemma2/spec_gemma2.py, which
reproduces transformers' fp32 outputs at NMSE 4e-13, run in fp32 on the rounded weights, with
the embedding normaliser sqrt(hidden) rounded to bf16 (transformers makes it a tensor of the
embedding's dtype).

    /usr/bin/python3 tests/reference/make_gemma2_vectors.py [--testdata DIR] [--out FILE]

Tensors (F32 [2, 11, 96], rows of pad tokens zero): bf16w_eager_last_hidden_state (soft-cap
50), bf16w_sdpa_last_hidden_state (no soft-cap). Runs a self-check first (spec_gemma2 in fp32
against transformers' eager fp32 output, NMSE < 1e-10). Deterministic.
"""
import argparse
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import st_io  # noqa: E402


class Bf16Normaliser:
    """spec_gemma2.Num in fp32, except that a scalar (only the embedding normaliser is one)
    is rounded to bf16."""

    def __init__(self, spec):
        self.spec = spec
        self.num_class = spec.Num

    def __call__(self, mode):
        spec = self.spec
        num = self.num_class(mode)
        plain = num.r

        def r(x):
            if np.ndim(x) == 0:
                return spec.bf16(np.float32(x))
            return plain(x)

        num.r = r
        return num


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--testdata", default=os.path.join(ROOT, "assets", "testdata", "gemma2"))
    ap.add_argument("--out", default=os.path.join(ROOT, "assets", "vectors", "gemma2-tiny-bf16w.safetensors"))
    args = ap.parse_args()
    sys.path.insert(0, args.testdata)
    import spec_gemma2 as spec

    W, meta = spec.load_safetensors(os.path.join(args.testdata, "tiny.weights.safetensors"))
    V, _ = spec.load_safetensors(os.path.join(args.testdata, "tiny.vectors.safetensors"))
    cfg = json.loads(meta["config"])
    ids, mask = V["input_ids"], V["attention_mask"].astype(bool)
    B, T = ids.shape
    H = cfg["hidden_size"]

    # self-check: the reference in fp32 is transformers' fp32
    for b in range(B):
        n = int(mask[b].sum())
        out, _ = spec.encode(W, cfg, ids[b, :n], softcap=True, mode="f32")
        e = spec.nmse(out, V["eager_f32_last_hidden_state"][b, :n])
        print(f"self-check row {b}: spec_gemma2 fp32 vs transformers eager fp32: NMSE {e:.3e}")
        if not e < 1e-10:
            sys.exit("self-check failed")

    Wb = {k: spec.bf16(v) for k, v in W.items()}
    spec.Num = Bf16Normaliser(spec)  # encode() builds its Num(mode) through this
    tensors = {}
    for name, softcap in (("bf16w_eager_last_hidden_state", True), ("bf16w_sdpa_last_hidden_state", False)):
        out = np.zeros((B, T, H), np.float32)
        for b in range(B):
            n = int(mask[b].sum())
            o, _ = spec.encode(Wb, cfg, ids[b, :n], softcap=softcap, mode="f32")
            out[b, :n] = o
            if softcap:
                for ref in ("eager_bf16_last_hidden_state", "eager_f32_last_hidden_state"):
                    print(f"{name} row {b} vs transformers {ref}: NMSE {spec.nmse(o, V[ref][b, :n]):.3e}")
        tensors[name] = out
    st_io.save(args.out, tensors, {
        "what": "tiny Gemma-2 (assets/testdata/gemma2) with bf16-rounded parameters, fp32 compute, "
                "embedding normaliser rounded to bf16; rows of pad tokens are zero",
        "made_by": "tests/reference/make_gemma2_vectors.py (spec_gemma2.encode, mode f32)",
    })
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
