#!/usr/bin/python3
"""Writes a diffusers-layout copy of the tiny-hd32 SANA-Video test weights, so that the
tests can check that both namings load to the same tensors:

    /usr/bin/python3 tests/reference/make_diffusers_fixture.py \
        [assets/testdata/sana-video/tiny-hd32.weights.safetensors] [assets/fixtures/tiny-hd32-diffusers]

Output, as `SanaVideoTransformer3DModel.save_pretrained` lays it out:
  config.json                              the diffusers config (no config in the weights file)
  diffusion_pytorch_model.safetensors      the same weights under the diffusers names

The names follow the mapping of tools/convert_scripts/convert_sana_video_to_diffusers.py in
NVlabs/Sana: blocks.N.attn.qkv.weight is split into attn1.to_q/to_k/to_v, cross_attn.kv_linear
into attn2.to_k/to_v (rows split in thirds / halves), every other tensor is renamed.
Plain Python (json, struct): tensor bytes are moved, never converted, so the copy is exact.
"""
import json
import os
import struct
import sys

TOP = {
    "x_embedder.proj.weight": "patch_embedding.weight",
    "x_embedder.proj.bias": "patch_embedding.bias",
    "y_embedder.y_proj.fc1.weight": "caption_projection.linear_1.weight",
    "y_embedder.y_proj.fc1.bias": "caption_projection.linear_1.bias",
    "y_embedder.y_proj.fc2.weight": "caption_projection.linear_2.weight",
    "y_embedder.y_proj.fc2.bias": "caption_projection.linear_2.bias",
    "t_embedder.mlp.0.weight": "time_embed.emb.timestep_embedder.linear_1.weight",
    "t_embedder.mlp.0.bias": "time_embed.emb.timestep_embedder.linear_1.bias",
    "t_embedder.mlp.2.weight": "time_embed.emb.timestep_embedder.linear_2.weight",
    "t_embedder.mlp.2.bias": "time_embed.emb.timestep_embedder.linear_2.bias",
    "t_block.1.weight": "time_embed.linear.weight",
    "t_block.1.bias": "time_embed.linear.bias",
    "attention_y_norm.weight": "caption_norm.weight",
    "final_layer.linear.weight": "proj_out.weight",
    "final_layer.linear.bias": "proj_out.bias",
    "final_layer.scale_shift_table": "scale_shift_table",
}

BLOCK = {
    "scale_shift_table": "scale_shift_table",
    "attn.q_norm.weight": "attn1.norm_q.weight",
    "attn.k_norm.weight": "attn1.norm_k.weight",
    "attn.proj.weight": "attn1.to_out.0.weight",
    "attn.proj.bias": "attn1.to_out.0.bias",
    "mlp.inverted_conv.conv.weight": "ff.conv_inverted.weight",
    "mlp.inverted_conv.conv.bias": "ff.conv_inverted.bias",
    "mlp.depth_conv.conv.weight": "ff.conv_depth.weight",
    "mlp.depth_conv.conv.bias": "ff.conv_depth.bias",
    "mlp.point_conv.conv.weight": "ff.conv_point.weight",
    "mlp.t_conv.weight": "ff.conv_temp.weight",
    "cross_attn.q_linear.weight": "attn2.to_q.weight",
    "cross_attn.q_linear.bias": "attn2.to_q.bias",
    "cross_attn.q_norm.weight": "attn2.norm_q.weight",
    "cross_attn.k_norm.weight": "attn2.norm_k.weight",
    "cross_attn.proj.weight": "attn2.to_out.0.weight",
    "cross_attn.proj.bias": "attn2.to_out.0.bias",
}

# Split along the first dimension: original name -> the diffusers names of its parts.
SPLIT = {
    "attn.qkv.weight": ["attn1.to_q.weight", "attn1.to_k.weight", "attn1.to_v.weight"],
    "cross_attn.kv_linear.weight": ["attn2.to_k.weight", "attn2.to_v.weight"],
    "cross_attn.kv_linear.bias": ["attn2.to_k.bias", "attn2.to_v.bias"],
}


def read_safetensors(path):
    blob = open(path, "rb").read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8 : 8 + n])
    meta = header.pop("__metadata__", {})
    data = blob[8 + n :]
    return {k: (v["dtype"], v["shape"], data[v["data_offsets"][0] : v["data_offsets"][1]]) for k, v in header.items()}, meta


def write_safetensors(path, tensors, metadata):
    header, blobs, at = {"__metadata__": metadata}, [], 0
    for name in sorted(tensors):  # save_pretrained's writer sorts names too
        dtype, shape, raw = tensors[name]
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [at, at + len(raw)]}
        blobs.append(raw)
        at += len(raw)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - (8 + len(h)) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.join(here, "..", "..")
    src = sys.argv[1] if len(sys.argv) > 1 else os.path.join(root, "assets", "testdata", "sana-video", "tiny-hd32.weights.safetensors")
    out = sys.argv[2] if len(sys.argv) > 2 else os.path.join(root, "assets", "fixtures", "tiny-hd32-diffusers")
    tensors, meta = read_safetensors(src)
    cfg = json.loads(meta["config"])
    converted = {}
    for name, (dtype, shape, raw) in tensors.items():
        if name in TOP:
            converted[TOP[name]] = (dtype, shape, raw)
            continue
        assert name.startswith("blocks."), name
        _, n, rest = name.split(".", 2)
        prefix = f"transformer_blocks.{n}."
        if rest in SPLIT:
            parts = SPLIT[rest]
            rows = shape[0] // len(parts)
            step = len(raw) // len(parts)
            for i, part in enumerate(parts):
                converted[prefix + part] = (dtype, [rows] + shape[1:], raw[i * step : (i + 1) * step])
        else:
            converted[prefix + BLOCK[rest]] = (dtype, shape, raw)
    os.makedirs(out, exist_ok=True)
    write_safetensors(os.path.join(out, "diffusion_pytorch_model.safetensors"), converted, {"format": "pt"})
    config = {
        "_class_name": "SanaVideoTransformer3DModel",
        "_diffusers_version": "0.36.0.dev0",
        "in_channels": cfg["in_channels"],
        "out_channels": cfg["out_channels"],
        "num_attention_heads": cfg["num_heads"],
        "attention_head_dim": cfg["head_dim"],
        "num_layers": cfg["depth"],
        "num_cross_attention_heads": cfg["num_heads"],
        "cross_attention_head_dim": cfg["head_dim"],
        "cross_attention_dim": cfg["hidden_size"],
        "caption_channels": cfg["caption_channels"],
        "mlp_ratio": cfg["mlp_ratio"],
        "attention_bias": False,
        "sample_size": 8,
        "patch_size": cfg["patch_size"],
        "norm_elementwise_affine": False,
        "norm_eps": 1e-06,
        "qk_norm": "rms_norm_across_heads",
        "rope_max_seq_len": 1024,
    }
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")


if __name__ == "__main__":
    main()
