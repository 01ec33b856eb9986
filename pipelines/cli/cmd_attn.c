/* `longvk attn`: block-wise linear attention on .npy inputs, through the engine's carried
 * state exactly as a video model uses it (engine/linear-attention.md): every mode
 * is a loop over blocks, each block committed to the state with a write pass. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "longvk.h"

static const char *shape_str(const lv_npy *a, char *buf, size_t size) {
    size_t n = (size_t)snprintf(buf, size, "[");
    for (int i = 0; i < a->ndim && n < size; i++)
        n += (size_t)snprintf(buf + n, size - n, "%s%lld", i ? ", " : "", (long long)a->shape[i]);
    if (n < size) snprintf(buf + n, size - n, "]");
    return buf;
}

enum { MODE_FULL, MODE_CAUSAL, MODE_BLOCK };

typedef struct attn_args {
    const char *q, *k, *v, *out, *positions;
    int mode, phi;
    long block, window, device;
    bool normalize;
    double eps, decay;
} attn_args;

static attn_args args = {.mode = MODE_FULL, .device = -1, .phi = LV_PHI_RELU, .eps = 1e-6, .decay = 1.0};

static const cli_choice modes[] = {{"full", MODE_FULL}, {"causal", MODE_CAUSAL}, {"block", MODE_BLOCK}, {0}};
static const cli_choice features[] = {
    {"relu", LV_PHI_RELU}, {"elu1", LV_PHI_ELU1}, {"identity", LV_PHI_IDENTITY}, {0}};

static cli_option options[] = {
    {.name = "--q", .kind = CLI_INPUT, .dest = &args.q, .metavar = "Q.npy", .required = true,
     .help = "queries, float32 [N, d] or [H, N, d]"},
    {.name = "--k", .kind = CLI_INPUT, .dest = &args.k, .metavar = "K.npy", .required = true,
     .help = "keys, the shape of q"},
    {.name = "--v", .kind = CLI_INPUT, .dest = &args.v, .metavar = "V.npy", .required = true,
     .help = "values, the shape of q"},
    {.name = "--output", .alias = "-o", .kind = CLI_OUTPUT, .dest = &args.out, .metavar = "O.npy", .required = true,
     .help = "the result, float32, the shape of q"},
    {.name = "--mode", .kind = CLI_CHOICE, .dest = &args.mode, .choices = modes, .def = "full",
     .help = "which tokens a query sees\n"
             "  full:   all N tokens (one block of N)\n"
             "  causal: tokens 1..i (blocks of one token)\n"
             "  block:  blocks of --block tokens, bidirectional inside a block, causal across blocks; "
             "the last block may be shorter"},
    {.name = "--block", .kind = CLI_LONG, .dest = &args.block, .min = 1, .max = 1L << 40,
     .help = "tokens per block for --mode block (required there)"},
    {.name = "--feature", .kind = CLI_CHOICE, .dest = &args.phi, .choices = features, .def = "relu",
     .help = "feature map phi"},
    {.name = "--normalize", .kind = CLI_FLAG, .dest = &args.normalize, .def = "off",
     .help = "divide by z . phi(q) + eps"},
    {.name = "--eps", .kind = CLI_DOUBLE, .dest = &args.eps, .metavar = "E", .bounds = CLI_AT_LEAST, .lo = 0,
     .def = "1e-6", .help = "added to the denominator"},
    {.name = "--rope-positions", .kind = CLI_INPUT, .dest = &args.positions, .metavar = "P.npy", .def = "none",
     .help = "float32 [N], one position per token: rotary embedding of phi(q) and phi(k) in the numerator, "
             "adjacent pairs over the whole head dim (even) (theta 10000)"},
    {.name = "--window", .kind = CLI_LONG, .dest = &args.window, .metavar = "K", .min = 1, .max = 4096,
     .def = "all previous blocks", .help = "a block sees its own and the K previous blocks only"},
    {.name = "--decay", .kind = CLI_DOUBLE, .dest = &args.decay, .metavar = "L", .bounds = CLI_AT_LEAST | CLI_AT_MOST,
     .lo = 0, .hi = 1, .def = "1, no decay", .help = "the carried state is multiplied by L in [0, 1] at every block"},
    CLI_DEVICE_OPTION(&args.device),
};

const cli_spec cmd_attn_spec = {
    .command = "attn",
    .usage = "--q Q.npy --k K.npy --v V.npy -o O.npy [options]",
    .about = "Block-wise linear attention with a carried state on float32 .npy inputs of shape\n"
             "[N, d] (one head) or [H, N, d] (H heads); q, k and v have the same shape. Writes\n"
             "O.npy (float32, same shape):\n"
             "\n"
             "  o_i = sum_j w_ij v_j (R_j phi(k_j)) . (R_i phi(q_i))  [ / (sum_j w_ij phi(k_j) . phi(q_i) + eps) ]\n"
             "\n"
             "over the tokens j that token i sees, computed block by block from the state\n"
             "(S, z) carried between blocks; no N x N matrix is formed.\n",
    .epilog = "Errors (a missing or malformed file, a dtype other than float32, a truncated\n"
              "file, mismatched shapes) are reported and nothing is written.\n",
    .options = options,
    .count = CLI_COUNT(options),
};

/* -1: parsed; else the exit status (0 after --help, 2 after a usage error) */
static int parse_args(int argc, char **argv) {
    int r = cli_parse(&cmd_attn_spec, argc, argv);
    if (r >= 0) return r;
    attn_args *a = &args;
    /* rules between options, which the table cannot state */
    if (a->mode == MODE_BLOCK && a->block == 0)
        return cli_usage_error("attn", "--mode block needs --block N");
    if (a->block && a->mode != MODE_BLOCK) return cli_usage_error("attn", "--block applies to --mode block only");
    if (a->window && a->decay != 1.0)
        return cli_usage_error("attn", "--window and --decay are different rules; give one");
    return -1;
}

