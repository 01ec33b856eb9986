/* `longvk bench sp [--preset P] [--depth N] [--frames N] [--latent HxW] [--text-tokens L]
 *                  [--ranks LIST] [--link GBPS,US] [--runs N] [--vae] [--vae-dim D] [--json]`
 *
 * What sequence parallelism over R ranks (pipelines/parallel/README.md) costs and gains for
 * one LongSANA chunk of SANA-Video 2B at the real shape, random bf16 weights (bench dit's
 * set-up): per rank and per layer, the bytes each rank sends, the time in compute and in
 * communication, and the chunk's speed-up at R ranks modelled from those measurements and
 * a link.
 *
 * How: one DiT on this device runs the chunk unsplit (one rank), then as each rank r of R in
 * turn through the solo transport (lv_sp_comm_solo_create): exactly the band's device work
 * and the host staging an MPI rank does (partials read back, the gathered [R, M] written and
 * summed, the halo rows read and written, the prediction's rows), with the network left
 * out. Its statistics (lv_sp_comm_stats, timing on) give the bytes, counted per operation,
 * and the time inside the operations (staging); compute is the rest of the chunk. The
 * network is modelled: per message the link's latency, per byte its bandwidth, with the
 * MPI_Allgather of the state and of the prediction's rows as R - 1 ring steps. The transport
 * blocks (nothing overlaps yet), so a rank's modelled chunk is its measured chunk plus its
 * network time, and R ranks take as long as the slowest. Measured: the one-rank chunk, each
 * rank's chunk, staging and compute, the bytes; modelled: the network and the speed-ups.
 * The carried state goes on from one rank's runs to the next (a rank's values are no
 * video's), so every timed chunk reads a carried state, as in a long video.
 *
 * --vae adds the block's other half: the Wan2.1 VAE (random weights, bench vae's) decoding
 * latent frames after the video's first, unsplit and as each rank over the same number of
 * bands of latent rows (lv_vae_set_sequence_parallel with the solo transport: the band's
 * convs with their halo rows, the attention's gathered rows, the pixel rows to rank 0); a
 * block is then the chunk plus its frames' decode, one after the other on each rank, as
 * `generate` runs them. */
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "bench_dit_setup.h"
#include "bench_vae_weights.h"
#include "longvk/sampler.h"
#include "longvk/sp_comm.h"
#include "longvk/vae.h"

#define STEPS 4
#define PASSES (STEPS + 1)
#define MAX_RUNS 16
#define MAX_RANK_COUNTS 8
#define MAX_RANKS 64
#define MAX_LINKS 4

typedef struct sp_link {
    const char *name;
    double gbytes_per_s, latency_us;
} sp_link;

/* The design note's links (section 6), without NVLink: MPI moves host memory, which
 * Vulkan allocations reach only through the host. */
static const sp_link default_links[] = {
    {"PCIe host-staged", 25, 30},
    {"InfiniBand 100 Gb/s", 12.5, 5},
    {"InfiniBand 400 Gb/s", 50, 5},
};

typedef struct sp_bench_args {
    bench_dit_args shape;
    bool json;
    int runs;
    int ranks[MAX_RANK_COUNTS], nranks;
    sp_link given;
    bool have_link;
    bool vae;
    int vae_dim;
} sp_bench_args;

static sp_bench_args args;

static const char *parse_ranks(const char *s, void *dest) {
    sp_bench_args *a = dest;
    char buf[128];
    if (strlen(s) >= sizeof buf) return "is too long";
    snprintf(buf, sizeof buf, "%s", s);
    a->nranks = 0;
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        long v;
        if (a->nranks == MAX_RANK_COUNTS || !cli_parse_long(tok, 2, MAX_RANKS, &v))
            return "is not a list of up to 8 rank counts in [2, 64], e.g. 2,4,8";
        a->ranks[a->nranks++] = (int)v;
    }
    if (!a->nranks || s[strlen(s) - 1] == ',') return "is not a list of up to 8 rank counts in [2, 64], e.g. 2,4,8";
    return NULL;
}

