/* kq_arm.h - the quantised-type GEMM of the ARM tiers, every type of kq.h on the file's rows
 * (no packed copy: kq_packed_size is 0, as on the scalar tier). kq.h has the arithmetic; the
 * results are bit-identical to the scalar oracle.
 *
 * A group of G = 4 rows is decoded once per K chunk (KC columns) and block of TB tokens into
 * a stack buffer (int8 codes, integer sub-block scales and mins, the fp16 factors widened:
 * kq_arm_decode.h in NEON per type, ge_block_decode for any other), its codes interleaved as
 * the Q8_0 layout's K = 4 chunks (q8.h): one 16-byte load is a 4-value chunk of the 4 rows,
 * so a dot by lane (SDOT, or its widening form at the neon tier) multiplies it with that
 * chunk of a token's activations. Then tiles of NT tokens x 4 rows go through the chunk: per
 * sub-block the exact dots of the 4 rows, times their scales (MLA) into isum, the mins' term
 * sum_j m_j asum_j by MLA with the activation sums, and per block kq.h's fp32 rule lane by
 * lane. A sub-block's weight chunks are loaded once for the tile's tokens. The fp32 partial
 * sums carry through y between K chunks (stored and reloaded exactly). The decode is shared
 * by up to TB tokens.
 *
 * Included once by kernels/kq_neon.c and kq_dotprod.c after they define
 *   DOT_T, DOT_ZERO(d): a dot accumulator of 4 rows, zeroed;
 *   DOT2(d, w0, w1, x, l0, l1): d += the products of chunk w0 (16 bytes: 4 rows x 4 codes)
 *     with 4-byte lane l0 of x (16 activation bytes) and of w1 with lane l1, exactly (the
 *     lanes are compile-time constants);
 *   DOT_ROWS(d): the 4 rows' int32 dots;
 *   KQ_ARM_GEMM: the name of the tier's kq_gemm. */
#include <arm_neon.h>
#include <string.h>

#include "dtype.h"
#include "kq.h"

#define G 4      /* rows per group */
#ifndef NT
#define NT 4 /* tokens per register tile (a tier may set fewer) */
#endif
#define TB 256   /* tokens per decode */
#define KC 2048  /* columns per K chunk: TB tokens of activations (512 KiB) stay in L2 */
#define INLINE static inline __attribute__((always_inline))

/* A row group's K chunk, decoded: value i (from the chunk's start) of row r at
 * codes[((i / 4) * G + r) * 4 + i % 4]; sub-block j of the chunk's block b: scales and mins
 * at [(b * nsub + j) * G + r]; factors at [b * G + r]. Rows past the tensor are zero. */
typedef struct {
    int8_t codes[G * KC];
    int32_t sc[G * KC / 16], mn[G * KC / 16];
    float d[G * KC / 32], dm[G * KC / 32];
} decoded;

#include "kq_arm_decode.h"

static void decode(uint32_t type, const uint8_t *w, size_t row_bytes, int64_t o, int nrow,
                   int64_t b0, int64_t nbk, int bn, int nsub, decoded *dec)
{
    const size_t bb = ge_dtype(type)->bytes;
    if (kd_decode(type, w, row_bytes, o, nrow, b0, nbk, bb, dec))
        return;
    if (nrow < G) /* absent rows: zero codes, scales and factors */
        memset(dec, 0, sizeof *dec);
    for (int r = 0; r < nrow; r++) {
        const uint8_t *row = w + (size_t)(o + r) * row_bytes;
        for (int64_t b = 0; b < nbk; b++) {
            ge_block_codes k;
            ge_block_decode(type, row + (size_t)(b0 + b) * bb, &k);
            for (int c = 0; c < bn / 4; c++)
                memcpy(dec->codes + ((b * (bn / 4) + c) * G + r) * 4, k.c + 4 * c, 4);
            for (int j = 0; j < nsub; j++) {
                dec->sc[(b * nsub + j) * G + r] = k.s[j];
                dec->mn[(b * nsub + j) * G + r] = k.m[j];
            }
            dec->d[b * G + r] = k.d;
            dec->dm[b * G + r] = k.dmin;
        }
    }
}

