"""Independent NumPy reference of the Gemma-2 text encoder (Gemma2Model.last_hidden_state),
written from pipelines/gemma2/README.md (../../../pipelines/gemma2/README.md from here), not from Hugging Face code.

    python3 spec_gemma2.py [DIR]      # DIR holds tiny.weights.safetensors + tiny.vectors.safetensors
                                      # (default: the directory of this file)

Needs only numpy. Prints NMSE against the stored Hugging Face outputs, valid (attention_mask == 1) rows only.

Model, per the note (section 2), for token ids t[0..n) at positions 0..n-1:
    h = E[t] * sqrt(H)                                  (the factor is rounded to the compute dtype first)
    for layer l:  (sliding-window layer iff l is even)
        x = rms(h, input_layernorm);  q = x Wq^T, k = x Wk^T, v = x Wv^T   (heads of head_dim)
        q, k = rope(q), rope(k)       rotate-half pairs (j, j + d/2), inv_freq_j = theta^(-2j/d)
        s = (q . k) * query_pre_attn_scalar^-0.5 ;  s = c * tanh(s / c)  if soft-cap c is on
        key j is visible to query i iff  j <= i,  mask[j] == 1,  and (sliding layer)  i - j < W
        p = softmax(s) in fp32 ;  o = p v  (query head h reads kv head h // (heads / kv_heads))
        h = h + rms(o Wo^T, post_attention_layernorm)
        x = rms(h, pre_feedforward_layernorm)
        h = h + rms((gelu_tanh(x Wg^T) * (x Wu^T)) Wd^T, post_feedforward_layernorm)
    out = rms(h, norm)        with  rms(x, w) = x / sqrt(mean(x^2) + eps) * (1 + w)
"""
import json
import os
import struct
import sys

import numpy as np


# ---------------------------------------------------------------- safetensors (F32 / I64 / BF16)
def load_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        hdr = json.loads(f.read(n))
        data = f.read()
    meta = hdr.pop("__metadata__", {})
    out = {}
    for name, t in hdr.items():
        s, e = t["data_offsets"]
        raw = data[s:e]
        if t["dtype"] == "F32":
            a = np.frombuffer(raw, "<f4")
        elif t["dtype"] == "I64":
            a = np.frombuffer(raw, "<i8")
        elif t["dtype"] == "BF16":
            a = (np.frombuffer(raw, "<u2").astype(np.uint32) << 16).view(np.float32)
        else:
            raise TypeError(t["dtype"])
        out[name] = a.reshape(t["shape"]).copy()
    return out, meta


