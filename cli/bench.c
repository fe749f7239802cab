/* bench.c - --bench: synthetic or given texts, repeated runs, per-operation breakdown. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "bench.h"
#include "input.h"
#include "msg.h"
#include "output.h"
#include "paths.h"
#include "pipeline.h"

typedef struct {
    char name[64];
    int n_seq;
    int32_t **ids;
    size_t *lens;
    size_t tokens;
    double mean, sd;  /* tokens per second over the repetitions */
    double rec_per_s;
} bench_case;

/* A text that tokenizes to exactly n tokens (<bos> and <eos> included): words are added
 * until it is long enough, then the tokens are cut, keeping <eos>. */
static bool synth(ge_model *m, int n, int salt, ge_tokens *out)
{
    static const char *const words[] = {
        "the", "model", "reads", "every", "record", "and", "writes", "one", "vector",
        "per", "line", "so", "that", "a", "batch", "job", "never", "loses", "work",
        "while", "index", "grows", "quickly", "across", "many", "machines", "embedding",
        "search", "query", "document", "2026", "CPU", "tokens", "waves", "of", "short"};
    const size_t nw = sizeof words / sizeof words[0];
    size_t cap = (size_t)n * 12 + 64, len = 0;
    char *text = malloc(cap);
    ge_err err;
    if (!text)
        return false;
    unsigned r = 2166136261u ^ (unsigned)salt;
    for (;;) {
        out->n = 0;
        text[len] = 0;
        if (ge_tokenize(m, NULL, text, len, out, &err) || (int)out->n >= n || len + 16 > cap)
            break;
        r = r * 1103515245u + 12345u;
        const char *w = words[(r >> 16) % nw];
        len += (size_t)snprintf(text + len, cap - len, "%s%s", len ? " " : "", w);
    }
    free(text);
    ge_tokens_truncate(m, out, (size_t)n);
    return (int)out->n == n;
}

static bool add_synth_case(ge_model *m, bench_case *c, int n_seq, int len)
{
    snprintf(c->name, sizeof c->name, "%d x %d tokens", n_seq, len);
    c->n_seq = n_seq;
    c->ids = calloc((size_t)n_seq, sizeof *c->ids);
    c->lens = calloc((size_t)n_seq, sizeof *c->lens);
    if (!c->ids || !c->lens)
        return false;
    for (int s = 0; s < n_seq; s++) {
        ge_tokens t = {0};
        if (!synth(m, len, s + 1, &t))
            return false;
        c->ids[s] = t.ids;
        c->lens[s] = t.n;
        c->tokens += t.n;
    }
    return true;
}

ge_status ge_bench_weights(FILE *f, const ge_opts *o, const ge_model *m, ge_err *err)
{
    const char *files[3] = {o->model, o->n_mmproj > 0 ? o->mmproj[0] : NULL,
                            o->n_mmproj > 1 ? o->mmproj[1] : NULL};
    for (int i = 0; i < 3 && files[i]; i++) {
        ge_weight_type w[32];
        int n;
        ge_status st = ge_model_file_types(m, files[i], w, 32, &n, err);
        if (st)
            return st;
        const char *base = strrchr(files[i], '/') ? strrchr(files[i], '/') + 1 : files[i];
        for (int k = 0; k < n; k++) {
            fprintf(f, "%-16s %s: %-6s", "weights", base, w[k].name);
            if (w[k].matrices)
                fprintf(f, " %4d matri%s %8.1f MB, %s", w[k].matrices,
                        w[k].matrices > 1 ? "ces" : "x", (double)w[k].bytes / 1e6, w[k].kernel);
            if (w[k].vectors)
                fprintf(f, "%s %4d vector%s", w[k].matrices ? ";" : "", w[k].vectors,
                        w[k].vectors > 1 ? "s" : "");
            fputc('\n', f);
        }
    }
    return GE_OK;
}

