/* dispatch.c - tier selection (a pure function of the CPU features) and the kernel tables. */
#include <pthread.h>
#include <string.h>

#include "kern.h"

static const char *const names[GE_TIER_COUNT] = {"scalar", "avx2", "avxvnni", "avx512",
                                                      "neon",   "dotprod", "i8mm"};

const char *ge_tier_name(ge_tier t) { return t < GE_TIER_COUNT ? names[t] : "?"; }

int ge_tier_from_name(const char *name)
{
    if (strcmp(name, "auto") == 0)
        return -1;
    for (int t = 0; t < GE_TIER_COUNT; t++)
        if (strcmp(name, names[t]) == 0)
            return t;
    return -2;
}

int ge_tier_supported(const ge_cpu_feats *f, ge_tier t)
{
    const int avx2 = f->x86 && f->os_avx && f->avx && f->avx2 && f->fma && f->f16c;
    switch (t) {
    case GE_TIER_SCALAR:
        return 1;
    case GE_TIER_AVX2:
        return avx2;
    case GE_TIER_AVXVNNI:
        return avx2 && f->avxvnni;
    case GE_TIER_AVX512:
        return avx2 && f->os_avx512 && f->avx512f && f->avx512bw && f->avx512vl &&
               f->avx512dq && f->avx512vnni;
    case GE_TIER_NEON:
        return f->arm64 && f->neon;
    case GE_TIER_DOTPROD:
        return f->arm64 && f->neon && f->dotprod;
    case GE_TIER_I8MM:
        return f->arm64 && f->neon && f->dotprod && f->i8mm;
    default:
        return 0;
    }
}

ge_tier ge_tier_best(const ge_cpu_feats *f)
{
    static const ge_tier order[] = {GE_TIER_AVX512, GE_TIER_AVXVNNI, GE_TIER_AVX2,
                                    GE_TIER_I8MM,   GE_TIER_DOTPROD, GE_TIER_NEON};
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++)
        if (ge_tier_supported(f, order[i]))
            return order[i];
    return GE_TIER_SCALAR;
}

static ge_kern tables[GE_TIER_COUNT];
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void fill_all(void)
{
    for (int t = 0; t < GE_TIER_COUNT; t++) {
        ge_kern *k = &tables[t];
        k->name = names[t];
        k->tier = (ge_tier)t;
        ge_q8_fill(k, (ge_tier)t);
        ge_kq_fill(k, (ge_tier)t);
        ge_sgemm_fill(k, (ge_tier)t);
        ge_attn_fill(k, (ge_tier)t);
        ge_peak_fill(k, (ge_tier)t);
        ge_act_fill(k, (ge_tier)t);
        ge_attn_rel_fill(k, (ge_tier)t);
    }
}

const ge_kern *ge_kern_get(ge_tier t)
{
    pthread_once(&once, fill_all);
    return t < GE_TIER_COUNT ? &tables[t] : &tables[GE_TIER_SCALAR];
}
