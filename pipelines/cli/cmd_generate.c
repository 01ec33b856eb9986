/* `longvk generate`: a video from a prompt, block by block, with progress, Ctrl-C that
 * closes the file properly, and --resume. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli_mpi.h"
#include "commands.h"
#include "longvk.h"
#include "longvk/files.h"
#include "longvk/generate.h"
#include "plan_print.h"
#include "prompts_reader.h"

static volatile sig_atomic_t interrupted = 0;
/* what a stop signal prints (set before the handler is installed: async-signal-safe) */
static char stop_message[1400] = "\nlongvk generate: stopping after the current block (Ctrl-C again stops at once)\n";

/* while Gemma-2 encodes the prompt (one process): a stop ends it after its current layer */
static volatile sig_atomic_t encoding_text = 0;
static const char text_stop_message[] = "\nlongvk generate: stopping the text encoder after its current layer; "
                                        "nothing is written (Ctrl-C again stops at once)\n";

/* SIGINT, SIGTERM and SIGUSR1 (which mpirun forwards to every rank: how a run over ranks is
 * stopped after a block) */
static void on_sigint(int sig) {
    (void)sig;
    if (interrupted) _exit(130); /* a second Ctrl-C: stop now (flushed blocks still play) */
    interrupted = 1;
    const char *m = encoding_text ? text_stop_message : stop_message;
    ssize_t w = write(STDERR_FILENO, m, strlen(m)); /* async-signal-safe */
    (void)w;
}

#define MAX_PROMPT_AT 256

typedef struct generate_args {
    lv_generate_options o;
    lv_gen_switch at[MAX_PROMPT_AT]; /* --prompt-at, in order */
    int n_at;
    const char *schedule;
    const char *prompts_from;
    long seed;
    int sampler;
    int motion_score;
    bool quiet, resume, overwrite, sequence_parallel, cfg_parallel;
    bool dry_run;
} generate_args;

static generate_args args;
static lv_generate_description plan; /* what the run will do (lv_generate_describe), before it starts */

static const cli_choice samplers[] = {
    {"longsana", LV_GEN_LONGSANA}, {"euler", LV_GEN_EULER}, {"dpm++2m", LV_GEN_DPMPP_2M}, {0}};
static const cli_choice sampler_aliases[] = {{"dpmpp2m", LV_GEN_DPMPP_2M}, {0}};
static const cli_choice on_off[] = {{"on", 1}, {"off", 0}, {0}};
static const cli_choice all_blocks[] = {{"all", LV_CACHED_ALL}, {0}};
static const cli_choice on_switch_choices[] = {{"keep", LV_GEN_SWITCH_KEEP}, {"recache", LV_GEN_SWITCH_RECACHE}, {0}};
static const cli_choice continue_outputs[] = {{"whole", LV_GEN_CONTINUE_WHOLE}, {"new", LV_GEN_CONTINUE_NEW}, {0}};

/* --prompt-at TIME=TEXT, repeatable: an entry of the schedule (its time checked by the
 * library against the video's length) */
/* --vae-tiles auto|off|HxW into the options (dest) */
static const char *parse_vae_tiles(const char *value, void *dest) {
    lv_generate_options *o = dest;
    return cli_parse_vae_tiles(value, &o->vae_tiles, &o->vae_tile_h, &o->vae_tile_w);
}

static const char *parse_prompt_at(const char *value, void *dest) {
    (void)dest;
    const char *eq = strchr(value, '=');
    if (!eq) return "is not TIME=PROMPT (5=..., 0:05=..., 80f=...)";
    if (args.n_at >= MAX_PROMPT_AT) return "is one too many (at most 256 --prompt-at)";
    size_t tn = (size_t)(eq - value);
    char *time = malloc(tn + 1), *where = malloc(strlen(value) + 16);
    if (!time || !where) {
        free(time);
        free(where);
        return "cannot be kept: out of memory";
    }
    memcpy(time, value, tn);
    time[tn] = '\0';
    double sec;
    int64_t frames;
    if (!lv_gen_parse_time(time, &sec, &frames)) {
        free(time);
        free(where);
        return value[0] == '-' ? "has a negative time" : "has a time that is not seconds (12.5), mm:ss (1:05.5) or frames (80f)";
    }
    sprintf(where, "--prompt-at %s", value);
    lv_gen_switch *e = &args.at[args.n_at++];
    e->time = time;
    e->prompt = eq + 1;
    e->where = where;
    return NULL;
}

/* --help states the real defaults of the model it names (`--model X --help`, in either order), else of the
 * embedded model (its card): prepare_help writes them here, and in help_note which model they are */
static char def_fps[64], def_width[64], def_height[64], def_scale[128], def_steps[64], def_cfg[128], def_block[64],
    def_cached[64], def_burn_in[64], help_steps[512], help_note[1536];
static const char *help_model; /* the --model beside --help (cmd_generate finds it in argv) */

