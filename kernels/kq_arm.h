/* kq_arm.h - the quantised-type GEMM of the ARM tiers (kq.h has the arithmetic, the same on
 * every tier). It reads the file's rows in place, like the scalar oracle: each block is
 * decoded once per row and chunk of TOKENS tokens (ge_block_decode: int8 codes and integer
 * sub-block scales and mins), then every token of the chunk takes its sub-block dots with the
 * tier's 16-byte dot and the rule's integer and fp32 steps. So the decode, the one costly
 * scalar step, is shared by up to TOKENS tokens.
 *
 * Included once by kernels/kq_neon.c and kq_dotprod.c after they define
 *   DOT16(acc, w, a): acc (int32x4) plus the 16 products of w and a (int8x16) in some of
 *     its lanes (only the lanes' total is used), exactly;
 *   KQ_ARM_GEMM: the name of the tier's kq_gemm. */
#include <arm_neon.h>

#include "dtype.h"
#include "kq.h"

#define TOKENS 256        /* tokens per decode of a row's blocks */
#define PIECE_VALUES 1024 /* values of a row decoded at once (4 super-blocks, 32 blocks) */
#define INLINE static inline __attribute__((always_inline))

/* [sum of d[4q], sum of d[4q+1], sum of d[4q+2], sum of d[4q+3]]: each lane a sub-block */
INLINE int32x4_t lane_sums(const int32x4_t *d)
{
    return vpaddq_s32(vpaddq_s32(d[0], d[1]), vpaddq_s32(d[2], d[3]));
}

/* isum (and msum) of a 256-value block of sub-blocks of 16 or 32 against a's 256 codes */
INLINE int32_t kblock_sums(const ge_block_codes *k, const int8_t *a, const int32_t *asum,
                           int32_t *msum)
{
    int32x4_t d[16];
    const int nsub = 256 / k->sub;
    if (k->sub == 16) {
#pragma GCC unroll 16
        for (int j = 0; j < 16; j++)
            d[j] = DOT16(vdupq_n_s32(0), vld1q_s8(k->c + 16 * j), vld1q_s8(a + 16 * j));
    } else {
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++)
            d[j] = DOT16(DOT16(vdupq_n_s32(0), vld1q_s8(k->c + 32 * j), vld1q_s8(a + 32 * j)),
                         vld1q_s8(k->c + 32 * j + 16), vld1q_s8(a + 32 * j + 16));
    }
    int32x4_t is = vdupq_n_s32(0), ms = vdupq_n_s32(0);
    for (int q = 0; q < nsub / 4; q++) {
        is = vmlaq_s32(is, lane_sums(d + 4 * q), vld1q_s32(k->s + 4 * q));
        if (k->has_min)
            ms = vmlaq_s32(ms, vld1q_s32(asum + 4 * q), vld1q_s32(k->m + 4 * q));
    }
    *msum = vaddvq_s32(ms);
    return vaddvq_s32(is);
}

/* acc[t - t0] += block b's contribution (kq.h's rule for its type) for tokens [t0, t1) */
static void block_tokens(const ge_block_codes *k, int64_t b, const ge_q8_act *act, int64_t t0,
                         int64_t t1, float *acc)
{
    const int64_t cols = act->cols, nb32 = cols / 32, first = b * k->n / 32;
    for (int64_t t = t0; t < t1; t++) {
        const int8_t *a = act->qs + t * cols + b * k->n;
        const float da = act->d[t * nb32 + first];
        float *y = acc + (t - t0);
        if (k->n == 32) {
            const int32x4_t s = DOT16(DOT16(vdupq_n_s32(0), vld1q_s8(k->c), vld1q_s8(a)),
                                      vld1q_s8(k->c + 16), vld1q_s8(a + 16));
            const int32_t isum = vaddvq_s32(s);
            if (k->has_min)
                *y = *y + ((float)isum * (k->d * da) +
                           (float)act->sum[t * nb32 + first] * (k->dmin * da));
            else
                *y = *y + (float)isum * (k->d * da);
            continue;
        }
        /* the mins' activation sums: of 32 values (act->sum) or 16 (act->sum16) */
        const int32_t *asum = k->sub == 32 ? act->sum + t * nb32 + first
                                           : act->sum16 ? act->sum16 + t * (cols / 16) + 2 * first
                                                        : NULL;
        int32_t msum = 0;
        const int32_t isum = kblock_sums(k, a, asum, &msum);
        if (k->has_min)
            *y = *y + ((float)isum * (k->d * da) - (float)msum * (k->dmin * da));
        else
            *y = *y + (float)isum * (k->d * da);
    }
}

void KQ_ARM_GEMM(uint32_t type, const void *w, int64_t rows, int64_t cols, const ge_q8_act *act,
                 int64_t t0, int64_t t1, int64_t r0, int64_t r1, float *y, int64_t ldy)
{
    const ge_dtype_info *ti = ge_dtype(type);
    const int64_t nb = cols / ti->block, per = PIECE_VALUES / ti->block;
    const size_t row_bytes = (size_t)nb * ti->bytes;
    ge_block_codes k[PIECE_VALUES / 32];
    float acc[TOKENS];
    for (int64_t tc = t0; tc < t1; tc += TOKENS) {
        const int64_t tn = t1 - tc < TOKENS ? t1 - tc : TOKENS;
        for (int64_t o = r0; o < r1; o++) {
            const uint8_t *row = (const uint8_t *)w + (size_t)o * row_bytes;
            for (int64_t t = 0; t < tn; t++)
                acc[t] = 0.0f;
            for (int64_t b0 = 0; b0 < nb; b0 += per) {
                const int64_t b1 = nb - b0 < per ? nb : b0 + per;
                for (int64_t b = b0; b < b1; b++)
                    ge_block_decode(type, row + (size_t)b * ti->bytes, &k[b - b0]);
                /* token by token over the piece: its codes stay in L1 */
                for (int64_t t = tc; t < tc + tn; t++)
                    for (int64_t b = b0; b < b1; b++)
                        block_tokens(&k[b - b0], b, act, t, t + 1, acc + (t - tc));
            }
            for (int64_t t = 0; t < tn; t++)
                y[(tc + t) * ldy + o] = acc[t];
        }
    }
}
