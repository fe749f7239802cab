/* opts.c - the option table, getopt_long parsing and --help (opts.h).
 *
 * OPTS below is the single list of flags: getopt_long's table, the short-option string and
 * the --help text are all built from it, so a flag cannot exist without being documented.
 * The man page lists the same flags (tests/test_cli.sh checks both against --help). */
#include "opts.h"

#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "ge.h"

enum {
    O_MODEL = 'm', O_OUTPUT = 'o', O_QUIET = 'q', O_HELP = 'h', O_VERSION = 'V',
    O_INPUT = 256, O_FORMAT, O_ENCODING, O_DIM, O_PROMPT, O_PREFIX, O_TRUNCATE, O_TOKENIZE,
    O_ERRORS, O_IDS, O_MAX_ERRORS, O_MMPROJ, O_IMAGE_TOKENS, O_AUDIO_MAX_SECONDS,
    O_VIDEO_TOKENS, O_VIDEO_FPS, O_VIDEO_FRAMES, O_PRINT_CONFIG, O_RESUME, O_SHARD,
    O_PROGRESS, O_BENCH, O_BENCH_JSON, O_BENCH_REPS,
    O_SWITCH = 1000,   /* + index in the engine switch table */
    O_NO_SWITCH = 2000 /* + index: --no-<bool switch> */
};

typedef struct {
    int id;           /* getopt value (the short letter when there is one) */
    const char *name; /* long name */
    const char *arg;  /* argument placeholder, NULL for a switch */
    const char *def;  /* default, shown in --help; NULL for none */
    const char *help;
} opt_row;

static const opt_row OPTS[] = {
    {O_MODEL, "model", "PATH", "$GEMMAEMBED_MODEL",
     "EmbeddingGemma 2 GGUF text model (F32 F16 BF16 Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 Q2_K..Q6_K "
     "IQ4_NL IQ4_XS)"},
    {O_MMPROJ, "mmproj", "PATH", "$GEMMAEMBED_MMPROJ",
     "mmproj GGUF with the vision and/or audio tower (twice: one of each)"},
    {O_IMAGE_TOKENS, "image-tokens", "70|140|280|560|1120", "280", "soft tokens per image"},
    {O_AUDIO_MAX_SECONDS, "audio-max-seconds", "S", "30",
     "keep the first S seconds of each audio clip (at most what fits the context: 327.53)"},
    {O_VIDEO_TOKENS, "video-tokens", "70|140|280|560|1120", "140", "soft tokens per video frame"},
    {O_VIDEO_FPS, "video-fps", "F", "1", "video frames sampled per second (<= 1000)"},
    {O_VIDEO_FRAMES, "video-frames", "N", "32", "at most N frames per video, chosen uniformly"},
    {O_OUTPUT, "output", "PATH", "stdout", "write results to PATH"},
    {O_FORMAT, "format", "jsonl|npy|f32|npz", "from the -o extension, else jsonl",
     "output format"},
    {O_ENCODING, "encoding", "float|base64", "float",
     "jsonl vectors as numbers or base64 (LE float32)"},
    {O_DIM, "dim", "768|512|256|128", "the model's width",
     "Matryoshka: first N values, L2-normalised again"},
    {O_INPUT, "input", "jsonl|lines|files", "guessed per file: '{' first = jsonl",
     "input format (files: one media path per line)"},
    {O_PROMPT, "prompt", "NAME", "none", "task prompt for every record (names below)"},
    {O_PREFIX, "prefix", "STR", "none", "literal prompt prefix for every record"},
    {O_TRUNCATE, "truncate", NULL, NULL,
     "cut over-long records instead of failing them"},
    {O_TOKENIZE, "tokenize", NULL, NULL, "print token ids instead of embeddings (jsonl)"},
    {O_ERRORS, "errors", "PATH", "inline for jsonl, stderr for npy/f32/npz",
     "where error records go"},
    {O_IDS, "ids", "PATH", "OUTPUT.ids.jsonl", "ids sidecar of npy/f32 output"},
    {O_MAX_ERRORS, "max-errors", "N", "no limit", "stop after N failed records"},
    {O_RESUME, "resume", NULL, NULL,
     "continue the -o output of an interrupted run"},
    {O_SHARD, "shard", "I/N", NULL, "only records whose 0-based index % N == I"},
    {O_PROGRESS, "progress", NULL, "when stderr is a terminal",
     "show a progress line on stderr"},
    {O_QUIET, "quiet", NULL, NULL, "no summary, warnings or progress on stderr"},
    {O_BENCH, "bench", NULL, NULL,
     "profile: tokens/s and time per operation (on FILEs or built-in texts)"},
    {O_BENCH_JSON, "bench-json", "PATH", NULL, "also write the --bench results as JSON"},
    {O_BENCH_REPS, "bench-reps", "N", "3", "repetitions of each --bench case"},
    {O_PRINT_CONFIG, "print-config", NULL, NULL,
     "show the switches, kernel tier and CPU, and exit"},
    {O_HELP, "help", NULL, NULL, "show this help and exit"},
    {O_VERSION, "version", NULL, NULL, "show the version and exit"},
};
#define NOPTS (sizeof OPTS / sizeof OPTS[0])

