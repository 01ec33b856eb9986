/* `longvk generate`: a video from a prompt, block by block, with progress, Ctrl-C that
 * closes the file properly, and --resume. */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "commands.h"
#include "longvk.h"
#include "longvk/generate.h"

static volatile sig_atomic_t interrupted = 0;

static void on_sigint(int sig) {
    (void)sig;
    if (interrupted) _exit(130); /* a second Ctrl-C: stop now (flushed blocks still play) */
    interrupted = 1;
    static const char msg[] = "\nlongvk generate: stopping after the current block (Ctrl-C again stops at once)\n";
    ssize_t w = write(STDERR_FILENO, msg, sizeof msg - 1); /* async-signal-safe */
    (void)w;
}

/* --help states the embedded model's real defaults (its card). */
static void usage(FILE *out) {
    lv_model_card card;
    if (lv_model_card_of(NULL, &card) != LV_OK) lv_model_card_longsana(&card);
    const lv_model_card c = card;
    const lv_block_recipe *fb = &c.first_block;
    const lv_block_recipe *lb = &c.later_blocks;
    char later[256], guided[64];
    cli_cfg_where(lb, guided, sizeof guided);
    snprintf(later, sizeof later, "%d %s steps%s, CFG %g%s", lb->steps, cli_sampler_name(lb->sampler),
             lb->warm_start ? " from the\n                             previous block's last frame" : "",
             lb->cfg_scale, guided);
    char cached[32];
    if (c.cached_blocks < 0) snprintf(cached, sizeof cached, "all");
    else snprintf(cached, sizeof cached, "%d", c.cached_blocks);
    fprintf(out,
            "usage: longvk generate -p PROMPT -o OUT.mp4 [options]\n"
            "\n"
            "Generates a video block by block with the carried linear-attention state, so memory\n"
            "and time per block stay constant however long the video is. Finished blocks go to\n"
            "the file at once; Ctrl-C finishes the current block, closes the file (it plays) and\n"
            "tells how to resume.\n"
            "\n"
            "  -p, --prompt TEXT          what to show (default model: colours, shapes, counts,\n"
            "                             motion and background words; `longvk info` lists them)\n"
            "  -n, --negative-prompt TEXT used when --cfg-scale is not 1 (default: empty)\n"
            "  --seconds S                length in seconds (default 60)\n"
            "  --frames N                 length in frames (overrides --seconds)\n"
            "  --fps F                    frames per second (default: the model's, %g)\n"
            "  -W, --width N              model width in pixels (default: the model's, %d)\n"
            "  -H, --height N             model height in pixels (default: the model's, %d)\n"
            "  --scale K                  upscale K times when encoding (default 8: %dx%d)\n"
            "  --steps N                  denoising steps of each block after the first (default\n"
            "                             and most: the model's, %d, fewer take a subset of its\n"
            "                             timesteps; single clip: 50). The first block, made\n"
            "                             from the text alone, follows the model's own recipe\n"
            "                             (%d %s steps, CFG %g), as does every block when\n"
            "                             --cached-blocks is 0;\n"
            "                             later blocks: %s\n"
            "  --sampler NAME             longsana (default: block by block, any length), or a\n"
            "                             single clip of every frame at once for base models:\n"
            "                             euler or dpm++2m (flow matching, shifted time grid)\n"
            "  --shift S                  single clip: time-grid shift (default 8)\n"
            "  --cfg-scale G              classifier-free guidance for every block (default: the\n"
            "                             model's, %g after the first block; 1 = off; single\n"
            "                             clip: 6)\n"
            "  -s, --seed N               random seed (default 42); same seed, same device:\n"
            "                             identical frames\n"
            "  --block-frames N           frames per block (default: the model's, %d)\n"
            "  --cached-blocks K          attend to the last K blocks (default: the model's, %s);\n"
            "                             all: every earlier block; 0: no carried state at all\n"
            "                             (each block alone: shows what the state buys)\n"
            "  --burn-in-blocks N         blocks made before the first written frame and dropped\n"
            "                             (default: the model's, %d = %g s): the first block,\n"
            "                             drawn from the text alone, is the model's weakest; the\n"
            "                             blocks that continue it settle its objects and colours.\n"
            "                             0 writes it; none with --cached-blocks 0\n"
            "  --model FILE               model weights (default: the embedded model)\n"
            "  --text-embeds FILE         latent-space models (SANA-Video): prompt embeddings,\n"
            "                             safetensors with y [L, caption] and mask [L]\n"
            "                             (negative_y / negative_mask for --cfg-scale)\n"
            "  --vae FILE                 latent-space models: Wan2.1 VAE (.pth or .safetensors)\n"
            "                             to decode the latents block by block; without it the\n"
            "                             latents are written to -o, which must end in .npy\n"
            "  --codec NAME               libx264, ffv1, libvpx-vp9, av1, ... (default: by container)\n"
            "  --crf N                    quality (default: the codec's, 18 for libx264)\n"
            "  --preset NAME              encoder preset (default: medium for libx264)\n"
            "  --resume                   continue an interrupted run (same options) from\n"
            "                             OUT.longvk-state\n"
            "  --device N                 Vulkan device (see `longvk devices`)\n"
            "  --cpu-threads N            CPU device (lavapipe) only: worker threads; 0 runs every\n"
            "                             kernel on lavapipe's own thread (default: 0 for small\n"
            "                             models such as the embedded one, whose kernels are\n"
            "                             shorter than a hand-off to workers; else one per core).\n"
            "                             LP_NUM_THREADS, when set, wins\n"
            "  --parallel-cfg on|off      run CFG's unconditional passes on a second context and\n"
            "                             thread, beside the conditional ones (default: on for a\n"
            "                             CPU device with 2+ cores running kernels inline, see\n"
            "                             --cpu-threads); the frames are the same either way,\n"
            "                             the model's device memory twice\n"
            "  -q, --quiet                no progress on stderr\n"
            "  -o, --output FILE          .mp4, .mkv or .webm (required)\n",
            c.fps, c.width, c.height, 8 * c.width, 8 * c.height, c.later_blocks.steps, fb->steps,
            cli_sampler_name(fb->sampler), fb->cfg_scale, later, c.later_blocks.cfg_scale, c.block_frames,
            cached, c.burn_in_blocks, c.burn_in_blocks * c.block_frames / c.fps);
    lv_model_card_free(&card);
}

