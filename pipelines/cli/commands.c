/* The commands `longvk` dispatches to, with their option tables. */
#include "bench.h"
#include "commands.h"

const cli_command cli_commands[] = {
    {"generate", cmd_generate, &cmd_generate_spec, "generate a video from a prompt (default: the embedded model)"},
    {"devices", cmd_devices, &cmd_devices_spec, "list Vulkan devices and the limits longvk uses"},
    {"attn", cmd_attn, &cmd_attn_spec, "block-wise linear attention on .npy inputs"},
    {"forward", cmd_forward, &cmd_forward_spec, "one DiT forward pass on latents (.npy) for checking a model"},
    {"info", cmd_info, &cmd_info_spec, "describe a model file or folder: architecture, parameters, memory"},
    {"encode-text", cmd_encode_text, &cmd_encode_text_spec, "a prompt through the Gemma-2 text encoder to .npy"},
    {"decode", cmd_decode, &cmd_decode_spec, "decode latents to a video with a VAE"},
    {"encode", cmd_encode, &cmd_encode_spec, "encode a video or an image to latents with a VAE"},
    {"convert", cmd_convert, &cmd_convert_spec, "convert a PyTorch checkpoint to safetensors"},
    {"metrics", cmd_metrics, &cmd_metrics_spec, "temporal-consistency metrics of a video"},
    {"bench", cmd_bench, NULL, "benchmarks: gemm, attn, encode, chunks, vae, text, dit, generate, sp"},
};
const int cli_command_count = (int)(sizeof cli_commands / sizeof cli_commands[0]);
