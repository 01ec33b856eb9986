/* The device-memory plan printed: the phases, the parts of the DiT's, the peak and the budget. */
#include "plan_print.h"

#include "longvk/engine.h"

static double mib(uint64_t b) { return (double)b / (1 << 20); }

static const char *weights_name(int rule, lv_dtype stored) {
    switch (rule) {
    case LV_DIT_WEIGHTS_F32: return "f32";
    case LV_DIT_WEIGHTS_F16: return "f16";
    case LV_DIT_WEIGHTS_BF16: return "bf16";
    case LV_DIT_WEIGHTS_Q8_0: return "q8_0";
    case LV_DIT_WEIGHTS_Q4_K: return "q4_K";
    default: return lv_dtype_name(stored);
    }
}

static const char *precision_name(lv_precision p) {
    return p == LV_PRECISION_F16 ? "f16" : p == LV_PRECISION_BF16 ? "bf16" : "f32";
}

void cli_print_plan(FILE *out, const lv_generate_plan *p, const char *text_what, const char *vae_what) {
    const lv_dit_memory_plan *d = &p->dit;
    const uint64_t with_dit = lv_gen_plan_dit_phase(p);
    fprintf(out, "device memory plan on %s (MiB; nothing uploaded):\n", p->device);
    if (text_what)
        fprintf(out, "  text encoder phase  %10.1f  %s: weights and a pass's work buffers, freed before the DiT\n",
                mib(p->text), text_what);
    if (p->text_prompts) /* a schedule's rows stay on the host, not the device */
        fprintf(out, "  (host) the rows     %10.1f  of the schedule's %d distinct prompt%s, each encoded once, kept "
                "for the run\n", mib(p->text_rows_host), p->text_prompts, p->text_prompts == 1 ? "" : "s");
    fprintf(out, "  DiT                 %10.1f  (its passes; setting the text %.1f) a %d-frame block of %d x %d, %d text tokens x %d slot%s, weights %s, "
            "activations %s:\n", mib(d->passes), mib(d->set_text), p->chunk_frames, p->grid_h, p->grid_w, p->text_tokens, p->text_slots,
            p->text_slots > 1 ? "s (CFG)" : "", weights_name(p->weights_dtype, p->stored), precision_name(p->precision));
    fprintf(out, "    weights           %10.1f\n", mib(d->weights));
    fprintf(out, "    carried state     %10.1f  (with its working slots and conv caches)\n", mib(d->state));
    fprintf(out, "    text keys/values  %10.1f\n", mib(d->text));
    fprintf(out, "    conditioning      %10.1f  (the timestep cache, full)\n", mib(d->conditioning));
    fprintf(out, "    a pass's tensors  %10.1f  (patches, x, rope, the conditioning's scratch)\n", mib(d->pass));
    fprintf(out, "    one block's       %10.1f  (its temporaries, released at its end; the final layer's %.1f)\n",
            mib(d->block), mib(d->final_layer));
    if (p->twin) fprintf(out, "  CFG twin's DiT      %10.1f  (its passes on a second context: the same again)\n", mib(p->twin));
    if (vae_what) fprintf(out, "  VAE decoder         %10.1f  %s: weights, causal history, a step's work buffers\n",
                          mib(p->vae), vae_what);
    fprintf(out, "  DiT phase           %10.1f  (the DiT%s%s at once)\n", mib(with_dit), p->twin ? ", its twin" : "",
            vae_what ? " and the VAE" : "");
    fprintf(out, "  peak                %10.1f  (%.2f GiB: the %s phase)\n", mib(p->peak),
            (double)p->peak / (1 << 30), p->text > with_dit ? "text encoder's" : "DiT's");
    fprintf(out, "  budget              %10.1f  (%s)%s\n", mib(p->budget),
            lv_env_str("LONGVK_DEVICE_BUDGET") ? "LONGVK_DEVICE_BUDGET" : "the device's largest device-local heap, or on a CPU device the host's memory",
            p->peak <= p->budget ? ": fits" : ": does NOT fit");
}