/* The per-operation table of one phase: share of its time, GMAC/s, % of the machine's peak. */
static void ops_table(const ge_op_stats *t, double phase_seconds, double peak8, double peak32,
                      int threads)
{
    fprintf(stderr, "\n| %-11s | %6s | %9s | %8s | %12s |\n", "operation", "share", "GMAC/s",
            "calls", "% of peak");
    fprintf(stderr, "|-------------|--------|-----------|----------|--------------|\n");
    for (int op = 0; op < GE_OP_COUNT; op++) {
        if (!t->calls[op] && op != GE_OP_OTHER)
            continue;
        double gmacs = t->seconds[op] > 0 ? t->macs[op] / t->seconds[op] * 1e-9 : 0;
        const bool int8 = op == GE_OP_Q8_GEMM || op == GE_OP_KQ_GEMM;
        double peak = (int8 ? peak8 : peak32) * threads;
        char frac[32] = "";
        if (t->macs[op] > 0 && peak > 0)
            snprintf(frac, sizeof frac, "%.1f%% (%s)", 100.0 * gmacs / peak,
                     int8 ? "int8" : "fp32");
        fprintf(stderr, "| %-11s | %5.1f%% | %9.1f | %8llu | %12s |\n", ge_op_name((ge_op)op),
                100.0 * t->seconds[op] / phase_seconds, gmacs, t->calls[op], frac);
    }
}

/* The per-operation totals as a JSON object. */
static void ops_json(FILE *f, const ge_op_stats *t)
{
    fputc('{', f);
    for (int op = 0; op < GE_OP_COUNT; op++)
        fprintf(f, "%s\n  \"%s\": {\"seconds\": %.4f, \"gmac\": %.3f, \"calls\": %llu}",
                op ? "," : "", ge_op_name((ge_op)op), t->seconds[op], t->macs[op] * 1e-9,
                t->calls[op]);
    fputc('}', f);
}

static void stats_add(ge_stats *total, const ge_stats *s)
{
    for (int ph = 0; ph < GE_PHASE_COUNT; ph++)
        for (int op = 0; op < GE_OP_COUNT; op++) {
            total->ops[ph].seconds[op] += s->ops[ph].seconds[op];
            total->ops[ph].macs[op] += s->ops[ph].macs[op];
            total->ops[ph].calls[op] += s->ops[ph].calls[op];
        }
    total->forward_seconds += s->forward_seconds;
    total->pool_seconds += s->pool_seconds;
    total->vision_seconds += s->vision_seconds;
    total->audio_seconds += s->audio_seconds;
    total->images += s->images;
    total->clips += s->clips;
}

/* The sample standard deviation of reps values from their sum and sum of squares. */
static double sd_of(double sum, double sum2, int reps)
{
    return reps > 1 ? sqrt(fmax(0.0, (sum2 - sum * sum / reps) / (reps - 1))) : 0.0;
}

/* One synthetic image per budget (a 1280x960 picture's grid), encoded reps times: seconds
 * per image and the tower's GMAC/s. GE_E_UNSUPPORTED with no case when the mmproj has no
 * vision tower (not a failure of the run). */
typedef struct {
    int budget, patches, soft;
    double mean, sd, gmacs;
} image_case;
enum { MAX_BUDGETS = 8 }; /* image cases: one per budget (GE_BUDGETS has 5) */