/* Inputs read and checked: q, k, v as [H, N, D] and positions [N] (or none). */
typedef struct attn_inputs {
    lv_npy q, k, v, pos;
    int64_t H, N, D;
} attn_inputs;

static void inputs_free(attn_inputs *in) {
    lv_npy_free(&in->q);
    lv_npy_free(&in->k);
    lv_npy_free(&in->v);
    lv_npy_free(&in->pos);
}

static int load_inputs(const attn_args *a, attn_inputs *in) {
    memset(in, 0, sizeof *in);
    if (lv_npy_read(a->q, &in->q) != LV_OK || lv_npy_read(a->k, &in->k) != LV_OK ||
        lv_npy_read(a->v, &in->v) != LV_OK)
        return cli_fail("attn");
    char s1[96], s2[96];
    if (in->q.ndim != 2 && in->q.ndim != 3) {
        fprintf(stderr, "longvk: attn: %s has shape %s; expected [N, d] or [H, N, d]\n", a->q,
                shape_str(&in->q, s1, sizeof s1));
        return 1;
    }
    const lv_npy *other[2] = {&in->k, &in->v};
    const char *names[2] = {a->k, a->v};
    for (int i = 0; i < 2; i++) {
        int same = other[i]->ndim == in->q.ndim;
        for (int d = 0; same && d < in->q.ndim; d++) same = other[i]->shape[d] == in->q.shape[d];
        if (!same) {
            fprintf(stderr, "longvk: attn: shape mismatch: %s is %s but %s is %s (q, k and v must "
                    "have the same shape)\n", names[i], shape_str(other[i], s1, sizeof s1), a->q,
                    shape_str(&in->q, s2, sizeof s2));
            return 1;
        }
    }
    in->H = in->q.ndim == 3 ? in->q.shape[0] : 1;
    in->N = in->q.shape[in->q.ndim - 2];
    in->D = in->q.shape[in->q.ndim - 1];
    if (in->H < 1 || in->N < 1 || in->D < 1) {
        fprintf(stderr, "longvk: attn: %s is empty (shape %s)\n", a->q, shape_str(&in->q, s1, sizeof s1));
        return 1;
    }
    if (in->D > 4096 || in->H > 4096) {
        fprintf(stderr, "longvk: attn: %s: %lld heads of %lld dims is beyond what the state "
                "supports (4096 each)\n", a->q, (long long)in->H, (long long)in->D);
        return 1;
    }
    if (a->positions) {
        if (lv_npy_read(a->positions, &in->pos) != LV_OK) return cli_fail("attn");
        if (in->pos.ndim != 1 || in->pos.shape[0] != in->N) {
            fprintf(stderr, "longvk: attn: shape mismatch: %s is %s; expected [%lld], one position "
                    "per token\n", a->positions, shape_str(&in->pos, s1, sizeof s1), (long long)in->N);
            return 1;
        }
        if (in->D % 2) {
            fprintf(stderr, "longvk: attn: --rope-positions needs an even head dim; %s has d = %lld\n",
                    a->q, (long long)in->D);
            return 1;
        }
    }
    return 0;
}