/* y rows [0, nrow) of tokens [t, t + n) over the chunk's nbk blocks (b0 the first's index in
 * the row), adding to y's partial sums unless this is the first chunk. n, bn (block values),
 * sub (sub-block values) and has_min are compile-time constants at each call. */
INLINE void tile(const int n, const int bn, const int sub, const int has_min,
                 const decoded *dec, int64_t b0, int64_t nbk, const ge_q8_act *act, int64_t t,
                 float *y, int64_t ldy, int nrow, int first)
{
    const int64_t cols = act->cols, nb32 = cols / 32, n16 = cols / 16;
    const int nsub = bn == 32 ? 1 : 256 / sub, nch = sub / 4; /* chunks per sub-block */
    float32x4_t f[NT];
#pragma GCC unroll 4
    for (int i = 0; i < NT; i++) {
        if (i >= n)
            break;
        float tmp[G] = {0};
        if (!first)
            memcpy(tmp, y + i * ldy, (size_t)nrow * sizeof(float));
        f[i] = vld1q_f32(tmp);
    }
    for (int64_t lb = 0; lb < nbk; lb++) {
        const int64_t b = b0 + lb, v0 = b * bn; /* the block's first column */
        const int8_t *wb = dec->codes + lb * bn * G;
        int32x4_t is[NT], ms[NT];
#pragma GCC unroll 4
        for (int i = 0; i < NT; i++)
            is[i] = ms[i] = vdupq_n_s32(0);
#pragma GCC unroll 16
        for (int j = 0; j < nsub; j++) {
            int8x16_t w[8]; /* the sub-block's chunks, loaded once for the tile */
#pragma GCC unroll 8
            for (int c = 0; c < nch; c++)
                w[c] = vld1q_s8(wb + (j * nch + c) * 16);
            const int32x4_t sv = vld1q_s32(dec->sc + (lb * nsub + j) * G);
            const int32x4_t mv = vld1q_s32(dec->mn + (lb * nsub + j) * G);
#pragma GCC unroll 4
            for (int i = 0; i < NT; i++) {
                if (i >= n)
                    break;
                const int8_t *a = act->qs + (t + i) * cols + v0 + j * sub;
                DOT_T d;
                DOT_ZERO(d);
                const int8x16_t x0 = vld1q_s8(a);
                DOT2(d, w[0], w[1], x0, 0, 1);
                DOT2(d, w[2], w[3], x0, 2, 3);
                if (sub == 32) {
                    const int8x16_t x1 = vld1q_s8(a + 16);
                    DOT2(d, w[4], w[5], x1, 0, 1);
                    DOT2(d, w[6], w[7], x1, 2, 3);
                }
                if (bn == 32) {
                    is[i] = DOT_ROWS(d);
                } else {
                    is[i] = vmlaq_s32(is[i], DOT_ROWS(d), sv);
                    if (has_min) /* the activations' sum over the sub-block */
                        ms[i] = vmlaq_n_s32(ms[i], mv,
                                            sub == 32 ? act->sum[(t + i) * nb32 + v0 / 32 + j]
                                                      : act->sum16[(t + i) * n16 + v0 / 16 + j]);
                }
            }
        }
        const float32x4_t dv = vld1q_f32(dec->d + lb * G), dmv = vld1q_f32(dec->dm + lb * G);
#pragma GCC unroll 4
        for (int i = 0; i < NT; i++) {
            if (i >= n)
                break;
            const float da = act->d[(t + i) * nb32 + v0 / 32];
            const float32x4_t p = vmulq_f32(vcvtq_f32_s32(is[i]), vmulq_n_f32(dv, da));
            if (!has_min) {
                f[i] = vaddq_f32(f[i], p);
            } else if (bn == 32) { /* Q4_1, Q5_1: + asum (m da) */
                const float asum = (float)act->sum[(t + i) * nb32 + v0 / 32];
                f[i] = vaddq_f32(f[i], vaddq_f32(p, vmulq_n_f32(vmulq_n_f32(dmv, da), asum)));
            } else { /* the K types: - msum (dmin da) */
                f[i] = vaddq_f32(f[i],
                                 vsubq_f32(p, vmulq_f32(vcvtq_f32_s32(ms[i]),
                                                        vmulq_n_f32(dmv, da))));
            }
        }
    }
#pragma GCC unroll 4
    for (int i = 0; i < NT; i++) {
        if (i >= n)
            break;
        float tmp[G];
        vst1q_f32(tmp, f[i]);
        memcpy(y + i * ldy, tmp, (size_t)nrow * sizeof(float));
    }
}