static ge_status bench_images(ge_model *m, int reps, image_case *cases, int *n_cases,
                              ge_stats *total, ge_err *err)
{
    ge_status es = GE_OK;
    *n_cases = 0;
    for (int b = 0; ge_budget(b) && b < MAX_BUDGETS; b++) {
        int th, tw, soft;
        if ((es = ge_image_plan(960, 1280, ge_budget(b), &th, &tw, &soft, err)))
            return es;
        const int pw = tw / GE_IMAGE_PATCH, ph = th / GE_IMAGE_PATCH, n = pw * ph;
        float *patches = malloc((size_t)n * GE_IMAGE_PATCH_DIM * sizeof *patches);
        int32_t *pos = malloc((size_t)n * 2 * sizeof *pos);
        float *rows = malloc((size_t)soft * ge_model_hidden(m) * sizeof *rows);
        if (!patches || !pos || !rows) /* no message: the run just ends with status 1 */
            es = ge_fail(err, GE_E_NOMEM, "%s", "");
        bool ok = !es;
        for (size_t i = 0; ok && i < (size_t)n * GE_IMAGE_PATCH_DIM; i++)
            patches[i] = (float)((i * 2654435761u) >> 8 & 255) / 255.0f;
        for (int t = 0; ok && t < n; t++)
            pos[2 * t] = t % pw, pos[2 * t + 1] = t / pw;
        double sum = 0, sum2 = 0, macs = 0, secs = 0;
        for (int r = -1; ok && r < reps; r++) { /* r = -1: warm-up (repacking, workspace) */
            ge_model_stats_reset(m);
            es = ge_model_encode_image(m, patches, pos, pw, ph, rows, err);
            if (es) { /* GE_E_UNSUPPORTED: e.g. an audio-only mmproj */
                ok = false;
                break;
            }
            ge_stats st;
            ge_model_stats(m, &st);
            if (r < 0)
                continue;
            sum += st.vision_seconds, sum2 += st.vision_seconds * st.vision_seconds;
            secs += st.vision_seconds;
            for (int op = 0; op < GE_OP_COUNT; op++)
                macs += st.ops[GE_PHASE_VISION].macs[op];
            stats_add(total, &st);
        }
        free(patches), free(pos), free(rows);
        if (!ok)
            return es;
        image_case *c = &cases[(*n_cases)++];
        *c = (image_case){ge_budget(b), n, soft, sum / reps, sd_of(sum, sum2, reps),
                          macs / secs * 1e-9};
    }
    ge_model_trim(m);
    return GE_OK;
}

/* A synthetic clip per duration (docs/product.md 6: 1, 10, 30 s; two gliding tones over noise, the
 * same samples every run), encoded reps times: seconds per clip, seconds of audio per second
 * and the tower's GMAC/s. An mmproj without an audio tower gives no audio cases and is not
 * a failure: GE_E_UNSUPPORTED with no case. */
typedef struct {
    double duration;
    int64_t samples;
    int soft;
    double mean, sd, rate, gmacs;
} audio_case;

static void synth_clip(float *pcm, int64_t n)
{
    const double two_pi = 6.283185307179586;
    unsigned r = 2463534242u;
    for (int64_t i = 0; i < n; i++) {
        double t = (double)i / GE_AUDIO_RATE;
        r ^= r << 13, r ^= r >> 17, r ^= r << 5;
        double noise = ((double)(r >> 8) / 16777216.0 - 0.5) * 0.1;
        pcm[i] = (float)(0.3 * sin(two_pi * (220.0 + 20.0 * sin(t)) * t) +
                         0.15 * sin(two_pi * 1375.0 * t) * (0.5 + 0.5 * sin(two_pi * 3.0 * t)) +
                         noise);
    }
}

static ge_status bench_audio(ge_model *m, int reps, audio_case *cases, int *n_cases,
                             ge_stats *total, ge_err *err)
{
    static const double durations[] = {1, 10, 30};
    *n_cases = 0;
    for (size_t d = 0; d < sizeof durations / sizeof durations[0]; d++) {
        const int64_t n = (int64_t)(durations[d] * GE_AUDIO_RATE);
        const int64_t soft = ge_model_audio_tokens(m, n);
        float *pcm = malloc((size_t)n * sizeof *pcm);
        float *rows = malloc((size_t)soft * ge_model_hidden(m) * sizeof *rows);
        if (!pcm || !rows) {
            free(pcm), free(rows);
            return ge_fail(err, GE_E_NOMEM, "out of memory");
        }
        synth_clip(pcm, n);
        double sum = 0, sum2 = 0, macs = 0, secs = 0;
        ge_status es = GE_OK;
        for (int r = -1; !es && r < reps; r++) { /* r = -1: warm-up (repacking, workspace) */
            ge_model_stats_reset(m);
            es = ge_model_encode_audio(m, pcm, n, rows, err);
            ge_stats st;
            ge_model_stats(m, &st);
            if (es || r < 0)
                continue;
            sum += st.audio_seconds, sum2 += st.audio_seconds * st.audio_seconds;
            secs += st.audio_seconds;
            for (int op = 0; op < GE_OP_COUNT; op++)
                macs += st.ops[GE_PHASE_AUDIO].macs[op];
            stats_add(total, &st);
        }
        free(pcm), free(rows);
        if (es) /* GE_E_UNSUPPORTED: e.g. a vision-only mmproj */
            return es;
        audio_case *c = &cases[(*n_cases)++];
        const double mean = sum / reps;
        *c = (audio_case){durations[d], n, (int)soft, mean, sd_of(sum, sum2, reps),
                          mean > 0 ? durations[d] / mean : 0, secs > 0 ? macs / secs * 1e-9 : 0};
    }
    ge_model_trim(m);
    return GE_OK;
}