static cli_option options[] = {
    {.name = "--prompt", .alias = "-p", .kind = CLI_STRING, .dest = &args.o.prompt,
     .help = "what to show (default model: colours, shapes, counts, motion and background words; `longvk info` "
             "lists them); required unless --schedule gives the start or --text-embeds the rows (then not with "
             "it); with a schedule, its entry at time 0"},
    {.name = "--prompt-at", .kind = CLI_CUSTOM, .parse = parse_prompt_at, .metavar = "TIME=TEXT",
     .help = "switch to the prompt TEXT at TIME (repeatable, in time order): seconds (12.5), mm:ss (1:05.5) or "
             "frames (80f). The switch applies from the first frame of the block that holds TIME; progress and "
             "the summary say which block and frame, and OUT.schedule records them (--schedule OUT.schedule with "
             "the same seed makes the same video). Any model with a text encoder (a latent model's Gemma-2 runs "
             "once on each distinct prompt before the DiT is uploaded), over --sequence-parallel ranks or "
             "--sp-emulate bands too; not with --text-embeds"},
    {.name = "--schedule", .kind = CLI_INPUT, .dest = &args.schedule, .metavar = "FILE",
     .help = "a prompt schedule, one entry a line:\n"
             "  TIME | PROMPT [| NEGATIVE PROMPT [| TRANSITION]]\n"
             "TIME as --prompt-at's, TRANSITION in seconds or NNf frames (empty: --transition), '#' starts a "
             "comment. The first entry is at time 0 (or -p gives it). Not with --prompt-at"},
    {.name = "--prompts-from", .kind = CLI_STRING, .dest = &args.prompts_from, .metavar = "FILE",
     .help = "prompts typed while the video is made: a FIFO (mkfifo), a file, or - for stdin, read line by "
             "line during the run. A line is [+SECONDS | @TIME] PROMPT [| NEGATIVE [| TRANSITION]]: PROMPT "
             "from the next block not yet started (never the first block), SECONDS after it, or at TIME of the "
             "video; one switch a block (a later line for the same block replaces it). Empty lines and '#' "
             "comments are ignored; a line that cannot apply (past the end, after the last block started) is "
             "reported and skipped; when the input closes the run goes on with the last prompt. OUT.schedule "
             "records the switches applied (--schedule OUT.schedule, same seed: the same video) and the resume "
             "file too (--resume needs --prompts-from again, /dev/null for no more). The default model only, "
             "one process (with --sequence-parallel, --cfg-parallel or --sp-emulate it is refused)"},
    {.name = "--transition", .kind = CLI_DOUBLE, .dest = &args.o.transition, .metavar = "SECONDS",
     .bounds = CLI_AT_LEAST | CLI_AT_MOST, .lo = 0, .hi = 3600, .def = "0: at once",
     .help = "a switch moves the conditioning from the prompt before to the new one over this time: each block "
             "reads the two prompts' rows interpolated at its middle frame (a switch inside the one before's "
             "transition starts from the mixture in force)"},
    {.name = "--on-switch", .kind = CLI_CHOICE, .dest = &args.o.on_switch, .choices = on_switch_choices,
     .metavar = "keep|recache", .def = "keep",
     .help = "the carried state at a switch: keep, as it was made under the earlier prompts; recache: the write "
             "passes of the last --cached-blocks + 1 finished blocks run again under the switch block's "
             "conditioning, rebuilding the attention state and the conv cache from them (not with --cached-blocks "
             "all, nor with --cfg-parallel)"},
    {.name = "--image", .kind = CLI_INPUT, .dest = &args.o.image_path, .metavar = "IMG",
     .help = "start the video from this picture (PNG, JPEG, WebP; a video's first frame): it is frame 0, held "
             "clean while the rest of the first block is made, and the blocks continue from it (SANA-Video's "
             "image-to-video). Another aspect ratio is centre-cropped, then scaled to the model's size (said when "
             "it happens). No burn-in. A latent model (SANA-Video) encodes it with the VAE's encoder (--vae or the "
             "pipeline's vae/, both halves)"},
    {.name = "--negative-prompt", .alias = "-n", .kind = CLI_STRING, .dest = &args.o.negative_prompt,
     .def = "empty; with a text encoder, SANA-Video's own negative prompt", .help = "used when --cfg-scale is not 1"},
    {.name = "--seconds", .kind = CLI_DOUBLE, .dest = &args.o.seconds, .metavar = "S",
     .bounds = CLI_ABOVE | CLI_AT_MOST, .lo = 0, .hi = 24 * 3600, .def = "60", .help = "length in seconds"},
    {.name = "--frames", .kind = CLI_INT, .dest = &args.o.frames, .min = 1, .max = 10000000,
     .help = "length in frames (overrides --seconds)"},
    {.name = "--fps", .kind = CLI_DOUBLE, .dest = &args.o.fps, .metavar = "F", .bounds = CLI_ABOVE | CLI_AT_MOST,
     .lo = 0, .hi = 240, .def = def_fps, .help = "frames per second"},
    {.name = "--width", .alias = "-W", .kind = CLI_INT, .dest = &args.o.width, .min = 1, .max = 8192,
     .def = def_width, .help = "model width in pixels"},
    {.name = "--height", .alias = "-H", .kind = CLI_INT, .dest = &args.o.height, .min = 1, .max = 8192,
     .def = def_height, .help = "model height in pixels"},
    {.name = "--scale", .kind = CLI_INT, .dest = &args.o.scale, .metavar = "K", .min = 1, .max = 64,
     .def = def_scale, .help = "upscale K times when encoding"},
    {.name = "--steps", .kind = CLI_INT, .dest = &args.o.steps, .min = 1, .max = 64, .def = def_steps,
     .help = help_steps},
    {.name = "--sampler", .kind = CLI_CHOICE, .dest = &args.sampler, .metavar = "NAME", .choices = samplers, .aliases = sampler_aliases,
     .help = "longsana (default: block by block, any length), or a single clip of every frame at once for base "
             "models: euler or dpm++2m (flow matching, shifted time grid)"},
    {.name = "--shift", .kind = CLI_DOUBLE, .dest = &args.o.shift, .metavar = "S", .bounds = CLI_ABOVE, .lo = 0,
     .def = "8", .help = "single clip: time-grid shift"},
    {.name = "--cfg-scale", .kind = CLI_DOUBLE, .dest = &args.o.cfg_scale, .metavar = "G", .bounds = CLI_AT_LEAST,
     .lo = 0, .def = def_cfg, .help = "classifier-free guidance for every block"},
    {.name = "--seed", .alias = "-s", .kind = CLI_LONG, .dest = &args.seed, .min = 0, .max = 2147483647,
     .def = "42", .help = "random seed; same seed, same device: identical frames"},
    {.name = "--block-frames", .kind = CLI_INT, .dest = &args.o.block_frames, .min = 1, .max = 1024,
     .def = def_block, .help = "frames per block"},
    {.name = "--cached-blocks", .kind = CLI_INT, .dest = &args.o.cached_blocks, .metavar = "K|all", .min = 0,
     .max = 1024, .choices = all_blocks, .def = def_cached,
     .help = "attend to the last K blocks\nall: every earlier block; 0: no carried state at all (each block "
             "alone: shows what the state buys)"},
    {.name = "--burn-in-blocks", .kind = CLI_INT, .dest = &args.o.burn_in_blocks, .min = 0,
     .max = LV_CARD_MAX_BURN_IN, .def = def_burn_in,
     .help = "blocks made before the first written frame and dropped: the first block, drawn from the text "
             "alone, is the model's weakest; the blocks that continue it settle its objects and colours. 0 "
             "writes it; none with --cached-blocks 0"},
    {.name = "--model", .kind = CLI_INPUT, .dest = &args.o.model_path, .metavar = "PATH", .def = "the embedded model",
     .help = "model weights: a file, a transformer folder, or a diffusers pipeline folder (model_index.json; its "
             "text_encoder/, tokenizer/ and vae/ serve where --text-encoder, --tokenizer and --vae are not given)"},
    {.name = "--text-encoder", .kind = CLI_INPUT, .dest = &args.o.text_encoder_path, .metavar = "DIR",
     .help = "latent-space models (SANA-Video): the Gemma-2 text encoder (a Hugging Face folder or weights file); "
             "it runs before the DiT and is freed before the DiT is uploaded"},
    {.name = "--tokenizer", .kind = CLI_INPUT, .dest = &args.o.tokenizer_path, .metavar = "FILE",
     .def = "tokenizer.model in --text-encoder's folder, its tokenizer/, or ../tokenizer/",
     .help = "the text encoder's SentencePiece tokenizer.model"},
    {.name = "--softcap", .kind = CLI_CHOICE, .dest = &args.o.text_softcap, .choices = on_off, .def = "off",
     .help = "the text encoder's attention soft-cap; off is what SANA-Video's own runs do (transformers' sdpa "
             "attention ignores it)"},
    {.name = "--text-weights-dtype", .kind = CLI_CHOICE, .dest = &args.o.text_weights_dtype,
     .choices = cli_weight_dtypes, .aliases = cli_weight_dtype_aliases, .def = "as-stored", .metavar = "as-stored|f32|f16|bf16|q8_0|q4_K",
     .help = "the text encoder's matrix weights (q, k, v, o, gate, up, down) on the device, as --weights-dtype "
             "for the DiT: converted, or quantized on load as ggml's q8_0 / q4_K (the embedding and the norms as "
             "stored; q4_K falls back to q8_0 where rows are not whole blocks of 256); a GGUF's quantized "
             "matrices stay as they are. Gemma-2's only: with the default model's word tables or --text-embeds "
             "it changes nothing (a warning says so)"},
    {.name = "--motion-score", .kind = CLI_INT, .dest = &args.motion_score, .metavar = "N", .min = 0, .max = 1000,
     .def = "10", .help = "with a text encoder: \" motion score: N.\" appended to the prompt, as SANA-Video's "
                          "inference does; 0 appends nothing"},
    {.name = "--text-embeds", .kind = CLI_INPUT, .dest = &args.o.text_embeds_path,
     .help = "latent-space models: prompt embeddings instead of a text encoder, safetensors with y [L, caption] "
             "and mask [L] (negative_y / negative_mask for --cfg-scale), as --save-text-embeds writes them; "
             "instead of -p and -n, which are refused beside it (they would not be read)"},
    {.name = "--save-text-embeds", .kind = CLI_OUTPUT, .dest = &args.o.text_embeds_out, .metavar = "FILE",
     .help = "write the prompt rows the DiT reads (and the negative prompt's with CFG) to this safetensors file, "
             "for --text-embeds; with a schedule the first entry's as these, every other distinct prompt's as "
             "textN.y, textN.mask, ... and the metadata schedule_texts (each entry's N)"},
    {.name = "--vae", .kind = CLI_INPUT, .dest = &args.o.vae_path,
     .help = "latent-space models: Wan2.1 VAE (.pth or .safetensors, or a pipeline's vae/ folder) to decode the "
             "latents block by block; without it (or with -o X.npy) the latents are written to -o, which must end "
             "in .npy; its encoder half serves --image and --continue"},
    {.name = "--vae-tiles", .kind = CLI_CUSTOM, .dest = &args.o, .parse = parse_vae_tiles, .metavar = "auto|off|HxW",
     .def = "auto",
     .help = "with --vae: decode in spatial tiles of HxW latent pixels (8 pixels each; neighbours overlap by half "
             "the smaller side, at most 8), each tile keeping its own causal history across the blocks (in host "
             "memory) and the tiles blended into the frame: the device holds one tile's decoder. auto tiles only "
             "when the untiled decode would not fit the device's largest heap minus what the run holds "
             "(LONGVK_VAE_BUDGET=BYTES sets the budget), choosing the largest square tiles that fit; off never. "
             "Tiled frames differ from untiled ones near the seams (pipelines/generate/README.md)"},
    {.name = "--codec", .kind = CLI_STRING, .dest = &args.o.encoder.codec, .metavar = "NAME",
     .def = "by container",
     .help = "libx264, libx265, ffv1 (.mkv), libvpx-vp9, av1 (libsvtav1) or libaom-av1"},
    {.name = "--crf", .kind = CLI_INT, .dest = &args.o.encoder.crf, .min = 0, .max = 63,
     .def = "the codec's, 18 for libx264", .help = "quality"},
    {.name = "--preset", .kind = CLI_STRING, .dest = &args.o.encoder.preset, .metavar = "NAME",
     .def = "medium for libx264", .help = "encoder preset"},
    {.name = "--continue", .kind = CLI_INPUT, .dest = &args.o.continue_path, .metavar = "VIDEO",
     .help = "continue this clip: its frames are brought into the model's space (centre-cropped to the model's "
             "aspect, box-averaged to its size) and committed block by block to the carried state (the last "
             "--cached-blocks + 1 blocks; every block, and the burn-in before them, with --cached-blocks all), "
             "then --seconds / --frames of new frames follow as an uninterrupted run would make them (noise, "
             "positions, warm start). The prompt may differ from the clip's. A latent model encodes the clip with "
             "the VAE's encoder (its 1 + 4k frames to 1 + k latent frames; up to 3 more are not used) and its "
             "decoder goes on from the clip's latents"},
    {.name = "--continue-output", .kind = CLI_CHOICE, .dest = &args.o.continue_output, .choices = continue_outputs,
     .metavar = "whole|new", .def = "whole",
     .help = "with --continue: whole writes the clip's frames, then the new ones (the clip made longer, and a clip "
             "to continue again; the clip re-encoded with --codec); new writes the new frames only"},
    {.name = "--resume", .kind = CLI_FLAG, .dest = &args.resume,
     .help = "continue an interrupted run (same options) from OUT.longvk-state, with the frames of an "
             "uninterrupted run: the embedded model and other pixel-space models, and latent models (SANA-Video) "
             "writing a video through the VAE (whose last latent frames are decoded again first); not a single "
             "clip (--sampler euler|dpm++2m) nor a .npy of latents (written only at the end). An HLS stream (.m3u8) "
             "continues from the last segment its playlist names"},
    {.name = "--overwrite", .kind = CLI_FLAG, .dest = &args.overwrite,
     .help = "start again when OUT.longvk-state says an interrupted run left OUT: its video and state are "
             "replaced (without --resume or --overwrite such a run is refused, so that a partial video is "
             "never lost by accident)"},
    {.name = "--dry-run", .kind = CLI_FLAG, .dest = &args.dry_run,
     .help = "print the device-memory plan (per phase: text encoder, DiT, VAE; the peak against the device's "
             "budget) and exit: nothing uploaded, nothing written. Without it a run whose plan does not fit "
             "is refused before any upload (exit 1), naming the settings that would fit"},
    CLI_DEVICE_OPTION(&args.o.device_index),
    {.name = "--cpu-threads", .kind = CLI_INT, .dest = &args.o.cpu_threads, .min = 0, .max = 1024,
     .help = "CPU device (lavapipe) only: worker threads; 0 runs every kernel on lavapipe's own thread (default: "
             "0 for small models such as the embedded one, whose kernels are shorter than a hand-off to "
             "workers; else one per core). LP_NUM_THREADS, when set, wins"},
    {.name = "--weights-dtype", .kind = CLI_CHOICE, .dest = &args.o.weights_dtype, .choices = cli_weight_dtypes, .aliases = cli_weight_dtype_aliases,
     .def = "as-stored", .metavar = "as-stored|f32|f16|bf16|q8_0|q4_K",
     .help = "the DiT's matrix weights on the device: as the file stores them, or converted (f16/bf16 halve "
             "an f32 file's memory), or quantized on load as ggml's q8_0 / q4_K (about 1/4 and 1/7; rows not "
             "whole blocks of 32 / 256 fall back: q4_K to q8_0, q8_0 to the file's dtype)"},
    {.name = "--precision", .kind = CLI_CHOICE, .dest = &args.o.precision, .choices = cli_precisions,
     .def = "f32, or LONGVK_PRECISION",
     .help = "the DiT's activations that feed matrix products and the Mix-FFN's convs: f32, or stored as "
             "f16 or bf16 (half their memory, computed in f32; the residual stream, norms and attention stay "
             "f32; f16 also puts the f32-input products on the tensor cores of a device that offers them, "
             "see `longvk devices`); f16 also stores the VAE decoder's activations and causal history in f16 "
             "(about half its memory, computed in f32; bf16 leaves the VAE in f32)"},
    {.name = "--parallel-cfg", .kind = CLI_CHOICE, .dest = &args.o.parallel_cfg, .choices = on_off,
     .help = "run CFG's unconditional passes on a second context and thread, beside the conditional ones "
             "(default: LONGVK_PARALLEL_CFG, else on for a CPU device with 2+ cores running kernels inline, "
             "see --cpu-threads); the "
             "frames are the same either way, the model's device memory twice; off with --sp-emulate, "
             "--sequence-parallel and --cfg-parallel"},
    CLI_SEQUENCE_PARALLEL_OPTION(&args.sequence_parallel,
        "run by every rank of `mpirun -np R`: one band of token rows per rank (per rank of a group with "
        "--cfg-parallel), each on its own device " CLI_SP_RANK_DEVICE "; with --vae each rank also decodes "
        "its band of latent rows; rank 0 writes the video and the resume file and prints progress, the others "
        "print only errors; the frames of --sp-emulate R. `kill -USR1` to mpirun stops every rank after the "
        "same block (Ctrl-C on mpirun kills the job: --resume continues from the last block). --parallel-cfg "
        "is off (" CLI_SP_NEEDS_MPI ")"),
    {.name = "--cfg-parallel", .kind = CLI_FLAG, .dest = &args.cfg_parallel,
     .help = "run by every rank of `mpirun -np W` (W even): the first W/2 ranks run the conditional passes of "
             "CFG's guided steps, the others the unconditional ones, and each swaps its prediction with its "
             "partner; with --sequence-parallel each half splits the token rows into W/2 bands. The frames of "
             "one process (or of --sp-emulate W/2). For runs with CFG (the default model's; not LongSANA's "
             "recipe, which has none); " CLI_SP_NEEDS_MPI},
    CLI_SP_EMULATE_OPTION(&args.o.sp_bands,
        "sequence parallelism emulated on this device: every pass's token rows in R bands, each computed as one "
        "rank would (R <= the token rows, height / 4 for the default model), and with --vae the latent rows of "
        "every decoded chunk too; the reference for --sequence-parallel. --parallel-cfg is off"),
    {.name = "--quiet", .alias = "-q", .kind = CLI_FLAG, .dest = &args.quiet, .help = "no progress on stderr"},
    {.name = "--output", .alias = "-o", .kind = CLI_OUTPUT, .dest = &args.o.output, .required = true,
     .help = ".mp4, .mkv or .webm (.npy for the latents of a latent-space model without --vae), or .m3u8: an HLS "
             "stream to watch while it is made (fragmented-MP4 segments of 2 s beside it, the playlist naming "
             "complete ones only; --resume continues it from the last segment the playlist names)"},
};

