/* q8_avxvnni.c - Q8_0 GEMM family, avxvnni tier: 256-bit vpdpbusd (AVX-VNNI, VEX) on 8-row
 * groups, for CPUs with AVX-VNNI but no AVX-512. The quantiser is the avx2 tier's.
 *
 * Packed layout: kernels/q8.h with G = 8, bias 0x80: one 32-byte load holds 8 rows x 4
 * weight bytes as u8 = w + 128, vpdpbusd's unsigned operand; the token's 4 activation bytes
 * (signed, straight from ge_q8_act) are broadcast to the 8 rows. Each block's int32 sums are
 * seeded with -128 * act->sum[block], which cancels the bias exactly, so there is no
 * horizontal reduction and no per-token byte fix-up. Per block the sums go through the
 * common fp32 rule acc = acc + (float)isum * (dw * da), or for q8_gemm_wide the wide rule
 * (q8.h: p = p + (float)isum * dw over a span of 4 blocks, then acc = acc + p * da), both
 * bit-identical to the scalar tier.
 *
 * This file is also compiled as kernels/q8_evex256.c with Q8V_EVEX defined: the same
 * algorithm in EVEX encoding (AVX-512 VNNI + VL), only so that it can be tested on machines
 * that have AVX-512 but no AVX-VNNI (see q8.h, ge_q8_fill_evex256). */
#include <immintrin.h>
#include <string.h>

#include "q8.h"

#ifdef Q8V_EVEX
#define DPBUSD _mm256_dpbusd_epi32
#define GEMM ge_q8_evex256_gemm
#define GEMM_WIDE ge_q8_evex256_gemm_wide
#else
#define DPBUSD _mm256_dpbusd_avx_epi32
#define GEMM ge_q8_avxvnni_gemm
#define GEMM_WIDE ge_q8_avxvnni_gemm_wide
#endif

#define G 8
#define NT 4      /* tokens per register tile (of 2 row groups: 16 rows) */
#define NTW 3     /* the same for the wide rule (its span sums take registers too) */
#define KB 64     /* blocks per K chunk (the fp32 partial sums carry through y) */
#define SCR 2048  /* scratch (token, block) entries: 16 KiB of stack */
#define BLK GE_Q8_BLOCK_BYTES(G)

/* Per (token tile, block): the tile's seeds (-128 * sum of the activation block) and
 * activation scales, side by side so one pointer with constant offsets reaches them. */
typedef struct {
    int32_t seed[NT];
    float da[NT];
} scr_t;