/* ---- --bench FILE: the records given, through the whole pipeline ------------------------ */

/* The stages of a run, as --bench FILE reports them. */
enum {
    ST_READ, ST_DECODE_IMAGE, ST_DECODE_AUDIO, ST_DECODE_VIDEO, ST_TOKENIZE, ST_VISION, ST_AUDIO,
    ST_ENCODER, ST_POOL, ST_TOWER_REST, ST_WRITE, ST_WALL, ST_COUNT
};
static const char *const stage_names[ST_COUNT] = {
    "read", "decode image", "decode audio", "decode video", "tokenize", "vision tower",
    "audio tower", "text encoder", "pooling head", "tower: other", "write", "end to end"};
static const char *const stage_keys[ST_COUNT] = {
    "read", "decode_image", "decode_audio", "decode_video", "tokenize", "vision_tower",
    "audio_tower", "text_encoder", "pooling", "tower_other", "write", "wall"};

typedef struct {
    double sum[ST_COUNT], sum2[ST_COUNT]; /* seconds per run, over the timed runs */
    double first_run;                     /* the untimed first run (cold) */
    ge_pipe_result res;                   /* of the last run */
    ge_stats stats;                       /* the model's, summed over the timed runs */
} input_bench;

/* One pass of the pipeline over the input files, the rows written to /dev/null in the format
 * the command asks for (its writing cost is part of the profile). */
static ge_exit run_input(const ge_opts *o, ge_model *m, double sec[ST_COUNT],
                         ge_pipe_result *res, ge_stats *st)
{
    ge_out_cfg oc = {.format = o->format ? o->format : ge_out_guess(o->output),
                     .base64 = o->base64, .tokenize = o->tokenize, .path = "/dev/null",
                     .errors = "/dev/null", .dim = o->dim ? o->dim : ge_model_dim(m),
                     .max_dim = ge_model_dim(m)};
    if (oc.format == GE_FMT_NPY || oc.format == GE_FMT_F32)
        oc.ids = "/dev/null";
    ge_in *in = ge_in_create(o->files, o->nfiles, o->input);
    ge_out *out = NULL;
    ge_err err;
    unsigned long long skip = 0;
    if (!in || ge_out_open(&out, &oc, &skip, &err)) {
        ge_say("--bench: %s", in ? err.msg : "out of memory");
        ge_in_free(in);
        return GE_EXIT_IO;
    }
    atomic_int stop = 0;
    const char *prefix = o->prefix ? o->prefix : o->prompt ? ge_prompt_find(o->prompt) : NULL;
    const ge_pipe_cfg pc = {.o = o, .model = m, .in = in, .out = out, .prefix = prefix,
                            .dim = oc.dim, .format = oc.format,
                            .binary = oc.format != GE_FMT_JSONL && oc.format != GE_FMT_OPENAI,
                            .stop = &stop};
    ge_model_stats_reset(m);
    const double t0 = ge_now();
    ge_exit rc = ge_pipeline_run(&pc, res);
    char note[600];
    if (ge_out_close(out, note, sizeof note, &err) && rc == GE_EXIT_OK)
        rc = GE_EXIT_IO;
    sec[ST_WALL] = ge_now() - t0;
    ge_in_free(in);
    ge_model_stats(m, st);
    const ge_pipe_times *t = &res->times;
    sec[ST_READ] = t->read;
    sec[ST_DECODE_IMAGE] = t->decode[GE_KIND_IMAGE];
    sec[ST_DECODE_AUDIO] = t->decode[GE_KIND_AUDIO];
    sec[ST_DECODE_VIDEO] = t->decode[GE_KIND_VIDEO];
    sec[ST_TOKENIZE] = t->tokenize;
    sec[ST_VISION] = st->vision_seconds;
    sec[ST_AUDIO] = st->audio_seconds;
    sec[ST_ENCODER] = st->forward_seconds;
    sec[ST_POOL] = st->pool_seconds;
    sec[ST_TOWER_REST] = fmax(0, t->tower - st->vision_seconds - st->audio_seconds -
                                     st->forward_seconds);
    sec[ST_WRITE] = t->write;
    return rc;
}