static void prepare_help(void) {
    lv_model_card card;
    /* the model's card only: its file's header and metadata are read, no device, no weights uploaded */
    const char *model = help_model ? help_model : args.o.model_path;
    bool named = model && lv_model_card_of(model, &card) == LV_OK;
    if (model && !named)
        snprintf(help_note, sizeof help_note, "--model %s could not be read (%s): the defaults above are the "
                 "embedded model's.\n", model, lv_last_error());
    else if (named)
        snprintf(help_note, sizeof help_note, "The defaults above are those of --model %s (%s).\n", model,
                 card.pixel ? "a pixel-space model" : "a latent-space model");
    else
        snprintf(help_note, sizeof help_note, "The defaults above are the embedded model's; `longvk generate "
                 "--model X --help` shows those of model X.\n");
    if (!named && lv_model_card_of(NULL, &card) != LV_OK) lv_model_card_longsana(&card);
    const lv_model_card c = card;
    const lv_block_recipe *fb = &c.first_block;
    const lv_block_recipe *lb = &c.later_blocks;
    char guided[64], cached[32];
    cli_cfg_where(lb, guided, sizeof guided);
    if (c.cached_blocks < 0) snprintf(cached, sizeof cached, "all");
    else snprintf(cached, sizeof cached, "%d", c.cached_blocks);
    snprintf(def_fps, sizeof def_fps, "the model's, %g", c.fps);
    snprintf(def_width, sizeof def_width, "the model's, %d", c.width);
    snprintf(def_height, sizeof def_height, "the model's, %d", c.height);
    if (named && c.pixel)
        snprintf(def_scale, sizeof def_scale, "8 for this pixel-space model (%dx%d)", 8 * c.width, 8 * c.height);
    else if (named)
        snprintf(def_scale, sizeof def_scale, "1 for this latent model (the VAE's frames as they are)");
    else
        snprintf(def_scale, sizeof def_scale, "8 for the embedded model (%dx%d), 1 for a latent model", 8 * c.width,
                 8 * c.height);
    snprintf(def_steps, sizeof def_steps, "the model's, %d, also the most; single clip: 50", lb->steps);
    snprintf(help_steps, sizeof help_steps,
             "denoising steps of each block after the first; fewer than the model's take a subset of its "
             "timesteps. The first block, made from the text alone, follows the model's own recipe (%d %s "
             "steps, CFG %g), as does every block when --cached-blocks is 0; later blocks: %d %s steps%s, "
             "CFG %g%s",
             fb->steps, cli_sampler_name(fb->sampler), fb->cfg_scale, lb->steps, cli_sampler_name(lb->sampler),
             lb->warm_start ? " from the previous block's last frame" : "", lb->cfg_scale, guided);
    snprintf(def_cfg, sizeof def_cfg, "the model's, %g after the first block; 1 = off; single clip: 6",
             c.later_blocks.cfg_scale);
    snprintf(def_block, sizeof def_block, "the model's, %d", c.block_frames);
    snprintf(def_cached, sizeof def_cached, "the model's, %s", cached);
    snprintf(def_burn_in, sizeof def_burn_in, "the model's, %d = %g s", c.burn_in_blocks,
             c.burn_in_blocks * c.block_frames / c.fps);
    lv_model_card_free(&card);
}

