/* `longvk encode-text`: a prompt (or token ids) through the Gemma-2 text encoder, the last
 * hidden state written as float32 .npy, so that anyone can check the encoder and the
 * SANA-Video prompt handling against another implementation (pipelines/gemma2/README.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "commands.h"
#include "longvk.h"
#include "longvk/files.h"
#include "longvk/gemma2.h"
#include "longvk/sana_prompt.h"
#include "longvk/tokenizer.h"

enum { TEMPLATE_NONE, TEMPLATE_SANA_VIDEO };
enum { SOFTCAP_DEFAULT = -1, SOFTCAP_OFF = 0, SOFTCAP_ON = 1 };
enum { DTYPE_STORED = -1, DTYPE_F32 = 0, DTYPE_BF16 = 1 };

#define MAX_IDS 8192

typedef struct encode_text_args {
    const char *encoder, *prompt, *ids, *tokenizer, *output;
    int template_, softcap, dtype, motion, weights;
    long device;
    bool negative, print_ids;
} encode_text_args;

static encode_text_args args;

/* --ids: comma-separated integers in [0, 2^31 - 1], at most MAX_IDS of them */
static const char *parse_ids(const char *value, void *dest) {
    int count = 0;
    const char *p = value;
    char buf[16];
    do {
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);
        long v;
        if (n == 0 || n >= sizeof buf) return "is not a comma-separated list of token ids (integers >= 0)";
        memcpy(buf, p, n);
        buf[n] = '\0';
        if (!cli_parse_long(buf, 0, 2147483647L, &v)) return "is not a comma-separated list of token ids (integers >= 0)";
        if (++count > MAX_IDS) return "has more than " "8192" " ids";
        p = comma ? comma + 1 : NULL;
    } while (p);
    *(const char **)dest = value;
    return NULL;
}

static const cli_choice templates[] = {{"none", TEMPLATE_NONE}, {"sana-video", TEMPLATE_SANA_VIDEO}, {0}};
static const cli_choice on_off[] = {{"on", SOFTCAP_ON}, {"off", SOFTCAP_OFF}, {0}};
static const cli_choice dtypes[] = {{"f32", DTYPE_F32}, {"bf16-weights", DTYPE_BF16}, {0}};

static cli_option options[] = {
    {.name = "--text-encoder", .kind = CLI_INPUT, .dest = &args.encoder, .metavar = "DIR", .required = true,
     .help = "Gemma-2 weights: a Hugging Face model folder (config.json + model.safetensors or its index), a "
             "diffusers pipeline folder (its text_encoder/), a .safetensors file or a *.safetensors.index.json"},
    {.name = "--prompt", .alias = "-p", .kind = CLI_STRING, .dest = &args.prompt, .metavar = "TEXT",
     .help = "the prompt (UTF-8)"},
    {.name = "--ids", .kind = CLI_CUSTOM, .dest = &args.ids, .parse = parse_ids, .metavar = "2,651,4320,...",
     .help = "token ids instead of a prompt, encoded exactly as given (with --template none; at most 8192)"},
    {.name = "--tokenizer", .kind = CLI_INPUT, .dest = &args.tokenizer, .metavar = "FILE",
     .def = "tokenizer.model in --text-encoder's folder, its tokenizer/, or ../tokenizer/",
     .help = "a SentencePiece tokenizer.model, or a folder holding one"},
    {.name = "--template", .kind = CLI_CHOICE, .dest = &args.template_, .choices = templates, .def = "sana-video",
     .help = "how the text becomes tokens and rows:\n"
             "  none: <bos> + the prompt's tokens, no padding, every row written [tokens, hidden]\n"
             "  sana-video: SANA-Video's prompt handling: its instruction text before the prompt, "
             "\" motion score: N.\" after it, truncation to the instruction's tokens + 298, then <bos> and the last "
             "299 positions: [300, hidden], rows on padding zero; the mask [300] goes to OUT.mask.npy"},
    {.name = "--negative", .kind = CLI_FLAG, .dest = &args.negative,
     .help = "with sana-video: the prompt is a negative prompt (no instruction, no motion suffix, 300 tokens); "
             "without -p, SANA-Video's default negative prompt"},
    {.name = "--motion-score", .kind = CLI_INT, .dest = &args.motion, .metavar = "N", .min = 0, .max = 1000000,
     .def = "10, SANA-Video's", .help = "with sana-video: the motion score appended to the prompt (0: none)"},
    {.name = "--softcap", .kind = CLI_CHOICE, .dest = &args.softcap, .choices = on_off,
     .def = "off with sana-video (transformers' default sdpa attention ignores it); with none, the file's config",
     .help = "the attention logit soft-cap (on: the config's attn_logit_softcapping, as eager attention)"},
    {.name = "--dtype", .kind = CLI_CHOICE, .dest = &args.dtype, .choices = dtypes, .def = "the weights as stored",
     .help = "f32: every weight as float32; bf16-weights: every weight rounded to bf16 (compute is float32 "
             "either way)"},
    {.name = "--text-weights-dtype", .kind = CLI_CHOICE, .dest = &args.weights, .choices = cli_weight_dtypes, .aliases = cli_weight_dtype_aliases,
     .def = "as-stored", .metavar = "as-stored|f32|f16|bf16|q8_0|q4_K",
     .help = "the encoder's matrix weights (q, k, v, o, gate, up, down) on the device, as generate's "
             "--text-weights-dtype: converted to f32, f16 or bf16 (every weight rounded, as --dtype), or "
             "quantized on load as ggml's q8_0 / q4_K (the embedding and the norms as stored; rows not whole "
             "blocks of 32 / 256 fall back: q4_K to q8_0, q8_0 to the file's dtype); a GGUF's quantized "
             "matrices stay as they are"},
    {.name = "--print-ids", .kind = CLI_FLAG, .dest = &args.print_ids,
     .help = "print the token ids encoded (comma-separated, one line) on stdout"},
    CLI_DEVICE_OPTION(&args.device),
    {.name = "--output", .alias = "-o", .kind = CLI_OUTPUT, .dest = &args.output, .metavar = "OUT.npy",
     .required = true, .help = "float32 [tokens, hidden] .npy (written only when the encoder succeeds)"},
};