/* rows [n0, n0 + count) of a [H, N, D] array into [count, H*D] */
static void gather_tokens(float *dst, const float *src, int64_t H, int64_t N, int64_t D, int64_t n0,
                          int64_t count) {
    for (int64_t t = 0; t < count; t++)
        for (int64_t h = 0; h < H; h++)
            memcpy(dst + (t * H + h) * D, src + (h * N + n0 + t) * D, (size_t)D * sizeof *dst);
}

static void scatter_tokens(float *dst, const float *src, int64_t H, int64_t N, int64_t D, int64_t n0,
                           int64_t count) {
    for (int64_t t = 0; t < count; t++)
        for (int64_t h = 0; h < H; h++)
            memcpy(dst + (h * N + n0 + t) * D, src + (t * H + h) * D, (size_t)D * sizeof *dst);
}

/* The block loop. Tokens go to the device in groups of whole blocks (about 32 MiB per
 * tensor), so device memory stays bounded whatever N is. */
static lv_status run_attention(lv_ctx *ctx, const attn_args *a, const attn_inputs *in,
                               int64_t block, float *result) {
    const int64_t H = in->H, N = in->N, D = in->D, row = H * D;
    int64_t group = ((32ll << 20) / (row * 4)) / block * block;
    if (group < block) group = block;
    if (group > (N + block - 1) / block * block) group = (N + block - 1) / block * block;
    lv_linattn_config cfg = {
        .heads = (int)H, .head_dim = (int)D, .phi = (lv_feature_map)a->phi,
        .normalize = a->normalize != 0, .eps = (float)a->eps,
        .rule = a->window ? LV_RULE_WINDOW : a->decay != 1.0 ? LV_RULE_DECAY : LV_RULE_ADDITIVE,
        .window = (int)a->window, .decay = (float)a->decay,
    };
    lv_status s = LV_OK;
    lv_linattn_state *st = NULL;
    lv_tensor tq = {0}, tk = {0}, tv = {0}, to = {0}, tr = {0};
    float *host = NULL, *table = NULL;
    int64_t sh[2] = {group, row}, shr[2] = {group, D};
    host = malloc((size_t)(group * row) * sizeof *host);
    table = a->positions ? malloc((size_t)(group * D) * sizeof *table) : NULL;
    if (!host || (a->positions && !table)) {
        s = lv_error(LV_ERR_NOMEM, "attn: cannot hold %lld tokens on the host", (long long)group);
        goto done;
    }
    if ((s = lv_linattn_state_create(ctx, &cfg, &st)) != LV_OK) goto done;
    if ((s = lv_tensor_create(ctx, LV_F32, 2, sh, &tq)) != LV_OK) goto done;
    if ((s = lv_tensor_create(ctx, LV_F32, 2, sh, &tk)) != LV_OK) goto done;
    if ((s = lv_tensor_create(ctx, LV_F32, 2, sh, &tv)) != LV_OK) goto done;
    if ((s = lv_tensor_create(ctx, LV_F32, 2, sh, &to)) != LV_OK) goto done;
    if (table && (s = lv_tensor_create(ctx, LV_F32, 2, shr, &tr)) != LV_OK) goto done;
    for (int64_t g0 = 0; g0 < N; g0 += group) {
        int64_t g = N - g0 < group ? N - g0 : group;
        lv_tensor vq = lv_tensor_rows(&tq, 0, g), vk = lv_tensor_rows(&tk, 0, g);
        lv_tensor vv = lv_tensor_rows(&tv, 0, g), vo = lv_tensor_rows(&to, 0, g);
        const lv_npy *src[3] = {&in->q, &in->k, &in->v};
        const lv_tensor *dst[3] = {&vq, &vk, &vv};
        for (int i = 0; i < 3 && s == LV_OK; i++) {
            gather_tokens(host, src[i]->data, H, N, D, g0, g);
            s = lv_tensor_write(ctx, dst[i], host, (uint64_t)(g * row) * 4);
        }
        lv_tensor vr = {0};
        if (s == LV_OK && table) {
            lv_rope_table_1d(table, in->pos.data + g0, (int)g, (int)D, 10000.0);
            vr = lv_tensor_rows(&tr, 0, g);
            s = lv_tensor_write(ctx, &vr, table, (uint64_t)(g * D) * 4);
        }
        for (int64_t b0 = 0; b0 < g && s == LV_OK; b0 += block) {
            int64_t n = g - b0 < block ? g - b0 : block;
            lv_tensor bq = lv_tensor_rows(&vq, b0, n), bk = lv_tensor_rows(&vk, b0, n);
            lv_tensor bv = lv_tensor_rows(&vv, b0, n), bo = lv_tensor_rows(&vo, b0, n);
            lv_tensor br = table ? lv_tensor_rows(&vr, b0, n) : vr;
            s = lv_linattn_block_write(ctx, st, &bo, &bq, &bk, &bv, table ? &br : NULL);
        }
        if (s == LV_OK) s = lv_tensor_read(ctx, &vo, host, (uint64_t)(g * row) * 4);
        if (s != LV_OK) goto done;
        scatter_tokens(result, host, H, N, D, g0, g);
    }
done:
    lv_linattn_state_destroy(ctx, st);
    lv_tensor_free(ctx, &tq);
    lv_tensor_free(ctx, &tk);
    lv_tensor_free(ctx, &tv);
    lv_tensor_free(ctx, &to);
    lv_tensor_free(ctx, &tr);
    free(host);
    free(table);
    return s;
}