const cli_spec cmd_generate_spec = {
    .command = "generate",
    .usage = "-p PROMPT -o OUT.mp4 [options]",
    .about = "Generates a video block by block with the carried linear-attention state, so memory\n"
             "and time per block stay constant however long the video is. Finished blocks go to\n"
             "the file at once; Ctrl-C finishes the current block, closes the file (it plays),\n"
             "tells how to resume (--resume; not a single clip nor a .npy of latents) and exits\n"
             "130, as does a stop by SIGTERM or SIGUSR1 (what `kill -USR1 <mpirun>` forwards).\n"
             "Before the first frame one line says what the run will do (not with -q).\n",
    .options = options,
    .count = CLI_COUNT(options),
    .epilog = help_note,
    .prepare_help = prepare_help,
};

/* The resume state, OUT.longvk-state, is written as the video grows (and read by --resume):
 * a file the table does not know, so it is checked here against the inputs (and the files
 * an input folder holds) and the outputs. `state`: beside the output's target. */
static int check_state_file(const lv_generate_options *o, const char *state) {
    const char *files[] = {o->model_path, o->text_embeds_path, o->vae_path, o->output, o->text_encoder_path,
                           o->tokenizer_path, o->text_embeds_out, o->image_path, o->continue_path};
    const char *names[] = {"--model", "--text-embeds", "--vae", "--output", "--text-encoder", "--tokenizer",
                           "--save-text-embeds", "--image", "--continue"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++)
        if (files[i] && cli_same_file(state, files[i])) {
            cli_usage_error("generate", "the resume state %s and %s name the same file ('%s'): refusing to "
                            "overwrite it", state, names[i], files[i]);
            return 0;
        }
    return cli_check_output(&cmd_generate_spec, state, "the resume state");
}