typedef struct cli_state {
    int quiet;
    int last_len;
    int tty;             /* stderr is a terminal: one line redrawn; else a line per 10% of the
                            frames, and one at least every 3 s (the burn-in writes no frame) */
    int last_decile;
    double last_line;    /* lv_generate_progress.seconds of the last line printed */
    lv_generate_progress last;
    char device[256]; /* last.device points into the context, gone after lv_generate */
} cli_state;

static void on_progress(void *user, const lv_generate_progress *p) {
    cli_state *st = user;
    st->last = *p;
    snprintf(st->device, sizeof st->device, "%s", p->device ? p->device : "?");
    if (st->quiet) return;
    int decile = p->frames_total > 0 ? (int)(10 * p->frames_done / p->frames_total) : 0;
    if (!st->tty && p->block > 1 && decile == st->last_decile && p->block != p->blocks &&
        p->seconds - st->last_line < 3.0)
        return;
    st->last_decile = decile;
    st->last_line = p->seconds;
    int eta = (int)lround(p->eta_seconds);
    const char *what = p->block <= p->burn_in_blocks ? "burn-in block" : "block";
    st->last_len = fprintf(stderr, "%s%s %d/%d  frames %lld/%lld  %.1f frames/s  ETA %d:%02d  state %.1f KiB%s",
                           st->tty ? "\r" : "", what, p->block, p->blocks, (long long)p->frames_done,
                           (long long)p->frames_total, p->frames_per_second, eta / 60, eta % 60,
                           (double)p->state_bytes / 1024, st->tty ? " " : "\n");
    fflush(stderr);
}

static void on_warning(void *user, const char *message) {
    (void)user;
    fprintf(stderr, "longvk generate: warning: %s\n", message);
}