static const char *parse_link(const char *s, void *dest) {
    sp_bench_args *a = dest;
    const char *comma = strchr(s, ',');
    char bw[64];
    if (!comma || (size_t)(comma - s) >= sizeof bw) return "is not GBPS,US (e.g. 12.5,5: 12.5 GB/s, 5 us a message)";
    memcpy(bw, s, (size_t)(comma - s));
    bw[comma - s] = '\0';
    double g, us;
    if (!cli_parse_finite(bw, &g) || !cli_parse_finite(comma + 1, &us) || g <= 0 || us < 0)
        return "is not GBPS,US with GB/s > 0 and microseconds >= 0 (e.g. 12.5,5)";
    a->given = (sp_link){"given", g, us};
    a->have_link = true;
    return NULL;
}

static cli_option options[] = {
    {.name = "--json", .kind = CLI_FLAG, .dest = &args.json, .help = "one JSON object with the same figures"},
    BENCH_DIT_SHAPE_OPTIONS(args.shape),
    {.name = "--ranks", .kind = CLI_CUSTOM, .dest = &args, .parse = parse_ranks, .metavar = "LIST", .def = "2,4,8",
     .help = "rank counts to measure and model (each at most the chunk's token rows)"},
    {.name = "--link", .kind = CLI_CUSTOM, .dest = &args, .parse = parse_link, .metavar = "GBPS,US",
     .def = "PCIe host-staged 25,30; InfiniBand 100 Gb/s 12.5,5; 400 Gb/s 50,5",
     .help = "the link to model instead: GB/s per direction and microseconds a message"},
    {.name = "--runs", .kind = CLI_INT, .dest = &args.runs, .metavar = "N", .min = 1, .max = MAX_RUNS, .def = "1",
     .help = "timed chunks per rank and for one rank, after one warm-up chunk (medians reported)"},
    {.name = "--vae", .kind = CLI_FLAG, .dest = &args.vae,
     .help = "also the VAE decode of the block's frames (random Wan2.1 weights), per rank over bands of latent "
             "rows, and the whole block modelled (at 480p: about 3 GB more device memory)"},
    {.name = "--vae-dim", .kind = CLI_INT, .dest = &args.vae_dim, .metavar = "D", .min = 4, .max = 512,
     .def = "96, Wan2.1's", .help = "with --vae: the decoder's base width, a multiple of 4 (e.g. 8 on lavapipe)"},
};

const cli_spec bench_sp_spec = {
    .command = "bench sp",
    .usage = "[--json] [--preset P] [--depth N] [--frames N] [--latent HxW] [--text-tokens L] [--ranks LIST]\n"
             "                [--link GBPS,US] [--runs N] [--vae] [--vae-dim D]",
    .about = "Sequence parallelism for one LongSANA chunk of SANA-Video 2B (random bf16 weights): each rank of\n"
             "R measured alone on this device (its band's work and host staging, no network), the bytes it\n"
             "sends per layer, its time in compute and in communication; then the chunk's time and speed-up\n"
             "at R ranks, modelled from those measurements and a link. --vae adds the VAE decode of the\n"
             "block's frames the same way, and models the whole block. On lavapipe use e.g. --depth 1\n"
             "--frames 1 --latent 16x26 (with --vae: --latent 4x4 --vae-dim 8).\n",
    .options = options,
    .count = CLI_COUNT(options),
};

/* One rank's measurements, per chunk. */
typedef struct rank_figures {
    int rows, halo_rows;
    double chunk_s, staging_s, compute_s;
    lv_sp_comm_stats per_chunk; /* one chunk's calls, bytes and messages; seconds averaged over the runs */
    /* --vae: one latent frame's decode (4 pixel frames) over bands of latent rows */
    int vae_rows;
    double vae_s, vae_staging_s;
    lv_sp_comm_stats vae_per_frame;
} rank_figures;