/* One writer per output (issue 53): OUT.longvk-lock beside the output's target, held with
 * flock for the whole run. The kernel releases it when the process ends, however it ends
 * (a crash, SIGKILL), so a stale lock file never blocks a later run; the file is removed
 * at the end. A removed-and-recreated file is detected (its inode) and taken again.
 * Returns the descriptor, or -1 after a message: another run holds it (exit 1: nothing is
 * wrong with the command line, the same command works once that run ends). */
static int lock_output(const char *output, const char *lock_path) {
    for (int tries = 0; tries < 16; tries++) {
        int fd = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0) {
            fprintf(stderr, "longvk generate: cannot create the lock file %s: %s\n", lock_path, strerror(errno));
            return -1;
        }
        if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
            int e = errno;
            close(fd);
            if (e == EWOULDBLOCK)
                fprintf(stderr, "longvk generate: %s is being written by another longvk run (it holds %s): two runs "
                        "cannot write one output; wait for it to end or give another -o\n", output, lock_path);
            else
                fprintf(stderr, "longvk generate: cannot lock %s: %s\n", lock_path, strerror(e));
            return -1;
        }
        struct stat held, named;
        if (fstat(fd, &held) == 0 && stat(lock_path, &named) == 0 && held.st_dev == named.st_dev &&
            held.st_ino == named.st_ino)
            return fd;
        close(fd); /* the run that held it removed it meanwhile: lock the new one */
    }
    fprintf(stderr, "longvk generate: cannot lock %s: it keeps being replaced\n", lock_path);
    return -1;
}

static void unlock_output(const char *lock_path, int fd) {
    if (fd < 0) return;
    unlink(lock_path); /* while held: a run waiting on the old file sees it is gone */
    close(fd);
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
    const cli_mpi *mpi;
    int kill_rank, kill_block; /* LONGVK_TEST_KILL (test only), -1: none */
    int stop_rank, stop_block; /* LONGVK_TEST_STOP (test only), -1: none */
    char switch_lines[64][320]; /* the switches applied, for the summary */
    int n_switch_lines;
} cli_state;

static const char *mib(uint64_t bytes, char *buf, size_t size) {
    if (bytes >= (1ull << 30)) snprintf(buf, size, "%.2f GiB", (double)bytes / (1ull << 30));
    else snprintf(buf, size, "%.1f MiB", (double)bytes / (1ull << 20));
    return buf;
}

static void on_text(cli_state *st, const lv_generate_progress *p) {
    encoding_text = p->phase == LV_GEN_PHASE_TEXT_START && st->mpi->ranks == 1;
    /* LONGVK_TEST_STOP=RANK:0: the stop arrives as the text encoder starts */
    if (p->phase == LV_GEN_PHASE_TEXT_START && st->stop_block == 0 && st->stop_rank == st->mpi->rank) raise(SIGUSR1);
    if (st->quiet) return;
    char b[32];
    if (p->phase == LV_GEN_PHASE_TEXT_START && p->text_prompts > 1)
        fprintf(stderr, "text encoder: encoding %d distinct prompts of the schedule (%d tokens in the largest) on %s\n",
                p->text_prompts, p->text_tokens, p->device ? p->device : "?");
    else if (p->phase == LV_GEN_PHASE_TEXT_START)
        fprintf(stderr, "text encoder: encoding %d tokens on %s\n", p->text_tokens, p->device ? p->device : "?");
    else {
        char rows[96] = "", r[32];
        if (p->text_rows_bytes) /* a schedule's rows stay on the host for the run */
            snprintf(rows, sizeof rows, "; the rows of %d prompt%s kept on the host, %s", p->text_prompts,
                     p->text_prompts == 1 ? "" : "s", mib(p->text_rows_bytes, r, sizeof r));
        fprintf(stderr, "text encoder: done in %.1f s, device memory %s (freed before the DiT is uploaded)%s\n",
                p->text_seconds, mib(p->text_encoder_memory, b, sizeof b), rows);
    }
    fflush(stderr);
}

/* Test only (tests/generate/test_sp_generate.c), the faults of a run over ranks at a known point:
 * LONGVK_TEST_KILL=RANK:BLOCK makes rank RANK raise SIGKILL once block BLOCK is made, after
 * a barrier, so that rank 0 has written that block's frames and resume file (a rank dying);
 * LONGVK_TEST_STOP=RANK:BLOCK makes rank RANK alone raise SIGUSR1 then (a stop that reached
 * one rank: all must stop after that block; BLOCK 0: as the text encoder starts, on_text).
 * Without MPI, rank 0 is the process. */
static void test_faults(const cli_state *st, int block) {
    if (st->stop_rank == st->mpi->rank && block == st->stop_block) raise(SIGUSR1);
    if (st->kill_rank < 0 || block != st->kill_block) return;
    cli_mpi_barrier(st->mpi);
    if (st->mpi->rank == st->kill_rank) raise(SIGKILL);
}

static void test_fault_at(const char *name, int *rank, int *block) {
    const char *v = lv_env_str(name);
    if (!v || sscanf(v, "%d:%d", rank, block) != 2) *rank = *block = -1;
}

/* "switch 1/1: block 7/12 (block 5 of the video) from frame 64 = 4.000 s (asked: frame 70), transition 16
 * frames: "three yellow squares ..."" */