/* A first run (cold: weights repacked, media libraries loaded), then reps timed ones. */
static ge_exit bench_input(const ge_opts *o, ge_model *m, int reps, input_bench *b)
{
    memset(b, 0, sizeof *b);
    for (int i = 0; i < o->nfiles; i++)
        if (strcmp(o->files[i], "-") == 0) {
            ge_say("--bench: the input is read %d times: give files, not the standard input",
                   reps + 1);
            return GE_EXIT_USAGE;
        }
    for (int r = -1; r < reps; r++) {
        double sec[ST_COUNT];
        ge_stats st;
        ge_exit rc = run_input(o, m, sec, &b->res, &st);
        if (rc != GE_EXIT_OK)
            return rc;
        if (r < 0) {
            b->first_run = sec[ST_WALL];
            continue;
        }
        for (int k = 0; k < ST_COUNT; k++)
            b->sum[k] += sec[k], b->sum2[k] += sec[k] * sec[k];
        stats_add(&b->stats, &st);
    }
    return GE_EXIT_OK;
}

static void input_table(const ge_opts *o, const input_bench *b, int reps, double peak8,
                        double peak32, int threads)
{
    const ge_pipe_result *r = &b->res;
    const double wall = b->sum[ST_WALL] / reps;
    fprintf(stderr, "input: %d file%s, %llu records (%llu failed), %llu tokens; decoded per run: "
            "%llu images, %llu clips, %llu videos\n", o->nfiles, o->nfiles > 1 ? "s" : "",
            r->records, r->failed, r->tokens, r->times.decoded[GE_KIND_IMAGE],
            r->times.decoded[GE_KIND_AUDIO], r->times.decoded[GE_KIND_VIDEO]);
    fprintf(stderr, "first run (cold) %.3f s; then %.1f records/s, %.1f tokens/s\n\n",
            b->first_run, wall > 0 ? r->records / wall : 0, wall > 0 ? r->tokens / wall : 0);
    fprintf(stderr, "| %-20s | %25s | %8s |\n", "stage", "s per run (mean ± sd)", "of wall");
    fprintf(stderr, "|----------------------|--------------------------|----------|\n");
    for (int k = 0; k < ST_COUNT; k++) {
        const double mean = b->sum[k] / reps;
        if (mean == 0 && k != ST_WALL && k != ST_TOKENIZE && k != ST_ENCODER)
            continue; /* a modality the input does not have */
        fprintf(stderr, "| %-20s | %11.4f ± %10.4f | %7.1f%% |\n", stage_names[k], mean,
                sd_of(b->sum[k], b->sum2[k], reps), wall > 0 ? 100.0 * mean / wall : 0);
    }
    fprintf(stderr, "(the reader, the decode/tokenize worker, the tower and the writer run on "
            "threads of their own, so their shares overlap; the pooling head is part of the "
            "text encoder)\n");
    static const char *const titles[GE_PHASE_COUNT] = {"text encoder", "vision tower",
                                                       "audio tower"};
    const double phase_s[GE_PHASE_COUNT] = {b->stats.forward_seconds, b->stats.vision_seconds,
                                            b->stats.audio_seconds};
    for (int ph = 0; ph < GE_PHASE_COUNT; ph++) {
        if (phase_s[ph] <= 0)
            continue;
        fprintf(stderr, "\n%s:", titles[ph]);
        ops_table(&b->stats.ops[ph], phase_s[ph], peak8, peak32, threads);
    }
}