/* A link's time for a rank's chunk: per message its latency, per byte its bandwidth. */
static double network_s(const lv_sp_comm_stats *st, const sp_link *l) {
    double t = 0;
    for (int op = 0; op < LV_SP_OPS; op++)
        t += (double)st->messages[op] * l->latency_us * 1e-6 + (double)st->bytes_sent[op] / (l->gbytes_per_s * 1e9);
    return t;
}

static double per_call(const lv_sp_comm_stats *st, lv_sp_op op) {
    return st->calls[op] ? (double)st->bytes_sent[op] / (double)st->calls[op] : 0;
}

typedef struct chunk_runner {
    lv_ctx *ctx;
    lv_dit *dit;
    lv_chunk_options opt;
    int64_t next;  /* chunk index: positions go on, as in a long video */
    int frames, lh, lw;
    float *x0;
} chunk_runner;

static lv_status run_chunk(chunk_runner *cr, double *seconds) {
    double t0 = bench_now();
    lv_status s = lv_longsana_chunk(cr->ctx, cr->dit, &cr->opt, (int)cr->next, (int)(cr->next * cr->frames),
                                    cr->frames, cr->lh, cr->lw, cr->x0);
    cr->next++;
    *seconds = bench_now() - t0;
    return s;
}

/* Rank r of R alone: `runs` chunks through the solo transport. */
static lv_status measure_rank(chunk_runner *cr, int R, int r, int Hp, int runs, rank_figures *out) {
    int row0;
    LV_TRY(lv_sp_band(Hp, R, r, &row0, &out->rows));
    out->halo_rows = (r > 0) + (r < R - 1);
    lv_sp_comm *comm = NULL;
    LV_TRY(lv_sp_comm_solo_create(R, r, &comm));
    lv_sp_comm_set_timing(comm, true);
    lv_status s = lv_dit_set_sp_comm(cr->dit, comm);
    double chunk[MAX_RUNS], staging = 0;
    lv_sp_comm_stats st = {0};
    for (int k = 0; s == LV_OK && k < runs; k++) {
        lv_sp_comm_stats_reset(comm);
        s = run_chunk(cr, &chunk[k]);
        lv_sp_comm_stats_get(comm, &st);
        for (int op = 0; op < LV_SP_OPS; op++) staging += st.seconds[op];
    }
    lv_dit_set_sp_comm(cr->dit, NULL);
    lv_sp_comm_destroy(comm);
    LV_TRY(s);
    out->chunk_s = bench_median(chunk, runs);
    out->staging_s = staging / runs;
    out->compute_s = out->chunk_s - out->staging_s;
    out->per_chunk = st;
    for (int op = 0; op < LV_SP_OPS; op++) out->per_chunk.seconds[op] = 0;
    return LV_OK;
}

/* ---- --vae ---- */

typedef struct vae_runner {
    lv_weights *weights;
    lv_vae_decoder *dec;
    float *frame; /* one latent frame [z, 1, h, w] */
    int h, w;
    char path[4096];
} vae_runner;

static lv_status discard_frame(void *user, int64_t index, const float *rgb, int height, int width) {
    (void)user, (void)index, (void)rgb, (void)height, (void)width;
    return LV_OK;
}

static void vae_close(lv_ctx *ctx, vae_runner *v) {
    if (v->dec) lv_vae_decoder_destroy(ctx, v->dec);
    lv_weights_close(v->weights);
    if (v->path[0]) unlink(v->path);
    free(v->frame);
    *v = (vae_runner){0};
}

