/* opts.c - the option table, getopt_long parsing and --help (opts.h).
 *
 * OPTS below is the single list of flags. Each row says how its value is read and checked
 * (kind, range or choices) and which ge_opts field it fills, so one routine parses every
 * flag; getopt_long's table, the short-option string and the --help text are built from it
 * too, so a flag cannot exist without being documented. The man page lists the same flags
 * (tests/test_cli.sh checks it against --help). The engine's switches come from its own
 * table (ge_config_switches) and are parsed by the engine. */
#include "opts.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "ge.h"

/* How a flag's argument is read. Numbers must be whole strings; a bad one is a usage error
 * "--NAME: 'ARG' is not WANT". */
typedef enum {
    K_FLAG,   /* no argument: the bool field becomes true */
    K_STR,    /* the argument as it is (a path, a name, a prefix) */
    K_INT,    /* an int as strtol reads it (a sign allowed), in [min, max]; min >= 0 */
    K_COUNT,  /* as strtoull reads it, no leading sign: an int or unsigned long long field,
               * in [min, max] */
    K_REAL,   /* a double as strtod reads it, in (min, max] (so never NaN) */
    K_CHOICE, /* one of the '|'-separated names in arg: vals[its index], or its number */
    K_CALL,   /* the row's own function reads it */
} opt_kind;

/* The type of the field a row fills, found by _Generic from the field itself. */
typedef enum { T_NONE, T_BOOL, T_INT, T_ENUM, T_ULL, T_DOUBLE, T_STR } field_type;
#define FIELD_TYPE(x) _Generic((x), bool: T_BOOL, int: T_INT, ge_fmt: T_ENUM, \
                               ge_in_kind: T_ENUM, ge_prec: T_ENUM, unsigned long long: T_ULL, \
                               double: T_DOUBLE, const char *: T_STR)
#define AT(field) .off = offsetof(ge_opts, field), .type = FIELD_TYPE(((ge_opts *)0)->field)
/* an enum field is stored through an unsigned int (its type under GCC and Clang) */
_Static_assert(sizeof(ge_fmt) == sizeof(unsigned) && sizeof(ge_in_kind) == sizeof(unsigned) &&
                   sizeof(ge_prec) == sizeof(unsigned),
               "enum fields are unsigned int");

typedef struct {
    const char *name;  /* long name */
    char short_flag;   /* or 0 */
    const char *arg;   /* argument placeholder in --help, NULL for a flag; K_CHOICE: the
                        * choices themselves */
    const char *def;   /* default shown in --help; NULL: init when it is not 0, else none */
    const char *help;
    opt_kind kind;
    size_t off;        /* offsetof(ge_opts, field) */
    field_type type;
    double init;       /* the default value (0: the zeroed ge_opts) */
    double min, max;   /* K_INT, K_COUNT, K_REAL: the range */
    const char *want;  /* K_INT, K_COUNT, K_REAL: what a good value is (printf format given
                        * min and max as doubles); K_CHOICE: the noun of "unknown NOUN 'ARG'
                        * (a, b)", NULL for "'ARG' is not one of a, b" */
    const int *vals;   /* K_CHOICE: the value stored for each choice; NULL: its number */
    ge_status (*call)(ge_opts *o, const char *arg, ge_err *err); /* K_CALL */
    bool env;          /* also read from GEMMAEMBED_<NAME> (the flag wins): for tools that
                        * cannot pass arguments, such as Spark's RDD.pipe */
} opt_row;

static ge_status set_mmproj(ge_opts *o, const char *arg, ge_err *err);
static ge_status set_shard(ge_opts *o, const char *arg, ge_err *err);
static ge_status set_chunk(ge_opts *o, const char *arg, ge_err *err);
static ge_status set_late_chunk(ge_opts *o, const char *arg, ge_err *err);

