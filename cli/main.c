/* main.c - gemmaembed: parse -> check inputs -> open the model -> open the output ->
 * stream records -> exit code.
 *
 * The only place that exits; the exit status is a ge_exit (msg.h; docs/product.md 3). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "bench.h"
#include "ge.h"
#include "input.h"
#include "merge.h"
#include "msg.h"
#include "opts.h"
#include "output.h"
#include "paths.h"
#include "pipeline.h"
#include "resume.h"

static ge_exit unknown_prompt(const char *name)
{
    const char *const *names = ge_prompt_names();
    size_t len = 1;
    for (size_t i = 0; names && names[i]; i++)
        len += strlen(names[i]) + 2;
    char list[len]; /* a few hundred bytes */
    list[0] = 0;
    for (size_t i = 0, at = 0; names && names[i]; i++)
        at += (size_t)snprintf(list + at, len - at, "%s %s", i ? "," : "", names[i]);
    return ge_say_usage("--prompt: unknown prompt name '%s'; known names:%s", name, list);
}

/* Descriptors 0-2 closed at start-up would be handed to the first files the run opens (a
 * state file read as input, error records written into a model): each closed one is held by
 * /dev/null instead, and using it for records is an error (closed_std). */
static bool g_std_closed[3];

static void hold_std_descriptors(void)
{
    for (int fd = 0; fd < 3; fd++) {
        if (fcntl(fd, F_GETFD) >= 0 || errno != EBADF)
            continue;
        g_std_closed[fd] = true;
        int n = open("/dev/null", fd ? O_WRONLY : O_RDONLY); /* the lowest free: fd itself */
        if (n >= 0 && n != fd) {
            dup2(n, fd);
            close(n);
        }
    }
}

static ge_exit closed_std(int fd)
{
    ge_say("standard %s is closed", fd == 0 ? "input" : "output");
    return GE_EXIT_IO;
}

/* Every file the run reads or writes, for ge_paths_check: an output must not destroy the
 * model, an input or another output. */
static size_t path_uses(const ge_opts *o, const ge_out_cfg *oc, ge_path_use *u,
                        char names[][4200])
{
    size_t n = 0;
    u[n++] = (ge_path_use){o->model, -1, "the model (-m)", false};
    for (int i = 0; i < o->n_mmproj; i++)
        u[n++] = (ge_path_use){o->mmproj[i], -1, "an mmproj (--mmproj)", false};
    for (int i = 0; i < (o->nfiles ? o->nfiles : 1); i++) {
        const char *f = o->nfiles ? o->files[i] : "-";
        u[n++] = strcmp(f, "-") == 0 ? (ge_path_use){NULL, 0, "the input", false}
                                     : (ge_path_use){f, -1, "an input", false};
    }
    if (o->calibration)
        u[n++] = (ge_path_use){o->calibration, -1, "the --calibration file", false};
    if (o->bench) {
        if (o->bench_json)
            u[n++] = (ge_path_use){o->bench_json, -1, "the --bench-json file", true};
        return n;
    }
    return n + ge_out_uses(oc, u + n, names);
}

/* What decides the rows besides the output's own settings (resume.h): the model files by
 * content, the prompt, the input format, the media options and the switches that change
 * numbers. Only built for an output that keeps a state file or a run description (hashing
 * reads every byte). */
