/* main.c - gemmaembed: parse -> check inputs -> open the model -> open the output ->
 * stream records -> exit code.
 *
 * The only place that prints messages or exits. Exit status (PRODUCT.md section 3):
 * 0 all records embedded, 1 some records failed, 2 usage, 3 model could not be loaded,
 * 4 I/O error on input or output. */
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "ge.h"
#include "input.h"
#include "opts.h"
#include "output.h"

#ifndef GEMMAEMBED_VERSION
#define GEMMAEMBED_VERSION "0.1.0"
#endif

enum { EXIT_OK = 0, EXIT_RECORDS = 1, EXIT_USAGE = 2, EXIT_MODEL = 3, EXIT_IO = 4 };

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void say(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("gemmaembed: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

static int usage_error(const char *msg)
{
    say("%s", msg);
    fputs("Try 'gemmaembed --help' for more information.\n", stderr);
    return EXIT_USAGE;
}

static int unknown_prompt(const char *name)
{
    fprintf(stderr, "gemmaembed: --prompt: unknown prompt name '%s'; known names:", name);
    const char *const *names = ge_prompt_names();
    for (size_t i = 0; names && names[i]; i++)
        fprintf(stderr, "%s %s", i ? "," : "", names[i]);
    fputs("\nTry 'gemmaembed --help' for more information.\n", stderr);
    return EXIT_USAGE;
}

/* Would writing to output (a path, or NULL/"-" for stdout) destroy one of the inputs?
 * Opening the output truncates it before the input is read. */
static const char *clobbers_input(const ge_opts *o)
{
    struct stat out, in;
    bool to_stdout = !o->output || strcmp(o->output, "-") == 0;
    if (to_stdout ? fstat(STDOUT_FILENO, &out) != 0 : stat(o->output, &out) != 0)
        return NULL;
    if (!S_ISREG(out.st_mode))
        return NULL;
    for (int i = 0; i < (o->nfiles ? o->nfiles : 1); i++) {
        const char *f = o->nfiles ? o->files[i] : "-";
        if (strcmp(f, "-") == 0 ? fstat(STDIN_FILENO, &in) != 0 : stat(f, &in) != 0)
            continue;
        if (in.st_dev == out.st_dev && in.st_ino == out.st_ino)
            return f;
    }
    return NULL;
}

/* A record read but not written yet: records are embedded in batches (short ones share a
 * wave) and written in input order, error records included. */
typedef struct {
    char *id;              /* copy of the raw id */
    size_t id_len;
    const char *err_code;  /* static string, or NULL for a record to embed / tokenize */
    char *err_msg;         /* copy, when err_code is set */
    int32_t *tokens;       /* copy of the token ids */
    size_t n_tokens;
    bool truncated;
    size_t orig_tokens;
    char *where;           /* "source:line" for engine errors */
} pending;

/* The run's state shared by the record loop. */
typedef struct {
    const ge_opts *o;
    ge_model *model;
    ge_out *out;
    const char *prefix;     /* global prompt prefix, or NULL */
    bool binary;            /* npy/f32 output: rows cannot carry notes */
    int dim, model_dim;
    size_t max_tokens;
    ge_tokens toks;
    pending *batch;         /* [batch_cap] */
    size_t batch_n, batch_cap, batch_tokens, batch_limit;
    float *vecs;            /* [batch_cap][model_dim] */
    unsigned long long records, failed;
    bool out_failed;        /* a write error was reported */
    unsigned long long index;  /* input records consumed (all shards), for checkpoints */
    unsigned long long tokens; /* tokens of the embedded records */
    ge_in *in;
    /* progress line */
    bool progress;
    double p_t0, p_last;
    unsigned long long p_bytes0;
    size_t p_len;           /* length of the last progress line, to blank it out */
} run;

/* SIGINT / SIGTERM: the signal number; the record loop stops reading, writes the records in
 * flight and closes the output. SA_RESETHAND: a second signal kills at once. */
static volatile sig_atomic_t g_stop;

static void on_stop(int sig) { g_stop = sig; }

static void pending_free(pending *p)
{
    free(p->id), free(p->err_msg), free(p->tokens), free(p->where);
    memset(p, 0, sizeof *p);
}

static char *dup_mem(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = 0;
    }
    return d;
}

/* Queue a record: an error record (code, msg) or tokens to embed. false when out of memory. */
static bool queue(run *R, const ge_rec *r, const char *code, const char *msg)
{
    pending *p = &R->batch[R->batch_n];
    memset(p, 0, sizeof *p);
    char where[600];
    snprintf(where, sizeof where, "%s:%llu", r->source, r->line);
    p->id = dup_mem(r->id, r->id_len);
    p->id_len = r->id_len;
    p->where = dup_mem(where, strlen(where));
    bool ok = p->id && p->where;
    if (code) {
        p->err_code = code;
        ok = ok && (p->err_msg = dup_mem(msg, strlen(msg)));
    } else {
        p->n_tokens = R->toks.n;
        ok = ok && (p->tokens = malloc(R->toks.n * sizeof *p->tokens));
        if (ok)
            memcpy(p->tokens, R->toks.ids, R->toks.n * sizeof *p->tokens);
        R->batch_tokens += R->toks.n;
    }
    if (!ok) {
        pending_free(p);
        return false;
    }
    R->batch_n++;
    return true;
}

/* Embed the queued records and write everything queued, in order. Returns the output status
 * (GE_E_IO stops the run); record failures are counted, not returned. */
static ge_status flush(run *R, ge_err *err)
{
    const ge_opts *o = R->o;
    size_t n_good = 0;
    const int32_t **ids = malloc(R->batch_n * sizeof *ids);
    size_t *lens = malloc(R->batch_n * sizeof *lens);
    ge_err e = {0};
    ge_status est = GE_OK;
    if (!ids || !lens) {
        free(ids), free(lens);
        return ge_fail(err, GE_E_NOMEM, "out of memory");
    }
    for (size_t i = 0; i < R->batch_n; i++)
        if (!R->batch[i].err_code) {
            ids[n_good] = R->batch[i].tokens;
            lens[n_good++] = R->batch[i].n_tokens;
        }
    if (n_good && !o->tokenize)
        est = ge_embed_batch(R->model, ids, lens, n_good, R->vecs, &e);
    free(ids), free(lens);

    ge_status st = GE_OK;
    char msg[sizeof e.msg + 700];
    for (size_t i = 0, g = 0; i < R->batch_n && !st; i++) {
        pending *p = &R->batch[i];
        float *vec = NULL;
        if (p->err_code) {
            R->failed++;
            st = ge_out_error(R->out, p->id, p->id_len, p->err_code, p->err_msg, err);
            continue;
        }
        ge_row row = {.id = p->id, .id_len = p->id_len, .truncated = p->truncated,
                      .orig_tokens = p->orig_tokens};
        if (o->tokenize) {
            row.tokens = p->tokens;
            row.n_tokens = p->n_tokens;
            st = ge_out_row(R->out, &row, err);
            continue;
        }
        vec = R->vecs + (g++) * (size_t)R->model_dim;
        ge_status rst = est;
        if (est) /* the batch failed: redo this record alone to attribute the error */
            rst = ge_embed(R->model, p->tokens, p->n_tokens, vec, &e);
        if (!rst)
            R->tokens += p->n_tokens;
        for (int k = 0; !rst && k < R->model_dim; k++)
            if (!isfinite(vec[k]))
                rst = ge_fail(&e, GE_E_INTERNAL, "the embedding has non-finite values");
        if (rst) {
            snprintf(msg, sizeof msg, "%s: %s", p->where, e.msg);
            R->failed++;
            st = ge_out_error(R->out, p->id, p->id_len, ge_status_name(rst), msg, err);
            continue;
        }
        if (R->dim < R->model_dim)
            ge_matryoshka(vec, R->dim);
        row.vec = vec;
        st = ge_out_row(R->out, &row, err);
    }
    for (size_t i = 0; i < R->batch_n; i++)
        pending_free(&R->batch[i]);
    R->batch_n = R->batch_tokens = 0;
    return st;
}

/* Tokenize one good record and queue it (or queue its error record). */
static bool one_record(run *R, const ge_rec *r)
{
    const ge_opts *o = R->o;
    ge_err e = {0};
    char msg[sizeof e.msg + 200];
    const char *prefix = r->prefix ? r->prefix : R->prefix;
    if (prefix && !*prefix)
        prefix = NULL;

    R->toks.n = 0;
    ge_status st = ge_tokenize(R->model, prefix, r->text, r->text_len, &R->toks, &e);
    if (st) {
        snprintf(msg, sizeof msg, "%s:%llu: %s", r->source, r->line, e.msg);
        return queue(R, r, ge_status_name(st), msg);
    }
    size_t n = R->toks.n;
    bool truncated = false;
    /* --tokenize shows the whole sequence unless --truncate asks for what would be embedded */
    if (n > R->max_tokens && (o->truncate || !o->tokenize)) {
        if (!o->truncate) {
            snprintf(msg, sizeof msg,
                     "%s:%llu: too long: %zu tokens, the limit is %zu (see --truncate)",
                     r->source, r->line, n, R->max_tokens);
            return queue(R, r, "too_long", msg);
        }
        ge_tokens_truncate(R->model, &R->toks, R->max_tokens);
        truncated = true;
        if (!o->quiet && R->binary) /* jsonl rows carry "truncated" themselves */
            say("%s:%llu: truncated from %zu to %zu tokens", r->source, r->line, n,
                R->toks.n);
    }
    if (!queue(R, r, NULL, NULL))
        return false;
    R->batch[R->batch_n - 1].truncated = truncated;
    R->batch[R->batch_n - 1].orig_tokens = n;
    return true;
}

/* The progress line on stderr, at most every 0.5 s (final: the last one and a newline). It
 * overwrites itself with '\r' and blanks the rest of the previous line with spaces, so it
 * needs no terminal escape codes. */
static void progress(run *R, bool final)
{
    if (!R->progress)
        return;
    double t = ge_bench_now();
    if (!final && t - R->p_last < 0.5)
        return;
    R->p_last = t;
    double dt = t - R->p_t0 > 1e-6 ? t - R->p_t0 : 1e-6;
    unsigned long long done, total;
    ge_in_position(R->in, &done, &total);
    char line[200], eta[80] = "";
    if (total && done <= total) {
        int k = snprintf(eta, sizeof eta, ", %.1f%%", 100.0 * (double)done / (double)total);
        double rate = (double)(done - (done > R->p_bytes0 ? R->p_bytes0 : done)) / dt;
        if (!final && rate > 0) {
            unsigned long long left = (unsigned long long)((double)(total - done) / rate + 0.5);
            snprintf(eta + k, sizeof eta - (size_t)k, ", ETA %llu:%02llu:%02llu", left / 3600,
                     left / 60 % 60, left % 60);
        }
    }
    int n = snprintf(line, sizeof line, "%llu records, %.1f records/s, %.0f tokens/s%s",
                     R->records, (double)R->records / dt, (double)R->tokens / dt, eta);
    size_t len = n > 0 ? (size_t)n : 0;
    fprintf(stderr, "\r%s%*s%s", line, R->p_len > len ? (int)(R->p_len - len) : 0, "",
            final ? "\n" : "");
    fflush(stderr);
    R->p_len = final ? 0 : len;
}

/* Stream every record after the first `skip` (--resume). Returns the exit status. */
static int stream(run *R, ge_in *in, unsigned long long skip)
{
    ge_err err = {0};
    ge_rec rec;
    int status = EXIT_OK;
    const ge_opts *o = R->o;
    if (skip) {
        unsigned long long k;
        if (ge_in_skip(in, skip, &k, &err) < 0) {
            say("%s", err.msg);
            return EXIT_IO;
        }
        R->index = k;
    }
    unsigned long long total;
    ge_in_position(in, &R->p_bytes0, &total);
    for (;;) {
        int got = 0;
        if (!g_stop) {
            got = 1;
            if (o->shard_n > 1) { /* skip to the next record of this shard */
                unsigned long long want = (o->shard_i + o->shard_n - R->index % o->shard_n) %
                                          o->shard_n, k = 0;
                if (want && ge_in_skip(in, want, &k, &err) < 0)
                    got = -1;
                R->index += k;
            }
            if (got > 0)
                got = ge_in_next(in, &rec, &err);
            if (got < 0 && g_stop)
                got = 0; /* the read was interrupted by the signal */
        }
        if (got < 0) { /* write what was read, then stop */
            say("%s", err.msg);
            status = EXIT_IO;
            got = 0;
        }
        if (got > 0) {
            R->index++;
            R->records++;
            bool ok = rec.err_code ? queue(R, &rec, rec.err_code, rec.err_msg)
                                   : one_record(R, &rec);
            if (!ok) {
                say("out of memory");
                status = EXIT_IO;
                break;
            }
        }
        unsigned long long queued_errors = 0;
        for (size_t i = 0; i < R->batch_n; i++)
            queued_errors += R->batch[i].err_code != NULL;
        bool stop = o->max_errors && R->failed + queued_errors >= o->max_errors;
        if (got == 0 || stop || R->batch_n == R->batch_cap ||
            R->batch_tokens >= R->batch_limit) {
            ge_status st = flush(R, &err);
            if (!st)
                st = ge_out_checkpoint(R->out, R->index, &err);
            if (st) {
                if (!ge_out_epipe())
                    say("%s", err.msg);
                R->out_failed = true;
                status = EXIT_IO;
                break;
            }
        }
        progress(R, false);
        if (o->max_errors && R->failed >= o->max_errors) {
            if (!o->quiet)
                say("stopping after %llu failed records (--max-errors)", R->failed);
            break;
        }
        if (got == 0)
            break;
    }
    for (size_t i = 0; i < R->batch_n; i++)
        pending_free(&R->batch[i]);
    return status;
}

/* argv as a shell command line: each word single-quoted unless it is plainly safe. */
static void print_command(FILE *f, int argc, char **argv, const char *extra)
{
    for (int i = 0; i <= argc; i++) {
        const char *a = i < argc ? argv[i] : extra;
        if (!a)
            continue;
        if (i)
            fputc(' ', f);
        if (*a && strspn(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                            "-_./=:,+%@") == strlen(a)) {
            fputs(a, f);
            continue;
        }
        fputc('\'', f);
        for (; *a; a++)
            fputs(*a == '\'' ? "'\\''" : (char[]){*a, 0}, f);
        fputc('\'', f);
    }
    fputc('\n', f);
}

/* --print-config: every switch with its value and where it came from, then the tier and
 * the CPU the engine would use. */
static int print_config(const ge_opts *o)
{
    static const char *const from[] = {"default", "environment", "flag"};
    size_t n;
    const ge_switch *sw = ge_config_switches(&n);
    char val[64], cpu[256];
    for (size_t i = 0; i < n; i++) {
        const char *src = from[o->cfg.src[sw[i].id]];
        printf("%-16s %-8s %s%s%s\n", sw[i].flag, ge_config_value_text(&o->cfg, &sw[i], val,
               sizeof val), src, o->cfg.src[sw[i].id] == GE_SRC_ENV ? " " : "",
               o->cfg.src[sw[i].id] == GE_SRC_ENV ? sw[i].env : "");
    }
    const char *tier;
    int threads;
    ge_err err;
    if (ge_compute_plan(&o->cfg, &tier, &threads, cpu, sizeof cpu, &err))
        return usage_error(err.msg);
    printf("%-16s %s\n%-16s %d\n%-16s %s\n", "kernel tier", tier, "pool threads", threads,
           "cpu", cpu);
    return fflush(stdout) == 0 ? EXIT_OK : EXIT_IO;
}

int main(int argc, char **argv)
{
    const double t_start = ge_bench_now();
    ge_opts o;
    char msg[600];
    ge_err err = {0};

    if (ge_opts_parse(argc, argv, &o, msg, sizeof msg) < 0)
        return usage_error(msg);
    if (o.help) {
        ge_opts_help(stdout);
        return fflush(stdout) == 0 ? EXIT_OK : EXIT_IO;
    }
    if (o.version) {
        printf("gemmaembed %s\n", GEMMAEMBED_VERSION);
        return fflush(stdout) == 0 ? EXIT_OK : EXIT_IO;
    }
    if (o.print_config)
        return print_config(&o);
    if (!o.model)
        return usage_error("no model given (use -m PATH or set GEMMAEMBED_MODEL)");

    const char *prefix = o.prefix;
    if (o.prompt && !(prefix = ge_prompt_find(o.prompt)))
        return unknown_prompt(o.prompt);

    ge_out_cfg oc = {
        .format = o.format ? o.format : ge_out_guess(o.output),
        .base64 = o.base64,
        .tokenize = o.tokenize,
        .path = o.output,
        .errors = o.errors,
        .ids = o.ids,
        .resume = o.resume,
        .shard_i = o.shard_i,
        .shard_n = o.shard_n,
    };
    if (o.tokenize && oc.format != GE_FMT_JSONL)
        return usage_error("--tokenize writes jsonl only");
    if (o.base64 && oc.format != GE_FMT_JSONL)
        return usage_error("--encoding applies to jsonl output only");
    if (o.ids && (oc.format == GE_FMT_JSONL || oc.format == GE_FMT_NPZ))
        return usage_error("--ids applies to npy and f32 output only (npz holds its ids)");
    if (ge_out_check(&oc, &err))
        return usage_error(err.msg);

    for (int i = 0; i < o.nfiles; i++) {
        if (ge_in_check(o.files[i], &err)) {
            say("%s", err.msg);
            return EXIT_IO;
        }
    }

    const char *victim = clobbers_input(&o);
    if (victim) {
        snprintf(msg, sizeof msg, "%s: the output would overwrite this input",
                 strcmp(victim, "-") == 0 ? "<stdin>" : victim);
        return usage_error(msg);
    }

    run R = {.o = &o, .prefix = prefix};
    if (ge_model_open(&R.model, o.model, &o.cfg, &err)) {
        say("%s", err.msg);
        return EXIT_MODEL;
    }
    if (o.bench) {
        int rc = ge_bench_run(&o, R.model, t_start);
        ge_model_free(R.model);
        return rc;
    }
    R.model_dim = ge_model_dim(R.model);
    R.max_tokens = (size_t)ge_model_max_tokens(R.model);
    R.dim = o.dim ? o.dim : R.model_dim;
    if (R.dim > R.model_dim) {
        snprintf(msg, sizeof msg, "--dim %d: the model's embeddings have only %d values",
                 o.dim, R.model_dim);
        ge_model_free(R.model);
        return usage_error(msg);
    }
    oc.dim = R.dim;
    R.binary = oc.format != GE_FMT_JSONL;

    int status = EXIT_OK;
    ge_in *in = ge_in_create(o.files, o.nfiles, o.input);
    R.in = in;
    R.progress = o.progress || (!o.quiet && isatty(STDERR_FILENO));
    R.p_t0 = R.p_last = ge_bench_now();

    /* SIGINT/SIGTERM stop the run cleanly; a closed output pipe is seen as EPIPE on write */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESETHAND; /* no SA_RESTART: a blocked read returns */
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    /* a batch holds about one wave of tokens (and at most 256 records) */
    R.batch_cap = 256;
    R.batch_limit = o.cfg.v[GE_CFG_WAVE_TOKENS] > 0 ? (size_t)o.cfg.v[GE_CFG_WAVE_TOKENS] : 1;
    R.batch = calloc(R.batch_cap, sizeof *R.batch);
    R.vecs = malloc(R.batch_cap * (size_t)R.model_dim * sizeof *R.vecs);
    if (!in || !R.batch || !R.vecs) {
        say("out of memory");
        status = EXIT_IO;
    } else {
        unsigned long long skip = 0;
        ge_status st = ge_out_open(&R.out, &oc, &skip, &err);
        if (st) {
            say("%s", err.msg);
            status = st == GE_E_USAGE ? EXIT_USAGE : EXIT_IO;
        } else {
            if (skip && R.progress) /* not in cron logs */
                say("resuming after %llu input records", skip);
            status = stream(&R, in, skip);
            progress(&R, true);
            /* after a write error closing fails again: report it once */
            if (ge_out_close(R.out, &err) && !R.out_failed) {
                if (!ge_out_epipe())
                    say("%s", err.msg);
                status = EXIT_IO;
            }
        }
    }
    ge_in_free(in);
    free(R.batch);
    free(R.vecs);
    ge_tokens_free(&R.toks);
    ge_model_free(R.model);

    if (ge_out_epipe()) {
        /* the reader went away (`gemmaembed ... | head`): end quietly, as if killed by
         * SIGPIPE like cat or grep (the shell sees 141), after closing the other files */
        signal(SIGPIPE, SIG_DFL);
        raise(SIGPIPE);
        return 141;
    }
    if (R.failed && !o.quiet)
        say("%llu of %llu records failed", R.failed, R.records);
    if (status == EXIT_OK && R.failed)
        status = EXIT_RECORDS;
    if (g_stop) {
        bool to_file = o.output && strcmp(o.output, "-") != 0;
        say("stopped by %s after %llu input records%s", g_stop == SIGINT ? "SIGINT" : "SIGTERM",
            R.index, to_file ? "; the output is complete up to there. To continue:" :
                               "; the output went to stdout, so it cannot be resumed");
        if (to_file) {
            bool has = false;
            for (int i = 1; i < argc; i++)
                has |= strcmp(argv[i], "--resume") == 0;
            print_command(stderr, argc, argv, has ? NULL : "--resume");
        }
        status = 128 + g_stop;
    }
    return status;
}