static const opt_row OPTS[] = {
    {"model", 'm', "PATH", "$GEMMAEMBED_MODEL",
     "EmbeddingGemma 2 GGUF text model (F32 F16 BF16 Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 Q2_K..Q6_K "
     "IQ4_NL IQ4_XS)", .kind = K_STR, AT(model)},
    {"mmproj", 0, "PATH", "$GEMMAEMBED_MMPROJ",
     "mmproj GGUF with the vision and/or audio tower (twice: one of each)", .kind = K_CALL,
     .call = set_mmproj},
    {"image-tokens", 0, GE_BUDGETS, NULL, "soft tokens per image", .kind = K_CHOICE,
     AT(image_tokens), .init = GE_IMAGE_TOKENS, .env = true},
    {"audio-max-seconds", 0, "S", NULL,
     "keep the first S seconds of each audio clip (at most what fits the context: 327.53)",
     .kind = K_REAL, AT(audio_max_seconds), .init = GE_AUDIO_MAX_SECONDS, .min = 0,
     .max = GE_AUDIO_SECONDS_CAP, .want = "a number of seconds in (%g, %g]", .env = true},
    {"video-tokens", 0, GE_BUDGETS, NULL, "soft tokens per video frame",
     .kind = K_CHOICE, AT(video_tokens), .init = GE_VIDEO_TOKENS, .env = true},
    {"video-fps", 0, "F", NULL, "video frames sampled per second (<= 1000)", .kind = K_REAL,
     AT(video_fps), .init = GE_VIDEO_FPS, .min = 0, .max = 1000, .want = "a rate in (%g, %g]", .env = true},
    {"video-frames", 0, "N", NULL, "at most N frames per video, chosen uniformly",
     .kind = K_INT, AT(video_frames), .init = GE_VIDEO_MAX_FRAMES, .min = 1,
     .max = GE_VIDEO_FRAMES_CAP, .want = "a count in %g..%g", .env = true},
    {"output", 'o', "PATH", "stdout", "write results to PATH", .kind = K_STR, AT(output)},
    {"format", 0, "jsonl|npy|f32|npz|openai-batch", "from the -o extension, else jsonl",
     "output format (openai-batch: OpenAI Batch API output lines)",
     .kind = K_CHOICE, AT(format), .want = "format",
     .vals = (const int[]){GE_FMT_JSONL, GE_FMT_NPY, GE_FMT_F32, GE_FMT_NPZ, GE_FMT_OPENAI}, .env = true},
    {"encoding", 0, "float|base64", "float", "jsonl vectors as numbers or base64 (LE float32)",
     .kind = K_CHOICE, AT(base64), .want = "encoding", .vals = (const int[]){0, 1}, .env = true},
    {"dim", 0, "768|512|256|128", "the model's width",
     "Matryoshka: first N values, L2-normalised again", .kind = K_CHOICE, AT(dim), .env = true},
    {"precision", 0, "float32|float16|int8|uint8|binary|ubinary", "float32",
     "element type of the rows, after --dim (sentence-transformers' quantize_embeddings)",
     .kind = K_CHOICE, AT(precision), .want = "precision",
     .vals = (const int[]){GE_PREC_FLOAT32, GE_PREC_FLOAT16, GE_PREC_INT8, GE_PREC_UINT8,
                           GE_PREC_BINARY, GE_PREC_UBINARY}, .env = true},
    {"calibration", 0, "PATH.npy", NULL,
     "per-dimension (min, max) rows, shape (2, dim), for --precision int8 and uint8",
     .kind = K_STR, AT(calibration), .env = true},
    {"write-calibration", 0, "PATH.npy", NULL,
     "write the (min, max) of this run's vectors, shape (2, dim), for --calibration",
     .kind = K_STR, AT(write_calibration)},
    {"input", 0, "jsonl|lines|files", "guessed per file: '{' first = jsonl",
     "input format (files: one media path per line)", .kind = K_CHOICE, AT(input),
     .want = "format", .vals = (const int[]){GE_IN_JSONL, GE_IN_LINES, GE_IN_FILES}, .env = true},
    {"prompt", 0, "NAME", "none", "task prompt for every record (names below)", .kind = K_STR,
     AT(prompt), .env = true},
    {"prefix", 0, "STR", "none", "literal prompt prefix for every record", .kind = K_STR,
     AT(prefix), .env = true},
    {"truncate", 0, NULL, NULL, "cut over-long records instead of failing them",
     .kind = K_FLAG, AT(truncate), .env = true},
    {"chunk", 0, "N[:OVERLAP]", NULL,
     "a row per passage of at most N tokens, each embedded alone", .kind = K_CALL,
     .call = set_chunk, .env = true},
    {"late-chunk", 0, "N[:OVERLAP]", NULL,
     "the same passages, pooled from one pass over the whole text", .kind = K_CALL,
     .call = set_late_chunk,
     .env = true},
    {"tokenize", 0, NULL, NULL, "print token ids instead of embeddings (jsonl)", .kind = K_FLAG,
     AT(tokenize)},
    {"errors", 0, "PATH", "inline for jsonl, stderr for npy/f32/npz", "where error records go",
     .kind = K_STR, AT(errors)},
    {"ids", 0, "PATH", "OUTPUT.ids.jsonl", "ids sidecar of npy/f32 output", .kind = K_STR,
     AT(ids)},
    {"failed-exit", 0, "N", NULL,
     "exit status when some records failed (0: they are error records, as for RDD.pipe)",
     .kind = K_INT, AT(failed_exit), .init = 1, .min = 0, .max = 125,
     .want = "a status in %g..%g", .env = true},
    {"max-errors", 0, "N", "no limit", "stop after N failed records", .kind = K_COUNT,
     AT(max_errors), .min = 1, .max = (double)ULLONG_MAX, .want = "a positive integer", .env = true},
    {"resume", 0, NULL, NULL, "continue the -o output of an interrupted run", .kind = K_FLAG,
     AT(resume)},
    {"cache", 0, "DIR", NULL,
     "reuse vectors of the same content (DIR/cache.sqlite; shards may share it)",
     .kind = K_STR, AT(cache), .env = true},
    {"shard", 0, "I/N", NULL, "only records whose 0-based index % N == I", .kind = K_CALL,
     .call = set_shard},
    {"progress", 0, NULL, "when stderr is a terminal", "show a progress line on stderr",
     .kind = K_FLAG, AT(progress)},
    {"quiet", 'q', NULL, NULL, "no summary, warnings or progress on stderr", .kind = K_FLAG,
     AT(quiet), .env = true},
    {"bench", 0, NULL, NULL,
     "profile: time per stage and operation (on FILEs or built-in inputs)", .kind = K_FLAG,
     AT(bench)},
    {"bench-json", 0, "PATH", NULL, "also write the --bench results as JSON", .kind = K_STR,
     AT(bench_json)},
    {"bench-reps", 0, "N", NULL, "repetitions of each --bench case", .kind = K_COUNT,
     AT(bench_reps), .init = 3, .min = 1, .max = 1000, .want = "an integer in [%g, %g]"},
    {"print-config", 0, NULL, NULL, "show the switches, kernel tier and CPU, and exit",
     .kind = K_FLAG, AT(print_config)},
    {"help", 'h', NULL, NULL, "show this help and exit", .kind = K_FLAG, AT(help)},
    {"version", 'V', NULL, NULL, "show the version and exit", .kind = K_FLAG, AT(version)},
};
#define NOPTS (sizeof OPTS / sizeof OPTS[0])