/* Random weights of base width dim written to a temporary file and loaded. */
static lv_status vae_open(lv_ctx *ctx, int dim, int h, int w, vae_runner *v) {
    *v = (vae_runner){.h = h, .w = w};
    const char *tmpdir = getenv("TMPDIR");
    snprintf(v->path, sizeof v->path, "%s/longvk-bench-sp-vae-XXXXXX", tmpdir && *tmpdir ? tmpdir : "/tmp");
    int fd = mkstemp(v->path);
    if (fd < 0) {
        v->path[0] = '\0';
        return lv_error(LV_ERR_IO, "cannot make a temporary file in %s", tmpdir && *tmpdir ? tmpdir : "/tmp");
    }
    close(fd);
    lv_status s = bench_vae_write_random(v->path, dim);
    if (s == LV_OK) s = lv_weights_open(v->path, &v->weights);
    if (s == LV_OK) s = lv_vae_decoder_create(ctx, v->weights, &v->dec);
    if (s == LV_OK) {
        const size_t n = (size_t)lv_vae_z_dim(v->dec) * h * w;
        if (!(v->frame = malloc(n * sizeof *v->frame))) s = lv_error(LV_ERR_NOMEM, "out of host memory");
        uint64_t noise = 777; /* uniform in [-1, 1), as bench vae */
        for (size_t i = 0; s == LV_OK && i < n; i++) {
            noise = noise * 6364136223846793005ull + 1442695040888963407ull;
            v->frame[i] = (float)((noise >> 40) & 0xffffff) / 8388608.0f - 1.0f;
        }
    }
    if (s != LV_OK) vae_close(ctx, v);
    return s;
}

/* Latent frames after a video's first (which makes 1 pixel frame, not 4), over comm's bands
 * (NULL: unsplit): the median of `runs` decodes, and with comm one frame's statistics and
 * the mean staging time. */
static lv_status vae_time(lv_ctx *ctx, vae_runner *v, lv_sp_comm *comm, int runs, double *seconds, double *staging,
                          lv_sp_comm_stats *per_frame) {
    lv_vae_reset(v->dec);
    LV_TRY(lv_vae_set_sequence_parallel(v->dec, 0, comm));
    LV_TRY(lv_vae_decode_frames_cb(ctx, v->dec, v->frame, 1, v->h, v->w, discard_frame, NULL)); /* the first */
    double t[MAX_RUNS], stage = 0;
    for (int k = 0; k < runs; k++) {
        lv_sp_comm_stats_reset(comm);
        LV_TRY(lv_flush(ctx));
        double t0 = bench_now();
        LV_TRY(lv_vae_decode_frames_cb(ctx, v->dec, v->frame, 1, v->h, v->w, discard_frame, NULL));
        LV_TRY(lv_flush(ctx));
        t[k] = bench_now() - t0;
        if (comm) {
            lv_sp_comm_stats_get(comm, per_frame);
            for (int op = 0; op < LV_SP_OPS; op++) stage += per_frame->seconds[op];
        }
    }
    *seconds = bench_median(t, runs);
    if (staging) *staging = stage / runs;
    if (comm) for (int op = 0; op < LV_SP_OPS; op++) per_frame->seconds[op] = 0;
    lv_vae_reset(v->dec);
    return lv_vae_set_sequence_parallel(v->dec, 0, NULL);
}

/* Rank r of R decoding its band of latent rows alone (the solo transport). */
static lv_status measure_vae_rank(lv_ctx *ctx, vae_runner *v, int R, int r, int runs, rank_figures *out) {
    int row0;
    LV_TRY(lv_sp_band(v->h, R, r, &row0, &out->vae_rows));
    lv_sp_comm *comm = NULL;
    LV_TRY(lv_sp_comm_solo_create(R, r, &comm));
    lv_sp_comm_set_timing(comm, true);
    lv_status s = vae_time(ctx, v, comm, runs, &out->vae_s, &out->vae_staging_s, &out->vae_per_frame);
    lv_sp_comm_destroy(comm);
    return s;
}

/* R ranks: the slowest rank's compute and chunk, and per link the modelled chunk (each rank's
 * measured chunk plus its network time; R ranks take as long as the slowest). */
typedef struct rank_count_summary {
    double slowest_compute, slowest_chunk, modelled[MAX_LINKS];
    /* --vae: a block = the chunk + `frames` latent frames' decode, on each rank one after the other */
    double slowest_block_no_network, modelled_block[MAX_LINKS];
} rank_count_summary;

