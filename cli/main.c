/* main.c - gemmaembed: parse -> check inputs -> open the model -> open the output ->
 * stream records -> exit code.
 *
 * The only place that prints messages or exits. Exit status (PRODUCT.md section 3):
 * 0 all records embedded, 1 some records failed, 2 usage, 3 model could not be loaded,
 * 4 I/O error on input or output. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <signal.h>
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
#include "msg.h"
#include "opts.h"
#include "output.h"
#include "pipeline.h"

#ifndef GEMMAEMBED_VERSION
#define GEMMAEMBED_VERSION "0.1.0"
#endif

enum { EXIT_OK = 0, EXIT_RECORDS = 1, EXIT_USAGE = 2, EXIT_MODEL = 3, EXIT_IO = 4 };

static int usage_error(const char *msg)
{
    ge_say("%s", msg);
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

/* SIGINT / SIGTERM: the signal number; the reader stops reading, the records in flight are
 * written and the output closed. SA_RESETHAND: a second signal kills at once. The pipeline's
 * stage threads block these signals; the engine's pool threads, started earlier, do not, so
 * a signal that lands on one is passed on to the reader (the main thread) as SIGUSR1, whose
 * handler does nothing but interrupt a blocked read. */
static atomic_int g_stop; /* lock-free: safe in a handler, read by the stage threads */
static pthread_t g_reader;

static void on_stop(int sig)
{
    int saved = errno;
    atomic_store(&g_stop, sig);
    if (!pthread_equal(pthread_self(), g_reader))
        pthread_kill(g_reader, SIGUSR1);
    errno = saved;
}

static void on_wake(int sig) { (void)sig; }

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
            ge_say("%s", err.msg);
            return EXIT_IO;
        }
    }

    const char *victim = clobbers_input(&o);
    if (victim) {
        snprintf(msg, sizeof msg, "%s: the output would overwrite this input",
                 strcmp(victim, "-") == 0 ? "<stdin>" : victim);
        return usage_error(msg);
    }

    ge_model *model;
    if (ge_model_open(&model, o.model, &o.cfg, &err)) {
        ge_say("%s", err.msg);
        return EXIT_MODEL;
    }
    if (o.n_mmproj && ge_model_set_mmproj(model, o.mmproj, o.n_mmproj, &err)) {
        ge_say("%s", err.msg);
        ge_model_free(model);
        return EXIT_MODEL;
    }
    if (ge_pipe_check_options(&o, model, &err))
        return ge_model_free(model), usage_error(err.msg);
    if (o.bench) {
        int rc = ge_bench_run(&o, model, t_start);
        ge_model_free(model);
        return rc;
    }
    const int model_dim = ge_model_dim(model);
    oc.dim = o.dim ? o.dim : model_dim;
    if (oc.dim > model_dim) {
        snprintf(msg, sizeof msg, "--dim %d: the model's embeddings have only %d values",
                 o.dim, model_dim);
        ge_model_free(model);
        return usage_error(msg);
    }

    int status = EXIT_OK;
    ge_in *in = ge_in_create(o.files, o.nfiles, o.input);
    ge_pipe_cfg pc = {
        .o = &o,
        .model = model,
        .in = in,
        .prefix = prefix,
        .dim = oc.dim,
        .image_tokens = o.image_tokens,
        .audio_max_seconds = o.audio_max_seconds,
        .video = {.fps = o.video_fps, .max_frames = o.video_frames, .tokens = o.video_tokens},
        .video_timestamps = o.cfg.v[GE_CFG_VIDEO_TIMESTAMPS] != 0,
        .mmproj = o.n_mmproj > 0,
        .binary = oc.format != GE_FMT_JSONL,
        .progress = o.progress || (!o.quiet && isatty(STDERR_FILENO)),
        .stop = &g_stop,
        .wake_signal = SIGUSR1,
    };
    ge_pipe_result res = {0};

    /* SIGINT/SIGTERM stop the run cleanly; a closed output pipe is seen as EPIPE on write */
    g_reader = pthread_self();
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sigemptyset(&sa.sa_mask);
    sa.sa_handler = on_wake; /* no SA_RESTART: a blocked read returns */
    sigaction(SIGUSR1, &sa, NULL);
    sa.sa_handler = on_stop;
    sa.sa_flags = SA_RESETHAND;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    if (!in) {
        ge_say("out of memory");
        status = EXIT_IO;
    } else {
        ge_status st = ge_out_open(&pc.out, &oc, &pc.skip, &err);
        if (st) {
            ge_say("%s", err.msg);
            status = st == GE_E_USAGE ? EXIT_USAGE : EXIT_IO;
        } else {
            if (pc.skip && pc.progress) /* not in cron logs */
                ge_say("resuming after %llu input records", pc.skip);
            status = ge_pipeline_run(&pc, &res);
            if (res.max_errors_hit && !o.quiet)
                ge_say("stopping after %llu failed records (--max-errors)", res.failed);
            /* after a write error closing fails again: report it once */
            if (ge_out_close(pc.out, &err) && !res.out_failed) {
                if (!ge_out_epipe())
                    ge_say("%s", err.msg);
                status = EXIT_IO;
            }
        }
    }
    ge_in_free(in);
    ge_model_free(model);

    if (ge_out_epipe()) {
        /* the reader went away (`gemmaembed ... | head`): end quietly, as if killed by
         * SIGPIPE like cat or grep (the shell sees 141), after closing the other files */
        signal(SIGPIPE, SIG_DFL);
        raise(SIGPIPE);
        return 141;
    }
    if (res.failed && !o.quiet)
        ge_say("%llu of %llu records failed", res.failed, res.records);
    if (status == EXIT_OK && res.failed)
        status = EXIT_RECORDS;
    if (g_stop) {
        bool to_file = o.output && strcmp(o.output, "-") != 0;
        ge_say("stopped by %s after %llu input records%s", g_stop == SIGINT ? "SIGINT" : "SIGTERM",
            res.index, to_file ? "; the output is complete up to there. To continue:" :
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
