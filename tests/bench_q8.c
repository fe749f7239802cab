/* bench_q8.c - Q8_0 GEMM benchmark (make bench-q8; not part of make test): GMAC/s of every
 * tier this CPU runs (plus the EVEX build of the avxvnni algorithm) at the model's shapes,
 * single thread, next to this machine's measured peaks: int8 VNNI-512 (a tight vpdpbusd zmm
 * loop on independent accumulators) and fp32 FMA-512 (vfmadd231ps zmm), also the 256-bit
 * forms. Each number is the median of 7 samples of >= 2 ms (20 ms for the peaks) of thread
 * CPU time.
 *
 *   bench_q8 [-t tier[,tier...]] [-n ntok[,ntok...]] [-s COLSxROWS[,...]] [--huge] [--scalar]
 *
 * Tiers: scalar avx2 avxvnni avx512 evex256 (scalar only with --scalar or -t: it is slow).
 * Warm-cache numbers: the same weights are reused sample after sample, so a weight matrix
 * that fits the L2/L3 is not read from DRAM as it would be in a real 24-layer forward. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "dtype.h"
#include "kern.h"
#include "q8.h"

/* The thread's CPU time, not wall time: on this shared 2-core machine other processes take
 * time slices in the middle of samples, which wall time would charge to the kernel. */
static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

#define SAMPLES 7

/* ---- peaks --------------------------------------------------------------------------- */

#if defined(__x86_64__)
/* 12 independent accumulators, 48 instructions per call: enough to cover a latency of up to
 * 6 cycles at 2 per cycle. Written in asm so that the measured loop is exactly this. */
#define ACC12(op, src)                                                                       \
    op " " src "12, " src "13, " src "0\n\t" op " " src "12, " src "13, " src "1\n\t" op     \
       " " src "12, " src "13, " src "2\n\t" op " " src "12, " src "13, " src "3\n\t" op    \
       " " src "12, " src "13, " src "4\n\t" op " " src "12, " src "13, " src "5\n\t" op    \
       " " src "12, " src "13, " src "6\n\t" op " " src "12, " src "13, " src "7\n\t" op    \
       " " src "12, " src "13, " src "8\n\t" op " " src "12, " src "13, " src "9\n\t" op    \
       " " src "12, " src "13, " src "10\n\t" op " " src "12, " src "13, " src "11\n\t"
#define ZERO14(x)                                                                            \
    "vpxor %%xmm0, %%xmm0, %%xmm0\n\tvpxor %%xmm1, %%xmm1, %%xmm1\n\t"                       \
    "vpxor %%xmm2, %%xmm2, %%xmm2\n\tvpxor %%xmm3, %%xmm3, %%xmm3\n\t"                       \
    "vpxor %%xmm4, %%xmm4, %%xmm4\n\tvpxor %%xmm5, %%xmm5, %%xmm5\n\t"                       \
    "vpxor %%xmm6, %%xmm6, %%xmm6\n\tvpxor %%xmm7, %%xmm7, %%xmm7\n\t"                       \
    "vpxor %%xmm8, %%xmm8, %%xmm8\n\tvpxor %%xmm9, %%xmm9, %%xmm9\n\t"                       \
    "vpxor %%xmm10, %%xmm10, %%xmm10\n\tvpxor %%xmm11, %%xmm11, %%xmm11\n\t"                 \
    "vpxor %%xmm12, %%xmm12, %%xmm12\n\tvpxor %%xmm13, %%xmm13, %%xmm13\n\t"
#define CLOB                                                                                 \
    "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10",  \
        "xmm11", "xmm12", "xmm13"

/* n iterations of 48 instructions */
static void __attribute__((noinline)) loop_vnni512(long n)
{
    __asm__ volatile(ZERO14() "1:\n\t" ACC12("vpdpbusd", "%%zmm") ACC12("vpdpbusd", "%%zmm")
                         ACC12("vpdpbusd", "%%zmm") ACC12("vpdpbusd", "%%zmm") "dec %0\n\t"
                                                                               "jnz 1b\n\t"
                     : "+r"(n)::CLOB, "cc");
}
static void __attribute__((noinline)) loop_vnni256(long n)
{
    __asm__ volatile(ZERO14() "1:\n\t" ACC12("vpdpbusd", "%%ymm") ACC12("vpdpbusd", "%%ymm")
                         ACC12("vpdpbusd", "%%ymm") ACC12("vpdpbusd", "%%ymm") "dec %0\n\t"
                                                                               "jnz 1b\n\t"
                     : "+r"(n)::CLOB, "cc");
}
static void __attribute__((noinline)) loop_fma512(long n)
{
    __asm__ volatile(ZERO14() "1:\n\t" ACC12("vfmadd231ps", "%%zmm")
                         ACC12("vfmadd231ps", "%%zmm") ACC12("vfmadd231ps", "%%zmm")
                             ACC12("vfmadd231ps", "%%zmm") "dec %0\n\t"
                                                           "jnz 1b\n\t"
                     : "+r"(n)::CLOB, "cc");
}
static void __attribute__((noinline)) loop_fma256(long n)
{
    __asm__ volatile(ZERO14() "1:\n\t" ACC12("vfmadd231ps", "%%ymm")
                         ACC12("vfmadd231ps", "%%ymm") ACC12("vfmadd231ps", "%%ymm")
                             ACC12("vfmadd231ps", "%%ymm") "dec %0\n\t"
                                                           "jnz 1b\n\t"
                     : "+r"(n)::CLOB, "cc");
}