static rank_count_summary summarize(int R, const rank_figures *rf, const sp_link *links, int nlinks, int frames) {
    rank_count_summary m = {0};
    for (int r = 0; r < R; r++) {
        if (rf[r].compute_s > m.slowest_compute) m.slowest_compute = rf[r].compute_s;
        if (rf[r].chunk_s > m.slowest_chunk) m.slowest_chunk = rf[r].chunk_s;
        const double block = rf[r].chunk_s + frames * rf[r].vae_s;
        if (block > m.slowest_block_no_network) m.slowest_block_no_network = block;
        for (int l = 0; l < nlinks; l++) {
            double t = rf[r].chunk_s + network_s(&rf[r].per_chunk, &links[l]);
            if (t > m.modelled[l]) m.modelled[l] = t;
            t = block + network_s(&rf[r].per_chunk, &links[l]) + frames * network_s(&rf[r].vae_per_frame, &links[l]);
            if (t > m.modelled_block[l]) m.modelled_block[l] = t;
        }
    }
    return m;
}

/* --vae: what one block costs on one rank, unsplit */
typedef struct vae_one_rank {
    bool on;
    int frames;        /* latent frames in a block */
    double latent_s;   /* one latent frame's decode */
} vae_one_rank;

static void print_rank_count(int R, const rank_figures *rf, const sp_link *links, int nlinks, double one_rank_s,
                             int depth, const vae_one_rank *vo) {
    printf("\nR = %d, bands of", R);
    for (int r = 0; r < R; r++) printf("%s%d", r ? "/" : " ", rf[r].rows);
    printf(" token rows\n");
    printf("  rank rows halo | measured: chunk s  staging s  compute s | counted, sent: state sum MB/layer"
           "  halo MB/layer  rows MB/read pass\n");
    for (int r = 0; r < R; r++) {
        const lv_sp_comm_stats *st = &rf[r].per_chunk;
        printf("  %4d %4d %4d | %17.4f %10.4f %10.4f | %33.3f %14.3f %18.3f\n", r, rf[r].rows, rf[r].halo_rows,
               rf[r].chunk_s, rf[r].staging_s, rf[r].compute_s, per_call(st, LV_SP_STATE_SUM) / 1e6,
               per_call(st, LV_SP_HALO) / 1e6, per_call(st, LV_SP_GATHER_ROWS) / 1e6);
    }
    const rank_count_summary m = summarize(R, rf, links, nlinks, vo->on ? vo->frames : 0);
    printf("  per layer: %.1f ms of compute on the slowest rank (a pass's compute over its %d block%s, the "
           "embedding and final layer counted in)\n", 1e3 * m.slowest_compute / PASSES / depth, depth,
           depth == 1 ? "" : "s");
    printf("  modelled chunk (the slowest rank's measured chunk + its network time, nothing overlapped):\n");
    for (int l = 0; l < nlinks; l++)
        printf("    %-20s %5.1f GB/s %4.0f us: %.4f s, speed-up x%.2f\n", links[l].name, links[l].gbytes_per_s,
               links[l].latency_us, m.modelled[l], one_rank_s / m.modelled[l]);
    printf("    no network at all: x%.2f (staging included); compute alone: x%.2f\n", one_rank_s / m.slowest_chunk,
           one_rank_s / m.slowest_compute);
    if (!vo->on) return;
    printf("  VAE, one latent frame after the first (4 pixel frames), bands of latent rows:\n");
    printf("  rank rows | measured: decode s  staging s | counted, sent: halo MB  gathered MB  messages\n");
    for (int r = 0; r < R; r++) {
        const lv_sp_comm_stats *st = &rf[r].vae_per_frame;
        printf("  %4d %4d | %18.4f %10.4f | %21.3f %12.3f %9llu\n", r, rf[r].vae_rows, rf[r].vae_s,
               rf[r].vae_staging_s, st->bytes_sent[LV_SP_HALO] / 1e6, st->bytes_sent[LV_SP_GATHER_ROWS] / 1e6,
               (unsigned long long)(st->messages[LV_SP_HALO] + st->messages[LV_SP_GATHER_ROWS]));
    }
    const double one_block = one_rank_s + vo->frames * vo->latent_s;
    printf("  modelled block (the chunk, then its %d latent frames' decode; one rank: %.4f s):\n", vo->frames,
           one_block);
    for (int l = 0; l < nlinks; l++)
        printf("    %-20s %.4f s, speed-up x%.2f\n", links[l].name, m.modelled_block[l], one_block / m.modelled_block[l]);
    printf("    no network at all: x%.2f\n", one_block / m.slowest_block_no_network);
}