static void input_json(FILE *f, const ge_opts *o, const input_bench *b, int reps)
{
    const ge_pipe_result *r = &b->res;
    const double wall = b->sum[ST_WALL] / reps;
    fprintf(f, "\n  {\"name\": \"input: %llu records\", \"records\": %llu, \"tokens\": %llu, "
            "\"tokens_per_s_mean\": %.2f, \"records_per_s\": %.3f}],\n", r->records, r->records,
            r->tokens, wall > 0 ? r->tokens / wall : 0, wall > 0 ? r->records / wall : 0);
    fprintf(f, " \"input\": {\"files\": %d, \"records\": %llu, \"failed\": %llu, \"tokens\": %llu,"
            " \"images\": %llu, \"clips\": %llu, \"videos\": %llu, \"first_run_s\": %.4f},\n",
            o->nfiles, r->records, r->failed, r->tokens, r->times.decoded[GE_KIND_IMAGE],
            r->times.decoded[GE_KIND_AUDIO], r->times.decoded[GE_KIND_VIDEO], b->first_run);
    fprintf(f, " \"stages\": {");
    for (int k = 0; k < ST_COUNT; k++)
        fprintf(f, "%s\n  \"%s\": {\"seconds_mean\": %.5f, \"seconds_sd\": %.5f}", k ? "," : "",
                stage_keys[k], b->sum[k] / reps, sd_of(b->sum[k], b->sum2[k], reps));
    fprintf(f, "},\n \"operations\": ");
    ops_json(f, &b->stats.ops[GE_PHASE_TEXT]);
    fprintf(f, ",\n \"forward_seconds\": %.4f,\n \"image_operations\": ",
            b->stats.forward_seconds);
    ops_json(f, &b->stats.ops[GE_PHASE_VISION]);
    fprintf(f, ",\n \"audio_operations\": ");
    ops_json(f, &b->stats.ops[GE_PHASE_AUDIO]);
    fprintf(f, "}\n");
}