# ---------------------------------------------------------------- numerics
def bf16(x):
    """Round float32 values to bfloat16 (round to nearest even), returned as float32."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    u = x.view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return u.astype(np.uint32).view(np.float32)


class Num:
    """Compute dtype policy. 'f64'/'f32': plain. 'bf16': values stored in bf16 between ops, RMSNorm and softmax
    internally in fp32 (note section 2, 'bf16 reference details')."""

    def __init__(self, mode):
        self.mode = mode
        self.dt = np.float64 if mode == "f64" else np.float32

    def r(self, x):  # round a stored activation to the compute dtype
        x = np.asarray(x, dtype=self.dt)
        return bf16(x) if self.mode == "bf16" else x

    def linear(self, x, w):  # y = x W^T, accumulate wide, round once
        return self.r(np.asarray(x, np.float64) @ np.asarray(w, np.float64).T)


def rms_norm(num, x, w, eps):
    xf = np.asarray(x, np.float32 if num.mode != "f64" else np.float64)
    wf = np.asarray(w, xf.dtype)
    y = xf / np.sqrt(np.mean(xf * xf, axis=-1, keepdims=True) + eps) * (1.0 + wf)
    return num.r(y)


def gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(0.7978845608028654 * (x + 0.044715 * x ** 3)))


def rope_cos_sin(num, n, d, theta):
    inv = 1.0 / (theta ** (np.arange(0, d, 2, dtype=np.float64) / d))
    inv = inv.astype(np.float32) if num.mode != "f64" else inv
    ang = np.arange(n, dtype=inv.dtype)[:, None] * inv[None, :]          # [n, d/2]
    ang = np.concatenate([ang, ang], axis=-1)                            # [n, d]
    return num.r(np.cos(ang)), num.r(np.sin(ang))


def apply_rope(num, x, cos, sin):  # x [heads, n, d]
    half = x.shape[-1] // 2
    rot = np.concatenate([-x[..., half:], x[..., :half]], axis=-1)
    return num.r(num.r(x * cos) + num.r(rot * sin))


# ---------------------------------------------------------------- model
def encode(W, cfg, ids, valid=None, softcap=True, mode="f64"):
    """ids: int array [n]; valid: bool [n] (keys that may be attended; default all). Returns [n, H]."""
    num = Num(mode)
    n = len(ids)
    H, nh, nkv, d = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    eps, Wwin = cfg["rms_norm_eps"], cfg["sliding_window"]
    cap = cfg["attn_logit_softcapping"] if softcap else None
    if isinstance(softcap, float):
        cap = softcap
    scale = cfg["query_pre_attn_scalar"] ** -0.5
    valid = np.ones(n, bool) if valid is None else np.asarray(valid, bool)
    p = {k: num.r(v) for k, v in W.items()}           # weights in the compute dtype

    h = num.r(p["model.embed_tokens.weight"][ids] * num.r(np.sqrt(H)))
    hidden = [h]
    cos, sin = rope_cos_sin(num, n, d, cfg["rope_theta"])
    i_idx, j_idx = np.arange(n)[:, None], np.arange(n)[None, :]
    for l in range(cfg["num_hidden_layers"]):
        P = f"model.layers.{l}."
        sliding = (l % 2 == 0)
        x = rms_norm(num, h, p[P + "input_layernorm.weight"], eps)
        q = num.linear(x, p[P + "self_attn.q_proj.weight"]).reshape(n, nh, d).transpose(1, 0, 2)
        k = num.linear(x, p[P + "self_attn.k_proj.weight"]).reshape(n, nkv, d).transpose(1, 0, 2)
        v = num.linear(x, p[P + "self_attn.v_proj.weight"]).reshape(n, nkv, d).transpose(1, 0, 2)
        q, k = apply_rope(num, q, cos, sin), apply_rope(num, k, cos, sin)
        allowed = (j_idx <= i_idx) & valid[None, :]
        if sliding:
            allowed &= (i_idx - j_idx) < Wwin
        o = np.empty((nh, n, d), num.dt)
        for hh in range(nh):
            kv = hh // (nh // nkv)
            s = num.r(num.linear(q[hh], k[kv]) * scale)          # (q . k) then * scale
            if cap is not None:
                s = num.r(num.r(np.tanh(num.r(s / cap))) * cap)
            s = np.where(allowed, s.astype(np.float64), -np.inf)
            s = s - s.max(axis=-1, keepdims=True)
            e = np.exp(s)
            pr = num.r((e / e.sum(axis=-1, keepdims=True)).astype(np.float32 if mode != "f64" else np.float64))
            o[hh] = num.r(pr.astype(np.float64) @ v[kv].astype(np.float64))
        a = num.linear(o.transpose(1, 0, 2).reshape(n, nh * d), p[P + "self_attn.o_proj.weight"])
        h = num.r(h + rms_norm(num, a, p[P + "post_attention_layernorm.weight"], eps))
        x = rms_norm(num, h, p[P + "pre_feedforward_layernorm.weight"], eps)
        g = num.r(gelu_tanh(num.linear(x, p[P + "mlp.gate_proj.weight"]).astype(np.float64)))
        u = num.linear(x, p[P + "mlp.up_proj.weight"])
        m = num.linear(num.r(g * u), p[P + "mlp.down_proj.weight"])
        h = num.r(h + rms_norm(num, m, p[P + "post_feedforward_layernorm.weight"], eps))
        hidden.append(h)
    out = rms_norm(num, h, p["model.norm.weight"], eps)
    return out, hidden


def nmse(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(((a - b) ** 2).sum() / (b ** 2).sum())


def main(argv):
    d = argv[1] if len(argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    W, wmeta = load_safetensors(os.path.join(d, "tiny.weights.safetensors"))
    V, _ = load_safetensors(os.path.join(d, "tiny.vectors.safetensors"))
    cfg = json.loads(wmeta["config"])
    ids, mask = V["input_ids"], V["attention_mask"].astype(bool)

    def run_all(**kw):
        outs, hids = [], []
        for b in range(ids.shape[0]):
            nv = int(mask[b].sum())                  # right padding: run the valid prefix only
            o, hs = encode(W, cfg, ids[b, :nv], **kw)
            outs.append(o); hids.append(hs)
        return outs, hids

    def cmp(name, outs, ref, tol):
        e = nmse(np.concatenate(outs), np.concatenate([ref[b, :len(o)] for b, o in enumerate(outs)]))
        print(f"{name:48s} NMSE {e:.3e}  {'OK' if e < tol else 'FAIL'}")
        return e < tol

    ok = True
    for mode, tol in (("f64", 1e-10), ("f32", 1e-10)):
        outs, hids = run_all(softcap=True, mode=mode)
        ok &= cmp(f"[{mode}] eager_f32_last_hidden_state (soft-cap)", outs, V["eager_f32_last_hidden_state"], tol)
        for i in range(cfg["num_hidden_layers"]):
            ok &= cmp(f"[{mode}] eager_f32_hidden_states_{i}", [hs[i] for hs in hids], V[f"eager_f32_hidden_states_{i}"], tol)
        ok &= cmp(f"[{mode}] eager_f32_final_prenorm", [hs[-1] for hs in hids], V["eager_f32_final_prenorm"], tol)
        outs, _ = run_all(softcap=False, mode=mode)
        ok &= cmp(f"[{mode}] sdpa_f32_last_hidden_state (no soft-cap)", outs, V["sdpa_f32_last_hidden_state"], tol)
        outs, _ = run_all(softcap=5.0, mode=mode)
        ok &= cmp(f"[{mode}] eager_softcap5_f32_last_hidden_state", outs, V["eager_softcap5_f32_last_hidden_state"], tol)
    outs, _ = run_all(softcap=True, mode="bf16")
    ok &= cmp("[bf16 emulation] eager_bf16_last_hidden_state", outs, V["eager_bf16_last_hidden_state"], 1e-4)
    print("ALL OK" if ok else "MISMATCH")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
