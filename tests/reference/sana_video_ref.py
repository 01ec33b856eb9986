"""Independent PyTorch reference of the SANA-Video DiT and LongSANA block-wise generation.

Written from pipelines/sana/README.md (and the original code's semantics), as plain
functions over a dict of weights under the ORIGINAL checkpoint names. Everything runs in
a chosen dtype (float64 by default; float32 to see fp32 rounding).

Layouts
- latents x: [C, F, H, W]; text y: [L, caption_channels]; mask: [L] (1 valid, 0 padded).
- tokens: [T, C], T = F * hp * wp, frame-major, then row, then column (hp = H / 2, ...).
- linear-attention state of one layer: S [heads, D, D] (row = value dim, column = key
  dim) = sum_j v_j rope_j(relu k_j)^T; z [heads, D] = sum_j relu k_j (unrotated).
- temporal-conv cache of one layer: conv_last [P, C] (P = hp * wp tokens of the last
  latent frame of the Mix-FFN features just before the temporal conv), token-major.
- timesteps: one per latent frame ([F]); a scalar is broadcast. They are truncated to
  integers as the original model does (`timestep.long()`).
"""
import json
import math

import numpy as np
import torch
import torch.nn.functional as Fn

from training.st_io import load as st_load  # assets/default-model/training (PYTHONPATH: README.md)

# ----------------------------------------------------------------------------- config


