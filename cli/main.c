/* main.c - gemmaembed: parse -> check inputs -> open the model -> open the output ->
 * stream records -> exit code.
 *
 * The only place that prints messages or exits. Exit status (PRODUCT.md section 3):
 * 0 all records embedded, 1 some records failed, 2 usage, 3 model could not be loaded,
 * 4 I/O error on input or output. */
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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
    float *vec;             /* [model_dim] */
    unsigned long long records, failed;
    bool out_failed;        /* a write error was reported */
} run;

/* Report a failed record. Returns GE_OK, or the output's I/O status. */
static ge_status fail_record(run *R, const ge_rec *r, const char *code, const char *msg,
                             ge_err *err)
{
    R->failed++;
    return ge_out_error(R->out, r->id, r->id_len, code, msg, err);
}

/* Tokenize and embed one good record, writing a row or an error record. Returns the output
 * status (GE_E_IO stops the run); record failures are not errors here. */
static ge_status one_record(run *R, const ge_rec *r, ge_err *err)
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
        return fail_record(R, r, ge_status_name(st), msg, err);
    }

    ge_row row = {.id = r->id, .id_len = r->id_len};
    size_t n = R->toks.n;
    /* --tokenize shows the whole sequence unless --truncate asks for what would be embedded */
    if (n > R->max_tokens && (o->truncate || !o->tokenize)) {
        if (!o->truncate) {
            snprintf(msg, sizeof msg,
                     "%s:%llu: too long: %zu tokens, the limit is %zu (see --truncate)",
                     r->source, r->line, n, R->max_tokens);
            return fail_record(R, r, "too_long", msg, err);
        }
        ge_tokens_truncate(R->model, &R->toks, R->max_tokens);
        row.truncated = true;
        row.orig_tokens = n;
        if (!o->quiet && R->binary) /* jsonl rows carry "truncated" themselves */
            say("%s:%llu: truncated from %zu to %zu tokens", r->source, r->line, n,
                R->toks.n);
    }

    if (o->tokenize) {
        row.tokens = R->toks.ids;
        row.n_tokens = R->toks.n;
        return ge_out_row(R->out, &row, err);
    }

    st = ge_embed(R->model, R->toks.ids, R->toks.n, R->vec, &e);
    if (st) {
        snprintf(msg, sizeof msg, "%s:%llu: %s", r->source, r->line, e.msg);
        return fail_record(R, r, ge_status_name(st), msg, err);
    }
    for (int i = 0; i < R->model_dim; i++) {
        if (!isfinite(R->vec[i])) {
            snprintf(msg, sizeof msg, "%s:%llu: the embedding has non-finite values",
                     r->source, r->line);
            return fail_record(R, r, "internal", msg, err);
        }
    }
    if (R->dim < R->model_dim)
        ge_matryoshka(R->vec, R->dim);
    row.vec = R->vec;
    return ge_out_row(R->out, &row, err);
}

/* Stream every record. Returns the exit status. */
static int stream(run *R, ge_in *in)
{
    ge_err err = {0};
    ge_rec rec;
    int status = EXIT_OK;
    for (;;) {
        int got = ge_in_next(in, &rec, &err);
        if (got < 0) {
            say("%s", err.msg);
            status = EXIT_IO;
            break;
        }
        if (got == 0)
            break;
        R->records++;
        ge_status st = rec.err_code ? fail_record(R, &rec, rec.err_code, rec.err_msg, &err)
                                    : one_record(R, &rec, &err);
        if (st) {
            say("%s", err.msg);
            R->out_failed = true;
            status = EXIT_IO;
            break;
        }
        if (R->o->max_errors && R->failed >= R->o->max_errors) {
            if (!R->o->quiet)
                say("stopping after %llu failed records (--max-errors)", R->failed);
            break;
        }
    }
    return status;
}

int main(int argc, char **argv)
{
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
    };
    if (o.tokenize && oc.format != GE_FMT_JSONL)
        return usage_error("--tokenize writes jsonl only");
    if (o.base64 && oc.format != GE_FMT_JSONL)
        return usage_error("--encoding applies to jsonl output only");
    if (o.ids && oc.format == GE_FMT_JSONL)
        return usage_error("--ids applies to npy and f32 output only");
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
    if (ge_model_open(&R.model, o.model, &err)) {
        say("%s", err.msg);
        return EXIT_MODEL;
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
    R.vec = malloc((size_t)R.model_dim * sizeof *R.vec);
    if (!in || !R.vec) {
        say("out of memory");
        status = EXIT_IO;
    } else {
        ge_status st = ge_out_open(&R.out, &oc, &err);
        if (st) {
            say("%s", err.msg);
            status = st == GE_E_USAGE ? EXIT_USAGE : EXIT_IO;
        } else {
            status = stream(&R, in);
            /* after a write error closing fails again: report it once */
            if (ge_out_close(R.out, &err) && !R.out_failed) {
                say("%s", err.msg);
                status = EXIT_IO;
            }
        }
    }
    ge_in_free(in);
    free(R.vec);
    ge_tokens_free(&R.toks);
    ge_model_free(R.model);

    if (R.failed && !o.quiet)
        say("%llu of %llu records failed", R.failed, R.records);
    if (status == EXIT_OK && R.failed)
        status = EXIT_RECORDS;
    return status;
}