/* getopt_long's value for a row: its short letter (so that "--quiet=1" names '-q', as
 * getopt reports it), else O_ROW + its index; the engine's switches come after. */
enum {
    O_ROW = 256,
    O_SWITCH = 1000,   /* + index in the engine switch table */
    O_NO_SWITCH = 2000 /* + index: --no-<bool switch> */
};

/* --mmproj, at most twice; flags replace $GEMMAEMBED_MMPROJ (taken after the flags, when
 * there were none) */
static ge_status set_mmproj(ge_opts *o, const char *arg, ge_err *err)
{
    if (o->n_mmproj == 2)
        return ge_fail(err, GE_E_USAGE, "--mmproj: at most two files (vision and audio)");
    o->mmproj[o->n_mmproj++] = arg;
    return GE_OK;
}

static bool parse_ull(const char *s, unsigned long long *v)
{
    if (!s[0] || s[0] == '-' || s[0] == '+')
        return false;
    char *end;
    errno = 0;
    *v = strtoull(s, &end, 10);
    return errno == 0 && *end == '\0';
}

/* Set while the command line's flags are read (after the environment): a flag replaces the
 * other chunk mode's environment variable instead of clashing with it. */
static bool reading_flags;

/* --chunk / --late-chunk N[:OVERLAP] (the model's context bounds N: main.c) */
static ge_status parse_chunk(ge_opts *o, const char *flag, const char *arg, bool late,
                             ge_err *err)
{
    char head[32];
    const char *colon = strchr(arg, ':');
    const size_t k = colon ? (size_t)(colon - arg) : strlen(arg);
    unsigned long long n, ov = 0;
    if (k >= sizeof head)
        return ge_fail(err, GE_E_USAGE, "%s: '%s' is not N or N:OVERLAP", flag, arg);
    memcpy(head, arg, k);
    head[k] = 0;
    if (!parse_ull(head, &n) || n == 0 || n > 1000000 || (colon && !parse_ull(colon + 1, &ov)))
        return ge_fail(err, GE_E_USAGE, "%s: '%s' is not N or N:OVERLAP (token counts, N "
                       "from 1)", flag, arg);
    if (ov >= n)
        return ge_fail(err, GE_E_USAGE, "%s: an overlap of %llu tokens leaves nothing new in "
                       "passages of %llu (it must be less than N)", flag, ov, n);
    if (o->chunk && o->late_chunk != late && o->chunk_flag == reading_flags)
        return ge_fail(err, GE_E_USAGE, "--chunk and --late-chunk cannot be used together");
    o->chunk = (unsigned)n, o->chunk_overlap = (unsigned)ov, o->late_chunk = late;
    o->chunk_flag = reading_flags;
    return GE_OK;
}