/* tile() specialised for the token count n (1..NT) */
#define BY_N(bn, sub, has_min)                                                              \
    switch (n) {                                                                            \
    case 1: tile(1, bn, sub, has_min, dec, b0, nbk, act, t, y, ldy, nrow, first); break;    \
    case 2: tile(2, bn, sub, has_min, dec, b0, nbk, act, t, y, ldy, nrow, first); break;    \
    case 3: tile(3, bn, sub, has_min, dec, b0, nbk, act, t, y, ldy, nrow, first); break;    \
    default: tile(4, bn, sub, has_min, dec, b0, nbk, act, t, y, ldy, nrow, first); break;   \
    }

static void tiles(uint32_t type, const decoded *dec, int64_t b0, int64_t nbk,
                  const ge_q8_act *act, int64_t t, int n, float *y, int64_t ldy, int nrow,
                  int first)
{
    switch (type) {
    case GE_T_Q4_1: case GE_T_Q5_1: BY_N(32, 32, 1); break;
    case GE_T_Q4_0: case GE_T_Q5_0: case GE_T_IQ4_NL: BY_N(32, 32, 0); break;
    case GE_T_Q4_K: case GE_T_Q5_K: BY_N(256, 32, 1); break;
    case GE_T_IQ4_XS: BY_N(256, 32, 0); break;
    case GE_T_Q2_K: BY_N(256, 16, 1); break;
    default: BY_N(256, 16, 0); break; /* Q3_K, Q6_K */
    }
}

void KQ_ARM_GEMM(uint32_t type, const void *w, int64_t rows, int64_t cols, const ge_q8_act *act,
                 int64_t t0, int64_t t1, int64_t r0, int64_t r1, float *y, int64_t ldy)
{
    const ge_dtype_info *ti = ge_dtype(type);
    const int bn = (int)ti->block;
    const int nsub = bn == 32 ? 1 : ge_kq_uses_sum16(type) ? 16 : 8;
    const int64_t nb = cols / bn, kb = KC / bn;
    const size_t row_bytes = (size_t)nb * ti->bytes;
    decoded dec;
    for (int64_t tb = t0; tb < t1; tb += TB) {
        const int64_t te = t1 - tb < TB ? t1 : tb + TB;
        for (int64_t o = r0; o < r1; o += G) {
            const int nrow = r1 - o < G ? (int)(r1 - o) : G;
            for (int64_t b0 = 0; b0 < nb; b0 += kb) {
                const int64_t nbk = nb - b0 < kb ? nb - b0 : kb;
                decode(type, w, row_bytes, o, nrow, b0, nbk, bn, nsub, &dec);
                for (int64_t t = tb; t < te; t += NT)
                    tiles(type, &dec, b0, nbk, act, t, te - t < NT ? (int)(te - t) : NT,
                          y + t * ldy + o, ldy, nrow, b0 == 0);
            }
        }
    }
}