static void json_rank_count(int R, const rank_figures *rf, const sp_link *links, int nlinks, double one_rank_s,
                            bool first, const vae_one_rank *vo) {
    printf("%s{\"ranks\": %d, \"bands\": [", first ? "" : ", ", R);
    for (int r = 0; r < R; r++) {
        const lv_sp_comm_stats *st = &rf[r].per_chunk;
        printf("%s{\"band\": %d, \"rows\": %d, \"halo_rows\": %d, \"chunk_s\": %.6f, \"staging_s\": %.6f, "
               "\"compute_s\": %.6f, \"state_sum_bytes_per_layer\": %.0f, \"halo_bytes_per_layer\": %.0f, "
               "\"rows_bytes_per_read_pass\": %.0f, \"calls\": [%llu, %llu, %llu], \"bytes_per_chunk\": [%llu, %llu, "
               "%llu], \"messages_per_chunk\": [%llu, %llu, %llu]}",
               r ? ", " : "", r, rf[r].rows, rf[r].halo_rows, rf[r].chunk_s, rf[r].staging_s, rf[r].compute_s,
               per_call(st, LV_SP_STATE_SUM), per_call(st, LV_SP_HALO), per_call(st, LV_SP_GATHER_ROWS),
               (unsigned long long)st->calls[0], (unsigned long long)st->calls[1], (unsigned long long)st->calls[2],
               (unsigned long long)st->bytes_sent[0], (unsigned long long)st->bytes_sent[1],
               (unsigned long long)st->bytes_sent[2], (unsigned long long)st->messages[0],
               (unsigned long long)st->messages[1], (unsigned long long)st->messages[2]);
    }
    const rank_count_summary m = summarize(R, rf, links, nlinks, vo->on ? vo->frames : 0);
    printf("]");
    if (vo->on) {
        printf(", \"vae_bands\": [");
        for (int r = 0; r < R; r++) {
            const lv_sp_comm_stats *st = &rf[r].vae_per_frame;
            printf("%s{\"band\": %d, \"latent_rows\": %d, \"latent_frame_s\": %.6f, \"staging_s\": %.6f, "
                   "\"halo_bytes\": %llu, \"gather_bytes\": %llu, \"messages\": %llu}", r ? ", " : "", r,
                   rf[r].vae_rows, rf[r].vae_s, rf[r].vae_staging_s, (unsigned long long)st->bytes_sent[LV_SP_HALO],
                   (unsigned long long)st->bytes_sent[LV_SP_GATHER_ROWS],
                   (unsigned long long)(st->messages[LV_SP_HALO] + st->messages[LV_SP_GATHER_ROWS]));
        }
        const double one_block = one_rank_s + vo->frames * vo->latent_s;
        printf("], \"modelled_block\": [");
        for (int l = 0; l < nlinks; l++)
            printf("%s{\"link\": \"%s\", \"block_s\": %.6f, \"speedup\": %.4f}", l ? ", " : "", links[l].name,
                   m.modelled_block[l], one_block / m.modelled_block[l]);
        printf("], \"block_speedup_no_network\": %.4f", one_block / m.slowest_block_no_network);
    }
    printf(", \"modelled\": [");
    for (int l = 0; l < nlinks; l++)
        printf("%s{\"link\": \"%s\", \"chunk_s\": %.6f, \"speedup\": %.4f}", l ? ", " : "", links[l].name,
               m.modelled[l], one_rank_s / m.modelled[l]);
    printf("], \"speedup_no_network\": %.4f, \"speedup_compute_only\": %.4f}", one_rank_s / m.slowest_chunk,
           one_rank_s / m.slowest_compute);
}