/* GMAC/s of loop (macs per instruction) */
static double peak(void (*loop)(long), int macs)
{
    long n = 1000;
    for (;;) {
        double t = now();
        loop(n);
        t = now() - t;
        if (t > 0.02)
            break;
        n *= 2;
    }
    double s[SAMPLES];
    for (int i = 0; i < SAMPLES; i++) {
        double t = now();
        loop(n);
        s[i] = now() - t;
    }
    qsort(s, SAMPLES, sizeof s[0], cmp_d);
    return (double)n * 48 * macs / s[SAMPLES / 2] * 1e-9;
}
#endif

/* ---- GEMM ---------------------------------------------------------------------------- */

static uint64_t rng = 88172645463325252ull;
static uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static int huge; /* --huge: transparent huge pages for the weights and y */

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
    void *pk = alloc(k->q8_packed_size(rows, cols));
    k->q8_pack(w, rows, cols, pk, 0, rows);
    float *x = malloc((size_t)(n_tok * cols) * sizeof *x);
    for (int64_t i = 0; i < n_tok * cols; i++)
        x[i] = (float)((int)(rnd() % 2001) - 1000) * 1e-3f;
    ge_q8_act a = {malloc((size_t)(n_tok * cols)), malloc((size_t)(n_tok * nb) * 4),
                   malloc((size_t)(n_tok * nb) * 4), n_tok, cols};
    k->q8_quantize(x, cols, 0, n_tok, &a);
    float *y = alloc((size_t)(n_tok * rows) * sizeof *y); /* rows * 4 % 64 == 0: rows aligned */

    long reps = 1;
    for (;;) {
        double t = now();
        for (long r = 0; r < reps; r++)
            k->q8_gemm(pk, rows, cols, &a, 0, n_tok, 0, rows, y, rows);
        t = now() - t;
        if (t >= 0.002)
            break;
        reps = t < 1e-5 ? reps * 16 : (long)(reps * 0.0025 / t) + 1;
    }
    double s[SAMPLES];
    for (int i = 0; i < SAMPLES; i++) {
        double t = now();
        for (long r = 0; r < reps; r++)
            k->q8_gemm(pk, rows, cols, &a, 0, n_tok, 0, rows, y, rows);
        s[i] = now() - t;
    }
    qsort(s, SAMPLES, sizeof s[0], cmp_d);
    free(w), free(pk), free(x), free(a.qs), free(a.d), free(a.sum), free(y);
    return (double)rows * cols * n_tok * reps / s[SAMPLES / 2] * 1e-9;
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
        } else {
            fprintf(stderr,
                    "usage: %s [-t tiers] [-n ntoks] [-s COLSxROWS,...] [--huge] [--scalar]\n",
                    argv[0]);
            return 2;
        }
    }

    ge_cpu_feats f;
    ge_cpu_detect(&f);
    double vnni512 = 0;
#if defined(__x86_64__)
    if (ge_tier_supported(&f, GE_TIER_AVX512)) {
        vnni512 = peak(loop_vnni512, 64);
        printf("peak int8 VNNI-512 (vpdpbusd zmm):  %7.1f GMAC/s\n", vnni512);
        printf("peak int8 VNNI-256 (vpdpbusd ymm):  %7.1f GMAC/s\n", peak(loop_vnni256, 32));
        printf("peak fp32 FMA-512 (vfmadd231ps zmm): %7.1f GMAC/s\n", peak(loop_fma512, 16));
    }
    if (ge_tier_supported(&f, GE_TIER_AVX2))
        printf("peak fp32 FMA-256 (vfmadd231ps ymm): %7.1f GMAC/s\n", peak(loop_fma256, 8));
#endif

    struct {
        const char *name;
        ge_kern k;
    } v[GE_TIER_COUNT + 1];
    int n_v = 0;
    for (int t = 0; t < GE_TIER_COUNT; t++) {
        const char *name = ge_tier_name((ge_tier)t);
        if (!ge_tier_supported(&f, (ge_tier)t) || !in_list(tiers, name) ||
            (t == GE_TIER_SCALAR && tiers == NULL && !scalar))
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