class Config:
    def __init__(self, d):
        self.hidden = int(d["hidden_size"])
        self.depth = int(d["depth"])
        self.heads = int(d["num_heads"])
        self.head_dim = int(d.get("head_dim", self.hidden // self.heads))
        self.patch = tuple(int(p) for p in d.get("patch_size", (1, 2, 2)))
        self.in_ch = int(d["in_channels"])
        self.out_ch = int(d.get("out_channels", self.in_ch))
        self.cap_ch = int(d["caption_channels"])
        self.mlp_ratio = float(d.get("mlp_ratio", 3.0))
        self.ffn_hidden = int(self.hidden * self.mlp_ratio)
        # RoPE split per head: h = w = 2 * (D // 6), t = the rest (SANA-Video: 40/36/36).
        hd = self.head_dim
        self.rope_h = self.rope_w = 2 * (hd // 6)
        self.rope_t = hd - self.rope_h - self.rope_w
        self.rope_theta = 10000.0
        self.lin_eps = 1e-8      # linear-attention denominator
        self.ln_eps = 1e-6       # block / final LayerNorm (no affine)
        self.attn_qk_eps = 1e-5  # RMSNorm of q, k in the linear attention
        self.cross_qk_eps = 1e-6  # RMSNorm of q, k in the cross-attention
        self.ynorm_eps = 1e-5    # caption RMSNorm
        assert self.heads * self.head_dim == self.hidden
        assert self.patch[0] == 1

    def as_dict(self):
        return {
            "hidden_size": self.hidden, "depth": self.depth, "num_heads": self.heads,
            "head_dim": self.head_dim, "patch_size": list(self.patch), "in_channels": self.in_ch,
            "out_channels": self.out_ch, "caption_channels": self.cap_ch, "mlp_ratio": self.mlp_ratio,
        }


def load_model(path, dtype=torch.float64):
    """Weights by their original names (converted to dtype) and the config from __metadata__."""
    arrays, meta = st_load(path)
    cfg = Config(json.loads(meta["config"]))
    W = {k: torch.from_numpy(v).to(dtype) for k, v in arrays.items()}
    return cfg, W


# ----------------------------------------------------------------------------- basic ops


def rms_norm(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def layer_norm(x, eps):
    mu = x.mean(-1, keepdim=True)
    var = (x - mu).pow(2).mean(-1, keepdim=True)
    return (x - mu) * torch.rsqrt(var + eps)


def linear(x, w, b=None):
    y = x @ w.t()
    return y if b is None else y + b


def gelu_tanh(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x.pow(3))))


# ----------------------------------------------------------------------------- embedders


def timestep_sinusoid(t, dtype):
    """256-dim sinusoid, cos first. The original forms the arguments t * f_i in float32
    (f_i = exp(-ln(10000) i / 128) in float32 too); that rounding is kept here, the
    cos/sin are then evaluated in dtype."""
    t32 = torch.as_tensor(t, dtype=torch.float32).reshape(-1)
    i = torch.arange(128, dtype=torch.float32)
    freqs = torch.exp(-math.log(10000.0) * i / 128)
    args = (t32[:, None] * freqs[None]).to(dtype)
    return torch.cat([torch.cos(args), torch.sin(args)], dim=-1)


def t_embed(W, t, dtype):
    """t: [F] integer-valued timesteps -> sinusoid [F, 256], temb [F, C], t0 [F, 6C]."""
    s = timestep_sinusoid(t, dtype)
    h = Fn.silu(linear(s, W["t_embedder.mlp.0.weight"], W["t_embedder.mlp.0.bias"]))
    temb = linear(h, W["t_embedder.mlp.2.weight"], W["t_embedder.mlp.2.bias"])
    t0 = linear(Fn.silu(temb), W["t_block.1.weight"], W["t_block.1.bias"])
    return s, temb, t0


def caption_embed(W, cfg, y):
    h = gelu_tanh(linear(y, W["y_embedder.y_proj.fc1.weight"], W["y_embedder.y_proj.fc1.bias"]))
    h = linear(h, W["y_embedder.y_proj.fc2.weight"], W["y_embedder.y_proj.fc2.bias"])
    return rms_norm(h, W["attention_y_norm.weight"], cfg.ynorm_eps)


def patch_embed(W, cfg, x):
    """x [Cin, F, H, W] -> tokens [F*hp*wp, C] (Conv3d with kernel = stride = patch)."""
    Cin, F, H, Wd = x.shape
    _, ph, pw = cfg.patch
    hp, wp = H // ph, Wd // pw
    # patches[f, i, j, c, dy, dx] = x[c, f, i*ph + dy, j*pw + dx]
    p = x.reshape(Cin, F, hp, ph, wp, pw).permute(1, 2, 4, 0, 3, 5).reshape(F * hp * wp, Cin * ph * pw)
    w = W["x_embedder.proj.weight"].reshape(cfg.hidden, Cin * ph * pw)
    return linear(p, w, W["x_embedder.proj.bias"])


def unpatchify(cfg, tok, F, hp, wp):
    """[T, pf*ph*pw*Cout] -> [Cout, F, H, W]; output feature ((o*ph + p)*pw + q)*Cout + c."""
    pf, ph, pw = cfg.patch
    c = cfg.out_ch
    t = tok.reshape(F, hp, wp, pf, ph, pw, c)
    t = t.permute(6, 0, 3, 1, 4, 2, 5)  # c, f, o, h, p, w, q
    return t.reshape(c, F * pf, hp * ph, wp * pw)


# ----------------------------------------------------------------------------- RoPE


def rope_angles(cfg, F, hp, wp, frame_offset, dtype):
    """Angles [T, D/2] for the tokens of an F x hp x wp grid; time positions start at
    frame_offset (the absolute latent-frame index in long-video mode). Computed in float64
    (as the original does) and cast to dtype."""
    def freqs(d):
        j = torch.arange(0, d, 2, dtype=torch.float64)
        return 1.0 / (cfg.rope_theta ** (j / d))

    ft, fh, fw = freqs(cfg.rope_t), freqs(cfg.rope_h), freqs(cfg.rope_w)
    f_pos = torch.arange(frame_offset, frame_offset + F, dtype=torch.float64)
    h_pos = torch.arange(hp, dtype=torch.float64)
    w_pos = torch.arange(wp, dtype=torch.float64)
    at = (f_pos[:, None] * ft[None])[:, None, None, :].expand(F, hp, wp, -1)
    ah = (h_pos[:, None] * fh[None])[None, :, None, :].expand(F, hp, wp, -1)
    aw = (w_pos[:, None] * fw[None])[None, None, :, :].expand(F, hp, wp, -1)
    return torch.cat([at, ah, aw], dim=-1).reshape(F * hp * wp, -1)


def apply_rope(x, angles):
    """x [..., T, D] with adjacent pairs (2i, 2i+1) rotated by angles [T, D/2]; the rotation
    is evaluated in float64 and the result cast back to x's dtype (as the original)."""
    xd = x.to(torch.float64)
    c, s = torch.cos(angles), torch.sin(angles)
    a, b = xd[..., 0::2], xd[..., 1::2]
    out = torch.stack([a * c - b * s, a * s + b * c], dim=-1).flatten(-2)
    return out.to(x.dtype)


# ----------------------------------------------------------------------------- block parts


def modulation(table, t_rows, frame_of_token):
    """table [k, C] + t_rows [F, k*C] -> per-token [T, k, C] (row f of t for frame f's tokens)."""
    k, C = table.shape
    m = table[None] + t_rows.reshape(-1, k, C)  # [F, k, C]
    return m[frame_of_token]


def linear_attention(W, pre, cfg, x, angles, chunk_tokens, prev_S, prev_z):
    """LiteLAReLURope with a block-causal chunk structure.

    x: [T, C] (already LN + modulated). chunk_tokens: token counts per chunk (sum T); chunk
    c's queries read prev + contributions of chunks <= c. Returns (out [T, C] after proj,
    list of per-chunk contributions (S_c [H, D, D], z_c [H, D]))."""
    T, C = x.shape
    H, D = cfg.heads, cfg.head_dim
    qkv = linear(x, W[pre + "attn.qkv.weight"])
    q, k, v = qkv[:, :C], qkv[:, C : 2 * C], qkv[:, 2 * C :]
    q = rms_norm(q, W[pre + "attn.q_norm.weight"], cfg.attn_qk_eps)
    k = rms_norm(k, W[pre + "attn.k_norm.weight"], cfg.attn_qk_eps)
    # heads: channel c -> head c // D;  [H, T, D]
    q = torch.relu(q.reshape(T, H, D).transpose(0, 1))
    k = torch.relu(k.reshape(T, H, D).transpose(0, 1))
    v = v.reshape(T, H, D).transpose(0, 1)
    qr, kr = apply_rope(q, angles), apply_rope(k, angles)

    if DIRECT_BLOCK_CAUSAL and prev_S is None:
        return linear(_direct_block_causal(q, k, v, qr, kr, chunk_tokens, cfg.lin_eps), W[pre + "attn.proj.weight"],
                      W[pre + "attn.proj.bias"]), None

    S = prev_S.clone() if prev_S is not None else torch.zeros(H, D, D, dtype=x.dtype)
    z = prev_z.clone() if prev_z is not None else torch.zeros(H, D, dtype=x.dtype)
    outs, contribs = [], []
    start = 0
    for n in chunk_tokens:
        sl = slice(start, start + n)
        Sc = v[:, sl].transpose(1, 2) @ kr[:, sl]  # [H, Dv, Dk] = sum_j v_j kr_j^T
        zc = k[:, sl].sum(1)                       # [H, Dk]
        contribs.append((Sc, zc))
        S = S + Sc
        z = z + zc
        num = qr[:, sl] @ S.transpose(1, 2)        # [H, n, Dv]: o_i = S qr_i
        den = (q[:, sl] @ z[:, :, None]) + cfg.lin_eps  # [H, n, 1]
        outs.append(num / den)
        start += n
    o = torch.cat(outs, dim=1).transpose(0, 1).reshape(T, C)
    return linear(o, W[pre + "attn.proj.weight"], W[pre + "attn.proj.bias"]), contribs


# Cross-check switch (make_vectors.py): evaluate the block-causal attention and temporal
# conv of a one-shot pass by independent formulas (masked double sum; full-length conv
# minus the terms that would cross a chunk boundary) instead of the carried-state loop.
DIRECT_BLOCK_CAUSAL = False


def _direct_block_causal(q, k, v, qr, kr, chunk_tokens, eps):
    """o_i = sum_{j: blk(j)<=blk(i)} v_j (kr_j . qr_i) / (sum_{same j} k_j . q_i + eps); [T, C]."""
    H, T, D = q.shape
    blk = torch.cat([torch.full((n,), i) for i, n in enumerate(chunk_tokens)])
    w = (blk[None, :] <= blk[:, None]).to(q.dtype)  # [i, j]
    num = ((qr @ kr.transpose(1, 2)) * w) @ v
    den = ((q @ k.transpose(1, 2)) * w).sum(-1, keepdim=True) + eps
    return (num / den).transpose(0, 1).reshape(T, H * D)


def _direct_temporal_conv(u, wt, chunk_frames):
    """u [F, P, C]: zero-padded conv over all F frames, minus each non-final chunk's last
    frame's look at the next chunk's first frame (that term is zero inside LongSANA)."""
    F = u.shape[0]
    zero = torch.zeros_like(u[:1])
    padded = torch.cat([zero, u, zero], dim=0)
    conv = sum(padded[kk : kk + F] @ wt[:, :, kk].t() for kk in range(3))
    f = 0
    for n in chunk_frames[:-1]:
        f += n
        conv[f - 1] = conv[f - 1] - u[f] @ wt[:, :, 2].t()
    return u + conv


def cross_attention(W, pre, cfg, x, y_emb, mask):
    T, C = x.shape
    L = y_emb.shape[0]
    H, D = cfg.heads, cfg.head_dim
    q = linear(x, W[pre + "cross_attn.q_linear.weight"], W[pre + "cross_attn.q_linear.bias"])
    kv = linear(y_emb, W[pre + "cross_attn.kv_linear.weight"], W[pre + "cross_attn.kv_linear.bias"])
    k, v = kv[:, :C], kv[:, C:]
    q = rms_norm(q, W[pre + "cross_attn.q_norm.weight"], cfg.cross_qk_eps)
    k = rms_norm(k, W[pre + "cross_attn.k_norm.weight"], cfg.cross_qk_eps)
    q = q.reshape(T, H, D).transpose(0, 1)
    k = k.reshape(L, H, D).transpose(0, 1)
    v = v.reshape(L, H, D).transpose(0, 1)
    s = (q @ k.transpose(1, 2)) / math.sqrt(D)  # [H, T, L]
    valid = mask > 0.5
    if bool(valid.any()):
        s = s.masked_fill(~valid[None, None, :], float("-inf"))
        p = torch.softmax(s, dim=-1)
    else:  # every text token masked: no contribution
        p = torch.zeros_like(s)
    o = (p @ v).transpose(0, 1).reshape(T, C)
    return linear(o, W[pre + "cross_attn.proj.weight"], W[pre + "cross_attn.proj.bias"])


def mix_ffn(W, pre, cfg, x, F, hp, wp, chunk_frames, prev_last):
    """GLUMBConvTemp with block-causal temporal conv.

    x: [T, C]. Spatial part per frame, then u + TConv(u) where chunk c's left context is the
    last frame of chunk c-1 (or prev_last [P, C] for the first chunk, zeros when None) and
    the right context of each chunk's last frame is zero. Returns (out [T, C], u's last
    frame of every chunk [P, C])."""
    T, C = x.shape
    P = hp * wp
    Fh = cfg.ffn_hidden
    h = Fn.silu(linear(x, W[pre + "mlp.inverted_conv.conv.weight"].reshape(2 * Fh, C),
                       W[pre + "mlp.inverted_conv.conv.bias"]))
    img = h.reshape(F, hp, wp, 2 * Fh).permute(0, 3, 1, 2)  # [F, 2Fh, hp, wp]
    img = Fn.conv2d(img, W[pre + "mlp.depth_conv.conv.weight"], W[pre + "mlp.depth_conv.conv.bias"],
                    padding=1, groups=2 * Fh)
    h = img.permute(0, 2, 3, 1).reshape(T, 2 * Fh)
    a, g = h[:, :Fh], h[:, Fh:]
    u = linear(a * Fn.silu(g), W[pre + "mlp.point_conv.conv.weight"].reshape(C, Fh))
    u = u.reshape(F, P, C)

    wt = W[pre + "mlp.t_conv.weight"][:, :, :, 0]  # [Cout, Cin, 3]
    if DIRECT_BLOCK_CAUSAL and prev_last is None:
        return _direct_temporal_conv(u, wt, chunk_frames).reshape(T, C), None
    out = torch.empty_like(u)
    lasts = []
    f0 = 0
    left = prev_last
    for n in chunk_frames:
        seg = u[f0 : f0 + n]
        zero = torch.zeros(1, P, C, dtype=u.dtype)
        lctx = zero if left is None else left.reshape(1, P, C)
        padded = torch.cat([lctx, seg, zero], dim=0)  # [n + 2, P, C]
        conv = sum(padded[kk : kk + n] @ wt[:, :, kk].t() for kk in range(3))
        out[f0 : f0 + n] = seg + conv
        left = seg[-1]
        lasts.append(seg[-1].clone())
        f0 += n
    return out.reshape(T, C), lasts


# ----------------------------------------------------------------------------- the DiT


def _as_frame_timesteps(t, F):
    tt = torch.as_tensor(t, dtype=torch.float64).reshape(-1)
    if tt.numel() == 1:
        tt = tt.expand(F)
    assert tt.numel() == F, "one timestep per latent frame"
    return torch.trunc(tt)  # the model receives int(t)


def forward(W, cfg, x, t, y, mask=None, *, frame_offset=0, chunk_frames=None, state=None, taps=None):
    """One DiT forward pass.

    x [Cin, F, H, W]; t scalar or [F]; y [L, cap]; mask [L] or None (all valid).
    chunk_frames: frames per block for block-causal attention/conv inside this pass (None:
    one block = bidirectional). state: per layer dict {S, z, conv_last} read (not modified)
    as the carried context of earlier chunks, or None. taps: dict filled with
    intermediates (token-major [T, C] unless noted).

    Returns (out [Cout, F, H, W], contributions), contributions[layer] =
    {"chunks": [(S_c, z_c), ...], "conv_last": [last frame [P, C] per chunk]}."""
    dtype = W["x_embedder.proj.bias"].dtype
    x = x.to(dtype)
    y = y.to(dtype)
    Cin, F, H, Wd = x.shape
    _, ph, pw = cfg.patch
    hp, wp = H // ph, Wd // pw
    P = hp * wp
    T = F * P
    if mask is None:
        mask = torch.ones(y.shape[0], dtype=dtype)
    mask = mask.to(dtype)
    if chunk_frames is None:
        chunk_frames = [F]
    assert sum(chunk_frames) == F
    chunk_tokens = [n * P for n in chunk_frames]
    frame_of_token = torch.arange(F).repeat_interleave(P)
    tap = taps if taps is not None else {}

    tt = _as_frame_timesteps(t, F)
    s, temb, t0 = t_embed(W, tt, dtype)
    tok = patch_embed(W, cfg, x)
    y_emb = caption_embed(W, cfg, y)
    angles = rope_angles(cfg, F, hp, wp, frame_offset, torch.float64)
    tap["t_sinusoid"], tap["temb"], tap["t0"] = s, temb, t0
    tap["patch_embed"], tap["caption"] = tok, y_emb

    contributions = []
    for b in range(cfg.depth):
        pre = f"blocks.{b}."
        st = state[b] if state is not None else None
        mod = modulation(W[pre + "scale_shift_table"], t0, frame_of_token)  # [T, 6, C]
        sh1, sc1, g1, sh2, sc2, g2 = (mod[:, i] for i in range(6))

        a_in = layer_norm(tok, cfg.ln_eps) * (1 + sc1) + sh1
        a_out, contribs = linear_attention(W, pre, cfg, a_in, angles, chunk_tokens,
                                           st["S"] if st else None, st["z"] if st else None)
        tok = tok + g1 * a_out
        tap[f"block{b}_attn_out"] = a_out
        tap[f"block{b}_after_attn"] = tok

        tok = tok + cross_attention(W, pre, cfg, tok, y_emb, mask)
        tap[f"block{b}_after_cross"] = tok

        f_in = layer_norm(tok, cfg.ln_eps) * (1 + sc2) + sh2
        f_out, lasts = mix_ffn(W, pre, cfg, f_in, F, hp, wp, chunk_frames, st["conv_last"] if st else None)
        tok = tok + g2 * f_out
        tap[f"block{b}_ffn_out"] = f_out
        tap[f"block{b}_after_ffn"] = tok
        contributions.append({"chunks": contribs, "conv_last": lasts})

    # final layer: shift, scale = table(2, C) + temb (temb broadcast to both rows, not t0)
    fmod = (W["final_layer.scale_shift_table"][None] + temb[:, None, :])[frame_of_token]
    ftok = layer_norm(tok, cfg.ln_eps) * (1 + fmod[:, 1]) + fmod[:, 0]
    ftok = linear(ftok, W["final_layer.linear.weight"], W["final_layer.linear.bias"])
    tap["final_tokens"] = ftok
    out = unpatchify(cfg, ftok, F, hp, wp)
    tap["out"] = out
    return out, contributions


# ----------------------------------------------------------------------------- LongSANA


class CarriedState:
    """Per-layer state carried from chunk to chunk: the sum of the committed chunks'
    (S, z) contributions (all of them, or the last `cached_blocks` when > 0, kept as a
    ring and re-summed exactly) and the last frame of Mix-FFN features of the last
    committed chunk."""

    def __init__(self, cfg, cached_blocks=0):
        self.cfg = cfg
        self.cached_blocks = cached_blocks
        self.history = [[] for _ in range(cfg.depth)]  # per layer: list of (S_c, z_c)
        self.conv_last = [None] * cfg.depth
        self.chunks = 0

    def layer(self, b):
        hist = self.history[b]
        if self.cached_blocks > 0:
            hist = hist[-self.cached_blocks :]
        if not hist:
            return {"S": None, "z": None, "conv_last": self.conv_last[b]}
        S = sum(h[0] for h in hist)
        z = sum(h[1] for h in hist)
        return {"S": S, "z": z, "conv_last": self.conv_last[b]}

    def as_list(self):
        return [self.layer(b) for b in range(self.cfg.depth)] if self.chunks > 0 else None

    def commit(self, contributions):
        """Adds one pass's contributions (a single chunk) to the state."""
        for b, c in enumerate(contributions):
            assert len(c["chunks"]) == 1
            self.history[b].append(c["chunks"][0])
            self.conv_last[b] = c["conv_last"][-1]
        self.chunks += 1


def chunk_pass(W, cfg, state, x_chunk, t, y, mask, frame_offset, commit, taps=None):
    """One LongSANA pass over one chunk: reads the carried state (+ the chunk's own
    contribution), and with commit=True adds the chunk's contribution to the state."""
    out, contribs = forward(W, cfg, x_chunk, t, y, mask, frame_offset=frame_offset,
                            state=state.as_list(), taps=taps)
    if commit:
        state.commit(contribs)
    return out


def chunk_boundaries(total_frames, chunk_frames):
    """LongSANA's segments: chunks of chunk_frames, the first takes the remainder."""
    rem = total_frames % chunk_frames
    n = total_frames // chunk_frames
    idx = [0]
    for i in range(n):
        idx.append(idx[-1] + chunk_frames + (rem if i == 0 else 0))
    if idx[-1] < total_frames:
        idx.append(total_frames)
    return idx


def longsana_sample(W, cfg, noise, y, mask, chunk_frames, steps=(1000, 960, 889, 727), renoise=None,
                    cached_blocks=0, trace=None):
    """Block-wise LongSANA sampling.

    noise [C, F, H, W] is the starting latent; renoise [len(steps)-1, C, F, H, W] the noise
    drawn before step k+1 (the original draws it with randn_like). For each chunk: at each
    step t, v = model(x, int(t)); x0 = x - (t/1000) v; next x = (1 - s) x0 + s noise_k with
    s = t_next / 1000; the last step's x0 is the chunk's output; then a t = 0 write pass
    over that output commits the chunk to the carried state."""
    dtype = W["x_embedder.proj.bias"].dtype
    noise = noise.to(dtype)
    C, F, H, Wd = noise.shape
    bounds = chunk_boundaries(F, chunk_frames)
    state = CarriedState(cfg, cached_blocks)
    out = torch.zeros(C, F, H, Wd, dtype=dtype)
    for c in range(len(bounds) - 1):
        f0, f1 = bounds[c], bounds[c + 1]
        x = noise[:, f0:f1]
        for k, t in enumerate(steps):
            v = chunk_pass(W, cfg, state, x, t, y, mask, f0, commit=False)
            x0 = x - (t / 1000.0) * v
            if trace is not None:
                trace[f"chunk{c}_step{k}_x"] = x
                trace[f"chunk{c}_step{k}_v"] = v
            if k + 1 < len(steps):
                s = steps[k + 1] / 1000.0
                x = (1.0 - s) * x0 + s * renoise[k][:, f0:f1].to(dtype)
            else:
                out[:, f0:f1] = x0
        chunk_pass(W, cfg, state, out[:, f0:f1], 0, y, mask, f0, commit=True)
    return out, state


# ----------------------------------------------------------------------------- single-clip sampling
#
# The base model samples one clip with classifier-free guidance. The original offers two
# samplers, each with its OWN time grid (both float32 tensors in the original; the values
# below are those float32 numbers, returned as float64):
# - "dpmpp2m" (`flow_dpm-solver`, the default `vis_sampler`): multistep DPM-Solver++ of order 2
#   with skip_type "time_uniform_flow": b = linspace(1, 0.001, N + 1) (float32 torch),
#   s = 1 - b, sigma = shift s / (1 + (shift - 1) s), reversed. N model calls.
# - "euler" (`flow_euler`): diffusers' FlowMatchEulerDiscreteScheduler(shift): N sigmas from 1
#   down to shift applied TWICE to 0.001, then 0. N model calls.
# The DiT receives float32(sigma) * 1000 in float32, which it truncates (`timestep.long()`).


def torch_linspace_f32(start, end, n):
    """float32 values of torch.linspace(start, end, n) as the CPU kernel of torch 2.x forms
    them: step = (end - start) / (n - 1) in float32; the first n // 2 points are
    start + step * i, the others end - step * (n - 1 - i) (each product and sum rounded)."""
    f = np.float32
    start, end = f(start), f(end)
    if n == 1:
        return np.array([start], dtype=np.float32)
    step = f(f(end - start) / f(n - 1))
    out = np.empty(n, dtype=np.float32)
    for i in range(n):
        out[i] = f(start + f(step * f(i))) if i < n // 2 else f(end - f(step * f(n - 1 - i)))
    return out


def _shift_f32(s, shift):
    """shift s / (1 + (shift - 1) s), every operation rounded to float32 (torch float32 ops)."""
    f = np.float32
    s = np.asarray(s, dtype=np.float32)
    return (f(shift) * s) / (f(1.0) + f(shift - 1.0) * s)


def dpm_flow_sigmas(steps, shift):
    """[steps + 1] float64 holding the original's float32 DPM-Solver grid: sigmas[0] the
    noisiest (< 1), sigmas[steps] = 0."""
    s = np.float32(1.0) - torch_linspace_f32(1.0, 0.001, steps + 1)
    return torch.from_numpy(_shift_f32(s, shift)[::-1].astype(np.float64).copy())


def euler_flow_sigmas(steps, shift):
    """[steps + 1] float64 holding diffusers' FlowMatchEulerDiscreteScheduler(shift) grid after
    set_timesteps(steps): its training table ends at shifted(0.001) (float32), so
    sigma_min = shifted(0.001); the inference grid is linspace(1000, 1000 sigma_min, steps)
    / 1000 in float64, shifted again (float64), rounded to float32, then a final 0."""
    sigma_min = float(_shift_f32(np.float32(1.0) / np.float32(1000.0), shift))  # .item() of a float32
    t = np.linspace(1.0 * 1000.0, sigma_min * 1000.0, steps)  # sigma_max = shifted(1) = 1
    s = t / 1000.0
    s = (shift * s / (1 + (shift - 1) * s)).astype(np.float32)
    return torch.from_numpy(np.concatenate([s, np.zeros(1, np.float32)]).astype(np.float64))


def model_timestep(sigma):
    """The integer timestep the DiT sees for a grid value: float32(sigma) * 1000 in float32,
    truncated."""
    return int(np.float32(np.float32(sigma) * np.float32(1000.0)))


def guided_velocity(W, cfg, x, t, cond, uncond, guidance):
    """v = v_u + g (v_c - v_u); cond / uncond = (y, mask). guidance == 1: v_c only (one pass)."""
    v_c = forward(W, cfg, x, t, cond[0], cond[1])[0]
    if guidance == 1.0:
        return v_c
    v_u = forward(W, cfg, x, t, uncond[0], uncond[1])[0]
    return v_u + guidance * (v_c - v_u)


def sample_clip(W, cfg, noise, cond, uncond, solver, steps, shift, guidance, trace=None):
    """Single-clip flow-matching sampling from noise [C, F, H, W] (bidirectional DiT, the same
    timestep for every frame). Returns (latents, sigmas [steps + 1], timesteps [steps]).

    euler:   x <- x + (sigma_{i+1} - sigma_i) v_i on euler_flow_sigmas.
    dpmpp2m: data prediction x0_i = x_i - sigma_i v_i, alpha = 1 - sigma,
             lambda = log(alpha / sigma), h_i = lambda_{i+1} - lambda_i;
             x_{i+1} = (sigma_{i+1} / sigma_i) x_i + alpha_{i+1} (1 - e^{-h_i}) D_i with
             D_0 = x0_0 (first order) and D_i = (1 + 1/(2 r)) x0_i - 1/(2 r) x0_{i-1},
             r = h_{i-1} / h_i; the last step (sigma_N = 0) is first order, which gives
             exactly x0_{N-1}. On dpm_flow_sigmas.
    trace (dict) gets step_x [steps, C, F, H, W] (input of each step) and step_v (guided v)."""
    dtype = W["x_embedder.proj.bias"].dtype
    x = noise.to(dtype)
    if solver == "euler":
        sig = euler_flow_sigmas(steps, shift)
    elif solver == "dpmpp2m":
        sig = dpm_flow_sigmas(steps, shift)
    else:
        raise ValueError(f"unknown solver {solver}")
    ts = [model_timestep(s) for s in sig[:-1].tolist()]
    xs, vs = [], []
    x0_prev, h_prev = None, None
    for i in range(steps):
        s, s_next = float(sig[i]), float(sig[i + 1])
        v = guided_velocity(W, cfg, x, ts[i], cond, uncond, guidance)
        xs.append(x)
        vs.append(v)
        if solver == "euler":
            x = x + (s_next - s) * v
            continue
        x0 = x - s * v
        if s_next == 0.0:
            x = x0
            break
        h = math.log((1.0 - s_next) / s_next) - math.log((1.0 - s) / s)
        coef = (1.0 - s_next) * -math.expm1(-h)
        if x0_prev is None:
            d = x0
        else:
            r = h_prev / h
            d = (1.0 + 0.5 / r) * x0 - (0.5 / r) * x0_prev
        x = (s_next / s) * x + coef * d
        x0_prev, h_prev = x0, h
    if trace is not None:
        trace["step_x"] = torch.stack(xs)
        trace["step_v"] = torch.stack(vs)
    return x, sig, torch.tensor(ts, dtype=torch.float64)
