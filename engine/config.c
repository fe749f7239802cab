/* config.c - the engine switch table (docs/product.md 5), strict parsing, environment overlay. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "ge.h"
#include "kern.h"

static const ge_switch switches[] = {
    {GE_CFG_THREADS, "threads", 't', "EI_THREADS", GE_SW_INT, 0, 0, 1024, "N",
     "all allowed CPUs", "size of the compute pool", 0},
    {GE_CFG_THREAD_CAP, "thread-cap", 0, NULL, GE_SW_INT, 0, 0, 1024, "N", "= threads",
     "most threads that join one parallel call", 0},
    {GE_CFG_CPU_TIER, "cpu-tier", 0, "EI_GEMMA2_CPU_X86", GE_SW_TIER, -1, -1, GE_TIER_COUNT - 1,
     "auto|avx512|avxvnni|avx2|i8mm|dotprod|neon|scalar", "auto",
     "force a kernel tier (one the CPU can run)", 1},
    {GE_CFG_HYBRID, "hybrid", 0, "EI_CPU_HYBRID", GE_SW_BOOL, 1, 0, 1, NULL, "on",
     "pin the pool on hybrid CPUs: P-cores, E-cores, SMT", 0},
    {GE_CFG_HYBRID_TOKENS, "hybrid-tokens", 0, "EI_GEMMA2_CPU_HYBRID_TOKENS", GE_SW_INT, 512,
     0, 1 << 30, "N", "512", "waves smaller than this run on P-cores only", 0},
    {GE_CFG_FLASH, "flash", 0, "EI_GEMMA2_CPU_FLASH", GE_SW_BOOL, 1, 0, 1, NULL, "on",
     "fast attention kernels (off: row-by-row reference)", 1},
    {GE_CFG_VNNI256, "vnni256", 0, "EI_GEMMA2_CPU_VNNI256", GE_SW_BOOL, 1, 0, 1, NULL, "on",
     "8-row AVX-VNNI Q8_0 kernel (CPUs without AVX-512)", 0},
    {GE_CFG_VNNI256_SHORT, "vnni256-short", 0, "EI_GEMMA2_CPU_VNNI256_SHORT", GE_SW_BOOL, 1, 0,
     1, NULL, "on", "also use it for waves of <= 8 tokens", 0},
    {GE_CFG_SGEMM, "sgemm", 0, "EI_GEMMA2_CPU_SGEMM", GE_SW_BOOL, 1, 0, 1, NULL, "on",
     "panel SGEMM for BF16/F16/F32 weights", 1},
    {GE_CFG_RELEASE_WEIGHTS, "release-weights", 0, "EI_GEMMA2_CPU_RELEASE_WEIGHTS", GE_SW_BOOL,
     1, 0, 1, NULL, "on", "drop the file pages of repacked tensors", 0},
    {GE_CFG_PREPACK, "prepack", 0, "EI_GEMMA2_CPU_PREPACK", GE_SW_BOOL, 0, 0, 1, NULL, "off",
     "repack all weights before the first record", 0},
    {GE_CFG_WAVE_TOKENS, "wave-tokens", 0, "GEMMAEMBED_WAVE_TOKENS", GE_SW_INT, 1024, 0,
     1 << 20, "N", "1024", "tokens per shared wave of short records (0: no packing)", 0},
    {GE_CFG_MEDIA_FAST, "media-fast", 0, "EI_GEMMA2_CPU_MEDIA_FAST", GE_SW_BOOL, 1, 0, 1, NULL,
     "on", "fast media towers (off: the reference towers)", 1},
    {GE_CFG_MEDIA_Q8_WIDE, "media-q8-wide", 0, "EI_GEMMA2_CPU_MEDIA_Q8_WIDE", GE_SW_BOOL, 1, 0,
     1, NULL, "on", "fast towers' Q8_0 GEMMs: one activation scale per 128 values", 1},
    {GE_CFG_YIELD, "yield", 0, "EI_GEMMA2_CPU_YIELD", GE_SW_BOOL, 1, 0, 1, NULL, "on",
     "let text waves run between media tower layers", 0},
    {GE_CFG_SEMANTICS, "semantics", 0, "EI_GEMMA2_SEMANTICS", GE_SW_CHOICE, GE_SEM_OFFICIAL, 0,
     GE_SEM_LLAMACPP, "official|llamacpp", "official",
     "Hugging Face numerics, or llama.cpp's (docs/model.md 8)", 1},
    {GE_CFG_VIDEO_TIMESTAMPS, "video-timestamps", 0, "EI_GEMMA2_VIDEO_TIMESTAMPS", GE_SW_BOOL, 0,
     0, 1, NULL, "off", "\"MM:SS \" text before each video frame block", 1},
};

const ge_switch *ge_config_switches(size_t *n)
{
    *n = sizeof switches / sizeof switches[0];
    return switches;
}

void ge_config_defaults(ge_config *c)
{
    memset(c, 0, sizeof *c);
    for (size_t i = 0; i < sizeof switches / sizeof switches[0]; i++)
        c->v[switches[i].id] = switches[i].def;
}

static int parse_bool(const char *s)
{
    static const char *const on[] = {"1", "on", "true", "yes"}, *const off[] = {"0", "off",
                                                                              "false", "no"};
    for (int i = 0; i < 4; i++) {
        if (strcasecmp(s, on[i]) == 0)
            return 1;
        if (strcasecmp(s, off[i]) == 0)
            return 0;
    }
    return -1;
}

/* The index of name in the '|'-separated list, or -1. */
static int choice_index(const char *list, const char *name)
{
    size_t n = strlen(name);
    for (int i = 0; *list; i++) {
        const char *bar = strchr(list, '|');
        size_t len = bar ? (size_t)(bar - list) : strlen(list);
        if (len == n && strncmp(list, name, n) == 0)
            return i;
        list += len + (bar != NULL);
    }
    return -1;
}