static ge_status set_chunk(ge_opts *o, const char *arg, ge_err *err)
{
    return parse_chunk(o, "--chunk", arg, false, err);
}

static ge_status set_late_chunk(ge_opts *o, const char *arg, ge_err *err)
{
    return parse_chunk(o, "--late-chunk", arg, true, err);
}

/* --shard I/N */
static ge_status set_shard(ge_opts *o, const char *arg, ge_err *err)
{
    const char *slash = strchr(arg, '/');
    char head[32];
    unsigned long long si, sn;
    if (!slash || (size_t)(slash - arg) >= sizeof head)
        return ge_fail(err, GE_E_USAGE, "--shard: '%s' is not I/N", arg);
    memcpy(head, arg, (size_t)(slash - arg));
    head[slash - arg] = 0;
    if (!parse_ull(head, &si) || !parse_ull(slash + 1, &sn) || sn == 0 || si >= sn)
        return ge_fail(err, GE_E_USAGE, "--shard: '%s' is not I/N with 0 <= I < N (e.g. 0/4)",
                       arg);
    o->shard_i = si;
    o->shard_n = sn;
    return GE_OK;
}

/* Index of s in the '|'-separated list, or -1. */
static int pick(const char *s, const char *list)
{
    size_t n = strlen(s);
    for (int i = 0; *list; i++) {
        const char *bar = strchr(list, '|');
        size_t k = bar ? (size_t)(bar - list) : strlen(list);
        if (k == n && strncmp(s, list, n) == 0)
            return i;
        if (!bar)
            break;
        list = bar + 1;
    }
    return -1;
}

/* Store a whole value v (>= 0) into the row's field. */
static void put(ge_opts *o, const opt_row *r, unsigned long long v)
{
    void *at = (char *)o + r->off;
    switch (r->type) {
    case T_BOOL: *(bool *)at = v != 0; break;
    case T_INT: *(int *)at = (int)v; break;
    case T_ENUM: *(unsigned *)at = (unsigned)v; break;
    case T_ULL: *(unsigned long long *)at = v; break;
    case T_DOUBLE: *(double *)at = (double)v; break;
    default: break;
    }
}

static ge_status bad_number(const opt_row *r, const char *arg, ge_err *err)
{
    char want[128];
    snprintf(want, sizeof want, r->want, r->min, r->max);
    return ge_fail(err, GE_E_USAGE, "--%s: '%s' is not %s", r->name, arg, want);
}

static ge_status bad_choice(const opt_row *r, const char *arg, ge_err *err)
{
    char list[128];
    size_t k = 0;
    for (const char *p = r->arg; *p && k + 3 < sizeof list; p++) {
        if (*p == '|')
            list[k++] = ',', list[k++] = ' ';
        else
            list[k++] = *p;
    }
    list[k] = 0;
    if (r->want)
        return ge_fail(err, GE_E_USAGE, "--%s: unknown %s '%s' (%s)", r->name, r->want, arg,
                       list);
    return ge_fail(err, GE_E_USAGE, "--%s: '%s' is not one of %s", r->name, arg, list);
}