ge_exit ge_bench_run(const ge_opts *o, ge_model *m, double t_start)
{
    enum { MAX_CASES = 8 };
    bench_case cases[MAX_CASES];
    int nc = 0, reps = o->bench_reps;
    memset(cases, 0, sizeof cases);
    const int dim = ge_model_dim(m);
    ge_err err;

    /* time to first vector: the first embedding, weight repacking included */
    ge_tokens first = {0};
    float *vec = malloc((size_t)dim * 64 * sizeof *vec);
    if (!vec || !synth(m, 8, 99, &first) || ge_embed(m, first.ids, first.n, vec, &err)) {
        ge_say("--bench: %s", vec ? err.msg : "out of memory");
        free(vec);
        return GE_EXIT_RECORDS;
    }
    double ttfv = ge_now() - t_start;
    ge_tokens_free(&first);

    bool ok = true;
    if (o->nfiles == 0) { /* else the input, through the pipeline (bench_input) */
        const int max = ge_model_max_tokens(m);
        const struct { int n, len; } plan[] = {{64, 128}, {1, 8}, {1, 32}, {1, 128}, {1, 512},
                                               {1, 2048}};
        for (size_t i = 0; i < sizeof plan / sizeof plan[0] && ok; i++)
            if (plan[i].len <= max)
                ok = add_synth_case(m, &cases[nc++], plan[i].n, plan[i].len);
    }
    if (!ok) {
        ge_say("--bench: could not prepare the inputs");
        free(vec);
        return GE_EXIT_RECORDS;
    }

    double peak8, peak32;
    ge_model_peak(m, 0.1, &peak8, &peak32);
    const int threads = ge_model_threads(m);
    ge_stats total = {0};
    fprintf(stderr, "gemmaembed --bench: %s\n", ge_model_describe(m));
    fprintf(stderr, "tier %s, %d threads; measured peak per thread: int8 %.1f GMAC/s, fp32 %.1f "
            "GMAC/s; time to first vector %.3f s\n", ge_model_tier(m), threads, peak8, peak32,
            ttfv);
    ge_err werr;
    if (ge_bench_weights(stderr, o, m, &werr))
        ge_say("%s", werr.msg);
    fputc('\n', stderr);
    input_bench in_b;
    if (o->nfiles) {
        ge_exit rc = bench_input(o, m, reps, &in_b);
        if (rc != GE_EXIT_OK) {
            free(vec);
            return rc;
        }
        input_table(o, &in_b, reps, peak8, peak32, threads);
    }
    if (nc)
        fprintf(stderr, "| %-20s | %7s | %4s | %22s | %9s |\n", "case", "tokens", "reps",
            "tokens/s (mean ± sd)", "records/s");
    if (nc)
        fprintf(stderr, "|%.22s|%.9s|%.6s|%.24s|%.11s|\n", "------------------------",
            "---------", "------", "------------------------", "-----------");
    for (int i = 0; i < nc; i++) {
        bench_case *c = &cases[i];
        float *out = malloc((size_t)c->n_seq * dim * sizeof *out);
        double sum = 0, sum2 = 0, secs = 0;
        if (!out)
            return GE_EXIT_RECORDS;
        for (int r = 0; r < reps; r++) {
            ge_model_stats_reset(m);
            double t0 = ge_now();
            if (ge_embed_batch(m, (const int32_t *const *)c->ids, c->lens, (size_t)c->n_seq,
                               out, &err)) {
                ge_say("--bench: %s", err.msg);
                free(out);
                return GE_EXIT_RECORDS;
            }
            double dt = ge_now() - t0, tps = (double)c->tokens / dt;
            sum += tps, sum2 += tps * tps, secs += dt;
            ge_stats s;
            ge_model_stats(m, &s);
            stats_add(&total, &s);
        }
        free(out);
        c->mean = sum / reps;
        c->sd = sd_of(sum, sum2, reps);
        c->rec_per_s = c->n_seq * reps / secs;
        fprintf(stderr, "| %-20s | %7zu | %4d | %12.1f ± %7.1f | %9.2f |\n", c->name, c->tokens,
                reps, c->mean, c->sd, c->rec_per_s);
    }

    if (nc)
        ops_table(&total.ops[GE_PHASE_TEXT], total.forward_seconds, peak8, peak32, threads);

    /* with --mmproj and no input: one image per budget through the vision tower */
    image_case icases[MAX_BUDGETS];
    int n_img = 0;
    ge_stats itotal = {0};
    if (o->n_mmproj && o->nfiles == 0) {
        ge_status st = bench_images(m, reps, icases, &n_img, &itotal, &err);
        if (st == GE_E_UNSUPPORTED && !n_img) {
            ge_say("--bench: no image cases: %s", err.msg);
        } else if (st) {
            if (err.msg[0])
                ge_say("--bench: %s", err.msg);
            free(vec);
            return GE_EXIT_RECORDS;
        }
    }
    if (n_img) {
        fprintf(stderr, "\n| %-20s | %7s | %4s | %4s | %22s | %9s |\n", "image (vision tower)",
                "patches", "soft", "reps", "s/image (mean ± sd)", "GMAC/s");
        fprintf(stderr, "|----------------------|---------|------|------|------------------------"
                "|-----------|\n");
        for (int i = 0; i < n_img; i++) {
            char name[32];
            snprintf(name, sizeof name, "budget %d", icases[i].budget);
            fprintf(stderr, "| %-20s | %7d | %4d | %4d | %12.3f ± %7.3f | %9.1f |\n", name,
                    icases[i].patches, icases[i].soft, reps, icases[i].mean, icases[i].sd,
                    icases[i].gmacs);
        }
        ops_table(&itotal.ops[GE_PHASE_VISION], itotal.vision_seconds, peak8, peak32, threads);
    }
    /* and a clip of each duration through the audio tower; a failure there is reported and
     * the run goes on (exit status 1 at the end) */
    audio_case acases[3];
    int n_aud = 0;
    ge_stats atotal = {0};
    ge_status ast = GE_OK;
    if (o->n_mmproj && !o->nfiles)
        ast = bench_audio(m, reps, acases, &n_aud, &atotal, &err);
    if (ast == GE_E_UNSUPPORTED && !n_aud) {
        ge_say("--bench: no audio cases: %s", err.msg);
        ast = GE_OK;
    } else if (ast) {
        ge_say("--bench: %s", err.msg);
    }
    if (n_aud) {
        fprintf(stderr, "\n| %-20s | %7s | %4s | %22s | %9s | %9s |\n", "audio (audio tower)",
                "soft", "reps", "s/clip (mean ± sd)", "audio s/s", "GMAC/s");
        fprintf(stderr, "|----------------------|---------|------|------------------------"
                "|-----------|-----------|\n");
        for (int i = 0; i < n_aud; i++) {
            char name[32];
            snprintf(name, sizeof name, "%g s clip", acases[i].duration);
            fprintf(stderr, "| %-20s | %7d | %4d | %12.3f ± %7.3f | %9.1f | %9.1f |\n", name,
                    acases[i].soft, reps, acases[i].mean, acases[i].sd, acases[i].rate,
                    acases[i].gmacs);
        }
        ops_table(&atotal.ops[GE_PHASE_AUDIO], atotal.audio_seconds, peak8, peak32, threads);
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    fprintf(stderr, "\npeak RSS %.1f MB\n", ru.ru_maxrss / 1024.0);

    if (o->bench_json) {
        ge_err e;
        FILE *f = ge_path_create(o->bench_json, &e); /* /dev/stdout: where it points */
        if (!f) {
            ge_say("%s", e.msg);
            return GE_EXIT_IO;
        }
        fprintf(f, "{\"model\": \"%s\", \"tier\": \"%s\", \"threads\": %d, \"reps\": %d,\n"
                " \"peak_gmacs_per_thread\": {\"int8\": %.2f, \"fp32\": %.2f},\n"
                " \"time_to_first_vector_s\": %.4f, \"peak_rss_mb\": %.1f,\n \"cases\": [",
                ge_model_describe(m), ge_model_tier(m), threads, reps, peak8, peak32, ttfv,
                ru.ru_maxrss / 1024.0);
        if (o->nfiles)
            input_json(f, o, &in_b, reps);
        else {
            for (int i = 0; i < nc; i++)
                fprintf(f, "%s\n  {\"name\": \"%s\", \"records\": %d, \"tokens\": %zu, "
                        "\"tokens_per_s_mean\": %.2f, \"tokens_per_s_sd\": %.2f, "
                        "\"records_per_s\": %.3f}", i ? "," : "", cases[i].name, cases[i].n_seq,
                        cases[i].tokens, cases[i].mean, cases[i].sd, cases[i].rec_per_s);
            fprintf(f, "],\n \"operations\": ");
            ops_json(f, &total.ops[GE_PHASE_TEXT]);
            fprintf(f, ",\n \"forward_seconds\": %.4f,\n \"images\": [", total.forward_seconds);
            for (int i = 0; i < n_img; i++)
                fprintf(f, "%s\n  {\"budget\": %d, \"patches\": %d, \"soft_tokens\": %d, "
                        "\"seconds_mean\": %.4f, \"seconds_sd\": %.4f, \"gmacs\": %.2f}",
                        i ? "," : "", icases[i].budget, icases[i].patches, icases[i].soft,
                        icases[i].mean, icases[i].sd, icases[i].gmacs);
            fprintf(f, "],\n \"image_operations\": ");
            ops_json(f, &itotal.ops[GE_PHASE_VISION]);
            fprintf(f, ",\n \"audio\": [");
            for (int i = 0; i < n_aud; i++)
                fprintf(f, "%s\n  {\"audio_seconds\": %g, \"samples\": %lld, \"soft_tokens\": %d, "
                        "\"seconds_mean\": %.4f, \"seconds_sd\": %.4f, "
                        "\"audio_seconds_per_s\": %.2f, \"gmacs\": %.2f}", i ? "," : "",
                        acases[i].duration, (long long)acases[i].samples, acases[i].soft,
                        acases[i].mean, acases[i].sd, acases[i].rate, acases[i].gmacs);
            fprintf(f, "],\n \"audio_operations\": ");
            ops_json(f, &atotal.ops[GE_PHASE_AUDIO]);
            fprintf(f, "}\n");
        }
        if (fclose(f)) {
            ge_say("%s: write error", o->bench_json);
            return GE_EXIT_IO;
        }
    }
    for (int i = 0; i < nc; i++) {
        for (int s = 0; s < cases[i].n_seq; s++)
            free(cases[i].ids[s]);
        free(cases[i].ids);
        free(cases[i].lens);
    }
    free(vec);
    return ast ? GE_EXIT_RECORDS : GE_EXIT_OK;
}