ge_status ge_config_set(ge_config *c, const ge_switch *s, const char *value, ge_source src,
                        ge_err *err)
{
    const char *who = src == GE_SRC_ENV && s->env ? s->env : s->flag;
    int v;
    switch (s->kind) {
    case GE_SW_BOOL:
        v = value ? parse_bool(value) : 1;
        if (v < 0)
            return ge_fail(err, GE_E_USAGE, "%s: '%s' is not on/off (1/0, true/false, yes/no)",
                           who, value);
        break;
    case GE_SW_TIER:
        v = value ? ge_tier_from_name(value) : -2;
        if (v == -2)
            return ge_fail(err, GE_E_USAGE, "%s: unknown tier '%s' (%s)", who,
                           value ? value : "", s->arg);
        break;
    case GE_SW_CHOICE:
        v = value ? choice_index(s->arg, value) : -1;
        if (v < 0)
            return ge_fail(err, GE_E_USAGE, "%s: '%s' is not one of %s", who,
                           value ? value : "", s->arg);
        break;
    default: {
        char *end;
        errno = 0;
        long l = value && *value ? strtol(value, &end, 10) : 0;
        if (!value || !*value || errno || *end || l < s->min || l > s->max)
            return ge_fail(err, GE_E_USAGE, "%s: '%s' is not an integer in [%d, %d]", who,
                           value ? value : "", s->min, s->max);
        v = (int)l;
    }
    }
    c->v[s->id] = v;
    c->src[s->id] = src;
    return GE_OK;
}

ge_status ge_config_from_env(ge_config *c, char *(*lookup)(const char *name), ge_err *err)
{
    for (size_t i = 0; i < sizeof switches / sizeof switches[0]; i++) {
        const char *val = switches[i].env ? lookup(switches[i].env) : NULL;
        if (val && *val) {
            ge_status st = ge_config_set(c, &switches[i], val, GE_SRC_ENV, err);
            if (st)
                return st;
        }
    }
    return GE_OK;
}

const char *ge_config_value_text(const ge_config *c, const ge_switch *s, char *buf, size_t n)
{
    int v = c->v[s->id];
    if (s->kind == GE_SW_BOOL)
        snprintf(buf, n, "%s", v ? "on" : "off");
    else if (s->kind == GE_SW_TIER)
        snprintf(buf, n, "%s", v < 0 ? "auto" : ge_tier_name((ge_tier)v));
    else if (s->kind == GE_SW_CHOICE) {
        const char *p = s->arg;
        for (int i = 0; i < v && strchr(p, '|'); i++)
            p = strchr(p, '|') + 1;
        snprintf(buf, n, "%.*s", (int)strcspn(p, "|"), p);
    } else
        snprintf(buf, n, "%d", v);
    return buf;
}