const cli_spec cmd_encode_text_spec = {
    .command = "encode-text",
    .usage = "--text-encoder DIR (-p TEXT | --ids 2,651,...) -o OUT.npy [options]",
    .about = "Runs the Gemma-2 text encoder (SANA-Video's) and writes its last hidden state, after the\n"
             "final norm, as float32 .npy. With --template sana-video (the default) also OUT.mask.npy:\n"
             "float32 [300], 1 for a real token, 0 for padding.\n",
    .options = options,
    .count = CLI_COUNT(options),
};

static int parse_id_list(const char *s, int32_t *ids) {
    int n = 0;
    while (*s) {
        ids[n++] = (int32_t)strtol(s, (char **)&s, 10);
        if (*s == ',') s++;
    }
    return n;
}

static void print_ids(const int32_t *ids, int n) {
    for (int i = 0; i < n; i++) printf(i ? ",%d" : "%d", ids[i]);
    printf("\n");
}

/* OUT.npy -> OUT.mask.npy (OUT -> OUT.mask.npy) */
static void mask_path(const char *out, char *buf, size_t size) {
    size_t n = strlen(out);
    if (n > 4 && strcmp(out + n - 4, ".npy") == 0) n -= 4;
    snprintf(buf, size, "%.*s.mask.npy", (int)n, out);
}

