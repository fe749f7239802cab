/* bench_sgemm.c - SGEMM throughput per tier on the model's linear shapes, one thread, next to
 * the machine's measured fp32 FMA peak. Not a test: `make bench-sgemm`, then
 * build/rel/tests/bench_sgemm [tier...] [--cold] [-s COLSxROWS] [-n N_TOK] [--no-peak]
 * [--wall]   (default tiers: avx2 and avx512; make bench-sgemm ARGS="...").
 *
 * Method: one sample is as many calls as take >= 2 ms of thread CPU time; GMAC/s is the
 * median of 7 samples (p20..p80 shown; tests/bench.h). The peaks are the kernel table's
 * peak_fp32 loops (thread CPU time, also with --wall). x and y rows are 64-byte aligned
 * (ldy = rows).
 * "warm": the same packed weight every call (it stays in L2/L3 when it fits); "cold": calls
 * rotate over copies totalling > 96 MB, so weights come from DRAM, as in a real forward pass
 * where each layer's weights are touched once per wave. Also: pack speed per weight type. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "dtype.h"
#include "kern.h"
#include "rng.h"

/* Median (and p20/p80) of BENCH_SAMPLES rates in G units/s: f(arg, i) runs call number i,
 * units per call (MACs, values). */
static void measure(void (*f)(void *, long), void *arg, double units, double out[3])
{
    const bench_stats st = bench_time(f, arg, 2e-3, BENCH_SAMPLES);
    out[0] = units / st.med * 1e-9; /* the p20 rate is that of the p80 time */
    out[1] = units / st.p80 * 1e-9, out[2] = units / st.p20 * 1e-9;
}

/* ---- sgemm ---------------------------------------------------------------------------- */
typedef struct {
    const ge_kern *k;
    float **packed;
    int ncopies;
    float *x, *y;
    int64_t rows, cols, n_tok;
} job;

static void run_sgemm(void *arg, long call)
{
    job *j = arg;
    j->k->sgemm(j->packed[call % j->ncopies], j->rows, j->cols, j->x, j->cols, 0, j->n_tok, 0,
                j->rows, j->y, j->rows);
}

typedef struct {
    const ge_kern *k;
    uint32_t type;
    const void *src;
    float *dst;
    int64_t rows, cols;
} pack_job;

static void run_pack(void *arg, long call)
{
    (void)call;
    pack_job *j = arg;
    j->k->sg_pack(j->type, j->src, j->rows, j->cols, j->dst, 0, j->rows);
}