int cmd_generate(int argc, char **argv) {
    lv_generate_options o;
    lv_generate_options_default(&o);
    o.seed = 42;
    o.scale = 8;
    double seconds = 60;
    long frames = -1, v;
    double d;
    cli_state st = {.tty = isatty(STDERR_FILENO), .last_decile = -1};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) { st.quiet = 1; continue; }
        if (!strcmp(a, "--resume")) { o.resume = true; continue; }
        if (!val) {
            fprintf(stderr, "longvk generate: %s needs a value (see --help)\n", a);
            return 2;
        }
        i++;
        if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) o.prompt = val;
        else if (!strcmp(a, "-n") || !strcmp(a, "--negative-prompt")) o.negative_prompt = val;
        else if (!strcmp(a, "-o") || !strcmp(a, "--output")) o.output = val;
        else if (!strcmp(a, "--model")) o.model_path = val;
        else if (!strcmp(a, "--text-embeds")) o.text_embeds_path = val;
        else if (!strcmp(a, "--sampler")) {
            if (!strcmp(val, "longsana")) o.sampler = LV_GEN_LONGSANA;
            else if (!strcmp(val, "euler")) o.sampler = LV_GEN_EULER;
            else if (!strcmp(val, "dpm++2m") || !strcmp(val, "dpmpp2m")) o.sampler = LV_GEN_DPMPP_2M;
            else {
                fprintf(stderr, "longvk generate: --sampler '%s': longsana, euler or dpm++2m\n", val);
                return 2;
            }
        } else if (!strcmp(a, "--shift")) {
            if (!cli_parse_double(a, val, &o.shift)) return 2;
            if (!(o.shift > 0)) {
                fprintf(stderr, "longvk generate: --shift must be > 0\n");
                return 2;
            }
        }
        else if (!strcmp(a, "--vae")) o.vae_path = val;
        else if (!strcmp(a, "--codec")) o.encoder.codec = val;
        else if (!strcmp(a, "--preset")) o.encoder.preset = val;
        else if (!strcmp(a, "--seconds")) {
            if (!cli_parse_double(a, val, &seconds)) return 2;
            if (!(seconds > 0 && seconds <= 24 * 3600)) {
                fprintf(stderr, "longvk generate: --seconds must be in (0, 86400]\n");
                return 2;
            }
        } else if (!strcmp(a, "--fps")) {
            if (!cli_parse_double(a, val, &d)) return 2;
            if (!(d > 0 && d <= 240)) {
                fprintf(stderr, "longvk generate: --fps must be in (0, 240]\n");
                return 2;
            }
            o.fps = d;
        } else if (!strcmp(a, "--cfg-scale")) {
            if (!cli_parse_double(a, val, &o.cfg_scale)) return 2;
            if (o.cfg_scale < 0) {
                fprintf(stderr, "longvk generate: --cfg-scale must be >= 0\n");
                return 2;
            }
        } else if (!strcmp(a, "--frames")) { if (!cli_parse_int(a, val, 1, 10000000, &frames)) return 2; }
        else if (!strcmp(a, "-W") || !strcmp(a, "--width")) { if (!cli_parse_int(a, val, 1, 8192, &v)) return 2; o.width = (int)v; }
        else if (!strcmp(a, "-H") || !strcmp(a, "--height")) { if (!cli_parse_int(a, val, 1, 8192, &v)) return 2; o.height = (int)v; }
        else if (!strcmp(a, "--scale")) { if (!cli_parse_int(a, val, 1, 64, &v)) return 2; o.scale = (int)v; }
        else if (!strcmp(a, "--steps")) { if (!cli_parse_int(a, val, 1, 64, &v)) return 2; o.steps = (int)v; }
        else if (!strcmp(a, "-s") || !strcmp(a, "--seed")) { if (!cli_parse_int(a, val, 0, 2147483647, &v)) return 2; o.seed = (uint64_t)v; }
        else if (!strcmp(a, "--block-frames")) { if (!cli_parse_int(a, val, 1, 1024, &v)) return 2; o.block_frames = (int)v; }
        else if (!strcmp(a, "--cached-blocks")) {
            if (!strcmp(val, "all")) o.cached_blocks = LV_CACHED_ALL;
            else if (!cli_parse_int(a, val, 0, 1024, &v)) return 2;
            else o.cached_blocks = (int)v;
        }
        else if (!strcmp(a, "--burn-in-blocks")) {
            if (!cli_parse_int(a, val, 0, LV_CARD_MAX_BURN_IN, &v)) return 2;
            o.burn_in_blocks = (int)v;
        }
        else if (!strcmp(a, "--crf")) { if (!cli_parse_int(a, val, 0, 63, &v)) return 2; o.encoder.crf = (int)v; }
        else if (!strcmp(a, "--device")) { if (!cli_parse_int(a, val, 0, 64, &v)) return 2; o.device_index = (int)v; }
        else if (!strcmp(a, "--cpu-threads")) { if (!cli_parse_int(a, val, 0, 1024, &v)) return 2; o.cpu_threads = (int)v; }
        else if (!strcmp(a, "--parallel-cfg")) {
            if (!strcmp(val, "on")) o.parallel_cfg = 1;
            else if (!strcmp(val, "off")) o.parallel_cfg = 0;
            else {
                fprintf(stderr, "longvk generate: --parallel-cfg '%s': on or off\n", val);
                return 2;
            }
        }
        else {
            fprintf(stderr, "longvk generate: unknown option '%s' (see --help)\n", a);
            return 2;
        }
    }
    if (!o.prompt || !o.output) {
        fprintf(stderr, "longvk generate: -p PROMPT and -o OUTPUT are required (see --help)\n");
        return 2;
    }
    o.frames = frames > 0 ? (int)frames : 0;
    o.seconds = seconds;

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    lv_status s = lv_generate(&o, on_progress, on_warning, &st, &interrupted);
    if (!st.quiet && st.last_len && st.tty) fputc('\n', stderr);
    if (s == LV_ERR_INTERRUPTED) {
        fprintf(stderr, "longvk generate: %s.\nresume with the same command and --resume\n", lv_last_error());
        return 130;
    }
    if (s != LV_OK) return cli_fail("generate");
    if (!st.quiet) {
        char state[64] = "no carried state";
        if (st.last.state_bytes) snprintf(state, sizeof state, "carried state %.1f KiB", (double)st.last.state_bytes / 1024);
        if (st.last.frames_resumed > 0) /* this run made only the frames after the kept ones */
            fprintf(stderr, "wrote %s: %lld frames, %lld kept from the interrupted run and %lld made in %.1f s "
                    "(%.1f frames/s on %s), %s\n", o.output, (long long)st.last.frames_done,
                    (long long)st.last.frames_resumed, (long long)(st.last.frames_done - st.last.frames_resumed),
                    st.last.seconds, st.last.frames_per_second, st.device, state);
        else
            fprintf(stderr, "wrote %s: %lld frames in %.1f s (%.1f frames/s on %s), %s\n", o.output,
                    (long long)st.last.frames_done, st.last.seconds, st.last.frames_per_second, st.device, state);
    }
    return 0;
}