/* GEMMAEMBED_ and the row's name in capitals, '-' as '_', into buf[64]; returns buf. */
static const char *env_name(const opt_row *r, char *buf)
{
    size_t at = (size_t)snprintf(buf, 64, "GEMMAEMBED_");
    for (const char *c = r->name; *c && at + 1 < 64; c++)
        buf[at++] = *c == '-' ? '_' : (char)(*c >= 'a' && *c <= 'z' ? *c - 32 : *c);
    buf[at] = 0;
    return buf;
}

/* 1, 0, or -1 for a value that is none of 1/0, on/off, true/false, yes/no. */
static int parse_bool(const char *v)
{
    static const char *const yes[] = {"1", "on", "true", "yes"}, *const no[] = {"0", "off",
                                                                             "false", "no"};
    for (int i = 0; i < 4; i++) {
        if (!strcasecmp(v, yes[i]))
            return 1;
        if (!strcasecmp(v, no[i]))
            return 0;
    }
    return -1;
}

/* Read arg (NULL for a flag) into the row's field. */
static ge_status set_value(ge_opts *o, const opt_row *r, const char *arg, ge_err *err)
{
    char *end;
    errno = 0;
    switch (r->kind) {
    case K_FLAG:
        put(o, r, 1);
        break;
    case K_STR:
        *(const char **)((char *)o + r->off) = arg;
        break;
    case K_INT: {
        long n = strtol(arg, &end, 10);
        if (!arg[0] || *end || errno || n < r->min || n > r->max)
            return bad_number(r, arg, err);
        put(o, r, (unsigned long long)n);
        break;
    }
    case K_COUNT: {
        unsigned long long v;
        if (!parse_ull(arg, &v) || (double)v < r->min || (double)v > r->max)
            return bad_number(r, arg, err);
        put(o, r, v);
        break;
    }
    case K_REAL: {
        double v = strtod(arg, &end);
        if (!arg[0] || *end || errno || !(v > r->min && v <= r->max))
            return bad_number(r, arg, err);
        *(double *)((char *)o + r->off) = v;
        break;
    }
    case K_CHOICE: {
        int i = pick(arg, r->arg);
        if (i < 0)
            return bad_choice(r, arg, err);
        put(o, r, (unsigned long long)(r->vals ? r->vals[i] : atoi(arg)));
        break;
    }
    case K_CALL:
        return r->call(o, arg, err);
    }
    return GE_OK;
}

/* The row of a getopt_long value, or NULL (an engine switch, ':' or '?'). */
static const opt_row *row_of(int c)
{
    if (c >= O_ROW && c < O_ROW + (int)NOPTS)
        return &OPTS[c - O_ROW];
    for (size_t i = 0; i < NOPTS; i++)
        if (OPTS[i].short_flag && c == OPTS[i].short_flag)
            return &OPTS[i];
    return NULL;
}

#define MAX_SWITCHES 64

/* getopt_long's tables from OPTS and the engine's switches: lo (NOPTS + 2 * MAX_SWITCHES + 1
 * entries), the short-option string so and the names of the --no-<switch> flags. */
static void getopt_tables(const ge_switch *sw, size_t nsw, struct option *lo, char *so,
                          char (*no_names)[48])
{
    size_t k = 0, nlo = 0;
    so[k++] = ':'; /* report a missing argument as ':' rather than '?' */
    for (size_t i = 0; i < NOPTS; i++) {
        const opt_row *r = &OPTS[i];
        lo[nlo++] = (struct option){r->name, r->arg ? required_argument : no_argument, NULL,
                                    r->short_flag ? r->short_flag : O_ROW + (int)i};
        if (r->short_flag) {
            so[k++] = r->short_flag;
            if (r->arg)
                so[k++] = ':';
        }
    }
    for (size_t i = 0; i < nsw && i < MAX_SWITCHES; i++) {
        bool is_bool = sw[i].kind == GE_SW_BOOL;
        lo[nlo++] = (struct option){sw[i].flag, is_bool ? no_argument : required_argument, NULL,
                                    O_SWITCH + (int)i};
        if (is_bool) {
            snprintf(no_names[i], sizeof no_names[i], "no-%s", sw[i].flag);
            lo[nlo++] = (struct option){no_names[i], no_argument, NULL, O_NO_SWITCH + (int)i};
        }
        if (sw[i].short_flag) {
            so[k++] = sw[i].short_flag;
            if (!is_bool)
                so[k++] = ':';
        }
    }
    so[k] = '\0';
    lo[nlo] = (struct option){0, 0, 0, 0};
}