int main(int argc, char **argv)
{
    ge_cpu_feats f;
    ge_cpu_detect(&f);
    int want[GE_TIER_COUNT] = {0}, any = 0, cold = 0, no_peak = 0;
    long long only_cols = 0, only_rows = 0, only_tok = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--cold") == 0) {
            cold = 1;
            continue;
        }
        if (strcmp(argv[i], "--wall") == 0) {
            bench_clock = CLOCK_MONOTONIC;
            continue;
        }
        if (strcmp(argv[i], "--no-peak") == 0) {
            no_peak = 1;
            continue;
        }
        if (strcmp(argv[i], "-s") == 0 && i + 1 < argc) {
            if (sscanf(argv[++i], "%lldx%lld", &only_cols, &only_rows) != 2)
                return 2;
            continue;
        }
        if (strcmp(argv[i], "-n") == 0 && i + 1 < argc) {
            only_tok = atoll(argv[++i]);
            continue;
        }
        int t = ge_tier_from_name(argv[i]);
        if (t < 0) {
            fprintf(stderr, "bench_sgemm: unknown tier %s\n", argv[i]);
            return 2;
        }
        want[t] = any = 1;
    }
    if (!any)
        for (int t = GE_TIER_AVX2; t < GE_TIER_COUNT; t++)
            want[t] = t != GE_TIER_AVXVNNI; /* avxvnni runs the avx2 kernel */

    double peak = 0; /* the kernel table's peak loops (kernels/peak*.c), 7 runs of 20 ms */
    if (!no_peak && ge_tier_supported(&f, GE_TIER_AVX512)) {
        const bench_stats pk =
            bench_peak(ge_kern_get(GE_TIER_AVX512)->peak_fp32, 0.02, BENCH_SAMPLES);
        printf("peak fp32 FMA-512 (12 zmm chains): %.1f GMAC/s [%.1f..%.1f] = %.1f GFLOP/s\n",
               pk.med, pk.p20, pk.p80, 2 * pk.med);
        peak = pk.med;
    }
    if (!no_peak && ge_tier_supported(&f, GE_TIER_AVX2)) {
        const bench_stats pk =
            bench_peak(ge_kern_get(GE_TIER_AVX2)->peak_fp32, 0.02, BENCH_SAMPLES);
        printf("peak fp32 FMA-256 (10 ymm chains): %.1f GMAC/s [%.1f..%.1f]\n", pk.med, pk.p20,
               pk.p80);
        if (peak < pk.med)
            peak = pk.med;
    }
    if (!no_peak && peak == 0) { /* no x86 vector tier: the best tier's loop, for reference */
        const ge_kern *best = ge_kern_get(ge_tier_best(&f));
        if (best->peak_fp32)
            printf("kern.h peak_fp32 (%s): %.1f GMAC/s\n", best->name, best->peak_fp32(0.2));
    }

    static const int64_t shapes[][2] = {{512, 1024}, {512, 512},  {1024, 512}, {512, 2048},
                                        {2048, 512}, {512, 12288}, {512, 768}};
    static const int64_t toks[] = {1, 6, 64, 512};
    printf("%-8s %-12s %5s %10s %16s %7s\n", "tier", "cols x rows", "n_tok", "GMAC/s",
           "p20..p80", "%peak");
    for (int t = 0; t < GE_TIER_COUNT; t++) {
        if (!want[t])
            continue;
        if (!ge_tier_supported(&f, (ge_tier)t)) {
            printf("%-8s (not supported here)\n", ge_tier_name((ge_tier)t));
            continue;
        }
        const ge_kern *k = ge_kern_get((ge_tier)t);
        if (!only_tok) { /* pack: weight values expanded per second, 512 x 2048 */
            static const uint32_t types[] = {GE_T_F32, GE_T_F16, GE_T_BF16};
            const int64_t rows = 2048, cols = 512;
            float *src = malloc((size_t)(rows * cols) * 4);
            for (int64_t i = 0; i < rows * cols; i++) /* weight-like values in every format */
                src[i] = 0.05f * frand();
            float *dst = malloc(k->sg_packed_size(rows, cols));
            for (int i = 0; i < 3; i++) {
                if (types[i] == GE_T_F16) /* half-size rows: an F16 view of the same bytes */
                    for (int64_t e = 0; e < rows * cols; e++)
                        ((uint16_t *)src)[e] = ge_fp32_to_fp16(0.05f * frand());
                pack_job pj = {k, types[i], src, dst, rows, cols};
                double r[3];
                measure(run_pack, &pj, (double)(rows * cols), r);
                printf("%-8s pack %-4s %lldx%lld: %.2f Gvalues/s [%.2f..%.2f]\n", k->name,
                       ge_dtype(types[i])->name, (long long)cols, (long long)rows, r[0], r[1],
                       r[2]);
            }
            free(src);
            free(dst);
        }
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            const int64_t cols = shapes[s][0], rows = shapes[s][1];
            if (only_cols && (cols != only_cols || rows != only_rows))
                continue;
            size_t bytes = k->sg_packed_size(rows, cols);
            int ncopies = cold ? (int)((96u << 20) / bytes) + 2 : 1;
            float *w = malloc((size_t)rows * (size_t)cols * sizeof *w);
            for (int64_t i = 0; i < rows * cols; i++)
                w[i] = frand();
            float **packed = malloc((size_t)ncopies * sizeof *packed);
            for (int c = 0; c < ncopies; c++) {
                packed[c] = aligned_alloc(64, (bytes + 63) / 64 * 64);
                k->sg_pack(GE_T_F32, w, rows, cols, packed[c], 0, rows);
            }
            free(w);
            for (size_t ti = 0; ti < sizeof toks / sizeof toks[0]; ti++) {
                const int64_t n = toks[ti];
                if (only_tok && n != only_tok)
                    continue;
                job j = {k, packed, ncopies, aligned_alloc(64, (size_t)(n * cols) * 4),
                         aligned_alloc(64, (size_t)(n * rows) * 4), rows, cols, n};
                for (int64_t i = 0; i < n * cols; i++)
                    j.x[i] = frand();
                double r[3];
                measure(run_sgemm, &j, (double)n * (double)rows * (double)cols, r);
                char sh[32], pr[32];
                snprintf(sh, sizeof sh, "%lldx%lld", (long long)cols, (long long)rows);
                snprintf(pr, sizeof pr, "%.1f..%.1f", r[1], r[2]);
                char pc[16] = "-";
                if (peak > 0)
                    snprintf(pc, sizeof pc, "%.1f%%", 100 * r[0] / peak);
                printf("%-8s %-12s %5lld %10.2f %16s %7s%s\n", k->name, sh, (long long)n, r[0],
                       pr, pc, cold ? " cold" : "");
                fflush(stdout);
                free(j.x);
                free(j.y);
            }
            for (int c = 0; c < ncopies; c++)
                free(packed[c]);
            free(packed);
        }
    }
    return 0;
}
