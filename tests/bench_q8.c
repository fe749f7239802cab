/* bench_q8.c - quantised GEMM benchmark (make bench-q8; not part of make test): GMAC/s of every
 * tier this CPU runs (plus the EVEX build of the avxvnni algorithm) at the model's shapes,
 * single thread, next to this machine's measured peaks (the kernel table's register-only
 * loops, kernels/peak*.c): int8 VNNI-512 (vpdpbusd zmm) and fp32 FMA-512 (vfmadd231ps zmm),
 * also FMA-256 and, on CPUs with AVX-VNNI, VNNI-256. Each number is the median of 7 samples
 * of >= 2 ms (20 ms for the peaks) of thread CPU time (tests/bench.h).
 *
 *   bench_q8 [-t tier[,tier...]] [-n ntok[,ntok...]] [-s COLSxROWS[,...]] [--huge] [--scalar]
 *            [--wide] [--type TYPE]
 *
 * --wide: the media towers' rule (kern.h q8_gemm_wide; shapes with cols % 128 == 0).
 * --type: a weight type of the kq family (q4_k, q6_k, q4_0, ...: kernels/kq.h) instead of
 * Q8_0, packed where the tier packs it, with random codes (tests/kq_data.h).
 *
 * Tiers: scalar avx2 avxvnni avx512 evex256 (scalar only with --scalar or -t: it is slow).
 * Warm-cache numbers: the same weights are reused sample after sample, so a weight matrix
 * that fits the L2/L3 is not read from DRAM as it would be in a real 24-layer forward. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>

#include "bench.h"
#include "dtype.h"
#include "kern.h"
#include "kq.h"
#include "q8.h"

#define RNG_SEED 88172645463325252ull
#include "rng.h"
#include "kq_data.h"

/* ---- GEMM ---------------------------------------------------------------------------- */

static int huge; /* --huge: transparent huge pages for the weights and y */
static int wide; /* --wide: the media towers' rule (span GE_Q8_WIDE, q8_gemm_wide) */
static uint32_t wtype = GE_T_Q8_0; /* --type */

/* 64-byte aligned; with --huge, 2 MiB aligned and madvise(MADV_HUGEPAGE) */
static void *alloc(size_t n)
{
    if (!huge)
        return aligned_alloc(64, (n + 63) / 64 * 64);
    const size_t hp = (size_t)2 << 20;
    void *p = aligned_alloc(hp, (n + hp - 1) / hp * hp);
    if (p)
        madvise(p, (n + hp - 1) / hp * hp, MADV_HUGEPAGE);
    return p;
}

typedef struct {
    const ge_kern *k;
    const void *pk;
    const ge_q8_act *a;
    int64_t rows, cols, n_tok;
    float *y;
} gemm_job;

static void run_gemm(void *arg, long call)
{
    const gemm_job *j = arg;
    if (wtype != GE_T_Q8_0)
        j->k->kq_gemm(wtype, j->pk, j->rows, j->cols, j->a, 0, j->n_tok, 0, j->rows, j->y,
                      j->rows);
    else
        (wide ? j->k->q8_gemm_wide : j->k->q8_gemm)(j->pk, j->rows, j->cols, j->a, 0, j->n_tok,
                                                    0, j->rows, j->y, j->rows);
}