static void on_switch(cli_state *st, const lv_generate_progress *p) {
    char line[sizeof st->switch_lines[0]];
    snprintf(line, sizeof line, "switch %d/%d: block %d/%d (block %d of the video) from frame %lld = %.3f s (asked: "
             "frame %lld), transition %lld frames: \"%.200s\"", p->switch_index, p->switches, p->switch_block,
             p->blocks, p->switch_block - p->burn_in_blocks, (long long)p->switch_frame,
             p->switch_seconds, (long long)p->switch_frame_asked,
             (long long)p->switch_transition_frames, p->switch_prompt ? p->switch_prompt : "");
    if (st->n_switch_lines < (int)(sizeof st->switch_lines / sizeof st->switch_lines[0]))
        snprintf(st->switch_lines[st->n_switch_lines++], sizeof st->switch_lines[0], "%s", line);
    if (st->quiet) return;
    fprintf(stderr, "%s%s\n", st->tty && st->last_len ? "\n" : "", line);
    st->last_len = 0;
    fflush(stderr);
}

/* How the VAE decodes: said once, before the first block's frames. */
static void on_vae(const cli_state *st, const lv_generate_progress *p) {
    if (st->quiet) return;
    char a[32], b[32], c[32], d[32];
    if (p->vae_tile_count == 0) {
        if (p->vae_budget)
            fprintf(stderr, "VAE: untiled, device memory %s (budget %s)\n", mib(p->vae_memory, a, sizeof a),
                    mib(p->vae_budget, b, sizeof b));
        else
            fprintf(stderr, "VAE: untiled, device memory %s\n", mib(p->vae_memory, a, sizeof a));
        return;
    }
    char why[128] = "";
    if (p->vae_budget)
        snprintf(why, sizeof why, " (untiled it needs %s, the budget is %s)", mib(p->vae_untiled_memory, a, sizeof a),
                 mib(p->vae_budget, b, sizeof b));
    fprintf(stderr, "VAE: %d tiles of %dx%d latent pixels overlapping by %d%s: device memory %s, the tiles' history "
            "in host memory %s\n", p->vae_tile_count, p->vae_tile_h, p->vae_tile_w, p->vae_tile_overlap, why,
            mib(p->vae_memory, c, sizeof c), mib(p->vae_host_bytes, d, sizeof d));
}

static void on_progress(void *user, const lv_generate_progress *p) {
    cli_state *st = user;
    if (p->phase == LV_GEN_PHASE_VAE) {
        on_vae(st, p);
        return;
    }
    if (p->phase == LV_GEN_PHASE_SWITCH) {
        on_switch(st, p);
        return;
    }
    if (p->phase != LV_GEN_PHASE_BLOCK) {
        on_text(st, p);
        return;
    }
    test_faults(st, p->block);
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
    const char *what = p->block <= p->burn_in_blocks                      ? "burn-in block"
                       : p->block <= p->burn_in_blocks + p->continue_blocks ? "clip block"
                                                                            : "block";
    st->last_len = fprintf(stderr, "%s%s %d/%d  frames %lld/%lld  %.1f frames/s  ETA %d:%02d  state memory %.1f KiB%s",
                           st->tty ? "\r" : "", what, p->block, p->blocks, (long long)p->frames_done,
                           (long long)p->frames_total, p->frames_per_second, eta / 60, eta % 60,
                           (double)p->state_bytes / 1024, st->tty ? " " : "\n");
    fflush(stderr);
}

static void on_warning(void *user, const char *message) {
    (void)user;
    fprintf(stderr, "longvk generate: warning: %s\n", message);
}

static int run_generate(lv_generate_options o, const char *state);
static int dry_run(lv_generate_options o);

/* Before the first frame, what the run will do (issue 53, item 16), on one line:
 * "generating 160 frames (10.0 s at 16 fps) with the default model: 32x32 upscaled x8 to 256x256,
 * sampler longsana, 2 steps, CFG 4, seed 7, precision f32; 42 blocks of 4 frames, 2 of them burn-in" */
static void print_plan(const lv_generate_description *p) {
    static const char *const precisions[] = {"auto", "f32", "f16", "bf16"};
    static const char *const samplers_named[] = {"longsana", "euler", "dpm++2m"};
    char size[96];
    if (p->scale > 1)
        snprintf(size, sizeof size, "%dx%d upscaled x%d to %dx%d", p->width, p->height, p->scale, p->width * p->scale,
                 p->height * p->scale);
    else
        snprintf(size, sizeof size, "%dx%d", p->width, p->height);
    char rounded[160] = ""; /* a latent frame is 4 pixel frames, the first alone: 6 asked make 9 */
    if (p->latent && p->frames != p->frames_asked)
        snprintf(rounded, sizeof rounded, ", %lld asked: a latent model makes 1 + 4k frames, so the count is rounded "
                 "up", (long long)p->frames_asked);
    fprintf(stderr, "generating %lld frames (%.1f s at %g fps%s) with %s: %s, sampler %s, %d steps%s, CFG %g, seed "
            "%llu, precision %s", (long long)p->frames, p->fps > 0 ? (double)p->frames / p->fps : 0.0, p->fps, rounded,
            p->model, size,
            samplers_named[p->sampler <= LV_GEN_DPMPP_2M ? p->sampler : 0], p->steps,
            p->sampler == LV_GEN_LONGSANA ? " per block" : "", p->cfg_scale, (unsigned long long)p->seed,
            precisions[p->precision <= LV_PRECISION_BF16 ? p->precision : 0]);
    if (p->sampler == LV_GEN_LONGSANA)
        fprintf(stderr, "; %d block%s of %d %s frame%s%s", p->blocks, p->blocks == 1 ? "" : "s", p->block_frames,
                p->latent ? "latent" : "model", p->block_frames == 1 ? "" : "s", p->burn_in_blocks ? "" : "\n");
    if (p->sampler == LV_GEN_LONGSANA && p->burn_in_blocks)
        fprintf(stderr, ", %d of them burn-in\n", p->burn_in_blocks);
    if (p->sampler != LV_GEN_LONGSANA) fprintf(stderr, "; one clip\n");
}