static ge_status fingerprint(const ge_opts *o, const char *prefix, ge_fingerprint *fp,
                             ge_err *err)
{
    unsigned long long size, hash, mh[2][2];
    const char *name;
    ge_fp_add(fp, "version", "%s", GEMMAEMBED_VERSION);
    ge_status st = ge_file_digest(o->model, &size, &hash, err);
    if (st)
        return st;
    name = strrchr(o->model, '/');
    ge_fp_add(fp, "model", "%llu bytes, xxh3 %016llx  # %s", size, hash,
              name ? name + 1 : o->model);
    for (int i = 0; i < o->n_mmproj; i++)
        if ((st = ge_file_digest(o->mmproj[i], &mh[i][0], &mh[i][1], err)))
            return st;
    if (o->n_mmproj == 2 && mh[0][1] > mh[1][1]) /* the order of the flags does not matter */
        for (int k = 0; k < 2; k++) {
            unsigned long long t = mh[0][k];
            mh[0][k] = mh[1][k];
            mh[1][k] = t;
        }
    for (int i = 0; i < o->n_mmproj; i++)
        ge_fp_add(fp, i ? "mmproj2" : "mmproj", "%llu bytes, xxh3 %016llx", mh[i][0], mh[i][1]);
    if (prefix)
        ge_fp_add(fp, "prompt", "%zu bytes, xxh3 %016llx  # \"%.40s\"", strlen(prefix),
                  (unsigned long long)XXH3_64bits(prefix, strlen(prefix)), prefix);
    else
        ge_fp_add(fp, "prompt", "none");
    static const char *const input[] = {"auto", "jsonl", "lines", "files"};
    ge_fp_add(fp, "input", "%s", input[o->input]);
    ge_fp_add(fp, "truncate", "%s", o->truncate ? "on" : "off");
    ge_fp_add(fp, "image-tokens", "%d", o->image_tokens);
    ge_fp_add(fp, "audio-max-seconds", "%.17g", o->audio_max_seconds);
    ge_fp_add(fp, "video-fps", "%.17g", o->video_fps);
    ge_fp_add(fp, "video-frames", "%d", o->video_frames);
    ge_fp_add(fp, "video-tokens", "%d", o->video_tokens);
    if (o->calibration) {
        if ((st = ge_file_digest(o->calibration, &size, &hash, err)))
            return st;
        ge_fp_add(fp, "calibration", "%llu bytes, xxh3 %016llx", size, hash);
    }
    size_t nsw;
    const ge_switch *sw = ge_config_switches(&nsw);
    char val[64];
    for (size_t i = 0; i < nsw; i++)
        if (sw[i].changes_rows)
            ge_fp_add(fp, sw[i].flag, "%s", ge_config_value_text(&o->cfg, &sw[i], val,
                                                                  sizeof val));
    return GE_OK;
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

/* SIGBUS: a model file cut short on disk while mapped. The engine swaps in zero pages so the
 * read goes on, and the pipeline stops before writing anything computed since. Any other
 * SIGBUS is fatal as usual: the default action, once the faulting access is retried. */
static void on_bus(int sig, siginfo_t *si, void *uc)
{
    (void)uc;
    if (!ge_mapping_fault(si->si_addr))
        signal(sig, SIG_DFL);
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
static ge_exit print_config(const ge_opts *o)
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
        return ge_say_usage("%s", err.msg);
    printf("%-16s %s\n%-16s %d\n%-16s %s\n", "kernel tier", tier, "pool threads", threads,
           "cpu", cpu);
    if (o->model) { /* the weight types the files hold and the kernel for each */
        ge_model *m;
        if (fflush(stdout) || ge_model_open(&m, o->model, &o->cfg, &err))
            return ge_say_err(&err, GE_EXIT_MODEL);
        ge_status st = ge_bench_weights(stdout, o, m, &err);
        ge_model_free(m);
        if (st)
            return ge_say_err(&err, GE_EXIT_MODEL);
    }
    return fflush(stdout) == 0 ? GE_EXIT_OK : GE_EXIT_IO;
}

int main(int argc, char **argv)
{
    const double t_start = ge_now();
    ge_opts o;
    ge_err err = {0};
    ge_status st;

    hold_std_descriptors();
    /* a file size limit (ulimit -f) is a write error to report, like a full disk */
    signal(SIGXFSZ, SIG_IGN);
    if (argc > 1 && strcmp(argv[1], "merge") == 0)
        return ge_merge_main(argc - 1, argv + 1);
    struct sigaction bus = {.sa_sigaction = on_bus, .sa_flags = SA_SIGINFO};
    sigemptyset(&bus.sa_mask);
    sigaction(SIGBUS, &bus, NULL);
    if (ge_opts_parse(argc, argv, &o, &err))
        return ge_say_usage("%s", err.msg);
    if ((o.help || o.version || o.print_config) && g_std_closed[1])
        return closed_std(1);
    if (o.help) {
        ge_opts_help(stdout);
        return fflush(stdout) == 0 ? GE_EXIT_OK : GE_EXIT_IO;
    }
    if (o.version) {
        printf("gemmaembed %s\n", GEMMAEMBED_VERSION);
        return fflush(stdout) == 0 ? GE_EXIT_OK : GE_EXIT_IO;
    }
    if (o.print_config)
        return print_config(&o);
    if (!o.model)
        return ge_say_usage("no model given (use -m PATH or set GEMMAEMBED_MODEL)");

    const char *prefix = o.prefix;
    if (o.prompt && !(prefix = ge_prompt_find(o.prompt)))
        return unknown_prompt(o.prompt);

    ge_out_cfg oc = {
        .format = o.format ? o.format : ge_out_guess(o.output),
        .base64 = o.base64,
        .precision = o.precision,
        .write_calib = o.write_calibration,
        .tokenize = o.tokenize,
        .path = o.output,
        .errors = o.errors,
        .ids = o.ids,
        .resume = o.resume,
        .shard_i = o.shard_i,
        .shard_n = o.shard_n,
    };
    if (o.tokenize && oc.format != GE_FMT_JSONL)
        return ge_say_usage("--tokenize writes jsonl only");
    if (oc.format == GE_FMT_OPENAI && (o.precision != GE_PREC_FLOAT32 || o.errors || o.ids))
        return ge_say_usage("--format openai-batch answers each request in its line: float32 "
                            "vectors, errors inline (no --precision, --errors or --ids)");
    if (o.base64 && oc.format != GE_FMT_JSONL && oc.format != GE_FMT_OPENAI)
        return ge_say_usage("--encoding applies to jsonl output only");
    if (o.ids && (oc.format == GE_FMT_JSONL || oc.format == GE_FMT_NPZ))
        return ge_say_usage("--ids applies to npy and f32 output only (npz holds its ids)");
    if (o.tokenize && (o.precision != GE_PREC_FLOAT32 || o.calibration || o.write_calibration))
        return ge_say_usage("--tokenize writes token ids: --precision, --calibration and "
                            "--write-calibration do not apply");
    if (ge_prec_calibrated(o.precision) && !o.calibration)
        return ge_say_usage("--precision %s needs --calibration PATH.npy: the per-dimension "
                            "ranges, shape (2, dim), e.g. from a run with --write-calibration",
                            ge_prec_name(o.precision));
    if (o.calibration && !ge_prec_calibrated(o.precision))
        return ge_say_usage("--calibration applies to --precision int8 and uint8 only");
    if (o.chunk && oc.format == GE_FMT_OPENAI)
        return ge_say_usage("--format openai-batch answers a request with a vector per input: "
                            "it cannot hold passages (--%schunk)", o.late_chunk ? "late-" : "");
    if (o.cache && o.tokenize)
        return ge_say_usage("--cache keeps vectors: it does not apply to --tokenize");
    if (o.write_calibration && o.resume)
        return ge_say_usage("--write-calibration measures the vectors of one whole run: it "
                            "cannot be combined with --resume");
    if (!o.bench && ge_out_check(&oc, &err))
        return ge_say_usage("%s", err.msg);
    {
        const char *tier;
        int threads;
        char cpu[256];
        if (ge_compute_plan(&o.cfg, &tier, &threads, cpu, sizeof cpu, &err))
            return ge_say_usage("%s", err.msg); /* --cpu-tier naming a tier this CPU lacks */
    }

    for (int i = 0; i < o.nfiles; i++) {
        if (ge_in_check(o.files[i], &err))
            return ge_say_err(&err, GE_EXIT_IO);
    }
    bool reads_stdin = o.nfiles == 0;
    for (int i = 0; i < o.nfiles; i++)
        reads_stdin |= strcmp(o.files[i], "-") == 0;
    if (reads_stdin && g_std_closed[0])
        return closed_std(0);
    if (!o.bench && (!o.output || strcmp(o.output, "-") == 0) && g_std_closed[1])
        return closed_std(1);

    /* the model, two mmproj, the inputs, a calibration file and at most 6 of the output's */
    ge_path_use *uses = malloc(((size_t)o.nfiles + 16) * sizeof *uses);
    static char names[4][4200];
    if (!uses)
        return ge_say("out of memory"), GE_EXIT_IO;
    st = ge_paths_check(uses, path_uses(&o, &oc, uses, names), &err);
    free(uses);
    if (st)
        return ge_say_usage("%s", err.msg);

    ge_model *model;
    if (ge_model_open(&model, o.model, &o.cfg, &err))
        return ge_say_err(&err, GE_EXIT_MODEL);
    if (o.n_mmproj && ge_model_set_mmproj(model, o.mmproj, o.n_mmproj, &err)) {
        ge_model_free(model);
        return ge_say_err(&err, GE_EXIT_MODEL);
    }
    if (ge_pipe_check_options(&o, model, &err))
        return ge_model_free(model), ge_say_usage("%s", err.msg);
    if (o.bench) {
        ge_exit rc = ge_bench_run(&o, model, t_start);
        ge_model_free(model);
        return rc;
    }
    const int model_dim = ge_model_dim(model);
    oc.dim = o.dim ? o.dim : model_dim;
    oc.tier = ge_model_tier(model);
    oc.max_dim = model_dim;
    const char *slash = strrchr(o.model, '/');
    oc.model_name = slash ? slash + 1 : o.model;
    if (oc.dim > model_dim) {
        ge_model_free(model);
        return ge_say_usage("--dim %d: the model's embeddings have only %d values", o.dim,
                            model_dim);
    }
    static ge_calib calib;
    if (o.calibration) {
        if (ge_calib_load(o.calibration, oc.dim, &calib, &err)) {
            ge_model_free(model);
            return ge_say_usage("%s", err.msg);
        }
        oc.calib = &calib;
    }

    ge_exit status = GE_EXIT_OK;
    ge_in *in = ge_in_create(o.files, o.nfiles, o.input);
    ge_pipe_cfg pc = {
        .o = &o,
        .model = model,
        .in = in,
        .prefix = prefix,
        .dim = oc.dim,
        .format = oc.format,
        .binary = oc.format != GE_FMT_JSONL && oc.format != GE_FMT_OPENAI,
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
        status = GE_EXIT_IO;
    } else {
        static ge_fingerprint fp, cx;
        st = ge_out_has_meta(&oc) || o.cache ? fingerprint(&o, prefix, &fp, &err) : GE_OK;
        oc.fp = &fp;
        if (!st && o.cache) { /* the vectors also depend on the tier auto picks */
            cx = fp;
            ge_fp_add(&cx, "tier", "%s", ge_model_tier(model));
            st = ge_cache_open(&pc.cache, o.cache, cx.text, model_dim, o.quiet, &err);
        }
        /* the rows' identity, not the cache's: a passage's key holds what decides its vector
         * (pipeline.c passage_lookup). A field of its own: older outputs still resume. */
        if (!st && o.chunk)
            ge_fp_add(&fp, "chunk", "%s %u:%u", o.late_chunk ? "late" : "plain", o.chunk,
                      o.chunk_overlap);
        if (!st)
            st = ge_out_open(&pc.out, &oc, &pc.skip, &err);
        if (st) {
            status = ge_say_err(&err, st == GE_E_USAGE ? GE_EXIT_USAGE : GE_EXIT_IO);
        } else {
            if (ge_out_note(pc.out)[0])
                ge_say("%s", ge_out_note(pc.out));
            if (pc.skip && pc.progress) /* not in cron logs */
                ge_say("resuming after %llu input records", pc.skip);
            status = ge_pipeline_run(&pc, &res);
            if (status == GE_EXIT_OK && !g_stop && !res.max_errors_hit && !res.out_failed)
                ge_out_mark_complete(pc.out);
            if (res.max_errors_hit && !o.quiet)
                ge_say("stopping after %llu failed records (--max-errors)", res.failed);
            /* after a write error closing fails again: report it once */
            char note[600];
            if (ge_out_close(pc.out, note, sizeof note, &err) && !res.out_failed) {
                if (!ge_out_epipe())
                    ge_say("%s", err.msg);
                status = GE_EXIT_IO;
            }
            if (note[0])
                ge_say("%s", note);
        }
    }
    ge_cache_stats cs = ge_cache_get_stats(pc.cache);
    ge_cache_close(pc.cache);
    ge_in_free(in);
    ge_model_free(model);
    ge_calib_free(&calib);

    if (ge_out_epipe()) {
        /* the reader went away (`gemmaembed ... | head`): end quietly, as if killed by
         * SIGPIPE like cat or grep (the shell sees 141), after closing the other files */
        signal(SIGPIPE, SIG_DFL);
        raise(SIGPIPE);
        return GE_EXIT_SIGPIPE;
    }
    if (res.failed && !o.quiet)
        ge_say("%llu of %llu records failed", res.failed, res.records);
    if (o.cache && !o.quiet) {
        char damaged[64] = "";
        if (cs.damaged)
            snprintf(damaged, sizeof damaged, "; %llu damaged entries recomputed", cs.damaged);
        ge_say("--cache: %llu of %llu records from the cache, %llu repeating an earlier record, "
               "%llu computed and stored%s", res.cached, res.records, res.deduped, cs.stored,
               damaged);
    }
    if (status == GE_EXIT_OK && res.failed)
        status = (ge_exit)o.failed_exit;
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
        status = g_stop == SIGINT ? GE_EXIT_SIGINT : GE_EXIT_SIGTERM;
    }
    return status;
}