static double bench_gemm(const ge_kern *k, int64_t cols, int64_t rows, int64_t n_tok)
{
    const int64_t nb = cols / 32;
    ge_block_q8_0 *w = malloc((size_t)(rows * nb) * sizeof *w);
    for (int64_t i = 0; i < rows * nb; i++) {
        uint16_t h = ge_fp32_to_fp16(0.001f + (float)(rnd() % 100) * 1e-5f);
        memcpy(&w[i].d, &h, 2);
        for (int j = 0; j < 32; j++)
            w[i].qs[j] = (int8_t)((int)(rnd() % 255) - 127);
    }
    void *pk, *kw = NULL;
    if (wtype != GE_T_Q8_0) { /* the kq family: packed where the tier packs the type */
        kw = kq_random_weights(wtype, rows, cols);
        const size_t n = k->kq_packed_size(wtype, rows, cols);
        pk = n ? alloc(n) : kw;
        if (n)
            k->kq_pack(wtype, kw, rows, cols, pk, 0, rows);
    } else {
        pk = alloc(k->q8_packed_size(rows, cols));
        k->q8_pack(w, rows, cols, pk, 0, rows);
    }
    float *x = malloc((size_t)(n_tok * cols) * sizeof *x);
    for (int64_t i = 0; i < n_tok * cols; i++)
        x[i] = (float)((int)(rnd() % 2001) - 1000) * 1e-3f;
    ge_q8_act a = {.qs = malloc((size_t)(n_tok * cols)),
                   .d = malloc((size_t)(n_tok * nb) * 4),
                   .sum = malloc((size_t)(n_tok * nb) * 4),
                   .n_tok = n_tok,
                   .cols = cols,
                   .span = wtype != GE_T_Q8_0 ? ge_kq_span(wtype) : wide ? GE_Q8_WIDE : 1};
    k->q8_quantize(x, cols, 0, n_tok, &a);
    if (a.span == GE_Q8_K_SPAN) {
        a.sum16 = malloc((size_t)(n_tok * nb) * 8);
        ge_q8_sum16(&a, 0, n_tok);
    }
    float *y = alloc((size_t)(n_tok * rows) * sizeof *y); /* rows * 4 % 64 == 0: rows aligned */

    gemm_job j = {k, pk, &a, rows, cols, n_tok, y};
    const bench_stats st = bench_time(run_gemm, &j, 0.002, BENCH_SAMPLES);
    if (pk != kw)
        free(pk);
    free(w), free(kw), free(x), free(a.qs), free(a.d), free(a.sum), free(a.sum16), free(y);
    return (double)rows * cols * n_tok / st.med * 1e-9;
}

static int in_list(const char *list, const char *name)
{
    if (!list)
        return -1;
    size_t n = strlen(name);
    for (const char *p = list; (p = strstr(p, name)); p += n)
        if ((p == list || p[-1] == ',') && (p[n] == ',' || p[n] == 0))
            return 1;
    return 0;
}

