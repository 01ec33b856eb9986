"""Reference of block-wise linear attention with a carried state (engine/linear-attention.md),
two ways that must agree: a direct masked double sum over all token pairs, and the
block-by-block evaluation that carries only (S, z).

Layout (one call, all heads): q, k, v [H, N, D]; outputs [H, N, D]; a state is S [H, D, D]
(row = value dim, column = key dim) and z [H, D].

    S = sum_j v_j rope_j(phi(k_j))^T        z = sum_j phi(k_j)
    o_i = S rope_i(phi(q_i)) [ / (z . phi(q_i) + eps) ]

RoPE: 1-D positions, angle p * theta^(-2i/D) for pair i < D/2, adjacent pairs (2i, 2i+1).
Block rules for the carried state (block b's queries read "carried + own"):
    additive   carried_b = carried_{b-1} + C_b
    window K   carried_b = C_{b-K+1} + ... + C_b   (the last K committed blocks; a query in
               block b therefore sees its own block and the K blocks before it, as LongSANA's
               num_cached_blocks = K)
    decay l    carried_b = l * carried_{b-1} + C_b  (a query in block b reads l * carried_{b-1} + C_b)
z follows the same rule as S.
"""
import torch


def phi(x, name):
    if name == "identity":
        return x
    if name == "relu":
        return torch.relu(x)
    if name == "elu1":
        return torch.where(x > 0, x + 1.0, torch.exp(torch.clamp(x, max=0.0)))
    raise ValueError(name)


def rope_angles_1d(positions, D, theta=10000.0):
    pos = torch.as_tensor(positions, dtype=torch.float64)
    j = torch.arange(0, D, 2, dtype=torch.float64)
    return pos[:, None] * (1.0 / theta ** (j / D))[None]  # [N, D/2]


def apply_rope(x, angles):
    """x [H, N, D]; adjacent pairs rotated by angles [N, D/2]."""
    c, s = torch.cos(angles).to(x.dtype), torch.sin(angles).to(x.dtype)
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.stack([a * c - b * s, a * s + b * c], dim=-1).flatten(-2)


def block_ids(N, block_sizes):
    assert sum(block_sizes) == N
    return torch.cat([torch.full((n,), i, dtype=torch.long) for i, n in enumerate(block_sizes)])


def mode_blocks(mode, N, block=None):
    if mode == "full":
        return [N]
    if mode == "causal":
        return [1] * N
    if mode == "block":
        sizes = [block] * (N // block)
        return sizes + ([N % block] if N % block else [])
    raise ValueError(mode)


def pair_weights(N, block_sizes, rule="additive", window=0, decay=1.0):
    """w[i, j]: how much key j counts for query i (the masked double sum's weights)."""
    b = block_ids(N, block_sizes)
    bi, bj = b[:, None], b[None, :]
    seen = bj <= bi
    if rule == "additive":
        w = seen.to(torch.float64)
    elif rule == "window":
        w = (seen & (bj >= bi - window)).to(torch.float64)
    elif rule == "decay":
        w = torch.where(seen, torch.tensor(decay, dtype=torch.float64) ** (bi - bj).to(torch.float64),
                        torch.zeros((), dtype=torch.float64))
    else:
        raise ValueError(rule)
    return w


def direct(q, k, v, feature="relu", normalize=True, positions=None, block_sizes=None, rule="additive",
           window=0, decay=1.0, eps=1e-8):
    """O(N^2) evaluation: o_i = sum_j w_ij v_j (R_j phi k_j . R_i phi q_i) [/ (sum_j w_ij phi k_j . phi q_i + eps)]."""
    H, N, D = q.shape
    block_sizes = block_sizes or [N]
    fq, fk = phi(q, feature), phi(k, feature)
    if positions is not None:
        ang = rope_angles_1d(positions, D)
        rq, rk = apply_rope(fq, ang), apply_rope(fk, ang)
    else:
        rq, rk = fq, fk
    w = pair_weights(N, block_sizes, rule, window, decay).to(q.dtype)
    scores = (rq @ rk.transpose(1, 2)) * w[None]  # [H, N, N]
    out = scores @ v
    if normalize:
        den = ((fq @ fk.transpose(1, 2)) * w[None]).sum(-1, keepdim=True) + eps
        out = out / den
    return out


def blockwise(q, k, v, feature="relu", normalize=True, positions=None, block_sizes=None, rule="additive",
              window=0, decay=1.0, eps=1e-8):
    """Block by block, carrying only the state. Returns (out [H, N, D], carried states after
    each block: list of (S [H, D, D], z [H, D]))."""
    H, N, D = q.shape
    block_sizes = block_sizes or [N]
    fq, fk = phi(q, feature), phi(k, feature)
    if positions is not None:
        ang = rope_angles_1d(positions, D)
        rq, rk = apply_rope(fq, ang), apply_rope(fk, ang)
    else:
        rq, rk = fq, fk
    S = torch.zeros(H, D, D, dtype=q.dtype)  # the carried state (committed blocks)
    z = torch.zeros(H, D, dtype=q.dtype)
    ring = []  # window rule: the last K contributions, re-summed exactly (never subtracted)
    outs, states = [], []
    start = 0
    for n in block_sizes:
        sl = slice(start, start + n)
        Sc = v[:, sl].transpose(1, 2) @ rk[:, sl]  # this block's contribution
        zc = fk[:, sl].sum(1)
        # what the block's queries read: the carried state (decayed) + the block's own part
        if rule == "decay":
            S_read, z_read = decay * S + Sc, decay * z + zc
        else:
            S_read, z_read = S + Sc, z + zc
        o = rq[:, sl] @ S_read.transpose(1, 2)
        if normalize:
            o = o / ((fq[:, sl] @ z_read[:, :, None]) + eps)
        outs.append(o)
        # commit the block by the rule
        if rule == "window":
            ring = (ring + [(Sc, zc)])[-window:]
            S = sum(r[0] for r in ring)
            z = sum(r[1] for r in ring)
        elif rule in ("additive", "decay"):
            S, z = S_read, z_read
        else:
            raise ValueError(rule)
        states.append((S.clone(), z.clone()))
        start += n
    return torch.cat(outs, dim=1), states


def worked_example():
    """The example of linear-attention.md (one head, identity, unnormalised); returns the
    (causal, full, blocks {1,2},{3}) outputs."""
    k = torch.tensor([[[1.0, 0], [0, 2], [1, 1]]], dtype=torch.float64)
    v = torch.tensor([[[1.0, 2], [3, 0], [0, 1]]], dtype=torch.float64)
    q = torch.tensor([[[2.0, 0], [0, 1], [1, 1]]], dtype=torch.float64)
    kw = dict(feature="identity", normalize=False)
    return (blockwise(q, k, v, block_sizes=[1, 1, 1], **kw)[0][0],
            blockwise(q, k, v, block_sizes=[3], **kw)[0][0],
            blockwise(q, k, v, block_sizes=[2, 1], **kw)[0][0])