ge_status ge_opts_parse(int argc, char **argv, ge_opts *o, ge_err *err)
{
    memset(o, 0, sizeof *o);
    reading_flags = false;
    for (size_t i = 0; i < NOPTS; i++) {
        if (OPTS[i].type == T_DOUBLE)
            *(double *)((char *)o + OPTS[i].off) = OPTS[i].init;
        else if (OPTS[i].init != 0)
            put(o, &OPTS[i], (unsigned long long)OPTS[i].init);
    }
    const char *env = getenv("GEMMAEMBED_MODEL");
    if (env && *env)
        o->model = env;
    ge_status st;
    for (size_t i = 0; i < NOPTS; i++) { /* GEMMAEMBED_<NAME>: below the flags */
        const opt_row *r = &OPTS[i];
        char name[64];
        const char *v = r->env ? getenv(env_name(r, name)) : NULL;
        if (!v || !*v)
            continue;
        if (r->kind == K_FLAG) {
            int b = parse_bool(v);
            if (b < 0)
                return ge_fail(err, GE_E_USAGE, "%s: '%s' is not 1/0, on/off, true/false or "
                               "yes/no", name, v);
            put(o, r, (unsigned long long)b);
        } else if ((st = set_value(o, r, v, err)) != GE_OK) {
            char msg[sizeof err->msg];
            snprintf(msg, sizeof msg, "%s", err->msg);
            return ge_fail(err, GE_E_USAGE, "%s (from %s)", msg, name);
        }
    }
    size_t nsw;
    const ge_switch *sw = ge_config_switches(&nsw);
    ge_config_defaults(&o->cfg);
    st = ge_config_from_env(&o->cfg, getenv, err);
    if (st)
        return st;

    struct option lo[NOPTS + 2 * MAX_SWITCHES + 1];
    char so[2 * NOPTS + 2 * MAX_SWITCHES + 2], no_names[MAX_SWITCHES][48];
    getopt_tables(sw, nsw, lo, so, no_names);
    ge_err e;
    opterr = 0;
    optind = 1;
    reading_flags = true;
    int c;
    while ((c = getopt_long(argc, argv, so, lo, NULL)) != -1) {
        const opt_row *r = row_of(c);
        for (size_t i = 0; i < nsw; i++)
            if (sw[i].short_flag && c == sw[i].short_flag)
                c = O_SWITCH + (int)i;
        if (r) {
            st = set_value(o, r, optarg, err);
        } else if (c >= O_SWITCH && c < O_SWITCH + (int)nsw) {
            const ge_switch *s = &sw[c - O_SWITCH];
            if (ge_config_set(&o->cfg, s, s->kind == GE_SW_BOOL ? NULL : optarg, GE_SRC_FLAG,
                              &e))
                st = ge_fail(err, GE_E_USAGE, "--%s", e.msg);
        } else if (c >= O_NO_SWITCH && c < O_NO_SWITCH + (int)nsw) {
            ge_config_set(&o->cfg, &sw[c - O_NO_SWITCH], "0", GE_SRC_FLAG, &e);
        } else if (c == ':') {
            st = ge_fail(err, GE_E_USAGE, "option '%s' needs an argument", argv[optind - 1]);
        } else if (optopt && optopt < 256) {
            st = ge_fail(err, GE_E_USAGE, "unknown option '-%c'", optopt);
        } else {
            st = ge_fail(err, GE_E_USAGE, "unknown option '%s'", argv[optind - 1]);
        }
        if (st)
            return st;
    }
    o->files = argv + optind;
    o->nfiles = argc - optind;
    env = getenv("GEMMAEMBED_MMPROJ");
    if (!o->n_mmproj && env && *env)
        o->mmproj[o->n_mmproj++] = env;

    if (o->help || o->version)
        return GE_OK;
    if (o->prompt && o->prefix)
        return ge_fail(err, GE_E_USAGE, "--prompt and --prefix cannot be used together");
    if (o->chunk && o->truncate)
        return ge_fail(err, GE_E_USAGE, "--truncate cannot be used with --%schunk: long texts "
                       "are split into passages, not cut", o->late_chunk ? "late-" : "");
    /* checks that depend on the output format are in main.c, once it is known */
    return GE_OK;
}

