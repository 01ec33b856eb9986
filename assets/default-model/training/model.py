"""SANA-Video's DiT (pipelines/sana/README.md) as a PyTorch module, batched, with
LongSANA's block-causal chunk structure, for training and sampling the default model.

Parameter names are the ORIGINAL checkpoint names (blocks.N.attn.qkv.weight, ...), so a
state_dict saved from this module is read by the engine through the same code path as
the big model. The only addition is the text encoder that replaces Gemma: three tables
[vocab, caption_channels], `text_embedding.weight` (the word), `text_prev_embedding.weight`
(the word before it) and `text_next_embedding.weight` (the word after it). For the n valid
tokens ids[0..n-1] of a prompt (mask = 1 for i < n):

    y[i] = text_embedding[ids[i]] + (i > 0 ? text_prev_embedding[ids[i-1]] : 0)
                                  + (i < n-1 ? text_next_embedding[ids[i+1]] : 0)
    y[i] = 0 for the padded slots i >= n (they are masked out of the cross-attention anyway).

A single table would make the prompt a bag of words ("a red ball on a blue background" =
"a blue ball on a red background"), and the cross-attention, blind to order, could never
learn which colour is the background's; the neighbour tables bind colour to shape, count
to colour and shade/colour to "background".

Layouts (batch first):
- video / latents x: [B, Cin, F, H, W]; timesteps t: [B, F] (or scalar / [B]).
- tokens: [B, F, P, C], P = (H / ph) * (W / pw), row-major inside a frame.
- a pass covers `nc` chunks of `bf` frames each (F = nc * bf).
- linear-attention contribution of a chunk, one layer: S [B, nc, heads, D, D]
  (row = value dim, column = key dim) = sum_j v_j rope_j(relu k_j)^T and
  z [B, nc, heads, D] = sum_j relu k_j (unrotated).
- conv cache: u_last [B, nc, P, C], the last frame of each chunk's Mix-FFN features just
  before the temporal conv.

Chunk c of a pass reads `context S/z[c] + own contribution of chunk c`; its temporal conv
sees `left[c]` before its first frame and zeros after its last. With no explicit context
the pass is block-causal over its own chunks (the clean pass): context[c] = sum of the
chunks c-K..c-1 of the same pass (K = window, 0 = all earlier chunks), left[c] = u_last[c-1].
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def rms_norm(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def layer_norm(x, eps=1e-6):
    return F.layer_norm(x, x.shape[-1:], eps=eps)


def timestep_sinusoid(t, dim=256):
    """int(t) -> [..., 256] = [cos(t f_i), sin(t f_i)], f_i = exp(-ln(1e4) i / 128); the
    arguments are formed in float32 as the original does."""
    t32 = torch.trunc(t.to(torch.float64)).to(torch.float32)
    half = dim // 2
    i = torch.arange(half, dtype=torch.float32, device=t.device)
    freqs = torch.exp(-math.log(10000.0) * i / half)
    args = t32[..., None] * freqs
    return torch.cat([torch.cos(args), torch.sin(args)], dim=-1)


class TimestepEmbedder(nn.Module):
    def __init__(self, C):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(256, C), nn.SiLU(), nn.Linear(C, C))

    def forward(self, t, dtype):
        return self.mlp(timestep_sinusoid(t).to(dtype))


class CaptionProj(nn.Module):
    def __init__(self, cin, C):
        super().__init__()
        self.fc1 = nn.Linear(cin, C)
        self.fc2 = nn.Linear(C, C)

    def forward(self, y):
        return self.fc2(F.gelu(self.fc1(y), approximate="tanh"))


class CaptionEmbedder(nn.Module):
    def __init__(self, cin, C):
        super().__init__()
        self.y_proj = CaptionProj(cin, C)


class RMSWeight(nn.Module):
    def __init__(self, C):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(C))


class ConvWeight(nn.Module):
    """Holds a conv weight (and bias) under `.conv.` as the original checkpoint does."""

    def __init__(self, shape, bias):
        super().__init__()
        self.conv = nn.Module()
        self.conv.weight = nn.Parameter(torch.empty(shape))
        if bias:
            self.conv.bias = nn.Parameter(torch.zeros(shape[0]))
        else:
            self.conv.bias = None


class LinearAttention(nn.Module):
    """LiteLAReLURope: q, k RMSNorm over C (eps 1e-5), heads, ReLU, RoPE (numerator only)."""

    def __init__(self, C, heads, head_dim):
        super().__init__()
        self.heads, self.head_dim = heads, head_dim
        self.qkv = nn.Linear(C, 3 * C, bias=False)
        self.q_norm = RMSWeight(C)
        self.k_norm = RMSWeight(C)
        self.proj = nn.Linear(C, C)

    def qkv_heads(self, x):
        """x [B, nc, n, C] -> q, k (relu, unrotated), v: [B, nc, H, n, D]."""
        B, nc, n, C = x.shape
        H, D = self.heads, self.head_dim
        q, k, v = self.qkv(x).split(C, dim=-1)
        q = rms_norm(q, self.q_norm.weight, 1e-5)
        k = rms_norm(k, self.k_norm.weight, 1e-5)

        def heads(a):
            return a.reshape(B, nc, n, H, D).transpose(2, 3)

        return torch.relu(heads(q)), torch.relu(heads(k)), heads(v)


class CrossAttention(nn.Module):
    def __init__(self, C, heads, head_dim):
        super().__init__()
        self.heads, self.head_dim = heads, head_dim
        self.q_linear = nn.Linear(C, C)
        self.kv_linear = nn.Linear(C, 2 * C)
        self.proj = nn.Linear(C, C)
        self.q_norm = RMSWeight(C)
        self.k_norm = RMSWeight(C)

    def forward(self, x, y, mask):
        """x [B, T, C], y [B, L, C] (embedded caption), mask [B, L] (1 valid). A sample with
        no valid token gets no attention output (only the proj bias)."""
        B, T, C = x.shape
        L = y.shape[1]
        H, D = self.heads, self.head_dim
        q = rms_norm(self.q_linear(x), self.q_norm.weight, 1e-6)
        k, v = self.kv_linear(y).split(C, dim=-1)
        k = rms_norm(k, self.k_norm.weight, 1e-6)
        q = q.reshape(B, T, H, D).transpose(1, 2)
        k = k.reshape(B, L, H, D).transpose(1, 2)
        v = v.reshape(B, L, H, D).transpose(1, 2)
        s = (q @ k.transpose(-1, -2)) / math.sqrt(D)  # [B, H, T, L]
        valid = mask > 0.5
        any_valid = valid.any(dim=1)
        s = s.masked_fill(~valid[:, None, None, :], float("-inf"))
        s = torch.where(any_valid[:, None, None, None], s, torch.zeros_like(s))
        p = torch.softmax(s, dim=-1) * any_valid[:, None, None, None].to(s.dtype)
        o = (p @ v).transpose(1, 2).reshape(B, T, C)
        return self.proj(o)


class MixFFN(nn.Module):
    """GLUMBConvTemp: 1x1 conv C -> 2Fh + SiLU, depthwise 3x3, GLU, 1x1 conv Fh -> C,
    then u + TConv(u) over time (kernel 3, no bias)."""

    def __init__(self, C, hidden):
        super().__init__()
        self.hidden = hidden
        self.inverted_conv = ConvWeight((2 * hidden, C, 1, 1), bias=True)
        self.depth_conv = ConvWeight((2 * hidden, 1, 3, 3), bias=True)
        self.point_conv = ConvWeight((C, hidden, 1, 1), bias=False)
        self.t_conv = nn.Module()
        self.t_conv.weight = nn.Parameter(torch.zeros(C, C, 3, 1))

    def spatial(self, x, hp, wp):
        """x [B, F, P, C] -> u [B, F, P, C] (everything before the temporal conv)."""
        B, Fr, P, C = x.shape
        Fh = self.hidden
        h = F.silu(F.linear(x, self.inverted_conv.conv.weight.reshape(2 * Fh, C), self.inverted_conv.conv.bias))
        img = h.reshape(B * Fr, hp, wp, 2 * Fh).permute(0, 3, 1, 2)
        img = F.conv2d(img, self.depth_conv.conv.weight, self.depth_conv.conv.bias, padding=1, groups=2 * Fh)
        h = img.permute(0, 2, 3, 1).reshape(B, Fr, P, 2 * Fh)
        a, g = h.split(Fh, dim=-1)
        return F.linear(a * F.silu(g), self.point_conv.conv.weight.reshape(C, Fh))

    def temporal(self, u, nc, left):
        """u [B, F, P, C] as nc chunks; left [B, nc, P, C] (the frame before each chunk).
        Returns u + TConv(u) with each chunk's right edge zero-padded."""
        B, Fr, P, C = u.shape
        bf = Fr // nc
        uc = u.reshape(B, nc, bf, P, C)
        zero = torch.zeros_like(uc[:, :, :1])
        padded = torch.cat([left[:, :, None], uc, zero], dim=2)  # [B, nc, bf + 2, P, C]
        w = self.t_conv.weight[:, :, :, 0]  # [Cout, Cin, 3]
        conv = sum(F.linear(padded[:, :, k : k + bf], w[:, :, k]) for k in range(3))
        return (uc + conv).reshape(B, Fr, P, C)


