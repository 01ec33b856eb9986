/* The arithmetic peaks of known GPUs, for "fraction of peak" in `bench gemm` and `bench dit`.
 *
 * Dense figures only (the datasheets' tensor numbers "with sparsity" are twice these), at the
 * boost clock the vendor quotes; a card under power or thermal limits runs below them, so a
 * fraction of 0.8 may already be the card's real ceiling. The half-precision figure is the
 * tensor-core rate with fp32 accumulation (what longvk's kernels would use); fp16 and bf16
 * are equal on every card listed. Names are matched as substrings of the Vulkan device name,
 * most specific first. Anything else (lavapipe, integrated GPUs) has no entry: "peak unknown". */
#include <stdio.h>
#include <string.h>

#include "bench.h"

static const bench_peak peaks[] = {
    /* NVIDIA H100 Tensor Core GPU datasheet (2023): PCIe FP32 51 TF, BF16/FP16 1,513 TF sparse */
    {"H100 PCIe", "NVIDIA H100 PCIe", 51.0, 756.0, "NVIDIA H100 datasheet (PCIe)"},
    /* same datasheet: H100 NVL FP32 60 TF, BF16/FP16 1,671 TF sparse */
    {"H100 NVL", "NVIDIA H100 NVL", 60.0, 835.5, "NVIDIA H100 datasheet (NVL)"},
    /* NVIDIA H200 datasheet: H200 NVL FP32 60 TF, BF16/FP16 1,671 TF sparse */
    {"H200 NVL", "NVIDIA H200 NVL", 60.0, 835.5, "NVIDIA H200 datasheet (NVL)"},
    /* NVIDIA GH200 datasheet: the Hopper GPU's FP32 67 TF, BF16/FP16 tensor 990 TF dense */
    {"GH200", "NVIDIA GH200", 67.0, 989.4, "NVIDIA GH200 datasheet"},
    /* H100 datasheet: SXM5 FP32 67 TF, BF16/FP16 1,979 TF sparse (989.4 dense); Vulkan calls the
     * SXM part "NVIDIA H100 80GB HBM3" */
    {"H100", "NVIDIA H100 SXM", 67.0, 989.4, "NVIDIA H100 datasheet (SXM5)"},
    /* H200 datasheet: SXM FP32 67 TF, BF16/FP16 1,979 TF sparse (the H100 SXM's compute) */
    {"H200", "NVIDIA H200 SXM", 67.0, 989.4, "NVIDIA H200 datasheet (SXM)"},
    /* NVIDIA A100 datasheet: FP32 19.5 TF, BF16/FP16 tensor 312 TF dense (SXM and PCIe alike) */
    {"A100", "NVIDIA A100", 19.5, 312.0, "NVIDIA A100 datasheet"},
    /* NVIDIA L40S datasheet: FP32 91.6 TF, BF16/FP16 tensor 362.05 TF dense (733 sparse) */
    {"L40S", "NVIDIA L40S", 91.6, 362.05, "NVIDIA L40S datasheet"},
    /* NVIDIA Ada Lovelace architecture whitepaper, table 1: RTX 4090 FP32 82.6 TF; FP16/BF16
     * tensor with FP32 accumulate 165.2 TF dense (330.3 with FP16 accumulate) */
    {"RTX 4090", "NVIDIA GeForce RTX 4090", 82.6, 165.2, "NVIDIA Ada Lovelace whitepaper"},
};

const bench_peak *bench_peak_of(const char *device_name) {
    if (!device_name) return NULL;
    /* the laptop part and the 4090 D share the name's stem but not the clocks */
    if (strstr(device_name, "Laptop") || strstr(device_name, "4090 D")) return NULL;
    for (size_t i = 0; i < sizeof peaks / sizeof peaks[0]; i++)
        if (strstr(device_name, peaks[i].match)) return &peaks[i];
    return NULL;
}

double bench_peak_fraction(double tflops, double peak_tflops) {
    return peak_tflops > 0 ? tflops / peak_tflops : -1;
}

const char *bench_json_fraction(char *buf, unsigned size, double fraction) {
    if (fraction < 0) snprintf(buf, size, "null");
    else snprintf(buf, size, "%.4f", fraction);
    return buf;
}