int cmd_encode_text(int argc, char **argv) {
    args = (encode_text_args){.template_ = TEMPLATE_SANA_VIDEO, .softcap = SOFTCAP_DEFAULT, .dtype = DTYPE_STORED,
                              .motion = LV_SANA_VIDEO_MOTION_SCORE, .device = -1};
    int r = cli_parse(&cmd_encode_text_spec, argc, argv);
    if (r >= 0) return r;
    const char *cmd = "encode-text";
    int sana = args.template_ == TEMPLATE_SANA_VIDEO;
    if (args.prompt && args.ids) return cli_usage_error(cmd, "give -p TEXT or --ids, not both");
    if (args.dtype != DTYPE_STORED && args.weights != LV_DIT_WEIGHTS_AS_STORED)
        return cli_usage_error(cmd, "give --dtype or --text-weights-dtype, not both");
    if (!args.prompt && !args.ids && !(sana && args.negative))
        return cli_usage_error(cmd, "give a prompt (-p TEXT) or token ids (--ids 2,651,...)");
    if (args.ids && sana)
        return cli_usage_error(cmd, "--ids needs --template none (sana-video assembles the ids from a prompt)");
    if (!sana && (args.negative || cli_given(&cmd_encode_text_spec, "--motion-score")))
        return cli_usage_error(cmd, "--negative and --motion-score apply to --template sana-video only");
    char mask_out[4096] = "";
    if (sana) {
        /* -o a device or FIFO (/dev/null): the rows are written through it (lv_npy_write), but
         * the mask goes to a file beside -o, which a device has not: refused rather than
         * creating /dev/null.mask.npy (--template none writes no mask) */
        char target[4096];
        int special = 0;
        if (lv_output_target(args.output, target, sizeof target, &special) == LV_OK && special)
            return cli_usage_error(cmd, "-o %s is not a regular file (a device or FIFO): with --template sana-video "
                                   "the mask is written beside it as OUT.mask.npy; give a file name (or --template "
                                   "none, which writes no mask)", args.output);
        mask_path(args.output, mask_out, sizeof mask_out);
        const char *inputs[] = {args.encoder, args.tokenizer};
        for (int i = 0; i < 2; i++)
            if (inputs[i] && cli_same_file(mask_out, inputs[i]))
                return cli_usage_error(cmd, "the mask output %s is an input file", mask_out);
        if (!cli_check_output(&cmd_encode_text_spec, mask_out, "the mask output")) return 2;
    }

    int rc = 1;
    lv_gemma2_file *file = NULL;
    lv_tokenizer *tok = NULL;
    lv_ctx *ctx = NULL;
    lv_gemma2 *enc = NULL;
    int32_t *ids = NULL;
    float *hidden = NULL;
    lv_sana_prompt sp = {0};
    if (lv_gemma2_file_open(args.encoder, NULL, &file) != LV_OK) {
        cli_fail("text encoder");
        goto done;
    }
    const lv_gemma2_config *cfg = lv_gemma2_file_config(file);
    int H = cfg->hidden_size, n = 0;
    char found[4096];
    const char *tpath = args.tokenizer; /* the tokenizer read, for messages */
    if (args.prompt || args.negative) {
        if (!tpath) {
            if (!lv_tokenizer_find(args.encoder, found, sizeof found)) {
                fprintf(stderr, "longvk: tokenizer: no tokenizer.model in or beside %s (give --tokenizer FILE; longvk "
                        "reads SentencePiece's tokenizer.model, or a .gguf's own tokenizer metadata, not "
                        "tokenizer.json)\n",
                        args.encoder);
                goto done;
            }
            tpath = found;
        }
        if (lv_tokenizer_open(tpath, &tok) != LV_OK) {
            cli_fail("tokenizer");
            goto done;
        }
    }
    if (sana) {
        lv_sana_prompt_options po;
        lv_sana_prompt_options_default(&po);
        po.negative = args.negative;
        po.motion_score = args.motion;
        const char *text = args.prompt ? args.prompt : lv_sana_video_negative_prompt;
        if (lv_sana_prompt_build(tok, text, &po, &sp) != LV_OK) {
            cli_fail("prompt");
            goto done;
        }
        char lost[256];
        if (lv_sana_prompt_truncation(&sp, lost, sizeof lost)) /* in the prompt's own tokens */
            fprintf(stderr, "longvk: warning: the %s is %s\n", args.negative ? "negative prompt" : "prompt", lost);
        ids = sp.ids;
        n = sp.n_ids;
    } else {
        ids = malloc(MAX_IDS * sizeof *ids);
        if (!ids) {
            fprintf(stderr, "longvk: out of host memory\n");
            goto done;
        }
        if (args.ids) n = parse_id_list(args.ids, ids);
        else {
            int needed = 0;
            if (lv_tokenizer_encode(tok, args.prompt, strlen(args.prompt), LV_TOKENIZE_GEMMA, ids, MAX_IDS, &n,
                                    &needed) != LV_OK) {
                cli_fail("tokenizer");
                goto done;
            }
            int limit = cfg->max_position_embeddings < MAX_IDS ? cfg->max_position_embeddings : MAX_IDS;
            if (needed > limit) {
                fprintf(stderr,
                        "longvk: prompt: %d tokens (%zu bytes), the encoder takes at most %d (with --template none "
                        "nothing is truncated)\n",
                        needed, strlen(args.prompt), limit);
                goto done;
            }
        }
        for (int i = 0; i < n; i++)
            if (ids[i] >= cfg->vocab_size) {
                if (args.ids)
                    fprintf(stderr, "longvk: --ids: id %d at position %d is outside the vocabulary (%d ids) of %s\n",
                            ids[i], i, cfg->vocab_size, args.encoder);
                else /* -p: the ids are the tokenizer's, not the user's */
                    fprintf(stderr, "longvk: prompt: the tokenizer %s gave id %d (at position %d), outside "
                            "the vocabulary (%d ids) of the text encoder %s: the tokenizer is not this encoder's "
                            "(give its own with --tokenizer)\n", tpath, ids[i], i, cfg->vocab_size, args.encoder);
                goto done;
            }
    }
    if (args.print_ids) print_ids(ids, n);

    lv_ctx_options copt;
    lv_ctx_options_default(&copt);
    copt.device_index = (int)args.device;
    if (lv_ctx_create(&copt, &ctx) != LV_OK) {
        cli_fail(NULL);
        goto done;
    }
    lv_gemma2_options gopt;
    lv_gemma2_options_default(&gopt);
    int softcap = args.softcap;
    if (softcap == SOFTCAP_DEFAULT) softcap = sana ? SOFTCAP_OFF : cfg->attn_logit_softcapping > 0 ? SOFTCAP_ON : SOFTCAP_OFF;
    gopt.attn_softcap = softcap == SOFTCAP_ON ? LV_GEMMA2_SOFTCAP_CONFIG : 0.0f;
    static const int text_dtypes[] = {-1, LV_F32, LV_F16, LV_BF16, LV_Q8_0, LV_Q4_K}; /* lv_dit_weights' order */
    gopt.weight_dtype = args.dtype == DTYPE_F32    ? LV_F32
                        : args.dtype == DTYPE_BF16 ? LV_BF16
                                                   : text_dtypes[args.weights];
    if (lv_gemma2_create(ctx, file, &gopt, &enc) != LV_OK) {
        cli_fail("text encoder");
        goto done;
    }
    int rows = sana ? LV_SANA_PROMPT_ROWS : n;
    hidden = malloc((size_t)rows * (size_t)H * sizeof *hidden);
    if (!hidden) {
        fprintf(stderr, "longvk: out of host memory for %d x %d floats\n", rows, H);
        goto done;
    }
    /* sana-video: the rows the DiT receives, as generate computes them */
    if ((sana ? lv_sana_prompt_encode(enc, &sp, hidden, NULL) : lv_gemma2_encode(enc, ids, n, hidden)) != LV_OK) {
        cli_fail("encode");
        goto done;
    }
    float *out = hidden;
    int64_t shape[2] = {rows, H};
    if (lv_npy_write(args.output, 2, shape, out) != LV_OK) {
        cli_fail(NULL);
        goto done;
    }
    if (sana) {
        int64_t mshape[1] = {LV_SANA_PROMPT_ROWS};
        if (lv_npy_write(mask_out, 1, mshape, sp.mask) != LV_OK) {
            cli_fail(NULL);
            struct stat ls; /* the rows without their mask: removed (a link stays: its target is the file) */
            char target[4096];
            if (lv_output_target(args.output, target, sizeof target, NULL) == LV_OK && lstat(target, &ls) == 0 &&
                S_ISREG(ls.st_mode))
                remove(target);
            goto done;
        }
    }
    if (sana)
        fprintf(stderr, "longvk: %d tokens encoded (L = %d, soft-cap %s): rows <bos>, %d..%d -> %s [%d, %d], %s\n", n,
                sp.length, lv_gemma2_softcap(enc) > 0 ? "on" : "off", sp.length - 299, sp.length - 1, args.output,
                rows, H, mask_out);
    else
        fprintf(stderr, "longvk: %d tokens encoded (soft-cap %s) -> %s [%d, %d]\n", n,
                lv_gemma2_softcap(enc) > 0 ? "on" : "off", args.output, rows, H);
    rc = 0;
done:
    if (enc) lv_gemma2_destroy(enc);
    if (ctx) lv_ctx_destroy(ctx);
    if (!sana) free(ids);
    lv_sana_prompt_free(&sp);
    free(hidden);
    lv_tokenizer_close(tok);
    lv_gemma2_file_close(file);
    return rc;
}