class Block(nn.Module):
    def __init__(self, C, heads, head_dim, mlp_ratio):
        super().__init__()
        self.scale_shift_table = nn.Parameter(torch.randn(6, C) / C ** 0.5)
        self.attn = LinearAttention(C, heads, head_dim)
        self.cross_attn = CrossAttention(C, heads, head_dim)
        self.mlp = MixFFN(C, int(C * mlp_ratio))


def window_sum(contrib, K):
    """contrib [B, nc, ...] -> context [B, nc, ...]: context[c] = sum of contrib[c-K..c-1]
    (all earlier chunks when K == 0); summed term by term, no subtraction."""
    nc = contrib.shape[1]
    ctx = torch.zeros_like(contrib)
    n = nc - 1 if K <= 0 else min(K, nc - 1)
    for k in range(1, n + 1):
        ctx = ctx + torch.cat([torch.zeros_like(contrib[:, :k]), contrib[:, : nc - k]], dim=1)
    return ctx


class SanaVideoDiT(nn.Module):
    def __init__(self, hidden_size, depth, num_heads, head_dim, patch_size, in_channels, out_channels,
                 caption_channels, mlp_ratio, vocab_size=0, rope_theta=10000.0):
        super().__init__()
        C = hidden_size
        assert num_heads * head_dim == C and patch_size[0] == 1
        self.cfg = dict(hidden_size=C, depth=depth, num_heads=num_heads, head_dim=head_dim,
                        patch_size=list(patch_size), in_channels=in_channels, out_channels=out_channels,
                        caption_channels=caption_channels, mlp_ratio=float(mlp_ratio))
        if rope_theta != 10000.0:  # SANA-Video's is 10000; the key is written only when it differs
            self.cfg["rope_theta"] = float(rope_theta)
        self.rope_theta = float(rope_theta)
        self.C, self.depth, self.heads, self.head_dim = C, depth, num_heads, head_dim
        self.patch = tuple(patch_size)
        self.cin, self.cout = in_channels, out_channels
        # RoPE split per head: h = w = 2 * (D // 6), t = the rest (SANA-Video 112: 40/36/36)
        self.rope_h = self.rope_w = 2 * (head_dim // 6)
        self.rope_t = head_dim - 2 * self.rope_h

        self.x_embedder = nn.Module()
        self.x_embedder.proj = nn.Conv3d(in_channels, C, kernel_size=self.patch, stride=self.patch)
        self.t_embedder = TimestepEmbedder(C)
        self.t_block = nn.Sequential(nn.SiLU(), nn.Linear(C, 6 * C))
        self.y_embedder = CaptionEmbedder(caption_channels, C)
        self.attention_y_norm = RMSWeight(C)
        self.blocks = nn.ModuleList([Block(C, num_heads, head_dim, mlp_ratio) for _ in range(depth)])
        self.final_layer = nn.Module()
        self.final_layer.scale_shift_table = nn.Parameter(torch.randn(2, C) / C ** 0.5)
        self.final_layer.linear = nn.Linear(C, self.patch[0] * self.patch[1] * self.patch[2] * out_channels)
        if vocab_size > 0:
            self.text_embedding = nn.Embedding(vocab_size, caption_channels)
            self.text_prev_embedding = nn.Embedding(vocab_size, caption_channels)
            self.text_next_embedding = nn.Embedding(vocab_size, caption_channels)
        self.init_weights()

    # ------------------------------------------------------------------ init
    def init_weights(self):
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.xavier_uniform_(m.weight)
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
        w = self.x_embedder.proj.weight
        nn.init.xavier_uniform_(w.view(w.shape[0], -1))
        nn.init.zeros_(self.x_embedder.proj.bias)
        nn.init.normal_(self.t_embedder.mlp[0].weight, std=0.02)
        nn.init.normal_(self.t_embedder.mlp[2].weight, std=0.02)
        for b in self.blocks:
            for cw in (b.mlp.inverted_conv, b.mlp.depth_conv, b.mlp.point_conv):
                w = cw.conv.weight
                fan_in = w[0].numel()
                nn.init.normal_(w, std=fan_in ** -0.5)
                if cw.conv.bias is not None:
                    nn.init.zeros_(cw.conv.bias)
            nn.init.zeros_(b.mlp.t_conv.weight)       # starts as identity (u + 0)
            nn.init.zeros_(b.cross_attn.proj.weight)
            nn.init.zeros_(b.cross_attn.proj.bias)
        # adaLN-zero style: the gates start at zero through t_block; the output starts at zero
        nn.init.zeros_(self.t_block[1].weight)
        nn.init.zeros_(self.t_block[1].bias)
        nn.init.zeros_(self.final_layer.linear.weight)
        nn.init.zeros_(self.final_layer.linear.bias)
        if hasattr(self, "text_embedding"):
            nn.init.normal_(self.text_embedding.weight, std=1.0)
            nn.init.normal_(self.text_prev_embedding.weight, std=0.5)
            nn.init.normal_(self.text_next_embedding.weight, std=0.5)

    # ------------------------------------------------------------------ pieces
    def text_encode(self, ids, mask):
        """Token ids [B, L] (valid ones first, mask [B, L]) -> raw caption embeddings y
        [B, L, cap] (see the module docstring)."""
        valid = (mask > 0.5).to(self.text_embedding.weight.dtype)[..., None]  # [B, L, 1]
        y = self.text_embedding(ids)
        prev = self.text_prev_embedding(ids) * valid  # contribution of token j to token j + 1
        nxt = self.text_next_embedding(ids) * valid   # contribution of token j to token j - 1
        y = y + torch.cat([torch.zeros_like(prev[:, :1]), prev[:, :-1]], dim=1)
        y = y + torch.cat([nxt[:, 1:], torch.zeros_like(nxt[:, :1])], dim=1)
        return y * valid

    def embed_text(self, y, mask):
        """Raw caption embeddings y [B, L, cap] -> [B, L, C]."""
        return rms_norm(self.y_embedder.y_proj(y), self.attention_y_norm.weight, 1e-5)

    def rope(self, Fr, hp, wp, frame_offset, device):
        """cos, sin [B, F*P, D/2] for time positions frame_offset[b] + f (float64 angles)."""
        def freqs(d):
            j = torch.arange(0, d, 2, dtype=torch.float64, device=device)
            return 1.0 / (self.rope_theta ** (j / d))

        off = torch.as_tensor(frame_offset, dtype=torch.float64, device=device).reshape(-1)
        fpos = off[:, None] + torch.arange(Fr, dtype=torch.float64, device=device)[None]  # [B, F]
        at = fpos[:, :, None] * freqs(self.rope_t)[None, None]  # [B, F, t/2]
        ah = torch.arange(hp, dtype=torch.float64, device=device)[:, None] * freqs(self.rope_h)[None]
        aw = torch.arange(wp, dtype=torch.float64, device=device)[:, None] * freqs(self.rope_w)[None]
        Bn = at.shape[0]
        at = at[:, :, None, None, :].expand(Bn, Fr, hp, wp, -1)
        ah = ah[None, None, :, None, :].expand(Bn, Fr, hp, wp, -1)
        aw = aw[None, None, None, :, :].expand(Bn, Fr, hp, wp, -1)
        ang = torch.cat([at, ah, aw], dim=-1).reshape(Bn, Fr * hp * wp, -1)
        return torch.cos(ang), torch.sin(ang)

    @staticmethod
    def apply_rope(x, cos, sin):
        """x [..., n, D], adjacent pairs (2i, 2i+1) rotated; cos/sin [..., n, D/2] (same dtype)."""
        a, b = x[..., 0::2], x[..., 1::2]
        return torch.stack([a * cos - b * sin, a * sin + b * cos], dim=-1).flatten(-2)

    # ------------------------------------------------------------------ forward
    def forward(self, x, t, y, mask=None, *, chunks=1, frame_offset=0, window=0, context=None,
                return_contrib=False):
        """x [B, Cin, F, H, W]; t scalar, [B] or [B, F] (model scale 0..1000, truncated to
        integers); y [B, L, cap] raw caption embeddings (or token ids [B, L] when the model
        has a text embedding table); mask [B, L] or None (all valid).

        chunks: number of chunks in this pass (F divisible by it). context: None (block-causal
        over this pass's own chunks, window K) or a list per layer of dicts {S [B, nc, H, D, D],
        z [B, nc, H, D], left [B, nc, P, C]} read by each chunk in addition to its own
        contribution. Returns out [B, Cout, F, H, W] (velocity), and with return_contrib the
        per-layer dicts {S, z, u_last} of this pass's chunks."""
        B, Cin, Fr, Hh, Ww = x.shape
        dtype = x.dtype
        _, ph, pw = self.patch
        hp, wp = Hh // ph, Ww // pw
        P = hp * wp
        nc = chunks
        bf = Fr // nc
        assert nc * bf == Fr
        C, H, D = self.C, self.heads, self.head_dim

        if not torch.is_floating_point(y):
            y = self.text_encode(y, mask if mask is not None else torch.ones(y.shape)).to(dtype)
        if mask is None:
            mask = torch.ones(y.shape[:2], dtype=dtype, device=x.device)
        t = torch.as_tensor(t, dtype=torch.float64, device=x.device)
        if t.dim() == 0:
            t = t.expand(B)
        if t.dim() == 1:
            t = t[:, None].expand(B, Fr)
        temb = self.t_embedder(t, dtype)          # [B, F, C]
        t0 = self.t_block(temb)                   # [B, F, 6C]
        y_emb = self.embed_text(y, mask)

        tok = self.x_embedder.proj(x)             # [B, C, F, hp, wp]
        tok = tok.permute(0, 2, 3, 4, 1).reshape(B, Fr, P, C)
        cos, sin = self.rope(Fr, hp, wp, frame_offset, x.device)
        cos = cos.to(dtype).reshape(-1, nc, 1, bf * P, D // 2)
        sin = sin.to(dtype).reshape(-1, nc, 1, bf * P, D // 2)

        contribs = []
        for li, blk in enumerate(self.blocks):
            mod = (blk.scale_shift_table[None, None] + t0.reshape(B, Fr, 6, C))[:, :, None]  # [B, F, 1, 6, C]
            sh1, sc1, g1, sh2, sc2, g2 = mod.unbind(3)

            # linear attention, chunk c reads context[c] + its own contribution
            a_in = layer_norm(tok) * (1 + sc1) + sh1
            q, k, v = blk.attn.qkv_heads(a_in.reshape(B, nc, bf * P, C))  # [B, nc, H, n, D]
            qr, kr = self.apply_rope(q, cos, sin), self.apply_rope(k, cos, sin)
            S_own = v.transpose(-1, -2) @ kr       # [B, nc, H, D, D]
            z_own = k.sum(dim=3)                   # [B, nc, H, D]
            if context is None:
                S_ctx, z_ctx = window_sum(S_own, window), window_sum(z_own, window)
            else:
                S_ctx, z_ctx = context[li]["S"], context[li]["z"]
            S = S_own + S_ctx
            z = z_own + z_ctx
            num = qr @ S.transpose(-1, -2)         # [B, nc, H, n, D]: o_i = S qr_i
            den = (q * z[:, :, :, None, :]).sum(-1, keepdim=True) + 1e-8
            o = (num / den).transpose(2, 3).reshape(B, Fr, P, C)
            tok = tok + g1 * blk.attn.proj(o)

            tok = tok + blk.cross_attn(tok.reshape(B, Fr * P, C), y_emb, mask).reshape(B, Fr, P, C)

            f_in = layer_norm(tok) * (1 + sc2) + sh2
            u = blk.mlp.spatial(f_in, hp, wp)      # [B, F, P, C]
            u_last = u.reshape(B, nc, bf, P, C)[:, :, -1]
            if context is None:
                left = torch.cat([torch.zeros_like(u_last[:, :1]), u_last[:, :-1]], dim=1)
            else:
                left = context[li]["left"]
            tok = tok + g2 * blk.mlp.temporal(u, nc, left)
            if return_contrib:
                contribs.append({"S": S_own, "z": z_own, "u_last": u_last})

        fmod = self.final_layer.scale_shift_table[None, None] + temb[:, :, None, :]  # [B, F, 2, C]
        ftok = layer_norm(tok) * (1 + fmod[:, :, 1:2]) + fmod[:, :, 0:1]
        ftok = self.final_layer.linear(ftok)       # [B, F, P, ph*pw*Cout]
        out = ftok.reshape(B, Fr, hp, wp, ph, pw, self.cout).permute(0, 6, 1, 2, 4, 3, 5)
        out = out.reshape(B, self.cout, Fr, Hh, Ww)
        return (out, contribs) if return_contrib else out


def context_from_clean(contribs, window):
    """Per-layer context for a noisy pass over the same chunks as a clean (t = 0) pass:
    chunk c reads the clean contributions of chunks c-K..c-1 (K = window, 0 = all) and the
    clean u_last of chunk c-1 (zeros for chunk 0)."""
    ctx = []
    for c in contribs:
        ul = c["u_last"]
        ctx.append({"S": window_sum(c["S"], window), "z": window_sum(c["z"], window),
                    "left": torch.cat([torch.zeros_like(ul[:, :1]), ul[:, :-1]], dim=1)})
    return ctx


class CarriedState:
    """LongSANA's state carried from chunk to chunk for one batch of videos: per layer a
    ring of the last K committed (S, z) contributions (all when K == 0), re-summed
    exactly, and the last committed chunk's u_last."""

    def __init__(self, depth, window):
        self.window = window
        self.ring = [[] for _ in range(depth)]
        self.left = [None] * depth
        self.chunks = 0

    def context(self, model, B, P, dtype, device):
        ctx = []
        H, D, C = model.heads, model.head_dim, model.C
        for li in range(model.depth):
            ring = self.ring[li]
            S = torch.zeros(B, 1, H, D, D, dtype=dtype, device=device)
            z = torch.zeros(B, 1, H, D, dtype=dtype, device=device)
            for Sc, zc in ring:
                S = S + Sc
                z = z + zc
            left = self.left[li] if self.left[li] is not None else torch.zeros(B, 1, P, C, dtype=dtype, device=device)
            ctx.append({"S": S, "z": z, "left": left})
        return ctx

    def copy(self):
        """A state that commits apart from this one (the tensors are shared, never written in place)."""
        other = CarriedState(len(self.ring), self.window)
        other.ring = [list(r) for r in self.ring]
        other.left = list(self.left)
        other.chunks = self.chunks
        return other

    def commit(self, contribs):
        for li, c in enumerate(contribs):
            self.ring[li].append((c["S"][:, -1:], c["z"][:, -1:]))
            if self.window > 0 and len(self.ring[li]) > self.window:
                self.ring[li].pop(0)
            self.left[li] = c["u_last"][:, -1:]
        self.chunks += 1


def chunk_pass(model, state, x, t, y, mask, frame_offset, commit):
    """One LongSANA pass over one chunk x [B, Cin, f, H, W] reading the carried state."""
    B = x.shape[0]
    P = (x.shape[3] // model.patch[1]) * (x.shape[4] // model.patch[2])
    ctx = state.context(model, B, P, x.dtype, x.device)
    out, contribs = model(x, t, y, mask, chunks=1, frame_offset=frame_offset, context=ctx, return_contrib=True)
    if commit:
        state.commit(contribs)
    return out


def still_state(model, before, last, bf, ids, mask, frame_offset):
    """`before` (the state before the last block was committed) with `last` [1, C, 1, H, W] held still
    for a block committed instead: the same context without its last block's motion (history guidance, sample_chunk)."""
    still = before.copy()
    chunk_pass(model, still, last.expand(-1, -1, bf, -1, -1).contiguous(), 0.0, ids, mask, frame_offset, commit=True)
    return still


def sample_chunk(model, state, noise, renoise, steps, y, mask, frame_offset, sampler="renoise", cfg=1.0,
                 cfg_last_steps=0, warm=None, history=None):
    """Denoises one chunk: noise [B, Cin, f, H, W], renoise [len(steps) - 1, B, ...] (used by
    the "renoise" sampler only). At each step t (s = t / 1000):
        v = model(x, t)    (with cfg != 1: v = v_empty + cfg (v_prompt - v_empty), where the
                            empty prompt has every mask entry 0)
        x0 = x - s v
        next x = (1 - s') x0 + s' n,  s' = t_next / 1000, where n is
            "renoise": fresh noise renoise[k]        (LongSANA's sampler)
            "euler":   the predicted noise x + (1 - s) v   (= the flow ODE's Euler step)
    cfg_last_steps > 0: CFG only at the last cfg_last_steps steps (0: at every step).
    warm [B, Cin, 1, H, W] (the previous block's last frame): the first step starts from
    x = (1 - s_0) warm + s_0 noise instead of pure noise ("warm start").
    history = (still, w), an experiment (motion.py --history): before CFG, every step's
        v = v_still + w (v - v_still), v_still read from the state `still` (the context with its
        last block replaced by its last frame held still), which amplifies what the context's
        motion adds.
    The last x0 is the output; a t = 0 pass with the prompt commits it to the state."""
    x = noise
    if warm is not None:
        s0 = float(steps[0]) / 1000.0
        x = (1.0 - s0) * warm + s0 * noise
    x0 = None
    empty = torch.zeros_like(mask) if mask is not None else None
    for k, t in enumerate(steps):
        s = float(t) / 1000.0
        v = chunk_pass(model, state, x, float(t), y, mask, frame_offset, commit=False)
        if history is not None:
            vs = chunk_pass(model, history[0], x, float(t), y, mask, frame_offset, commit=False)
            v = vs + history[1] * (v - vs)
        if cfg != 1.0 and (cfg_last_steps <= 0 or k >= len(steps) - cfg_last_steps):
            vu = chunk_pass(model, state, x, float(t), y, empty, frame_offset, commit=False)
            v = vu + cfg * (v - vu)
        x0 = x - s * v
        if k + 1 < len(steps):
            s2 = float(steps[k + 1]) / 1000.0
            n = renoise[k] if sampler == "renoise" else x + (1.0 - s) * v
            x = (1.0 - s2) * x0 + s2 * n
    chunk_pass(model, state, x0, 0.0, y, mask, frame_offset, commit=True)
    return x0


def longsana_chunk(model, state, noise, renoise, steps, y, mask, frame_offset):
    """LongSANA's chunk sampler (fresh noise between steps, no CFG)."""
    return sample_chunk(model, state, noise, renoise, steps, y, mask, frame_offset)


def flow_timesteps(n, shift=1.0):
    """n timesteps from 1000 down (the last > 0): s_i = 1 - i / n shifted by
    shift s / (1 + (shift - 1) s), times 1000, rounded to integers."""
    out = []
    for i in range(n):
        s = 1.0 - i / n
        out.append(float(round(1000.0 * shift * s / (1.0 + (shift - 1.0) * s))))
    return out