int main(int argc, char **argv)
{
    const char *tiers = NULL;
    int64_t ntoks[16] = {1, 8, 64, 128, 512}, n_nt = 5;
    int64_t shapes[16][2] = {{512, 1024}, {512, 512}, {1024, 512}, {512, 2048},
                             {2048, 512}, {512, 768}, {512, 12288}};
    int n_sh = 7, scalar = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-t") == 0 && i + 1 < argc) {
            tiers = argv[++i];
        } else if (strcmp(argv[i], "-n") == 0 && i + 1 < argc) {
            n_nt = 0;
            for (char *p = argv[++i]; *p && n_nt < 16; p += *p == ',')
                ntoks[n_nt++] = strtoll(p, &p, 10);
        } else if (strcmp(argv[i], "-s") == 0 && i + 1 < argc) {
            n_sh = 0;
            for (char *p = argv[++i]; *p && n_sh < 16; p += *p == ',') {
                shapes[n_sh][0] = strtoll(p, &p, 10);
                shapes[n_sh++][1] = strtoll(p + (*p == 'x'), &p, 10);
            }
        } else if (strcmp(argv[i], "--huge") == 0) {
            huge = 1;
        } else if (strcmp(argv[i], "--scalar") == 0) {
            scalar = 1;
        } else if (strcmp(argv[i], "--wide") == 0) {
            wide = 1;
        } else if (strcmp(argv[i], "--type") == 0 && i + 1 < argc) {
            const char *tn = argv[++i];
            wtype = 0;
            for (uint32_t t = 1; t < 64 && !wtype; t++)
                if (ge_dtype(t) && strcasecmp(ge_dtype(t)->name, tn) == 0 && ge_kq_span(t))
                    wtype = t;
            if (!wtype && strcasecmp(tn, "q8_0") != 0) {
                fprintf(stderr, "--type %s: not a type of the kq family (kernels/kq.h)\n", tn);
                return 2;
            }
            wtype = wtype ? wtype : GE_T_Q8_0;
        } else {
            fprintf(stderr,
                    "usage: %s [-t tiers] [-n ntoks] [-s COLSxROWS,...] [--huge] [--scalar] "
                    "[--wide] [--type TYPE]\n",
                    argv[0]);
            return 2;
        }
    }

    ge_cpu_feats f;
    ge_cpu_detect(&f);
    /* the kernel table's peak loops, median of 7 runs of 20 ms each */
    double vnni512 = 0;
    if (ge_tier_supported(&f, GE_TIER_AVX512)) {
        vnni512 = bench_peak(ge_kern_get(GE_TIER_AVX512)->peak_int8, 0.02, BENCH_SAMPLES).med;
        printf("peak int8 VNNI-512 (vpdpbusd zmm):  %7.1f GMAC/s\n", vnni512);
    }
    if (ge_tier_supported(&f, GE_TIER_AVXVNNI))
        printf("peak int8 VNNI-256 (vpdpbusd ymm):  %7.1f GMAC/s\n",
               bench_peak(ge_kern_get(GE_TIER_AVXVNNI)->peak_int8, 0.02, BENCH_SAMPLES).med);
    if (ge_tier_supported(&f, GE_TIER_AVX512))
        printf("peak fp32 FMA-512 (vfmadd231ps zmm): %7.1f GMAC/s\n",
               bench_peak(ge_kern_get(GE_TIER_AVX512)->peak_fp32, 0.02, BENCH_SAMPLES).med);
    if (ge_tier_supported(&f, GE_TIER_AVX2))
        printf("peak fp32 FMA-256 (vfmadd231ps ymm): %7.1f GMAC/s\n",
               bench_peak(ge_kern_get(GE_TIER_AVX2)->peak_fp32, 0.02, BENCH_SAMPLES).med);

    struct {
        const char *name;
        ge_kern k;
    } v[GE_TIER_COUNT + 1];
    int n_v = 0;
    for (int t = 0; t < GE_TIER_COUNT; t++) {
        const char *name = ge_tier_name((ge_tier)t);
        if (!ge_tier_supported(&f, (ge_tier)t) || !in_list(tiers, name) ||
            (t == GE_TIER_SCALAR && tiers == NULL && !scalar) ||
            (wide && !ge_kern_get((ge_tier)t)->q8_gemm_wide))
            continue;
        v[n_v].name = name;
        v[n_v++].k = *ge_kern_get((ge_tier)t);
    }
    if (ge_q8_evex256_supported(&f) && in_list(tiers, "evex256")) {
        v[n_v].k = *ge_kern_get(GE_TIER_AVXVNNI);
        if (ge_q8_fill_evex256(&v[n_v].k))
            v[n_v++].name = "evex256";
    }

    printf("\n%-8s %-11s", "tier", "cols x rows");
    for (int j = 0; j < n_nt; j++)
        printf("   n=%-4lld GMAC/s    ", (long long)ntoks[j]);
    printf("\n");
    for (int i = 0; i < n_v; i++)
        for (int s = 0; s < n_sh; s++) {
            char sh[32];
            snprintf(sh, sizeof sh, "%lldx%lld", (long long)shapes[s][0],
                     (long long)shapes[s][1]);
            printf("%-8s %-11s", v[i].name, sh);
            fflush(stdout);
            for (int j = 0; j < n_nt; j++) {
                double g = bench_gemm(&v[i].k, shapes[s][0], shapes[s][1], ntoks[j]);
                if (vnni512 > 0)
                    printf("   %7.1f (%5.1f%%)  ", g, 100 * g / vnni512);
                else
                    printf("   %7.1f           ", g);
                fflush(stdout);
            }
            printf("\n");
        }
    return 0;
}