static inline int32_t ld32(const void *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* Rows [o, o + nrow) of y (ng row groups: o = g * G, nrow <= ng * G) for tokens [t, t + n),
 * blocks [kb0, kb0 + kn); first: kb0 == 0 (start from +0.0f, else continue the partial sums
 * stored in y); wide: the wide rule (kn a multiple of GE_Q8_WIDE). Two row groups share each
 * activation broadcast. ng, n and wide are compile-time constants at each call site; each
 * token's arithmetic is the same for any ng and n. */
static inline __attribute__((always_inline)) void tile(const int ng, const int n, const int wide,
                                                       const uint8_t *gp, int64_t gstride,
                                                       int64_t kn, const int8_t *a, int64_t lda,
                                                       const scr_t *sc, int first, float *y,
                                                       int64_t ldy, int nrow, const uint8_t *pf)
{
    /* the fp32 sums live in memory: VEX has 16 vector registers, all needed for the int32
     * sums (the wide rule's span sums p take registers too, so its tiles hold NTW tokens) */
    float f[NT][2 * G] __attribute__((aligned(32)));
#pragma GCC unroll 16
    for (int i = 0; i < NT; i++) {
        if (i >= n)
            break;
        memset(f[i], 0, sizeof f[i]);
        if (!first)
            memcpy(f[i], y + i * ldy, (size_t)nrow * sizeof(float));
    }
    __m256 p[2][NT];
    const int step = wide ? GE_Q8_WIDE : 1;
    for (int64_t b0 = 0; b0 < kn; b0 += step)
#pragma GCC unroll 4
    for (int bb = 0; bb < step; bb++) {
        const int64_t b = b0 + bb;
        const uint8_t *bp0 = gp + b * BLK, *bp1 = bp0 + gstride;
        const int8_t *ab = a + b * 32;
        if (pf) /* the next two row groups' weights, block by block */
            for (int l = 0; l < BLK; l += 64) {
                _mm_prefetch((const char *)(pf + b * BLK + l), _MM_HINT_T0);
                _mm_prefetch((const char *)(pf + gstride + b * BLK + l), _MM_HINT_T0);
            }
        __m256i s0[NT], s1[NT];
#pragma GCC unroll 16
        for (int i = 0; i < NT; i++) {
            if (i >= n)
                break;
            s0[i] = _mm256_set1_epi32(sc[b].seed[i]);
            s1[i] = s0[i];
        }
#pragma GCC unroll 16
        for (int c = 0; c < 8; c++) {
            __m256i w0 = _mm256_loadu_si256((const __m256i *)(bp0 + 32 * c)), w1 = w0;
            if (ng == 2)
                w1 = _mm256_loadu_si256((const __m256i *)(bp1 + 32 * c));
#pragma GCC unroll 16
            for (int i = 0; i < NT; i++) {
                if (i >= n)
                    break;
                __m256i av = _mm256_set1_epi32(ld32(ab + i * lda + 4 * c));
                s0[i] = DPBUSD(s0[i], w0, av);
                if (ng == 2)
                    s1[i] = DPBUSD(s1[i], w1, av);
            }
        }
#pragma GCC unroll 2
        for (int h = 0; h < ng; h++) {
            const __m256 dw = _mm256_loadu_ps((const float *)((h ? bp1 : bp0) + 32 * G));
#pragma GCC unroll 16
            for (int i = 0; i < NT; i++) {
                if (i >= n)
                    break;
                const __m256 da = _mm256_set1_ps(sc[b].da[i]);
                const __m256 si = _mm256_cvtepi32_ps(h ? s1[i] : s0[i]);
                float *fi = f[i] + h * G;
                if (wide) { /* p += isum * dw; at the span's end acc += p * da */
                    p[h][i] = _mm256_add_ps(bb == 0 ? _mm256_setzero_ps() : p[h][i],
                                            _mm256_mul_ps(si, dw));
                    if (bb == GE_Q8_WIDE - 1)
                        _mm256_store_ps(fi, _mm256_add_ps(_mm256_load_ps(fi),
                                                          _mm256_mul_ps(p[h][i], da)));
                } else {
                    _mm256_store_ps(fi, _mm256_add_ps(_mm256_load_ps(fi),
                                                      _mm256_mul_ps(si, _mm256_mul_ps(dw, da))));
                }
            }
        }
    }
#pragma GCC unroll 16
    for (int i = 0; i < NT; i++) {
        if (i >= n)
            break;
        memcpy(y + i * ldy, f[i], (size_t)nrow * sizeof(float));
    }
}

#define CASE(ng, k)                                                                            \
    case k:                                                                                    \
        tile(ng, k, wide, gp, nb * BLK, kn, a, cols, sc, first, yt, ldy, nrow, pf);            \
        break;

/* wide: the wide rule (q8.h), a compile-time constant at both entries */
static inline __attribute__((always_inline)) void gemm(const int wide, const void *packed,
                                                       int64_t cols, const ge_q8_act *act,
                                                       int64_t t0, int64_t t1, int64_t r0,
                                                       int64_t r1, float *y, int64_t ldy)
{
    const int nt = wide ? NTW : NT;
    const int64_t nb = cols / 32, kb = nb < KB ? nb : KB;
    const int64_t tbs = SCR / kb / NT * nt; /* tokens per cache block (whole tiles), >= 24 */
    const uint8_t *pk = packed;
    scr_t scr[SCR / NT];
    for (int64_t tb = t0; tb < t1; tb += tbs) {
        const int64_t te = t1 - tb < tbs ? t1 : tb + tbs;
        for (int64_t kb0 = 0; kb0 < nb; kb0 += kb) {
            const int64_t kn = nb - kb0 < kb ? nb - kb0 : kb;
            for (int64_t t = tb; t < te; t++) {
                scr_t *row = scr + (t - tb) / nt * kn;
                for (int64_t b = 0; b < kn; b++) {
                    row[b].seed[(t - tb) % nt] = -128 * act->sum[t * nb + kb0 + b];
                    row[b].da[(t - tb) % nt] = act->d[t * nb + kb0 + b];
                }
            }
            for (int64_t g = r0 / G; g * G < r1; g += 2) {
                const uint8_t *gp = pk + (g * nb + kb0) * BLK;
                const int nrow = r1 - g * G < 2 * G ? (int)(r1 - g * G) : 2 * G;
                for (int64_t t = tb; t < te; t += nt) {
                    const int8_t *a = act->qs + t * cols + kb0 * 32;
                    const scr_t *sc = scr + (t - tb) / nt * kn;
                    float *yt = y + t * ldy + g * G;
                    const int first = kb0 == 0;
                    const int64_t n = te - t < nt ? te - t : nt;
                    /* with several tiles per group pair, the first one fetches the next
                     * pair's weights (see q8_avx512.c) */
                    const uint8_t *pf =
                        te - tb > nt && t == tb && (g + 2) * G < r1 ? gp + 2 * nb * BLK : NULL;
                    if (nrow > G) {
                        if (wide)
                            switch (n) { CASE(2, 1) CASE(2, 2) default: CASE(2, NTW) }
                        else
                            switch (n) { CASE(2, 1) CASE(2, 2) CASE(2, 3) default: CASE(2, 4) }
                    } else {
                        if (wide)
                            switch (n) { CASE(1, 1) CASE(1, 2) default: CASE(1, NTW) }
                        else
                            switch (n) { CASE(1, 1) CASE(1, 2) CASE(1, 3) default: CASE(1, 4) }
                    }
                }
            }
        }
    }
}

void GEMM(const void *packed, int64_t rows, int64_t cols, const ge_q8_act *act, int64_t t0,
          int64_t t1, int64_t r0, int64_t r1, float *y, int64_t ldy)
{
    gemm(0, packed, cols, act, t0, t1, r0, r1, y, ldy);
}

void GEMM_WIDE(const void *packed, int64_t rows, int64_t cols, const ge_q8_act *act,
               int64_t t0, int64_t t1, int64_t r0, int64_t r1, float *y, int64_t ldy)
{
    gemm(1, packed, cols, act, t0, t1, r0, r1, y, ldy);
}