int bench_sp(int argc, char **argv) {
    args = (sp_bench_args){.shape = BENCH_DIT_ARGS_DEFAULT, .runs = 1, .ranks = {2, 4, 8}, .nranks = 3, .vae_dim = 96};
    int r = cli_parse(&bench_sp_spec, argc, argv);
    if (r >= 0) return r;
    const sp_link *links = args.have_link ? &args.given : default_links;
    const int nlinks = args.have_link ? 1 : (int)(sizeof default_links / sizeof default_links[0]);
    /* the rank counts against the token rows first: making the weights takes seconds */
    lv_sana_config pc;
    const bench_dit_shape *shp = &bench_dit_shapes[args.shape.preset];
    if (lv_sana_config_preset(shp->preset, &pc) != LV_OK) {
        fprintf(stderr, "longvk bench sp: %s\n", lv_last_error());
        return 1;
    }
    const int lh = args.shape.have_latent ? (int)args.shape.latent[0] : shp->latent_h;
    const int Hp = lh / pc.patch[1];
    for (int i = 0; i < args.nranks; i++)
        if (args.ranks[i] > Hp)
            return cli_usage_error("bench sp", "--ranks: %d ranks but the chunk has %d token rows (latent height %d "
                                   "/ patch %d): at most %d", args.ranks[i], Hp, lh, pc.patch[1], Hp);
    if (args.vae && args.vae_dim % 4) return cli_usage_error("bench sp", "--vae-dim must be a multiple of 4");
    if (!args.vae && cli_given(&bench_sp_spec, "--vae-dim")) return cli_usage_error("bench sp", "--vae-dim needs --vae");
    bench_dit_run run;
    if ((r = bench_dit_open("bench sp", &args.shape, NULL, NULL, BENCH_DIT_NO_NMSE, &run)) != 0) return r;
    vae_runner vr = {0};
    vae_one_rank vo = {.on = args.vae, .frames = args.shape.frames};
    const lv_device_info *dev = lv_ctx_device(run.ctx);
    int rc = 1;
    static const float steps[STEPS] = {1000, 960, 889, 727};
    chunk_runner cr = {.ctx = run.ctx, .dit = run.dit, .frames = args.shape.frames, .lh = run.lh, .lw = run.lw,
                       .opt = {.timesteps = steps, .steps = STEPS, .seed = 1, .cfg_scale = 1.0}};
    rank_figures *rf = calloc(MAX_RANKS, sizeof *rf);
    cr.x0 = malloc((size_t)run.cfg.out_channels * args.shape.frames * run.lh * run.lw * sizeof *cr.x0);
    if (!rf || !cr.x0) {
        fprintf(stderr, "longvk bench sp: out of host memory\n");
        goto done;
    }
    if (!args.json)
        fprintf(stderr, "%s on %s: depth %d of %d, %d latent frames of %dx%d (%lld tokens, %d token rows); weights "
                        "made in %.1f s, uploaded in %.1f s; a warm-up chunk, then %d timed per rank...\n",
                run.shape->preset, dev->name, run.cfg.depth, run.full_depth, args.shape.frames, run.lh, run.lw,
                (long long)run.T, Hp, run.make_s, run.upload_s, args.runs);
    double t, one[MAX_RUNS];
    if (run_chunk(&cr, &t) != LV_OK) {
        fprintf(stderr, "longvk bench sp: the warm-up chunk: %s\n", lv_last_error());
        goto done;
    }
    for (int k = 0; k < args.runs; k++)
        if (run_chunk(&cr, &one[k]) != LV_OK) {
            fprintf(stderr, "longvk bench sp: one rank: %s\n", lv_last_error());
            goto done;
        }
    const double one_rank_s = bench_median(one, args.runs);
    if (args.vae) {
        if (vae_open(run.ctx, args.vae_dim, run.lh, run.lw, &vr) != LV_OK ||
            vae_time(run.ctx, &vr, NULL, args.runs, &vo.latent_s, NULL, NULL) != LV_OK) {
            fprintf(stderr, "longvk bench sp: the VAE: %s\n", lv_last_error());
            goto done;
        }
    }
    if (args.json)
        printf("{\"bench\": \"sp\", \"device\": \"%s\", \"preset\": \"%s\", \"depth\": %d, \"model_depth\": %d, "
               "\"frames\": %d, \"latent\": [%d, %d], \"tokens\": %lld, \"token_rows\": %d, \"runs\": %d, "
               "\"passes_per_chunk\": %d, \"one_rank_chunk_s\": %.6f, \"ops\": [\"%s\", \"%s\", \"%s\"], "
               "\"vae_dim\": %d, \"one_rank_vae_latent_frame_s\": %.6f, \"rank_counts\": [",
               dev->name, run.shape->preset, run.cfg.depth, run.full_depth, args.shape.frames, run.lh, run.lw,
               (long long)run.T, Hp, args.runs, PASSES, one_rank_s, lv_sp_op_name(LV_SP_STATE_SUM),
               lv_sp_op_name(LV_SP_HALO), lv_sp_op_name(LV_SP_GATHER_ROWS), args.vae ? args.vae_dim : 0,
               vo.latent_s);
    else
        printf("sequence parallelism on %s: %s, depth %d of %d, %d latent frames of %dx%d = %lld tokens, %d token "
               "rows\none rank, unsplit (measured): %.4f s a chunk (%d passes), %.1f ms a layer\n",
               dev->name, run.shape->preset, run.cfg.depth, run.full_depth, args.shape.frames, run.lh, run.lw,
               (long long)run.T, Hp, one_rank_s, PASSES, 1e3 * one_rank_s / PASSES / run.cfg.depth);
    if (args.vae && !args.json)
        printf("VAE of width %d, one rank, unsplit (measured): %.4f s a latent frame after the first (4 pixel "
               "frames)\n", args.vae_dim, vo.latent_s);
    for (int i = 0; i < args.nranks; i++) {
        const int R = args.ranks[i];
        for (int b = 0; b < R; b++)
            if (measure_rank(&cr, R, b, Hp, args.runs, &rf[b]) != LV_OK ||
                (args.vae && measure_vae_rank(run.ctx, &vr, R, b, args.runs, &rf[b]) != LV_OK)) {
                if (args.json) printf("]}\n");
                fprintf(stderr, "longvk bench sp: rank %d of %d: %s\n", b, R, lv_last_error());
                goto done;
            }
        if (args.json) json_rank_count(R, rf, links, nlinks, one_rank_s, i == 0, &vo);
        else print_rank_count(R, rf, links, nlinks, one_rank_s, run.cfg.depth, &vo);
        fflush(stdout);
    }
    if (args.json) {
        printf("], \"links\": [");
        for (int l = 0; l < nlinks; l++)
            printf("%s{\"name\": \"%s\", \"gbytes_per_s\": %g, \"latency_us\": %g}", l ? ", " : "", links[l].name,
                   links[l].gbytes_per_s, links[l].latency_us);
        printf("]}\n");
    } else {
        printf("\nmeasured: the chunks, staging (host copies and device syncs of the transport) and compute (the "
               "rest);\ncounted: bytes and messages; modelled: the network and the speed-ups (no overlap: the "
               "transport blocks).\n");
    }
    rc = 0;
done:
    vae_close(run.ctx, &vr);
    bench_dit_close(&run);
    free(cr.x0);
    free(rf);
    return rc;
}