static int usage(char *msg, size_t msglen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int usage(char *msg, size_t msglen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, msglen, fmt, ap);
    va_end(ap);
    return -1;
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

static bool parse_ull(const char *s, unsigned long long *v)
{
    if (!s[0] || s[0] == '-' || s[0] == '+')
        return false;
    char *end;
    errno = 0;
    *v = strtoull(s, &end, 10);
    return errno == 0 && *end == '\0';
}

#define MAX_SWITCHES 64

int ge_opts_parse(int argc, char **argv, ge_opts *o, char *msg, size_t msglen)
{
    memset(o, 0, sizeof *o);
    const char *env = getenv("GEMMAEMBED_MODEL");
    if (env && *env)
        o->model = env;
    env = getenv("GEMMAEMBED_MMPROJ");
    if (env && *env)
        o->mmproj[o->n_mmproj++] = env;
    o->image_tokens = 280;
    o->audio_max_seconds = GE_AUDIO_MAX_SECONDS;
    o->video_tokens = GE_VIDEO_TOKENS;
    o->video_fps = GE_VIDEO_FPS;
    o->video_frames = GE_VIDEO_MAX_FRAMES;
    bool mmproj_flag = false;
    ge_err e;
    size_t nsw;
    const ge_switch *sw = ge_config_switches(&nsw);
    ge_config_defaults(&o->cfg);
    if (ge_config_from_env(&o->cfg, getenv, &e))
        return usage(msg, msglen, "%s", e.msg);

    struct option lo[NOPTS + 2 * MAX_SWITCHES + 1];
    char so[2 * NOPTS + 2 * MAX_SWITCHES + 2], no_names[MAX_SWITCHES][48];
    size_t k = 0, nlo = 0;
    so[k++] = ':'; /* report a missing argument as ':' rather than '?' */
    for (size_t i = 0; i < NOPTS; i++) {
        lo[nlo++] = (struct option){OPTS[i].name,
                                    OPTS[i].arg ? required_argument : no_argument, NULL,
                                    OPTS[i].id};
        if (OPTS[i].id < 256) {
            so[k++] = (char)OPTS[i].id;
            if (OPTS[i].arg)
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

    opterr = 0;
    optind = 1;
    int c;
    unsigned long long v;
    while ((c = getopt_long(argc, argv, so, lo, NULL)) != -1) {
        for (size_t i = 0; i < nsw; i++)
            if (sw[i].short_flag && c == sw[i].short_flag)
                c = O_SWITCH + (int)i;
        if (c >= O_SWITCH && c < O_SWITCH + (int)nsw) {
            const ge_switch *s = &sw[c - O_SWITCH];
            if (ge_config_set(&o->cfg, s, s->kind == GE_SW_BOOL ? NULL : optarg, GE_SRC_FLAG,
                              &e))
                return usage(msg, msglen, "--%s", e.msg);
            continue;
        }
        if (c >= O_NO_SWITCH && c < O_NO_SWITCH + (int)nsw) {
            ge_config_set(&o->cfg, &sw[c - O_NO_SWITCH], "0", GE_SRC_FLAG, &e);
            continue;
        }
        switch (c) {
        case O_PRINT_CONFIG: o->print_config = true; break;
        case O_BENCH: o->bench = true; break;
        case O_BENCH_JSON: o->bench_json = optarg; break;
        case O_BENCH_REPS:
            if (!parse_ull(optarg, &v) || v == 0 || v > 1000)
                return usage(msg, msglen, "--bench-reps: '%s' is not an integer in [1, 1000]",
                             optarg);
            o->bench_reps = (int)v;
            break;
        case O_MODEL: o->model = optarg; break;
        case O_MMPROJ:
            if (!mmproj_flag) /* flags replace the environment's file */
                o->n_mmproj = 0, mmproj_flag = true;
            if (o->n_mmproj == 2)
                return usage(msg, msglen, "--mmproj: at most two files (vision and audio)");
            o->mmproj[o->n_mmproj++] = optarg;
            break;
        case O_IMAGE_TOKENS:
            if (pick(optarg, "70|140|280|560|1120") < 0)
                return usage(msg, msglen, "--image-tokens: '%s' is not one of 70, 140, 280, "
                             "560, 1120", optarg);
            o->image_tokens = atoi(optarg);
            break;
        case O_AUDIO_MAX_SECONDS: {
            char *end;
            errno = 0;
            double sec = strtod(optarg, &end);
            /* !(a && b) rejects NaN too */
            if (!optarg[0] || *end || errno || !(sec > 0 && sec <= GE_AUDIO_SECONDS_CAP))
                return usage(msg, msglen, "--audio-max-seconds: '%s' is not a number of "
                             "seconds in (0, %g]", optarg, GE_AUDIO_SECONDS_CAP);
            o->audio_max_seconds = sec;
            break;
        }
        case O_VIDEO_TOKENS:
            if (pick(optarg, "70|140|280|560|1120") < 0)
                return usage(msg, msglen, "--video-tokens: '%s' is not one of 70, 140, 280, "
                             "560, 1120", optarg);
            o->video_tokens = atoi(optarg);
            break;
        case O_VIDEO_FPS: {
            char *end;
            errno = 0;
            double fps = strtod(optarg, &end);
            if (!optarg[0] || *end || errno || !(fps > 0 && fps <= 1000))
                return usage(msg, msglen, "--video-fps: '%s' is not a rate in (0, 1000]",
                             optarg);
            o->video_fps = fps;
            break;
        }
        case O_VIDEO_FRAMES: {
            char *end;
            errno = 0;
            long n = strtol(optarg, &end, 10);
            if (!optarg[0] || *end || errno || n < 1 || n > GE_VIDEO_FRAMES_CAP)
                return usage(msg, msglen, "--video-frames: '%s' is not a count in 1..%d",
                             optarg, GE_VIDEO_FRAMES_CAP);
            o->video_frames = (int)n;
            break;
        }
        case O_OUTPUT: o->output = optarg; break;
        case O_ERRORS: o->errors = optarg; break;
        case O_IDS: o->ids = optarg; break;
        case O_PROMPT: o->prompt = optarg; break;
        case O_PREFIX: o->prefix = optarg; break;
        case O_TRUNCATE: o->truncate = true; break;
        case O_TOKENIZE: o->tokenize = true; break;
        case O_QUIET: o->quiet = true; break;
        case O_PROGRESS: o->progress = 1; break;
        case O_RESUME: o->resume = true; break;
        case O_SHARD: {
            const char *slash = strchr(optarg, '/');
            char head[32];
            unsigned long long si, sn;
            if (!slash || (size_t)(slash - optarg) >= sizeof head)
                return usage(msg, msglen, "--shard: '%s' is not I/N", optarg);
            memcpy(head, optarg, (size_t)(slash - optarg));
            head[slash - optarg] = 0;
            if (!parse_ull(head, &si) || !parse_ull(slash + 1, &sn) || sn == 0 || si >= sn)
                return usage(msg, msglen,
                             "--shard: '%s' is not I/N with 0 <= I < N (e.g. 0/4)", optarg);
            o->shard_i = si;
            o->shard_n = sn;
            break;
        }
        case O_HELP: o->help = true; break;
        case O_VERSION: o->version = true; break;
        case O_FORMAT: {
            int i = pick(optarg, "jsonl|npy|f32|npz");
            if (i < 0)
                return usage(msg, msglen,
                             "--format: unknown format '%s' (jsonl, npy, f32, npz)", optarg);
            o->format = (ge_fmt[]){GE_FMT_JSONL, GE_FMT_NPY, GE_FMT_F32, GE_FMT_NPZ}[i];
            break;
        }
        case O_INPUT: {
            int i = pick(optarg, "jsonl|lines|files");
            if (i < 0)
                return usage(msg, msglen, "--input: unknown format '%s' (jsonl, lines, files)",
                             optarg);
            o->input = (ge_in_kind[]){GE_IN_JSONL, GE_IN_LINES, GE_IN_FILES}[i];
            break;
        }
        case O_ENCODING: {
            int i = pick(optarg, "float|base64");
            if (i < 0)
                return usage(msg, msglen, "--encoding: unknown encoding '%s' (float, base64)",
                             optarg);
            o->base64 = i == 1;
            break;
        }
        case O_DIM:
            if (pick(optarg, "768|512|256|128") < 0)
                return usage(msg, msglen, "--dim: '%s' is not one of 768, 512, 256, 128",
                             optarg);
            o->dim = atoi(optarg);
            break;
        case O_MAX_ERRORS:
            if (!parse_ull(optarg, &v) || v == 0)
                return usage(msg, msglen, "--max-errors: '%s' is not a positive integer",
                             optarg);
            o->max_errors = v;
            break;
        case ':':
            return usage(msg, msglen, "option '%s' needs an argument", argv[optind - 1]);
        default:
            if (optopt && optopt < 256)
                return usage(msg, msglen, "unknown option '-%c'", optopt);
            return usage(msg, msglen, "unknown option '%s'", argv[optind - 1]);
        }
    }
    o->files = argv + optind;
    o->nfiles = argc - optind;

    if (o->help || o->version)
        return 0;
    if (o->prompt && o->prefix)
        return usage(msg, msglen, "--prompt and --prefix cannot be used together");
    /* checks that depend on the output format are in main.c, once it is known */
    return 0;
}

void ge_opts_help(FILE *f)
{
    fputs("Usage: gemmaembed -m MODEL [options] [FILE...]\n"
          "Embed text, image and audio records with EmbeddingGemma 2. Reads FILEs (gzip or\n"
          "plain; '-' or no FILE = stdin): JSONL records {\"id\": ..., \"text\": ...}\n"
          "(\"image\": PATH, \"audio\": PATH, \"content\": [items] with --mmproj), one text\n"
          "per line, or one image or audio path per line.\n"
          "SIGINT/SIGTERM stop cleanly and print the command that continues (--resume).\n"
          "\nOptions:\n",
          f);
    for (size_t i = 0; i < NOPTS; i++) {
        const opt_row *r = &OPTS[i];
        char head[64];
        if (r->id < 256)
            snprintf(head, sizeof head, "-%c, --%s%s%s", r->id, r->name, r->arg ? " " : "",
                     r->arg ? r->arg : "");
        else
            snprintf(head, sizeof head, "    --%s%s%s", r->name, r->arg ? " " : "",
                     r->arg ? r->arg : "");
        fprintf(f, "  %-29s %s\n", head, r->help);
        if (r->def)
            fprintf(f, "  %-29s (default: %s)\n", "", r->def);
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