int cmd_generate(int argc, char **argv) {
    lv_generate_options_default(&args.o);
    args.o.scale = LV_GEN_MODEL_DEFAULT; /* 8 for the embedded model, 1 for a latent model */
    args.seed = 42;
    args.sampler = args.o.sampler;
    /* `--help --model X`: the parser prints --help as soon as it meets it, so the model it is
     * about is found here first */
    for (int i = 1; i + 1 < argc && strcmp(argv[i], "--"); i++)
        if (strcmp(argv[i], "--model") == 0) help_model = argv[++i];
    int r = cli_parse(&cmd_generate_spec, argc, argv);
    if (r >= 0) return r;
    lv_generate_options o = args.o;
    o.seed = (uint64_t)args.seed;
    o.sampler = (lv_gen_sampler)args.sampler;
    o.resume = args.resume;
    o.motion_score = cli_given(&cmd_generate_spec, "--motion-score") ? args.motion_score : LV_GEN_MODEL_DEFAULT;
    if (args.resume && args.overwrite) return cli_usage_error("generate", "--resume and --overwrite: one or the other");
    if (cli_given(&cmd_generate_spec, "--continue-output") && !o.continue_path)
        return cli_usage_error("generate", "--continue-output is for --continue VIDEO");
    if (o.continue_path && (args.sequence_parallel || args.cfg_parallel))
        return cli_usage_error("generate", "--continue: one process only, not with %s",
                               args.sequence_parallel ? "--sequence-parallel" : "--cfg-parallel");
    /* the output as it will be written: a link's target; a write-protected file is refused
     * (exit 1, as `decode` refuses it), a device or FIFO too (exit 2, see lv_generate: the
     * video is renamed into place and its resume state kept beside it) */
    char target[4096], state[4200], lock_path[4200];
    int special = 0;
    if (lv_output_target(o.output, target, sizeof target, &special) != LV_OK) return cli_fail("generate");
    if (special)
        return cli_usage_error("generate", "the output %s is not a regular file (a device or FIFO): the video is "
                               "written under a temporary name, renamed into place and resumed from a state beside "
                               "it; give a file name", o.output);
    snprintf(state, sizeof state, "%s.longvk-state", target);
    snprintf(lock_path, sizeof lock_path, "%s.longvk-lock", target);
    if (!check_state_file(&o, state)) return 2;
    /* the schedule: -p at time 0, then --prompt-at's or the file's entries */
    lv_gen_switch *file_entries = NULL;
    char *file_text = NULL;
    int n_file = 0;
    /* --text-embeds holds the rows a prompt would make: a prompt beside them would not be read */
    if (o.text_embeds_path && (o.prompt || o.negative_prompt || args.schedule || args.n_at))
        return cli_usage_error("generate", "%s and --text-embeds: one or the other (the DiT reads the rows of %s, "
                               "not a prompt's; leave %s out)", o.prompt ? "--prompt" : o.negative_prompt
                               ? "--negative-prompt" : args.schedule ? "--schedule" : "--prompt-at",
                               o.text_embeds_path, o.prompt ? "-p" : o.negative_prompt ? "-n" : "the schedule");
    if (!o.prompt && !args.schedule && !o.text_embeds_path)
        return cli_usage_error("generate", "--prompt is required (or --schedule, or --text-embeds; see longvk generate "
                               "--help)");
    if (args.schedule && args.n_at)
        return cli_usage_error("generate", "--schedule and --prompt-at: one or the other (put every entry in the file)");
    if (args.schedule && lv_gen_schedule_read(args.schedule, &file_entries, &n_file, &file_text) != LV_OK)
        return cli_usage_error("generate", "%s", lv_last_error());
    int n_sched = (o.prompt ? 1 : 0) + args.n_at + n_file;
    lv_gen_switch sched[MAX_PROMPT_AT + 1];
    lv_gen_switch *entries = n_sched > MAX_PROMPT_AT + 1 ? calloc((size_t)n_sched, sizeof *entries) : sched;
    if (!entries) return cli_usage_error("generate", "out of memory for the schedule");
    if (args.prompts_from) {
        const char *why = prompts_reader_check(args.prompts_from);
        if (why) return cli_usage_error("generate", "--prompts-from %s %s", args.prompts_from, why);
        if (args.sequence_parallel || args.cfg_parallel || o.sp_bands)
            return cli_usage_error("generate", "--prompts-from: not with %s (one process reads the prompts and "
                                   "makes the video)", args.sequence_parallel ? "--sequence-parallel"
                                   : args.cfg_parallel ? "--cfg-parallel" : "--sp-emulate");
    }
    if (args.n_at || n_file) {
        int k = 0;
        if (o.prompt) entries[k++] = (lv_gen_switch){.time = "0", .prompt = o.prompt, .negative_prompt = o.negative_prompt,
                                                     .where = "-p"};
        for (int i = 0; i < args.n_at; i++) entries[k++] = args.at[i];
        for (int i = 0; i < n_file; i++) entries[k++] = file_entries[i];
        o.schedule = entries;
        o.schedule_count = k;
        o.prompt = entries[0].prompt; /* the run's identity names its first prompt */
        o.negative_prompt = entries[0].negative_prompt;
        /* the CFG groups would each re-make the state from their own passes: refused (keep is fine) */
        if (args.cfg_parallel && o.on_switch == LV_GEN_SWITCH_RECACHE)
            return cli_usage_error("generate", "--prompt-at / --schedule: --on-switch recache: not with --cfg-parallel "
                                   "(keep is; or --sequence-parallel alone)");
    }
    if (o.schedule_count > 0 || args.prompts_from) {
        /* checked as the run will be: with a queue of prompts (the run's own is made by run_generate) */
        lv_gen_live *probe = NULL;
        if (args.prompts_from && lv_gen_live_create(&probe) != LV_OK) return cli_fail("generate");
        o.live = probe;
        lv_status cs = lv_generate_check_schedule(&o);
        o.live = NULL;
        lv_gen_live_destroy(probe);
        if (cs != LV_OK) return cli_usage_error("generate", "%s", lv_last_error());
    } else if (cli_given(&cmd_generate_spec, "--transition") || cli_given(&cmd_generate_spec, "--on-switch")) {
        return cli_usage_error("generate", "--transition and --on-switch need a schedule (--prompt-at, --schedule "
                               "or --prompts-from)");
    }
    /* the values against the model, before anything is written: one it does not take (-W 33,
     * --steps 64 for the embedded model) is a usage error, exit 2; a model that cannot be read 1 */
    bool bad_value = false;
    const bool several = (args.sequence_parallel || args.cfg_parallel) && cli_launcher_size() > 1;
    if (several) cli_defer_errors(true); /* the model every rank reads: said once (cli_fail_before_ranks) */
    if (lv_generate_check(&o, &bad_value) != LV_OK) {
        if (bad_value) return cli_usage_error("generate", "%s", lv_last_error());
        int rc = cli_fail("generate");
        return several ? cli_fail_before_ranks("generate", args.cfg_parallel, rc) : rc;
    }
    if (args.dry_run) return dry_run(o);
    if (lv_generate_describe(&o, &plan) != LV_OK) {
        int rc = cli_fail("generate");
        return several ? cli_fail_before_ranks("generate", args.cfg_parallel, rc) : rc;
    }
    if (several) cli_defer_errors(false);
    if (cli_mpi_check_launch("generate", args.sequence_parallel || args.cfg_parallel)) return 2;
    /* over MPI ranks rank 0 writes; the lock is taken by a single process only (a rank cannot
     * leave the job alone before it has joined it) */
    const bool ranks = args.sequence_parallel || args.cfg_parallel;
    int lock = -1;
    if (!ranks && (lock = lock_output(o.output, lock_path)) < 0) return 1;
    /* a state beside the output: an interrupted run left a partial video there. Without
     * --resume (continue it) or --overwrite (start again) it is refused: a plain re-run
     * would silently replace both (exit 2: the command line must say which) */
    struct stat sst;
    if (!args.resume && !args.overwrite && stat(state, &sst) == 0) {
        unlock_output(lock_path, lock);
        return cli_usage_error("generate", "%s holds the state of an interrupted run writing %s: add --resume to "
                               "continue it, or --overwrite to start again (or remove both files)", state, o.output);
    }
    int rc = run_generate(o, state);
    unlock_output(lock_path, lock);
    if (entries != sched) free(entries);
    lv_gen_schedule_free(file_entries, file_text);
    return rc;
}