void ge_opts_help(FILE *f)
{
    fputs("Usage: gemmaembed -m MODEL [options] [FILE...]\n"
          "       gemmaembed merge -o OUT PART...   (the outputs of --shard runs, in input order)\n"
          "Embed text, image, audio and video records with EmbeddingGemma 2. Reads FILEs (gzip\n"
          "or plain; '-' or no FILE = stdin): JSONL records {\"id\": ..., \"text\": ...}\n"
          "(\"image\", \"audio\", \"video\": PATH, \"content\": [items] with --mmproj), one\n"
          "text per line, or one media path per line (--input files).\n"
          "SIGINT/SIGTERM stop cleanly and print the command that continues (--resume).\n"
          "\nOptions:\n",
          f);
    for (size_t i = 0; i < NOPTS; i++) {
        const opt_row *r = &OPTS[i];
        char head[64], def[32];
        if (r->short_flag)
            snprintf(head, sizeof head, "-%c, --%s%s%s", r->short_flag, r->name,
                     r->arg ? " " : "", r->arg ? r->arg : "");
        else
            snprintf(head, sizeof head, "    --%s%s%s", r->name, r->arg ? " " : "",
                     r->arg ? r->arg : "");
        fprintf(f, "  %-29s %s\n", head, r->help);
        const char *d = r->def;
        if (!d && r->init != 0) /* the value the parser starts from, so they agree */
            snprintf(def, sizeof def, "%g", r->init), d = def;
        if (d)
            fprintf(f, "  %-29s (default: %s)\n", "", d);
        char name[64];
        if (r->env)
            fprintf(f, "  %-29s (environment: %s)\n", "", env_name(r, name));
    }
    fputs("\nEngine switches (each also read from the environment variable shown; a flag\n"
          "wins over the environment; booleans take 1/0, on/off, true/false, yes/no there):\n",
          f);
    size_t nsw;
    const ge_switch *sw = ge_config_switches(&nsw);
    for (size_t i = 0; i < nsw; i++) {
        char head[80];
        if (sw[i].kind == GE_SW_BOOL)
            snprintf(head, sizeof head, "    --%s, --no-%s", sw[i].flag, sw[i].flag);
        else if (sw[i].short_flag)
            snprintf(head, sizeof head, "-%c, --%s %s", sw[i].short_flag, sw[i].flag, sw[i].arg);
        else
            snprintf(head, sizeof head, "    --%s %s", sw[i].flag, sw[i].arg);
        if (strlen(head) > 29) {
            fprintf(f, "  %s\n  %-29s %s\n", head, "", sw[i].help);
        } else {
            fprintf(f, "  %-29s %s\n", head, sw[i].help);
        }
        fprintf(f, "  %-29s (default: %s%s%s)\n", "", sw[i].def_text, sw[i].env ? "; env " : "",
                sw[i].env ? sw[i].env : "");
    }
    fputs("\nPrompt names (--prompt, or \"prompt\" in a record; case-insensitive):\n ", f);
    const char *const *names = ge_prompt_names();
    size_t col = 1;
    for (size_t i = 0; names && names[i]; i++) {
        size_t w = strlen(names[i]) + 2;
        if (col + w > 78) {
            fputs("\n ", f);
            col = 1;
        }
        fprintf(f, " %s%s", names[i], names[i + 1] ? "," : "");
        col += w;
    }
    fputs("\n\nExit status: 0 all records embedded, 1 some records failed, 2 usage error,\n"
          "3 the model could not be loaded, 4 input or output I/O error, 130/143 stopped by\n"
          "SIGINT/SIGTERM (the output is closed validly; continue with --resume).\n"
          "See gemmaembed(1) for the input and output formats.\n",
          f);
}