int cmd_attn(int argc, char **argv) {
    int r = parse_args(argc, argv);
    if (r >= 0) return r;
    const attn_args a = args;
    attn_inputs in;
    if ((r = load_inputs(&a, &in)) != 0) {
        inputs_free(&in);
        return r;
    }
    int64_t block = a.mode == MODE_CAUSAL ? 1 : a.mode == MODE_FULL ? in.N : a.block;
    if (block > in.N) block = in.N;
    float *result = malloc((size_t)lv_npy_numel(&in.q) * sizeof *result);
    if (!result) {
        fprintf(stderr, "longvk: attn: out of host memory\n");
        inputs_free(&in);
        return 1;
    }
    lv_ctx_options opt;
    lv_ctx_options_default(&opt);
    if (a.device >= 0) opt.device_index = (int)a.device;
    lv_ctx *ctx = NULL;
    lv_status s = lv_ctx_create(&opt, &ctx);
    if (s == LV_OK) s = run_attention(ctx, &a, &in, block, result);
    if (s == LV_OK) s = lv_npy_write(a.out, in.q.ndim, in.q.shape, result);
    r = s == LV_OK ? 0 : cli_fail("attn");
    if (ctx) lv_ctx_destroy(ctx);
    free(result);
    inputs_free(&in);
    return r;
}