/* --dry-run: the plan of this run on this device, printed; nothing uploaded or written */
static int dry_run(lv_generate_options o) {
    if (args.sequence_parallel || args.cfg_parallel || o.sp_bands)
        return cli_usage_error("generate", "--dry-run plans one process's unsplit run: not with %s",
                               args.sequence_parallel ? "--sequence-parallel" : args.cfg_parallel ? "--cfg-parallel"
                                                                                                    : "--sp-emulate");
    lv_generate_plan plan;
    o.plan_only = true;
    o.plan_out = &plan;
    if (lv_generate(&o, NULL, NULL, NULL, NULL) != LV_OK) return cli_fail("generate");
    cli_print_plan(stdout, &plan, plan.text ? "Gemma-2" : NULL, plan.vae ? "the VAE" : NULL);
    return 0;
}

static int run_generate(lv_generate_options o, const char *state) {
    cli_mpi mpi = {.rank = 0, .ranks = 1};
    if (args.sequence_parallel || args.cfg_parallel) {
        if (o.sp_bands)
            return cli_usage_error("generate", "%s and --sp-emulate: one or the other",
                                   args.sequence_parallel ? "--sequence-parallel" : "--cfg-parallel");
        int m = cli_mpi_begin("generate", args.cfg_parallel, &mpi);
        if (m) return m;
        o.device_index = cli_mpi_device(&mpi, o.device_index);
        o.sp_comm = args.sequence_parallel ? mpi.comm : NULL; /* --cfg-parallel alone: whole passes */
        o.cfg_partner = mpi.partner;
    }
    /* rank 0 alone prints progress and the summary; every rank prints its errors */
    cli_state st = {.tty = isatty(STDERR_FILENO), .last_decile = -1, .quiet = args.quiet || mpi.rank != 0,
                    .mpi = &mpi};
    test_fault_at("LONGVK_TEST_KILL", &st.kill_rank, &st.kill_block);
    test_fault_at("LONGVK_TEST_STOP", &st.stop_rank, &st.stop_block);

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigaction(SIGINT, &sa, NULL);
    /* under mpirun a SIGTERM is mpirun ending the job (Ctrl-C, or a rank that failed or was
     * killed, which mpirun names): rank 0 says what is left; the others print only errors */
    const bool ranks = args.sequence_parallel || args.cfg_parallel;
    if (ranks && mpi.rank != 0) stop_message[0] = 0;
    else if (ranks && plan.resumable)
        snprintf(stop_message, sizeof stop_message, "\nlongvk generate (rank 0 of %d): stopping after the current "
                 "block; when mpirun ends the job (Ctrl-C, or a rank that died: mpirun names it), %s plays up to the "
                 "last block written and --resume continues from %s.longvk-state\n", mpi.ranks, o.output, o.output);
    else if (ranks) /* nothing to resume from (a .npy of latents): say only what is left */
        snprintf(stop_message, sizeof stop_message, "\nlongvk generate (rank 0 of %d): stopping after the current "
                 "block; when mpirun ends the job (Ctrl-C, or a rank that died: mpirun names it), nothing is left to "
                 "resume from (%s is written at the end: run it again to make it)\n", mpi.ranks, o.output);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGUSR1, &sa, NULL);

    if (!st.quiet) print_plan(&plan);
    /* --prompts-from: the queue the run takes lines from, fed by a reader thread */
    prompts_reader *reader = NULL;
    lv_gen_live *live = NULL;
    if (args.prompts_from) {
        if (lv_gen_live_create(&live) != LV_OK) return cli_fail("generate");
        if (prompts_reader_start(args.prompts_from, live, &reader) != 0) { /* it said why */
            lv_gen_live_destroy(live);
            return 1;
        }
    }
    o.live = live;
    lv_status s = lv_generate(&o, on_progress, on_warning, &st, &interrupted);
    prompts_reader_stop(reader);
    lv_gen_live_destroy(live);
    if (!st.quiet && st.last_len && st.tty) fputc('\n', stderr);
    if (s == LV_ERR_INTERRUPTED) { /* every rank stopped after the same block: a clean end */
        if (mpi.rank == 0 && plan.resumable && access(state, F_OK) == 0)
            fprintf(stderr, "longvk generate: %s.\nresume with the same command and --resume\n", lv_last_error());
        else if (mpi.rank == 0 && plan.resumable) /* stopped in the text encoder: no state is left */
            fprintf(stderr, "longvk generate: %s.\nrun it again to make the video\n", lv_last_error());
        else if (mpi.rank == 0)
            fprintf(stderr, "longvk generate: %s.\nthis run writes no resume state (a single clip, or a latent "
                    "model's .npy of latents, written only at the end): run it again to make the whole output\n",
                    lv_last_error());
        cli_mpi_end(&mpi, "generate", 0);
        return 130;
    }
    if (s != LV_OK) {
        int rc = cli_fail("generate");
        cli_mpi_end(&mpi, "generate", rc);
        return rc;
    }
    cli_mpi_end(&mpi, "generate", 0);
    if (!st.quiet) {
        char state[64] = "no carried state";
        if (st.last.state_bytes) snprintf(state, sizeof state, "state memory %.1f KiB", (double)st.last.state_bytes / 1024);
        if (st.last.frames_resumed > 0) /* this run made only the frames after the kept ones */
            fprintf(stderr, "wrote %s: %lld frames, %lld kept from the interrupted run and %lld made in %.1f s "
                    "(%.1f frames/s on %s), %s\n", o.output, (long long)st.last.frames_done,
                    (long long)st.last.frames_resumed, (long long)(st.last.frames_done - st.last.frames_resumed),
                    st.last.seconds, st.last.frames_per_second, st.device, state);
        else
            fprintf(stderr, "wrote %s: %lld frames in %.1f s (%.1f frames/s on %s), %s\n", o.output,
                    (long long)st.last.frames_done, st.last.seconds, st.last.frames_per_second, st.device, state);
        char a[32], b[32];
        if (st.last.text_encoder_memory) /* the two models never share the device */
            fprintf(stderr, "device memory: text encoder %s, then %s for the rest (DiT, state, VAE); peak %s\n",
                    mib(st.last.text_encoder_memory, a, sizeof a), mib(st.last.model_memory, b, sizeof b),
                    st.last.text_encoder_memory > st.last.model_memory ? a : b);
        else
            fprintf(stderr, "device memory: %s at most\n", mib(st.last.model_memory, b, sizeof b));
        for (int i = 0; i < st.n_switch_lines; i++) fprintf(stderr, "%s\n", st.switch_lines[i]);
        if (o.schedule_count > 0 || o.live) fprintf(stderr, "the schedule applied: %s.schedule\n", o.output);
    }
    return 0;
}
